"""SSMForecaster(combine="validation"): the network combined per series with AutoETS and Theta, weighted
by each series' own held-out last windows. Oracle series (one the classical models forecast almost
exactly, one only the network can), the purge, the weights and intervals, panels, update and the
refusals. Tiny networks, few epochs."""

import warnings

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("statsmodels")

from ssmts.sktime import SSMForecaster  # noqa: E402
from ssmts.sktime._combine import (  # noqa: E402
    COMPONENTS,
    combine_grid,
    conformal_factors,
    rule_weights,
    widen_grid,
)

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
)
FH = list(range(1, 7))


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


def trend(n=48):
    """A straight line: Holt's linear trend (AutoETS) forecasts it almost exactly, the tiny network does not."""
    return pd.Series(10 + 0.5 * np.arange(n), index=pd.period_range("1950", periods=n, freq="Y"), name="y")


def noisy(n=60, seed=0, name="sales"):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    values = 10 + 0.05 * t + np.sin(2 * np.pi * t / 12) + 0.2 * rng.normal(size=n)
    # yearly: AutoETS and Theta without a season (fast to fit); the 12-step cycle is the network's to find
    return pd.Series(values, index=pd.period_range("1900", periods=n, freq="Y"), name=name)


def combined(**params):
    return SSMForecaster(**{**TINY, "combine": "validation", **params})


def mae(pred, truth):
    return float(np.mean(np.abs(np.asarray(pred).ravel() - np.asarray(truth).ravel())))


