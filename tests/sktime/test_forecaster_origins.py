"""SSMForecaster from many origins: historical_forecasts (one batched forward) and stream()
(one observation at a time) against update(update_params=False) + predict; sktime's
evaluate and ConformalIntervals around it. Tiny networks, few epochs."""

import copy
import warnings

import numpy as np
import pandas as pd
import pytest

from ssmts.sktime import ForecastStream, SSMForecaster

TINY = dict(
    d_model=8,
    d_state=4,
    n_layers=1,
    max_epochs=2,
    batch_size=16,
    context_length=8,
    device="cpu",
    random_state=0,
    quantiles=(0.1, 0.5, 0.9),
    n_sample_paths=16,
    bidirectional=False,
)
ALPHA = [0.1, 0.8]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


def series(n=50, seed=0, name="y"):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    values = 10 + 0.05 * t + np.sin(2 * np.pi * t / 12) + 0.1 * rng.normal(size=n)
    return pd.Series(values, index=pd.period_range("2000-01", periods=n, freq="M"), name=name)


def exog(y, seed=1):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"a": rng.normal(size=len(y)), "b": np.cos(np.arange(len(y)))}, index=y.index)


def fitted(strategy, X=None, n_fit=30, **params):
    y = series()
    f = SSMForecaster(**{**TINY, "strategy": strategy, **params})
    return f.fit(y.iloc[:n_fit], X=None if X is None else X.iloc[:n_fit], fh=[1, 2, 3])


@pytest.mark.parametrize("strategy", ["direct", "recursive"])
@pytest.mark.parametrize("with_x", [False, True])
def test_historical_forecasts_equal_update_and_predict_at_each_origin(strategy, with_x):
    y = series()
    X = exog(y) if with_x else None
    f = fitted(strategy, X)
    cuts = y.index[[29, 33, 40, 45]]
    points = f.historical_forecasts(y.iloc[:46], X=X, cutoffs=cuts)
    quantiles = f.historical_forecasts(y.iloc[:46], X=X, cutoffs=cuts, alpha=ALPHA)
    assert points.index.names == ["cutoff", None] and len(points) == 4 * 3
    assert f.cutoff[0] == y.index[29]  # the forecaster did not move
    g = copy.deepcopy(f)
    for cut in cuts:
        end = y.index.get_loc(cut) + 1
        g.update(y.iloc[:end], X=None if X is None else X.iloc[:end], update_params=False)
        X_future = None if X is None else X.iloc[end : end + 3]
        expected, expected_q = g.predict(X=X_future), g.predict_quantiles(X=X_future, alpha=ALPHA)
        got, got_q = points.xs(cut, level="cutoff"), quantiles.xs(cut, level="cutoff")
        assert got.index.equals(expected.index)
        np.testing.assert_allclose(got.to_numpy().ravel(), expected.to_numpy(), rtol=1e-5)
        np.testing.assert_allclose(got_q.to_numpy(), expected_q.to_numpy(), rtol=1e-5)
        assert list(got_q.columns) == list(expected_q.columns)


@pytest.mark.parametrize("strategy", ["direct", "recursive"])
def test_backtests_pass_through_the_network_in_batches_that_do_not_change_them(strategy, monkeypatch):
    """predict_batches bounds the rows per forward pass; the forecasts (and the recursive sample
    paths, drawn with common random numbers) come out the same in batches of 2 as in one."""
    import ssmts.sktime._strategies as strategies

    y = series()
    X = exog(y)
    f = fitted(strategy, X)
    whole = f.historical_forecasts(y.iloc[:46], X=X, alpha=ALPHA)
    monkeypatch.setattr(strategies, "FORECAST_BATCH", 2)
    in_twos = f.historical_forecasts(y.iloc[:46], X=X, alpha=ALPHA)
    assert len(whole) == (46 - 8 + 1) * 3
    np.testing.assert_allclose(in_twos.to_numpy(), whole.to_numpy(), rtol=1e-6)


