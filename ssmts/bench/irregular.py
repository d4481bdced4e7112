"""Irregular time stamps: `python -m ssmts.bench irregular [options]`.

A sum of three sinusoids (periods 7.3, 17 and 41 time units, plus noise of std 0.05) observed
at random times: the gaps between observations are exponential with mean 1 (a Poisson
sampling, floored at 0.05), so the median gap is about 0.69. Task: from the last `context`
observations, forecast the next `horizon` observations at their (known) future time stamps.

Three models with the same network (SSMBackbone, causal, per-step outputs), the same training
(Adam, `steps` batches of 32 random windows from the first 70% of the series) and the same
inputs (the value, and a flag that is 1 on observed steps and 0 on the steps to forecast):

- per-step Delta: the observations as they are, with dt_k = gap_k / median gap (SSM(u, dt=...));
- resample: the context linearly interpolated onto a regular grid of step = the median gap,
  the grid continued over the horizon; the forecasts at the target times are the linear
  interpolation of the network's grid outputs (the loss is taken there too);
- ignore time: the observations as if they were regular (no dt), a reference showing what
  the time stamps are worth.

Reported: RMSE over every window of the last 30% of the series, per seed (series and network
both drawn from the seed), and the mean.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch

from ssmts.nn import SSMBackbone

MODELS = ("per_step_delta", "resample", "ignore_time")
PERIODS, AMPLITUDES, NOISE = (7.3, 17.0, 41.0), (1.0, 0.7, 0.5), 0.05


def make_series(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(times (n,), values (n,)) of the sum of sinusoids at Poisson sampling times."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(np.maximum(rng.exponential(1.0, n), 0.05))
    phases = rng.uniform(0, 2 * np.pi, len(PERIODS))
    y = sum(a * np.sin(2 * np.pi * t / p + f) for a, p, f in zip(AMPLITUDES, PERIODS, phases))
    return t, y + NOISE * rng.standard_normal(n)


def windows(t, y, starts, context: int, horizon: int, spacing: float, grid_future: int):
    """Inputs of the three models for the windows starting at `starts`.

    Returns irregular inputs (b, 2, context + horizon) with their deltas (b, context + horizon), grid
    inputs (b, 2, context + grid_future), grid positions of the targets (b, horizon) and targets (b, horizon).
    """
    L = context + horizon
    idx = starts[:, None] + np.arange(L)
    ti, yi = t[idx], y[idx]
    gaps = np.diff(t[np.concatenate([idx[:, :1] - 1, idx], axis=1)], axis=1) / spacing
    flag = np.zeros((len(starts), L))
    flag[:, :context] = 1.0
    irregular = np.stack([yi * flag, flag], axis=1)
    # Regular grid ending at the last context time; the context is linearly interpolated onto it.
    t_last = ti[:, context - 1]
    grid = t_last[:, None] + spacing * np.arange(-context + 1, grid_future + 1)
    values = np.stack([np.interp(g[:context], tt[:context], yy[:context]) for g, tt, yy in zip(grid, ti, yi)])
    gflag = np.zeros_like(grid)
    gflag[:, :context] = 1.0
    grid_in = np.stack([np.pad(values, ((0, 0), (0, grid_future))), gflag], axis=1)
    positions = (ti[:, context:] - grid[:, :1]) / spacing
    as_t = lambda a: torch.as_tensor(a, dtype=torch.float32)  # noqa: E731
    return as_t(irregular), as_t(gaps), as_t(grid_in), as_t(positions), as_t(yi[:, context:])


def predict(model: SSMBackbone, kind: str, batch, context: int) -> torch.Tensor:
    """Forecasts (b, horizon) of one model."""
    irregular, gaps, grid_in, positions, _ = batch
    if kind == "resample":
        out = model(grid_in)[:, 0]  # (b, grid length)
        lo = positions.floor().long().clamp(max=out.shape[1] - 2)
        w = positions - lo
        return (1 - w) * out.gather(1, lo) + w * out.gather(1, lo + 1)
    out = model(irregular, dt=gaps if kind == "per_step_delta" else None)[:, 0]
    return out[:, context:]


def run(kind: str, seed: int, *, n: int, context: int, horizon: int, steps: int, d_model: int) -> float:
    """Test RMSE of one model trained on one seed's series."""
    t, y = make_series(seed, n)
    spacing = float(np.median(np.diff(t)))
    split = int(0.7 * n)
    L = context + horizon
    # The grid continues over the horizon far enough for the farthest target of any window.
    span = t[context + horizon - 1 :] - t[context - 1 : n - horizon]
    grid_future = int(math.ceil(span.max() / spacing)) + 1
    train_starts = np.arange(1, split - L)
    test_starts = np.arange(split, n - L, horizon)
    torch.manual_seed(seed)
    model = SSMBackbone(2, d_model, n_layers=2, d_output=1, pooling="none", d_state=16, dt_min=0.01, dt_max=0.5)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    rng = np.random.default_rng(seed + 1000)
    for _ in range(steps):
        batch = windows(t, y, rng.choice(train_starts, 32), context, horizon, spacing, grid_future)
        loss = torch.mean((predict(model, kind, batch, context) - batch[-1]) ** 2)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        batch = windows(t, y, test_starts, context, horizon, spacing, grid_future)
        return float(torch.sqrt(torch.mean((predict(model, kind, batch, context) - batch[-1]) ** 2)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ssmts.bench irregular", description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--n", type=int, default=3000, help="observations per series")
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--horizon", type=int, default=16)
    p.add_argument("--steps", type=int, default=300, help="training batches per model")
    p.add_argument("--d-model", type=int, default=16)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--quick", action="store_true", help="smoke test: 1 seed, 5 steps, n=400")
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.steps, args.n = 1, 5, 400
    models = args.models.split(",")
    for m in models:
        if m not in MODELS:
            p.error(f"unknown model {m!r}; choose from {MODELS}")
    torch.set_num_threads(1)
    print(f"{'model':<16}" + "".join(f"  seed {s:<3}" for s in range(args.seeds)) + "     mean   time")
    for kind in models:
        start = time.perf_counter()
        errors = [
            run(kind, s, n=args.n, context=args.context, horizon=args.horizon, steps=args.steps, d_model=args.d_model)
            for s in range(args.seeds)
        ]
        row = "".join(f"  {e:8.4f}" for e in errors)
        print(f"{kind:<16}{row}  {np.mean(errors):7.4f}  {time.perf_counter() - start:5.1f}s", flush=True)
    print(
        f"RMSE of the next {args.horizon} observations from the last {args.context} (noise std {NOISE}; "
        f"series std ~{math.sqrt(sum(a * a / 2 for a in AMPLITUDES)):.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