# ---------------------------------------------------------------- the rules, by hand
def test_rule_weights_by_hand():
    errors = np.array([1.0, 2.0, 4.0])
    np.testing.assert_allclose(rule_weights(errors, "inverse_error"), [4 / 7, 2 / 7, 1 / 7])
    np.testing.assert_array_equal(rule_weights(errors, "select"), [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(rule_weights(np.array([9.0, 1.0, 2.0]), "calibrate"), [1.0, 0.0, 0.0])
    assert rule_weights(errors, "median") is None
    # an exact component takes all the weight; a missing one takes none
    np.testing.assert_array_equal(rule_weights(np.array([0.5, 0.0, 1.0]), "inverse_error"), [0.0, 1.0, 0.0])
    np.testing.assert_allclose(rule_weights(np.array([np.nan, 1.0, 3.0]), "inverse_error"), [0.0, 0.75, 0.25])


def test_combined_grid_averages_quantiles_around_each_point_and_the_median_rule():
    points = np.array([[10.0], [20.0], [40.0]])
    grids = [np.array([[9.0, 10.0, 11.0]]), np.array([[18.0, 20.0, 22.0]]), None]  # theta lends the network's
    point, grid = combine_grid(points, grids, np.array([0.5, 0.5, 0.0]), 1)
    np.testing.assert_allclose(point, [15.0])
    np.testing.assert_allclose(grid, [[13.5, 15.0, 16.5]])
    point, grid = combine_grid(points, grids, None, 1)  # the median of 10, 20, 40 and of their grids
    np.testing.assert_allclose(point, [20.0])
    np.testing.assert_allclose(grid, [[18.0, 20.0, 22.0]])
    widened = widen_grid(np.array([[13.5, 15.0, 16.5]]), np.array([0.5, 0.0, 0.5]))
    np.testing.assert_allclose(widened, [[12.0, 15.0, 18.0]])  # 0.5 x the width of 3 on each side


def test_conformal_factors_widen_an_interval_that_under_covers_and_never_narrow_one():
    levels = np.array([0.1, 0.5, 0.9])
    rng = np.random.default_rng(0)
    truth = rng.normal(size=400)
    narrow = np.tile([-0.5, 0.0, 0.5], (400, 1))  # covers about 38 % of N(0, 1), not 80 %
    factors = conformal_factors([narrow], [truth], levels)
    widened = widen_grid(narrow, factors)
    inside = np.mean((truth >= widened[:, 0]) & (truth <= widened[:, 2]))
    assert 0.78 <= inside <= 0.86, inside
    wide = np.tile([-5.0, 0.0, 5.0], (400, 1))
    np.testing.assert_array_equal(conformal_factors([wide], [truth], levels), 0.0)


# ---------------------------------------------------------------- oracles
def test_on_a_straight_line_the_weight_goes_to_the_classical_forecasts():
    y = trend()
    train, test = y.iloc[:-6], y.iloc[-6:]
    f = combined().fit(train, fh=FH)
    weights = f.combination_weights_.iloc[0]
    errors = f.validation_errors_.iloc[0]
    assert errors["ets"] < 0.2 * errors["network"], errors
    assert weights["ets"] + weights["theta"] > 0.85, weights
    ets_error = mae(f._classical[()]["ets"].predict(fh=FH), test)
    with f._as_variant("network"):
        network_error = mae(f.predict(), test)
    assert ets_error < 0.2 * network_error
    assert mae(f.predict(), test) < 0.3 * network_error
    # select: the classical forecast itself
    chosen = combined(combine_rule="select").fit(train, fh=FH)
    assert chosen.combination_weights_.iloc[0].idxmax() == "ets"
    ets_forecast = chosen._classical[()]["ets"].predict(fh=FH).to_numpy().ravel()
    np.testing.assert_allclose(chosen.predict().to_numpy(), ets_forecast)


def test_on_a_cycle_the_classical_models_cannot_see_the_weight_goes_to_the_network():
    # an 8-step cycle on an integer index: AutoETS and Theta have no season (sp 1) and forecast a flat line
    n = 120
    y = pd.Series(10 + np.sin(2 * np.pi * np.arange(n) / 8), index=pd.RangeIndex(n), name="y")
    params = dict(d_model=16, d_state=8, max_epochs=60, lr=1e-2, context_length=16)
    f = combined(**params).fit(y.iloc[:-8], fh=list(range(1, 9)))
    errors, weights = f.validation_errors_.iloc[0], f.combination_weights_.iloc[0]
    assert errors["network"] < 0.1 * min(errors["ets"], errors["theta"]), errors
    assert weights["network"] > 0.9, weights
    ets_forecast = f._classical[()]["ets"].predict(fh=list(range(1, 9)))
    assert mae(f.predict(), y.iloc[-8:]) < 0.5 * mae(ets_forecast, y.iloc[-8:])


@pytest.mark.usefixtures("fixed_thread_count")
def test_the_network_validated_never_sees_the_held_out_windows():
    y = noisy()
    f = combined().fit(y, fh=FH)
    assert int(f.validation_windows_.iloc[0]) == 2
    changed = y.copy()
    changed.iloc[-12:] += np.linspace(5.0, -3.0, 12)  # the two held-out windows
    g = combined().fit(changed, fh=FH)
    first, second = f.validation_network_, g.validation_network_
    for name, value in first.model_.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), second.model_.state_dict()[name].numpy(), err_msg=name)
    # the first window's forecasts read only data before it; the errors move with the new values
    np.testing.assert_array_equal(f._validation[()][1]["network"][0][0], g._validation[()][1]["network"][0][0])
    assert not np.allclose(f.validation_errors_.to_numpy(), g.validation_errors_.to_numpy())


@pytest.mark.usefixtures("fixed_thread_count")
def test_the_network_alone_is_the_forecaster_without_combination():
    y = noisy()
    f = combined().fit(y, fh=FH)
    plain = SSMForecaster(**TINY).fit(y, fh=FH)
    with f._as_variant("network"):
        pd.testing.assert_series_equal(f.predict(), plain.predict())
        pd.testing.assert_frame_equal(f.predict_quantiles(alpha=[0.1, 0.9]), plain.predict_quantiles(alpha=[0.1, 0.9]))
    assert not np.allclose(f.predict().to_numpy(), plain.predict().to_numpy())


