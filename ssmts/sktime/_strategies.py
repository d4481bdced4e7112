"""The forecaster's two strategies as objects, and the quantile arithmetic they share.

    DIRECT      the last context step's features (+ the future X, flattened) go through a
                linear head that emits every step up to the horizon at once.
    RECURSIVE   a one-step-ahead model; the context is read with the FFT and the forecast
                is rolled with the layer's step mode, feeding back the median (point
                forecast) or draws from the predicted quantile grid (sample paths).

A strategy knows its head (ssmts.nn.heads), the layout of a training window's input, and
how to turn normalized contexts into quantile forecasts. The forecaster does the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import norm

from ..nn import DirectForecastHead, RecursiveForecastHead, SSMBackbone
from ..training import SequenceData, predict_batches
from ._windows import pad_rows

FORECAST_BATCH = 512
"""Forecasts per forward pass: bounds the memory of backtests from many origins. The forecasts do
not depend on it (the layers compute every sample alone: batch-invariant)."""


def quantile_probabilities(alpha) -> np.ndarray:
    """alpha as a 1-D float array of levels strictly inside (0, 1), or a ValueError naming them."""
    alpha = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
    if np.any((alpha <= 0) | (alpha >= 1)):
        raise ValueError(f"quantile probabilities must lie strictly between 0 and 1, got {alpha.tolist()}")
    return alpha


def interpolate_quantiles(values: np.ndarray, levels: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Quantiles at `alpha` from sorted grid values (..., Q) at `levels` (Q,) -> (..., len(alpha)).

    Piecewise linear in the normal score z = Phi^-1(level) (exact for a Gaussian), and
    linear extrapolation with the outermost segments beyond the grid. Monotone in alpha
    because the values are sorted.
    """
    z, za = norm.ppf(levels), norm.ppf(alpha)
    right = np.clip(np.searchsorted(z, za), 1, len(z) - 1)
    left = right - 1
    w = (za - z[left]) / (z[right] - z[left])
    return values[..., left] + w * (values[..., right] - values[..., left])


def conformal_rank(m: int, coverage: float) -> int | None:
    """The rank k (1-based) of the sorted nonconformity scores of m held-out points whose value makes a
    central interval of `coverage` valid, ceil((m + 1) coverage); None where k > m (too few points)."""
    rank = int(np.ceil(round((m + 1) * coverage, 9)))  # rounded: levels (0.35, 0.65) give 10 * 0.3 = 3.0000000000000004
    return rank if m and rank <= m else None


def symmetric_pairs(levels: np.ndarray) -> list[tuple[int, int]]:
    """(low, high) indices of the pairs of levels (l, 1 - l), l < 1/2, in `levels` (sorted): the central
    intervals the calibrations widen. Found by value, not by position: a level without a partner
    (0.95 in 0.1, 0.3, 0.5, 0.7, 0.9, 0.95) must not shift every pair after it out of step."""
    levels = np.asarray(levels, dtype=np.float64)
    pairs = []
    for low, level in enumerate(levels):
        if level < 0.5:
            partner = np.flatnonzero(np.isclose(levels, 1 - level) & (levels > 0.5))
            if partner.size:
                pairs.append((low, int(partner[0])))
    return pairs


def uncalibrated_coverages(m: int, levels: np.ndarray) -> list[float]:
    """The central coverages 1 - 2l of the symmetric level pairs (l, 1 - l) that m held-out points are
    too few to calibrate (conformal_rank None)."""
    return [
        float(1 - 2 * levels[low])
        for low, _ in symmetric_pairs(levels)
        if conformal_rank(m, 1 - 2 * levels[low]) is None
    ]


def unpaired_levels(levels: np.ndarray) -> list[float]:
    """The levels other than the median outside every symmetric pair: the conformal calibrations widen
    pairs (l, 1 - l) only, so these keep the network's values."""
    paired = {index for pair in symmetric_pairs(levels) for index in pair}
    return [float(level) for i, level in enumerate(levels) if level != 0.5 and i not in paired]


def fewest_points_to_calibrate(coverage: float) -> int:
    """The smallest m for which conformal_rank(m, coverage) is a rank."""
    m = 1
    while conformal_rank(m, coverage) is None:
        m += 1
    return m


