"""State-tracking evidence: which layers keep track of a state beyond the training length.

    results = run_state_tracking(preset="small", out="runs/state-tracking/results.json")
    ssmts tasks run state-tracking --synthetic --preset small

Protocol. For every problem of ssmts.data.state_tracking_synth (parity, mod5, cycle navigation,
the A5 word problem), every model row and every seed: train a per-step classifier (the state
after each token; ssmts.nn.PerStepHead on a token backbone) on sequences of `train_length`
tokens (so every prefix length <= train_length is supervised) through the one fit path,
ssmts.training.fit_model; then read test sequences of the longest test length once and report
the accuracy at the steps of each length bin, (0, train_length] in distribution and e.g.
(40, 80], (80, 160], (160, 320] beyond it. The model is causal, so its output at step t is
its answer for the prefix of length t: the accuracy over the steps of a bin is the accuracy
on sequences whose length is uniform in that bin.

Rows: "ssm" (the diagonal time-invariant SSM of ssmts, layer="ssm"), and LinearCDE backbones
(layer="lncde") with diagonal, block-diagonal, diagonal-plus-low-rank, Walsh-Hadamard and
dense transitions. Chance level is 1 / number of states.

Writes `out` (results JSON: settings, every run, mean / std / min / max over seeds) and prints
one table per problem.
"""

from __future__ import annotations

import json
import math
import platform
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from ssmts.data.state_tracking_synth import PROBLEM_INFO, PROBLEMS, generate_state_tracking
from ssmts.nn import PerStepHead
from ssmts.training import BackboneParams, SequenceData, TrainerConfig, fit_model, predict_batches, resolve_device
from ssmts.training.objectives import accuracy_of_step_logits, weighted_cross_entropy

from .._version import __version__
from .data_utils import json_safe
from .paths import check_output_files
from .presets import STATE_TRACKING_PRESETS, ParameterGroups, validated_backbone

MODELS = ("ssm", "diagonal", "block_diagonal", "dplr", "walsh_hadamard", "dense")
MODEL_LABELS = {
    "ssm": "SSM (LTI, diagonal)",
    "diagonal": "LNCDE diagonal",
    "block_diagonal": "LNCDE block-diagonal",
    "dplr": "LNCDE DPLR",
    "walsh_hadamard": "LNCDE Walsh-Hadamard",
    "dense": "LNCDE dense",
}


# Every row: pre-norm layer normalization without dropout; the LinearCDE rows with a unit time step
# (tokens carry no time scale), their transition's norm capped at 1, blocks of 4 and rank 2 where
# the structure has them. AdamW, cosine schedule, gradients clipped at 1.
STATE_TRACKING_BACKBONE = dict(
    norm="layer", prenorm=True, dropout=0.0, lncde_dt=1.0, lncde_max_norm=1.0, lncde_block_size=4, lncde_rank=2
)
STATE_TRACKING_TRAINING = dict(
    optimizer="adamw", lr=3e-3, lr_ssm=3e-3, weight_decay=0.0, scheduler="cosine", grad_clip=1.0
)
# The LinearCDE options that only some structures take.
_STRUCTURE_OPTIONS = {"block_diagonal": ("lncde_block_size",), "dplr": ("lncde_rank",)}


