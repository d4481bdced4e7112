"""SSMForecaster: a global, probabilistic deep-SSM forecaster with the sktime interface.

Data flow (one network for every series of a panel or hierarchy):

    y (T_i, C_y), X (T_i, C_x) per series
      -> all windows of context_length + horizon steps, pooled over the series  (_windows)
      -> per-window normalization of y (instance_norm), global standardization of X
      -> a forecast head (ssmts.nn.heads) per strategy                           (_strategies)
      -> pinball loss, trained through ssmts.training.fit_model

This module is the sktime plumbing: parameters, fit / update / predict, horizons, frames.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd
import torch
from sktime.forecasting.base import BaseForecaster, ForecastingHorizon

from ..nn import ForecastEnsemble
from ..nn.functional import channel_statistics, series_statistics
from ..training import (
    BackboneParams,
    EarlyStopping,
    EarlyStoppingParams,
    OptimizerParams,
    SequenceData,
    TrainerConfig,
    fit_model,
    on_device,
    resolve_device,
    seed_from,
)
from ..training.config import Integer, Options, Satisfies, param, with_params_doc
from ..training.fit import pickle_state
from ..training.objectives import pinball_loss
from ._strategies import STRATEGIES, Contexts, interpolate_quantiles, quantile_probabilities
from ._windows import (
    Windows,
    as_float,
    check_regular_index,
    fill_forward,
    future_times,
    gaps_into,
    impute,
    key_name,
    make_windows,
    merge,
    split_instances,
    time_unit_value,
    time_values,
)
from ._windows import steps as horizon_steps

if TYPE_CHECKING:
    from ._streaming import ForecastStream

INSTANCE_NORMS = ("last", "mean")  # True means "last"
DEFAULT_QUANTILES = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)


def _is_quantile_grid(value) -> bool:
    try:
        levels = np.asarray(value, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        return False
    return levels.size > 0 and bool(np.all(np.isfinite(levels) & (levels > 0) & (levels < 1)))


def _is_time_unit(value) -> bool:
    if value is None or isinstance(value, (str, pd.Timedelta)):
        return True
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) and value > 0


def _is_names(value) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


def _column_statistics(values: np.ndarray, columns, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Mean and scale of each column of values (T, C) over its observed (non-NaN) rows: the
    per-channel statistics of the estimators (a floor relative to the data's magnitude, so
    series at 1e-12 work too)."""
    observed = ~np.isnan(values)
    empty = ~observed.any(0)
    if empty.any():
        raise ValueError(f"{name} column {columns[int(np.argmax(empty))]!r} has no observed (non-NaN) value")
    x, mask = torch.from_numpy(np.ascontiguousarray(np.where(observed, values, 0.0).T)), torch.from_numpy(observed.T)
    if observed.all():
        mean, scale = channel_statistics(x[None])
        return mean.numpy(), scale.numpy()
    # each column as a series of its own, over its own observed rows (a mask is per step, not per channel)
    mean, scale = series_statistics(x[:, None], mask)
    return mean[:, 0].numpy(), scale[:, 0].numpy()


class ForecasterParams(BackboneParams, OptimizerParams, EarlyStoppingParams):
    """The forecaster's own parameters; it takes the backbone and training groups too (with
    defaults for short series) but not pooling, normalize, warm_start or sample_rate."""

    _params_group = "Forecaster"
    # Short classic series (tens to a few hundred points): a small network, Delta
    # initialized for time scales of 2-100 steps (the sklearn default 1e-3..1e-1 aims at
    # sequences of thousands of steps), many epochs over few windows at a learning rate
    # that overfits less (chosen on the validation protocol of ssmts.bench.forecast).
    _param_defaults = {
        "d_model": 32,
        "d_state": 32,
        "n_layers": 2,
        "dt_min": 0.01,
        "dt_max": 0.5,
        "max_epochs": 150,
        "batch_size": 16,
        "lr": 1e-3,
    }
    context_length: int = param(
        default=24,
        doc="Steps of history the network reads (each series needs context_length + 1 "
        "observations to train, context_length to forecast).",
        constraint=Integer(1),
    )
    strategy: Literal["direct", "recursive"] = param(
        default="direct",
        doc="'direct': one head emits every horizon step; 'recursive': one-step-ahead model rolled with "
        "the step mode (needs bidirectional=False).",
        constraint=Options(*STRATEGIES),
    )
    instance_norm: bool | str = param(
        default=True,
        doc="Per-window normalization: True/'last' (location = last context value), 'mean', or False "
        "(global standardization).",
        constraint=Options(True, False, *INSTANCE_NORMS),
    )
    quantiles: tuple = param(
        default=DEFAULT_QUANTILES,
        doc="Quantile grid of the pinball-loss head (0.5 is added).",
        constraint=Satisfies(_is_quantile_grid, "a sequence of floats in (0, 1)"),
    )
    n_sample_paths: int = param(
        default=200, doc="Sample paths of the recursive strategy's quantiles (fixed seed).", constraint=Integer(1)
    )
    update_epochs: int = param(
        default=5, doc="Fine-tuning epochs of update(update_params=True).", constraint=Integer(0)
    )
    irregular: Literal["refuse", "time_deltas"] = param(
        default="refuse",
        doc="Time indexes with uneven gaps: 'refuse' (an error; fill or resample them first) or "
        "'time_deltas' (each SSM step takes Delta times its gap in units of time_unit; needs strategy='recursive', "
        "layer='ssm' and forecasts the time stamps of fh).",
        constraint=Options("refuse", "time_deltas"),
    )
    time_unit: float | str | None = param(
        default=None,
        doc="Unit of the gaps with irregular='time_deltas': None (the median spacing of the training "
        "series), a number (numeric index) or a duration such as '1h' (DatetimeIndex).",
        constraint=Satisfies(_is_time_unit, "None, a positive number or a duration string"),
    )
    ensemble_size: int = param(
        default=1,
        doc="Networks trained side by side from different initial weights (quantile grids averaged).",
        constraint=Integer(1),
    )
    past_covariates: tuple = param(
        default=(),
        doc="Columns of X known only up to the cutoff: read over the context, never after it (predict "
        "needs no future values of them); strategy='direct' only.",
        constraint=Satisfies(_is_names, "a list of X column names"),
    )
    static_covariates: tuple = param(
        default=(),
        doc="Columns of X constant within each series (one value per series, remembered from fit/update, "
        "so predict needs no X for them); fed to the network as constant channels.",
        constraint=Satisfies(_is_names, "a list of X column names"),
    )


