"""SSMForecaster(irregular="time_deltas"): series with uneven gaps, each SSM step scaled by its gap.

Oracles: on an evenly spaced series the gaps are all one unit, so the forecasts equal those of
the regular forecaster (per-step Delta = Delta); scaling every time stamp and the unit together
changes nothing; the rolled forecast equals a step-by-step pass of the fitted network fed the
gaps by hand. Tiny networks, few epochs."""

import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from sktime.forecasting.base import ForecastingHorizon

from ssmts.sktime import SSMForecaster
from ssmts.sktime._windows import gaps_into

TINY = dict(
    d_model=8,
    d_state=4,
    n_layers=1,
    max_epochs=3,
    batch_size=16,
    context_length=12,
    device="cpu",
    random_state=0,
    quantiles=(0.1, 0.5, 0.9),
    strategy="recursive",
    n_sample_paths=16,
)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


def uneven(n=80, seed=0, scale=1000):
    """A sinusoid at Poisson times, on an integer index (sktime's numeric indexes are integers)."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(np.maximum(rng.exponential(1.0, n), 0.05))
    index = pd.Index(np.round(t * scale).astype(np.int64))
    return pd.Series(np.sin(2 * np.pi * t / 9.0) + 0.05 * rng.standard_normal(n), index=index, name="y")


def test_evenly_spaced_series_gives_the_regular_forecasts():
    """All gaps = one unit: Delta_k = Delta, so the forecasts (and intervals) are the regular forecaster's."""
    y = uneven()
    y = pd.Series(y.to_numpy(), index=pd.period_range("2000-01", periods=len(y), freq="M"), name="y")
    fh = [1, 2, 3]  # three steps: both train on windows of three targets
    regular = SSMForecaster(**TINY).fit(y, fh=fh)
    deltas = SSMForecaster(**TINY, irregular="time_deltas").fit(y, fh=fh)
    assert deltas.time_unit_ == 1.0  # month ordinals
    np.testing.assert_allclose(deltas.predict().to_numpy(), regular.predict().to_numpy(), rtol=1e-4, atol=1e-5)
    pd.testing.assert_index_equal(deltas.predict().index, regular.predict().index)


def test_scaling_the_time_stamps_and_the_unit_together_changes_nothing():
    y = uneven()
    fh = [400, 1500]
    a = SSMForecaster(**TINY, irregular="time_deltas").fit(y, fh=fh).predict()
    y2 = pd.Series(y.to_numpy(), index=y.index * 2, name="y")
    b = SSMForecaster(**TINY, irregular="time_deltas").fit(y2, fh=[800, 3000]).predict()
    c = SSMForecaster(**TINY, irregular="time_deltas", time_unit=2 * 690).fit(y2, fh=[800, 3000]).predict()
    d = SSMForecaster(**TINY, irregular="time_deltas", time_unit=690).fit(y, fh=fh).predict()
    np.testing.assert_allclose(a.to_numpy(), b.to_numpy(), rtol=1e-5)
    np.testing.assert_allclose(c.to_numpy(), d.to_numpy(), rtol=1e-5)
    assert list(b.index) == [y2.index[-1] + 800, y2.index[-1] + 3000]


def test_rolled_forecast_equals_a_pass_fed_the_gaps_by_hand():
    """The point forecast at uneven future times equals the network run step by step (its SSM `step`
    with each gap), reading the normalized context then its own medians."""
    y = uneven(seed=1)
    fh = [250, 900, 1000]
    f = SSMForecaster(**TINY, irregular="time_deltas").fit(y, fh=fh)
    head = f.model_.members[0]
    unit, c = f.time_unit_, f.context_length
    times = np.concatenate([y.index.to_numpy()[-c:], y.index[-1] + np.array(fh)]).astype(float)
    gaps = np.diff(times) / unit  # the gap from each position to the value it forecasts
    ctx = y.to_numpy()[-c:]
    shift, scale = ctx[-1], np.sqrt(ctx.std() ** 2 + (1e-3 * f.y_scale_[0]) ** 2)
    median = int(np.flatnonzero(f.quantile_levels_ == 0.5)[0])
    with torch.no_grad():
        state = head.backbone.initial_state(1)
        inputs = list((ctx - shift) / scale)
        out = []
        for k in range(c + len(fh) - 1):
            features, state = head.backbone.step(
                torch.tensor([[inputs[k]]], dtype=torch.float32), state, dt=torch.tensor([gaps[k]], dtype=torch.float32)
            )
            if k >= c - 1:
                q = head.decoder(features).view(-1).sort().values[median].item()
                out.append(q)
                inputs.append(q)
    np.testing.assert_allclose(f.predict().to_numpy(), np.array(out) * scale + shift, rtol=1e-4, atol=1e-5)


