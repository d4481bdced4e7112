"""Behaviour of SSMForecaster: horizons, exogenous X, multivariate and panel data,
quantiles, update, reproducibility, persistence and errors. Tiny networks, few epochs."""

import copy
import itertools
import pickle
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
    quantiles=(0.1, 0.25, 0.5, 0.75, 0.9),
    update_epochs=2,
    n_sample_paths=64,
)
STRATEGIES = ["direct", "recursive"]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


def seasonal(n=60, level=10.0, name="sales", seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    values = level + 0.05 * t + np.sin(2 * np.pi * t / 12) + 0.1 * rng.normal(size=n)
    return pd.Series(values, index=pd.period_range("2000-01", periods=n, freq="M"), name=name)


def forecaster(**params):
    return SSMForecaster(**{**TINY, **params})


def weights(f):
    return {k: v.detach().clone() for k, v in f.model_.state_dict().items()}


# ---------------------------------------------------------------- horizons
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_relative_absolute_and_non_contiguous_horizons_agree(strategy):
    y = seasonal()
    full = forecaster(strategy=strategy).fit(y, fh=[1, 2, 3, 4, 5]).predict()
    # Same max(fh) -> same network and training: the requested steps are selections of it.
    sparse = forecaster(strategy=strategy).fit(y, fh=[2, 5]).predict()
    assert list(sparse.index) == [y.index[-1] + 2, y.index[-1] + 5]
    np.testing.assert_allclose(sparse.to_numpy(), full.iloc[[1, 4]].to_numpy(), rtol=1e-6)
    absolute = ForecastingHorizon(pd.PeriodIndex([y.index[-1] + 2, y.index[-1] + 5]), is_relative=False)
    pred_abs = forecaster(strategy=strategy).fit(y, fh=absolute).predict()
    pd.testing.assert_series_equal(pred_abs, sparse)
    assert pred_abs.name == "sales"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_integer_index_with_a_spacing_reads_fh_in_index_units(strategy):
    # sktime labels a relative fh k on an integer index as cutoff + k; observed every 3, the network's
    # step k is 3k index units ahead, so fh=[3, 6] is one and two steps, and fh=[1] is not on the grid.
    values = seasonal().to_numpy()
    spaced = pd.Series(values, index=pd.Index(np.arange(0, 3 * len(values), 3)))
    unit = pd.Series(values, index=pd.RangeIndex(len(values)))
    pred = forecaster(strategy=strategy).fit(spaced, fh=[3, 6]).predict()
    expected = forecaster(strategy=strategy).fit(unit, fh=[1, 2]).predict()
    assert list(pred.index) == [spaced.index[-1] + 3, spaced.index[-1] + 6]
    np.testing.assert_allclose(pred.to_numpy(), expected.to_numpy(), rtol=1e-6)
    absolute = ForecastingHorizon(pd.Index([spaced.index[-1] + 6]), is_relative=False)
    np.testing.assert_allclose(
        forecaster(strategy=strategy).fit(spaced, fh=absolute).predict().to_numpy(), expected.to_numpy()[1:], rtol=1e-6
    )
    with pytest.raises(ValueError, match="not multiples of the series' spacing 3"):
        forecaster(strategy=strategy).fit(spaced, fh=[1, 2])


def test_in_sample_horizon_raises():
    with pytest.raises(NotImplementedError, match="in-sample"):
        forecaster().fit(seasonal(), fh=[-1, 1])


def test_fh_must_be_given_in_fit_and_cannot_change():
    f = forecaster()
    with pytest.raises(ValueError, match="fh"):
        f.fit(seasonal())
    f.fit(seasonal(), fh=[1, 2])
    with pytest.raises(ValueError, match="different forecasting horizon"):
        f.predict(fh=[1, 2, 3])


# ---------------------------------------------------------------- exogenous X
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_exogenous_x_is_used(strategy):
    y = seasonal(72)
    rng = np.random.default_rng(1)
    X = pd.DataFrame({"promo": rng.normal(size=72), "price": rng.normal(size=72)}, index=y.index)
    y = y + 2.0 * X["promo"]  # y depends on the same-time X
    y_train, X_train, X_future = y.iloc[:-3], X.iloc[:-3], X.iloc[-3:]
    f = forecaster(strategy=strategy, max_epochs=20, lr=1e-2).fit(y_train, X=X_train, fh=[1, 2, 3])
    base = f.predict(X=X_future)
    shifted = f.predict(X=X_future.assign(promo=X_future["promo"] + 3.0))
    assert base.shape == (3,) and list(base.index) == list(X_future.index)
    assert np.abs(shifted - base).min() > 1e-3, "future X did not change the forecast"
    with pytest.raises(ValueError, match="X is missing 3 time point"):
        f.predict()
    with pytest.raises(ValueError, match="missing 1 time point"):
        f.predict(X=X_future.iloc[:2])
    with pytest.raises(ValueError, match=r"columns \['price', 'promo'\], but .* fitted with \['promo', 'price'\]"):
        f.predict(X=X_future[["price", "promo"]])


def test_x_passed_to_a_model_fitted_without_x_raises():
    y = seasonal()
    X = pd.DataFrame({"a": np.ones(len(y))}, index=y.index)
    f = forecaster().fit(y, fh=[1])
    future = pd.DataFrame({"a": [1.0]}, index=pd.period_range(y.index[-1] + 1, periods=1, freq="M"))
    with pytest.raises(ValueError, match="fitted without exogenous X"):
        f.predict(X=future)
    with pytest.raises(ValueError, match="fitted without exogenous X"):
        f.update(y.iloc[-2:], X=X.iloc[-2:], update_params=False)


def test_a_numpy_x_is_refused_where_it_cannot_be_indexed_like_y_saying_what_to_pass():
    """sktime reads an array's rows as the time points 0..n-1: not y's PeriodIndex, not the forecast
    steps after the cutoff, not a panel's rows; each gets an error naming the DataFrame to pass."""
    y = seasonal()
    X = pd.DataFrame({"a": np.arange(len(y), dtype=float)}, index=y.index)
    with pytest.raises(
        TypeError,
        match=r"numpy array.*0\.\.59\), but y's time points are 2000-01\.\.2004-12; pass X as a "
        r"pandas DataFrame indexed like y",
    ):
        forecaster().fit(y, X=X.to_numpy(), fh=[1])
    f = forecaster().fit(y.iloc[:-2], X=X.iloc[:-2], fh=[1, 2])
    with pytest.raises(
        TypeError,
        match=r"predict needs X at every forecast step 1\.\.max\(fh\) after the cutoff "
        r"2004-10\. Pass X as a pandas DataFrame indexed by those time points",
    ):
        f.predict(X=X.iloc[-2:].to_numpy())
    with pytest.raises(TypeError, match="pass X as a pandas DataFrame indexed like y"):
        f.update(y.iloc[-2:], X=X.iloc[-2:].to_numpy(), update_params=False)
    assert f.cutoff[0] == y.index[-3]  # the refused update left the forecaster as it was
    panel = pd.concat({"s1": y, "s2": y + 1.0}, names=["series", "time"]).to_frame("y")
    with pytest.raises(TypeError, match="y is a panel .* pass X as a pandas DataFrame with y's"):
        forecaster().fit(panel, X=np.zeros((len(panel), 1)), fh=[1])
    # where sktime's reading of the array is y's own index, the array is X indexed like y
    ranged = y.reset_index(drop=True)
    by_array = forecaster().fit(ranged, X=X.to_numpy(), fh=[1]).predict(X=pd.DataFrame({0: [60.0]}, index=[60]))
    by_frame = forecaster().fit(ranged, X=pd.DataFrame({0: X["a"].to_numpy()}), fh=[1])
    pd.testing.assert_series_equal(by_array, by_frame.predict(X=pd.DataFrame({0: [60.0]}, index=[60])))


# ---------------------------------------------------------------- past-only and static covariates
def _with_sensor(n=72, seed=1):
    """y driven by a lagged sensor (known only up to the cutoff) and a same-time promo (known ahead)."""
    rng = np.random.default_rng(seed)
    y = seasonal(n)
    X = pd.DataFrame({"promo": rng.normal(size=n), "sensor": rng.normal(size=n)}, index=y.index)
    return y + X["promo"] + X["sensor"].shift(1).fillna(0.0), X


def test_past_covariate_is_never_read_after_the_cutoff():
    y, X = _with_sensor()
    y_train, X_train, X_future = y.iloc[:-3], X.iloc[:-3], X.iloc[-3:]
    f = forecaster(max_epochs=5, past_covariates=["sensor"]).fit(y_train, X=X_train, fh=[1, 2, 3])
    base = f.predict(X=X_future)
    assert np.isfinite(base).all()
    for future in (X_future.assign(sensor=np.nan), X_future.assign(sensor=1e9), X_future[["promo"]]):
        pd.testing.assert_series_equal(f.predict(X=future), base)
    # ... but it is read over the context
    f2 = copy.deepcopy(f)
    f2._store[()][1].loc[:, "sensor"] += 5.0
    assert np.abs(f2.predict(X=X_future) - base).min() > 1e-6
    # only past-only columns: predict needs no X at all
    g = forecaster(max_epochs=2, past_covariates=["sensor"]).fit(y_train, X=X_train[["sensor"]], fh=[1, 2, 3])
    assert np.isfinite(g.predict()).all()


def test_training_windows_never_show_a_past_covariate_over_their_targets():
    y, X = _with_sensor()
    f = forecaster(max_epochs=1, past_covariates=["sensor"]).fit(y, X=X, fh=[1, 2, 3])
    y_frame = y.to_frame()

    def windows(x):
        return f._series_windows((), y_frame, x)

    clean = windows(X)
    # The last 3 (= horizon) rows are targets of every window, never a context: poisoning them
    # changes nothing for the past-only column, and (the check has teeth) changes the known-ahead one.
    poisoned = X.copy()
    poisoned.iloc[-3:, 1] = 1e6
    np.testing.assert_array_equal(windows(poisoned).x, clean.x)
    poisoned.iloc[-3:, 0] = 1e6
    assert not np.array_equal(windows(poisoned).x, clean.x)
    assert np.all(clean.x[:, 2, 12:] == 0)  # channels y, promo, sensor; the sensor is 0 after each context


def test_recursive_strategy_refuses_past_covariates():
    y, X = _with_sensor()
    with pytest.raises(ValueError, match=r"recursive.*past_covariates=\['sensor'\].*strategy='direct'"):
        forecaster(strategy="recursive", past_covariates=["sensor"]).fit(y, X=X, fh=[1])


def test_covariate_names_are_checked_against_x():
    y, X = _with_sensor()
    with pytest.raises(ValueError, match=r"past_covariates names \['nope'\], which are not columns of X"):
        forecaster(past_covariates=["nope"]).fit(y, X=X, fh=[1])
    with pytest.raises(ValueError, match="both past and static"):
        forecaster(past_covariates=["sensor"], static_covariates=["sensor"]).fit(y, X=X, fh=[1])


def _panel_with_statics():
    y = _panel([48, 40], [10.0, 20.0])
    X = pd.DataFrame(
        {"promo": np.cos(np.arange(len(y))), "size": np.where(y.index.get_level_values(0) == "s0", 1.0, 3.0)},
        index=y.index,
    )
    return y, X


def _future_x(y, X, steps):
    """X rows after each series' end: promo only."""
    rows = []
    for store in y.index.get_level_values(0).unique():
        end = y.loc[store].index[-1]
        idx = pd.MultiIndex.from_product([[store], [end + k for k in range(1, steps + 1)]], names=y.index.names)
        rows.append(pd.DataFrame({"promo": np.arange(steps, dtype=float)}, index=idx))
    return pd.concat(rows)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_static_covariates_are_remembered_per_series(strategy):
    y, X = _panel_with_statics()
    f = forecaster(strategy=strategy, max_epochs=3, static_covariates=["size"]).fit(y, X=X, fh=[1, 2])
    future = _future_x(y, X, 2)
    base = f.predict(X=future)  # no "size": remembered from fit
    assert np.isfinite(base.to_numpy()).all() and len(base) == 4
    with_size = future.assign(size=np.where(future.index.get_level_values(0) == "s0", 1.0, 3.0))[["promo", "size"]]
    pd.testing.assert_frame_equal(f.predict(X=with_size), base)
    # the network reads them: another value changes the forecast of that series
    f2 = copy.deepcopy(f)
    f2._statics[("s1",)] = np.array([1.0])
    changed = (f2.predict(X=future) - base).abs()["sales"]
    assert changed.loc["s1"].min() > 1e-6 and changed.loc["s0"].max() == 0
    with pytest.raises(ValueError, match=r"static covariate 'size' of series 's0' is 5.0 in X, but was 1.0"):
        f.predict(X=with_size.assign(size=5.0))


def test_static_covariates_that_vary_or_are_missing_raise():
    y, X = _panel_with_statics()
    varying = X.copy()
    varying.loc[("s1", y.loc["s1"].index[5]), "size"] = 4.0
    with pytest.raises(ValueError, match=r"static covariate 'size' varies within series 's1'"):
        forecaster(static_covariates=["size"]).fit(y, X=varying, fh=[1])
    missing = X.copy()
    missing.loc["s1", "size"] = np.nan
    with pytest.raises(ValueError, match=r"static covariate 'size' is missing for series 's1'"):
        forecaster(static_covariates=["size"]).fit(y, X=missing, fh=[1])


# ---------------------------------------------------------------- missing values
def smooth(n=80):
    t = np.arange(n)
    return pd.Series(10 + np.sin(2 * np.pi * t / 12), index=pd.period_range("2000-01", periods=n, freq="M"), name="s")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_gaps_in_y_and_x_are_imputed_and_masked(strategy):
    y = smooth()
    X = pd.DataFrame({"promo": np.cos(np.arange(len(y)))}, index=y.index)
    gappy, X_gappy = y.copy(), X.copy()
    gappy.iloc[[20, 21, 22, 40, 55, 70, 78]] = np.nan  # 70: in the last context; 78: a gap in update
    X_gappy.iloc[[10, 30, 31]] = np.nan
    params = dict(strategy=strategy, max_epochs=20, lr=1e-2)
    y_train, X_train, X_future = gappy.iloc[:-3], X_gappy.iloc[:-3], X.iloc[-3:]
    f = forecaster(**params).fit(y_train, X=X_train, fh=[1, 2, 3])
    windows = f._series_windows((), y_train.to_frame(), X_train)
    assert np.isfinite(windows.x).all() and np.isfinite(windows.target).all()
    # the gaps are targets of some windows, and weigh nothing there
    assert windows.weight.min() == 0 and windows.weight.sum() < windows.weight.size
    assert all(np.isfinite(h["train_loss"]) for h in f.history_)
    pred = f.predict(X=X_future)
    assert np.isfinite(pred).all()
    reference = forecaster(**params).fit(y.iloc[:-3], X=X.iloc[:-3], fh=[1, 2, 3]).predict(X=X_future)
    # the series' amplitude is 1; tiny networks after 20 epochs differ by 0.1-0.3 from the gap-free fit
    assert np.abs(pred - reference).max() < 0.5, (pred, reference)
    # update with a gap keeps forecasting
    f.update(gappy.iloc[-3:], X=X.iloc[-3:], update_params=True)
    assert np.isfinite(
        f.predict(
            X=pd.DataFrame({"promo": [0.0, 0.0, 0.0]}, index=pd.period_range(y.index[-1] + 1, periods=3, freq="M"))
        )
    ).all()


def test_window_normalization_uses_observed_values_only():
    f = forecaster(normalize="mean").fit(smooth(), fh=[1])
    context = np.array([[[1.0, np.nan, 3.0, np.nan]]])
    shift, scale = f._norm_stats(context)
    assert shift.item() == 2.0 and np.isclose(scale.item(), np.sqrt(1.0 + (1e-3 * 2.0) ** 2))  # floor: 1e-3 x level
    f = forecaster(normalize="last").fit(smooth(), fh=[1])
    assert f._norm_stats(context)[0].item() == 3.0  # the last observed value


def test_a_small_series_in_a_panel_of_large_ones_keeps_its_own_scale():
    # the floor follows each window's level: a panel-wide floor (1e-3 x the panel's spread, here about
    # 50) would swamp the spread of a series near 2.6 and blow its forecasts up by the ratio
    t = np.arange(40)
    small = 2.6 + 0.01 * np.sin(t)
    panel = pd.concat(
        {
            "small": pd.DataFrame({"y": small}, index=pd.period_range("1950", periods=40, freq="Y")),
            "large": pd.DataFrame({"y": 1e5 + 1e4 * np.sin(t)}, index=pd.period_range("1950", periods=40, freq="Y")),
        },
        names=["series", "time"],
    )
    f = forecaster(context_length=8).fit(panel, fh=[1])
    assert f.scale_floor_[0] > 1  # the panel-wide floor
    context = small[None, None, -8:]
    _, scale = f._norm_stats(context)
    np.testing.assert_allclose(scale.item(), np.hypot(context.std(), 1e-3 * context.mean()), rtol=1e-12)
    zero = np.zeros((1, 1, 8))
    assert f._norm_stats(zero)[1].item() == f.scale_floor_[0]  # level 0: the panel-wide floor


def test_a_context_without_observations_raises_at_predict():
    y = smooth(60)
    y.iloc[-12:] = np.nan  # the whole last context (context_length=12)
    f = forecaster().fit(y, fh=[1])
    with pytest.raises(ValueError, match=r"context of y .*no observed value of \['s'\]"):
        f.predict()


def test_series_without_a_usable_window_raises():
    y = smooth(20)
    y.iloc[::2] = np.nan
    y.iloc[1::2] = np.nan
    y.iloc[0] = 1.0
    with pytest.raises(ValueError, match="no training window"):
        forecaster().fit(y, fh=[1])


# ---------------------------------------------------------------- shapes
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_multivariate_shapes(strategy):
    y = pd.concat([seasonal(name="a"), 5 * seasonal(name="b", seed=3)], axis=1)
    f = forecaster(strategy=strategy).fit(y, fh=[1, 2, 3])
    pred = f.predict()
    assert pred.shape == (3, 2) and list(pred.columns) == ["a", "b"]
    q = f.predict_quantiles(alpha=[0.1, 0.9])
    assert list(q.columns) == [("a", 0.1), ("a", 0.9), ("b", 0.1), ("b", 0.9)]
    interval = f.predict_interval(coverage=0.8)
    assert interval.shape == (3, 4)


def _panel(lengths, levels):
    frames = []
    for i, (n, level) in enumerate(zip(lengths, levels)):
        s = seasonal(n, level=level, seed=i)
        s.index = pd.MultiIndex.from_arrays([[f"s{i}"] * n, s.index], names=["store", "month"])
        frames.append(s.to_frame("sales"))
    return pd.concat(frames)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_panel_is_one_global_model_with_per_series_forecasts(strategy):
    y = _panel([60, 48, 55], [10.0, 1000.0, -50.0])
    f = forecaster(strategy=strategy, max_epochs=10).fit(y, fh=[1, 2])
    pred = f.predict()
    assert isinstance(f.model_, torch.nn.Module) and not hasattr(f, "forecasters_")  # not vectorized
    assert pred.index.names == ["store", "month"]
    for store, length in zip(["s0", "s1", "s2"], [60, 48, 55]):
        last = y.loc[store].index[-1]
        assert list(pred.loc[store].index) == [last + 1, last + 2]  # each series from its own end
    # instance normalization: each series is forecast at its own level
    levels = pred.groupby(level="store").mean()["sales"]
    assert abs(levels["s0"] - 12) < 5 and abs(levels["s1"] - 1002) < 10 and abs(levels["s2"] + 48) < 5


def test_hierarchical_panel():
    y = _panel([40, 40, 40, 40], [1.0, 2.0, 3.0, 4.0])
    stores = y.index.get_level_values(0)
    regions = np.where(np.isin(stores, ["s0", "s1"]), "north", "south")
    y.index = pd.MultiIndex.from_arrays(
        [regions, stores, y.index.get_level_values(1)], names=["region", "store", "month"]
    )
    pred = forecaster().fit(y, fh=[1, 2, 3]).predict()
    assert pred.index.nlevels == 3 and len(pred) == 12
    assert set(pred.index.droplevel(-1)) == set(y.index.droplevel(-1))


# ---------------------------------------------------------------- quantiles
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_quantiles_are_monotone_and_intervals_contain_the_median(strategy):
    y = seasonal()
    f = forecaster(strategy=strategy).fit(y, fh=[1, 2, 3])
    alphas = [0.01, 0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 0.99]  # off-grid ones too
    q = f.predict_quantiles(alpha=alphas)["sales"].to_numpy()
    assert np.all(np.diff(q, axis=1) >= 0)
    median = f.predict_quantiles(alpha=0.5)["sales"][0.5]
    interval = f.predict_interval(coverage=[0.5, 0.9])["sales"]
    for coverage in (0.5, 0.9):
        assert np.all(interval[coverage]["lower"] <= median) and np.all(median <= interval[coverage]["upper"])
    assert np.all(interval[0.9]["lower"] <= interval[0.5]["lower"])
    if strategy == "direct":  # the point forecast is the median of the grid
        np.testing.assert_allclose(f.predict().to_numpy(), median.to_numpy())


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_ensemble_forecast_is_the_average_of_its_members(strategy):
    from ssmts.nn import ForecastEnsemble

    y = seasonal()
    # calibration="none": a calibrated grid is widened after the averaging (and never past the median)
    f = forecaster(strategy=strategy, ensemble_size=3, n_sample_paths=2000, calibration="none").fit(y, fh=[1, 2, 3])
    members = f.model_.members
    assert len(members) == 3
    first = [m.backbone.encoder.weight.detach() for m in members]
    assert not torch.equal(first[0], first[1]) and not torch.equal(first[1], first[2])  # own initial weights

    def alone(k):  # the fitted forecaster with member k only
        g = copy.deepcopy(f)
        g.model_, g.ensemble_size = ForecastEnsemble([copy.deepcopy(members[k])]), 1
        return g

    singles = [alone(k) for k in range(3)]
    point = np.mean([g.predict().to_numpy() for g in singles], axis=0)
    np.testing.assert_allclose(f.predict().to_numpy(), point, rtol=1e-6)
    alphas = [0.1, 0.4, 0.9]
    mean_q = np.mean([g.predict_quantiles(alpha=alphas).to_numpy() for g in singles], axis=0)
    q = f.predict_quantiles(alpha=alphas).to_numpy()
    if strategy == "direct":  # quantile averaging of the members' sorted grids (interpolation is linear in them)
        np.testing.assert_allclose(q, mean_q, rtol=1e-6)
    else:  # each member's path quantiles, averaged; the paths are drawn in another order, so up to Monte Carlo error
        width = np.mean(mean_q[:, 2] - mean_q[:, 0])
        np.testing.assert_allclose(q, mean_q, atol=0.15 * width)


@pytest.mark.parametrize("location", ["last", "mean", True])
def test_normalize_location_is_the_forecast_of_a_zero_output(location):
    """With the head's weights zeroed, the forecast is the context's last value or mean."""
    y = seasonal()
    f = forecaster(normalize=location, ensemble_size=2, calibration="none").fit(y, fh=[1, 2, 3])
    with torch.no_grad():
        for member in f.model_.members:
            member.head.weight.zero_()
            member.head.bias.zero_()
    context = y.to_numpy()[-f.context_length :]
    expected = context.mean() if location == "mean" else context[-1]
    np.testing.assert_allclose(f.predict().to_numpy(), expected, rtol=1e-12)
    interval = f.predict_interval(coverage=0.8)
    np.testing.assert_allclose(interval.to_numpy(), expected, rtol=1e-12)  # every quantile collapses too


def test_instance_norm_is_normalize_under_its_former_name():
    """The renamed parameter still works for one release: it warns, and fits what normalize fits."""
    y = seasonal()
    with pytest.warns(FutureWarning, match="instance_norm='mean'.* is now normalize='mean'") as record:
        old = forecaster(instance_norm="mean").fit(y, fh=[1, 2])
    assert [w.filename for w in record if "instance_norm" in str(w.message)] == [__file__]  # the caller's line
    new = forecaster(normalize="mean").fit(y, fh=[1, 2])
    assert old.window_location_ == new.window_location_ == "mean"
    np.testing.assert_array_equal(old.predict().to_numpy(), new.predict().to_numpy())
    with pytest.raises(ValueError, match="name one setting .* set normalize only"):
        forecaster(instance_norm="mean", normalize="last").fit(y, fh=[1])


def test_grid_interpolation_is_exact_on_the_grid():
    f = forecaster(quantiles=(0.1, 0.5, 0.9)).fit(seasonal(), fh=[1, 2])
    on_grid = f.predict_quantiles(alpha=[0.1, 0.9])["sales"]
    both = f.predict_quantiles(alpha=[0.1, 0.3, 0.9])["sales"]
    np.testing.assert_allclose(both[[0.1, 0.9]].to_numpy(), on_grid.to_numpy())


# ---------------------------------------------------------------- update
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_update_without_params_moves_cutoff_and_equals_a_fresh_predict(strategy):
    y = seasonal(70)
    y_train, y_new = y.iloc[:60], y.iloc[60:]
    f = forecaster(strategy=strategy).fit(y_train, fh=[1, 2, 3])
    before = weights(f)
    f.update(y_new, update_params=False)
    assert f.cutoff[0] == y.index[-1]
    after = weights(f)
    assert all(torch.equal(before[k], after[k]) for k in before)
    updated = f.predict()
    assert updated.index[0] == y.index[-1] + 1
    # A forecaster fitted on the concatenated series, given the same weights and
    # normalization statistics, forecasts the same numbers.
    fresh = forecaster(strategy=strategy).fit(y, fh=[1, 2, 3])
    fresh.model_.load_state_dict(f.model_.state_dict())
    fresh.y_mean_, fresh.y_scale_, fresh.scale_floor_ = f.y_mean_, f.y_scale_, f.scale_floor_
    pd.testing.assert_series_equal(updated, fresh.predict(), rtol=1e-6)


def test_updating_some_series_of_a_panel_keeps_the_others_data_and_the_panel_cutoff():
    """An update of series b alone, ending before series a's end, leaves the panel's cutoff at a's end:
    a is forecast after its own last observation from all of it, as before the update (sktime moved the
    cutoff back to the update's end, and a was then forecast at times it had observed), and b goes on
    from its new observation. The same for a new series that ends earlier. Oracle: the forecasts before
    the update, and a forecaster fitted on the data as it stands after it, given the same weights."""
    t = pd.period_range("2000-01", periods=36, freq="M")

    def series(key, values):
        return pd.DataFrame({"v": values}, index=pd.MultiIndex.from_product([[key], t[: len(values)]]))

    a, b = series("a", seasonal(36).to_numpy()), series("b", 5.0 + seasonal(36).to_numpy()[::-1])
    f = forecaster(calibration="none").fit(pd.concat([a, b.iloc[:30]]), fh=[1, 2])
    before = f.predict()
    f.update(b.iloc[30:31], update_params=False)
    assert f.cutoff[0] == t[35]
    after = f.predict()
    pd.testing.assert_series_equal(after.loc["a", "v"], before.loc["a", "v"])
    assert list(after.loc["b"].index) == [t[31], t[32]]
    fresh = forecaster(calibration="none").fit(pd.concat([a, b.iloc[:31]]), fh=[1, 2])
    fresh.model_.load_state_dict(f.model_.state_dict())
    fresh.y_mean_, fresh.y_scale_, fresh.scale_floor_ = f.y_mean_, f.y_scale_, f.scale_floor_
    pd.testing.assert_frame_equal(after, fresh.predict(), rtol=1e-6)
    f.update(series("c", seasonal(20).to_numpy()), update_params=False)
    assert f.cutoff[0] == t[35]
    pd.testing.assert_series_equal(f.predict().loc["a", "v"], before.loc["a", "v"])


def test_recursive_step_roll_equals_the_fft_pass():
    """Rolling with `step` from the FFT-read context state equals one FFT pass over
    the context followed by the fed-back medians."""
    f = forecaster(strategy="recursive", n_layers=2).fit(seasonal(), fh=[1, 2, 3, 4, 5, 6])
    net = f.model_.members[0].double()
    c, C = f.context_length, f.n_targets_
    context = torch.randn(3, C, c, dtype=torch.float64)
    median = int(np.flatnonzero(f.quantile_levels_ == 0.5)[0])
    picked, rolled = net.rollout(context, None, 6, lambda q: q.sort(-1).values[..., median])
    sequence = torch.cat([context, picked[:, :-1].transpose(1, 2)], dim=-1)  # inputs y_0..y_{c+4}
    with torch.no_grad():
        fft = net(sequence)  # the teacher-forced FFT pass from the last context step: (3, 6, C, Q)
    torch.testing.assert_close(rolled, fft, rtol=1e-9, atol=1e-9)


def test_update_with_params_fine_tunes_and_keeps_the_optimizer():
    y = seasonal(70)
    f = forecaster().fit(y.iloc[:60], fh=[1, 2])
    before, epochs = weights(f), f.n_iter_
    f.update(y.iloc[60:], update_params=True)
    after = weights(f)
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert f.n_iter_ == epochs + f.update_epochs and f.cutoff[0] == y.index[-1]
    assert f.training_state_["optimizer"]["state"], "the optimizer state (Adam moments) is carried over"


def test_update_predict_over_a_stream():
    from sktime.split import ExpandingWindowSplitter

    y = seasonal(72)
    f = forecaster().fit(y.iloc[:60], fh=[1])
    cv = ExpandingWindowSplitter(fh=[1], initial_window=1, step_length=1)
    preds = f.update_predict(y.iloc[60:], cv=cv, update_params=False)
    assert len(preds) == 11 and preds.index[-1] == y.index[-1]


# ---------------------------------------------------------------- reproducibility, persistence
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_same_random_state_gives_identical_forecasts(strategy):
    y = seasonal()
    a = forecaster(strategy=strategy).fit(y, fh=[1, 2]).predict_quantiles(alpha=[0.1, 0.5, 0.9])
    b = forecaster(strategy=strategy).fit(y, fh=[1, 2]).predict_quantiles(alpha=[0.1, 0.5, 0.9])
    c = forecaster(strategy=strategy, random_state=1).fit(y, fh=[1, 2]).predict_quantiles(alpha=[0.1, 0.5, 0.9])
    pd.testing.assert_frame_equal(a, b)
    assert not np.allclose(a.to_numpy(), c.to_numpy())


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_pickle_round_trip(strategy):
    f = forecaster(strategy=strategy).fit(seasonal(), fh=[1, 2, 3])
    g = pickle.loads(pickle.dumps(f))
    pd.testing.assert_series_equal(f.predict(), g.predict())
    pd.testing.assert_frame_equal(f.predict_interval(), g.predict_interval())
    assert next(g.model_.parameters()).device.type == "cpu"


def test_params_clone_and_reset():
    f = forecaster(strategy="recursive", normalize=False)
    params = f.get_params()
    assert params["strategy"] == "recursive" and params["context_length"] == 12 and "pooling" not in params
    assert f.clone().get_params() == params
    f.fit(seasonal(), fh=[1])
    f.reset()
    assert not hasattr(f, "model_") and f.get_params() == params
    with pytest.raises(TypeError, match="unexpected parameter"):
        SSMForecaster(window=3)


def test_early_stopping_uses_the_latest_windows():
    f = forecaster(early_stopping=True, max_epochs=50, n_iter_no_change=2, tol=10.0).fit(seasonal(), fh=[1, 2])
    assert f.n_iter_ < 50 and "val_loss" in f.history_[-1]


# ---------------------------------------------------------------- errors
def test_series_shorter_than_the_context_are_padded_with_missing_values():
    """A series of 20 with a context of 30 trains and forecasts like one of 30 whose first values
    are missing (the contexts are normalized over what was observed)."""
    y = seasonal(20)
    padded = pd.concat([pd.Series(np.nan, index=y.index[0] - np.arange(10, 0, -1)), y])
    short = forecaster(context_length=30).fit(y, fh=[1, 2])
    long = forecaster(context_length=30).fit(padded, fh=[1, 2])
    np.testing.assert_allclose(short.predict().to_numpy(), long.predict().to_numpy(), rtol=1e-6)
    assert short.context_length_ == 30


def test_a_panel_of_short_and_long_series_forecasts_every_series():
    """The short series starts late (9 points against 60): trained, forecast, and backtested from
    cutoffs that leave it 3 and 7 observations (contexts padded as predict pads them, on request)."""
    y = pd.concat({"long": seasonal(60), "short": seasonal(60).iloc[-9:]}, names=["series", "time"]).to_frame()
    f = forecaster(context_length=24).fit(y, fh=[1, 2, 3])
    assert f.predict().groupby(level=0).size().to_dict() == {"long": 3, "short": 3}
    cutoffs = seasonal(60).index[[53, 57]]
    with pytest.raises(ValueError, match="too early for series 'short': 3 of its observations"):
        f.historical_forecasts(y, cutoffs=cutoffs)
    backtest = f.historical_forecasts(y, cutoffs=cutoffs, pad_contexts=True)
    # the oracle: the short series' missing history written out as missing values, so that both cutoffs
    # have a full context without padding (and the long series' forecasts are those of any call)
    written = pd.concat(
        {"long": seasonal(60), "short": seasonal(60).where(np.arange(60) >= 51)}, names=["series", "time"]
    )
    pd.testing.assert_frame_equal(backtest, f.historical_forecasts(written.to_frame(), cutoffs=cutoffs))
    assert len(backtest) == 2 * 2 * 3 and np.isfinite(backtest.to_numpy()).all()
    with pytest.raises(ValueError, match="is after the last observation of series 'short'"):
        f.historical_forecasts(y.drop(index=y.index[-1]), cutoffs=seasonal(60).index[[59]])


@pytest.mark.parametrize(
    "index, sp, h, expected",
    [
        (pd.period_range("1990", periods=40, freq="Y"), None, 6, 18),  # 3 x h
        (pd.period_range("1990Q1", periods=200, freq="Q"), None, 2, 12),  # 3 x the season (4)
        (pd.period_range("1990-01", periods=30, freq="M"), None, 3, 15),  # half the series: 30 // 2
        (pd.RangeIndex(100), 7, 1, 21),  # a declared seasonal period
    ],
)
def test_auto_context_length_follows_the_horizon_the_season_and_the_length(index, sp, h, expected):
    y = pd.Series(np.sin(np.arange(len(index))) + 5.0, index=index)
    f = forecaster(context_length="auto", sp=sp, max_epochs=1).fit(y, fh=list(range(1, h + 1)))
    assert f.context_length_ == expected and f.predict().shape == (h,)


def test_y_without_any_observed_value_raises():
    y = seasonal().to_frame().assign(empty=np.nan)
    with pytest.raises(ValueError, match="y column 'empty' has no observed"):
        forecaster().fit(y, fh=[1])


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(strategy="dmrs"), "unknown strategy"),
        (dict(strategy="recursive", bidirectional=True), "causal backbone"),
        (dict(context_length=0), "context_length must be a positive int or 'auto'"),
        (dict(ensemble_size=0), "ensemble_size must be an integer >= 1"),
        (dict(normalize="median"), "unknown normalize 'median'"),
        (dict(quantiles=(0.5,)), "besides 0.5"),
        (dict(quantiles=(0.1, 1.2)), r"floats in \(0, 1\)"),
        (dict(past_covariates="sensor"), "a list of X column names"),
        (dict(past_covariates=["sensor"]), r"names \['sensor'\], which needs X in fit"),
        (dict(static_covariates=["size"]), r"names \['size'\], which needs X in fit"),
    ],
)
def test_bad_parameters_raise_clear_errors(params, match):
    with pytest.raises(ValueError, match=match):
        forecaster(**params).fit(seasonal(), fh=[1])


