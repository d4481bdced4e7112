"""SSMForecaster: a global, probabilistic deep-SSM forecaster with the sktime interface.

Data flow (one network for every series of a panel or hierarchy):

    y (T_i, C_y), X (T_i, C_x) per series
      -> all windows of context_length + horizon steps, pooled over the series
      -> per-window normalization of y (instance_norm), global standardization of X
      -> network -> (horizon, C_y, n_quantiles) -> pinball loss, trained by ssmts' Trainer

Two strategies share the backbone and the pinball head:

    direct      the last context step's features (+ the future X, flattened) go through a
                linear head that emits every step up to max(fh) at once.
    recursive   a one-step-ahead model; the context is read with the FFT
                (SSMBackbone.forward_with_state) and the forecast is rolled with `step`,
                feeding back the median (point forecast) or samples (quantiles).
"""
from __future__ import annotations

import copy
import numbers

import numpy as np
import pandas as pd
import torch
from numpy.lib.stride_tricks import sliding_window_view
from scipy.stats import norm
from sktime.forecasting.base import BaseForecaster, ForecastingHorizon
from torch import nn

from ..estimators._base import BACKBONE_DEFAULTS, TRAINING_DEFAULTS, make_trainer, seed_from
from ..estimators._params import make_init
from ..nn import SSMBackbone
from ..training import SequenceData, Trainer, resolve_device

STRATEGIES = ("direct", "recursive")
INSTANCE_NORMS = ("last", "mean")  # True means "last"
DEFAULT_QUANTILES = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)

# Shared parameters the forecaster does not take: the direct head always reads the last
# step (pooling); sktime's fit always starts from scratch (warm_start: use
# update(update_params=True) to continue training); instance_norm replaces scale_input;
# zero-shot resampling (sample_rate) has no meaning for a forecast horizon in steps.
_NOT_USED = ("pooling", "warm_start", "scale_input", "sample_rate")
_BACKBONE_NAMES = tuple(k for k in BACKBONE_DEFAULTS if k not in _NOT_USED)

FORECASTER_DEFAULTS = {
    **{k: v for k, v in BACKBONE_DEFAULTS.items() if k not in _NOT_USED},
    **{k: v for k, v in TRAINING_DEFAULTS.items() if k not in _NOT_USED},
    # Short classic series (tens to a few hundred points): a small network, Delta
    # initialized for time scales of 2-100 steps (the sklearn default 1e-3..1e-1 aims at
    # sequences of thousands of steps), many epochs over few windows at a learning rate
    # that overfits less (chosen on the validation protocol of ssmts.bench.forecast).
    "d_model": 32,
    "d_state": 32,
    "n_layers": 2,
    "dt_min": 0.01,
    "dt_max": 0.5,
    "max_epochs": 150,
    "batch_size": 16,
    "lr": 1e-3,
    # forecaster-specific
    "context_length": 24,
    "strategy": "direct",
    "instance_norm": True,
    "quantiles": DEFAULT_QUANTILES,
    "n_sample_paths": 200,
    "update_epochs": 5,
    "ensemble_size": 1,
}


# ---------------------------------------------------------------- network
class ForecastNetwork(nn.Module):
    """Backbone + pinball head. forward(x) -> (batch, horizon, n_targets, n_quantiles).

    x packs everything into one (batch, n_targets + n_exog, length) tensor so that the
    shared Trainer can call model(x, mask):
      direct:    length context + horizon; the target channels of the last `horizon`
                 steps are zero, the exogenous channels hold the future X.
      recursive: length context + horizon - 1; position p holds [y_p, X_{p+1}] and its
                 output is the distribution of y_{p+1} (teacher forcing).
    """

    def __init__(self, backbone: SSMBackbone, strategy: str, n_targets: int, n_exog: int,
                 context_length: int, horizon: int, n_quantiles: int):
        super().__init__()
        self.backbone = backbone
        self.strategy, self.n_targets, self.n_exog = strategy, n_targets, n_exog
        self.context_length, self.horizon, self.n_quantiles = context_length, horizon, n_quantiles
        if strategy == "direct":
            self.head = nn.Linear(backbone.d_model + horizon * n_exog, horizon * n_targets * n_quantiles)
        else:
            self.head = None  # the backbone's per-step decoder is the head

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        c, H, C, Q = self.context_length, self.horizon, self.n_targets, self.n_quantiles
        b = x.shape[0]
        if self.strategy == "direct":
            z = self.backbone.features(x[..., :c])[..., -1]
            if self.n_exog:
                z = torch.cat([z, x[:, C:, c:].flatten(1)], dim=1)
            return self.head(z).view(b, H, C, Q)
        out = self.backbone(x)[..., c - 1 :]  # the H one-step outputs from the last context step on
        return out.reshape(b, C, Q, H).permute(0, 3, 1, 2)

    @torch.no_grad()
    def rollout(self, context: torch.Tensor, future_exog: torch.Tensor | None, steps: int,
                pick) -> tuple[torch.Tensor, torch.Tensor]:
        """Recursive forecast: read `context` (batch, C + C_x, c) with the FFT, then `step`.

        future_exog: (batch, C_x, steps - 1), X at steps 2..steps (X at step 1 is the
        context's last position). pick(q (batch, C, Q)) -> (batch, C) chooses the value fed
        back (median or a sample). Returns (picked (batch, steps, C), quantiles (batch, steps, C, Q)).
        """
        b, C, Q = context.shape[0], self.n_targets, self.n_quantiles
        out, state = self.backbone.forward_with_state(context)
        q = out[..., -1].view(b, C, Q)
        picked, quantiles = [], []
        for k in range(steps):
            quantiles.append(q)
            value = pick(q)
            picked.append(value)
            if k == steps - 1:
                break
            u = value if not self.n_exog else torch.cat([value, future_exog[..., k]], dim=1)
            o, state = self.backbone.step(u, state)
            q = o.view(b, C, Q)
        return torch.stack(picked, 1), torch.stack(quantiles, 1)


