"""SSMForecaster: a global, probabilistic deep-SSM forecaster with the sktime interface.

Data flow (one network for every series of a panel or hierarchy):

    y (T_i, C_y), X (T_i, C_x) per series
      -> all windows of context_length + horizon steps, pooled over the series  (_windows)
      -> per-window normalization of y (normalize), global standardization of X
      -> a forecast head (ssmts.nn.heads) per strategy                           (_strategies)
      -> pinball loss, trained through ssmts.training.fit_model
    predict: the last context of each series, one batched pass, quantiles in y's units (_predict)

This module holds the parameters and the public methods; fit and update, the windows and the network
are _fitting's, and docs/architecture.md lists the other modules beside it.
"""

from __future__ import annotations

import uuid
import warnings
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd
from sktime.forecasting.base import BaseForecaster

from .._warnings import caller_stacklevel
from ..estimators._base import NetworkFitMixin
from ..training import BackboneParams, EarlyStoppingParams, OptimizerParams
from ..training.config import Integer, NoneOr, Options, Satisfies, _is_int, param, with_params_doc
from ..training.fit import pickle_state
from ..training.params import _same
from ._backtest import historical_forecasts
from ._combine import CLASSICAL, RULES, CombinationMixin
from ._covariates import CovariatesMixin
from ._export import ForecasterExportMixin
from ._fitting import ForecasterFitMixin
from ._persistence import ForecasterPersistenceMixin
from ._predict import ForecastPredictMixin
from ._pretrained import PretrainedMixin
from ._strategies import STRATEGIES, symmetric_pairs
from ._windows import check_time_order, quantile_levels

if TYPE_CHECKING:
    from ._streaming import ForecastStream

WINDOW_NORMALIZATIONS = ("last", "mean", "drift")  # True means "last"
DEFAULT_QUANTILES = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)


def _is_quantile_grid(value) -> bool:
    try:
        levels = np.asarray(value, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        return False
    return levels.size > 0 and bool(np.all(np.isfinite(levels) & (levels > 0) & (levels < 1)))


def _is_context_length(value) -> bool:
    return value == "auto" or (_is_int(value) and value >= 1)


def _is_time_unit(value) -> bool:
    if value is None or isinstance(value, (str, pd.Timedelta)):
        return True
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) and value > 0


def _is_names(value) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


