"""`python -m ssmts.bench pretrain`: train the pretrained forecaster shipped with ssmts.

One global SSMForecaster (direct strategy, per-window "last" normalization) is trained on a corpus
of synthetic series (ssmts.data.forecast_corpus: Gaussian-process draws with composed kernels, as in
Chronos' KernelSynth, and series built from trend, seasonality, level shifts and ARMA noise) and the
real series that ship inside sktime and statsmodels, except the sets on which the forecaster's
settings are developed (airline, lynx, shampoo, uschange, fertility, macrodata) and M1's yearly
series (a real panel left out to check the weights on). Its network is then
written with its metadata to a .safetensors file (ssmts.sktime._pretrained), which
`SSMForecaster(pretrained=True)` reads.

The run is reproducible: the corpus and the training are fixed by --seed (on CPU, one thread gives
the same weights on every run). The defaults are the settings the shipped file was trained with (the
command its metadata records). The metadata a run writes now differs from the shipped file's in two
fields, as that file was written by ssmts 0.1.0: its parameters name `normalize` by its former name
`instance_norm` (read as `normalize`), and its training record has no "optimizer_steps"; besides,
the run's "seconds" and the "version" are the run's own (tests/test_bench_pretrain.py checks that
these are the only differences of fields). --steps bounds the optimizer steps: the run takes as many
whole epochs as fit within it, at least one (the defaults: 10 epochs of 5596 batches, 55960 steps);
the metadata records the bound ("steps") and the steps taken ("optimizer_steps").
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

DEFAULTS = dict(series=6000, steps=60000, context=48, horizon=24, seed=0)
NETWORK = dict(d_model=64, d_state=32, n_layers=3, batch_size=64, lr=2e-3)


def corpus_panel(n_series: int, seed: int) -> tuple[pd.DataFrame, list[str]]:
    """The training corpus as a panel (series, step) -> y, and the names of the packaged series in it."""
    from ..data.forecast_corpus import package_series, synthetic_corpus

    series = list(synthetic_corpus(n_series, random_state=seed))
    # M1's yearly series stay out: a real panel no setting was chosen on, to check the weights on
    packaged = {name: v for name, v in package_series().items() if not name.startswith("m1_yearly:")}
    series += list(packaged.values())
    frames = [
        pd.DataFrame(
            {"y": np.asarray(values, dtype=np.float64)}, index=pd.MultiIndex.from_product([[k], range(len(values))])
        )
        for k, values in enumerate(series)
    ]
    panel = pd.concat(frames)
    panel.index.names = ["series", "step"]
    return panel, sorted(packaged)


def _optimizer_steps(forecaster) -> int:
    """The optimizer steps the fit took (AdamW counts them per parameter)."""
    state = forecaster.training_state_["optimizer"]["state"]
    return int(max(float(s["step"]) for s in state.values()))


def training_record(args: argparse.Namespace, forecaster, packaged: list[str], seconds: float) -> dict:
    """The metadata's "training" field: the command, the corpus and what the run did."""
    import torch

    return dict(
        command="python -m ssmts.bench pretrain "
        + " ".join(f"--{k} {getattr(args, k)}" for k in ("series", "steps", "context", "horizon", "seed")),
        synthetic_series=args.series,
        packaged_series=packaged,
        steps=args.steps,
        optimizer_steps=_optimizer_steps(forecaster),
        epochs=int(forecaster.n_iter_),
        final_loss=float(forecaster.history_[-1]["train_loss"]),
        seconds=round(seconds, 1),
        threads=torch.get_num_threads(),
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ssmts.bench pretrain", description=__doc__.splitlines()[0])
    p.add_argument("--series", type=int, default=DEFAULTS["series"], help="synthetic series in the corpus")
    p.add_argument(
        "--steps", type=int, default=DEFAULTS["steps"], help="most optimizer steps (whole epochs, at least one)"
    )
    p.add_argument("--context", type=int, default=DEFAULTS["context"], help="context length of the network")
    p.add_argument("--horizon", type=int, default=DEFAULTS["horizon"], help="longest horizon it forecasts")
    p.add_argument("--seed", type=int, default=DEFAULTS["seed"], help="seed of the corpus and of the training")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--out", type=Path, default=None, help="weights file (default: the one shipped with ssmts)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)

    import torch

    from ..sktime import SSMForecaster
    from ..sktime._pretrained import default_weights, write_pretrained

    if args.threads:
        torch.set_num_threads(args.threads)
    out = args.out or default_weights()
    start = time.perf_counter()
    panel, packaged = corpus_panel(args.series, args.seed)
    n = panel.index.get_level_values(0).nunique()
    print(f"corpus: {n} series ({len(packaged)} packaged), {len(panel)} points, {time.perf_counter() - start:.1f} s")
    forecaster = SSMForecaster(
        context_length=args.context,
        max_epochs=10_000,  # the run is bounded by max_steps
        max_steps=args.steps,
        min_steps=args.steps,
        random_state=args.seed,
        verbose=True,
        # the weights are what is kept: a widening would not travel with them, and holding out
        # windows to calibrate would take them from the corpus
        calibration="none",
        **NETWORK,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # sktime's deprecation chatter
        forecaster.fit(panel, fh=list(range(1, args.horizon + 1)))
    seconds = time.perf_counter() - start
    training = training_record(args, forecaster, packaged, seconds)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_pretrained(forecaster, out, training)
    print(json.dumps(training, indent=1))
    print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB) in {seconds:.0f} s")
    return 0
