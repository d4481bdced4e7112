"""SSMForecaster(combine="validation"): the network combined per series with AutoETS and Theta, weighted
by each series' own held-out last windows. Oracle series (one the classical models forecast almost
exactly, one only the network can), the purge, the weights and intervals against a from-scratch oracle
(each component forecast again through its own public calls, the weights and the widening recomputed
with numpy), panels, update, failing components and the refusals. Tiny networks, few epochs."""

import copy
import math
import warnings

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("statsmodels")

from sktime.forecasting.ets import AutoETS  # noqa: E402
from sktime.forecasting.naive import NaiveForecaster  # noqa: E402
from sktime.forecasting.theta import ThetaForecaster  # noqa: E402

from ssmts.sktime import SSMForecaster  # noqa: E402
from ssmts.sktime._combine import (  # noqa: E402
    COMPONENTS,
    RULES,
    can_tell,
    combine_grid,
    conformal_factors,
    network_ets_weights,
    network_first_weights,
    rule_weights,
    steps_to_tell,
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
CLASSICAL = COMPONENTS[1:]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


def trend(n=48):
    """A straight line: drift forecasts it exactly, the tiny network does not."""
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


# ---------------------------------------------------------------- the oracle: every number again, by hand
def classical_by_hand(y: pd.Series, H: int, levels, quantiles=True) -> dict:
    """{name: (point (H,), grid (H, Q) or None)} of AutoETS, Theta, seasonal naive and drift fitted to y as
    the docs specify them for yearly data (sp 1, no deseasonalization), through sktime's own calls."""
    out = {}
    fh = list(range(1, H + 1))
    models = {
        "ets": AutoETS(auto=True, sp=1, n_jobs=1),
        "theta": ThetaForecaster(sp=1, deseasonalize=False),
        "naive": NaiveForecaster(strategy="last", sp=1),
        "drift": NaiveForecaster(strategy="drift"),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, model in models.items():
            model.fit(y)
            point = model.predict(fh=fh).to_numpy().ravel()
            grid = np.sort(model.predict_quantiles(fh=fh, alpha=list(levels)).to_numpy(), axis=1) if quantiles else None
            out[name] = (point, grid)
    return out


def network_by_hand(f, y, H: int, k: int, X=None) -> list:
    """[(point (H, C), grid (H, C, Q))] of f.validation_network_ on each of y's last k windows of H steps:
    predict from the data it was trained on (up to the first window), then update (no training) with
    each window and predict the next."""
    net = copy.deepcopy(f.validation_network_)
    n, levels, C = len(y), list(f.quantile_levels_), f.n_targets_
    out = []
    for j in range(k):
        start = n - (k - j) * H
        if j:
            net.update(
                y.iloc[start - H : start], X=None if X is None else X.iloc[start - H : start], update_params=False
            )
        future = None if X is None else X.iloc[start : start + H]
        point = net.predict(fh=list(range(1, H + 1)), X=future).to_numpy().reshape(H, C)
        grid = net.predict_quantiles(fh=list(range(1, H + 1)), X=future, alpha=levels).to_numpy()
        out.append((point, np.sort(grid.reshape(H, C, len(levels)), axis=-1)))
    return out


def weights_by_hand(errors: dict, rule: str) -> dict | None:
    """{name: weight} of the components from their MAEs {name: MAE} (None: the median)."""
    if rule == "median":
        return None
    if rule == "calibrate":
        return {m: float(m == "network") for m in errors}
    if rule == "select":
        best = min(errors, key=errors.get)
        return {m: float(m == best) for m in errors}
    total = sum(1 / e for e in errors.values())
    return {m: (1 / e) / total for m, e in errors.items()}


def network_first_by_hand(steps: dict, errors: dict, base_steps=None, base=None) -> dict:
    """{name: weight} of network_first from each forecast's absolute errors at the held-out steps {name: (n,)}
    and their MAEs: the inverse-error weights if some classical forecast is closer than the network at so
    many steps that a fair coin gives as many with probability under 0.05 / m (m: the classical forecasts of
    steps); else the network alone (in a fit where some series holds out the steps that test needs to tell
    at all). network_ets: the same with a base forecast (its absolute errors base_steps, its weights base) in
    the network's place."""
    reference = steps["network"] if base_steps is None else base_steps
    classical = [m for m in steps if m != "network"]
    for m in classical:
        diff = steps[m] - reference
        n, wins = int((diff != 0).sum()), int((diff < 0).sum())
        if n and sum(math.comb(n, i) for i in range(wins, n + 1)) / 2**n < 0.05 / len(classical):
            return weights_by_hand(errors, "inverse_error")
    return {m: float(m == "network") for m in steps} if base is None else base


def combine_by_hand(comps: dict, weights: dict | None, median: int):
    """comps {name: (point (H,), grid (H, Q) or None: the network's spread)} -> (point (H,), sorted grid (H, Q)):
    the weighted sum (or the median) of the points and of each grid moved onto its own point."""
    spread = {m: (g if g is not None else comps["network"][1]) for m, (_, g) in comps.items()}
    centred = {m: comps[m][0][:, None] + spread[m] - spread[m][:, [median]] for m in comps}
    if weights is None:
        return np.median([p for p, _ in comps.values()], axis=0), np.sort(np.median(list(centred.values()), 0), 1)
    point = sum(weights[m] * comps[m][0] for m in comps)
    return point, np.sort(sum(weights[m] * centred[m] for m in comps), axis=1)


def widening_by_hand(grids: list, truths: list, levels) -> np.ndarray:
    """(Q,): for each pair (l, 1 - l) the ceil((n + 1)(1 - 2l))-th smallest score max(lo - y, y - hi) / (hi - lo)
    over the pooled points (numpy's inverted-CDF quantile), 0 where negative or n too small."""
    grid, truth = np.concatenate(grids), np.concatenate(truths)
    Q, n = len(levels), len(truth)
    out = np.zeros(Q)
    for low in range(Q // 2):
        lo, hi = grid[:, low], grid[:, Q - 1 - low]
        scores = np.maximum(lo - truth, truth - hi) / (hi - lo)
        rank = int(np.ceil((n + 1) * (1 - 2 * levels[low])))
        if rank <= n:
            out[low] = out[Q - 1 - low] = max(0.0, np.quantile(scores, rank / n, method="inverted_cdf"))
    return out


def widened_by_hand(grid: np.ndarray, widening: np.ndarray) -> np.ndarray:
    """grid (H, Q): each pair's bounds moved out by its factor x the pair's width."""
    out = grid.copy()
    Q = grid.shape[1]
    for low in range(Q // 2):
        width = grid[:, Q - 1 - low] - grid[:, low]
        out[:, low] -= widening[low] * width
        out[:, Q - 1 - low] += widening[low] * width
    return np.sort(out, axis=1)


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


def test_network_first_leaves_the_network_on_a_sign_test_by_hand():
    """12 held-out steps (2 windows of 6), the network's error 1 at each, the other forecasts 1.5 but
    AutoETS 0.5 at `closer` of them: P(at least 11 of 12 heads) = 13 / 4096 < 0.05 / 4, so 11 leave the
    network for the inverse-error weights of all five; 10 (P = 79 / 4096 = 0.019) keep it alone, though
    AutoETS's MAE is lower. Steps where the two are equal do not count: 10 closer and 2 equal is 10 of 10."""
    for closer, ties, leaves in ((11, 0, True), (10, 0, False), (10, 2, True)):
        absolute = np.full((2, 6, 1, 5), 1.5)
        absolute[..., 0] = 1.0
        ets = np.r_[np.full(closer, 0.5), np.full(ties, 1.0), np.full(12 - closer - ties, 1.5)]
        absolute[..., 0, 1] = ets.reshape(2, 6)
        mae = np.array([1.0, ets.mean(), 1.5, 1.5, 1.5])
        expected = (1 / mae) / np.sum(1 / mae) if leaves else [1.0, 0, 0, 0, 0]
        np.testing.assert_allclose(network_first_weights(absolute), [expected], err_msg=f"{closer} closer, {ties} ties")
        assert can_tell(absolute)
    # a window alone (6 steps): even 6 of 6 (P = 1 / 64 = 0.016) is not enough, so it cannot tell at all
    absolute = np.full((1, 6, 1, 5), 1.5)
    absolute[..., 0], absolute[..., 1] = 1.0, 0.1
    np.testing.assert_array_equal(network_first_weights(absolute), [[1.0, 0, 0, 0, 0]])
    np.testing.assert_array_equal(network_first_weights(absolute[:0]), [[1.0, 0, 0, 0, 0]])  # no window
    assert not can_tell(absolute) and not can_tell(absolute[:0])
    # 7 steps can: 7 of 7 have P = 1 / 128 < 0.0125; a step the network misses (NaN) does not count
    seven = np.full((1, 7, 1, 5), 1.5)
    seven[..., 0], seven[..., 1] = 1.0, 0.1
    assert can_tell(seven) and steps_to_tell(5) == 7
    mae = np.array([1.0, 0.1, 1.5, 1.5, 1.5])
    np.testing.assert_allclose(network_first_weights(seven), [(1 / mae) / np.sum(1 / mae)])
    seven[0, 3, 0, 0] = np.nan
    assert not can_tell(seven)


def test_network_ets_keeps_the_mean_of_the_network_and_autoets_unless_a_sign_test_leaves_it_by_hand():
    """Signed errors (forecast - outcome) at 12 held-out steps: the network +1, AutoETS -1 (their mean is
    exact), the others +0.5 each. The mean is closer at every step, so network_ets keeps it, where
    network_first (the others are closer than the network at every step) leaves the network. Then the
    network and AutoETS both +1: the mean errs 1, and drift, 0.5 at `closer` of the 12 steps, leaves it
    for the inverse-error weights at 11 (P = 13 / 4096 < 0.05 / 4), not at 10 (P = 0.019)."""
    signed = np.full((2, 6, 1, 5), 0.5)
    signed[..., 0], signed[..., 1] = 1.0, -1.0
    validated = np.array([True])
    np.testing.assert_array_equal(network_ets_weights(signed, validated), [[0.5, 0.5, 0, 0, 0]])
    mae = np.array([1.0, 1.0, 0.5, 0.5, 0.5])
    np.testing.assert_allclose(network_first_weights(np.abs(signed)), [(1 / mae) / np.sum(1 / mae)])
    for closer, leaves in ((11, True), (10, False)):
        signed = np.full((2, 6, 1, 5), 1.5)
        signed[..., 0], signed[..., 1] = 1.0, 1.0
        drift = np.r_[np.full(closer, 0.5), np.full(12 - closer, 1.5)]
        signed[..., 0, 4] = -drift.reshape(2, 6)  # below the outcomes: only the size counts
        mae = np.array([1.0, 1.0, 1.5, 1.5, drift.mean()])
        expected = (1 / mae) / np.sum(1 / mae) if leaves else [0.5, 0.5, 0, 0, 0]
        np.testing.assert_allclose(network_ets_weights(signed, validated), [expected], err_msg=f"{closer} closer")
    # AutoETS not validated on the series: the base is the network alone, and the test runs against it
    signed[..., 1] = np.nan
    np.testing.assert_array_equal(network_ets_weights(signed, np.array([False])), [[1.0, 0, 0, 0, 0]])
    # no window (a cross-fit with nothing left): the base, as the series' AutoETS was validated
    np.testing.assert_array_equal(network_ets_weights(signed[:0], validated), [[0.5, 0.5, 0, 0, 0]])


def test_combined_grid_averages_quantiles_around_each_point_and_the_median_rule():
    points = np.array([[10.0], [20.0], [40.0]])
    grids = [np.array([[9.0, 10.0, 11.0]]), np.array([[18.0, 20.0, 22.0]]), None]  # theta lends the network's
    point, grid = combine_grid(points, grids, np.array([0.5, 0.5, 0.0]), 1)
    np.testing.assert_allclose(point, [15.0])
    np.testing.assert_allclose(grid, [[13.5, 15.0, 16.5]])
    point, grid = combine_grid(points, grids, None, 1)  # the median of 10, 20, 40 and of their grids
    np.testing.assert_allclose(point, [20.0])
    np.testing.assert_allclose(grid, [[18.0, 20.0, 22.0]])
    widened = widen_grid(np.array([[13.5, 15.0, 16.5]]), np.array([0.5, 0.0, 0.5]), np.array([0.1, 0.5, 0.9]))
    np.testing.assert_allclose(widened, [[12.0, 15.0, 18.0]])  # 0.5 x the width of 3 on each side


def test_conformal_factors_widen_an_interval_that_under_covers_and_never_narrow_one():
    levels = np.array([0.1, 0.5, 0.9])
    rng = np.random.default_rng(0)
    truth = rng.normal(size=400)
    narrow = np.tile([-0.5, 0.0, 0.5], (400, 1))  # covers about 38 % of N(0, 1), not 80 %
    factors = conformal_factors([narrow], [truth], levels)
    widened = widen_grid(narrow, factors, levels)
    inside = np.mean((truth >= widened[:, 0]) & (truth <= widened[:, 2]))
    assert 0.78 <= inside <= 0.86, inside
    wide = np.tile([-5.0, 0.0, 5.0], (400, 1))
    np.testing.assert_array_equal(conformal_factors([wide], [truth], levels), 0.0)


# ---------------------------------------------------------------- oracles
def test_on_a_straight_line_the_weight_goes_to_the_classical_forecasts():
    """Drift continues a straight line exactly (an exact forecast takes all the weight), Holt's linear trend
    (AutoETS) almost, the tiny network does not."""
    y = trend()
    train, test = y.iloc[:-6], y.iloc[-6:]
    f = combined().fit(train, fh=FH)
    errors = f.validation_errors_.iloc[0]
    assert errors["drift"] < 1e-9 and errors["ets"] < 0.2 * errors["network"], errors
    np.testing.assert_array_equal(f.combination_weights_.iloc[0].to_numpy(), [0, 0, 0, 0, 1.0])
    np.testing.assert_allclose(f.predict().to_numpy(), test.to_numpy())  # the line, continued
    with f._as_variant("network"):
        assert mae(f.predict(), test) > 0.1
    # select, and network_first (drift is the closer at all 12 held-out steps), give the same
    for rule in ("select", "network_first"):
        with f._as_variant(rule):
            np.testing.assert_allclose(f.predict().to_numpy(), test.to_numpy())


def test_on_a_cycle_the_classical_models_cannot_see_the_weight_goes_to_the_network():
    # an 8-step cycle on an integer index: AutoETS and Theta have no season (sp 1) and forecast a flat line
    n = 120
    y = pd.Series(10 + np.sin(2 * np.pi * np.arange(n) / 8), index=pd.RangeIndex(n), name="y")
    params = dict(d_model=16, d_state=8, max_epochs=60, lr=1e-2, context_length=16)
    f = combined(**params, combine_rule="inverse_error").fit(y.iloc[:-8], fh=list(range(1, 9)))
    errors, weights = f.validation_errors_.iloc[0], f.combination_weights_.iloc[0]
    assert errors["network"] < 0.1 * min(errors["ets"], errors["theta"]), errors
    assert weights["network"] > 0.9, weights
    ets_forecast = f._classical[()]["ets"].predict(fh=list(range(1, 9)))
    assert mae(f.predict(), y.iloc[-8:]) < 0.5 * mae(ets_forecast, y.iloc[-8:])
    # network_ets keeps the mean of the network and AutoETS (no classical forecast beats the mean, whose
    # error is half AutoETS's): half the weight stays on AutoETS's flat line; network_first keeps the network
    np.testing.assert_array_equal(f._used_weights("network_ets", ()), [[0.5, 0.5, 0, 0, 0]])
    np.testing.assert_array_equal(f._used_weights("network_first", ()), [[1.0, 0, 0, 0, 0]])
    with f._as_variant("network"):
        network = f.predict().to_numpy()
    with f._as_variant("network_ets"):
        np.testing.assert_allclose(f.predict().to_numpy(), (network + ets_forecast.to_numpy().ravel()) / 2, rtol=1e-6)


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
    # with a combination the network is trained uncalibrated ('auto' leaves the widening to the combination)
    plain = SSMForecaster(**TINY, calibration="none").fit(y, fh=FH)
    with f._as_variant("network"):
        pd.testing.assert_series_equal(f.predict(), plain.predict())
        pd.testing.assert_frame_equal(f.predict_quantiles(alpha=[0.1, 0.9]), plain.predict_quantiles(alpha=[0.1, 0.9]))
    assert not np.allclose(f.predict().to_numpy(), plain.predict().to_numpy())


# ---------------------------------------------------------------- intervals
@pytest.mark.usefixtures("fixed_thread_count")
@pytest.mark.parametrize(
    "rule, chosen",
    [(rule, CLASSICAL) for rule in RULES]
    + [("network_first", ("naive", "drift")), ("network_ets", ("drift", "ets")), ("inverse_error", ("theta",))],
)
def test_errors_weights_widening_and_forecast_against_a_from_scratch_oracle(rule, chosen):
    """Every number of a fit recomputed without the module: each component forecast again through its own
    public calls on each held-out window and on all of y, the MAEs, the weights, the widening and the
    combined forecast with numpy. The widening scores each window with weights chosen on the other window
    only (network_ets, network_first, inverse_error and select choose on the windows; median and calibrate
    choose nothing). With fewer classical forecasts (combine_components), only those are fitted and weighed,
    and the sign tests share their level among them."""
    y = noisy() - 20.0  # negative values: AutoETS fits additive models only, whose intervals sktime computes
    H, k, median = 6, 2, 2
    f = combined(combine_rule=rule, combine_components=chosen).fit(y, fh=FH)
    comps = ("network", *(m for m in CLASSICAL if m in chosen))  # the documented column order
    assert list(f.validation_errors_.columns) == list(comps) == list(f.combination_weights_.columns)
    levels = f.quantile_levels_
    assert int(f.validation_windows_.iloc[0]) == k
    n = len(y)
    truths = [y.iloc[n - (k - j) * H : n - (k - j - 1) * H].to_numpy() for j in range(k)]
    network = network_by_hand(f, y, H, k)

    def chosen_by_hand(y_part):
        return {m: forecast for m, forecast in classical_by_hand(y_part, H, levels).items() if m in chosen}

    windows = [
        {"network": (network[j][0][:, 0], network[j][1][:, 0]), **chosen_by_hand(y.iloc[: n - (k - j) * H])}
        for j in range(k)
    ]
    steps = [{m: np.abs(truths[j] - windows[j][m][0]) for m in comps} for j in range(k)]
    errors = [{m: np.mean(steps[j][m]) for m in comps} for j in range(k)]
    overall = {m: np.mean([e[m] for e in errors]) for m in comps}
    np.testing.assert_allclose(f.validation_errors_.iloc[0].to_numpy(), [overall[m] for m in comps], rtol=1e-5)

    def rule_by_hand(windows_used):
        if rule in ("network_first", "network_ets"):
            both = {m: np.concatenate([steps[j][m] for j in windows_used]) for m in comps}
            if rule == "network_first":
                return network_first_by_hand(both, {m: np.mean(both[m]) for m in comps})
            mean = [np.abs(truths[j] - (windows[j]["network"][0] + windows[j]["ets"][0]) / 2) for j in windows_used]
            base = {m: 0.5 * (m in ("network", "ets")) for m in comps}
            return network_first_by_hand(both, {m: np.mean(both[m]) for m in comps}, np.concatenate(mean), base)
        return weights_by_hand({m: np.mean([errors[j][m] for j in windows_used]) for m in comps}, rule)

    weights = rule_by_hand(range(k))
    reported = f.combination_weights_.iloc[0].to_numpy()
    if weights is None:
        assert np.isnan(reported).all()
    else:
        np.testing.assert_allclose(reported, [weights[m] for m in comps], rtol=1e-5)
    # the widening: window j combined with the weights of the other window, never its own
    grids = [combine_by_hand(windows[j], rule_by_hand([1 - j]), median)[1] for j in range(k)]
    widening = widening_by_hand(grids, truths, levels)
    np.testing.assert_allclose(list(f.combination_widening_.values()), widening, rtol=1e-5, atol=1e-9)
    assert widening.max() > 0  # the check has teeth: the tiny network's intervals under-cover
    # the forecast: the components on all of y, combined with the reported weights, widened
    with f._as_variant("network"):
        full = {"network": (f.predict().to_numpy(), np.sort(f.predict_quantiles(alpha=list(levels)).to_numpy(), 1))}
    full.update(chosen_by_hand(y))
    point, grid = combine_by_hand(full, weights, median)
    np.testing.assert_allclose(f.predict().to_numpy(), point, rtol=1e-5)
    np.testing.assert_allclose(
        f.predict_quantiles(alpha=list(levels)).to_numpy(), widened_by_hand(grid, widening), rtol=1e-5
    )
    if rule == "calibrate":
        np.testing.assert_allclose(f.predict().to_numpy(), full["network"][0])


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
    with pytest.warns(UserWarning, match=r"1 of the 3 series .*too short.* \('south', 'c'\) \(13 observations\)"):
        f = combined(combine_rule="inverse_error").fit(y, fh=FH)
    weights = f.combination_weights_
    assert list(weights.index) == [("north", "a"), ("north", "b"), ("south", "c")]
    assert list(weights.columns) == list(COMPONENTS)
    assert list(f.validation_windows_) == [2, 2, 0]  # 13 observations: none held out (8 kept, and 6 held out)
    assert f.validation_errors_.loc[("south", "c")].isna().all()
    # the oracle: the validated series' MAEs in units of their MASE scales (the mean absolute change of their
    # data before the held-out windows: yearly data, lag 1), averaged over the series, inverted
    scaled = []
    for key in (("north", "a"), ("north", "b")):
        before = y.loc[key, "sales"].to_numpy()[:-12]
        scaled.append(f.validation_errors_.loc[key].to_numpy() / np.mean(np.abs(np.diff(before))))
    pooled = weights_by_hand(dict(zip(COMPONENTS, np.mean(scaled, axis=0))), "inverse_error")
    np.testing.assert_allclose(weights.loc[("south", "c")].to_numpy(), [pooled[m] for m in COMPONENTS], rtol=1e-10)
    # and predict combines the short series with exactly these weights
    with f._as_variant("network"):
        network = f.predict().loc[("south", "c")].to_numpy().ravel()
    classical = classical_by_hand(y.loc[("south", "c"), "sales"], 6, f.quantile_levels_, quantiles=False)
    expected = pooled["network"] * network + sum(pooled[m] * classical[m][0] for m in CLASSICAL)
    np.testing.assert_allclose(f.predict().loc[("south", "c")].to_numpy().ravel(), expected, rtol=1e-6)
    # network_ets and network_first give a series they could not validate their base: no evidence against it
    np.testing.assert_array_equal(f._used_weights("network_ets", ("south", "c")), [[0.5, 0.5, 0, 0, 0]])
    np.testing.assert_array_equal(f._used_weights("network_first", ("south", "c")), [[1.0, 0, 0, 0, 0]])


def test_network_first_takes_the_median_where_no_series_can_tell_and_keeps_the_network_beside_one_that_can():
    """One held-out window of 6 steps: the sign test can never leave the network (6 of 6 has P = 1 / 64 >
    0.05 / 4), so its windows are no evidence either way, and network_first forecasts the median of the five
    (with a warning) instead of trusting a network nothing validated. In a panel where another series holds
    out 12 steps, the test can tell there, and the series with one window keeps the network (no evidence
    against it)."""
    y = noisy()
    with pytest.warns(
        UserWarning, match=r"no series holds out the 7 steps .*\(the most: 6\).*median of the 5 forecasts"
    ):
        f = combined(combine_rule="network_first", combine_windows=1).fit(y, fh=FH)
    assert int(f.validation_windows_.iloc[0]) == 1 and np.isnan(f.combination_weights_.to_numpy()).all()
    prediction, quantiles = f.predict(), f.predict_quantiles(alpha=[0.1, 0.9])
    with f._as_variant("median"):
        pd.testing.assert_series_equal(prediction, f.predict())
        pd.testing.assert_frame_equal(quantiles, f.predict_quantiles(alpha=[0.1, 0.9]))

    frames = []
    for store, n, seed in (("long", 60, 0), ("short", 19, 1)):  # 19: 8 before one window of 6, not two
        series = noisy(n, seed)
        index = pd.MultiIndex.from_product([[store], series.index], names=["store", "time"])
        frames.append(pd.DataFrame({"sales": series.to_numpy()}, index=index))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning that nothing can tell
        warnings.simplefilter("ignore", FutureWarning)
        g = combined(combine_rule="network_first").fit(pd.concat(frames), fh=FH)
    assert list(g.validation_windows_) == [2, 1]
    np.testing.assert_array_equal(g.combination_weights_.loc["short"].to_numpy(), [1.0, 0, 0, 0, 0])
    long_steps = g._absolute[("long",)]
    np.testing.assert_array_equal(g.combination_weights_.loc["long"].to_numpy(), network_first_weights(long_steps)[0])


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


@pytest.mark.usefixtures("fixed_thread_count")
def test_multivariate_y_with_exogenous_x_weighs_each_column_by_its_own_errors():
    rng = np.random.default_rng(0)
    index = pd.period_range("1900", periods=60, freq="Y")
    y = pd.DataFrame({"a": noisy().to_numpy(), "b": 5 + rng.normal(size=60).cumsum() * 0.1}, index=index)
    X = pd.DataFrame({"x": np.sin(np.arange(66) / 3)}, index=pd.period_range("1900", periods=66, freq="Y"))
    f = combined(combine_rule="inverse_error").fit(y, X=X.iloc[:60], fh=FH)
    assert list(f.combination_weights_.index) == ["a", "b"]
    H, k, n = 6, 2, 60
    network = network_by_hand(f, y, H, k, X)
    with f._as_variant("network"):
        network_full = f.predict(X=X.iloc[60:]).to_numpy()
    pred = f.predict(X=X.iloc[60:])
    for c, column in enumerate(["a", "b"]):
        windows = [
            {
                "network": network[j][0][:, c],
                **{
                    m: p
                    for m, (p, _) in classical_by_hand(
                        y[column].iloc[: n - (k - j) * H], H, f.quantile_levels_, quantiles=False
                    ).items()
                },
            }
            for j in range(k)
        ]
        truths = [y[column].to_numpy()[n - (k - j) * H : n - (k - j - 1) * H] for j in range(k)]
        errors = {m: np.mean([np.abs(truths[j] - windows[j][m]) for j in range(k)]) for m in COMPONENTS}
        np.testing.assert_allclose(f.validation_errors_.loc[column], [errors[m] for m in COMPONENTS], rtol=1e-5)
        weights = weights_by_hand(errors, "inverse_error")
        np.testing.assert_allclose(f.combination_weights_.loc[column], [weights[m] for m in COMPONENTS], rtol=1e-5)
        classical = classical_by_hand(y[column], H, f.quantile_levels_, quantiles=False)
        expected = weights["network"] * network_full[:, c] + sum(weights[m] * classical[m][0] for m in CLASSICAL)
        np.testing.assert_allclose(pred[column].to_numpy(), expected, rtol=1e-5)
    q = f.predict_quantiles(X=X.iloc[60:], alpha=[0.1, 0.5, 0.9]).to_numpy()
    assert np.all(np.diff(q.reshape(6, 2, 3), axis=-1) >= 0)


def test_update_moves_the_classical_forecasts_with_the_network():
    y = noisy(72)
    f = combined().fit(y.iloc[:60], fh=FH)
    weights = f.combination_weights_.copy()
    models = copy.deepcopy(f._classical[()])
    f.update(y.iloc[60:66], update_params=False)
    pred = f.predict()
    assert pred.index[0] == y.index[66]
    pd.testing.assert_frame_equal(f.combination_weights_, weights)
    assert f._classical[()]["ets"].cutoff[0] == y.index[65]
    # the oracle: the network's forecast and the fitted classical models updated by hand, with the weights of
    # fit; AutoETS, which sktime cannot give new data without refitting (it kept its old state and forecast
    # from before the update, silently), refitted on all its data
    with f._as_variant("network"):
        expected = weights.iloc[0]["network"] * f.predict().to_numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stale = copy.deepcopy(models["ets"]).update(y.iloc[60:66], update_params=False).predict(fh=FH)
        for name in CLASSICAL:
            updated = models[name].update(y.iloc[60:66], update_params=name == "ets")
            forecast = updated.predict(fh=FH).to_numpy().ravel()
            expected = expected + weights.iloc[0][name] * forecast
    assert not np.allclose(stale.to_numpy().ravel(), f._classical_cache[()]["ets"][1][: len(FH), 0])
    np.testing.assert_allclose(pred.to_numpy(), expected, rtol=1e-6)


def test_only_the_chosen_classical_forecasts_are_fitted_weighed_and_updated(monkeypatch):
    def refuse(self, *args, **kwargs):
        raise AssertionError("AutoETS was fitted though combine_components leaves it out")

    monkeypatch.setattr(AutoETS, "_fit", refuse)
    y = noisy(72)
    f = combined(combine_components=("drift", "naive"), combine_rule="inverse_error").fit(y.iloc[:60], fh=FH)
    assert list(f.combination_weights_.columns) == ["network", "naive", "drift"]
    assert set(f._classical[()]) == {"naive", "drift"}
    np.testing.assert_allclose(f.combination_weights_.to_numpy().sum(), 1.0)
    f.update(y.iloc[60:66])
    assert set(f._classical[()]) == {"naive", "drift"} and f._classical[()]["drift"].cutoff[0] == y.index[65]
    assert np.isfinite(f.predict_interval(coverage=0.8).to_numpy()).all()


def test_network_ets_without_autoets_is_refused_before_any_training(monkeypatch):
    monkeypatch.setattr(SSMForecaster, "_train_network", lambda *a, **k: pytest.fail("trained before refusing"))
    with pytest.raises(ValueError, match=r"network_ets.*AutoETS.*combine_components=\('naive', 'theta'\).*add 'ets'"):
        combined(combine_components=("naive", "theta")).fit(noisy(), fh=FH)
    for bad in ((), ("ets", "ets"), ("arima",), "ets"):
        with pytest.raises(ValueError, match="combine_components must be a non-empty list of distinct names"):
            combined(combine_components=bad).fit(noisy(), fh=FH)


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


# ---------------------------------------------------------------- what cannot be validated or fitted
@pytest.mark.parametrize(
    "rule, weights, how",
    [
        ("inverse_error", [0.2] * 5, "equal weights"),
        ("calibrate", [1.0, 0, 0, 0, 0], "the network alone"),
        ("network_first", None, "the median of the 5 forecasts"),  # no evidence for the network either
        ("network_ets", None, "the median of the 5 forecasts"),
    ],
)
def test_a_lone_series_too_short_to_hold_out_a_window_warns_and_reports_the_weights_predict_uses(rule, weights, how):
    y = noisy(12)
    with pytest.warns(
        UserWarning, match=rf"no series .*a window of max\(fh\)=6 steps.*14 observations.*{how}.*not widened"
    ):
        f = combined(context_length=4, combine_rule=rule).fit(y, fh=FH)
    assert int(f.validation_windows_.iloc[0]) == 0
    assert set(f.combination_widening_.values()) == {0.0}
    levels = list(f.quantile_levels_)
    with f._as_variant("network"):
        network, network_q = f.predict().to_numpy(), f.predict_quantiles(alpha=levels)
    classical = classical_by_hand(y, 6, levels, quantiles=False)
    if weights is None:
        assert np.isnan(f.combination_weights_.to_numpy()).all()  # the median's
        expected = np.median([network.ravel(), *(classical[m][0] for m in CLASSICAL)], axis=0)
    else:
        np.testing.assert_allclose(f.combination_weights_.to_numpy(), [weights])
        w = dict(zip(COMPONENTS, weights))
        expected = w["network"] * network + sum(w[m] * classical[m][0] for m in CLASSICAL)
    np.testing.assert_allclose(f.predict().to_numpy().ravel(), np.ravel(expected), rtol=1e-6)
    if rule == "calibrate":  # nothing to calibrate on: the network's own intervals
        pd.testing.assert_frame_equal(f.predict_quantiles(alpha=levels), network_q)


def theta_fails(monkeypatch, when) -> None:
    """Theta's forecasts raise ValueError("no forecast from here") from the cutoffs where when(cutoff) holds."""
    original = ThetaForecaster._predict

    def predict(self, fh, X=None):
        if when(self.cutoff[0]):
            raise ValueError("no forecast from here")
        return original(self, fh, X)

    monkeypatch.setattr(ThetaForecaster, "_predict", predict)


@pytest.mark.parametrize("rule", ["inverse_error", "median"])
def test_a_series_with_missing_values_leaves_autoets_and_theta_out_and_the_weights_say_so(rule):
    y = noisy()
    y.iloc[20] = np.nan  # statsmodels takes no missing values; sktime's naive forecasts do
    with pytest.warns(UserWarning, match=r"AutoETS and Theta of y: it has missing values, which statsmodels"):
        f = combined(combine_rule=rule).fit(y, fh=FH)
    errors = f.validation_errors_.iloc[0]
    assert errors[["ets", "theta"]].isna().all() and errors[["network", "naive", "drift"]].notna().all()
    with f._as_variant("network"):
        forecasts = {"network": f.predict().to_numpy()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, model in (("naive", NaiveForecaster(strategy="last", sp=1)), ("drift", NaiveForecaster("drift"))):
            forecasts[name] = model.fit(y).predict(fh=FH).to_numpy()
    if rule == "median":  # NaN: in the median; 0: left out
        np.testing.assert_array_equal(f.combination_weights_.to_numpy(), [[np.nan, 0, 0, np.nan, np.nan]])
        np.testing.assert_allclose(f.predict().to_numpy(), np.median(list(forecasts.values()), axis=0))
        return
    weights = {**weights_by_hand({m: errors[m] for m in forecasts}, "inverse_error"), "ets": 0.0, "theta": 0.0}
    np.testing.assert_allclose(f.combination_weights_.iloc[0].to_numpy(), [weights[m] for m in COMPONENTS])
    expected = sum(weights[m] * forecasts[m] for m in forecasts)
    np.testing.assert_allclose(f.predict().to_numpy(), expected, rtol=1e-6)


def test_a_classical_model_that_cannot_forecast_from_all_of_y_is_left_out_and_the_weights_say_so(monkeypatch):
    y = noisy()
    theta_fails(monkeypatch, lambda cutoff: cutoff == y.index[-1])
    with pytest.warns(UserWarning, match=r"Theta of y: ValueError: no forecast from here"):
        f = combined(combine_rule="inverse_error").fit(y, fh=FH)
    monkeypatch.undo()
    # the inverse-error weights of the two components left
    errors = f.validation_errors_.iloc[0]
    kept = {**weights_by_hand({m: errors[m] for m in COMPONENTS if m != "theta"}, "inverse_error"), "theta": 0.0}
    np.testing.assert_allclose(f.combination_weights_.iloc[0].to_numpy(), [kept[m] for m in COMPONENTS])
    with f._as_variant("network"):
        network = f.predict().to_numpy()
    classical = classical_by_hand(y, 6, f.quantile_levels_, quantiles=False)
    expected = kept["network"] * network + sum(kept[m] * classical[m][0] for m in CLASSICAL)
    np.testing.assert_allclose(f.predict().to_numpy(), expected, rtol=1e-6)


def test_a_classical_model_failing_only_at_the_held_out_windows_gets_no_weight_and_a_warning_says_so(monkeypatch):
    y = noisy()
    theta_fails(monkeypatch, lambda cutoff: cutoff != y.index[-1])
    with pytest.warns(UserWarning, match=r"at the held-out windows, Theta of y: ValueError: no forecast from here"):
        f = combined(combine_rule="inverse_error").fit(y, fh=FH)
    monkeypatch.undo()
    errors = f.validation_errors_.iloc[0]
    assert np.isnan(errors["theta"])
    weights = {**weights_by_hand({m: errors[m] for m in COMPONENTS if m != "theta"}, "inverse_error"), "theta": 0.0}
    np.testing.assert_allclose(f.combination_weights_.iloc[0].to_numpy(), [weights[m] for m in COMPONENTS])


def test_a_classical_model_failing_in_update_is_left_out_and_the_weights_say_so(monkeypatch):
    y = noisy(72)
    f = combined().fit(y.iloc[:60], fh=FH)
    before = f.combination_weights_.iloc[0]
    models = copy.deepcopy(f._classical[()])

    def fails(self, *args, **kwargs):
        raise ValueError("no converged fit")

    monkeypatch.setattr(AutoETS, "update", fails)
    with pytest.warns(UserWarning, match=r"AutoETS of y: ValueError: no converged fit"):
        f.update(y.iloc[60:66], update_params=False)
    monkeypatch.undo()
    expected = before.where(before.index != "ets", 0.0) / before.drop("ets").sum()
    np.testing.assert_allclose(f.combination_weights_.iloc[0].to_numpy(), expected.to_numpy())
    with f._as_variant("network"):
        forecast = expected["network"] * f.predict().to_numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ("theta", "naive", "drift"):  # updated by hand
            model = models[name].update(y.iloc[60:66], update_params=False)
            forecast = forecast + expected[name] * model.predict(fh=FH).to_numpy().ravel()
    np.testing.assert_allclose(f.predict().to_numpy(), forecast, rtol=1e-6)


def test_with_one_window_a_series_cannot_calibrate_weights_chosen_on_it_and_a_warning_says_so():
    with pytest.warns(UserWarning, match=r"combine_rule='inverse_error' chooses its weights.*not widened"):
        f = combined(combine_rule="inverse_error", combine_windows=1).fit(noisy(), fh=FH)
    assert set(f.combination_widening_.values()) == {0.0}


def test_too_few_held_out_points_for_an_interval_warn_and_leave_it_unwidened():
    # one step ahead, two windows: 2 points calibrate the 50 % interval but not the 80 % one (it needs 4)
    with pytest.warns(UserWarning, match=r"give 2 forecast point\(s\).*too few for the 80 % interval.*at least 4"):
        f = combined(combine_rule="calibrate", combine_windows=2).fit(noisy(), fh=[1])
    assert f.combination_widening_[0.1] == f.combination_widening_[0.9] == 0.0
    assert f.combination_widening_[0.25] == f.combination_widening_[0.75]


def test_too_little_data_for_the_validation_network_warns_and_nothing_is_validated():
    # early stopping needs windows before its own held-out ones: 18 observations before the windows are too few
    with pytest.warns(
        UserWarning, match=r"could not be trained on the data before.*early_stopping.*equal weights.*not widened"
    ):
        f = combined(combine_rule="inverse_error", early_stopping=True).fit(noisy(30), fh=FH)
    assert list(f.validation_windows_) == [0]
    np.testing.assert_allclose(f.combination_weights_.to_numpy(), 1 / 5)
    assert set(f.combination_widening_.values()) == {0.0}


def test_any_other_failure_of_the_validation_network_propagates(monkeypatch):
    original = SSMForecaster._train_network

    def broken(self, *args, **kwargs):
        if self.combine == "none":  # the validation network
            raise TypeError("a bug")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SSMForecaster, "_train_network", broken)
    with pytest.raises(TypeError, match="a bug"):
        combined().fit(noisy(), fh=FH)


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
    pd.testing.assert_frame_equal(variants[SSMForecaster().combine_rule][0], point)
    # with combine, 'auto' calibrates nothing: the variants' network is the uncalibrated one
    plain = SSMForecaster(**TINY, calibration="none").fit(panel, fh=[1, 2, 3])
    np.testing.assert_allclose(variants["network"][0].to_numpy(), plain.predict().to_numpy(), rtol=1e-5)
    assert bounds.shape == variants["median"][1].shape
    # validation: the last h + (folds - 1) * step = 6 times go; a series needs 10 observations before the
    # validation backtest's first origin (another 6 back)
    short = panel[panel.index.get_level_values("time") >= panel.index.get_level_values("time")[25]]
    kept = validation_panel(pd.concat([panel.loc[["a"]], short.loc[["b"]]]), task)
    times = kept.index.get_level_values("time")
    assert times.max() == panel.index.get_level_values("time").unique()[-7]
    assert list(kept.index.get_level_values("series").unique()) == ["a"]


def test_the_single_series_benchmark_writes_records_that_score_as_its_rows(tmp_path):
    """forecast --components on one series: one record per fold, and the offline scores of every rule equal
    the rows the benchmark prints for the same fits (the panel route is checked in test_bench_panels)."""
    import json

    from ssmts.bench import components, forecast

    path, rows_path = tmp_path / "records.jsonl", tmp_path / "rows.json"
    ssm = {**{k: v for k, v in TINY.items() if k != "context_length"}, "combine": "validation", "ensemble_size": 1}
    argv = ["--quick", "--series", "shampoo", "--validation", "--models", "ssm,naive,theta,ets"]
    argv += ["--ssm-params", json.dumps(ssm), "--components", str(path), "--json", str(rows_path)]
    assert forecast.main(argv) == 0
    records = components.load_records([path])
    assert len(records) == 1 and records[0]["set"] == "shampoo" and records[0]["series"] == ""
    rows = {row["model"]: row["mase"] for row in json.load(open(rows_path))}
    table = components.score_rules(records, ["network", *RULES])
    for rule in ("network", *RULES):
        assert table[rule]["shampoo"] == pytest.approx(rows[f"ssm/{rule}"], rel=1e-9), rule
