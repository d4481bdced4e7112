"""Backtests: forecasts from many origins of a series or panel with the fitted weights.

historical_forecasts(forecaster, y, ...) equals update(y up to each cutoff, update_params=False)
+ predict for every cutoff, but sends the K context windows of every series through the
network as one set of batches instead of K calls; the forecaster does not move.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sktime.datatypes import check_is_scitype, convert_to
from sktime.forecasting.base import ForecastingHorizon

from ._strategies import quantile_probabilities
from ._windows import check_regular_index, future_times, key_name, pad_front
from ._windows import steps as horizon_steps


def relative_steps(forecaster, fh) -> tuple[ForecastingHorizon, np.ndarray]:
    """fh (None: the fitted one) as relative steps ahead of every origin."""
    if fh is None:
        fh = forecaster.fh if forecaster.fh.is_relative else forecaster.fh.to_relative(forecaster.cutoff)
    elif not isinstance(fh, ForecastingHorizon):
        fh = ForecastingHorizon(fh)
    if not fh.is_relative:
        raise ValueError(
            "historical_forecasts and stream need a relative fh (steps ahead of each origin, "
            f"e.g. [1, 2, 3]), got the absolute {list(fh.to_pandas())}"
        )
    if isinstance(fh.to_pandas(), pd.TimedeltaIndex):  # numpy would count them in seconds or nanoseconds
        raise ValueError(
            "historical_forecasts and stream need fh as integer steps ahead of each origin (e.g. [1, 2, 3]), "
            f"got the time differences {list(fh.to_pandas())}"
        )
    return fh, np.asarray(fh.to_pandas(), dtype=np.int64)


INNER_MTYPES = ["pd.DataFrame", "pd-multiindex", "pd_multiindex_hier"]  # SSMForecaster's y_inner_mtype


def as_frame(data, name: str) -> pd.DataFrame | None:
    """y or X as a DataFrame: pandas as given (a Series as one column), a numpy array or another
    sktime container converted as sktime's forecasters convert it (numpy: a series with a RangeIndex)."""
    if data is None or isinstance(data, pd.DataFrame):
        return data
    if isinstance(data, pd.Series):
        return data.to_frame()
    valid, _, metadata = check_is_scitype(
        data, scitype=["Series", "Panel", "Hierarchical"], return_metadata=[], var_name=name
    )
    if not valid:
        raise TypeError(
            f"historical_forecasts takes {name} as a pandas Series or DataFrame (with a MultiIndex for a panel) or "
            f"a numpy array (read as a series with a RangeIndex 0, 1, ..., as sktime's forecasters read it), got "
            f"{type(data).__name__}"
        )
    return convert_to(data, to_type=INNER_MTYPES, as_scitype=metadata["scitype"])


def time_kind(index: pd.Index) -> str:
    """The kind of a time index that cutoffs must match: "period", "datetime", "numeric" or "other"."""
    if isinstance(index, pd.PeriodIndex):
        return "period"
    if isinstance(index, pd.DatetimeIndex):
        return "datetime"
    if pd.api.types.is_numeric_dtype(index.dtype) and not pd.api.types.is_bool_dtype(index.dtype):
        return "numeric"
    return "other"


def index_name(index: pd.Index) -> str:
    """An index's type and freq, as error messages name it."""
    freq = getattr(index, "freqstr", None)
    return f"a {type(index).__name__}" + (f" (freq {freq!r})" if freq else "")


def as_cutoffs(cutoffs) -> pd.Index:
    """The cutoffs argument as an index (a scalar: one cutoff); neither empty, missing nor repeated."""
    asked = cutoffs if isinstance(cutoffs, pd.Index) else pd.Index(list(np.atleast_1d(cutoffs)))
    if not len(asked):
        raise ValueError("cutoffs is empty: give at least one cutoff, or None for every cutoff with a full context")
    if asked.isna().any():
        raise ValueError(f"cutoffs holds a missing value (NaN/NaT): {list(asked)}")
    if asked.has_duplicates:  # each would give its forecasts again, under the same index labels
        raise ValueError(f"cutoffs holds {list(asked[asked.duplicated()][:5])} more than once: give each cutoff once")
    return asked


def is_positions(asked: pd.Index, index: pd.Index) -> bool:
    """ints on a PeriodIndex or DatetimeIndex are positions (0: a series' first observation), as
    sktime's splitters (CutoffSplitter) read them; on a numeric index they are its time points."""
    return time_kind(index) in ("period", "datetime") and pd.api.types.is_integer_dtype(asked.dtype)


