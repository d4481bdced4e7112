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
    with pytest.raises(ValueError, match="needs strategy='recursive' and layer='ssm'"):
        SSMForecaster(**{**TINY, "strategy": "direct"}, irregular="time_deltas").fit(y, fh=[10])
    with pytest.raises(ValueError, match="needs strategy='recursive' and layer='ssm'"):
        SSMForecaster(**TINY, irregular="time_deltas", layer="lncde").fit(y, fh=[10])
    with pytest.raises(ValueError, match="time_unit"):
        SSMForecaster(**TINY, irregular="time_deltas", time_unit=-1.0).fit(y, fh=[10])
    with pytest.raises(ValueError, match="needs a DatetimeIndex"):
        SSMForecaster(**TINY, irregular="time_deltas", time_unit="1h").fit(y, fh=[10])