class ForecastEnsemble(nn.Module):
    """Independently initialized ForecastNetworks trained side by side (a deep ensemble).

    forward(x) -> (batch, members, horizon, n_targets, n_quantiles). The members see the
    same batches and differ only in their initial weights; the loss is the mean of their
    losses, so each member's gradient is its own. Forecasts average the members' sorted
    quantile grids (quantile averaging), which leaves the median the mean of the members'
    medians.
    """

    def __init__(self, members: list[ForecastNetwork]):
        super().__init__()
        self.members = nn.ModuleList(members)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return torch.stack([member(x, mask) for member in self.members], dim=1)

    @torch.no_grad()
    def rollout(self, context, future_exog, steps: int, pick) -> tuple[torch.Tensor, torch.Tensor]:
        """ForecastNetwork.rollout of each member: (batch, members, steps, C), (batch, members, steps, C, Q)."""
        rolls = [member.rollout(context, future_exog, steps, pick) for member in self.members]
        return torch.stack([r[0] for r in rolls], 1), torch.stack([r[1] for r in rolls], 1)


def pinball_loss(levels: torch.Tensor):
    """Mean pinball loss over the quantile grid, averaged over the observed targets.

    outputs (b, H, C, Q) or, for an ensemble, (b, members, H, C, Q); target (b, H, C);
    weight (b, H, C): 1 where the target exists.
    """

    def loss(outputs, target, weight=None):
        if outputs.dim() == target.dim() + 2:  # a member axis: every member is scored alike
            target = target[:, None]
            weight = None if weight is None else weight[:, None].expand(outputs.shape[:-1])
        diff = target[..., None] - outputs
        lv = levels.to(outputs.device)
        per_step = torch.maximum(lv * diff, (lv - 1.0) * diff).mean(-1)
        if weight is None:
            return per_step.mean()
        return (per_step * weight).sum() / weight.sum().clamp_min(1.0)

    return loss


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