def check_cutoff_type(asked: pd.Index, index: pd.Index) -> None:
    """Cutoffs must be time points of the index's own kind (or positions, see is_positions): pandas
    cannot compare the others, and converting them could pick the wrong origin."""
    kind = time_kind(index)
    if kind == "period":
        ok = isinstance(asked, pd.PeriodIndex) and asked.freq == index.freq
        accepted = (
            f"pandas Periods of freq {index.freqstr!r} (e.g. y.index[k] or pd.Period('{index[-1]}', "
            f"freq='{index.freqstr}')) or int positions (0 is a series' first observation, as sktime's "
            "splitters read them)"
        )
        if isinstance(asked, pd.DatetimeIndex):
            accepted += (
                f"; a time stamp lies inside a period, so whether that period's observation is known at it is "
                f"unclear: if it is, convert the cutoffs with .to_period('{index.freqstr}')"
            )
    elif kind == "datetime":
        ok = isinstance(asked, pd.DatetimeIndex) and (asked.tz is None) == (index.tz is None)
        zone = f"in time zone {index.tz}" if index.tz is not None else "without a time zone"
        accepted = f"pandas Timestamps {zone} (e.g. y.index[k]) or int positions (0 is a series' first observation)"
    elif kind == "numeric":
        ok = pd.api.types.is_numeric_dtype(asked.dtype) and not pd.api.types.is_bool_dtype(asked.dtype)
        accepted = "numbers, time points of that index (e.g. y.index[k])"
    else:
        ok, accepted = asked.dtype == index.dtype, "time points of that index (e.g. y.index[k])"
    if not ok:
        raise TypeError(
            f"cutoffs {list(asked[:3])}{' ...' if len(asked) > 3 else ''} ({type(asked).__name__}) do not match the "
            f"time index of y, {index_name(index)}: give cutoffs as {accepted}"
        )


def cutoff_positions(asked: pd.Index, index: pd.Index, key: tuple) -> tuple[pd.Index, np.ndarray]:
    """The labels of the cutoffs in the result and the position of each one's origin in the series:
    as update + predict, its last observation at or before the cutoff."""
    where = key_name(key)
    if is_positions(asked, index):
        positions = asked.to_numpy(dtype=np.int64)
        wrong = positions[(positions < 0) | (positions >= len(index))]
        if len(wrong):
            raise ValueError(
                f"cutoff {wrong[0]} is not a position of {where}, which has {len(index)} observations (positions 0 "
                f"to {len(index) - 1}; an int cutoff on {index_name(index)} is a position, as in sktime's "
                "splitters); give a position inside the data or a time point"
            )
        return index[positions], positions
    check_cutoff_type(asked, index)
    late = asked[asked > index[-1]]
    if len(late):
        raise ValueError(
            f"cutoff {late[0]} is after the last observation of {where} ({index[-1]}): a backtest "
            "forecasts from cutoffs inside the data; pass y up to the latest cutoff"
        )
    positions = index.searchsorted(asked, side="right") - 1
    early = np.flatnonzero(positions < 0)
    if len(early):
        raise ValueError(
            f"cutoff {asked[early[0]]} comes before the first observation of {where} ({index[0]}): "
            "there is nothing to forecast from"
        )
    return asked, positions


def short_context(where: str, c: int, index: pd.Index, label=None, n_before: int = 0) -> ValueError:
    """The error of a cutoff (or, label None, of a whole series) with fewer than context_length
    observations at or before it."""
    remedy = (
        "pass pad_contexts=True to forecast from a context padded at the front with missing values (as predict "
        "does for a series shorter than context_length)"
    )
    if label is None:
        return ValueError(
            f"{where} has {len(index)} observation(s), fewer than context_length={c}: historical_forecasts "
            f"forecasts from cutoffs with a full context of {c} observations at or before them, so {where} needs at "
            f"least {c}; pass y with more history, or {remedy}"
        )
    first = (
        f"the first possible cutoff is {index[c - 1]}, its {c}th observation"
        if len(index) >= c
        else f"{where} has only {len(index)} observations, so none is possible"
    )
    return ValueError(
        f"cutoff {label} is too early for {where}: {n_before} of its observations lie at or before it, but the "
        f"network reads a context of context_length={c}; {first}. Forecast from later cutoffs, pass y with more "
        f"history before them, or {remedy}"
    )