def test_update_with_a_different_number_of_columns_raises():
    f = forecaster().fit(seasonal(), fh=[1])
    y2 = pd.concat([seasonal(70), seasonal(70, name="b")], axis=1).iloc[60:]
    with pytest.raises(ValueError, match="columns"):
        f.update(y2, update_params=False)


def test_deepcopy_keeps_the_fitted_state():
    f = forecaster().fit(seasonal(), fh=[1, 2])
    g = copy.deepcopy(f)
    pd.testing.assert_series_equal(f.predict(), g.predict())


# ---------------------------------------------------------------- benchmark
def test_forecast_benchmark_quick_run(capsys):
    """`python -m ssmts.bench forecast --quick` on one series: table, ratio and naive check lines."""
    from ssmts.bench.__main__ import main as bench_main

    assert bench_main(["forecast", "--quick", "--series", "shampoo", "--models", "ssm,naive,theta"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith("shampoo ")]
    assert [r[1] for r in rows] == ["ssm", "naive", "theta"]
    assert all(float(r[2]) > 0 and float(r[3]) > 0 for r in rows)
    assert "shampoo: MASE(SSM)/MASE(" in out and "geometric mean over 1 series" in out
    assert "SSM beats seasonal naive on 1/1 series" in out or "SSM beats seasonal naive on 0/1 series" in out


def test_forecast_benchmark_dense_folds(monkeypatch):
    """--dense K: K times the folds at 1/K of the step (at least 1), after the validation cut."""
    from ssmts.bench import forecast as bench

    seen = {}

    def fake_backtest(model_name, task, y, X, ssm_overrides, use_x=False):
        seen[task.name] = (task.folds, task.step, len(y))
        return dict(mase=1.0, smape=1.0, fit_s=0.0)

    monkeypatch.setattr(bench, "backtest", fake_backtest)
    args = bench.parse_args(["--series", "uschange,shampoo", "--models", "naive", "--validation", "--dense", "2"])
    bench.run(args)
    # uschange: 187 points less the test span 8 + 2 * 8; shampoo: 36 less 6 + 2 * 3
    assert seen == {"uschange": (6, 4, 163), "shampoo": (6, 1, 24)}
    ends = bench.cutoffs(163, bench.Task("uschange", 1, 8, 6, 4))
    assert ends == [135, 139, 143, 147, 151, 155]
    with pytest.raises(SystemExit):
        bench.parse_args(["--dense", "0"])


def test_drift_location_is_the_line_through_the_first_and_last_observed_values():
    """normalize='drift': against a loop over the windows (gaps included)."""
    f = forecaster(context_length=6, normalize="drift", max_epochs=1).fit(seasonal(), fh=[1, 2])
    rng = np.random.default_rng(1)
    context = rng.normal(size=(5, 1, 6)) * 3 + 10
    context[1, 0, 0] = context[2, 0, 4:] = context[3, 0, [0, 1, 5]] = np.nan
    context[4, 0, :5] = np.nan  # one observation: a flat line
    shift, scale = f._norm_stats(context)
    assert shift.shape == (5, 1, 6 + 2) and scale.shape == (5, 1, 1)
    for i, row in enumerate(context[:, 0]):
        seen = np.flatnonzero(~np.isnan(row))
        a, b = seen[0], seen[-1]
        slope = (row[b] - row[a]) / (b - a) if b > a else 0.0
        np.testing.assert_allclose(shift[i, 0], row[b] + slope * (np.arange(8) - b), rtol=1e-12)
    with pytest.raises(ValueError, match="normalize='drift'.*needs strategy='direct'"):
        forecaster(normalize="drift", strategy="recursive", bidirectional=False).fit(seasonal(), fh=[1])


def test_drift_forecasts_a_straight_line_that_a_short_training_leaves_near_it():
    t = np.arange(40.0)
    y = pd.Series(5 + 2 * t, index=pd.period_range("1990", periods=40, freq="Y"))
    pred = forecaster(context_length=8, normalize="drift", max_epochs=30).fit(y, fh=[1, 2, 3]).predict()
    np.testing.assert_allclose(pred.to_numpy(), [85.0, 87.0, 89.0], atol=2.0)  # "last" is off by up to 4


@pytest.mark.parametrize("budget, epochs", [(dict(), 5), (dict(max_steps=8), 2), (dict(min_steps=40), 10)])
def test_the_training_budget_bounds_the_epochs_in_optimizer_steps(budget, epochs):
    """seasonal() gives 60 - 4 = 56 windows, 4 batches of 16 an epoch."""
    f = forecaster(context_length=4, max_epochs=5, batch_size=16, calibration="none", **budget).fit(seasonal(), fh=[1])
    assert f.n_iter_ == epochs


@pytest.mark.parametrize("level", [0.8, 0.5])
def test_conformal_intervals_cover_their_level_on_the_held_out_windows(level):
    """Split-conformal calibration guarantees its coverage on the windows it was calibrated on:
    with h=1, the held-out windows are the forecasts from the last 26 origins (52 windows, half held out)."""
    y = seasonal(60)
    low, high = (1 - level) / 2, (1 + level) / 2
    params = dict(context_length=8, early_stopping=True, validation_fraction=0.5, max_epochs=2, quantiles=(low, high))
    calibrated = forecaster(**params, calibration="conformal").fit(y, fh=[1])
    raw = forecaster(**params, calibration="none").fit(y, fh=[1])
    assert calibrated.interval_widening_.shape == (1, 3) and raw.interval_widening_ is None
    cutoffs = y.index[33:59]
    truth = y.iloc[34:60].to_numpy()

    def coverage(f):
        q = f.historical_forecasts(y, cutoffs=cutoffs, alpha=[low, high]).to_numpy()
        return np.mean((truth >= q[:, 0]) & (truth <= q[:, 1]))

    assert coverage(calibrated) >= level
    assert coverage(raw) != coverage(calibrated) and np.abs(calibrated.interval_widening_).max() > 0
    if level == 0.8:
        assert coverage(raw) < level  # two epochs leave this grid too narrow: calibration has work to do


def test_conformal_calibration_with_too_few_held_out_targets_says_which_intervals_it_leaves():
    # 30 points, context 8: 22 one-step windows, 3 held out; the 80 % interval needs 4 to calibrate
    params = dict(context_length=8, early_stopping=True, validation_fraction=0.15, max_epochs=1)
    with pytest.warns(UserWarning, match=r"give 3 target\(s\).*central 80% interval.*at least 4 for p = 80%"):
        f = forecaster(**params, quantiles=(0.1, 0.25, 0.5, 0.75, 0.9), calibration="conformal").fit(
            seasonal(30), fh=[1]
        )
    assert f.interval_widening_[0, 0] == 0 and f.interval_widening_[0, 1] != 0  # 80 % left, 50 % calibrated
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # enough targets: no warning
        forecaster(**params, quantiles=(0.25, 0.5, 0.75), calibration="conformal").fit(seasonal(30), fh=[1])


def test_levels_without_a_symmetric_partner_are_said_to_stay_uncalibrated():
    """The calibration widens pairs (l, 1 - l). quantiles=(0.1, 0.3, 0.95) has none: the default trained a
    second network and reported calibration_='refit' with a widening of zeros, silently. Now 'auto'
    calibrates nothing and says so, an explicit calibration is refused, and a grid with some pairs names
    the levels it leaves. Oracle for 'auto': the uncalibrated forecaster (calibration='none')."""
    y = seasonal(40)
    params = dict(context_length=8, max_epochs=2)
    unpaired = r"levels \[0.1, 0.3, 0.95\] have no symmetric partner.*calibration_ is 'none'"
    with pytest.warns(UserWarning, match=unpaired):
        auto = forecaster(**params, quantiles=(0.1, 0.3, 0.95)).fit(y, fh=[1, 2])
    assert auto.calibration_ == "none" and auto.interval_widening_ is None
    plain = forecaster(**params, quantiles=(0.1, 0.3, 0.95), calibration="none").fit(y, fh=[1, 2])
    np.testing.assert_array_equal(auto.predict_quantiles().to_numpy(), plain.predict_quantiles().to_numpy())
    with pytest.raises(ValueError, match=r"calibration='refit' widens pairs .* holds none"):
        forecaster(**params, quantiles=(0.2, 0.9), calibration="refit").fit(y, fh=[1])
    with pytest.warns(UserWarning, match=r"levels \[0.3\] have no symmetric partner.*stay the network's"):
        some = forecaster(**params, quantiles=(0.1, 0.3, 0.9)).fit(y, fh=[1, 2])
    assert some.calibration_ == "refit" and (some.interval_widening_[:, [1, 2]] == 0).all()


def test_held_out_windows_are_purged_of_training_windows_that_share_their_targets(monkeypatch):
    """56 windows (60 points, context 4); the latest 6 are held out, and the 2 training windows whose
    3-step targets reach the first held-out target are used for neither."""
    seen = {}
    original = SSMForecaster._train_network

    def spy(self, network, train, loss_fn, **kwargs):
        seen["train"], seen["validation"] = len(train), len(kwargs["validation"])
        return original(self, network, train, loss_fn, **kwargs)

    monkeypatch.setattr(SSMForecaster, "_train_network", spy)
    forecaster(context_length=4, early_stopping=True, max_epochs=1).fit(seasonal(60), fh=[1, 2, 3])
    assert seen == {"train": 48, "validation": 6}


def test_holdout_calibration_holds_out_complete_windows_and_trains_on_them_afterwards(monkeypatch):
    """calibration='holdout', 60 points, context 4, h=3: 56 windows, of which the last two run past the
    end. 9 are held out (round(0.1 x 56) = 6, raised to the 9 that the grid's central 90 % interval
    needs), the latest complete ones; the training windows whose targets reach the first held-out target
    (2) and the two partial ones are purged. Then all 56 train for a quarter of the epochs, starting
    from the first part's weights."""
    calls = []
    original = SSMForecaster._train_network

    def spy(self, network, train, loss_fn, **kwargs):
        start = weights_of(network) if isinstance(network, torch.nn.Module) else None
        calls.append(dict(train=len(train), validation=kwargs.get("validation"), start=start))
        original(self, network, train, loss_fn, **kwargs)
        calls[-1]["end"] = weights(self)

    def weights_of(module):
        return {k: v.detach().clone() for k, v in module.state_dict().items()}

    monkeypatch.setattr(SSMForecaster, "_train_network", spy)
    params = dict(context_length=4, max_epochs=8, quantiles=(0.05, 0.5, 0.95), calibration="holdout")
    f = forecaster(**params).fit(seasonal(60), fh=[1, 2, 3])
    first, second = calls
    assert first["train"] == 56 - 9 - 2 - 2 and first["validation"] is None  # no epoch chosen on them
    assert second["train"] == 56
    assert all(torch.equal(second["start"][k], first["end"][k]) for k in first["end"])  # warm start
    assert f.n_iter_ == len(f.history_) == 8 + 2  # ceil(8 / 4) more epochs
    assert f.training_state_["optimizer"]["state"]  # the optimizer carried on, as update continues it
    assert f.interval_widening_.shape == (3, 3)


def test_refit_calibration_is_the_uncalibrated_network_widened_as_holdout_calibrates(monkeypatch):
    """calibration='refit': the first part and its widening as 'holdout' gives them, then a fresh fit on
    every window, which must be the very network of calibration='none' (same seed, same windows): its
    medians equal, its intervals those of 'none' widened by the held-out amounts."""
    y, fh = seasonal(60), [1, 2, 3]
    params = dict(context_length=4, max_epochs=4, quantiles=(0.05, 0.25, 0.5, 0.75, 0.95))
    none = forecaster(**params, calibration="none").fit(y, fh=fh)
    holdout = forecaster(**params, calibration="holdout").fit(y, fh=fh)
    refit = forecaster(**params, calibration="refit").fit(y, fh=fh)
    np.testing.assert_array_equal(refit.interval_widening_, holdout.interval_widening_)
    assert np.abs(refit.interval_widening_).max() > 0 and refit.n_iter_ == none.n_iter_ == 4
    for name, value in none.model_.state_dict().items():
        torch.testing.assert_close(refit.model_.state_dict()[name], value, rtol=0, atol=0)
    pd.testing.assert_series_equal(refit.predict(), none.predict())
    assert not holdout.predict().equals(none.predict())  # the continuation is another network
    raw = none.predict_quantiles(alpha=[0.05, 0.95]).to_numpy()
    wide = refit.predict_quantiles(alpha=[0.05, 0.95]).to_numpy()
    # each level moves away from the median by its widening (towards it where negative), step by step
    amounts = refit.interval_widening_[:, [0, -1]]
    np.testing.assert_array_equal(np.sign(raw[:, 0] - wide[:, 0]), np.sign(amounts[:, 0]))
    np.testing.assert_array_equal(np.sign(wide[:, 1] - raw[:, 1]), np.sign(amounts[:, 1]))


@pytest.mark.parametrize("lengths, held_each", [((60,), 9), ((60, 60, 60), 3), ((60,) * 12, 1)])
def test_holdout_shares_the_points_a_90_percent_interval_needs_among_a_panels_series(monkeypatch, lengths, held_each):
    """A central 90 % interval needs 9 held-out targets at every step, over the whole panel: one series
    holds out 9 windows, three series 3 each, twelve series 1 each (validation_fraction asks for ~1)."""
    held = {}
    original = SSMForecaster._conformal_widening

    def spy(self, held_out, how="conformal"):
        held["windows"] = len(held_out.x)
        return original(self, held_out, how)

    monkeypatch.setattr(SSMForecaster, "_conformal_widening", spy)
    y = _panel(lengths, [10.0] * len(lengths))
    params = dict(context_length=4, max_epochs=1, quantiles=(0.05, 0.5, 0.95), validation_fraction=0.02)
    forecaster(**params, calibration="holdout").fit(y, fh=[1, 2, 3])
    assert held["windows"] == held_each * len(lengths)


def test_holdout_intervals_cover_the_held_out_windows_for_the_network_they_were_set_on(monkeypatch):
    """Oracle: split conformal's guarantee on its own calibration windows. The network after the first
    part (kept by a spy), its grid on the held-out windows widened by interval_widening_, covers at
    least 80 % of their targets at every step."""
    from ssmts.sktime._strategies import widen
    from ssmts.training import SequenceData, predict_batches

    captured = {}
    original = SSMForecaster._conformal_widening

    def spy(self, held_out, how="conformal"):
        captured["held_out"], captured["model"] = held_out, copy.deepcopy(self.model_)
        return original(self, held_out, how)

    monkeypatch.setattr(SSMForecaster, "_conformal_widening", spy)
    f = forecaster(context_length=6, max_epochs=2, quantiles=(0.1, 0.5, 0.9), calibration="holdout")
    f.fit(seasonal(80), fh=[1, 2])
    held = captured["held_out"]
    out = predict_batches(captured["model"], SequenceData(held.x), 64, torch.device("cpu")).double().numpy()
    grid = np.sort(out, axis=-1).mean(1)  # (n, H, C, Q), as predict forms it
    target, observed = held.y.double().numpy(), held.weight.numpy() > 0
    assert observed.all() and len(target) == 7  # round(0.1 x 73) = 7 complete windows, at least the 4 needed
    widened = widen(grid, f.interval_widening_, f.quantile_levels_)
    inside = (target >= widened[..., 0]) & (target <= widened[..., -1])
    assert (inside.mean(0) >= 0.8).all()
    assert np.abs(f.interval_widening_).max() > 0


def test_holdout_calibration_with_too_few_windows_says_what_it_leaves_uncalibrated():
    """One window (5 points, context 4): nothing can be held out, the network trains on it alone; two
    windows: one is held out, too few targets for the 80 % interval, which is left as the network gives it."""
    with pytest.warns(UserWarning, match=r"calibration='holdout':.*not calibrated"):
        f = forecaster(context_length=4, calibration="holdout").fit(seasonal(5), fh=[1])
    assert f.interval_widening_ is None and f.n_iter_ == TINY["max_epochs"]
    with pytest.warns(UserWarning, match=r"calibration='holdout': the held-out windows give 1 target\(s\)"):
        f = forecaster(context_length=4, calibration="holdout").fit(seasonal(6), fh=[1])
    assert f.interval_widening_[0, 0] == 0
    # the default names itself and what it chose, and the remedy is the calibration's (early stopping is off)
    with pytest.warns(UserWarning, match=r"calibration='auto' \('refit' here\):.*or calibration='none'; the") as caught:
        forecaster(context_length=4).fit(seasonal(5), fh=[1])
    assert not any("early_stopping" in str(w.message) for w in caught)


def _short_panel(length):
    index = pd.MultiIndex.from_product([["a", "b", "c"], pd.period_range("2000", periods=length, freq="Y")])
    return pd.DataFrame({"y": np.random.default_rng(0).normal(size=len(index)).cumsum()}, index=index)


def test_holdout_calibration_says_why_long_horizons_leave_nothing_to_hold_out_or_to_train_on():
    """Windows aplenty, but the horizon decides: of 14 observations with context 4 only one window per
    series has its 10th target observed (none can be held out with one before it); of 20 with
    horizon 8, the windows before the held-out ones all have targets among theirs (the purge)."""
    with pytest.warns(
        UserWarning,
        match=r"needs a series with two windows whose last target, 10 steps ahead, is "
        r"observed.*give 1 such window\(s\) at most \(of 30\); use longer series, a shorter horizon",
    ):
        forecaster(context_length=4, calibration="holdout").fit(_short_panel(14), fh=list(range(1, 11)))
    with pytest.warns(
        UserWarning,
        match=r"leaves no training window before them: each of the \d+ window\(s\) not "
        r"held out has targets among the held-out windows' \(a horizon of 8 steps",
    ):
        f = forecaster(context_length=4, calibration="holdout").fit(_short_panel(20), fh=list(range(1, 9)))
    assert f.interval_widening_ is None


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(calibration="conformal"), r"early_stopping=False holds out none"),
        (dict(calibration="holdout", strategy="recursive", bidirectional=False), r"takes its quantiles from sample"),
        (dict(calibration="holdout", combine="validation"), r"would be widened twice"),
        (dict(calibration="holdout", early_stopping=True), r"would choose its epoch on them"),
        (dict(calibration="refit", early_stopping=True), r"calibration='refit' calibrates on held-out windows no"),
        (dict(calibration="refit", combine="validation"), r"would be widened twice"),
        (dict(calibration="refit", strategy="recursive", bidirectional=False), r"takes its quantiles from sample"),
    ],
)
def test_a_calibration_that_could_not_apply_is_refused_instead_of_silently_skipped(params, message):
    with pytest.raises(ValueError, match=message):
        forecaster(**params).fit(seasonal(), fh=[1])