# ---------------------------------------------------------------- intervals
@pytest.mark.usefixtures("fixed_thread_count")
def test_calibrate_keeps_the_networks_forecast_and_widens_its_intervals_by_the_windows_conformal_factors():
    y = noisy()
    f = combined(combine_rule="calibrate").fit(y, fh=FH)
    levels = f.quantile_levels_
    with f._as_variant("network"):
        point, raw = f.predict(), f.predict_quantiles(alpha=list(levels)).to_numpy()
    pd.testing.assert_series_equal(f.predict(), point)
    # the oracle: the conformal factors of the validation network's own grids on the held-out windows,
    # applied to the full network's grid by hand
    truth, comps = f._validation[next(iter(f._validation))]
    grid = np.sort(comps["network"][1][..., 0, :], axis=-1).reshape(-1, len(levels))
    factors = conformal_factors([grid], [truth[..., 0].ravel()], levels)
    np.testing.assert_allclose(list(f.combination_widening_.values()), factors)
    np.testing.assert_allclose(f.predict_quantiles(alpha=list(levels)).to_numpy(), widen_grid(np.sort(raw, 1), factors))
    assert (f.combination_weights_[["ets", "theta"]].to_numpy() == 0).all()


@pytest.mark.parametrize("rule", ["inverse_error", "select", "median", "calibrate"])
def test_quantiles_are_ordered_and_hold_the_point_forecast(rule):
    y = noisy()
    f = combined(combine_rule=rule).fit(y, fh=FH)
    alpha = [0.02, 0.05, 0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9, 0.95, 0.98]
    q = f.predict_quantiles(alpha=alpha).to_numpy()
    assert np.all(np.diff(q, axis=1) >= 0)
    np.testing.assert_allclose(q[:, alpha.index(0.5)], f.predict().to_numpy(), rtol=1e-9)
    bounds = f.predict_interval(coverage=[0.5, 0.8, 0.9]).to_numpy()
    assert np.all(bounds[:, 4] <= bounds[:, 2]) and np.all(bounds[:, 2] <= bounds[:, 0])
    assert np.all(bounds[:, 1] <= bounds[:, 3]) and np.all(bounds[:, 3] <= bounds[:, 5])
    assert all(v >= 0 for v in f.combination_widening_.values())


# ---------------------------------------------------------------- panels, multivariate, update
def test_a_hierarchical_panel_gets_one_weight_row_per_series_and_short_series_the_pooled_weights():
    frames = []
    for region, store, n, seed in (("north", "a", 60, 0), ("north", "b", 60, 1), ("south", "c", 13, 2)):
        series = noisy(n, seed)
        index = pd.MultiIndex.from_product([[region], [store], series.index], names=["region", "store", "time"])
        frames.append(pd.DataFrame({"sales": series.to_numpy()}, index=index))
    y = pd.concat(frames)
    f = combined().fit(y, fh=FH)
    weights = f.combination_weights_
    assert list(weights.index) == [("north", "a"), ("north", "b"), ("south", "c")]
    assert list(weights.columns) == list(COMPONENTS)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
    assert list(f.validation_windows_) == [2, 2, 0]  # 13 observations: none held out (8 kept, and 6 held out)
    assert f.validation_errors_.loc[("south", "c")].isna().all()
    pred = f.predict()
    assert pred.index.equals(SSMForecaster(**TINY).fit(y, fh=FH).predict().index)
    assert np.isfinite(pred.to_numpy()).all()


def test_a_series_keeps_max_8_h_observations_before_its_held_out_windows():
    """k windows of H = max(fh) steps need max(8, H) + k H observations (the sktime guide): with H = 10,
    a series of 19 holds none (8 + 10 would do, were 8 enough), 20 one, 29 one and 30 two."""
    lengths = {"a": 19, "b": 20, "c": 29, "d": 30}
    frames = [
        pd.DataFrame(
            {"sales": noisy(n, seed).to_numpy()},
            index=pd.MultiIndex.from_product([[key], noisy(n).index], names=["store", "time"]),
        )
        for seed, (key, n) in enumerate(lengths.items())
    ]
    f = combined(context_length=4).fit(pd.concat(frames), fh=list(range(1, 11)))
    assert f.validation_windows_.to_dict() == {"a": 0, "b": 1, "c": 1, "d": 2}