def historical_forecasts(
    forecaster, y, X=None, cutoffs=None, fh=None, alpha=None, pad_contexts: bool = False
) -> pd.DataFrame:
    """SSMForecaster.historical_forecasts (see there) of a fitted forecaster."""
    forecaster.check_is_fitted()
    if forecaster.irregular == "time_deltas":
        raise ValueError(
            "historical_forecasts forecasts relative steps from each cutoff, which an irregular "
            "time index (irregular='time_deltas') does not have; use update + predict with "
            "the time stamps as fh"
        )
    if not isinstance(pad_contexts, (bool, np.bool_)):
        raise TypeError(f"pad_contexts must be True or False, got {pad_contexts!r}")
    fh, _ = relative_steps(forecaster, fh)
    if alpha is not None:
        alpha = quantile_probabilities(alpha)
    x_numpy = X is not None and not isinstance(X, (pd.Series, pd.DataFrame))
    y, X = as_frame(y, "y"), as_frame(X, "X")
    forecaster._check_y_columns(y)
    named = forecaster.n_exog_ and not forecaster._x_columns.equals(pd.RangeIndex(forecaster.n_exog_))
    if x_numpy and named:
        raise ValueError(
            f"X is a numpy array, whose columns have no names, but {type(forecaster).__name__} was fitted with X "
            f"columns {list(forecaster._x_columns)}: pass X as a pandas DataFrame with these columns"
        )
    forecaster._check_x_columns(X, "historical_forecasts")
    if X is not None:
        y_time, x_time = y.index.get_level_values(-1), X.index.get_level_values(-1)
        if time_kind(y_time) != time_kind(x_time):
            raise TypeError(
                f"X's time index is {index_name(x_time)}, y's {index_name(y_time)}: X must be indexed by y's time "
                "points (and the forecast steps after each cutoff); a numpy array is read as a series with a "
                "RangeIndex 0, 1, ..., which goes with a numpy y"
            )
        X = X.reindex(columns=forecaster._x_columns)  # left-out static columns: the remembered values
    c = forecaster.context_length_
    first_position = 0 if pad_contexts else c - 1  # the earliest origin: a full context, or one observation
    asked_all = None if cutoffs is None else as_cutoffs(cutoffs)
    items, labels = [], []
    for key, yp, xp in forecaster._split_xy(y, X):
        index = yp.index
        where = key_name(key)
        if not len(index):
            raise ValueError(f"{where} has no observations: there is nothing to forecast from")
        check_regular_index(index, f"the time index of {where}")
        steps = forecaster._check_steps(horizon_steps(fh, index), key)
        n_future = forecaster._strategy.future_steps(forecaster.horizon_, int(steps.max()))
        if asked_all is None:
            if len(index) <= first_position:
                raise short_context(where, c, index)
            positions = np.arange(first_position, len(index))
            asked = index[positions]
        else:
            asked, positions = cutoff_positions(asked_all, index, key)
            early = np.flatnonzero(positions < first_position)
            if len(early):
                k = early[0]
                given = f"{asked_all[k]} ({asked[k]})" if is_positions(asked_all, index) else asked[k]
                raise short_context(where, c, index, given, int(positions[k]) + 1)
        # A regular index: the time of step s after position p is full[p + s].
        full = index.append(future_times(fh, index, range(1, n_future + 1)))
        values = yp.to_numpy()
        x_ctx = x_fut = None
        if forecaster.n_exog_:
            if forecaster._x_static.any() and key not in forecaster._statics:
                raise ValueError(
                    f"{key_name(key)} was not seen in fit or update, so its static covariates are "
                    "unknown; update the forecaster with it first"
                )
            # context rows read every column; forecast steps never the past-only ones
            in_ctx, in_fut = np.zeros(len(full), dtype=bool), np.zeros(len(full), dtype=bool)
            for p in positions:
                in_ctx[max(0, p - c + 1) : p + 1] = True
                in_fut[p + 1 : p + n_future + 1] = True
            x_ctx, x_fut = (np.full((len(full), forecaster.n_exog_), np.nan) for _ in range(2))
            x_ctx[in_ctx] = forecaster._x_rows(key, xp, full[in_ctx], "the contexts of the cutoffs")
            x_fut[in_fut] = forecaster._x_rows(key, xp, full[in_fut], "the forecast steps of the cutoffs", future=True)
        for label, p in zip(asked, positions):
            first = max(0, p - c + 1)  # pad_contexts: an early cutoff's context padded with missing values
            forecaster._check_observed(
                values[first : p + 1],
                f"the context of {key_name(key)} at cutoff {label} (its last {p + 1 - first} observations)",
            )
            items.append(
                (
                    pad_front(values[first : p + 1], c, np.nan),
                    steps,
                    None if x_ctx is None else pad_front(x_ctx[first : p + 1], c, 0.0),
                    None if x_fut is None else x_fut[p + 1 : p + 1 + n_future],
                )
            )
            labels.append(((*key, label), full[p + steps]))
    if not items:
        raise ValueError("historical_forecasts got no cutoffs")
    outputs = forecaster._run(items, alpha)
    names = [*forecaster._index_names[:-1], "cutoff", forecaster._index_names[-1]]
    if alpha is None:
        return forecaster._assemble(
            [(k, t, point) for (k, t), (point, _) in zip(labels, outputs)], forecaster._y_columns, names
        )
    frames = [(k, t, q.reshape(len(t), -1)) for (k, t), (_, q) in zip(labels, outputs)]
    return forecaster._assemble(frames, forecaster._get_columns(method="predict_quantiles", alpha=list(alpha)), names)