@with_params_doc
class SSMForecaster(ForecasterParams, BaseForecaster):
    """Global probabilistic forecaster with a deep MIMO diagonal state-space backbone.

    One network is trained on windows pooled from every series of y (a single series, a
    panel or a hierarchy), so related series share what they have in common. It forecasts
    a grid of quantiles; the point forecast is the median.

    Notes
    -----
    Strategies. "direct": the features of the last context step (and, with X, the future X
    of all horizon steps, flattened) feed a linear head that predicts every step up to
    max(fh) at once; the requested steps are selected from these. "recursive": a
    one-step-ahead model, trained with teacher forcing; the context is read with the FFT
    and the forecast is rolled with the layer's step mode. The point forecast feeds back
    the median; quantiles are empirical quantiles of `n_sample_paths` paths that feed back
    draws from the predicted quantile grid (the same draws for every series and origin,
    fixed by random_state, so a series' quantiles do not depend on the rest of the batch).

    instance_norm, in the spirit of RevIN without learnable affine: the context and the
    targets of each window are shifted by a location of the context and divided by the
    context's standard deviation (per series and target channel), and forecasts are mapped
    back. The location is the network's prior, since weight decay pulls its outputs towards
    zero: True or "last" (an all-zero output is the naive "no change" forecast; trending and
    random-walk-like series), "mean" (the context's mean; mean-reverting series, RevIN's
    choice). False: global standardization with training statistics. X is always
    standardized with global training statistics.

    Quantiles not on the grid interpolate the sorted grid (sorting removes quantile
    crossing) piecewise linearly on the normal-score scale Phi^-1(alpha), extrapolating
    with the outermost segments. ensemble_size > 1 averages the members' quantile grids
    (the recursive strategy rolls every member separately and averages the members'
    medians and path quantiles). early_stopping holds out the latest validation_fraction of
    each series' windows.

    fh is needed in fit (the direct head's size is max(fh)); relative, absolute and
    non-contiguous horizons work, in-sample ones raise. With exogenous X, predict needs X
    for every step from 1 to max(fh) (X over the context is remembered from fit/update).
    update(update_params=False) only appends the new data and moves the cutoff: the next
    forecast reads the last context_length points, so it equals a fresh predict on the
    concatenated series with the same weights. historical_forecasts gives the forecasts of
    many such update + predict calls (a backtest from K cutoffs) in one batched forward;
    stream() updates a forecast one observation at a time.

    Covariates. Columns of X named in past_covariates are known only up to the cutoff
    (darts' past covariates): the network reads them over the context, and they are 0 in
    the horizon part of every training window and of every forecast, so neither fit nor
    predict reads them after a cutoff (predict's X may leave them out or hold anything
    there). The recursive strategy would need them at every step it rolls forward, so it
    refuses them. Columns named in static_covariates are constant within each series (one
    value per series, checked); they are remembered from fit/update, so predict's X may
    leave them out, and are fed as constant input channels.

    Missing values (NaN) in y and X. y: the normalization of each window uses its observed
    values only (the last observed value, their mean and spread); the gaps of its input are
    then carried forward, and set to the location (0 in normalized units) before the first
    observation; a missing target weighs nothing in the loss. A window is left out when a
    target channel has no observation in its context, and predict raises when the last
    context has none. X: gaps are carried forward from earlier rows of the series, then set
    to the training mean; the global statistics of y and X are over observed values.

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
        "capability:missing_values": True,
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

    def __post_init__(self):
        """sktime's hook after BaseForecaster.__init__ (the generated __init__ stored the parameters)."""
        super().__post_init__()
        # The base class creates these only when remember_data is on at construction;
        # creating them always lets set_config(remember_data=True) work afterwards.
        if not hasattr(self, "_y"):
            self._y, self._X = None, None

    # ------------------------------------------------------------ parameters
    @property
    def _strategy(self):
        return STRATEGIES[self.strategy]

    def _check_params(self) -> None:
        self.validate_params()
        self.backbone_kwargs()
        if self._strategy.causal_only and self.bidirectional:
            raise ValueError(
                f"strategy='recursive' rolls the forecast step by step and needs a causal backbone, "
                f"but bidirectional={self.bidirectional!r}; use bidirectional=False or strategy='direct'"
            )
        if self._strategy.causal_only and self.past_covariates:
            raise ValueError(
                f"strategy='recursive' feeds X of every step it rolls forward, but past_covariates="
                f"{list(self.past_covariates)} are unknown after the cutoff; use strategy='direct', or forecast "
                "the past covariates and pass them as ordinary X"
            )
        if self.irregular == "time_deltas" and (self.strategy != "recursive" or self.layer != "ssm"):
            raise ValueError(
                "irregular='time_deltas' steps the SSM by each observation's gap while rolling the forecast "
                f"to the requested times: it needs strategy='recursive' and layer='ssm', got "
                f"strategy={self.strategy!r}, layer={self.layer!r}"
            )
        norm_ = self.instance_norm
        self.window_location_ = ("last" if norm_ else None) if isinstance(norm_, (bool, np.bool_)) else norm_
        resolve_device(self.device)
        levels = np.unique(np.append(np.asarray(self.quantiles, dtype=np.float64).ravel(), 0.5))
        if levels.size < 2:
            raise ValueError("quantiles needs at least one level besides 0.5, to give intervals")
        self.quantile_levels_ = levels

    # ------------------------------------------------------------ data
    def _update_y_X(self, y, X):
        """sktime's hook before the cutoff moves (fit and update): check the time index first."""
        store = getattr(self, "_store", None)
        for key, part in split_instances(y):
            what = f"the time index of {key_name(key)}"
            check_regular_index(part.index, what, even=self.irregular == "refuse")
            if store and key in store:
                seen = store[key][0].index
                if part.index[-1] < seen[-1]:
                    raise ValueError(
                        f"update data for {key_name(key)} ends at {part.index[-1]}, before the cutoff {seen[-1]}: "
                        "update takes data that continues the series (revisions may overlap the past, but must "
                        "reach the cutoff)"
                    )
                # the part itself is checked above; when it continues the series, its junction is all that is new
                joined = seen[-2:].append(part.index) if part.index[0] > seen[-1] else seen.union(part.index)
                check_regular_index(joined, f"{what} with the update appended", even=self.irregular == "refuse")
        super()._update_y_X(y, X)

    def _split_xy(
        self, y: pd.DataFrame, X: pd.DataFrame | None
    ) -> list[tuple[tuple, pd.DataFrame, pd.DataFrame | None]]:
        """[(key, y part, X part or None)] with float values; X parts keep all their rows."""
        x_parts = dict(split_instances(X)) if X is not None else {}
        parts = []
        for key, y_part in split_instances(y):
            x_part = x_parts.get(key)
            if X is not None and x_part is None:
                raise ValueError(f"X has no rows for {key_name(key)} of y")
            parts.append((key, as_float(y_part, "y"), None if x_part is None else as_float(x_part, "X")))
        return parts

    def _x_rows(
        self, key: tuple, x_all: pd.DataFrame | None, times: pd.Index, what: str, future: bool = False
    ) -> np.ndarray:
        """Globally standardized X at `times`: (len(times), C_x); a clear error if time points are missing.

        Gaps (NaN) are carried forward from earlier rows of x_all, then set to the training
        mean (0); static columns hold the series' value. future: rows after the cutoff, where
        past-only columns are 0 whatever x_all holds (the network never sees them there).
        """
        needed = ~(self._x_past | self._x_static) if future else ~self._x_static
        if needed.any() and x_all is None:
            raise ValueError(
                f"{type(self).__name__} was fitted with exogenous X ({self.n_exog_} columns), so it needs X "
                f"for {what} of {key_name(key)}; pass X covering them"
            )
        missing = times[~times.isin(x_all.index)] if needed.any() else times[:0]
        if len(missing):
            shown = ", ".join(map(str, missing[:5])) + (" ..." if len(missing) > 5 else "")
            raise ValueError(
                f"X is missing {len(missing)} time point(s) needed for {what} of {key_name(key)}: {shown}; "
                f"{type(self).__name__} was fitted with exogenous X, so fit/update/predict must pass X covering them"
            )
        rows = (
            np.full((len(times), self.n_exog_), np.nan)
            if x_all is None
            else x_all.ffill().reindex(times).to_numpy(dtype=np.float64, copy=True)
        )
        rows[:, self._x_static] = self._statics[key]
        z = (rows - self.x_mean_) / self.x_scale_
        if future:
            z[:, self._x_past] = 0.0
        return np.where(np.isnan(z), 0.0, z)

    def _norm_stats(self, context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """context (n, C, c) -> shift, scale (n, C, 1): the window is normalized as (y - shift) / scale."""
        if self.window_location_ is None:
            shape = (context.shape[0], self.n_targets_, 1)
            return np.broadcast_to(self.y_mean_[:, None], shape), np.broadcast_to(self.y_scale_[:, None], shape)
        # Location: what a network that outputs zeros forecasts, a prior that matters on
        # short series, where weight decay pulls the outputs towards zero: the last value
        # ("no change", the naive forecast) or the context's mean. Scale: the context's spread.
        # Over the observed values only (callers ensure each channel has one): "last" is the
        # last observed value, mean and spread those of the observed values.
        observed = ~np.isnan(context)
        count = observed.sum(-1, keepdims=True)
        mean = np.where(observed, context, 0.0).sum(-1, keepdims=True) / count
        var = (np.where(observed, context - mean, 0.0) ** 2).sum(-1, keepdims=True) / count
        shift = mean if self.window_location_ == "mean" else fill_forward(context)[..., -1:]
        scale = np.sqrt(var + self.scale_floor_[:, None] ** 2)
        return shift, scale

    def _gaps(self, times: pd.Index, before=None) -> np.ndarray:
        """irregular='time_deltas': the gap into each time stamp in time units, (T, 1)."""
        t = time_values(times)
        return gaps_into(t, self.time_unit_, None if before is None else time_values(before)[-1])[:, None]

    def _series_windows(self, key: tuple, y_part: pd.DataFrame, x_all: pd.DataFrame | None, min_start: int = 0):
        x = self._x_rows(key, x_all, y_part.index, "the training windows") if self.n_exog_ else None
        past = self._x_past if self.n_exog_ else None
        if self.irregular == "time_deltas":
            # The gaps ride as the last "covariate": the recursive layout puts the gap into y_{p+1} at position p.
            gaps = self._gaps(y_part.index)
            x = gaps if x is None else np.concatenate([x, gaps], axis=1)
            past = None if past is None else np.append(past, False)
        return make_windows(
            y_part.to_numpy(),
            x,
            self.context_length,
            self.horizon_,
            self._strategy,
            self._norm_stats,
            min_start,
            past=past,
        )

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
        self._x_roles(X)

        c = self.context_length
        lengths = {key: len(y_part) for key, y_part, _ in parts}
        if max(lengths.values()) < c + 1:
            longest = max(lengths, key=lengths.get)
            raise ValueError(
                f"context_length={c} is longer than the series: training needs at least {c + 1} observations "
                f"(a context of {c} and one target), but {key_name(longest)} has {lengths[longest]}"
                + ("" if len(parts) == 1 else " (the longest series)")
            )
        if self.irregular == "time_deltas":
            # Gaps in units of a declared duration, or of the median spacing of all training series.
            index = parts[0][1].index
            spacing = np.concatenate([np.diff(time_values(p.index)) for _, p, _ in parts])
            self.time_unit_ = (
                time_unit_value(self.time_unit, index)
                if self.time_unit is not None
                else float(np.median(spacing))
                if spacing.size
                else 1.0
            )
            self.horizon_ = len(fh)  # training windows: this many observations ahead
        else:
            self.horizon_ = int(max(horizon_steps(fh, y_part.index).max() for _, y_part, _ in parts))

        values = np.concatenate([p.to_numpy() for _, p, _ in parts])
        self.y_mean_, self.y_scale_ = _column_statistics(values, list(y.columns), "y")
        # A constant context has std 0: the floor (a thousandth of the channel's global
        # spread) keeps the scaled targets finite without distorting ordinary windows.
        self.scale_floor_ = 1e-3 * self.y_scale_
        self._statics = {}
        if X is not None:
            for key, yp, xp in parts:
                absent = yp.index[~yp.index.isin(xp.index)]
                if len(absent):
                    raise ValueError(
                        f"X has no rows for {len(absent)} time point(s) of {key_name(key)} (first "
                        f"{absent[0]}); X must cover every time point of y (X-y must have the same index)"
                    )
                self._statics[key] = self._series_statics(key, xp)
            aligned = np.concatenate([xp.reindex(yp.index).to_numpy() for _, yp, xp in parts])
            self.x_mean_, self.x_scale_ = _column_statistics(aligned, list(X.columns), "X")

        windows = [self._series_windows(key, yp, xp) for key, yp, xp in parts]
        data = Windows.concat(windows)
        if data is None:
            raise ValueError(
                "y gives no training window: in every window a target channel has no observed value in its "
                f"context of {c} steps, or none of the window's targets is observed; fill long gaps or use a "
                "longer context_length"
            )
        # Remember what predict and update need: each series' tail and its X.
        self._store = {}
        for key, yp, xp in parts:
            self._remember(key, yp, xp)
        train, val = self._train_val(data, windows)
        self._train(train, val, network=self._build_network, epochs=self.max_epochs, seed=self._seed_)
        return self

    def _x_roles(self, X: pd.DataFrame | None) -> None:
        """Which columns of X are past-only and static: (C_x,) bool each, checked against X's columns."""
        columns = [] if X is None else list(X.columns)
        named = {"past_covariates": list(self.past_covariates), "static_covariates": list(self.static_covariates)}
        for what, names in named.items():
            unknown = [name for name in names if name not in columns]
            if unknown:
                raise ValueError(
                    f"{what} names {unknown}, which "
                    + (f"are not columns of X (its columns are {columns})" if X is not None else "needs X in fit")
                )
        both = sorted(set(named["past_covariates"]) & set(named["static_covariates"]))
        if both:
            raise ValueError(f"{both} are both past and static covariates; a column of X is one or the other")
        self._x_past = np.array([name in named["past_covariates"] for name in columns], dtype=bool)
        self._x_static = np.array([name in named["static_covariates"] for name in columns], dtype=bool)

    def _series_statics(self, key: tuple, x_part: pd.DataFrame | None) -> np.ndarray:
        """The static covariates of one series (S,): one value per column over its rows (NaN rows
        ignored), the remembered one where x_part has none; clear errors otherwise."""
        names = list(self._x_columns[self._x_static])
        known = self._statics.get(key)
        values = pd.DataFrame(columns=names, dtype=np.float64) if x_part is None else x_part.reindex(columns=names)
        counts = values.nunique()
        if (counts > 1).any():
            name = counts.index[int(np.argmax(counts.to_numpy() > 1))]
            raise ValueError(
                f"static covariate {name!r} varies within {key_name(key)} (values "
                f"{values[name].dropna().unique()[:3].tolist()} ...); a static covariate has one "
                "value per series"
            )
        value = values.max().to_numpy(dtype=np.float64)  # the one observed value; NaN where there is none
        if known is not None:
            changed = ~np.isnan(value) & (value != known)
            if changed.any():
                j = int(np.argmax(changed))
                raise ValueError(
                    f"static covariate {names[j]!r} of {key_name(key)} is {value[j]} in X, but was "
                    f"{known[j]} before; a static covariate has one value per series"
                )
            return known
        if np.isnan(value).any():
            j = int(np.argmax(np.isnan(value)))
            raise ValueError(
                f"static covariate {names[j]!r} is missing for {key_name(key)}: X has no value of it for this series"
            )
        return value

    def _build_network(self) -> ForecastEnsemble:
        C, Q = self.n_targets_, len(self.quantile_levels_)
        members = [  # drawn one after another from the seeded generator
            self._strategy.head(
                self.build_backbone(C + self.n_exog_),
                C,
                self.n_exog_,
                self.context_length,
                self.horizon_,
                Q,
                **({"time_deltas": True} if self.irregular == "time_deltas" else {}),
            )
            for _ in range(self.ensemble_size)
        ]
        return ForecastEnsemble(members)

    def _train(self, train, val, *, network, epochs: int, seed: int, resume: dict | None = None) -> None:
        """The one fit path; the fitted attributes change only when training succeeds."""
        loss = pinball_loss(torch.as_tensor(self.quantile_levels_, dtype=torch.float32))
        stop = EarlyStopping(self.n_iter_no_change, self.tol) if (self.early_stopping and val is not None) else None
        result = fit_model(
            network,
            train,
            loss,
            TrainerConfig.from_params(self),
            seed=seed,
            validation=val,
            early_stopping=stop,
            callbacks=self.callbacks or (),
            resume=resume,
            epochs=epochs,
            description=type(self).__name__,
        )
        self.model_, self.history_, self.training_state_ = result.model, result.history, result.state
        self.n_iter_ = len(result.history)

    def _train_val(self, data: Windows, windows: list) -> tuple[SequenceData, SequenceData | None]:
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
        if X is not None:
            X = X.reindex(columns=self._x_columns)  # static columns may be left out
        parts = self._split_xy(y, X)
        fine_tune = []
        for key, yp, xp in parts:
            old_y, old_x = self._store.get(key, (None, None))
            merged_y, merged_x = merge(old_y, yp), merge(old_x, xp)
            if self.n_exog_:
                self._statics[key] = self._series_statics(key, xp)
            if update_params and self.update_epochs:
                n_old = 0 if old_y is None else int((merged_y.index < yp.index[0]).sum())
                # windows whose targets reach the new observations
                first = max(0, n_old - self.context_length - self.horizon_ + 1)
                fine_tune.append(self._series_windows(key, merged_y, merged_x, min_start=first))
            self._remember(key, merged_y, merged_x)
        data = Windows.concat(fine_tune)
        if data is not None:
            # A handful of epochs on the newest windows, continuing the optimizer state.
            self._train(
                data.data(),
                None,
                network=copy.deepcopy(self.model_),
                epochs=self.update_epochs,
                seed=self._seed_ + len(self.history_),
                resume=self.training_state_,
            )
        return self

    # ------------------------------------------------------------ predict
    def _predict(self, fh, X=None):
        results = self._forecast(fh, X, alpha=None)
        return self._assemble([(key, times, point) for key, times, point, _ in results], self._y_columns)

    def _predict_quantiles(self, fh, X, alpha):
        alpha = quantile_probabilities(alpha)
        results = self._forecast(fh, X, alpha=alpha)
        # (k, C, A) -> columns ordered variable-major, as in _get_columns
        frames = [(key, times, q.reshape(len(times), -1)) for key, times, _, q in results]
        return self._assemble(frames, self._get_columns(method="predict_quantiles", alpha=list(alpha)))

    def _assemble(self, results, columns, names=None) -> pd.DataFrame:
        values = np.concatenate([v for _, _, v in results]) if results else np.zeros((0, len(columns)))
        if len(results) == 1 and results[0][0] == ():
            return pd.DataFrame(values, index=results[0][1], columns=columns)
        # level by level (from_tuples builds a Python tuple per row: slow for many origins)
        sizes = [len(times) for _, times, _ in results]
        keys = [
            pd.Index([key[i] for (key, _, _), size in zip(results, sizes) for _ in range(size)])
            for i in range(len(results[0][0]))
        ]
        times = results[0][1].append([t for _, t, _ in results[1:]])
        index = pd.MultiIndex.from_arrays([*keys, times], names=names or self._index_names)
        return pd.DataFrame(values, index=index, columns=columns)

    def _check_x_columns(self, X, method: str) -> None:
        if X is None:
            return
        if not self.n_exog_:
            raise ValueError(f"{type(self).__name__} was fitted without exogenous X, but X was passed to {method}")
        fitted, given = list(self._x_columns), list(X.columns)
        # remembered static values, and past-only ones (never read after the cutoff), need not be passed
        optional = self._x_static | (self._x_past if method == "predict" else False)
        required = [name for name, skip in zip(fitted, optional) if not skip]
        if given != [name for name in fitted if name in given] or not set(required) <= set(given):
            raise ValueError(
                f"X passed to {method} has columns {given}, but {type(self).__name__} was fitted with {fitted}"
                + (
                    f" (of which {[n for n, skip in zip(fitted, optional) if skip]} may be left out)"
                    if optional.any()
                    else ""
                )
            )

    def _contexts(self, fh, X):
        """Per series: key, context y (c, C), future times of the requested steps, the steps, X windows."""
        self._check_x_columns(X, "predict")
        x_new = dict(split_instances(X.reindex(columns=self._x_columns))) if X is not None else {}
        c, cutoff = self.context_length, self.cutoff[0]
        items = []
        for key, (tail, x_old) in self._store.items():
            history = tail[tail.index <= cutoff]
            if len(history) < c:
                raise ValueError(
                    f"context_length={c} is longer than the series: forecasting needs the last {c} observations, "
                    f"but {key_name(key)} has {len(history)}"
                )
            before = history.index[:-c] if len(history) > c else None
            history = history.iloc[-c:]
            self._check_observed(
                history.to_numpy(),
                f"the context of {key_name(key)} (its last {c} observations, up to {history.index[-1]})",
            )
            if self.irregular == "time_deltas":
                items.append(self._irregular_context(key, fh, history, before, x_old, x_new))
                continue
            steps = self._check_steps(horizon_steps(fh, history.index), key)
            x_ctx = x_future = None
            if self.n_exog_:
                # direct: the head reads X at all trained steps; recursive: up to the last requested one
                n_future = self._strategy.future_steps(self.horizon_, int(steps.max()))
                future = future_times(fh, history.index, range(1, n_future + 1))
                x_ctx, x_future = self._context_x(
                    key, x_old, x_new, history.index, future, f"the forecast steps 1..{n_future}"
                )
            items.append((key, history.to_numpy(), future_times(fh, history.index, steps), steps, x_ctx, x_future))
        return items

    def _check_observed(self, context: np.ndarray, where: str) -> None:
        """context (c, C): a forecast needs at least one observed value of every target column."""
        empty = np.isnan(context).all(0)
        if empty.any():
            raise ValueError(
                f"{where} has no observed value of {list(self._y_columns[empty])}; a forecast needs at "
                "least one: pass the missing values, or use a longer context_length"
            )

    def _check_steps(self, steps: np.ndarray, key: tuple) -> np.ndarray:
        if steps.min() < 1:
            raise ValueError(f"fh reaches into the observed data of {key_name(key)} (steps {steps.tolist()})")
        if steps.max() > self.horizon_:
            raise ValueError(
                f"fh needs {steps.max()} steps ahead for {key_name(key)}, but the network was trained for "
                f"{self.horizon_}; refit with this fh"
            )
        return steps

    def _context_x(self, key, x_old, x_new, context: pd.Index, future: pd.Index, what: str):
        """Standardized X over a context and at future times: (c, C_x), (k, C_x)."""
        xp = x_new.get(key)
        if xp is not None and self._x_static.any():
            self._series_statics(key, xp)  # values passed again must be the remembered ones
        # new values win where given (left-out columns are NaN, so they keep the remembered ones)
        x_all = x_old if xp is None else as_float(xp, "X").combine_first(x_old)[self._x_columns]
        if self._x_past.any():  # past-only columns are unknown after the cutoff, whatever X holds
            x_all = x_all.copy()
            x_all.loc[x_all.index > self.cutoff[0], self._x_columns[self._x_past]] = np.nan
        return self._x_rows(key, x_all, context, "the context"), self._x_rows(key, x_all, future, what, future=True)

    def _irregular_context(self, key, fh, history, before, x_old, x_new):
        """_contexts' item with irregular='time_deltas': every time stamp of fh is one rolled step; the
        gap channel follows X (the gap into each context step, then into each forecast time)."""
        try:
            future = fh.to_absolute_index(self.cutoff).sort_values()
        except Exception as error:  # sktime needs a freq for a relative fh on a DatetimeIndex
            raise ValueError(
                f"with irregular='time_deltas' give fh as the time stamps to forecast (an absolute "
                f"ForecastingHorizon); a relative fh has no time stamps here: {error}"
            ) from None
        if time_values(future)[0] <= time_values(history.index)[-1]:
            raise ValueError(
                f"fh reaches into the observed data of {key_name(key)}: forecasts start after {history.index[-1]}"
            )
        gaps = self._gaps(history.index.append(future), before)
        x_ctx, x_future = gaps[: len(history)], gaps[len(history) :]
        if self.n_exog_:
            xc, xf = self._context_x(key, x_old, x_new, history.index, future, "the forecast times")
            x_ctx, x_future = np.concatenate([xc, x_ctx], axis=1), np.concatenate([xf, x_future], axis=1)
        return key, history.to_numpy(), future, np.arange(1, len(future) + 1), x_ctx, x_future

    def _forecast(self, fh, X, alpha):
        """[(key, absolute times, point (k, C), quantiles (k, C, A) or None)] in original units."""
        items = self._contexts(fh, X)
        outputs = self._run([(ctx, steps, x_ctx, x_future) for _, ctx, _, steps, x_ctx, x_future in items], alpha)
        return [(item[0], item[2], point, q) for item, (point, q) in zip(items, outputs)]

    @torch.no_grad()
    def _run(self, items, alpha):
        """One batched forward for n forecasts: items [(context y (c, C), steps (k,), X context
        (c, C_x) or None, future X (n_future, C_x) or None)] ->
        [(point (k, C), quantiles (k, C, A) or None)] in original units."""
        device = resolve_device(self.device)
        model = self.model_ = on_device(self.model_, device)
        model.eval()
        levels = self.quantile_levels_
        median = int(np.flatnonzero(levels == 0.5)[0])
        context = np.stack([item[0].T for item in items])  # (n, C, c)
        shift, scale = self._norm_stats(context)
        exog = self.n_exog_ or self.irregular == "time_deltas"  # the gaps travel as the last covariate
        ctx = Contexts(
            impute((context - shift) / scale),  # gaps carried forward
            np.stack([item[2].T for item in items]) if exog else None,
            [item[3] for item in items] if exog else None,
            int(max(item[1].max() for item in items)),
        )
        shift_t, scale_t = np.transpose(shift, (0, 2, 1)), np.transpose(scale, (0, 2, 1))  # (n, 1, C)
        results = []
        if self.strategy == "direct":
            grid, _ = self._strategy.forecast(model, ctx, self.horizon_, device)
            grid = grid * scale_t[..., None] + shift_t[..., None]  # (n, H, C, Q)
            for i, (_, wanted, _, _) in enumerate(items):
                g = grid[i, wanted - 1]
                results.append((g[..., median], None if alpha is None else interpolate_quantiles(g, levels, alpha)))
            return results
        point, paths = self._strategy.forecast(
            model,
            ctx,
            self.horizon_,
            device,
            median=median,
            levels=levels,
            n_paths=0 if alpha is None else self.n_sample_paths,
            seed=self._seed_,
        )
        point = point * scale_t + shift_t
        if paths is not None:
            paths = paths * scale_t[:, None, None] + shift_t[:, None, None]  # (n, P, members, S, C)
        for i, (_, wanted, _, _) in enumerate(items):
            q = None
            if paths is not None:
                # each member's path quantiles, averaged over the members: (k, C, A)
                q = np.moveaxis(np.quantile(paths[i][:, :, wanted - 1], alpha, axis=0).mean(1), 0, -1)
            results.append((point[i, wanted - 1], q))
        return results

    # ------------------------------------------------------------ many origins, streaming
    def _relative_steps(self, fh) -> tuple[ForecastingHorizon, np.ndarray]:
        """fh (None: the fitted one) as relative steps ahead of every origin."""
        if fh is None:
            fh = self.fh if self.fh.is_relative else self.fh.to_relative(self.cutoff)
        elif not isinstance(fh, ForecastingHorizon):
            fh = ForecastingHorizon(fh)
        if not fh.is_relative:
            raise ValueError(
                "historical_forecasts and stream need a relative fh (steps ahead of each origin, "
                f"e.g. [1, 2, 3]), got the absolute {list(fh.to_pandas())}"
            )
        return fh, np.asarray(fh.to_pandas(), dtype=np.int64)

    def historical_forecasts(self, y, X=None, cutoffs=None, fh=None, alpha=None) -> pd.DataFrame:
        """Forecasts from many origins of y with the fitted weights, in one batched forward.

        Forecast k of the result equals ``update(y up to cutoffs[k], update_params=False)``
        followed by ``predict(fh)`` (sktime's ``evaluate(..., strategy="no-update_params")``),
        without moving this forecaster: the K context windows of every series (and, for
        strategy="recursive", their roll) go through the network as one batch.

        y: a series or panel like fit's, with the observations up to the last cutoff (a
        series' context is its last context_length points at or before a cutoff). X: its
        exogenous X, covering the contexts and the forecast steps after each cutoff.
        cutoffs: time points (None: every point of each series with a full context before it).
        fh: relative steps (None: the fitted fh). alpha: quantile levels (None: point forecasts).

        Returns a frame indexed by (instance levels..., "cutoff", time): y's columns, or with
        alpha the columns of predict_quantiles.
        """
        self.check_is_fitted()
        if self.irregular == "time_deltas":
            raise ValueError(
                "historical_forecasts forecasts relative steps from each cutoff, which an irregular "
                "time index (irregular='time_deltas') does not have; use update + predict with "
                "the time stamps as fh"
            )
        fh, _ = self._relative_steps(fh)
        if alpha is not None:
            alpha = quantile_probabilities(alpha)
        y = y.to_frame() if isinstance(y, pd.Series) else y
        X = X.to_frame() if isinstance(X, pd.Series) else X
        if y.shape[1] != self.n_targets_:
            raise ValueError(f"y has {y.shape[1]} columns, but {type(self).__name__} was fitted with {self.n_targets_}")
        self._check_x_columns(X, "historical_forecasts")
        if X is not None:
            X = X.reindex(columns=self._x_columns)  # left-out static columns: the remembered values
        c = self.context_length
        items, labels = [], []
        for key, yp, xp in self._split_xy(y, X):
            index = yp.index
            check_regular_index(index, f"the time index of {key_name(key)}")
            steps = self._check_steps(horizon_steps(fh, index), key)
            n_future = self._strategy.future_steps(self.horizon_, int(steps.max()))
            if cutoffs is None:
                positions = np.arange(c - 1, len(index))
                asked = index[positions]
            else:
                asked = cutoffs if isinstance(cutoffs, pd.Index) else pd.Index(list(np.atleast_1d(cutoffs)))
                # as update + predict: a series' origin is its last observation at or before the cutoff
                positions = index.searchsorted(asked, side="right") - 1
            short = np.flatnonzero(positions < c - 1)
            if len(short):
                raise ValueError(
                    f"cutoff {asked[short[0]]} leaves {key_name(key)} "
                    f"{max(positions[short[0]] + 1, 0)} observation(s), "
                    f"but a forecast reads a context of context_length={c}; its first possible cutoff is {index[c - 1]}"
                )
            # A regular index: the time of step s after position p is full[p + s].
            full = index.append(future_times(fh, index, range(1, n_future + 1)))
            values = yp.to_numpy()
            x_ctx = x_fut = None
            if self.n_exog_:
                if self._x_static.any() and key not in self._statics:
                    raise ValueError(
                        f"{key_name(key)} was not seen in fit or update, so its static covariates are "
                        "unknown; update the forecaster with it first"
                    )
                # context rows read every column; forecast steps never the past-only ones
                in_ctx, in_fut = np.zeros(len(full), dtype=bool), np.zeros(len(full), dtype=bool)
                for p in positions:
                    in_ctx[p - c + 1 : p + 1] = True
                    in_fut[p + 1 : p + n_future + 1] = True
                x_ctx, x_fut = np.full((len(full), self.n_exog_), np.nan), np.full((len(full), self.n_exog_), np.nan)
                x_ctx[in_ctx] = self._x_rows(key, xp, full[in_ctx], "the contexts of the cutoffs")
                x_fut[in_fut] = self._x_rows(key, xp, full[in_fut], "the forecast steps of the cutoffs", future=True)
            for label, p in zip(asked, positions):
                context = values[p - c + 1 : p + 1]
                self._check_observed(
                    context, f"the context of {key_name(key)} at cutoff {label} (its last {c} observations)"
                )
                items.append(
                    (
                        context,
                        steps,
                        None if x_ctx is None else x_ctx[p - c + 1 : p + 1],
                        None if x_fut is None else x_fut[p + 1 : p + 1 + n_future],
                    )
                )
                labels.append(((*key, label), full[p + steps]))
        if not items:
            raise ValueError("historical_forecasts got no cutoffs")
        outputs = self._run(items, alpha)
        names = [*self._index_names[:-1], "cutoff", self._index_names[-1]]
        if alpha is None:
            return self._assemble(
                [(k, t, point) for (k, t), (point, _) in zip(labels, outputs)], self._y_columns, names
            )
        frames = [(k, t, q.reshape(len(t), -1)) for (k, t), (_, q) in zip(labels, outputs)]
        return self._assemble(frames, self._get_columns(method="predict_quantiles", alpha=list(alpha)), names)

    def stream(self, instance=None, fh=None) -> "ForecastStream":
        """A streaming forecaster from the current cutoff: one observation at a time, the
        forecast updated each step; see ssmts.sktime.ForecastStream. instance: the key of a
        panel's series (None for a single series); fh: relative steps (None: the fitted fh)."""
        from ._streaming import ForecastStream

        self.check_is_fitted()
        return ForecastStream(self, instance, fh)

    # ------------------------------------------------------------ persistence
    def __getstate__(self):
        return pickle_state(self)  # model_ on the CPU

    # ------------------------------------------------------------ testing
    @classmethod
    def get_test_params(cls, parameter_set="default"):
        """Three tiny configurations (direct / recursive ensemble of two / recursive on a diagonal-plus-low-rank
        LinearCDE block, which rolls forward with the layer's `step`) that fit in well under a second."""
        tiny = dict(
            d_model=8,
            d_state=4,
            n_layers=1,
            max_epochs=2,
            batch_size=16,
            device="cpu",
            update_epochs=1,
            quantiles=(0.1, 0.5, 0.9),
        )
        return [
            {**tiny, "context_length": 4, "random_state": 0},
            {
                **tiny,
                "context_length": 5,
                "strategy": "recursive",
                "instance_norm": False,
                "n_sample_paths": 16,
                "ensemble_size": 2,
                "random_state": 1,
            },
            {
                **tiny,
                "context_length": 4,
                "strategy": "recursive",
                "n_sample_paths": 8,
                "random_state": 2,
                "layer": "lncde",
                "lncde_structure": "dplr",
            },
        ]
