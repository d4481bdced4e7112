"""SSMForecaster's newer surfaces under hostile input: backtests, stream(), infinite and huge
values, and interrupted fits and updates (each a clear error or a correct result, never a silent one)."""

import copy
import warnings

import numpy as np
import pandas as pd
import pytest
from sktime.forecasting.base import ForecastingHorizon

from ssmts.sktime import SSMForecaster
from ssmts.sktime._windows import check_regular_index

TINY = dict(d_model=8, d_state=4, n_layers=1, max_epochs=2, context_length=6, device="cpu", random_state=0)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


def series(n=40):
    t = np.arange(n)
    return pd.Series(10 + np.sin(t / 2.0), index=pd.period_range("2000-01", periods=n, freq="M"))


@pytest.fixture(scope="module")
def fitted():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return SSMForecaster(**TINY).fit(series(), fh=[1, 2])


@pytest.mark.parametrize("where", ["fit", "update", "backtest"])
def test_infinite_values_are_refused_where_they_enter(fitted, where):
    y = series().copy()
    y.iloc[30] = np.inf
    with pytest.raises(ValueError, match=r"y holds 1 infinite value\(s\) \(first: column .* at 200\d-\d\d\)"):
        if where == "fit":
            SSMForecaster(**TINY).fit(y, fh=[1])
        elif where == "update":
            copy.deepcopy(fitted).update(pd.concat([series(), y.iloc[30:31].set_axis(series(41).index[-1:])]))
        else:
            fitted.historical_forecasts(y, cutoffs=y.index[[35]])


def test_huge_values_give_a_clear_error_or_finite_forecasts(fitted):
    y = series() * 1e300
    try:
        out = fitted.historical_forecasts(y, cutoffs=y.index[[20, 30]])
    except FloatingPointError as error:
        assert "non-finite forecasts" in str(error) and "far outside the training data" in str(error)
    else:
        assert np.isfinite(out.to_numpy()).all()


@pytest.mark.parametrize(
    "cutoffs, match",
    [
        (pd.PeriodIndex(["2003-06"], freq="M"), "is after the last observation of y"),
        (pd.PeriodIndex([pd.NaT], freq="M"), "missing value"),
        (pd.PeriodIndex(["1999-06"], freq="M"), "before the first observation"),
    ],
)
def test_backtest_cutoffs_outside_the_data_are_refused(fitted, cutoffs, match):
    with pytest.raises(ValueError, match=match):
        fitted.historical_forecasts(series(), cutoffs=cutoffs)


@pytest.mark.parametrize(
    "value, error, match",
    [(True, TypeError, "booleans"), (np.inf, ValueError, "non-finite"), ("ten", TypeError, "must be numbers")],
)
def test_stream_refuses_booleans_and_infinite_observations(fitted, value, error, match):
    stream = fitted.stream()
    with pytest.raises(error, match=match):
        stream.update(value)
    assert stream.n_seen == 0


def test_a_stream_opened_before_a_refit_is_stale():
    f = SSMForecaster(**TINY).fit(series(), fh=[1, 2])
    stream = f.stream()
    stream.update(10.0)
    f.fit(series(), fh=[1, 2])
    with pytest.raises(ValueError, match="fitted again after this stream was opened"):
        stream.predict()


class _Interrupt(Exception):
    pass


def _interrupting(epochs=1):
    from ssmts.training import Callback

    class Stop(Callback):
        def on_epoch_end(self, trainer, record):
            if record["epoch"] >= epochs:
                raise _Interrupt

    return Stop()


def test_an_interrupted_update_leaves_the_forecaster_as_it_was():
    f = SSMForecaster(**TINY, update_epochs=3).fit(series(30), fh=[1, 2])
    before = (f.cutoff, f.predict().to_numpy(), len(f.history_), {k: v[0].index[-1] for k, v in f._store.items()})
    f.callbacks = [_interrupting()]  # not set_params, which resets a sktime forecaster to unfitted
    with pytest.raises(_Interrupt):
        f.update(series(36).iloc[30:], update_params=True)
    assert f.cutoff == before[0] and len(f.history_) == before[2]
    assert {k: v[0].index[-1] for k, v in f._store.items()} == before[3]
    np.testing.assert_array_equal(f.predict().to_numpy(), before[1])


