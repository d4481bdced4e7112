"""`ssmts demo`: spoken-word classification from raw audio, and zero-shot resampling.

Runs offline on the spoken-commands copy shipped with the repository (600 espeak-ng
clips of the 10 SC10 words: 160 training, 40 validation, 400 test; validation and test
voices never heard in training), in a few minutes on a 2-core CPU. It trains an
`SSMClassifier` through its public API on raw audio at a training rate below the
recordings' 16 kHz (band-limited resampling, to fit the CPU budget), then classifies the
held-out voices at that rate and, with no retraining, at half the rate: Delta rescaled
(the SSM's zero-shot resampling) with decimated x[::2] or resampled input, and without the
rescaling for comparison. Beside it, on the same clips: the same network trained with half of its
batches read at half the rate (`half_rate_share=0.5`: no longer zero-shot at that rate, the remedy
for data that arrives below the training rate), and two baselines, SSMFeatureClassifier (fixed SSM
features and a ridge) and MiniRocket with a ridge, each accuracy with its 95 % Wilson interval.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ssmts.data.speech import SPEECH_COMMANDS_RATE, change_rate, default_spoken_commands_dir
from ssmts.training import TrainerConfig
from ssmts.training.trainer import planned_epochs, steps_per_epoch

from . import zero_shot
from .accuracy import noise_gap, wilson_interval


@dataclass(frozen=True)
class DemoSettings:
    """What the demo runs: the training rate, the epochs, a cap on clips per word, the
    SSMClassifier's parameters (validated by the estimator against their one declaration),
    the models fitted beside it ("half_rate": the same network with half_rate_share=0.5;
    "features": SSMFeatureClassifier with `features` as its parameters; "minirocket": MiniRocket +
    ridge). Measured to learn within about 5 minutes on 2 CPU cores."""

    rate: int = 4000
    epochs: int = 30
    max_per_class: int | None = None
    # The network is SSMClassifier's defaults (CLASSIFIER_DEFAULTS), which were chosen from this one.
    classifier: dict = field(default_factory=dict)
    baselines: tuple[str, ...] = ("half_rate", "features", "minirocket")
    features: dict = field(default_factory=dict)


DEMO = DemoSettings()
# --quick: seconds, for smoke tests; it shows the table, not a trained model.
QUICK = DemoSettings(
    rate=1000,
    epochs=1,
    max_per_class=2,
    classifier={"d_model": 8, "d_state": 4, "n_layers": 1, "min_steps": 0},
    # MiniRocket's numba compilation alone takes longer than the whole quick run.
    baselines=("features",),
    features={"n_scales": 2, "n_kernels": 4},
)
# Per class and split when reading real Speech Commands: the shipped copy's 16 training clips per word.
REAL_DATA_MAX_PER_CLASS = 16


def run_demo(
    *,
    data_dir: str | Path | None = None,
    rate: int | None = None,
    epochs: int | None = None,
    seed: int = 0,
    quick: bool = False,
    max_per_class: int | None = None,
    device: str = "cpu",
    verbose: int = 1,
    echo: Callable[[str], None] = print,
) -> dict:
    """Train on raw audio at `rate` Hz and print the zero-shot table; returns the numbers.

    data_dir: a Speech Commands directory (default: the shipped spoken-commands copy).
    max_per_class: clips per word and split (default: all of the shipped copy, or
    REAL_DATA_MAX_PER_CLASS of real data; with quick, 2 either way; 0 = no cap).
    """
    from ssmts.data.speech import load_speech_commands
    from ssmts.estimators import ExtrapolationWarning, SSMClassifier

    from .sources import speech_commands_dir

    started = time.perf_counter()
    settings = QUICK if quick else DEMO
    rate = settings.rate if rate is None else int(rate)
    epochs = settings.epochs if epochs is None else int(epochs)
    zero_shot.half_rate(rate)  # an odd rate cannot be decimated by 2: fail before loading anything
    if not 0 < rate <= SPEECH_COMMANDS_RATE:
        raise ValueError(f"--rate must lie in (0, {SPEECH_COMMANDS_RATE}] Hz, got {rate}")
    if epochs < 1:
        raise ValueError(f"--epochs must be >= 1, got {epochs}")
    if max_per_class is None:
        # --quick keeps its 2 clips per word on real data too (a smoke run, as its help says)
        max_per_class = settings.max_per_class if data_dir is None or quick else REAL_DATA_MAX_PER_CLASS
    max_per_class = None if max_per_class == 0 else max_per_class
    if max_per_class is not None and max_per_class < 1:
        raise ValueError(f"--max-per-class must be >= 0, got {max_per_class}")
    root = default_spoken_commands_dir() if data_dir is None else speech_commands_dir(Path(data_dir).expanduser())

    data = load_speech_commands(root, words="sc10", max_per_class=max_per_class)
    classes = np.array(data.classes)
    splits = {}
    for name in ("train", "val", "test"):
        split = getattr(data, name)
        # 16 kHz -> training rate by band-limited resampling: the rate is lowered only to
        # fit the CPU budget, and an anti-aliasing filter keeps the content below rate / 2.
        X = change_rate(split.X, SPEECH_COMMANDS_RATE, rate, method="resample")
        splits[name] = (X, classes[split.y])  # (n, 1, L) float32, word names
    n = {name: len(y) for name, (_, y) in splits.items()}
    source = "the shipped spoken-commands copy (espeak-ng voices)" if data_dir is None else f"Speech Commands at {root}"
    echo(f"ssmts demo: 10 spoken words from raw audio, {source}")
    echo(
        f"  {n['train']} training / {n['val']} validation / {n['test']} test clips; validation and test voices "
        "are not in training"
    )
    echo(
        f"  training at {rate} Hz: the 16 kHz clips are resampled (band-limited) to {rate} Hz to fit a CPU "
        f"budget, so each clip is a sequence of {splits['train'][0].shape[-1]} samples"
    )

    clf = SSMClassifier(
        **settings.classifier, max_epochs=epochs, sample_rate=rate, random_state=seed, device=device, verbose=verbose
    )
    planned = planned_epochs(n["train"], TrainerConfig.from_params(clf))
    steps = planned * steps_per_epoch(n["train"], clf.batch_size)
    echo(
        f"  SSMClassifier: {clf.n_layers} layers, H={clf.d_model}, N={clf.d_state}, batch {clf.batch_size}, "
        f"{planned} epochs ({steps} steps; at least {clf.min_steps} steps)"
    )
    t0 = time.perf_counter()
    clf.fit(*splits["train"])
    train_seconds = time.perf_counter() - t0

    t0 = time.perf_counter()
    # The rate the estimator is told: the true one rescales Delta by rate / told; the training rate does not.
    # 3-D (n, 1, L) input: its length may differ from training (no 2-D "features" check).
    with warnings.catch_warnings():
        # the table is the measurement of what a lower rate costs, which the estimator's warning announces
        warnings.filterwarnings("ignore", message=".* lies below .*trained at", category=ExtrapolationWarning)
        rows = zero_shot.evaluate(
            lambda X, factor: clf.predict(X, sample_rate=rate / factor),
            {name: splits[name] for name in ("val", "test")},
            rate,
        )
    eval_seconds = time.perf_counter() - t0
    chance = 1.0 / len(classes)

    echo("")
    echo(zero_shot.format_table(rows, ["val_accuracy", "test_accuracy"], chance=chance))
    echo(f"the network: training {train_seconds:.0f} s, evaluation {eval_seconds:.0f} s")
    echo(
        "'Delta x' is the factor applied to every step size: the model trained at "
        f"{rate} Hz reads {rate // 2} Hz input with Delta doubled, nothing retrained."
    )

    # The network's two accuracies of the comparison are rows of the table above: the same predictions.
    at_rate, at_half = rows[0], next(r for r in rows if r["input"] == "resample" and r["delta_scale"] != 1)
    y_test = splits["test"][1]
    comparison = [
        _scored(
            "SSMClassifier (the network)",
            train_seconds,
            round(at_rate["test_accuracy"] * len(y_test)),
            round(at_half["test_accuracy"] * len(y_test)),
            len(y_test),
        )
    ]
    for kind in settings.baselines:
        comparison.append(
            _fit_baseline(kind, splits["train"], splits["test"], rate, seed, settings.features, network=clf)
        )
    echo("")
    echo(format_comparison(comparison, rate))
    total_seconds = time.perf_counter() - started
    echo(f"total {total_seconds:.0f} s (data, the network, the baselines)")
    return {
        "source": str(root),
        "classes": classes.tolist(),
        "n": n,
        "rate_hz": rate,
        "epochs": epochs,
        "seed": seed,
        "settings": asdict(settings),
        "rows": rows,
        "chance": chance,
        "train_seconds": train_seconds,
        "eval_seconds": eval_seconds,
        "total_seconds": total_seconds,
        "final_train_loss": clf.history_[-1]["train_loss"],
        "comparison": comparison,
    }


BASELINE_NAMES = {
    "half_rate": "SSMClassifier(half_rate_share=0.5)",
    "features": "SSMFeatureClassifier()",
    "minirocket": "MiniRocket + ridge",
}
HALF_RATE_SHARE = 0.5


def _fit_baseline(kind: str, train, test, rate: int, seed: int, feature_params: dict, network=None) -> dict:
    """Fit one model beside the demo's network on the training clips; its row of the comparison.

    All read the same 2 kHz clips as the network (band-limited resampling of the test clips): "half_rate",
    the demo's `network` (its parameters, seed and rate) fitted again with half_rate_share=HALF_RATE_SHARE
    (half of its batches read at half the rate, so that it is trained for those clips), and
    SSMFeatureClassifier with Delta rescaled (sample_rate); MiniRocket, which has no notion of a rate, with
    those clips resampled back to the training rate, the only fair way for it.
    """
    from sklearn.base import clone

    from ssmts.baselines import MiniRocketRidge
    from ssmts.estimators import SSMFeatureClassifier

    (X_train, y_train), (X_test, y_test) = train, test
    half = zero_shot.half_rate(rate)
    X_half = change_rate(X_test, rate, half, method="resample")
    t0 = time.perf_counter()
    if kind in ("half_rate", "features"):
        if kind == "half_rate":
            model = clone(network).set_params(half_rate_share=HALF_RATE_SHARE).fit(X_train, y_train)
        else:
            model = SSMFeatureClassifier(sample_rate=rate, random_state=seed, **feature_params).fit(X_train, y_train)
        fit_seconds = time.perf_counter() - t0
        predicted, predicted_half = model.predict(X_test), model.predict(X_half, sample_rate=half)
    elif kind == "minirocket":
        model = MiniRocketRidge(random_state=seed).fit(X_train.astype(np.float64), y_train)
        fit_seconds = time.perf_counter() - t0
        back = change_rate(X_half, half, rate, method="resample")
        predicted, predicted_half = model.predict(X_test.astype(np.float64)), model.predict(back.astype(np.float64))
    else:
        raise ValueError(f"unknown baseline {kind!r}; choose among {sorted(BASELINE_NAMES)}")
    correct = int(np.sum(np.asarray(predicted) == y_test))
    correct_half = int(np.sum(np.asarray(predicted_half) == y_test))
    name = BASELINE_NAMES[kind]
    if kind == "features" and feature_params:  # not the defaults: say which
        name = "SSMFeatureClassifier(" + ", ".join(f"{k}={v!r}" for k, v in feature_params.items()) + ")"
    return _scored(name, fit_seconds, correct, correct_half, len(y_test))


def _scored(model: str, fit_seconds: float, correct: int, correct_half: int, n: int) -> dict:
    """A comparison row: accuracies at the training rate and at half of it, with 95 % Wilson intervals."""
    return {
        "model": model,
        "n_test": n,
        "accuracy": correct / n,
        "interval": wilson_interval(correct, n),
        "half_rate_accuracy": correct_half / n,
        "half_rate_interval": wilson_interval(correct_half, n),
        "fit_seconds": fit_seconds,
    }


def format_comparison(comparison: list[dict], rate: int) -> str:
    """The network beside the baselines: accuracy (95 % interval) at `rate` and at half of it, and fit time."""
    half = zero_shot.half_rate(rate)
    cells = [f"at {rate} Hz (95 % interval)", f"at {half} Hz (95 % interval)"]
    width = max(len(row["model"]) for row in comparison)
    header = f"{'model':<{width}} {cells[0]:>28} {cells[1]:>28} {'fit (s)':>8}"
    lines = [header, "-" * len(header)]
    for row in comparison:
        accuracies = [
            f"{row[a]:.1%} ({row[i][0]:.1%}-{row[i][1]:.1%})"
            for a, i in (("accuracy", "interval"), ("half_rate_accuracy", "half_rate_interval"))
        ]
        lines.append(f"{row['model']:<{width}} {accuracies[0]:>28} {accuracies[1]:>28} {row['fit_seconds']:>8.0f}")
    n = comparison[0]["n_test"]
    named = {row["model"] for row in comparison}
    lines += [
        f"{n} test clips; at {half} Hz every model reads the same resampled clips: the SSMs with Delta rescaled"
        + (f", MiniRocket after resampling them back to {rate} Hz." if BASELINE_NAMES["minirocket"] in named else "."),
        *(
            [
                f"{BASELINE_NAMES['half_rate']} read half of its training batches at {half} Hz, and "
                f"SSMFeatureClassifier's ridge the training clips at {half} Hz too: at {half} Hz neither is "
                "zero-shot; the first network never saw that rate."
            ]
            if BASELINE_NAMES["half_rate"] in named
            else []
        ),
        f"On {n} clips an accuracy is known to within ±{100 * _widest_half_interval(n):.1f} points (95 % Wilson "
        f"interval at 50 %); two accuracies less than {100 * noise_gap(n):.1f} points apart are within noise "
        "(two-sided z test at 95 %, worst case).",
    ]
    return "\n".join(lines)


def _widest_half_interval(n: int) -> float:
    low, high = wilson_interval(n // 2, n) if n % 2 == 0 else wilson_interval((n - 1) // 2, n)
    return (high - low) / 2


__all__ = ["DEMO", "QUICK", "DemoSettings", "format_comparison", "run_demo"]
