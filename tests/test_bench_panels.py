"""The panel forecasting benchmark: its data, its metrics against sktime's, and one run."""

import numpy as np
import pandas as pd
import pytest
from sktime.performance_metrics.forecasting import mean_absolute_percentage_error, mean_absolute_scaled_error

from ssmts.bench import forecast
from ssmts.bench.panels import PANEL_TASKS, PanelTask, _scores, load_panel, panel_backtest


def _random_walks(n_series: int, length: int, seed: int) -> pd.DataFrame:
    """A quarterly panel of drifting random walks around 50, (series, time) indexed."""
    rng = np.random.default_rng(seed)
    times = pd.period_range("2000Q1", periods=length, freq="Q")
    return pd.concat(
        {
            f"s{i}": pd.DataFrame({"y": 50 + np.cumsum(rng.normal(0.5, 1, length))}, index=times)
            for i in range(n_series)
        },
        names=["series", "time"],
    )


def test_the_panels_hold_contiguous_series_long_enough_for_every_origin():
    fertility = load_panel("fertility")
    sizes = fertility.groupby(level="series").size()
    assert len(sizes) == 196 and sizes.min() >= 22 and sizes.max() == 52
    assert not fertility["y"].isna().any()
    last = fertility.index.get_level_values("time").max()
    assert str(last) == "2011"  # 2012 and 2013 are empty in the data set
    macro = load_panel("macrodata")
    assert macro.groupby(level="series").size().tolist() == [203] * 12
    assert str(macro.index.get_level_values("time")[0]) == "1959Q1"


@pytest.mark.parametrize("season", [1, 4])
def test_scores_equal_sktimes_mase_and_smape(season):
    rng = np.random.default_rng(0)
    train, truth, pred = rng.normal(10, 2, 30), rng.normal(10, 2, 6), rng.normal(10, 2, 6)
    mase, smape = _scores(truth, pred, train, season)
    expected = mean_absolute_scaled_error(pd.Series(truth), pd.Series(pred), y_train=pd.Series(train), sp=season)
    assert mase == pytest.approx(expected, rel=1e-12)
    assert smape == pytest.approx(100 * mean_absolute_percentage_error(truth, pred, symmetric=True), rel=1e-12)


def _lines(n_series: int, length: int) -> pd.DataFrame:
    """A quarterly panel of straight lines, y_i(t) = 50 + 10 i + (0.5 + i) t: an easy panel whose
    naive forecast's MASE is known exactly."""
    times = pd.period_range("2000Q1", periods=length, freq="Q")
    return pd.concat(
        {
            f"s{i}": pd.DataFrame({"y": 50 + 10 * i + (0.5 + i) * np.arange(length, dtype=float)}, index=times)
            for i in range(n_series)
        },
        names=["series", "time"],
    )


def test_a_panel_backtest_scores_every_model_on_every_series():
    """On straight lines (season 1, h = 4) the last value misses step k by k slopes while the in-sample
    scale is one slope, so the naive MASE is (1 + 2 + 3 + 4) / 4 = 2.5 exactly, on every series and
    origin; a trend model (AutoETS) and a trained network extrapolate the lines far better."""
    panel = _lines(n_series=3, length=24)
    task = PanelTask("toy", 1, 4, 2, 2)
    ssm = dict(
        d_model=8, d_state=4, n_layers=1, max_epochs=60, lr=1e-2, context_length="auto", device="cpu", random_state=0
    )
    rows = {r["model"]: r for r in panel_backtest(task, panel, ssm)}
    assert set(rows) == {"naive", "theta", "ets", "median", "ssm"}
    assert all(r["series"] == 3 and r["panel"] == "toy" for r in rows.values())
    assert rows["naive"]["mase"] == pytest.approx(2.5, rel=1e-9)
    # the naive sMAPE, from the same misses: 2 |k b| / (|y + k b| + |y|), averaged by hand
    smape = []
    for i in range(3):
        for origin in (18, 20):  # the last forecast ends at the end of the panel, origins 2 steps apart
            b, last = 0.5 + i, 50 + 10 * i + (0.5 + i) * (origin - 1)
            smape += [200 * k * b / (2 * last + k * b) for k in range(1, 5)]
    assert rows["naive"]["smape"] == pytest.approx(np.mean(smape), rel=1e-9)
    # measured: AutoETS 0.10, the SSM 0.001 (seeds 0 to 3 at these settings, 0.0008 each)
    assert rows["ets"]["mase"] < 0.5 and rows["ssm"]["mase"] < 0.25
    assert 0.0 <= rows["ssm"]["cov80"] <= rows["ssm"]["cov90"] <= 100.0
    assert PANEL_TASKS["fertility"].h == 6 and PANEL_TASKS["macrodata"].h == 8


def test_the_forecast_benchmark_runs_a_panel(capsys):
    assert forecast.main(["--panels", "macrodata", "--quick", "--models", "naive,theta,ets"]) == 0
    out = capsys.readouterr().out
    assert "| macrodata | median |" in out and "| macrodata | ets |" in out


def test_the_m1_check_panel_aligns_every_series_to_end_together():
    pytest.importorskip("aeon", reason="the M1 yearly panel ships with aeon (the bench extra)")
    panel = load_panel("m1yearly")
    ends = panel.reset_index().groupby("series")["time"].max()
    lengths = panel.groupby(level="series").size()
    assert len(ends) == 181 and (ends == pd.Period("2000", freq="Y")).all()
    assert lengths.min() == 15 and lengths.max() == 58 and np.isfinite(panel["y"]).all()