def conformal_widening(grid: np.ndarray, target: np.ndarray, observed: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Split-conformal quantile regression (CQR) of a sorted quantile grid, per horizon step.

    grid (n, H, C, Q) on held-out windows, target and observed (n, H, C), levels (Q,) ->
    widening (H, Q): for every symmetric pair of levels (l, 1 - l), the amount d (negative:
    narrowing) such that [q_l - d, q_(1-l) + d] holds the conformal share ceil((m + 1)(1 - 2l)) / m
    of the m observed held-out targets of that step (pooled over channels); 0 where m is too
    small for it ((m + 1)(1 - 2l) > m) and on levels without a symmetric partner.
    """
    Q, H = len(levels), grid.shape[1]
    widening = np.zeros((H, Q))
    for low, high in symmetric_pairs(levels):
        score = np.maximum(grid[..., low] - target, target - grid[..., high])  # > 0: outside the interval
        for h in range(H):
            s = np.sort(score[:, h][observed[:, h]])
            rank = conformal_rank(len(s), 1 - 2 * levels[low])
            if rank is not None:
                widening[h, low] = widening[h, high] = s[rank - 1]
    return widening


def widen(grid: np.ndarray, widening: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """grid (n, H, C, Q) with each level moved away from the median by widening (H, Q), sorted again
    (a narrowing may cross levels), never past the median: the point forecast stays the network's."""
    sign = np.sign(levels - 0.5)
    moved = grid + (sign * widening)[None, :, None, :]
    if (levels == 0.5).any():
        median = grid[..., np.flatnonzero(levels == 0.5)[:1]]
        moved = np.where(sign < 0, np.minimum(moved, median), np.where(sign > 0, np.maximum(moved, median), moved))
    return np.sort(moved, axis=-1)


def sample_from_grid(q: torch.Tensor, z_grid: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """One draw per row from the (sorted) quantile grid q (b, C, Q) at uniforms u (b, C), interpolated as above."""
    za = torch.special.ndtri(u.clamp(1e-3, 1 - 1e-3)).to(q.dtype).to(q.device)
    right = torch.searchsorted(z_grid, za.contiguous()).clamp(1, len(z_grid) - 1)
    left = right - 1
    z0, z1 = z_grid[left], z_grid[right]
    v0, v1 = q.gather(-1, left[..., None])[..., 0], q.gather(-1, right[..., None])[..., 0]
    return v0 + (za - z0) / (z1 - z0) * (v1 - v0)


@dataclass(frozen=True)
class Contexts:
    """Normalized inputs of one forecast call, for n series.

    y: (n, C, c) normalized contexts; x_context: (n, C_x, c) or None; x_future: list of
    (k_i, C_x) future X rows per series or None; steps: the largest requested step.
    """

    y: np.ndarray
    x_context: np.ndarray | None
    x_future: list | None
    steps: int


class DirectStrategy:
    name = "direct"
    needs_future_x = True  # the head reads X at every horizon step
    causal_only = False

    def head(self, backbone: SSMBackbone, n_targets, n_exog, context, horizon, n_quantiles):
        return DirectForecastHead(backbone, n_targets, n_exog, context, horizon, n_quantiles)

    def future_steps(self, horizon: int, largest_step: int) -> int:
        """How many future X rows a forecast needs."""
        return horizon

    @staticmethod
    def training_inputs(yn: np.ndarray, xw: np.ndarray | None, c: int, H: int) -> np.ndarray:
        """yn (n, C, c + H) normalized windows, xw (n, C_x, c + H) -> (n, C + C_x, c + H)."""
        n, C = yn.shape[:2]
        inputs = np.zeros((n, C + (0 if xw is None else xw.shape[1]), c + H))
        inputs[:, :C, :c] = yn[..., :c]
        if xw is not None:
            inputs[:, C:, :] = xw
        return inputs

    @torch.no_grad()
    def forecast(self, model, ctx: Contexts, horizon: int, device, **_) -> tuple[np.ndarray, np.ndarray | None]:
        """(grid (n, horizon, C, Q) of sorted, member-averaged quantiles (normalized), None)."""
        n, C, c = ctx.y.shape
        n_exog = 0 if ctx.x_context is None else ctx.x_context.shape[1]
        x = np.zeros((n, C + n_exog, c + horizon))
        x[:, :C, :c] = ctx.y
        if n_exog:
            x[:, C:, :c] = ctx.x_context
            x[:, C:, c:] = np.stack([rows.T for rows in ctx.x_future])
        inputs = SequenceData(torch.as_tensor(x, dtype=torch.float32))
        out = predict_batches(model, inputs, FORECAST_BATCH, device).double().numpy()
        # (n, members, H, C, Q): sorting removes quantile crossing, then the members' grids are averaged
        return np.sort(out, axis=-1).mean(1), None


class RecursiveStrategy:
    name = "recursive"
    needs_future_x = False
    causal_only = True

    def head(self, backbone: SSMBackbone, n_targets, n_exog, context, horizon, n_quantiles, time_deltas=False):
        return RecursiveForecastHead(backbone, n_targets, n_exog, context, horizon, n_quantiles, time_deltas)

    def future_steps(self, horizon: int, largest_step: int) -> int:
        return largest_step

    @staticmethod
    def training_inputs(yn: np.ndarray, xw: np.ndarray | None, c: int, H: int) -> np.ndarray:
        """Teacher forcing: position p holds [y_p, X_{p+1}]: (n, C + C_x, c + H - 1)."""
        n, C = yn.shape[:2]
        inputs = np.zeros((n, C + (0 if xw is None else xw.shape[1]), c + H - 1))
        inputs[:, :C, :] = yn[..., : c + H - 1]
        if xw is not None:
            inputs[:, C:, :] = xw[..., 1:]
        return inputs

    @torch.no_grad()
    def forecast(
        self,
        model,
        ctx: Contexts,
        horizon: int,
        device,
        *,
        median: int,
        levels: np.ndarray,
        n_paths: int = 0,
        seed: int = 0,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """(point (n, S, C) normalized: the members' median paths averaged,
        paths (n, P, members, S, C) normalized sample paths, or None when n_paths is 0)."""
        n, C, c = ctx.y.shape
        S = ctx.steps
        n_exog = 0 if ctx.x_context is None else ctx.x_context.shape[1]
        # One array per forecast for predict_batches: the context (positions :c) and, in the X
        # channels of positions c:, the future X that the roll feeds from step 2 on.
        x = np.zeros((n, C + n_exog, c + (S - 1 if n_exog else 0)))
        x[:, :C, :c] = ctx.y
        if n_exog:
            x[:, C:, : c - 1] = ctx.x_context[..., 1:]
            x[:, C:, c - 1] = np.stack([rows[0] for rows in ctx.x_future])
            x[:, C:, c:] = np.stack([pad_rows(rows[1:S], S - 1).T for rows in ctx.x_future])
        inputs = SequenceData(torch.as_tensor(x, dtype=torch.float32))

        def roll(model, x, pick):
            """x (b, C + C_x, c (+ S - 1)) -> rollout's picks (b, members, S, C)."""
            return model.rollout(x[..., :c], x[:, C:, c:] if n_exog else None, S, pick)[0]

        median_path = lambda m, x, mask: roll(m, x, lambda q: q.sort(-1).values[..., median])  # noqa: E731
        point = predict_batches(model, inputs, FORECAST_BATCH, device, median_path).mean(1).double().numpy()
        if not n_paths:
            return point, None
        # Common random numbers: every series (and every forecast origin) uses the same
        # uniforms, drawn for the trained horizon whatever S is, so a series' quantiles do not
        # depend on which other series or origins are forecast in the same batch
        # (historical_forecasts equals separate predict calls).
        members = len(model.members)
        uniforms = torch.rand(
            (members, max(horizon, S), n_paths, C), generator=torch.Generator().manual_seed(seed), dtype=torch.float64
        )
        z_grid = torch.as_tensor(norm.ppf(levels), dtype=torch.float32, device=device)

        def sample_paths(model, x, mask):
            """x as above -> (b, n_paths, members, S, C): every forecast rolled n_paths times."""
            b = len(x)
            calls = iter(range(members * S))  # rollout picks S times per member, member after member

            def pick(q):
                k = next(calls)
                u = uniforms[k // S, k % S].expand(b, n_paths, C).reshape(b * n_paths, C)
                return sample_from_grid(q.sort(-1).values, z_grid, u)

            return roll(model, x.repeat_interleave(n_paths, 0), pick).reshape(b, n_paths, members, S, C)

        rows = max(1, 16 * FORECAST_BATCH // n_paths)  # bound the batch of series x paths
        return point, predict_batches(model, inputs, rows, device, sample_paths).double().numpy()


STRATEGIES = {"direct": DirectStrategy(), "recursive": RecursiveStrategy()}