def test_historical_forecasts_of_a_panel_and_every_cutoff_by_default():
    y = pd.concat({"a": series(40, seed=0), "b": series(36, seed=1) * 2}).to_frame()
    y.index.names = ["shop", "month"]
    train = y[y.index.get_level_values("month") <= pd.Period("2002-01", "M")]
    f = SSMForecaster(**{**TINY, "strategy": "direct"}).fit(train, fh=[1, 2])
    cuts = pd.PeriodIndex(["2002-01", "2002-06", "2002-12"], freq="M")
    got = f.historical_forecasts(y, cutoffs=cuts)
    assert got.index.names == ["shop", "cutoff", "month"] and len(got) == 2 * 3 * 2
    g = copy.deepcopy(f)
    for cut in cuts:
        g.update(y[y.index.get_level_values("month") <= cut], update_params=False)
        expected = g.predict()
        for shop in ("a", "b"):
            np.testing.assert_allclose(got.loc[(shop, cut)].to_numpy(), expected.loc[shop].to_numpy(), rtol=1e-5)
    every = f.historical_forecasts(y)  # each series from its first full context to its end
    assert len(every) == ((40 - 8 + 1) + (36 - 8 + 1)) * 2


def test_historical_forecasts_errors_in_the_users_terms():
    y = series()
    X = exog(y)
    f = fitted("direct", X)
    with pytest.raises(ValueError, match=r"cutoff 1999-12 comes before the first observation of y \(2000-01\)"):
        f.historical_forecasts(y, X=X, cutoffs=pd.PeriodIndex(["1999-12"], freq="M"))
    with pytest.raises(ValueError, match="X is missing .* forecast steps of the cutoffs"):
        f.historical_forecasts(y, X=X.iloc[:40], cutoffs=y.index[[39]])
    with pytest.raises(ValueError, match="fitted with exogenous X"):
        f.historical_forecasts(y, cutoffs=y.index[[20]])
    with pytest.raises(ValueError, match="relative fh"):
        f.historical_forecasts(y, X=X, cutoffs=y.index[[20]], fh=pd.PeriodIndex(["2002-01"], freq="M"))
    with pytest.raises(ValueError, match="trained for 3"):
        f.historical_forecasts(y, X=X, cutoffs=y.index[[20]], fh=[5])
    # a repeated cutoff gave its forecasts twice under the same index labels, without a word
    with pytest.raises(ValueError, match=r"cutoffs holds \[Period\('2001-09', 'M'\)\] more than once"):
        f.historical_forecasts(y, X=X, cutoffs=y.index[[20, 20, 25]])
    # X's columns in another order: the message says so
    with pytest.raises(ValueError, match=r"the same columns in another order"):
        f.predict(X=X.iloc[30:33][X.columns[::-1]])


@pytest.mark.parametrize(
    "strategy,with_x", [("direct", False), ("direct", True), ("recursive", True), ("recursive", False)]
)
def test_stream_equals_update_and_predict_at_every_step(strategy, with_x):
    y = series()
    X = exog(y) if with_x else None
    f = fitted(strategy, X)
    stream, g = f.stream(), copy.deepcopy(f)
    assert isinstance(stream, ForecastStream) and stream.ready
    n_future = 3
    for t in range(30, 42):
        x_row = None if X is None else X.iloc[t].to_numpy()
        x_future = None if X is None else X.iloc[t + 1 : t + 1 + n_future].to_numpy()
        point, q = stream.step(y.iloc[t], X=x_row, X_future=x_future, alpha=ALPHA)
        g.update(y.iloc[t : t + 1], X=None if X is None else X.iloc[t : t + 1], update_params=False)
        X_future = None if X is None else X.iloc[t + 1 : t + 1 + n_future]
        np.testing.assert_allclose(point.ravel(), g.predict(X=X_future).to_numpy(), rtol=1e-5)
        np.testing.assert_allclose(q.reshape(3, -1), g.predict_quantiles(X=X_future, alpha=ALPHA).to_numpy(), rtol=1e-5)
    assert stream.n_seen == 12 and f.cutoff[0] == y.index[29]