@dataclass(frozen=True, kw_only=True)
class StateTrackingPreset(ParameterGroups):
    """Sizes of one state-tracking run.

    problems, models, seeds: what is trained (every combination). backbone: the architecture's
    declared parameters (STATE_TRACKING_BACKBONE and changes: d_model, d_state (N of the SSM row,
    hidden size of the LNCDE rows), n_layers, the lncde_* options of the LinearCDE rows);
    training: TrainerConfig's (STATE_TRACKING_TRAINING and changes: batch_size, lr, lr_ssm,
    warmup_steps ...). steps: optimizer steps per run, over a fixed training set of n_train
    sequences of train_length tokens; n_test test sequences of the longest bin's length; bins:
    (low, high] step ranges.
    """

    problems: tuple[str, ...]
    models: tuple[str, ...]
    seeds: tuple[int, ...]
    steps: int
    n_train: int
    n_test: int
    train_length: int = 40
    bins: tuple[tuple[int, int], ...] = ((40, 80), (80, 160), (160, 320))
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self):
        unknown = [p for p in self.problems if p not in PROBLEMS]
        if unknown:
            raise ValueError(f"unknown state-tracking problem(s) {unknown}; choose from {PROBLEMS}")
        unknown = [m for m in self.models if m not in MODELS]
        if unknown:
            raise ValueError(f"unknown state-tracking model(s) {unknown}; choose from {MODELS}")
        super().__post_init__()
        for model in self.models:  # every row's parameters are checked against their declarations
            self.backbone_params(model).backbone_kwargs()

    @property
    def test_length(self) -> int:
        return max(high for _, high in self.bins)

    @property
    def epochs(self) -> int:
        """Epochs over the training set that give (at least) `steps` optimizer steps."""
        return max(1, math.ceil(self.steps / math.ceil(self.n_train / self.batch_size)))

    def backbone_params(self, model: str = "ssm", **overrides) -> BackboneParams:
        """The row's backbone as the estimators declare it (validated): the SSM row without the
        LinearCDE options, an LNCDE row with those its structure takes."""
        values = {**self.backbone, **overrides}
        lncde = {k for k in values if k.startswith("lncde_")}
        if model == "ssm":
            keep = {k: v for k, v in values.items() if k not in lncde}
        else:
            taken = {"lncde_dt", "lncde_max_norm", *_STRUCTURE_OPTIONS.get(model, ())}
            keep = {k: v for k, v in values.items() if k not in lncde - taken}
            keep.update(layer="lncde", lncde_structure=model)
        return validated_backbone(keep)

    def trainer_config(self, seed: int = 0, device="cpu", **overrides) -> TrainerConfig:
        """The Trainer settings of one run (validated)."""
        return super().trainer_config(max_epochs=self.epochs, device=device, random_state=seed, **overrides)

    def describe(self) -> str:
        return (
            f"preset {self.name}: problems {', '.join(self.problems)}; rows {', '.join(self.models)}; "
            f"seeds {list(self.seeds)}; depth {self.n_layers}, H {self.d_model}, N/d {self.d_state}, "
            f"block {self.lncde_block_size}, rank {self.lncde_rank}, lncde_dt {self.lncde_dt}, lncde_max_norm "
            f"{self.lncde_max_norm}; {self.steps} steps "
            f"of batch {self.batch_size} on {self.n_train} sequences of length {self.train_length}, lr "
            f"{self.lr}; test bins {', '.join(f'({a}, {b}]' for a, b in self.bins)} on {self.n_test} sequences"
        )


def _state_tracking_preset(name: str, backbone: dict, training: dict, **fields) -> StateTrackingPreset:
    """A state-tracking preset on STATE_TRACKING_BACKBONE and STATE_TRACKING_TRAINING."""
    return StateTrackingPreset(
        name=name,
        backbone={**STATE_TRACKING_BACKBONE, **backbone},
        training={**STATE_TRACKING_TRAINING, **training},
        **fields,
    )


def get_state_tracking_preset(name: str) -> StateTrackingPreset:
    """ "small": minutes on one CPU thread; "tiny": a smoke test of seconds."""
    if name == "small":
        return _state_tracking_preset(
            "small",
            backbone=dict(d_model=32, d_state=16, n_layers=2),
            training=dict(batch_size=32, lr=1e-2, lr_ssm=1e-2, warmup_steps=20),
            problems=("parity", "mod5", "a5"),
            models=MODELS,
            seeds=(0, 1, 2),
            steps=300,
            n_train=2048,
            n_test=256,
            notes=(
                "small CPU preset: far smaller models and far fewer steps than the SLiCE paper's experiments",
                "cycle navigation is left out to stay within about 15 minutes on one CPU thread (it is a Z5 "
                "problem like mod5); run_state_tracking(problems=('cycle',)) runs it",
            ),
        )
    if name == "tiny":
        return _state_tracking_preset(
            "tiny",
            backbone=dict(d_model=8, d_state=8, n_layers=1),
            training=dict(batch_size=8),
            problems=("parity", "a5"),
            models=("ssm", "diagonal", "block_diagonal"),
            seeds=(0, 1),
            steps=2,
            n_train=16,
            n_test=8,
            bins=((8, 16), (16, 32)),
            train_length=8,
            notes=("smoke-test preset",),
        )
    if name == "paper":
        raise ValueError(
            "state-tracking has no 'paper' preset: the SLiCE text shipped with ssmts does not state the "
            "paper's hyperparameters; use --preset small (or tiny)"
        )
    raise ValueError(f"unknown state-tracking preset {name!r}; choose one of {STATE_TRACKING_PRESETS}")


