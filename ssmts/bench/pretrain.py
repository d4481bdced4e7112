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
the same weights on every run). --steps bounds the optimizer steps: the run takes as many whole
epochs as fit within it, at least one (the defaults: 10 epochs of 5596 batches, 55960 steps); the
metadata records the bound ("steps") and the steps taken ("optimizer_steps"). --kernel-share and
--ets-share set the corpus' mix of generators (the defaults: half KernelSynth, half components).

The shipped file is an ensemble of three such runs, with the defaults and --seed 0, 1 and 2, joined
by `--stack seed0.safetensors seed1.safetensors seed2.safetensors` (each member from its own corpus
draw and initial weights; the forecast averages their quantile grids). The runs can go in parallel,
one thread each. Its metadata keeps each member's training record; the first member's was written
by ssmts 0.1.0 before the record had "optimizer_steps" (tests/test_bench_pretrain.py checks the
fields and commands against a run with the defaults).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

DEFAULTS = dict(series=6000, steps=60000, context=48, horizon=24, seed=0, kernel_share=0.5, ets_share=0.0)
NETWORK = dict(d_model=64, d_state=32, n_layers=3, batch_size=64, lr=2e-3)


def corpus_panel(
    n_series: int, seed: int, kernel_share: float = 0.5, ets_share: float = 0.0
) -> tuple[pd.DataFrame, list[str]]:
    """The training corpus as a panel (series, step) -> y, and the names of the packaged series in it."""
    from ..data.forecast_corpus import package_series, synthetic_corpus

    series = list(synthetic_corpus(n_series, random_state=seed, kernel_share=kernel_share, ets_share=ets_share))
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

    options = [f"--{k} {getattr(args, k)}" for k in ("series", "steps", "context", "horizon", "seed")]
    # the corpus mix, where it is not the default's (whose runs' recorded commands never named it)
    options += [
        f"--{k.replace('_', '-')} {getattr(args, k)}"
        for k in ("kernel_share", "ets_share")
        if getattr(args, k) != DEFAULTS[k]
    ]
    return dict(
        command="python -m ssmts.bench pretrain " + " ".join(options),
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
    p.add_argument("--kernel-share", type=float, default=DEFAULTS["kernel_share"], help="share of KernelSynth draws")
    p.add_argument(
        "--ets-share", type=float, default=DEFAULTS["ets_share"], help="share of exponential smoothing draws"
    )
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--out", type=Path, default=None, help="weights file (default: the one shipped with ssmts)")
    p.add_argument(
        "--stack",
        type=Path,
        nargs="+",
        default=None,
        metavar="FILE",
        help="instead of training: write to --out one pretrained ensemble of these files' networks (runs with "
        "other seeds), whose quantile grid is their average",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)

    import torch

    from ..sktime import SSMForecaster
    from ..sktime._pretrained import default_weights, stack_pretrained, write_pretrained

    if args.threads:
        torch.set_num_threads(args.threads)
    out = args.out or default_weights()
    if args.stack:
        command = "python -m ssmts.bench pretrain --stack " + " ".join(p.name for p in args.stack)
        stack_pretrained(args.stack, out, dict(command=command))
        print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB): {len(args.stack)} files stacked")
        return 0
    start = time.perf_counter()
    panel, packaged = corpus_panel(args.series, args.seed, args.kernel_share, args.ets_share)
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