def test_stream_errors_and_a_short_start():
    y = series()
    X = exog(y)
    f = fitted("direct", X)
    stream = f.stream()
    with pytest.raises(ValueError, match="needs the new observation's X row"):
        stream.update(1.0)
    with pytest.raises(ValueError, match="X_future"):
        stream.predict()
    with pytest.raises(ValueError, match="X at the forecast steps 1..3"):
        stream.predict(X_future=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="no series 'nope'"):
        f.stream("nope")
    with pytest.raises(ValueError, match=r"strictly between 0 and 1, got \[0.5, 1.5\]"):
        stream.predict(X_future=np.zeros((3, 2)), alpha=[0.5, 1.5])
    with pytest.raises(ValueError, match=r"strictly between 0 and 1, got \[0.0\]"):
        f.historical_forecasts(y, X=X, alpha=0.0)
    # a panel series shorter than the context: not ready until enough observations arrive
    panel = pd.concat({"a": series(30), "b": series(5)}).to_frame()
    g = SSMForecaster(**TINY).fit(panel, fh=[1])
    with pytest.raises(ValueError, match=r"fitted on a panel; pass instance=, one of \['a', 'b'\]"):
        g.stream()
    short = g.stream("b")
    assert not short.ready
    with pytest.raises(ValueError, match="seen so far"):
        short.predict()
    for value in range(3):
        short.update(float(value))
    assert short.ready and short.predict().shape == (1, 1)


def test_sktime_evaluate_no_update_params_equals_historical_forecasts():
    from sktime.forecasting.model_evaluation import evaluate
    from sktime.split import ExpandingWindowSplitter

    y = series()
    f = SSMForecaster(**TINY)
    cv = ExpandingWindowSplitter(initial_window=30, step_length=4, fh=[1, 2, 3])
    result = evaluate(f, cv, y, strategy="no-update_params", return_data=True)
    fitted_f = SSMForecaster(**TINY).fit(y.iloc[:30], fh=[1, 2, 3])
    cuts = y.index[[len(train) - 1 for train in result.y_train]]
    got = fitted_f.historical_forecasts(y, cutoffs=cuts)
    for cut, pred in zip(cuts, result.y_pred):
        np.testing.assert_allclose(got.xs(cut, level="cutoff").to_numpy().ravel(), pred.to_numpy(), rtol=1e-5)


def test_conformal_intervals_wrap_the_forecaster():
    from sktime.forecasting.conformal import ConformalIntervals

    y = series(40)
    conformal = ConformalIntervals(SSMForecaster(**{**TINY, "max_epochs": 1}), initial_window=30, sample_frac=1.0)
    conformal.fit(y, fh=[1, 2])
    bounds = conformal.predict_interval(coverage=[0.8])
    assert bounds.shape == (2, 2) and np.isfinite(bounds.to_numpy(dtype=float)).all()
    assert (bounds.iloc[:, 0] <= bounds.iloc[:, 1]).all()


def test_forecast_benchmark_backtest_timing_quick_option(capsys):
    """`python -m ssmts.bench forecast --backtest-timing --quick`: a tiny model, every route timed, ratios printed."""
    from ssmts.bench import forecast as bench

    assert bench.main(["--backtest-timing", "--quick"]) == 0
    out = capsys.readouterr().out
    for route in (
        "historical_forecasts (one pass)",
        "K x update + predict",
        "stream(): K steps, batch 1",
        "sktime evaluate no-update_params",
        "that fit of 1 epoch alone",
        "refit at each origin",
    ):
        assert route in out, out
    assert "1.0x" in out and "steps/s at batch 1" in out


def test_forecast_benchmark_coverage_option(monkeypatch):
    """--coverage 0.8,0.9: empirical coverage columns (in %) next to the accuracy; levels must lie in (0, 1)."""
    from ssmts.bench import forecast as bench

    args = bench.parse_args(
        [
            "--series",
            "shampoo",
            "--models",
            "ssm,naive",
            "--quick",
            "--coverage",
            "0.8,0.9",
            "--ssm-params",
            '{"d_model": 8, "d_state": 4, "n_layers": 1, "ensemble_size": 1, "max_epochs": 1}',
        ]
    )
    assert args.coverage == (0.8, 0.9)
    rows = bench.run(args)
    assert all(0 <= row["cov80"] <= row["cov90"] <= 100 for row in rows)
    table, _ = bench.summary(rows)
    assert "cov80" in table and "cov90" in table
    with pytest.raises(SystemExit):
        bench.parse_args(["--coverage", "80"])


