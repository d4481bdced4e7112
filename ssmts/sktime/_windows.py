"""Windowing for the forecaster: pandas series (single, panel, hierarchy) to network arrays.

split_instances / merge      frames by series, and the union of old and new observations
steps / future_times         a ForecastingHorizon against a series' time index
seasonal_period, auto_context_length   the season of a time index; context_length='auto'
Windows, make_windows        training windows (context + horizon), normalized per window
fill_forward, impute         gaps (NaN): last observation carried forward, then 0
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from numpy.lib.stride_tricks import sliding_window_view
from pandas.tseries.frequencies import to_offset
from sktime.forecasting.base import ForecastingHorizon

from ..nn.functional import channel_statistics, power_of_two_unit, series_statistics
from ..training import SequenceData


def split_instances(frame: pd.DataFrame) -> list[tuple[tuple, pd.DataFrame]]:
    """[(instance key, frame indexed by time)] in order of first appearance; key () for one series."""
    if not isinstance(frame.index, pd.MultiIndex):
        return [((), frame)]
    levels = list(range(frame.index.nlevels - 1))
    parts = []
    for key, part in frame.groupby(level=levels if len(levels) > 1 else 0, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        parts.append((key, part.droplevel(levels)))
    return parts


def merge(old: pd.DataFrame | None, new: pd.DataFrame | None) -> pd.DataFrame | None:
    """Union by time; values in `new` win on duplicate time stamps."""
    if old is None:
        return new
    if new is None:
        return old
    if len(old) and len(new) and new.index[0] > old.index[-1]:
        return pd.concat([old, new])  # new data continues the old: nothing to replace or sort
    merged = pd.concat([old, new])
    return merged[~merged.index.duplicated(keep="last")].sort_index()


def key_name(key: tuple) -> str:
    return "y" if key == () else f"series {key if len(key) > 1 else key[0]!r}"


def as_float(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """frame as float64; NaN is a missing value, an infinite one an error naming where it is."""
    try:
        values = frame.astype(np.float64)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name} must have numeric columns only: {error}") from None
    infinite = np.isinf(values.to_numpy())
    if infinite.any():
        row, col = np.argwhere(infinite)[0]
        raise ValueError(
            f"{name} holds {int(infinite.sum())} infinite value(s) (first: column {values.columns[col]!r} at "
            f"{values.index[row]}); use NaN for a missing value"
        )
    return values


def fill_forward(values: np.ndarray) -> np.ndarray:
    """values (..., L) with the last observation carried forward along the last axis; NaN
    before the first observation stays NaN."""
    index = np.where(np.isnan(values), 0, np.arange(values.shape[-1]))
    np.maximum.accumulate(index, axis=-1, out=index)
    return np.take_along_axis(values, index, axis=-1)


def window_location(normalize) -> str | None:
    """The location a window is shifted by under the forecaster's `normalize`: "last", "mean" or
    "drift" (True means "last"), None for False (global standardization)."""
    if isinstance(normalize, (bool, np.bool_)):
        return "last" if normalize else None
    return normalize


def quantile_levels(quantiles) -> np.ndarray:
    """The levels the forecaster's quantile head outputs: those of `quantiles` and the median 0.5
    (the point forecast), sorted, each once; float64."""
    return np.unique(np.append(np.asarray(quantiles, dtype=np.float64).ravel(), 0.5))


LEVEL_FLOOR = 1e-3
"""A window's scale is at least this share of its level (mean |y|): a constant context keeps a scale."""


def level_swamped_windows(values: np.ndarray, context: int) -> tuple[int, int]:
    """(how many, of how many) contexts of `context` steps in values (T, C), NaN unobserved, have a scale
    floor (LEVEL_FLOOR of their level, `window_scaling`) larger than their spread: those of a series at a
    level far above its variation (1e8 + airline passengers), which the floor flattens. Contexts at level
    0 (or with nothing observed) are not judged."""
    if len(values) < context or context < 2:
        return 0, 0
    windows = sliding_window_view(values, context, axis=0)  # (T - c + 1, C, c)
    with np.errstate(invalid="ignore", divide="ignore"):  # a context with nothing observed: NaN, not judged
        _, variance, level, _ = _window_moments(windows, np.zeros(values.shape[1]))
    judged = level > 0
    return int((LEVEL_FLOOR * level[judged] > np.sqrt(variance[judged])).sum()), int(judged.sum())