def test_the_context_ensemble_is_the_median_of_one_forecaster_per_context(capsys):
    """--context-multiples 1,2,3: the SSM row forecasts the median of three forecasters fitted with
    context_length = h, 2h, 3h, and its intervals are the mean of theirs."""
    from ssmts.bench.panels import _ssm_forecasts
    from ssmts.sktime import SSMForecaster

    panel = _random_walks(n_series=2, length=30, seed=1)
    task = PanelTask("toy", 4, 2, 1, 1)
    tiny = dict(d_model=8, d_state=4, n_layers=1, max_epochs=2, device="cpu", random_state=0)
    point, bounds = _ssm_forecasts(task, panel, [1, 2], tiny, (1, 2, 3))
    members = [SSMForecaster(**tiny, context_length=m * 2).fit(panel, fh=[1, 2]) for m in (1, 2, 3)]
    expected = np.median([m.predict().to_numpy() for m in members], axis=0)
    np.testing.assert_allclose(point.to_numpy(), expected, rtol=1e-12)
    assert not np.allclose(members[0].predict().to_numpy(), members[2].predict().to_numpy())  # members differ
    bounds_80 = np.mean([m.predict_interval(coverage=0.8).to_numpy() for m in members], axis=0)
    np.testing.assert_allclose(bounds.xs(0.8, axis=1, level=1).to_numpy(), bounds_80, rtol=1e-12)
    with pytest.raises(SystemExit) as done:
        forecast.main(["--context-multiples", "2,x", "--panels", "macrodata"])
    assert done.value.code == 2
    assert "--context-multiples takes comma-separated whole numbers, got '2,x'" in capsys.readouterr().err
    for argv, problem in [
        # the panels run their own series and the SSM's 80 % / 90 % coverage: said, not ignored
        (["--panels", "macrodata", "--series", "airline"], "--series and --coverage are for the single series"),
        (["--panels", "macrodata", "--coverage", "0.8"], "--series and --coverage are for the single series"),
        # a first cutoff before the data: refused (sktime's MASE failed on an empty window)
        (["--series", "shampoo", "--dense", "12"], "--dense 12 puts shampoo's first of 36 folds"),
        (["--series", "shampoo", "--validation", "--dense", "8"], "--dense 8 puts shampoo's first of 24 folds"),
        (["--threads", "0"], "--threads must be an integer >= 1"),
    ]:
        with pytest.raises(SystemExit) as done:
            forecast.main(argv)
        assert done.value.code == 2 and problem in capsys.readouterr().err


def test_component_records_score_every_rule_as_the_forecaster_combines(tmp_path, capsys):
    """The offline scoring of `python -m ssmts.bench combine` against the benchmark's own rows: from the
    per-component records of one panel backtest, every combination rule and every baseline must score the
    MASE the backtest measured with the fitted forecaster (the rules' weights recomputed from the held-out
    windows, applied to the stored forecasts)."""
    from ssmts.bench import components
    from ssmts.sktime._combine import RULES

    panel = _random_walks(n_series=3, length=40, seed=2)
    # a short series: no held-out window, so it takes the pooled weights (and network_first the network)
    panel = panel.drop(panel.loc["s2"].index[:27].map(lambda t: ("s2", t)))
    task = PanelTask("toy", 4, 4, 2, 2)
    ssm = dict(
        d_model=8,
        d_state=4,
        n_layers=1,
        max_epochs=3,
        context_length=8,
        device="cpu",
        random_state=0,
        combine="validation",
        combine_windows=2,
    )
    path = tmp_path / "components.jsonl"
    with pytest.warns(UserWarning, match="too short to hold out"):
        rows = {r["model"]: r["mase"] for r in panel_backtest(task, panel, ssm, components=str(path))}
    records = components.load_records([path])
    assert len(records) == 3 * 2 and {r["series"] for r in records} == {"s0", "s1", "s2"}
    assert sum(r["val_truth"] is None for r in records) == 2  # s2 at both origins
    table = components.score_rules(records, ["network", *RULES])
    for rule in ("network", *RULES):
        assert table[rule]["toy"] == pytest.approx(rows[f"ssm/{rule}"], rel=1e-9), rule
    for baseline in components.BASELINES:
        assert table[baseline]["toy"] == pytest.approx(rows[baseline], rel=1e-9), baseline
    assert len({round(table[rule]["toy"], 9) for rule in ("network", "inverse_error", "select", "median")}) == 4
    assert components.main([str(path), "--rules", "network,median"]) == 0
    partial = [{**record, "components": record["components"][:-1]} for record in records]  # fewer classical
    with pytest.raises(ValueError, match=r"needs all of \['network', 'ets', 'theta', 'naive', 'drift'\]"):
        components.score_rules(partial, ["network"])
    (tmp_path / "other.txt").write_text("not records\n")
    for argv, message in (
        ([str(tmp_path / "absent.jsonl")], "cannot read"),
        ([str(tmp_path / "other.txt")], "not a file of component records"),
        ([str(path), "--rules", "network,best"], "unknown rules ['best']"),
    ):
        with pytest.raises(SystemExit) as refused:
            components.main(argv)
        assert refused.value.code == 2
        assert message in capsys.readouterr().err