def test_forecast_benchmark_uschange_past_covariate_row():
    """--uschange-past: an SSM row with uschange's other columns as past-only covariates, whose
    predict gets no future X (the realistic counterpart of --uschange-exog's oracle X)."""
    from ssmts.bench import forecast as bench

    args = bench.parse_args(
        [
            "--series",
            "uschange",
            "--models",
            "ssm",
            "--quick",
            "--uschange-past",
            "--ssm-params",
            '{"d_model": 8, "d_state": 4, "n_layers": 1, "ensemble_size": 1, "max_epochs": 1}',
        ]
    )
    rows = bench.run(args)
    assert [row["model"] for row in rows] == ["ssm", "ssm+pastX"]
    assert all(np.isfinite(row["mase"]) for row in rows)


def test_historical_forecasts_with_gaps_past_and_static_covariates_equal_update_and_predict():
    """Missing values in y and X, a past-only and a static column (direct strategy): the same as
    update + predict at every cutoff, where predict's X holds only the known-ahead column."""
    frames = []
    for shop, size in [("a", 1.0), ("b", 3.0)]:
        y = series(50, seed=int(size)) * size
        X = exog(y, seed=int(size)).assign(size=size)
        frames.append(pd.concat({shop: pd.concat([y.rename("sales"), X], axis=1)}, names=["shop", "month"]))
    data = pd.concat(frames)
    data.iloc[[33, 34, 70], 0] = np.nan
    data.iloc[[36, 80], 2] = np.nan
    months = data.index.get_level_values("month")
    train = data[months <= pd.Period("2002-06", "M")]
    f = SSMForecaster(**{**TINY, "past_covariates": ["b"], "static_covariates": ["size"]})
    f.fit(train[["sales"]], X=train[["a", "b", "size"]], fh=[1, 2, 3])
    cuts = pd.PeriodIndex(["2002-06", "2002-10", "2003-02"], freq="M")
    got = f.historical_forecasts(data[["sales"]], X=data[["a", "b"]], cutoffs=cuts, alpha=ALPHA)
    g = copy.deepcopy(f)
    for cut in cuts:
        upto = data[months <= cut]
        g.update(upto[["sales"]], X=upto[["a", "b", "size"]], update_params=False)
        ahead = data[(months > cut) & (months <= cut + 3)][["a"]]
        expected = g.predict_quantiles(X=ahead, alpha=ALPHA)
        for shop in ("a", "b"):
            np.testing.assert_allclose(got.loc[(shop, cut)].to_numpy(), expected.loc[shop].to_numpy(), rtol=1e-5)


def test_stream_with_missing_values_equals_update_and_predict():
    y, X = series(), exog(series())
    y.iloc[[31, 32, 36]] = np.nan
    X.iloc[[33, 41], 0] = np.nan
    X.iloc[[34], 1] = np.nan
    f = fitted("direct", X)
    stream, g = f.stream(), copy.deepcopy(f)
    for t in range(30, 42):
        point = stream.step(y.iloc[t], X=X.iloc[t].to_numpy(), X_future=X.iloc[t + 1 : t + 4].to_numpy())
        g.update(y.iloc[t : t + 1], X=X.iloc[t : t + 1], update_params=False)
        np.testing.assert_allclose(point.ravel(), g.predict(X=X.iloc[t + 1 : t + 4]).to_numpy(), rtol=1e-5)


def test_stream_refuses_past_only_covariates():
    y, X = series(), exog(series())
    f = SSMForecaster(**{**TINY, "past_covariates": ["b"]}).fit(y.iloc[:30], X=X.iloc[:30], fh=[1, 2])
    with pytest.raises(ValueError, match="past_covariates or static_covariates"):
        f.stream()