def _sample_from_grid(q: torch.Tensor, z_grid: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One draw per row from the (sorted) quantile grid q (b, C, Q), interpolated as above."""
    u = torch.rand(q.shape[:-1], generator=generator, dtype=torch.float64).clamp(1e-3, 1 - 1e-3)
    za = torch.special.ndtri(u).to(q.dtype).to(q.device)
    right = torch.searchsorted(z_grid, za.contiguous()).clamp(1, len(z_grid) - 1)
    left = right - 1
    z0, z1 = z_grid[left], z_grid[right]
    v0, v1 = q.gather(-1, left[..., None])[..., 0], q.gather(-1, right[..., None])[..., 0]
    return v0 + (za - z0) / (z1 - z0) * (v1 - v0)


# ---------------------------------------------------------------- data helpers
def _split_instances(frame: pd.DataFrame) -> list[tuple[tuple, pd.DataFrame]]:
    """[(instance key, frame indexed by time)] in order of first appearance; key () for one series."""
    if not isinstance(frame.index, pd.MultiIndex):
        return [((), frame)]
    levels = list(range(frame.index.nlevels - 1))
    parts = []
    for key, part in frame.groupby(level=levels if len(levels) > 1 else 0, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        parts.append((key, part.droplevel(levels)))
    return parts


def _merge(old: pd.DataFrame | None, new: pd.DataFrame | None) -> pd.DataFrame | None:
    """Union by time; values in `new` win on duplicate time stamps."""
    if old is None:
        return new
    if new is None:
        return old
    merged = pd.concat([old, new])
    return merged[~merged.index.duplicated(keep="last")].sort_index()


def _key_name(key: tuple) -> str:
    return "y" if key == () else f"series {key if len(key) > 1 else key[0]!r}"


class _Windows:
    """Network inputs, targets and masks for a set of windows (numpy, float32)."""

    def __init__(self, x, target, weight, end):
        self.x, self.target, self.weight, self.end = x, target, weight, end

    @staticmethod
    def concat(parts: list["_Windows"]) -> "_Windows | None":
        parts = [p for p in parts if p is not None and len(p.x)]
        if not parts:
            return None
        return _Windows(*(np.concatenate([getattr(p, a) for p in parts]) for a in ("x", "target", "weight", "end")))

    def data(self, index=None) -> SequenceData:
        pick = (lambda a: a) if index is None else (lambda a: a[index])
        return SequenceData(torch.from_numpy(pick(self.x)), torch.from_numpy(pick(self.target)),
                            None, torch.from_numpy(pick(self.weight)))


# ---------------------------------------------------------------- estimator
_store_params = make_init(FORECASTER_DEFAULTS)


class SSMForecaster(BaseForecaster):
    """Global probabilistic forecaster with a deep MIMO diagonal state-space backbone.

    One network is trained on windows pooled from every series of y (a single series, a
    panel or a hierarchy), so related series share what they have in common. It forecasts
    a grid of quantiles; the point forecast is the median.

    Parameters
    ----------
    context_length : int, default 24
        Steps of history the network reads (window length). Every series needs at least
        context_length + 1 observations to give a training window, and context_length
        to be forecast.
    strategy : {"direct", "recursive"}, default "direct"
        "direct": the features of the last context step (and, with X, the future X of
        all horizon steps, flattened) feed a linear head that predicts every step up to
        max(fh) at once; the requested steps are selected from these.
        "recursive": a one-step-ahead model, trained with teacher forcing; the context
        is read with the FFT and the forecast is rolled with the layer's step mode. The
        point forecast feeds back the median; quantiles are empirical quantiles of
        `n_sample_paths` paths that feed back draws from the predicted quantile grid.
        Needs bidirectional=False.
    instance_norm : {True, "last", "mean", False}, default True
        Per-window normalization in the spirit of RevIN, without learnable affine: the
        context and the targets of each window are shifted by a location of the context
        and divided by the context's standard deviation (per series and target channel),
        and forecasts are mapped back. The model becomes scale-free across series and
        follows level shifts. The location is the network's prior, since weight decay
        pulls its outputs towards zero:
        True or "last": the context's last value, so an all-zero output is the naive
        "no change" forecast (suits trending and random-walk-like series);
        "mean": the context's mean, so an all-zero output forecasts the context's mean
        (suits mean-reverting series such as growth rates; RevIN's choice).
        False: targets are standardized with global training statistics instead, and the
        network must have seen the levels it forecasts at. X is always standardized with
        global training statistics.
    quantiles : tuple of float, default (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)
        Quantile grid of the pinball-loss head (0.5 is added if missing: it is the point
        forecast). predict_quantiles / predict_interval at probabilities not on the grid
        interpolate the sorted grid (sorting removes quantile crossing) piecewise linearly
        on the normal-score scale Phi^-1(alpha), extrapolating with the outermost segments
        beyond the grid's ends.
    n_sample_paths : int, default 200
        Paths drawn for the quantiles of the recursive strategy (fixed seed: repeated calls
        give the same numbers).
    update_epochs : int, default 5
        Epochs of fine-tuning on the new windows in update(update_params=True), continuing
        from the stored optimizer state.
    ensemble_size : int, default 1
        Networks trained side by side from different initial weights (a deep ensemble);
        forecasts average their quantile grids. Fit and predict cost grow in proportion;
        on short series the average varies much less with the seed than one network does.
        The recursive strategy rolls every member separately (n_sample_paths each) and
        averages the members' medians and path quantiles.

    Backbone (as in ssmts.SSMRegressor; defaults sized for short series)
        d_model=32, d_state=32, n_layers=2, heads=1, bidirectional=False, init="legs",
        discretization="zoh", dropout=0.0, norm="layer", prenorm=True,
        activation="gated_gelu", dt_min=0.01, dt_max=0.5.
    Training (as in ssmts.SSMRegressor)
        max_epochs=150, batch_size=16, lr=1e-3, lr_ssm=1e-3, weight_decay=0.01,
        optimizer="adamw", scheduler="cosine", early_stopping=False (True holds out the
        latest validation_fraction of each series' windows), validation_fraction=0.1,
        n_iter_no_change=10, tol=1e-4, device="auto", random_state=None, verbose=0.
        Not taken from the sklearn estimators: pooling (the direct head reads the last
        step), warm_start (sktime's fit restarts; update(update_params=True) continues
        training), scale_input (instance_norm replaces it) and sample_rate.

    Notes
    -----
    fh is needed in fit (the direct head's size is max(fh)); relative, absolute and
    non-contiguous horizons work, in-sample ones raise. With exogenous X, predict needs X
    for every step from 1 to max(fh) (X over the context is remembered from fit/update).
    update(update_params=False) only appends the new data and moves the cutoff: the next
    forecast reads the last context_length points, so it equals a fresh predict on the
    concatenated series with the same weights.

    Examples
    --------
    >>> from sktime.datasets import load_airline
    >>> from ssmts.sktime import SSMForecaster
    >>> y = load_airline()
    >>> forecaster = SSMForecaster(context_length=24, d_model=8, max_epochs=3, random_state=0)
    >>> forecaster = forecaster.fit(y, fh=[1, 2, 3])
    >>> forecaster.predict().shape
    (3,)
    >>> forecaster.predict_interval(coverage=0.8).shape
    (3, 2)
    """

    _tags = {
        "authors": ["ssmts developers"],
        "maintainers": ["ssmts developers"],
        "python_dependencies": "torch",
        "y_inner_mtype": ["pd.DataFrame", "pd-multiindex", "pd_multiindex_hier"],
        "X_inner_mtype": ["pd.DataFrame", "pd-multiindex", "pd_multiindex_hier"],
        "capability:multivariate": True,
        "capability:exogenous": True,
        "capability:insample": False,
        "capability:pred_int": True,
        "capability:pred_int:insample": False,
        "capability:missing_values": False,
        # the direct head reads X at every step up to max(fh), the recursive roll too
        "capability:non_contiguous_X": False,
        "capability:update": True,
        "capability:unequal_length": True,
        "capability:random_state": True,
        "property:randomness": "derandomized",
        "requires-fh-in-fit": True,
        "X-y-must-have-same-index": True,
        "fit_is_empty": False,
    }
    # The estimator keeps its own per-series tails (enough for a context and fine-tuning);
    # the base class's full copies of y and X would only duplicate them.
    _config = {"remember_data": False}

    def __init__(self, **params):
        _store_params(self, **params)
        super().__init__()
        # The base class creates these only when remember_data is on at construction;
        # creating them always lets set_config(remember_data=True) work afterwards.
        if not hasattr(self, "_y"):
            self._y, self._X = None, None

    __init__.__signature__ = _store_params.__signature__

    # ------------------------------------------------------------ parameters
    def _check_params(self) -> None:
        c = self.context_length
        if not (isinstance(c, numbers.Integral) and not isinstance(c, bool) and c >= 1):
            raise ValueError(f"context_length must be an integer >= 1, got {c!r}")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}; choose one of {STRATEGIES}")
        if self.strategy == "recursive" and self.bidirectional:
            raise ValueError(
                f"strategy='recursive' rolls the forecast step by step and needs a causal backbone, "
                f"but bidirectional={self.bidirectional!r}; use bidirectional=False or strategy='direct'"
            )
        for name in ("max_epochs", "batch_size", "n_sample_paths", "ensemble_size"):
            value = getattr(self, name)
            if not (isinstance(value, numbers.Integral) and value >= 1):
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if not (isinstance(self.update_epochs, numbers.Integral) and self.update_epochs >= 0):
            raise ValueError(f"update_epochs must be an integer >= 0, got {self.update_epochs!r}")
        norm_ = self.instance_norm
        if isinstance(norm_, (bool, np.bool_)):
            self.window_location_ = "last" if norm_ else None
        elif isinstance(norm_, str) and norm_ in INSTANCE_NORMS:
            self.window_location_ = norm_
        else:
            raise ValueError(f"unknown instance_norm {norm_!r}; choose True, False or one of {INSTANCE_NORMS}")
        if not 0.0 < self.validation_fraction < 1.0:
            raise ValueError(f"validation_fraction must lie in (0, 1), got {self.validation_fraction}")
        resolve_device(self.device)
        self.quantile_levels_ = self._quantile_grid()

    def _quantile_grid(self) -> np.ndarray:
        try:
            levels = np.asarray(self.quantiles, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            raise ValueError(f"quantiles must be a sequence of floats in (0, 1), got {self.quantiles!r}") from None
        if levels.size == 0 or np.any(~np.isfinite(levels)) or np.any((levels <= 0) | (levels >= 1)):
            raise ValueError(f"quantiles must be a sequence of floats in (0, 1), got {self.quantiles!r}")
        levels = np.unique(np.append(levels, 0.5))
        if levels.size < 2:
            raise ValueError("quantiles needs at least one level besides 0.5, to give intervals")
        return levels

    # ------------------------------------------------------------ data
    def _split_xy(self, y: pd.DataFrame, X: pd.DataFrame | None) -> list[tuple[tuple, pd.DataFrame, pd.DataFrame | None]]:
        """[(key, y part, X part or None)] with float values; X parts keep all their rows."""
        x_parts = dict(_split_instances(X)) if X is not None else {}
        parts = []
        for key, y_part in _split_instances(y):
            x_part = x_parts.get(key)
            if X is not None and x_part is None:
                raise ValueError(f"X has no rows for {_key_name(key)} of y")
            parts.append((key, self._as_float(y_part, "y"), None if x_part is None else self._as_float(x_part, "X")))
        return parts

    @staticmethod
    def _as_float(frame: pd.DataFrame, name: str) -> pd.DataFrame:
        try:
            return frame.astype(np.float64)
        except (TypeError, ValueError) as error:
            raise TypeError(f"{name} must have numeric columns only: {error}") from None

    def _x_rows(self, key: tuple, x_all: pd.DataFrame | None, times: pd.Index, what: str) -> np.ndarray:
        """Globally standardized X at `times`: (len(times), C_x); a clear error if any are missing."""
        if x_all is None:
            raise ValueError(
                f"{type(self).__name__} was fitted with exogenous X ({self.n_exog_} columns), so it needs X "
                f"for {what} of {_key_name(key)}; pass X covering them"
            )
        rows = x_all.reindex(times)
        missing = times[rows.isna().any(axis=1).to_numpy()]
        if len(missing):
            shown = ", ".join(map(str, missing[:5])) + (" ..." if len(missing) > 5 else "")
            raise ValueError(
                f"X is missing {len(missing)} time point(s) needed for {what} of {_key_name(key)}: {shown}; "
                f"{type(self).__name__} was fitted with exogenous X, so fit/update/predict must pass X covering them"
            )
        return (rows.to_numpy() - self.x_mean_) / self.x_scale_

    def _norm_stats(self, context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """context (n, C, c) -> shift, scale (n, C, 1): the window is normalized as (y - shift) / scale."""
        if self.window_location_ is None:
            shape = (context.shape[0], self.n_targets_, 1)
            return np.broadcast_to(self.y_mean_[:, None], shape), np.broadcast_to(self.y_scale_[:, None], shape)
        # Location: what a network that outputs zeros forecasts, a prior that matters on
        # short series, where weight decay pulls the outputs towards zero: the last value
        # ("no change", the naive forecast) or the context's mean. Scale: the context's spread.
        shift = context.mean(-1, keepdims=True) if self.window_location_ == "mean" else context[..., -1:]
        std = context.std(-1, keepdims=True)
        # A constant context has std 0: the floor (a thousandth of the channel's global
        # spread) keeps the scaled targets finite without distorting ordinary windows.
        scale = np.sqrt(std**2 + self.scale_floor_[:, None] ** 2)
        return shift, scale

    def _windows(self, y: np.ndarray, x: np.ndarray | None, min_start: int = 0) -> _Windows | None:
        """Training windows of one series. y (T, C), x (T, C_x) standardized or None.

        Every start with at least one target is used; targets past the end are masked.
        With X, the direct head sees the future X of all horizon steps, so only windows
        with the whole horizon inside the series are used (when there are any).
        """
        c, H, C = self.context_length, self.horizon_, self.n_targets_
        T = len(y)
        n = T - c
        if n < 1 or min_start >= n:
            return None
        ypad = np.concatenate([y, np.zeros((H, C))])
        yw = sliding_window_view(ypad, c + H, axis=0)[:n]  # (n, C, c + H)
        end = np.arange(n)[:, None] + c + np.arange(H)[None, :]
        available = end < T  # (n, H)
        keep = np.arange(n) >= min_start
        if x is not None and self.strategy == "direct" and (available.all(1) & keep).any():
            keep &= available.all(1)
        yw, available = yw[keep], available[keep]
        shift, scale = self._norm_stats(yw[..., :c])
        yn = (yw - shift) / scale
        yn[..., c:] *= available[:, None, :]  # padding stays 0 in normalized units
        target = np.transpose(yn[..., c:], (0, 2, 1))  # (n, H, C)
        weight = np.broadcast_to(available[:, :, None], target.shape).astype(np.float32)
        if self.strategy == "direct":
            inputs = np.zeros((len(yn), C + self.n_exog_, c + H))
            inputs[:, :C, :c] = yn[..., :c]
            if x is not None:
                inputs[:, C:, :] = sliding_window_view(np.concatenate([x, np.zeros((H, x.shape[1]))]), c + H, axis=0)[:n][keep]
        else:
            inputs = np.zeros((len(yn), C + self.n_exog_, c + H - 1))
            inputs[:, :C, :] = yn[..., : c + H - 1]
            if x is not None:
                xw = sliding_window_view(np.concatenate([x, np.zeros((H + 1, x.shape[1]))]), c + H, axis=0)[:n][keep]
                inputs[:, C:, :] = xw[..., 1:]  # position p holds X_{p+1}
        start = np.flatnonzero(keep)
        last_target = np.minimum(start + c + H, T)  # for the temporal validation split
        return _Windows(inputs.astype(np.float32), target.astype(np.float32), weight, last_target)

    def _series_windows(self, key: tuple, y_part: pd.DataFrame, x_all: pd.DataFrame | None, min_start: int = 0):
        x = None
        if self.n_exog_:
            x = self._x_rows(key, x_all, y_part.index, "the training windows")
        return self._windows(y_part.to_numpy(), x, min_start)

    # ------------------------------------------------------------ horizon
    def _steps(self, fh: ForecastingHorizon, time_index: pd.Index) -> np.ndarray:
        """Relative steps of fh for a series whose last observation is time_index[-1]."""
        if fh.is_relative:
            return np.asarray(fh.to_pandas(), dtype=np.int64)
        cutoff = time_index[[-1]]
        if fh.freq is None and isinstance(time_index, pd.DatetimeIndex):
            fh = ForecastingHorizon(fh.to_pandas(), is_relative=False, freq=pd.infer_freq(time_index))
        return np.asarray(fh.to_relative(cutoff).to_pandas(), dtype=np.int64)

    def _future_times(self, fh: ForecastingHorizon, time_index: pd.Index, steps) -> pd.Index:
        freq = fh.freq
        if freq is None and isinstance(time_index, pd.DatetimeIndex):
            freq = pd.infer_freq(time_index)
        return ForecastingHorizon(list(steps), is_relative=True, freq=freq).to_absolute_index(time_index[[-1]])

    # ------------------------------------------------------------ fit
    def _fit(self, y, X, fh):
        self._check_params()
        self._seed_ = seed_from(self.random_state)
        parts = self._split_xy(y, X)
        self.n_targets_ = y.shape[1]
        self.n_exog_ = 0 if X is None else X.shape[1]
        self._y_columns = y.columns
        self._index_names = list(y.index.names)
        self._x_columns = None if X is None else X.columns

        c = self.context_length
        lengths = {key: len(y_part) for key, y_part, _ in parts}
        if max(lengths.values()) < c + 1:
            longest = max(lengths, key=lengths.get)
            raise ValueError(
                f"context_length={c} is longer than the series: training needs at least {c + 1} observations "
                f"(a context of {c} and one target), but {_key_name(longest)} has {lengths[longest]}"
                + ("" if len(parts) == 1 else " (the longest series)")
            )
        self.horizon_ = int(max(self._steps(fh, y_part.index).max() for _, y_part, _ in parts))

        values = np.concatenate([p.to_numpy() for _, p, _ in parts])
        self.y_mean_ = values.mean(0)
        spread = values.std(0)
        self.y_scale_ = np.where(spread > 1e-12, spread, 1.0)
        self.scale_floor_ = 1e-3 * self.y_scale_
        if X is not None:
            aligned = np.concatenate([xp.reindex(yp.index).to_numpy() for _, yp, xp in parts])
            if np.isnan(aligned).any():
                raise ValueError("X must cover every time point of y (X-y must have the same index)")
            self.x_mean_ = aligned.mean(0)
            xs = aligned.std(0)
            self.x_scale_ = np.where(xs > 1e-12, xs, 1.0)

        windows = [self._series_windows(key, yp, xp) for key, yp, xp in parts]
        data = _Windows.concat(windows)
        # Remember what predict and update need: each series' tail and its X.
        self._store = {}
        for key, yp, xp in parts:
            self._remember(key, yp, xp)

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self._seed_)
            self.model_ = self._build_network()
            trainer = self._make_trainer(self.max_epochs)
            train, val = self._train_val(data, windows)
            trainer.fit(train, val)
        self.model_.eval()
        self.history_ = trainer.history
        self.n_iter_ = len(trainer.history)
        self.optimizer_state_ = trainer.optimizer_state_cpu()
        return self

    def _build_network(self) -> ForecastEnsemble:
        kwargs = {name: getattr(self, name) for name in _BACKBONE_NAMES}
        d_model, n_layers = kwargs.pop("d_model"), kwargs.pop("n_layers")
        C, Q = self.n_targets_, len(self.quantile_levels_)
        recursive = self.strategy == "recursive"
        members = []
        for _ in range(self.ensemble_size):  # drawn one after another from the seeded generator
            backbone = SSMBackbone(
                C + self.n_exog_, d_model, n_layers, C * Q if recursive else None,
                pooling="none" if recursive else "last", **kwargs,
            )
            members.append(ForecastNetwork(backbone, self.strategy, C, self.n_exog_, self.context_length, self.horizon_, Q))
        return ForecastEnsemble(members)

    def _make_trainer(self, epochs: int) -> Trainer:
        loss = pinball_loss(torch.as_tensor(self.quantile_levels_, dtype=torch.float32))
        return make_trainer(self, self.model_, loss, max_epochs=epochs)

    def _train_val(self, data: _Windows, windows: list) -> tuple[SequenceData, SequenceData | None]:
        if not self.early_stopping:
            return data.data(), None
        # Temporal hold-out: the latest validation_fraction of each series' windows.
        is_val, offset = np.zeros(len(data.x), dtype=bool), 0
        for w in windows:
            if w is None:
                continue
            n = len(w.x)
            n_val = int(round(self.validation_fraction * n))
            if n >= 2 and n_val >= 1:
                is_val[offset + np.argsort(w.end, kind="stable")[-n_val:]] = True
            offset += n
        if not is_val.any():
            raise ValueError(
                f"early_stopping needs validation windows, but the series give {len(data.x)} training window(s); "
                "use longer series, a larger validation_fraction or early_stopping=False"
            )
        return data.data(np.flatnonzero(~is_val)), data.data(np.flatnonzero(is_val))

    def _remember(self, key: tuple, y_part: pd.DataFrame, x_part: pd.DataFrame | None) -> None:
        """Keep the last context_length + horizon_ observations (a context, plus the windows
        whose targets reach new data in update) and the X from that point on."""
        keep = self.context_length + self.horizon_
        tail = y_part.iloc[-keep:]
        if x_part is not None:
            x_part = x_part[x_part.index >= tail.index[0]]
        self._store[key] = (tail, x_part)

    # ------------------------------------------------------------ update
    def _update(self, y, X=None, update_params=True):
        self._check_x_columns(X, "update")
        if y.shape[1] != self.n_targets_:
            raise ValueError(f"y has {y.shape[1]} columns, but {type(self).__name__} was fitted with {self.n_targets_}")
        parts = self._split_xy(y, X)
        fine_tune = []
        for key, yp, xp in parts:
            old_y, old_x = self._store.get(key, (None, None))
            merged_y, merged_x = _merge(old_y, yp), _merge(old_x, xp)
            if update_params and self.update_epochs:
                n_old = 0 if old_y is None else int((merged_y.index < yp.index[0]).sum())
                # windows whose targets reach the new observations
                first = max(0, n_old - self.context_length - self.horizon_ + 1)
                fine_tune.append(self._series_windows(key, merged_y, merged_x, min_start=first))
            self._remember(key, merged_y, merged_x)
        data = _Windows.concat(fine_tune)
        if data is not None:
            self._fine_tune(data)
        return self

    def _fine_tune(self, data: _Windows) -> None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self._seed_ + len(self.history_))
            trainer = self._make_trainer(self.update_epochs)
            trainer.early_stopping = False  # a handful of epochs on the newest windows
            try:
                trainer.optimizer.load_state_dict(self.optimizer_state_)
            except (ValueError, KeyError):  # pragma: no cover - same network, so it should load
                pass
            trainer.history, trainer.epochs_done = list(self.history_), len(self.history_)
            trainer.fit(data.data(), None, epochs=self.update_epochs)
        self.model_.eval()
        self.history_ = trainer.history
        self.n_iter_ = len(trainer.history)
        self.optimizer_state_ = trainer.optimizer_state_cpu()

    # ------------------------------------------------------------ predict
    def _predict(self, fh, X=None):
        results = self._forecast(fh, X, alpha=None)
        return self._assemble([(key, times, point) for key, times, point, _ in results], self._y_columns)

    def _predict_quantiles(self, fh, X, alpha):
        alpha = np.asarray(alpha, dtype=np.float64)
        if np.any((alpha <= 0) | (alpha >= 1)):
            raise ValueError(f"quantile probabilities must lie strictly between 0 and 1, got {alpha.tolist()}")
        results = self._forecast(fh, X, alpha=alpha)
        # (k, C, A) -> columns ordered variable-major, as in _get_columns
        frames = [(key, times, q.reshape(len(times), -1)) for key, times, _, q in results]
        return self._assemble(frames, self._get_columns(method="predict_quantiles", alpha=list(alpha)))

    def _assemble(self, results, columns) -> pd.DataFrame:
        values = np.concatenate([v for _, _, v in results]) if results else np.zeros((0, len(columns)))
        if len(results) == 1 and results[0][0] == ():
            return pd.DataFrame(values, index=results[0][1], columns=columns)
        tuples = [(*key, t) for key, times, _ in results for t in times]
        index = pd.MultiIndex.from_tuples(tuples, names=self._index_names)
        return pd.DataFrame(values, index=index, columns=columns)

    def _check_x_columns(self, X, method: str) -> None:
        if X is None:
            return
        if not self.n_exog_:
            raise ValueError(f"{type(self).__name__} was fitted without exogenous X, but X was passed to {method}")
        if list(X.columns) != list(self._x_columns):
            raise ValueError(
                f"X passed to {method} has columns {list(X.columns)}, but {type(self).__name__} was fitted with "
                f"{list(self._x_columns)}"
            )

    def _contexts(self, fh, X):
        """Per series: key, context y (c, C), future times, requested steps, X windows."""
        self._check_x_columns(X, "predict")
        x_new = dict(_split_instances(X)) if X is not None else {}
        c, cutoff = self.context_length, self.cutoff[0]
        items = []
        for key, (tail, x_old) in self._store.items():
            history = tail[tail.index <= cutoff]
            if len(history) < c:
                raise ValueError(
                    f"context_length={c} is longer than the series: forecasting needs the last {c} observations, "
                    f"but {_key_name(key)} has {len(history)}"
                )
            history = history.iloc[-c:]
            steps = self._steps(fh, history.index)
            if steps.min() < 1:
                raise ValueError(f"fh reaches into the observed data of {_key_name(key)} (steps {steps.tolist()})")
            if steps.max() > self.horizon_:
                raise ValueError(
                    f"fh needs {steps.max()} steps ahead for {_key_name(key)}, but the network was trained for "
                    f"{self.horizon_}; refit with this fh"
                )
            x_ctx = x_future = None
            if self.n_exog_:
                xp = x_new.get(key)
                x_all = _merge(x_old, None if xp is None else self._as_float(xp, "X"))
                # direct: the head reads X at all trained steps; recursive: up to the last requested one
                n_future = self.horizon_ if self.strategy == "direct" else int(steps.max())
                future = self._future_times(fh, history.index, range(1, n_future + 1))
                x_ctx = self._x_rows(key, x_all, history.index, "the context")
                x_future = self._x_rows(key, x_all, future, f"the forecast steps 1..{n_future}")
            items.append((key, history.to_numpy(), history.index, steps, x_ctx, x_future))
        return items

    @torch.no_grad()
    def _forecast(self, fh, X, alpha):
        """[(key, absolute times, point (k, C), quantiles (k, C, A) or None)] in original units."""
        items = self._contexts(fh, X)
        device = resolve_device(self.device)
        model = self.model_.to(device)
        model.eval()
        c, H, C = self.context_length, self.horizon_, self.n_targets_
        levels = self.quantile_levels_
        median = int(np.flatnonzero(levels == 0.5)[0])
        context = np.stack([item[1].T for item in items])  # (n, C, c)
        shift, scale = self._norm_stats(context)
        yn = (context - shift) / scale
        results = []
        if self.strategy == "direct":
            x = np.zeros((len(items), C + self.n_exog_, c + H))
            x[:, :C, :c] = yn
            if self.n_exog_:
                x[:, C:, :c] = np.stack([item[4].T for item in items])
                x[:, C:, c:] = np.stack([item[5].T for item in items])
            out = model(torch.as_tensor(x, dtype=torch.float32, device=device)).double().cpu().numpy()
            # (n, members, H, C, Q) -> (n, H, C, Q): sorting removes quantile crossing, then
            # the members' grids are averaged
            grid = np.sort(out, axis=-1).mean(1)
            grid = grid * np.transpose(scale, (0, 2, 1))[..., None] + np.transpose(shift, (0, 2, 1))[..., None]
            for i, (key, _, times, steps, _, _) in enumerate(items):
                g = grid[i, steps - 1]
                q = None if alpha is None else interpolate_quantiles(g, levels, alpha)
                results.append((key, self._future_times(fh, times, steps), g[..., median], q))
            return results
        # recursive: [y_p, X_{p+1}] over the context, then roll
        S = int(max(item[3].max() for item in items))
        x = np.zeros((len(items), C + self.n_exog_, c))
        x[:, :C] = yn
        if self.n_exog_:
            x[:, C:, : c - 1] = np.stack([item[4][1:].T for item in items])
            x[:, C:, c - 1] = np.stack([item[5][0] for item in items])
        ctx = torch.as_tensor(x, dtype=torch.float32, device=device)
        fut = None
        if self.n_exog_:
            fut = torch.as_tensor(np.stack([_pad_rows(item[5][1:S], S - 1).T for item in items]), dtype=torch.float32, device=device)

        def pick_median(q):
            return q.sort(-1).values[..., median]

        point, _ = model.rollout(ctx, fut, S, pick_median)
        point = point.mean(1)  # the members' median paths, averaged
        point = point.double().cpu().numpy() * np.transpose(scale, (0, 2, 1)) + np.transpose(shift, (0, 2, 1))
        paths = None
        if alpha is not None:
            paths = self._sample_paths(model, ctx, fut, S, device)  # (n, P, members, S, C) normalized
            paths = paths * np.transpose(scale, (0, 2, 1))[:, None, None] + np.transpose(shift, (0, 2, 1))[:, None, None]
        for i, (key, _, times, steps, _, _) in enumerate(items):
            q = None
            if paths is not None:
                # each member's path quantiles, averaged over the members: (k, C, A)
                q = np.quantile(paths[i][:, :, steps - 1], alpha, axis=0).mean(1)
                q = np.moveaxis(q, 0, -1)
            results.append((key, self._future_times(fh, times, steps), point[i, steps - 1], q))
        return results

    def _sample_paths(self, model: ForecastEnsemble, ctx, fut, steps: int, device) -> np.ndarray:
        P, n = self.n_sample_paths, ctx.shape[0]
        generator = torch.Generator().manual_seed(self._seed_)
        z_grid = torch.as_tensor(norm.ppf(self.quantile_levels_), dtype=torch.float32, device=device)

        def pick_sample(q):
            return _sample_from_grid(q.sort(-1).values, z_grid, generator)

        rows = max(1, 8192 // P)  # bound the batch of series x paths
        out = []
        for start in range(0, n, rows):
            c_b = ctx[start : start + rows].repeat_interleave(P, 0)
            f_b = None if fut is None else fut[start : start + rows].repeat_interleave(P, 0)
            picked, _ = model.rollout(c_b, f_b, steps, pick_sample)
            out.append(picked.double().cpu().numpy().reshape(-1, P, len(model.members), steps, self.n_targets_))
        return np.concatenate(out)

    # ------------------------------------------------------------ persistence
    def __getstate__(self):
        state = self.__dict__.copy()
        if "model_" in state:
            # A model trained on a GPU must unpickle on a CPU-only machine.
            state["model_"] = copy.deepcopy(state["model_"]).cpu()
        return state

    # ------------------------------------------------------------ testing
    @classmethod
    def get_test_params(cls, parameter_set="default"):
        """Two tiny configurations (direct / recursive ensemble of two) that fit in well under a second."""
        tiny = dict(d_model=8, d_state=4, n_layers=1, max_epochs=2, batch_size=16, device="cpu",
                    update_epochs=1, quantiles=(0.1, 0.5, 0.9))
        return [
            {**tiny, "context_length": 4, "random_state": 0},
            {**tiny, "context_length": 5, "strategy": "recursive", "instance_norm": False,
             "n_sample_paths": 16, "ensemble_size": 2, "random_state": 1},
        ]


def _pad_rows(rows: np.ndarray, n: int) -> np.ndarray:
    """rows (k, C_x) -> (n, C_x), zero rows appended (unused future steps of shorter horizons)."""
    if len(rows) >= n:
        return rows[:n]
    return np.concatenate([rows, np.zeros((n - len(rows), rows.shape[1]))])