def _window_moments(context: np.ndarray, scale_floor: np.ndarray) -> tuple[np.ndarray, ...]:
    """(mean, variance, level, unit) of each context (n, C, c) over its observed (non-NaN) steps, each
    (n, C, 1): the mean, the population variance and the level (mean |y|) in units of `unit`, the power of
    two just above the larger of the window's magnitude and scale_floor (C,) (`power_of_two_unit`)."""
    observed = ~np.isnan(context)
    count = observed.sum(-1, keepdims=True)
    magnitude = np.where(observed, np.abs(context), 0.0).max(-1, keepdims=True)
    unit = power_of_two_unit(np.maximum(magnitude, scale_floor[:, None]))
    units = np.where(observed, context / unit, 0.0)
    mean = units.sum(-1, keepdims=True) / count
    variance = (np.where(observed, units - mean, 0.0) ** 2).sum(-1, keepdims=True) / count
    level = np.abs(units).sum(-1, keepdims=True) / count
    return mean, variance, level, unit


def window_scaling(
    context: np.ndarray,
    location: str | None,
    horizon: int,
    y_mean: np.ndarray,
    y_scale: np.ndarray,
    scale_floor: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """How each window is normalized, (y - shift) / scale: context (n, C, c) -> shift (n, C, 1), or
    (n, C, c + horizon) for location "drift", and scale (n, C, 1).

    location None: the panel's statistics y_mean, y_scale (C,) for every window. Otherwise the
    location is what a network that outputs zeros forecasts, a prior that matters on short series,
    where weight decay pulls the outputs towards zero: the last observed value ("last", the naive
    forecast), the mean of the observed values ("mean"), or the drift line ("drift"); the scale is
    the spread of the observed values (each channel must have one).
    """
    if location is None:
        shape = (context.shape[0], len(y_mean), 1)
        return np.broadcast_to(y_mean[:, None], shape), np.broadcast_to(y_scale[:, None], shape)
    observed = ~np.isnan(context)
    # in exact units (_window_moments): squares of values near 1e200 would overflow, near 1e-200 underflow
    mean, variance, level, unit = _window_moments(context, scale_floor)
    shift = mean * unit if location == "mean" else fill_forward(context)[..., -1:]
    # The floor keeps a constant context's scale above 0: a thousandth of the window's own level, so
    # that a series of small values in a panel of large ones keeps its own scale (a panel-wide floor
    # swamped such a series' spread); the panel-wide floor (C,) only for a context at level 0.
    floor = np.where(level > 0, LEVEL_FLOOR * level, scale_floor[:, None] / unit)
    scale = np.sqrt(variance + floor**2) * unit
    if location == "drift":
        # the drift forecast (Hyndman's "drift method"): the line through the last observed value
        # with the slope from the first to the last observed value, over the context and horizon
        c = context.shape[-1]
        steps = np.arange(c + horizon, dtype=np.float64)
        first = np.argmax(observed, axis=-1)[..., None]
        last = c - 1 - np.argmax(observed[..., ::-1], axis=-1)[..., None]
        start = np.take_along_axis(np.where(observed, context, 0.0), first, axis=-1)
        slope = np.where(last > first, (shift - start) / np.maximum(last - first, 1), 0.0)
        shift = shift + slope * (steps - last)
    return shift, scale


def impute(normalized: np.ndarray) -> np.ndarray:
    """Gaps of normalized values (..., L): carried forward; before the first observation 0,
    the window's location (its last, mean or global value, by normalize)."""
    filled = fill_forward(normalized)
    return np.where(np.isnan(filled), 0.0, filled)


def pad_rows(rows: np.ndarray, n: int) -> np.ndarray:
    """rows (k, C_x) -> (n, C_x), zero rows appended (unused future steps of shorter horizons)."""
    if len(rows) >= n:
        return rows[:n]
    return np.concatenate([rows, np.zeros((n - len(rows), rows.shape[1]))])


def pad_front(rows: np.ndarray, n: int, fill: float) -> np.ndarray:
    """rows (k, C) -> (max(n, k), C), rows of `fill` put before them (a series shorter than a
    context: NaN for y, a missing observation; 0 for standardized X, the training mean)."""
    if len(rows) >= n:
        return rows
    return np.concatenate([np.full((n - len(rows), rows.shape[1]), fill), rows])


SEASONAL_PERIODS = {"Y": 1, "A": 1, "Q": 4, "M": 12, "W": 52, "D": 7, "B": 5, "h": 24, "H": 24}


def seasonal_period(time_index: pd.Index) -> int:
    """Steps per season from a time index's frequency (yearly 1, quarterly 4, monthly 12, weekly 52,
    daily 7, business-daily 5, hourly 24); 1 when the index has none or another one."""
    freq = getattr(time_index, "freq", None) or (
        pd.infer_freq(time_index) if isinstance(time_index, pd.DatetimeIndex) and len(time_index) >= 3 else None
    )
    if freq is None:
        return 1
    offset = to_offset(freq)
    if offset.n != 1:
        return 1
    name = offset.name.split("-")[0]
    return SEASONAL_PERIODS.get(name[:-1] if name.endswith(("S", "E")) and len(name) > 1 else name, 1)


CONTEXT_SEASONS = 3


def auto_context_length(lengths, horizon: int, season: int) -> int:
    """context_length='auto': CONTEXT_SEASONS x max(horizon, season), at most half the median series
    length (shorter series are padded), at least 2."""
    bound = int(np.median(lengths)) // 2
    return int(max(2, min(CONTEXT_SEASONS * max(horizon, season), bound)))


def _numeric_spacing(time_index: pd.Index):
    """The step of a numeric (integer or float) time index (1 with a single point), or None for
    other indexes. sktime reads a relative fh on such an index in index units (cutoff + k),
    while one step of the network is one spacing of the series."""
    if isinstance(time_index, (pd.DatetimeIndex, pd.PeriodIndex)) or not pd.api.types.is_numeric_dtype(
        time_index.dtype
    ):
        return None
    return time_index[-1] - time_index[-2] if len(time_index) >= 2 else 1


def _timedelta_steps(deltas: pd.TimedeltaIndex, time_index: pd.Index) -> np.ndarray:
    """Network steps of a relative fh of time differences: each a whole number of the series' spacing
    (numpy would read the Timedeltas as counts of their own unit, seconds or nanoseconds: 60 steps for
    a minute on a minutely index)."""
    if not isinstance(time_index, pd.DatetimeIndex):
        raise ValueError(
            f"fh holds time differences ({deltas[0]!r}, ...), which count steps only on a DatetimeIndex; this "
            f"series has a {type(time_index).__name__}: give fh as integer steps"
        )
    freq = time_index.freq or (pd.infer_freq(time_index) if len(time_index) >= 3 else None)
    try:
        spacing = pd.Timedelta(pd.tseries.frequencies.to_offset(freq)) if freq is not None else None
    except ValueError:  # months, quarters, years, business days: no fixed length
        spacing = None
    if spacing is None or spacing <= pd.Timedelta(0):
        raise ValueError(
            f"fh holds time differences ({deltas[0]!r}, ...), but the series' spacing "
            f"({'none inferred' if freq is None else freq}) has no fixed length to count them in: give fh as "
            "integer steps"
        )
    model_steps = np.asarray(deltas / spacing, dtype=np.float64)
    whole = np.isclose(model_steps, np.round(model_steps), rtol=0, atol=1e-9)
    if not whole.all():
        raise ValueError(
            f"fh holds {[str(d) for d in deltas[~whole][:5]]}, which are not multiples of the series' spacing "
            f"{spacing}: the series is observed every {spacing}, so a forecast can only be made {spacing}, "
            f"{2 * spacing}, ... after its cutoff"
        )
    return np.round(model_steps).astype(np.int64)


def steps(fh: ForecastingHorizon, time_index: pd.Index) -> np.ndarray:
    """Network steps of fh for a series whose last observation is time_index[-1] (one step = one
    spacing of the index; on a numeric index of spacing s, fh in index units must be multiples of s)."""
    if fh.is_relative and isinstance(fh.to_pandas(), pd.TimedeltaIndex):
        return _timedelta_steps(fh.to_pandas(), time_index)
    if fh.is_relative:
        relative = np.asarray(fh.to_pandas())
    else:
        cutoff = time_index[[-1]]
        if fh.freq is None and isinstance(time_index, pd.DatetimeIndex):
            fh = ForecastingHorizon(fh.to_pandas(), is_relative=False, freq=pd.infer_freq(time_index))
        relative = np.asarray(fh.to_relative(cutoff).to_pandas())
    spacing = _numeric_spacing(time_index)
    if spacing is None or spacing == 1:
        return relative.astype(np.int64)
    model_steps = relative / spacing
    if not np.allclose(model_steps, np.round(model_steps)):
        off = relative[~np.isclose(model_steps, np.round(model_steps))]
        raise ValueError(
            f"fh holds {off[:5].tolist()} (time index units after the cutoff {time_index[-1]}), which are not "
            f"multiples of the series' spacing {spacing}: the series is observed every {spacing}, so a forecast "
            f"can only be made {spacing}, {2 * spacing}, ... after its cutoff"
        )
    return np.round(model_steps).astype(np.int64)


def future_times(fh: ForecastingHorizon, time_index: pd.Index, relative_steps) -> pd.Index:
    """The time stamps of network steps `relative_steps` after time_index[-1]."""
    spacing = _numeric_spacing(time_index)
    if spacing is not None:
        return pd.Index(time_index[-1] + spacing * np.asarray(list(relative_steps)), dtype=time_index.dtype)
    freq = fh.freq
    if freq is None and isinstance(time_index, pd.DatetimeIndex):
        freq = pd.infer_freq(time_index)
    # Fast paths for the common indexes: building a ForecastingHorizon costs milliseconds,
    # which dominated update + predict at small batch sizes.
    relative_steps = np.asarray(list(relative_steps), dtype=np.int64)
    if isinstance(time_index, pd.PeriodIndex):
        return (time_index[[-1]].repeat(len(relative_steps)) + relative_steps).rename(None)
    if isinstance(time_index, pd.DatetimeIndex) and freq is not None:
        offset = to_offset(freq)
        return pd.DatetimeIndex([time_index[-1] + int(s) * offset for s in relative_steps])
    return ForecastingHorizon(list(relative_steps), is_relative=True, freq=freq).to_absolute_index(time_index[[-1]])


class TooFewWindowsError(ValueError):
    """The series give too few training windows for the settings: a fit refused for its data (the
    combination's validation network expects it on short series), not a bug."""


@dataclass
class Windows:
    """Network inputs, targets, target weights and the end of each window's targets (numpy, float32)."""

    x: np.ndarray
    target: np.ndarray
    weight: np.ndarray
    end: np.ndarray

    @staticmethod
    def concat(parts: list["Windows | None"]) -> "Windows | None":
        parts = [p for p in parts if p is not None and len(p.x)]
        if not parts:
            return None
        return Windows(*(np.concatenate([getattr(p, a) for p in parts]) for a in ("x", "target", "weight", "end")))

    def data(self, index=None) -> SequenceData:
        pick = (lambda a: a) if index is None else (lambda a: a[index])
        return SequenceData(
            torch.from_numpy(pick(self.x)),
            torch.from_numpy(pick(self.target)),
            None,
            torch.from_numpy(pick(self.weight)),
        )


def make_windows(
    y: np.ndarray,
    x: np.ndarray | None,
    context: int,
    horizon: int,
    strategy,
    norm_stats,
    min_start: int = 0,
    past: np.ndarray | None = None,
) -> Windows | None:
    """Training windows of one series. y (T, C) with NaN in its gaps, x (T, C_x) standardized
    and imputed, or None; past (C_x,) bool: the past-only columns of x.

    Every start with at least one target is used; targets past the end or missing (NaN) get
    weight 0. A window is dropped when a target channel has no observation in its context
    (nothing to normalize by) or none of its targets is observed. With X and a strategy that
    reads the future X of every horizon step, only windows with the whole horizon inside the
    series are used (when there are any). Past-only columns are zero after the context, so
    no window shows the network their values over its targets. norm_stats(context (n, C, c))
    -> (shift, scale) normalizes each window (over observed values); strategy.training_inputs
    lays out the input, whose gaps are carried forward (impute).
    """
    c, H, C = context, horizon, y.shape[1]
    T = len(y)
    n = T - c
    if n < 1 or min_start >= n:
        return None
    ypad = np.concatenate([y, np.zeros((H, C))])
    yw = sliding_window_view(ypad, c + H, axis=0)[:n]  # (n, C, c + H)
    end = np.arange(n)[:, None] + c + np.arange(H)[None, :]
    available = end < T  # (n, H)
    observed = available[:, None, :] & ~np.isnan(yw[..., c:])  # (n, C, H)
    keep = (np.arange(n) >= min_start) & (~np.isnan(yw[..., :c])).any(-1).all(-1) & observed.any((1, 2))
    if x is not None and strategy.needs_future_x and (available.all(1) & keep).any():
        keep &= available.all(1)
    if not keep.any():
        return None
    yw, observed, available = yw[keep], observed[keep], available[keep]
    shift, scale = norm_stats(yw[..., :c])
    yn = (yw - shift) / scale
    target = np.transpose(np.where(observed, yn[..., c:], 0.0), (0, 2, 1))  # (n, H, C); padding and gaps 0
    weight = np.transpose(observed, (0, 2, 1)).astype(np.float32)
    yn = impute(yn)
    yn[..., c:] *= available[:, None, :]  # padding past the end stays 0 in normalized units
    xw = None
    if x is not None:
        # one extra zero row: the recursive layout reads X one step ahead
        xw = sliding_window_view(np.concatenate([x, np.zeros((H + 1, x.shape[1]))]), c + H, axis=0)[:n][keep]
        if past is not None and past.any():
            xw = xw.copy()
            xw[:, past, c:] = 0.0
    inputs = strategy.training_inputs(yn, xw, c, H)
    start = np.flatnonzero(keep)
    last_target = np.minimum(start + c + H, T)  # for the temporal validation split
    return Windows(inputs.astype(np.float32), target.astype(np.float32), weight, last_target)


NS_PER_TICK = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
# Gaps in units of time_unit must be finite and positive in float32 (the network's inputs),
# and typically within this range: Delta times a gap far outside it leaves the SSM state
# unchanged over every step (tiny) or forgets it at every step (huge).
GAP_RANGE = (1e-6, 1e6)


def time_values(index: pd.Index) -> np.ndarray:
    """Time stamps as exact numbers, int64 where they are integers: ticks of the index's resolution
    for a DatetimeIndex, ordinals for a PeriodIndex, the values of a numeric index."""
    if isinstance(index, (pd.DatetimeIndex, pd.PeriodIndex)):
        return index.asi8
    if pd.api.types.is_numeric_dtype(index.dtype):
        values = index.to_numpy()
        return values if values.dtype.kind in "iuf" else index.to_numpy(dtype=np.float64)
    raise ValueError(
        f"per-step time deltas need a DatetimeIndex, PeriodIndex or numeric time index, got {type(index).__name__}"
    )


def time_differences(index: pd.Index) -> np.ndarray:
    """Differences of consecutive time stamps as float64: nanoseconds for a DatetimeIndex of any
    resolution, ordinals for a PeriodIndex, the values of a numeric index. Differenced before the
    conversion to float: epoch nanoseconds of today exceed 2^53, float64's exact integers."""
    steps = np.diff(time_values(index)).astype(np.float64)
    return steps * NS_PER_TICK[index.unit] if isinstance(index, pd.DatetimeIndex) else steps


def time_unit_value(unit, index: pd.Index) -> float:
    """A declared time unit in the units of time_differences(index): a number as is; a pandas offset
    or Timedelta string (e.g. '1h') in nanoseconds, for a DatetimeIndex."""
    if isinstance(unit, str) or isinstance(unit, pd.Timedelta):
        if not isinstance(index, pd.DatetimeIndex):
            raise ValueError(
                f"time_unit={unit!r} is a duration, which needs a DatetimeIndex; give a number for a "
                f"{type(index).__name__}"
            )
        try:
            duration = pd.Timedelta(pd.tseries.frequencies.to_offset(unit) if isinstance(unit, str) else unit)
        except ValueError:
            raise ValueError(
                f"time_unit={unit!r} is not a fixed duration; give one such as '1h', '15min' or '1D'"
            ) from None
        value = float(duration.as_unit("ns").value)
    else:
        value = float(unit)
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"time_unit must be a positive duration, got {unit!r}")
    return value