def _splits(preset: StateTrackingPreset, problem: str, seed: int) -> tuple[SequenceData, SequenceData]:
    """Training set of the seed; test set fixed per problem (the same for every row and seed)."""
    index = PROBLEMS.index(problem)
    x, y = generate_state_tracking(
        problem, preset.n_train, preset.train_length, np.random.default_rng([index, seed, 0])
    )
    train = SequenceData(torch.from_numpy(x), torch.from_numpy(y))
    x, y = generate_state_tracking(problem, preset.n_test, preset.test_length, np.random.default_rng([index, 10**6, 1]))
    return train, SequenceData(torch.from_numpy(x), torch.from_numpy(y))


def _bin_names(preset: StateTrackingPreset) -> list[str]:
    return [f"{low + 1}-{high}" for low, high in ((0, preset.train_length), *preset.bins)]


def train_and_evaluate(
    preset: StateTrackingPreset,
    problem: str,
    model_name: str,
    seed: int,
    device: str | torch.device = "cpu",
    curve: bool = False,
) -> dict:
    """One run: train the row on the problem through fit_model, accuracy per length bin.

    curve: also return "accuracy_by_step", the test accuracy at every step 1..test_length
    (the accuracy on sequences of that length), and the trained "network"."""
    info = PROBLEM_INFO[problem]
    train, test = _splits(preset, problem, seed)
    params = preset.backbone_params(model_name)

    def network():
        return PerStepHead(params.build_backbone(1, vocab_size=info.vocab_size), info.n_states)

    started = time.perf_counter()
    result = fit_model(
        network,
        train,
        weighted_cross_entropy(None),
        preset.trainer_config(seed, device),
        seed=seed,
        epochs=preset.epochs,
        description=f"{problem} {model_name} seed {seed}",
    )
    train_seconds = time.perf_counter() - started
    logits = predict_batches(result.model, test, max(preset.batch_size, 64), device)
    correct = (logits.argmax(1) == test.y).float().mean(0).numpy()  # (L,): accuracy at each step
    accuracy = {}
    for name, (low, high) in zip(_bin_names(preset), ((0, preset.train_length), *preset.bins)):
        accuracy[name] = float(correct[low:high].mean())
    train_logits = predict_batches(result.model, train, max(preset.batch_size, 64), device)
    run = {
        "problem": problem,
        "model": model_name,
        "seed": seed,
        "accuracy": accuracy,
        "train_accuracy": accuracy_of_step_logits(train_logits, train.y),
        "final_train_loss": result.history[-1]["train_loss"],
        "epochs": len(result.history),
        "n_parameters": sum(p.numel() for p in result.model.parameters()),
        "train_seconds": train_seconds,
    }
    if curve:
        run.update(accuracy_by_step=correct.tolist(), network=result.model)
    return run


def summarize(runs: list[dict]) -> list[dict]:
    """Mean, std (population), min and max over seeds for every problem, model and bin."""
    rows = []
    keys = list(dict.fromkeys((r["problem"], r["model"]) for r in runs))
    for problem, model in keys:
        group = [r for r in runs if r["problem"] == problem and r["model"] == model]
        for bin_name in group[0]["accuracy"]:
            values = np.array([r["accuracy"][bin_name] for r in group])
            rows.append(
                {
                    "problem": problem,
                    "model": model,
                    "bin": bin_name,
                    "n_seeds": len(values),
                    "mean": float(values.mean()),
                    "std": float(values.std()),
                    "min": float(values.min()),
                    "max": float(values.max()),
                }
            )
    return rows