def _is_components(value) -> bool:
    return (
        isinstance(value, (list, tuple))
        and len(value) > 0
        and all(isinstance(v, str) and v in CLASSICAL for v in value)
        and len(set(value)) == len(value)
    )


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
    calibration: Literal["auto", "holdout", "refit", "conformal", "none"] = param(
        default="auto",
        doc="'holdout': the network trained on each series' windows before its latest validation_fraction "
        "(purged), its intervals calibrated on those held-out windows (split conformal quantile regression "
        "per horizon step; strategy='direct'), then trained on every window for a quarter of its epochs "
        "from those weights; 'refit': calibrated as 'holdout', then the network trained again from the start "
        "on every window (the network of 'none', widened; a second fit); 'conformal': calibrated on the "
        "windows early_stopping holds out (and chose its epoch on), or zero-shot (pretrained=True) on every "
        "window of the series; 'none': the quantile head's grid as trained; 'auto': for a network with "
        "strategy='direct' and combine='none', 'refit' for one series, 'holdout' for a panel, 'conformal' "
        "with early_stopping=True or zero-shot; else 'none' (calibration_ holds the one applied).",
        constraint=Options("auto", "holdout", "refit", "conformal", "none"),
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
        doc="'none': the network's forecasts. 'validation': the network combined, per series, with AutoETS, "
        "Theta, seasonal naive and drift fitted to that series (combine_components chooses among them), "
        "weighted by how each forecast the series' own last combine_windows windows of max(fh) steps (held "
        "out in fit: a copy of the network trained on the data before them, the classical models refitted at "
        "each window's origin); the quantiles combined with the same weights and widened where they under-"
        "cover those windows (conformal calibration, each window combined with weights chosen without it). A "
        "classical model that cannot fit or forecast a series is left out of it with a warning. Needs "
        "statsmodels. See validation_errors_, combination_weights_ (the weights predict uses; with "
        "combine_rule='median', NaN for the components whose median is taken).",
        constraint=Options("none", "validation"),
    )
    combine_rule: Literal["network_ets", "inverse_error", "select", "median", "calibrate", "network_first"] = param(
        default="network_ets",
        doc="combine='validation': 'network_ets' (the mean of the network's and AutoETS's forecasts unless a "
        "classical forecast is closer than that mean at significantly many held-out steps, by a sign test at "
        "5 % shared among the classical forecasts; then the inverse_error weights; the median of all the "
        "forecasts where no series holds out the steps that test needs to tell: 7 with the four classical "
        "forecasts), 'network_first' (the same with the network alone in place of "
        "the mean), 'inverse_error' (weights proportional to 1 / each forecast's MAE on the held-out windows), "
        "'select' (all weight to the lowest MAE), 'median' (the median of the forecasts and quantile "
        "grids; the windows then only calibrate the intervals) or 'calibrate' (the network's own forecasts; "
        "the windows only widen its intervals where they under-cover).",
        constraint=Options(*RULES),
    )
    combine_components: tuple = param(
        default=("ets", "theta", "naive", "drift"),
        doc="combine='validation': the classical forecasts the network is combined with, any of 'ets' "
        "(AutoETS), 'theta', 'naive' (seasonal naive) and 'drift'. AutoETS costs the most (a search over "
        "exponential smoothing models at each held-out window and in every update); 'network_ets' needs it. "
        "The sign tests of 'network_first' and 'network_ets' compare with those chosen (their level shared "
        "among them), and the columns of validation_errors_ and combination_weights_ are the network and those.",
        constraint=Satisfies(
            _is_components, "a non-empty list of distinct names from 'ets', 'theta', 'naive', 'drift'"
        ),
    )
    combine_windows: int = param(
        default=2,
        doc="combine='validation': windows of max(fh) steps held out at the end of each series (fewer where "
        "a series is too short to keep max(8, max(fh)) observations before them: k windows need "
        "max(8, max(fh)) + k * max(fh); none: the series takes the weights of the panel's other series pooled, "
        "or equal weights, with a warning; 'network_first' and 'network_ets': their base forecast, or the "
        "median where nothing can tell). 'inverse_error' and 'select' calibrate the intervals only on series "
        "that hold out two windows or more (each window combined with the weights of the others).",
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
    ForecasterFitMixin,
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
    a grid of quantiles; the point forecast is the median (strategy="direct"; see Strategies for
    the recursive one).

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
    period sp_ where a series holds two seasons), seasonal naive and drift (those of
    combine_components) are refitted at each origin. Each forecast's MAE
    on the windows (validation_errors_) sets per-series weights (combination_weights_) by
    combine_rule (a classical forecast that could not be validated on a series gets no weight
    there, with a warning); series too short to hold out a window take the weights of the panel's pooled,
    MASE-scaled errors (equal weights, or the network alone for "calibrate", when nothing was
    validated; a warning says so). "network_ets" (the default) forecasts the mean of the network
    and AutoETS unless one of the m classical forecasts is closer than that mean at so many of the
    series' held-out steps that a one-sided sign test rejects at 5 % / m, then takes the
    inverse-error weights (a series not validated keeps the mean); where no series of the fit holds
    out the steps that test needs to reject at all (7 with m = 4), nothing speaks for the mean
    either, and it takes the median of all the forecasts. "network_first" is the same with the network alone in place of
    the mean.
    The point forecast is the weighted sum of the forecasts; the quantiles are averaged with the same
    weights around each forecast's point (a component without
    intervals lends the network's spread), then each central interval is widened by conformal
    calibration on the held-out windows where it under-covers them (combination_widening_: the
    widening of each level, in units of the interval's width; never narrower), each window
    combined with weights chosen without it: "network_ets", "network_first", "inverse_error" and
    "select" score a window with the weights their rule gives its series' other windows ("inverse_error" and
    "select" therefore calibrate on series that hold out two or more).
    Then the network (this forecaster's own, as with combine="none") and the classical models are
    fitted on all the data. update passes the new observations to the classical models (sktime's
    update) and keeps the weights. A classical model that cannot fit, forecast or update a series
    is left out of it with a warning, its weight spread over the others: combination_weights_
    always holds the weights predict uses ("median": NaN for the forecasts whose median is taken,
    0 for one left out). The route of M4's winner (ES-RNN, exponential
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
        levels = quantile_levels(self.quantiles)
        if levels.size < 2:
            raise ValueError("quantiles needs at least one level besides 0.5, to give intervals")
        if self.calibration in ("holdout", "refit", "conformal") and not symmetric_pairs(levels):
            raise ValueError(
                f"calibration={self.calibration!r} widens pairs of quantile levels (l, 1 - l), and quantiles="
                f"{tuple(self.quantiles)!r} holds none: add the partners (1 - l) of the levels to calibrate, or "
                "set calibration='none'"
            )
        if self.calibration == "conformal" and not self.early_stopping and not self._zero_shot:
            raise ValueError(
                "calibration='conformal' calibrates on the windows early_stopping holds out, and "
                "early_stopping=False holds out none: set early_stopping=True, or use calibration='holdout'"
            )
        if self.calibration in ("holdout", "refit") and self._zero_shot:
            raise ValueError(
                f"calibration={self.calibration!r} trains the network on part of the windows and calibrates it on "
                f"the rest, but pretrained={self.pretrained!r} trains nothing: use calibration='auto' or "
                "'conformal' (calibrated on every window of the series, none of which the network saw), or "
                "'none'"
            )
        if self.calibration in ("holdout", "refit", "conformal") and self.strategy != "direct":
            raise ValueError(
                f"calibration={self.calibration!r} calibrates the quantile grid of strategy='direct'; "
                "strategy='recursive' takes its quantiles from sample paths: use calibration='none' with it"
            )
        if self.calibration in ("holdout", "refit") and self.early_stopping:
            raise ValueError(
                f"calibration={self.calibration!r} calibrates on held-out windows no epoch was chosen on, and "
                "early_stopping=True would choose its epoch on them: use calibration='conformal' (or 'auto') "
                "with early stopping"
            )
        if self.calibration in ("holdout", "refit", "conformal") and self.combine != "none":
            raise ValueError(
                f"combine={self.combine!r} widens the combined intervals on its own held-out windows; with "
                f"calibration={self.calibration!r} the network's would be widened twice: use calibration='none' "
                "or 'auto' with it"
            )
        if self.combine != "none" and self.irregular == "time_deltas":
            raise ValueError(
                "combine='validation' combines with classical forecasts, which need a regular time index; with "
                "irregular='time_deltas' use combine='none'"
            )
        if self.combine != "none" and self.combine_rule not in self._combine_rules:
            raise ValueError(
                f"combine_rule={self.combine_rule!r} averages the network with AutoETS, which combine_components="
                f"{tuple(self.combine_components)!r} leaves out: add 'ets' to combine_components or choose another "
                f"rule ({', '.join(repr(rule) for rule in self._combine_rules)})"
            )

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
        """Five tiny configurations (direct / recursive ensemble of two / recursive on a diagonal-plus-low-rank
        LinearCDE block, which rolls forward with the layer's `step` / direct combined with drift by
        validation (with the four classical forecasts, AutoETS's model search at every window and update, this
        configuration cost ten times each of the others in sktime's suite, 331 s against 35 s on one thread;
        with seasonal naive, whose sktime forecasts take 0.1 s a call, 163 s; the tests of the combination
        cover the four) / direct with its intervals calibrated on held-out windows) that fit in well under a
        second."""
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
            {
                **tiny,
                "context_length": 4,
                "combine": "validation",
                "combine_components": ("drift",),
                "combine_rule": "network_first",
                "combine_windows": 1,
                "random_state": 3,
            },
            {**tiny, "context_length": 4, "calibration": "holdout", "random_state": 4},
        ]