@pytest.mark.parametrize(
    "params, panel, calibrated",
    [
        (dict(), False, "refit"),
        (dict(), True, "holdout"),
        (dict(strategy="recursive", bidirectional=False), False, "none"),
        (dict(combine="validation", combine_rule="calibrate", combine_windows=1, sp=1), False, "none"),
        (dict(early_stopping=True), False, "conformal"),
    ],
)
def test_auto_calibration_holds_out_where_it_applies_and_nowhere_else(params, panel, calibrated):
    """'auto' for a network trained with the direct strategy, no combination and no early stopping:
    'refit' for one series, 'holdout' for a panel; 'conformal' on the windows early stopping holds out
    with it; nothing otherwise (the recursive strategy's quantiles come from sample paths; a combination
    widens on its own windows). calibration_ says which was applied."""
    y = _panel([60, 50], [10.0, 20.0]) if panel else seasonal(60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        f = forecaster(calibration="auto", context_length=4, **params).fit(y, fh=[1, 2])
    assert f.calibration_ == calibrated and (f.interval_widening_ is not None) == (calibrated != "none")
    if calibrated == "conformal":  # early stopping: on the windows it held out, no continuation
        assert "val_loss" in f.history_[-1]
    else:  # ceil(3 / 4): the continuation of holdout; refit ends with a whole fit
        assert f.n_iter_ == TINY["max_epochs"] + (1 if calibrated == "holdout" else 0)


@pytest.mark.parametrize("panel", [False, True])
def test_calibrated_forecasts_do_not_depend_on_how_many_workers_run(monkeypatch, panel):
    """The machine's load sets the workers of every training step (one, two, changing from step to step):
    the default calibration ('refit' for one series: two fits; 'holdout' for a panel: a fit and its
    continuation) gives the same intervals to the last bit."""
    from ssmts.training import parallel, threads

    monkeypatch.setattr(parallel, "SHARD_MIN_STEPS", 1)  # these small batches split into shards too
    before = torch.get_num_threads()
    y = _panel([60, 50], [10.0, 20.0]) if panel else seasonal(60)

    asked = []

    def intervals(workers_per_step):
        answers = itertools.cycle(workers_per_step)
        monkeypatch.setattr(threads.CoreShare, "update", lambda self: asked.append(1) or min(self.limit, next(answers)))
        f = forecaster(context_length=4).fit(y, fh=[1, 2])
        return f.calibration_, f.predict_interval(coverage=[0.8]).to_numpy()

    try:
        torch.set_num_threads(2)
        applied, alone = intervals([2])
        assert applied == ("holdout" if panel else "refit") and asked  # the workers were asked for every step
        np.testing.assert_array_equal(intervals([1])[1], alone)
        np.testing.assert_array_equal(intervals([1, 2, 2, 1, 1])[1], alone)
    finally:
        torch.set_num_threads(before)


def test_a_level_far_above_the_variations_is_warned_about():
    """Each window's scale is at least a thousandth of its level: at 1e8 + a seasonal series of spread 1, every
    context's spread is below it, the network sees them flattened, and fit says so (the series alone does not)."""
    y = seasonal(60, level=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        SSMForecaster(**TINY).fit(y, fh=[1, 2])
    with pytest.warns(UserWarning, match=r"in 49 of the 49 training contexts of 12 steps, y varies by less than 0.001"):
        SSMForecaster(**TINY).fit(y + 1e8, fh=[1, 2])


def test_level_swamped_windows_counts_as_a_loop_does():
    """Oracle: a loop over the contexts of each column, NaN steps left out, contexts at level 0 not judged."""
    from ssmts.sktime._windows import LEVEL_FLOOR, level_swamped_windows

    rng = np.random.default_rng(0)
    values = np.stack([1e4 + rng.standard_normal(40) * np.geomspace(0.01, 100, 40), rng.standard_normal(40)], 1)
    values[5:8, 0] = np.nan
    values[20:32, 1] = 0.0  # contexts of zeros: no level, not judged
    swamped = judged = 0
    for column in values.T:
        for start in range(len(column) - 10 + 1):
            window = column[start : start + 10]
            window = window[~np.isnan(window)]
            level = np.abs(window).mean()
            if level > 0:
                judged += 1
                swamped += int(LEVEL_FLOOR * level > window.std())
    assert level_swamped_windows(values, 10) == (swamped, judged)
    assert 0 < swamped < judged
    assert level_swamped_windows(values[:5], 10) == (0, 0)
    for factor in (2.0**700, 2.0**-700):  # formed in exact units, as the windows' own scaling
        assert level_swamped_windows(values * factor, 10) == (swamped, judged)


def test_a_horizon_of_time_differences_counts_steps_of_the_series_spacing():
    """fh = 1 and 3 minutes on a minutely series are steps 1 and 3 (numpy read the Timedeltas as counts of
    their unit: 60 and 180 steps, forecasts stamped an hour out, silently). Oracles: the same forecaster
    with fh [1, 3], and sktime's stamps for that fh."""
    from sktime.forecasting.naive import NaiveForecaster

    y = pd.Series(
        np.cumsum(np.random.default_rng(0).normal(size=120)), index=pd.date_range("2024-01-01", periods=120, freq="min")
    )
    params = {**TINY, "context_length": 12}
    minutes = ForecastingHorizon(pd.to_timedelta([1, 3], unit="min"), is_relative=True)
    forecast = SSMForecaster(**params).fit(y, fh=minutes).predict()
    expected = SSMForecaster(**params).fit(y, fh=[1, 3]).predict()
    np.testing.assert_array_equal(forecast.to_numpy(), expected.to_numpy())
    assert list(forecast.index) == list(NaiveForecaster().fit(y, fh=minutes).predict().index)
    for fh, series, message in [
        (pd.to_timedelta([90], unit="s"), y, "which are not multiples of the series' spacing"),
        (pd.to_timedelta([31], unit="D"), y.set_axis(pd.date_range("2020-01-31", periods=120, freq="ME")), "no fixed"),
    ]:
        with pytest.raises(ValueError, match=message):
            SSMForecaster(**params).fit(series, fh=ForecastingHorizon(fh, is_relative=True))
    fitted = SSMForecaster(**params).fit(y, fh=[1, 3])
    with pytest.raises(ValueError, match="need fh as integer steps ahead of each origin"):
        fitted.historical_forecasts(y, fh=minutes)
