"""SSMForecaster: a global, probabilistic deep-SSM forecaster with the sktime interface.

Data flow (one network for every series of a panel or hierarchy):

    y (T_i, C_y), X (T_i, C_x) per series
      -> all windows of context_length + horizon steps, pooled over the series  (_windows)
      -> per-window normalization of y (normalize), global standardization of X
      -> a forecast head (ssmts.nn.heads) per strategy                           (_strategies)
      -> pinball loss, trained through ssmts.training.fit_model
    predict: the last context of each series, one batched pass, quantiles in y's units (_predict)

This module is the sktime plumbing: parameters, fit and update, the network; docs/architecture.md
lists the modules beside it.
"""

from __future__ import annotations

import uuid
import warnings
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd
import torch
from sktime.forecasting.base import BaseForecaster
from sktime.utils.validation.forecasting import check_fh

from .._warnings import caller_stacklevel
from ..estimators._base import NetworkFitMixin
from ..nn import ForecastEnsemble
from ..training import (
    BackboneParams,
    EarlyStoppingParams,
    OptimizerParams,
    SequenceData,
    predict_batches,
    resolve_device,
)
from ..training.config import Integer, NoneOr, Options, Satisfies, _is_int, param, with_params_doc
from ..training.fit import pickle_state
from ..training.objectives import pinball_loss
from ..training.params import _same
from ._backtest import historical_forecasts
from ._combine import RULES, CombinationMixin
from ._covariates import CovariatesMixin
from ._export import ForecasterExportMixin
from ._persistence import ForecasterPersistenceMixin
from ._predict import ForecastPredictMixin
from ._pretrained import PretrainedMixin
from ._strategies import (
    FORECAST_BATCH,
    STRATEGIES,
    conformal_widening,
)
from ._windows import (
    Windows,
    as_float,
    check_gaps,
    check_regular_index,
    check_time_order,
    column_statistics,
    gaps_into,
    key_name,
    make_windows,
    merge,
    pad_front,
    quantile_levels,
    seasonal_period,
    split_instances,
    time_differences,
    time_unit_value,
    window_location,
    window_scaling,
)
from ._windows import steps as horizon_steps

if TYPE_CHECKING:
    from ._streaming import ForecastStream

WINDOW_NORMALIZATIONS = ("last", "mean", "drift")  # True means "last"
CONTEXT_SEASONS = 3
DEFAULT_QUANTILES = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)


def _is_quantile_grid(value) -> bool:
    try:
        levels = np.asarray(value, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        return False
    return levels.size > 0 and bool(np.all(np.isfinite(levels) & (levels > 0) & (levels < 1)))


def _is_context_length(value) -> bool:
    return value == "auto" or (_is_int(value) and value >= 1)


def auto_context_length(lengths, horizon: int, season: int) -> int:
    """context_length='auto': CONTEXT_SEASONS x max(horizon, season), at most half the median series
    length (shorter series are padded), at least 2."""
    bound = int(np.median(lengths)) // 2
    return int(max(2, min(CONTEXT_SEASONS * max(horizon, season), bound)))


def _is_time_unit(value) -> bool:
    if value is None or isinstance(value, (str, pd.Timedelta)):
        return True
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) and value > 0


def _is_names(value) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