def test_multivariate_y_with_exogenous_x():
    rng = np.random.default_rng(0)
    index = pd.period_range("1900", periods=60, freq="Y")
    y = pd.DataFrame({"a": noisy().to_numpy(), "b": 5 + rng.normal(size=60).cumsum() * 0.1}, index=index)
    X = pd.DataFrame({"x": np.sin(np.arange(66) / 3)}, index=pd.period_range("1900", periods=66, freq="Y"))
    f = combined().fit(y, X=X.iloc[:60], fh=FH)
    assert list(f.combination_weights_.index) == ["a", "b"]
    pred = f.predict(X=X.iloc[60:])
    assert pred.shape == (6, 2) and np.isfinite(pred.to_numpy()).all()
    q = f.predict_quantiles(X=X.iloc[60:], alpha=[0.1, 0.5, 0.9]).to_numpy()
    assert np.all(np.diff(q.reshape(6, 2, 3), axis=-1) >= 0)


def test_update_moves_the_classical_forecasts_with_the_network():
    y = noisy(72)
    f = combined().fit(y.iloc[:60], fh=FH)
    weights = f.combination_weights_.copy()
    f.update(y.iloc[60:66], update_params=False)
    pred = f.predict()
    assert pred.index[0] == y.index[66]
    pd.testing.assert_frame_equal(f.combination_weights_, weights)
    ets = f._classical[()]["ets"]
    assert ets.cutoff[0] == y.index[65]
    assert np.isfinite(pred.to_numpy()).all()
    # the classical forecasts kept for predict are those of the updated models
    quantiles = f.predict_quantiles(alpha=[0.1, 0.5, 0.9])
    f._classical_cache = {}
    pd.testing.assert_series_equal(f.predict(), pred)
    pd.testing.assert_frame_equal(f.predict_quantiles(alpha=[0.1, 0.5, 0.9]), quantiles)


def test_the_network_only_routes_refuse_a_combination():
    y = noisy()
    f = combined().fit(y, fh=FH)
    for call in (
        lambda: f.historical_forecasts(y),
        lambda: f.stream(),
        lambda: f.export("model.onnx"),
        lambda: f.save("model.safetensors"),
    ):
        with pytest.raises(ValueError, match="combine"):
            call()


def test_a_series_too_short_to_hold_out_a_window_takes_equal_weights():
    y = noisy(12)
    f = combined(context_length=4).fit(y, fh=FH)
    assert int(f.validation_windows_.iloc[0]) == 0
    np.testing.assert_allclose(f.combination_weights_.to_numpy(), 1 / 3)
    assert np.isfinite(f.predict().to_numpy()).all()


# ---------------------------------------------------------------- the benchmark's protocol
def test_the_benchmark_forecasts_every_variant_from_one_fit_and_its_panel_validation_drops_the_test_span():
    from ssmts.bench.panels import PanelTask, _ssm_forecast_variants, validation_panel
    from ssmts.sktime._combine import RULES

    frames = []
    for key, seed in (("a", 0), ("b", 1)):
        series = noisy(40, seed)
        index = pd.MultiIndex.from_product([[key], series.index], names=["series", "time"])
        frames.append(pd.DataFrame({"y": series.to_numpy()}, index=index))
    panel = pd.concat(frames)
    task = PanelTask("toy", 1, 3, 2, 3)
    point, bounds, variants = _ssm_forecast_variants(task, panel, [1, 2, 3], {**TINY, "combine": "validation"}, ())
    assert list(variants) == ["network", *RULES]
    pd.testing.assert_frame_equal(variants[TINY.get("combine_rule", "inverse_error")][0], point)
    plain = SSMForecaster(**TINY).fit(panel, fh=[1, 2, 3])
    np.testing.assert_allclose(variants["network"][0].to_numpy(), plain.predict().to_numpy(), rtol=1e-5)
    assert bounds.shape == variants["median"][1].shape
    # validation: the last h + (folds - 1) * step = 6 times go; a series needs 10 observations before the
    # validation backtest's first origin (another 6 back)
    short = panel[panel.index.get_level_values("time") >= panel.index.get_level_values("time")[25]]
    kept = validation_panel(pd.concat([panel.loc[["a"]], short.loc[["b"]]]), task)
    times = kept.index.get_level_values("time")
    assert times.max() == panel.index.get_level_values("time").unique()[-7]
    assert list(kept.index.get_level_values("series").unique()) == ["a"]