def format_tables(summary: list[dict]) -> str:
    """One Markdown table per problem: rows = models, columns = length bins, 'mean ± std' in %."""
    out = []
    for problem in dict.fromkeys(r["problem"] for r in summary):
        rows = [r for r in summary if r["problem"] == problem]
        bins = list(dict.fromkeys(r["bin"] for r in rows))
        info = PROBLEM_INFO[problem]
        out.append(
            f"{problem}: {info.description}; chance {1 / info.n_states:.1%}; "
            f"{rows[0]['n_seeds']} seeds, accuracy mean ± std (%) by sequence length"
        )
        out.append("")
        out.append("| model | " + " | ".join(f"L {b}" for b in bins) + " |")
        out.append("|---|" + "---:|" * len(bins))
        for model in dict.fromkeys(r["model"] for r in rows):
            cells = []
            for b in bins:
                r = next(x for x in rows if x["model"] == model and x["bin"] == b)
                cells.append(f"{100 * r['mean']:.1f} ± {100 * r['std']:.1f}")
            out.append(f"| {MODEL_LABELS[model]} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def run_state_tracking(
    *,
    preset: str | StateTrackingPreset = "small",
    out: str | Path | None = None,
    device: str = "cpu",
    seed: int = 0,
    problems: tuple[str, ...] | None = None,
    models: tuple[str, ...] | None = None,
    echo: Callable[[str], None] = print,
) -> dict:
    """Train and evaluate every (problem, model, seed) of the preset; write the results JSON to `out`.

    seed: offset of the preset's seeds. problems / models: restrict the preset to these.
    """
    started = time.perf_counter()
    config = preset if isinstance(preset, StateTrackingPreset) else get_state_tracking_preset(preset)
    if problems is not None or models is not None:
        config = replace(config, problems=tuple(problems or config.problems), models=tuple(models or config.models))
    seeds = tuple(int(seed) + s for s in config.seeds)
    torch_device = resolve_device(device)
    out = Path(out) if out is not None else Path("ssmts-runs") / f"state-tracking-{config.name}" / "results.json"
    if out.suffix != ".json":
        raise ValueError(f"--out must name a .json file, got {out}")
    check_output_files([out])  # before the trainings: they must not fail at their first write
    echo(f"[state-tracking] {config.describe()}; device {torch_device}")
    runs = []
    for problem in config.problems:
        for model in config.models:
            for s in seeds:
                run = train_and_evaluate(config, problem, model, s, torch_device)
                runs.append(run)
                echo(
                    f"[state-tracking] {problem:6s} {model:14s} seed {s}: "
                    + ", ".join(f"{k} {100 * v:.1f}%" for k, v in run["accuracy"].items())
                    + f" (train acc {100 * run['train_accuracy']:.1f}%, {run['train_seconds']:.1f} s)"
                )
    summary = summarize(runs)
    results = {
        "task": "state-tracking",
        "preset": config.name,
        "settings": json_safe(asdict(config)),
        "seeds": list(seeds),
        "bins": _bin_names(config),
        "chance": {p: 1 / PROBLEM_INFO[p].n_states for p in config.problems},
        "runs": runs,
        "summary": summary,
        "device": str(torch_device),
        "threads": torch.get_num_threads(),
        "total_seconds": time.perf_counter() - started,
        "versions": {"ssmts": __version__, "torch": torch.__version__, "python": platform.python_version()},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(json_safe(results), indent=2) + "\n")
    echo(format_tables(summary))
    echo(f"[state-tracking] {len(runs)} runs in {results['total_seconds']:.0f} s; results: {out}")
    return results


__all__ = [
    "MODELS",
    "MODEL_LABELS",
    "StateTrackingPreset",
    "get_state_tracking_preset",
    "train_and_evaluate",
    "summarize",
    "format_tables",
    "run_state_tracking",
    "STATE_TRACKING_PRESETS",
]