def test_an_interrupted_refit_keeps_the_previous_fit():
    f = SSMForecaster(**TINY).fit(series(), fh=[1, 2])
    expected = f.predict().to_numpy()
    f.callbacks, f.max_epochs = [_interrupting()], 3
    with pytest.raises(_Interrupt):
        f.fit(series(50), fh=[1, 2, 3])
    np.testing.assert_array_equal(f.predict().to_numpy(), expected)


# ---------------------------------------------------------------- irregular time stamps
IRREGULAR = dict(TINY, strategy="recursive", irregular="time_deltas", quantiles=(0.1, 0.5, 0.9))


def uneven(n=40, hours=False):
    """Time stamps 1 to 29 apart (hours apart on a DatetimeIndex)."""
    t = np.cumsum(np.random.default_rng(0).integers(1, 30, n))
    index = pd.Timestamp("2024-01-01") + pd.to_timedelta(t, unit="h") if hours else pd.Index(t)
    return pd.Series(np.sin(t / 20.0), index=index)


@pytest.mark.parametrize(
    "time_unit, hours",
    [
        (1e-300, False),  # gaps overflow to inf
        (1e300, False),  # gaps underflow to 0 in float32, which the SSM would step as one unit
        (1e-5, False),  # gaps of 1e5..3e6 units: the state would forget everything at every step
        (1e8, False),  # gaps of 1e-8..3e-7 units: the state would hardly move over the series
        ("1ns", True),
        (3600, True),  # seconds meant, but a number is in nanoseconds on a DatetimeIndex
    ],
)
def test_a_time_unit_far_from_the_spacing_is_refused(time_unit, hours):
    y = uneven(hours=hours)
    fh = ForecastingHorizon(
        y.index[-1:] + (pd.Timedelta("1h") if hours else 5), is_relative=False, freq="min" if hours else None
    )
    with pytest.raises(ValueError, match=r"time_unit=.* makes the gaps of the training series .* units \(median"):
        SSMForecaster(**IRREGULAR, time_unit=time_unit).fit(y, fh=fh)


def test_a_calendar_time_unit_is_refused_clearly():
    y = uneven(hours=True)
    fh = ForecastingHorizon(y.index[-1:] + pd.Timedelta("1h"), is_relative=False, freq="min")
    with pytest.raises(ValueError, match=r"time_unit='1ME' is not a fixed duration"):
        SSMForecaster(**IRREGULAR, time_unit="1ME").fit(y, fh=fh)


@pytest.mark.parametrize("irregular", ["refuse", "time_deltas"])
def test_time_stamps_out_of_order_are_refused_naming_them(irregular):
    """sktime would refuse them first, with an error about unsupported input types."""
    y = uneven() if irregular == "time_deltas" else series()
    params = IRREGULAR if irregular == "time_deltas" else TINY
    swapped = y.iloc[np.r_[0:10, 11, 10, 12 : len(y)]]
    with pytest.raises(
        ValueError, match=rf"the time index of y is out of order: {y.index[11]} comes before {y.index[10]}"
    ):
        SSMForecaster(**params).fit(swapped, fh=[5])
    panel = pd.concat({"a": y, "b": swapped}, names=["k", "t"]).to_frame("v")
    with pytest.raises(ValueError, match=r"the time index of series 'b' in y is out of order"):
        SSMForecaster(**params).fit(panel, fh=[5])
    f = SSMForecaster(**params).fit(y.iloc[:30], fh=[5])
    with pytest.raises(ValueError, match=r"the time index of y is out of order.*sort it by time"):
        f.update(y.iloc[[32, 31, 33]], update_params=False)
    assert f.cutoff[0] == y.index[29]


def test_an_update_sliced_from_a_series_with_repeats_is_read_as_it_is():
    """pandas 2.1-2.3 flags a slice of an index with repeated values as having them too, once the
    parent's were looked for (pandas issue 57911): after the refused fit on such a y, its repeat-free
    tail y.iloc[25:] must not be refused as an update."""
    y = uneven()
    repeats = y.set_axis(np.r_[y.index[:20], y.index[19], y.index[21:]])
    with pytest.raises(ValueError, match=rf"repeated time stamps \({y.index[19]}\); each time point may appear once"):
        SSMForecaster(**IRREGULAR).fit(repeats, fh=[5])
    f = SSMForecaster(**IRREGULAR).fit(y.iloc[:30], fh=[5])
    f.update(repeats.iloc[25:], update_params=False)
    assert f.cutoff[0] == y.index[-1]
    index = pd.Index([1, 2, 2, 3, 4])
    assert index.has_duplicates
    check_regular_index(index[2:], "y", even=False)  # 2, 3, 4