def test_datetime_index_update_and_intervals():
    y = uneven(n=70)
    y.index = pd.Timestamp("2024-01-01") + pd.to_timedelta(y.index.to_numpy(), unit="ms") * 3600
    future = y.index[-1] + pd.to_timedelta([0.5, 1.25, 3.0], unit="h")
    fh = ForecastingHorizon(future, is_relative=False, freq="min")  # sktime's horizon checks need a freq
    f = SSMForecaster(**TINY, irregular="time_deltas", time_unit="1h").fit(y.iloc[:-5], fh=fh)
    assert f.time_unit_ == 3600e9
    f.update(y.iloc[-5:])  # fine-tunes on the windows reaching the new observations
    pred = f.predict(fh)
    pd.testing.assert_index_equal(pred.index, future)
    assert np.isfinite(pred.to_numpy()).all()
    intervals = f.predict_interval(fh, coverage=0.8)
    assert intervals.shape == (3, 2) and (intervals.iloc[:, 0] <= intervals.iloc[:, 1]).all()


def test_errors():
    y = uneven()
    with pytest.raises(ValueError, match=r"not evenly spaced.*irregular='time_deltas'"):
        SSMForecaster(**TINY).fit(y, fh=[10])
    # the usual step as the stamps show it (a PeriodIndex's difference printed as <MonthEnd>)
    months = pd.Series(np.arange(30.0), index=pd.period_range("2000-01", periods=30, freq="M")).drop(
        pd.Period("2000-05", "M")
    )
    with pytest.raises(ValueError, match=r"after 2000-04 comes 2000-06 \(the usual step is 2000-01 to 2000-02\)"):
        SSMForecaster(**TINY).fit(months, fh=[1])
    hours = pd.Series(np.arange(30.0), index=pd.date_range("2000-01-01", periods=30, freq="h")).drop(
        pd.Timestamp("2000-01-01 04:00")
    )
    with pytest.raises(ValueError, match=r"the usual step is 0 days 01:00:00\)"):
        SSMForecaster(**TINY).fit(hours, fh=[1])
    with pytest.raises(ValueError, match="needs strategy='recursive' and layer='ssm'"):
        SSMForecaster(**{**TINY, "strategy": "direct"}, irregular="time_deltas").fit(y, fh=[10])
    with pytest.raises(ValueError, match="needs strategy='recursive' and layer='ssm'"):
        SSMForecaster(**TINY, irregular="time_deltas", layer="lncde").fit(y, fh=[10])
    with pytest.raises(ValueError, match="time_unit"):
        SSMForecaster(**TINY, irregular="time_deltas", time_unit=-1.0).fit(y, fh=[10])
    with pytest.raises(ValueError, match="needs a DatetimeIndex"):
        SSMForecaster(**TINY, irregular="time_deltas", time_unit="1h").fit(y, fh=[10])


def on_datetimes(y, start="2024-01-01", unit="s"):
    """y's integer stamps as seconds from `start`, at the index resolution `unit`."""
    index = pd.Timestamp(start) + pd.to_timedelta(y.index.to_numpy(), unit="s")
    return pd.Series(y.to_numpy(), index=index.as_unit(unit), name="y")


@pytest.mark.parametrize("time_unit", ["1h", None])
def test_every_index_resolution_gives_the_same_gaps_and_forecasts(time_unit):
    """pandas indexes come in s, ms, us (pandas 3's default) or ns resolution: gaps and time_unit_
    are in nanoseconds whatever it is, so the forecasts are the same."""
    y = on_datetimes(uneven(n=60, scale=3600))  # hours apart on average
    future = y.index[-1] + pd.to_timedelta([0.5, 1.25, 3.0], unit="h")
    results = {}
    for unit in ["s", "ms", "us", "ns"]:
        yu = pd.Series(y.to_numpy(), index=y.index.as_unit(unit), name="y")
        fh = ForecastingHorizon(future.as_unit(unit), is_relative=False, freq="min")
        f = SSMForecaster(**TINY, irregular="time_deltas", time_unit=time_unit).fit(yu, fh=fh)
        results[unit] = f.time_unit_, f.predict(), f.predict_interval(coverage=0.8), yu.index
    unit_ns, point_ns, interval_ns, index_ns = results["ns"]
    assert time_unit is None or unit_ns == 3600e9
    for unit, (unit_, point, interval, index) in results.items():
        assert unit_ == unit_ns, unit
        np.testing.assert_array_equal(point.to_numpy(), point_ns.to_numpy(), err_msg=unit)
        np.testing.assert_array_equal(interval.to_numpy(), interval_ns.to_numpy(), err_msg=unit)
        assert (point.index == future).all()
        np.testing.assert_array_equal(gaps_into(index, unit_), gaps_into(index_ns, unit_ns), err_msg=unit)