class ForecasterParams(BackboneParams, OptimizerParams, EarlyStoppingParams):
    """The forecaster's own parameters; it takes the backbone and training groups too (with
    defaults for short series) but not pooling, warm_start or sample_rate; its normalize scales each
    window by its own context, where the sequence estimators' scales channels or series."""

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
        # Panels of many series give thousands of windows: bound the run in steps, not epochs. On the
        # development panels 16000 steps (fertility: 43 epochs) beat 2000, 4000, 8000 and 32000.
        "max_steps": 16000,
    }
    context_length: int | str = param(
        default="auto",
        doc="Steps of history the network reads, or 'auto': CONTEXT_SEASONS times the longer of the "
        "horizon and the seasonal period, at most half the median series length (context_length_ holds the "
        "choice). Series shorter than a context and horizon are padded at the front with missing values.",
        constraint=Satisfies(_is_context_length, "a positive int or 'auto'"),
    )
    sp: int | None = param(
        default=None,
        doc="Seasonal period in steps (12 for monthly data with a yearly pattern); None: from the time "
        "index's frequency (yearly 1, quarterly 4, monthly 12, weekly 52, daily 7, hourly 24, else 1). "
        "Used by context_length='auto'.",
        constraint=NoneOr(Integer(1)),
    )
    strategy: Literal["direct", "recursive"] = param(
        default="direct",
        doc="'direct': one head emits every horizon step; 'recursive': one-step-ahead model rolled with "
        "the step mode (needs bidirectional=False).",
        constraint=Options(*STRATEGIES),
    )
    normalize: bool | str = param(
        default=True,
        doc="Input scaling, per window (instance normalization, as RevIN): True/'last' (location = last "
        "context value), 'mean', 'drift' (the line through the last value with the context's average slope: "
        "the network forecasts the residual from the drift forecast; strategy='direct'), or False (global "
        "standardization).",
        constraint=Options(True, False, *WINDOW_NORMALIZATIONS),
    )
    instance_norm: bool | str | None = param(
        default=None,
        doc="Deprecated: the former name of normalize (it warns, and will be removed in the next release).",
        constraint=NoneOr(Options(True, False, *WINDOW_NORMALIZATIONS)),
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
    calibration: Literal["conformal", "none"] = param(
        default="none",
        doc="'conformal': the intervals are calibrated on the windows early_stopping holds out (split "
        "conformal quantile regression per horizon step; strategy='direct'), so that an interval at "
        "level p covers about p of them; 'none': the quantile head's grid as trained (the default: on the "
        "development panels calibration did not improve the coverage of later outcomes).",
        constraint=Options("conformal", "none"),
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
        "series), a number (in the index's units; nanoseconds for a DatetimeIndex of any resolution) or a "
        "duration such as '1h' (DatetimeIndex). Each SSM step takes Delta times its gap in these units, so a "
        "time_unit that puts the median training gap outside 1e-6..1e6 units is refused.",
        constraint=Satisfies(_is_time_unit, "None, a positive number or a duration string"),
    )
    pretrained: bool | str = param(
        default=False,
        doc="Start from the network shipped with ssmts, trained on a large corpus of synthetic and "
        "packaged series: True or 'zero-shot' (no gradient steps: fit only reads the series' tails and "
        "statistics, and update never fine-tunes), 'fine-tune' (trains from those weights with the training "
        "parameters; lr, lr_ssm and max_steps left at their defaults take the smaller 1e-4, 1e-4 and 2000), False "
        "(trains from scratch). The weights fix the backbone, context_length, quantiles, "
        "strategy, normalize and ensemble_size: left at their defaults these take the pretrained values "
        "(pretrained_params_), set to others they are refused. Univariate y without X; max(fh) at most the "
        "pretrained horizon.",
        constraint=Options(False, True, "zero-shot", "fine-tune"),
    )
    pretrained_weights: str | None = param(
        default=None,
        doc="With pretrained: a weights file written by `python -m ssmts.bench pretrain` (None: the weights "
        "shipped with ssmts).",
        constraint=NoneOr(Satisfies(lambda v: isinstance(v, str), "a path")),
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
    combine: Literal["none", "validation"] = param(
        default="none",
        doc="'none': the network's forecasts. 'validation': the network combined, per series, with AutoETS and "
        "Theta fitted to that series, weighted by how each forecast the series' own last combine_windows "
        "windows of max(fh) steps (held out in fit: a copy of the network trained on the data before them, "
        "the classical models refitted at each window's origin); the quantiles combined with the same weights "
        "and widened by split-conformal calibration on those windows where they under-cover. Needs "
        "statsmodels. See validation_errors_, combination_weights_.",
        constraint=Options("none", "validation"),
    )
    combine_rule: Literal["inverse_error", "select", "median", "calibrate"] = param(
        default="inverse_error",
        doc="combine='validation': 'inverse_error' (weights proportional to 1 / each forecast's MAE on the "
        "held-out windows), 'select' (all weight to the lowest MAE), 'median' (the median of the three "
        "forecasts and quantile grids; the windows then only calibrate the intervals) or 'calibrate' (the "
        "network's own forecasts; the windows only widen its intervals where they under-cover).",
        constraint=Options(*RULES),
    )
    combine_windows: int = param(
        default=2,
        doc="combine='validation': windows of max(fh) steps held out at the end of each series (fewer where "
        "a series is too short to keep 8 observations, and a horizon, before them; none: the series takes "
        "the weights of the panel's other series pooled, or equal weights).",
        constraint=Integer(1),
    )
    static_covariates: tuple = param(
        default=(),
        doc="Columns of X constant within each series (one value per series, remembered from fit/update, "
        "so predict needs no X for them); fed to the network as constant channels.",
        constraint=Satisfies(_is_names, "a list of X column names"),
    )


@with_params_doc
class SSMForecaster(
    ForecasterParams,
    CombinationMixin,
    NetworkFitMixin,
    CovariatesMixin,
    ForecasterPersistenceMixin,
    ForecasterExportMixin,
    PretrainedMixin,
    ForecastPredictMixin,
    BaseForecaster,
):
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

    normalize, in the spirit of RevIN without learnable affine: the context and the
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

    Combination with classical forecasts (combine="validation"). A network trained on a few
    hundred points wins some series by a wide margin and loses others to exponential smoothing;
    the series' own recent past says which. fit holds out each series' last combine_windows
    windows of max(fh) steps, trains a copy of the network (validation_network_) on the data
    before them (purged: every series is cut before its own first held-out window) and forecasts
    each window from its origin with those weights; AutoETS and Theta (sktime's, seasonal with
    period sp_ where a series holds two seasons) are refitted at each origin. Each forecast's MAE
    on the windows (validation_errors_) sets per-series weights (combination_weights_) by
    combine_rule; series too short to hold out a window take the weights of the panel's pooled,
    MASE-scaled errors (equal weights for a lone short series). The point forecast is the weighted
    sum of the three; the quantiles are averaged with the same weights around each forecast's
    point (a component without intervals lends the network's spread), then each central interval
    is widened by split-conformal calibration on the held-out windows where it under-covers them
    (combination_widening_: the widening of each level, in units of the interval's width; never
    narrower). Then the network (this forecaster's own, as with combine="none") and the classical
    models are fitted on all the data. update passes the new observations to the classical models
    (sktime's update) and keeps the weights. The route of M4's winner (ES-RNN, exponential
    smoothing and a recurrent network in one model) and of FFORMA (per-series weights of classical
    forecasts), simplified: the weights come from each series' own held-out windows, not from a
    learned model. historical_forecasts, stream, export and the safetensors format hold the
    network alone and refuse a combining forecaster.

    Missing values (NaN) in y and X. y: the normalization of each window uses its observed
    values only (the last observed value, their mean and spread); the gaps of its input are
    then carried forward, and set to the location (0 in normalized units) before the first
    observation; a missing target weighs nothing in the loss. A window is left out when a
    target channel has no observation in its context, and predict raises when the last
    context has none. X: gaps are carried forward from earlier rows of the series, then set
    to the training mean; the global statistics of y and X are over observed values.

    Saving. ``save("forecaster.safetensors")`` writes the pickle-free format of the
    scikit-learn estimators (weights, the stored tail of every series and the fitted state,
    under a checksum), which ``SSMForecaster.load`` reads without running code from it; other
    paths keep sktime's own (pickled) format. See the sktime guide.

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

    # ------------------------------------------------------------ all or nothing
    def fit(self, y, X=None, fh=None):
        """Fit to y (and X) for the horizon fh; on any failure or interruption the forecaster is left
        as it was (the previous fit, or none)."""
        check_time_order(y, "y")
        check_time_order(X, "X")
        with self._all_or_nothing():
            super().fit(y, X=X, fh=fh)
            self._fit_id_ = uuid.uuid4().hex  # streams opened before a refit are stale
        return self

    def update(self, y, X=None, update_params=True):
        """Append new observations (and fine-tune with update_params); on any failure or interruption
        the forecaster is left as it was, its cutoff included."""
        check_time_order(y, "y")
        check_time_order(X, "X")
        with self._all_or_nothing():
            super().update(y, X=X, update_params=update_params)
        return self

    @contextmanager
    def _all_or_nothing(self):
        saved = dict(self.__dict__)
        # the containers that update changes in place
        kept = {name: dict(saved[name]) for name in ("_store", "_statics") if isinstance(saved.get(name), dict)}
        try:
            yield
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            self.__dict__.update(kept)
            raise

    # ------------------------------------------------------------ parameters
    @property
    def _strategy(self):
        return STRATEGIES[self.strategy]

    @property
    def _normalize(self):
        """normalize, or the value given under its former name instance_norm."""
        return self.normalize if self.instance_norm is None else self.instance_norm

    def _check_params(self) -> None:
        """The checks across the forecaster's own parameters (the shared ones: _start_fit)."""
        if self.instance_norm is not None:
            if not _same(self.normalize, type(self).__params__["normalize"].default):
                raise ValueError(
                    f"instance_norm={self.instance_norm!r} and normalize={self.normalize!r} name one setting "
                    "(instance_norm is normalize's former name): set normalize only"
                )
            warnings.warn(
                f"SSMForecaster(instance_norm={self.instance_norm!r}) is now normalize={self.instance_norm!r}; "
                "instance_norm will be removed in the next release",
                FutureWarning,
                stacklevel=caller_stacklevel(),
            )
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
        if self._normalize == "drift" and self.strategy != "direct":
            raise ValueError(
                "normalize='drift' maps every horizon step back with its own point of the drift line: it "
                f"needs strategy='direct', got strategy={self.strategy!r}"
            )
        if self.irregular == "time_deltas" and (self.strategy != "recursive" or self.layer != "ssm"):
            raise ValueError(
                "irregular='time_deltas' steps the SSM by each observation's gap while rolling the forecast "
                f"to the requested times: it needs strategy='recursive' and layer='ssm', got "
                f"strategy={self.strategy!r}, layer={self.layer!r}"
            )
        if quantile_levels(self.quantiles).size < 2:
            raise ValueError("quantiles needs at least one level besides 0.5, to give intervals")
        if self.combine != "none" and self.irregular == "time_deltas":
            raise ValueError(
                "combine='validation' combines with AutoETS and Theta, which need a regular time index; with "
                "irregular='time_deltas' use combine='none'"
            )

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

    def _check_fh(self, fh, pred_int=False):
        """sktime's fh check, except with irregular='time_deltas': fh is then the time stamps to forecast,
        which move on with every update, and fit's fh only sets how many observations ahead the windows
        train; so a new fh replaces the last (sktime refuses any fh but fit's), and fit and predict check
        per series that it lies after the data (sktime's check counts periods of a freq the index lacks)."""
        if self.irregular != "time_deltas" or (fh is None and not self.is_fitted):
            return super()._check_fh(fh, pred_int)
        if fh is not None:
            self._fh = check_fh(fh, freq=self._cutoff)
        return self._fh

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

    def _norm_stats(self, context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """context (n, C, c) -> (shift, scale) of its windows (`window_scaling` with the fitted statistics)."""
        return window_scaling(
            context, self.window_location_, self.horizon_, self.y_mean_, self.y_scale_, self.scale_floor_
        )

    def _gaps(self, times: pd.Index, where: str, before: pd.Index | None = None) -> np.ndarray:
        """irregular='time_deltas': the gap into each time stamp in time units, (T, 1)."""
        gaps = gaps_into(times, self.time_unit_, before)
        check_gaps(gaps, self.time_unit, where)
        return gaps[:, None]

    def _series_windows(self, key: tuple, y_part: pd.DataFrame, x_all: pd.DataFrame | None, min_start: int = 0):
        x = self._x_rows(key, x_all, y_part.index, "the training windows") if self.n_exog_ else None
        past = self._x_past if self.n_exog_ else None
        if self.irregular == "time_deltas":
            # The gaps ride as the last "covariate": the recursive layout puts the gap into y_{p+1} at position p.
            gaps = self._gaps(y_part.index, f"the time index of {key_name(key)}")
            x = gaps if x is None else np.concatenate([x, gaps], axis=1)
            past = None if past is None else np.append(past, False)
        y_values = y_part.to_numpy()
        if self.irregular != "time_deltas":
            # A series shorter than a context and horizon gives the windows of one that long whose
            # first values are missing: its contexts are normalized over what was observed.
            full = self.context_length_ + self.horizon_
            y_values = pad_front(y_values, full, np.nan)
            x = None if x is None else pad_front(x, full, 0.0)
            if len(y_values) > len(y_part):
                min_start = 0  # all of it is no longer than one window
        return make_windows(
            y_values,
            x,
            self.context_length_,
            self.horizon_,
            self._strategy,
            self._norm_stats,
            min_start,
            past=past,
        )

    # ------------------------------------------------------------ fit
    def _fit(self, y, X, fh):
        self._start_fit()
        self._check_params()
        pretrained = self._read_pretrained(y, X) if self.pretrained is not False else None
        if pretrained is not None:
            self.window_location_ = pretrained[0]["window_location"]
            self.quantile_levels_ = np.asarray(pretrained[0]["quantile_levels"], dtype=np.float64)
        else:
            self.window_location_ = window_location(self._normalize)
            self.quantile_levels_ = quantile_levels(self.quantiles)
        parts = self._split_xy(y, X)
        self.n_targets_ = y.shape[1]
        self.n_exog_ = 0 if X is None else X.shape[1]
        self._y_columns = y.columns
        self._index_names = list(y.index.names)
        self._x_columns = None if X is None else X.columns
        self._x_roles(X)

        lengths = {key: len(y_part) for key, y_part, _ in parts}
        if self.irregular == "time_deltas":
            # Gaps in units of a declared duration, or of the median spacing of all training series.
            index = parts[0][1].index
            spacing = np.concatenate([time_differences(p.index) for _, p, _ in parts])
            self.time_unit_ = (
                time_unit_value(self.time_unit, index)
                if self.time_unit is not None
                else float(np.median(spacing))
                if spacing.size
                else 1.0
            )
            with np.errstate(over="ignore"):  # an extreme time_unit, refused just below
                gaps = spacing / self.time_unit_
            check_gaps(gaps, self.time_unit, "the training series", scale=True)
            for key, y_part, _ in parts:  # sktime's fh check skips this (_check_fh)
                self._forecast_times(fh, key, y_part.index[-1])
            self.horizon_ = len(fh)  # training windows: this many observations ahead
        else:
            self.horizon_ = int(max(horizon_steps(fh, y_part.index).max() for _, y_part, _ in parts))
        requested_horizon = self.horizon_  # max(fh) in steps (a pretrained network's horizon may be longer)
        self._classical = None  # combine="validation": the classical models, set once the network is fitted
        self.sp_ = self.sp if self.sp is not None else seasonal_period(parts[0][1].index)
        if pretrained is not None:
            meta = pretrained[0]
            if self.horizon_ > meta["horizon"]:
                raise ValueError(
                    f"the pretrained network forecasts up to {meta['horizon']} steps ahead, but max(fh) is "
                    f"{self.horizon_}; forecast fewer steps, or train from scratch (pretrained=False)"
                )
            self.horizon_, self.context_length_ = meta["horizon"], meta["context_length"]
        elif self.context_length == "auto":
            self.context_length_ = auto_context_length(list(lengths.values()), self.horizon_, self.sp_)
        else:
            self.context_length_ = int(self.context_length)
        c = self.context_length_
        if self.irregular == "time_deltas" and max(lengths.values()) < c + 1:
            longest = max(lengths, key=lengths.get)
            raise ValueError(
                f"context_length={c} is longer than the series: training needs at least {c + 1} observations "
                f"(a context of {c} and one target), but {key_name(longest)} has {lengths[longest]}"
                + ("" if len(parts) == 1 else " (the longest series)")
            )

        values = np.concatenate([p.to_numpy() for _, p, _ in parts])
        self.y_mean_, self.y_scale_ = column_statistics(values, list(y.columns), "y")
        # A constant context at level 0 has std 0 and no level: this floor (a thousandth of the channel's
        # global spread) keeps its scaled targets finite (other windows: _norm_stats).
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
            self.x_mean_, self.x_scale_ = column_statistics(aligned, list(X.columns), "X")

        windows = [] if self._zero_shot else [self._series_windows(key, yp, xp) for key, yp, xp in parts]
        data = Windows.concat(windows)
        if data is None and not self._zero_shot:
            raise ValueError(
                "y gives no training window: in every window a target channel has no observed value in its "
                f"context of {c} steps, or none of the window's targets is observed; fill long gaps or use a "
                "longer context_length"
            )
        # Remember what predict and update need: each series' tail and its X.
        self._store = {}
        for key, yp, xp in parts:
            self._remember(key, yp, xp)
        if self._zero_shot:
            self.model_, self.history_, self.training_state_, self.n_iter_ = (
                self._pretrained_network(*pretrained),
                [],
                None,
                0,
            )
            self.interval_widening_ = None
            if self.combine != "none":
                self._fit_combination(y, X, requested_horizon)
            return self
        train, val = self._train_val(data, windows)
        network = self._build_network if pretrained is None else self._pretrained_network(*pretrained)
        # epochs: max_epochs within min_steps..max_steps
        self._train_network(network, train, self._loss(), validation=val, settings=self._fine_tune_settings())
        self.interval_widening_ = self._conformal_widening(val)
        if self.combine != "none":
            self._fit_combination(y, X, requested_horizon)
        return self

    def _conformal_widening(self, held_out: SequenceData | None) -> np.ndarray | None:
        """Split-conformal calibration of the quantile grid (conformalized quantile regression) on
        the windows held out from training: (H, Q) amounts, in normalized units, by which each grid
        level moves away from the median (negative: towards it) so that the central interval of
        every symmetric pair of levels (l, 1 - l) covers 1 - 2l of the held-out targets at each
        horizon step. None without held-out windows, with calibration='none' or the recursive strategy;
        0 for a pair whose held-out windows are too few to calibrate it ((n + 1)(1 - 2l) > n)."""
        if held_out is None or self.calibration == "none" or self.strategy != "direct":
            return None
        inputs = SequenceData(held_out.x)
        device = resolve_device(self.device)
        out = predict_batches(self.model_, inputs, FORECAST_BATCH, device).double().numpy()
        grid = np.sort(out, axis=-1).mean(1)  # (n, H, C, Q), as predict forms it
        target, observed = held_out.y.double().numpy(), held_out.weight.numpy() > 0
        return conformal_widening(grid, target, observed, self.quantile_levels_)

    def _build_network(self, spec: ForecasterParams | None = None) -> ForecastEnsemble:
        """The fitted sizes' network, of the parameters of `spec` (default: this forecaster's; a pretrained
        network's are those of its weights)."""
        spec = self if spec is None else spec
        C, Q = self.n_targets_, len(self.quantile_levels_)
        members = [  # drawn one after another from the seeded generator
            spec._strategy.head(
                spec.build_backbone(C + self.n_exog_),
                C,
                self.n_exog_,
                self.context_length_,
                self.horizon_,
                Q,
                **({"time_deltas": True} if self.irregular == "time_deltas" else {}),
            )
            for _ in range(spec.ensemble_size)
        ]
        return ForecastEnsemble(members)

    def _loss(self):
        return pinball_loss(torch.as_tensor(self.quantile_levels_, dtype=torch.float32))

    def _train_val(self, data: Windows, windows: list) -> tuple[SequenceData, SequenceData | None]:
        if not self.early_stopping:
            return data.data(), None
        # Temporal hold-out: the latest validation_fraction of each series' windows. The training windows
        # whose targets reach the held-out targets are left out of both (purged), so that neither early
        # stopping nor the conformal calibration scores targets the network was trained on.
        is_val, is_train, offset = np.zeros(len(data.x), dtype=bool), np.ones(len(data.x), dtype=bool), 0
        for w in windows:
            if w is None:
                continue
            n = len(w.x)
            n_val = int(round(self.validation_fraction * n))
            if n >= 2 and n_val >= 1:
                held = np.argsort(w.end, kind="stable")[-n_val:]
                is_val[offset + held] = True
                first_held_target = w.end[held].min() - self.horizon_ + 1
                is_train[offset : offset + n] = w.end < first_held_target
            offset += n
        if not is_val.any() or not is_train.any():
            raise ValueError(
                f"early_stopping needs validation windows and training windows before them, but the series give "
                f"{len(data.x)} window(s); use longer series, another validation_fraction or early_stopping=False"
            )
        return data.data(np.flatnonzero(is_train)), data.data(np.flatnonzero(is_val))

    def _remember(self, key: tuple, y_part: pd.DataFrame, x_part: pd.DataFrame | None) -> None:
        """Keep the last context_length + horizon_ observations (a context, plus the windows
        whose targets reach new data in update) and the X from that point on."""
        keep = self.context_length_ + self.horizon_
        tail = y_part.iloc[-keep:]
        if x_part is not None:
            x_part = x_part[x_part.index >= tail.index[0]]
        self._store[key] = (tail, x_part)

    # ------------------------------------------------------------ update
    def _update(self, y, X=None, update_params=True):
        self._check_x_columns(X, "update")
        self._check_y_columns(y)
        if X is not None:
            X = X.reindex(columns=self._x_columns)  # static columns may be left out
        parts = self._split_xy(y, X)
        fine_tune = []
        for key, yp, xp in parts:
            old_y, old_x = self._store.get(key, (None, None))
            merged_y, merged_x = merge(old_y, yp), merge(old_x, xp)
            if self.n_exog_:
                self._statics[key] = self._series_statics(key, xp)
            if update_params and self.update_epochs and not self._zero_shot:
                n_old = 0 if old_y is None else int((merged_y.index < yp.index[0]).sum())
                # windows whose targets reach the new observations
                first = max(0, n_old - self.context_length_ - self.horizon_ + 1)
                fine_tune.append(self._series_windows(key, merged_y, merged_x, min_start=first))
            self._remember(key, merged_y, merged_x)
        data = Windows.concat(fine_tune)
        if data is not None:
            # A handful of epochs on the newest windows, continuing the optimizer state.
            self._train_network(
                None,
                data.data(),
                self._loss(),
                epochs=self.update_epochs,
                continue_training=True,
                seed=self._seed_ + len(self.history_),
            )
        if self._combining:
            self._update_combination(y, update_params)
        return self

    # ------------------------------------------------------------ predict
    def _check_y_columns(self, y: pd.DataFrame) -> None:
        if y.shape[1] != self.n_targets_:
            raise ValueError(f"y has {y.shape[1]} columns, but {type(self).__name__} was fitted with {self.n_targets_}")

    # ------------------------------------------------------------ many origins, streaming
    def historical_forecasts(self, y, X=None, cutoffs=None, fh=None, alpha=None, pad_contexts=False) -> pd.DataFrame:
        """Forecasts from many origins of y with the fitted weights, in one batched forward.

        Forecast k of the result equals ``update(y up to cutoffs[k], update_params=False)``
        followed by ``predict(fh)`` (sktime's ``evaluate(..., strategy="no-update_params")``),
        without moving this forecaster: the K context windows of every series (and, for
        strategy="recursive", their roll) go through the network as one batch.

        y: a series or panel like fit's, with the observations up to the last cutoff (a
        series' context is its last context_length points at or before a cutoff); a numpy
        array is a series with a RangeIndex, as sktime reads it. X: its exogenous X, covering
        the contexts and the forecast steps after each cutoff, indexed like y.
        cutoffs: time points of y's index, or on a PeriodIndex or DatetimeIndex int positions
        (0: a series' first observation), as sktime's splitters read them (None: every point
        of each series with a full context before it). A cutoff needs context_length
        observations at or before it, unless pad_contexts=True: then a context from the first
        observation on is padded at the front with missing values, as predict pads a series
        shorter than context_length.
        fh: relative steps (None: the fitted fh). alpha: quantile levels (None: point forecasts).

        Returns a frame indexed by (instance levels..., "cutoff", time): y's columns, or with
        alpha the columns of predict_quantiles.
        """
        self._refuse_combined("historical_forecasts")
        return historical_forecasts(self, y, X, cutoffs, fh, alpha, pad_contexts)

    def stream(self, instance=None, fh=None) -> "ForecastStream":
        """A streaming forecaster from the current cutoff: one observation at a time, the
        forecast updated each step; see ssmts.sktime.ForecastStream. instance: the key of a
        panel's series (None for a single series); fh: relative steps (None: the fitted fh)."""
        from ._streaming import ForecastStream

        self.check_is_fitted()
        self._refuse_combined("stream")
        return ForecastStream(self, instance, fh)

    # ------------------------------------------------------------ persistence
    def __getstate__(self):
        return pickle_state(self)  # model_ on the CPU

    # ------------------------------------------------------------ testing
    @classmethod
    def get_test_params(cls, parameter_set="default"):
        """Four tiny configurations (direct / recursive ensemble of two / recursive on a diagonal-plus-low-rank
        LinearCDE block, which rolls forward with the layer's `step` / direct combined with AutoETS and Theta
        by validation, without a season so that AutoETS tries few models) that fit in well under a second
        (the combination in about one)."""
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
                "normalize": False,
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
            {**tiny, "context_length": 4, "combine": "validation", "combine_windows": 1, "sp": 1, "random_state": 3},
        ]