def check_gaps(gaps: np.ndarray, time_unit, where: str, scale: bool = False) -> None:
    """Gaps in units of time_unit must be finite and positive as the network reads them (float32):
    one that under- or overflows would be read as one step or as garbage. scale=True (the training
    gaps) also refuses a time_unit that puts their median outside GAP_RANGE."""
    if not gaps.size:
        return
    with np.errstate(over="ignore"):
        as_read = gaps.astype(np.float32)
    low, high = GAP_RANGE
    median = float(np.median(gaps))
    if np.isfinite(as_read).all() and (as_read > 0).all() and (not scale or low <= median <= high):
        return
    raise ValueError(
        f"time_unit={time_unit!r} makes the gaps of {where} {gaps.min():.3g} to {gaps.max():.3g} units (median "
        f"{median:.3g}); each SSM step takes Delta times its gap, which needs gaps that are finite and positive, "
        f"typically between {low:g} and {high:g} units: give a time_unit near the usual spacing of the time "
        "stamps (or None: the median spacing of the training series)"
    )


def gaps_into(index: pd.Index, unit: float, before: pd.Index | None = None) -> np.ndarray:
    """Gap into each time stamp of index from the one before it, in `unit`s: (T,). The first takes the
    gap from the last time stamp of `before` when given, else 1 (one unit; it only scales the first input)."""
    if before is None or not len(before):
        return np.concatenate([[1.0], time_differences(index) / unit])
    return time_differences(before[-1:].append(index)) / unit