@pytest.mark.parametrize("tick", ["ns", "us"])
def test_gaps_of_a_few_ticks_on_a_2020_index_are_exact(tick):
    """Nanoseconds since 1970 exceed 2^53 (float64's exact integers) since 1970-04: differenced as
    floats, 2020 time stamps would be rounded to multiples of 256 ns. Moving every time stamp by 50
    years changes neither the gaps nor the forecasts."""
    rng = np.random.default_rng(0)
    steps = rng.integers(1, 10, 59)
    values = np.sin(np.cumsum(steps) / 9.0)
    fh_steps = pd.to_timedelta([2, 7], unit=tick)
    results = {}
    for start in ["1970-01-01", "2020-06-01"]:
        index = pd.Timestamp(start) + pd.to_timedelta(np.cumsum(steps), unit=tick)
        ys = pd.Series(values, index=index, name="y")
        fh = ForecastingHorizon(index[-1] + fh_steps, is_relative=False, freq=tick)
        default = SSMForecaster(**TINY, irregular="time_deltas").fit(ys, fh=fh)
        assert default.time_unit_ == np.median(steps[1:]) * (1000 if tick == "us" else 1), start
        f = SSMForecaster(**TINY, irregular="time_deltas", time_unit=f"1{tick}").fit(ys, fh=fh)
        results[start] = f.predict().to_numpy(), ys.index, f.time_unit_
    np.testing.assert_array_equal(results["1970-01-01"][0], results["2020-06-01"][0])
    for _, index, unit in results.values():
        np.testing.assert_array_equal(gaps_into(index, unit)[1:], steps[1:])


@pytest.mark.parametrize("update_params", [False, True])
def test_update_then_predict_at_new_time_stamps(update_params):
    """The workflow the errors of historical_forecasts and stream() recommend: update with the new
    observations, then predict with the time stamps to forecast as fh (sktime itself refuses an fh
    other than fit's; here fit's fh only sets how many observations ahead the windows train). With
    X, and fh as a freq-less DatetimeIndex or ForecastingHorizon."""
    y = on_datetimes(uneven(n=70, scale=3600))
    X = pd.DataFrame({"x": np.cos(np.arange(len(y)) / 5.0)}, index=y.index)
    first = y.index[54] + pd.to_timedelta([0.5, 2.0], unit="h")
    later = pd.DatetimeIndex(y.index[-1] + pd.to_timedelta([0.25, 1.0, 4.0], unit="h"))
    x_later = pd.DataFrame({"x": [0.1, 0.2, 0.3]}, index=later)
    f = SSMForecaster(**TINY, irregular="time_deltas", time_unit="1h")
    f.fit(y.iloc[:55], X.iloc[:55], fh=ForecastingHorizon(first, is_relative=False, freq="min"))
    f.update(y.iloc[55:], X.iloc[55:], update_params=update_params)
    point = f.predict(fh=later, X=x_later)
    pd.testing.assert_index_equal(point.index, later)
    intervals = f.predict_interval(fh=ForecastingHorizon(later, is_relative=False), X=x_later, coverage=0.8)
    assert (intervals.iloc[:, 0] <= point).all() and (point <= intervals.iloc[:, 1]).all()
    pd.testing.assert_series_equal(f.predict(X=x_later), point)  # the last fh is remembered
    if not update_params:
        # with the same weights and statistics, a forecaster fitted on all of y forecasts the same numbers
        fresh = SSMForecaster(**TINY, irregular="time_deltas", time_unit="1h").fit(y, X, fh=later)
        fresh.model_.load_state_dict(f.model_.state_dict())
        fresh.y_mean_, fresh.y_scale_, fresh.scale_floor_ = f.y_mean_, f.y_scale_, f.scale_floor_
        fresh.x_mean_, fresh.x_scale_ = f.x_mean_, f.x_scale_
        pd.testing.assert_series_equal(point, fresh.predict(X=x_later), rtol=1e-6)
    f.update(y.iloc[-1:] + 1.0, update_params=False)  # a revision: the cutoff stays
    f.predict(fh=later, X=x_later)
    g = SSMForecaster(**TINY, irregular="time_deltas", time_unit="1h").fit(y.iloc[:55], fh=first)
    g.update(y.iloc[55:], update_params=False)
    with pytest.raises(ValueError, match=r"fh reaches into the observed data of y.*give the time stamps to forecast"):
        g.predict()  # fit's fh now lies in the past