def check_time_order(data, name: str) -> None:
    """Time stamps must increase within each series: sktime refuses them out of order with an error
    about unsupported input types, so name the problem first."""
    if not isinstance(data, (pd.Series, pd.DataFrame)):
        return
    for key, part in split_instances(data):
        index = part.index
        if index.is_monotonic_increasing:
            continue
        later = np.flatnonzero(index[1:] < index[:-1])
        where = name if key == () else f"{key_name(key)} in {name}"
        if not len(later):  # not comparable (mixed types): leave it to sktime's checks
            return
        k = int(later[0])
        raise ValueError(
            f"the time index of {where} is out of order: {index[k]} comes before {index[k + 1]}; sort it by time "
            f"({name}.sort_index())"
        )


def check_regular_index(index: pd.Index, what: str, even: bool = True) -> None:
    """A forecaster's time index must be unique and evenly spaced: an SSM step is one period,
    so a gap or a repeated time stamp would silently be read as contiguous data.
    even=False (per-step time deltas) checks only that the time stamps are unique and increasing."""
    # duplicated(), not has_duplicates: pandas 2.1-2.3 flags a slice of an index with repeats as
    # having them too (pandas issue 57911), so that the update y.iloc[k:] of such a y would be refused
    repeated = index[index.duplicated()].unique()
    if len(repeated):
        raise ValueError(
            f"{what} has repeated time stamps ({', '.join(map(str, repeated[:3]))}"
            f"{' ...' if len(repeated) > 3 else ''}); each time point may appear once"
        )
    if not index.is_monotonic_increasing:
        raise ValueError(f"{what} has time stamps out of order; sort it by time")
    if not even:
        time_values(index)  # a clear error for an index without numeric time stamps
        return
    if len(index) < 3:
        return
    if isinstance(index, pd.DatetimeIndex):
        if index.freq is not None or pd.infer_freq(index) is not None:
            return
        steps = np.diff(index.asi8)
    elif isinstance(index, pd.PeriodIndex):
        steps = np.diff(index.asi8)
    elif pd.api.types.is_numeric_dtype(index.dtype):
        steps = np.diff(index.to_numpy())
    else:
        return
    values, counts = np.unique(steps, return_counts=True)
    if len(values) > 1:
        usual = values[np.argmax(counts)]
        first = int(np.flatnonzero(steps != usual)[0])
        raise ValueError(
            f"{what} is not evenly spaced: after {index[first]} comes {index[first + 1]} (the usual step is "
            f"{_step_example(index, steps, usual)}); fill or resample the gaps first, since "
            "each step of the model is one period (or use irregular='time_deltas')"
        )


def _step_example(index: pd.Index, steps: np.ndarray, usual) -> str:
    """The usual step of an index as its time stamps show it: a Timedelta for a DatetimeIndex, a number for
    a numeric one, one pair of periods for a PeriodIndex (whose difference pandas prints as <MonthEnd>)."""
    at = int(np.flatnonzero(steps == usual)[0])
    if isinstance(index, pd.PeriodIndex):
        return f"{index[at]} to {index[at + 1]}"
    return f"{index[at + 1] - index[at]}"


def column_statistics(values: np.ndarray, columns, name: str) -> tuple[np.ndarray, np.ndarray]:
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
