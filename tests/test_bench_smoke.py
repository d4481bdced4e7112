"""Smoke tests of `python -m ssmts.bench layer`, `lncde` and `classify` (tiny shapes and models) and of the benchmark
dispatcher."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from ssmts.bench import layer as bench_layer
from ssmts.bench import lncde as bench_lncde
from ssmts.bench.__main__ import BENCHMARKS
from ssmts.bench.__main__ import main as bench_main

HEADLINE = re.compile(r"SSM fwd\+bwd is \d+\.\d\dx (faster|slower) than LSTM with \d+\.\d% of its parameters")


def test_layer_quick_runs_in_a_subprocess_and_prints_the_table(tmp_path):
    """The real entry point, one fresh process per configuration (its time is the benchmark's business,
    not a test's: a loaded machine takes longer)."""
    csv = tmp_path / "layer.csv"
    proc = subprocess.run(
        [sys.executable, "-m", "ssmts.bench", "layer", "--quick", "--csv", str(csv)],
        capture_output=True,
        text=True,
        timeout=600,  # a hang, not a speed check
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    header = next(line for line in out.splitlines() if line.strip().startswith("model"))
    for column in ("params", "fwd+bwd ms", "peak MB", "time/LSTM", "params/LSTM"):
        assert column in header
    for model in bench_layer.MODELS:
        assert re.search(rf"^\s*{model}\s+\d+\s+16\s+\d+\s+\d+\.\d\s+\d+\.\d", out, re.M), (model, out)
    assert HEADLINE.search(out), out
    df = pd.read_csv(csv)
    # 5 models at L=32 and 64, the recurrence only at the smallest L
    assert len(df) == 11 and df.time_ms.notna().all() and (df.peak_mb > 0).all()
    assert (df[df.model == "lstm"].time_vs_lstm == 1.0).all()


def test_transformer_over_the_memory_cap_is_skipped(capsys):
    """In-process run with a zero attention budget: the transformer rows say 'skipped (memory ...)'."""
    code = bench_layer.main(["--quick", "--in-process", "--models", "ssm,lstm,transformer", "--max-attention-gb", "0"])
    assert code == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.strip().startswith("transformer")]
    assert len(rows) == 2 and all("skipped (memory" in r for r in rows)
    assert HEADLINE.search(out)


def test_headline_at_the_essm_shape():
    df = bench_layer.table(
        [
            bench_layer.Result("ssm", 4096, 256, 33_000, time_ms=100.0),
            bench_layer.Result("lstm", 4096, 256, 526_336, time_ms=400.0),
            bench_layer.Result("ssm", 1024, 256, 33_000, time_ms=10.0),
            bench_layer.Result("lstm", 1024, 256, 526_336, time_ms=20.0),
        ]
    )
    assert (
        bench_layer.headline(df, 16)
        == "At B=16, L=4096, H=256: SSM fwd+bwd is 4.00x faster than LSTM with 6.3% of its parameters"
    )
    assert df.time_vs_lstm.tolist() == [0.25, 1.0, 0.5, 1.0]


def test_attention_estimate_skips_only_long_sequences_by_default():
    """B=16, 8 heads, float32 scores + probabilities: 1.1 GB at L=1024, 17 GB at L=4096 (cap 4 GB)."""
    assert bench_layer.attention_gb(16, 1024, 256) == pytest.approx(1.07, rel=0.01)
    assert bench_layer.attention_gb(16, 4096, 256) == pytest.approx(17.2, rel=0.01)


def test_dispatcher_registry_and_errors(capsys, monkeypatch):
    assert BENCHMARKS["layer"] == "ssmts.bench.layer" and BENCHMARKS["forecast"] == "ssmts.bench.forecast"
    assert BENCHMARKS["lncde"] == "ssmts.bench.lncde"
    assert bench_main(["nope"]) == 2
    assert "unknown benchmark 'nope'" in capsys.readouterr().err
    assert bench_main([]) == 2
    assert "usage" in capsys.readouterr().out
    monkeypatch.setitem(BENCHMARKS, "ghost", "ssmts.bench._no_such_module")
    assert bench_main(["ghost"]) == 2
    assert "not available" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        bench_main(["layer", "--models", "mamba"])  # argparse error for an unknown model
    assert done.value.code == 2 and "unknown models ['mamba']; choose from ['ssm'" in capsys.readouterr().err


def test_lncde_quick_runs_in_a_subprocess_and_prints_the_table():
    """`python -m ssmts.bench lncde --quick`: every structure at L = 64 and 128, all three modes timed,
    forward only and forward plus backward."""
    proc = subprocess.run(
        [sys.executable, "-m", "ssmts.bench", "lncde", "--quick"],
        capture_output=True,
        text=True,
        timeout=600,  # a hang, not a speed check
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    header = next(line for line in out.splitlines() if line.startswith("structure"))
    for column in (
        "params",
        "compose MACs",
        "recurrence ms",
        "scan ms",
        "chunked ms",
        "recurrence f+b ms",
        "scan f+b ms",
        "chunked f+b ms",
        "vs dense scan",
    ):
        assert column in header
    for structure in bench_lncde.STRUCTURES:
        for L in (64, 128):
            assert re.search(
                rf"^{re.escape(structure)}\s+16\s+\d+\s+\d+\s+{L}(\s+\d+\.\d){{6}}\s+\d+\.\dx$", out, re.M
            ), (structure, L, out)
    assert re.search(r"^dense\s+16\s+\d+\s+4096\s", out, re.M)  # d^3 compositions


def test_lncde_skips_over_memory_and_time_budgets(capsys):
    """In-process: with no memory the scans are skipped, and every forward plus backward pass (only the
    forward recurrence is still timed); with no time budget only the first length is measured and the
    next says why it was skipped."""
    assert bench_lncde.main(["--quick", "--structures", "block4,dense", "--max-gb", "0"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith(("block4", "dense"))]
    assert len(rows) == 4 and all("scan fwd: memory ~" in r and "chunked fwd: memory ~" in r for r in rows)
    assert all(f"{mode} fwd+bwd: memory ~" in r for r in rows for mode in bench_lncde.MODES)
    assert all(re.search(r"\s\d+\.\d(\s+-){5}\s", r) for r in rows)

    assert bench_lncde.main(["--quick", "--structures", "diagonal", "--budget", "0"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("diagonal")]
    assert "skipped" not in rows[0] and "time ~" not in rows[0]
    assert all(f"{mode} {kind}: time ~" in rows[1] for mode in bench_lncde.MODES for kind in bench_lncde.PASSES)
    with pytest.raises(SystemExit) as done:
        bench_lncde.main(["--structures", "sparse"])
    assert done.value.code == 2 and "unknown structures ['sparse']; choose from" in capsys.readouterr().err


TINY = '{"d_model": 4, "d_state": 4, "n_layers": 1, "max_epochs": 1, "min_steps": 0}'


def test_classify_benchmark_cross_validates_on_the_training_split(capsys):
    """`bench classify --cv`: every row runs on K folds of the training split (tiny SSM)."""
    from ssmts.bench import classify

    assert (
        bench_main(
            ["classify", "--cv", "2", "--sets", "UnitTest", "--models", "ssm", "1nn", "--params", TINY, "--markdown"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "2-fold CV on the training split" in out and "| ssm |" in out and "| 1nn |" in out
    # The folds are of the training split only (20 series), stratified.
    X_train, y_train, _, _ = classify.load_classification("UnitTest")
    folds = classify.splits(X_train, y_train, 2, regression=False)
    assert sorted(np.concatenate([held for _, held in folds]).tolist()) == list(range(len(X_train)))


def test_classify_benchmark_repeated_cv_gives_different_folds():
    """--cv K --repeats S: S shufflings of K folds, each a partition of the training split, not the same twice."""
    from ssmts.bench import classify

    X_train, y_train, _, _ = classify.load_classification("GunPoint")
    folds = classify.cv_splits(X_train, y_train, 5, regression=False, repeats=3, seed=0)
    assert len(folds) == 15
    for repeat in range(3):
        held = np.concatenate([h for _, h in folds[5 * repeat : 5 * repeat + 5]])
        assert sorted(held.tolist()) == list(range(len(X_train)))
    first = {tuple(sorted(h)) for _, h in folds[:5]}
    assert first != {tuple(sorted(h)) for _, h in folds[5:10]} and first != {tuple(sorted(h)) for _, h in folds[10:]}
    # the first repeat is the plain K-fold of the same seed (--repeats 1 is --cv as it was)
    assert all((a == b).all() for (_, a), (_, b) in zip(folds[:5], classify.splits(X_train, y_train, 5, False, 0)))


def test_classify_benchmark_resamples_are_stratified_on_the_training_split():
    """--resamples R: R different 70/30 splits of the training split only, with the class proportions
    kept; a class with a single member stays in the fit part; regression: plain random splits."""
    from ssmts.bench import classify

    X_train, y_train, X_test, _ = classify.load_classification("ArrowHead")  # 3 classes x 12
    parts = classify.resample_splits(y_train, 4, regression=False, seed=0)
    assert len(parts) == 4 and len({tuple(held) for _, held in parts}) == 4
    for fit, held in parts:
        assert len(np.intersect1d(fit, held)) == 0 and len(fit) + len(held) == len(X_train) == 36
        assert max(np.concatenate([fit, held])) < len(X_train)  # indices of the training split only
        assert len(held) == 11 and sorted(np.unique(y_train[held], return_counts=True)[1].tolist()) == [3, 4, 4]
    y = np.array([0] * 6 + [1] * 6 + [2])  # class 2 has one member
    for fit, held in classify.resample_splits(y, 5, regression=False, seed=1):
        assert 12 in fit and set(y[held]) == {0, 1} and len(fit) + len(held) == 13
    for fit, held in classify.resample_splits(np.arange(10.0), 3, regression=True):
        assert len(held) == 3 and len(fit) == 7


def test_classify_benchmark_markdown_shows_mean_and_std_and_writes_json(capsys, tmp_path):
    """Every row of the resample protocol reports mean ± std per set; --json keeps each score and fit time."""
    path = tmp_path / "scores.json"
    assert (
        bench_main(
            [
                "classify",
                "--resamples",
                "3",
                "--sets",
                "UnitTest",
                "ItalyPowerDemand",
                "--models",
                "ssm",
                "1nn",
                "--params",
                TINY,
                "--markdown",
                "--json",
                str(path),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "3 stratified resamples of the training split" in out
    rows = [line for line in out.splitlines() if line.startswith(("| ssm |", "| 1nn |"))]
    assert len(rows) == 2 and all(len(re.findall(r"\d\.\d{3} ± \d\.\d{3} \(\d+\.\d s\)", r)) == 2 for r in rows)
    saved = json.loads(path.read_text())
    assert saved["resamples"] == 3 and saved["params"] == json.loads(TINY)
    assert len(saved["results"]) == 2 * 2 * 3
    assert {(r["model"], r["set"], r["resample"]) for r in saved["results"]} == {
        (m, s, i) for m in ("ssm", "1nn") for s in ("UnitTest", "ItalyPowerDemand") for i in range(3)
    }
    assert all(0 <= r["score"] <= 1 and r["seconds"] >= 0 and r["predict_seconds"] >= 0 for r in saved["results"])


def test_classify_cost_ratios_sum_fit_and_predict_over_the_sets_against_minirocket():
    """The cost line: each model's fit + predict seconds (mean over folds) summed over the sets, over
    MiniRocket's, and the largest single set's ratio (a hand-made table)."""
    from ssmts.bench import classify

    table = {
        "minirocket": {"A": [(0.9, 1.0, 1.0), (0.9, 3.0, 1.0)], "B": [(0.8, 1.0, 0.0)]},  # A: 3 s, B: 1 s
        "features": {"A": [(0.9, 2.0, 1.0)], "B": [(0.8, 2.0, 2.0)]},  # A: 3 s (1x), B: 4 s (4x)
    }
    assert classify.cost_ratios(table, ["A", "B"]) == {"features": (7.0 / 4.0, 4.0)}


def test_classify_goal_lines_compare_the_features_with_their_anchors():
    """The goals, from a hand-made table: regression per set against DrCIF (lower is better), classification
    the mean over the sets against MultiRocket-Hydra, and the cost against MiniRocket's (2x; 3x beside busy
    processes)."""
    from ssmts.bench import classify

    regression = {
        "features": {"A": [(1.0, 1.0, 0.0), (1.2, 1.0, 0.0)], "B": [(0.5, 1.0, 0.0)]},  # A 1.1, B 0.5
        "drcif": {"A": [(1.05, 9.0, 0.0)], "B": [(0.6, 9.0, 0.0)]},
        "minirocket": {"A": [(2.0, 0.5, 0.0)], "B": [(2.0, 0.5, 0.0)]},  # the features cost 2x: met
    }
    assert classify.goal_lines(regression, ["A", "B"], regression=True) == [
        "A: relative RMSE 1.100 at or below DrCIF's 1.050: NOT met",
        "B: relative RMSE 0.500 at or below DrCIF's 0.600: met",
        "fit + predict 2.00x MiniRocket's, at most 2x: met",
    ]
    classification = {
        "features": {"A": [(0.9, 3.0, 0.0)], "B": [(0.8, 3.0, 0.0)]},  # mean 0.85
        "mr-hydra": {"A": [(0.8, 9.0, 0.0)], "B": [(0.9, 9.0, 0.0)]},  # mean 0.85: a tie is met
        "minirocket": {"A": [(0.9, 1.0, 0.0)], "B": [(0.9, 1.0, 0.0)]},  # 3x: not met
    }
    assert classify.goal_lines(classification, ["A", "B"], regression=False) == [
        "mean accuracy 0.850 at or above MultiRocket-Hydra's 0.850: met",
        "fit + predict 3.00x MiniRocket's, at most 2x: NOT met",
    ]
    # beside a busy process the cost goal is 3x: the same 3.00x is met there
    assert classify.goal_lines(classification, ["A", "B"], regression=False, busy=1)[-1] == (
        "fit + predict 3.00x MiniRocket's, at most 3x beside 1 busy process(es): met"
    )
    assert classify.goal_lines({"drcif": regression["drcif"]}, ["A", "B"], regression=True) == []


def test_classify_benchmark_busy_processes_run_beside_the_rows_and_stop_with_them(capsys, monkeypatch):
    """--busy N: N processes spin beside the rows and are gone when the run returns; the cost line names
    the threads, the busy processes and the load."""
    import subprocess

    from ssmts.bench import classify

    started = []
    popen = subprocess.Popen

    def recording(*args, **kwargs):
        process = popen(*args, **kwargs)
        command = args[0] if args else kwargs["args"]
        if "while True: pass" in command:  # not the other processes of a run (joblib counts the cores with lscpu)
            started.append(process)
        return process

    monkeypatch.setattr(subprocess, "Popen", recording)
    classify.main(["--sets", "UnitTest", "--models", "1nn", "minirocket", "--busy", "1"])
    assert len(started) == 1 and started[0].poll() is not None  # started, and stopped with the run
    out = capsys.readouterr().out
    assert re.search(r"1 thread\(s\), 1 busy process\(es\), load average \d+\.\d -> \d+\.\d", out)
    assert re.search(r"^1nn +\d+\.\d+x  \(largest \d+\.\d+x\)$", out, re.MULTILINE)


def test_classify_benchmark_loads_the_development_sets():
    """The development sets, read from sktime's and aeon's package data (no download)."""
    pytest.importorskip("aeon", reason="PickupGestureWiimoteZ and CardanoSentiment ship with aeon (the bench extra)")
    from ssmts.bench import classify

    def check(name, n_train, n_test, channels, lengths, n_classes=None, regression=False):
        load = classify.load_regression if regression else classify.load_classification
        X_train, y_train, X_test, y_test = load(name)
        assert (len(X_train), len(y_train), len(X_test), len(y_test)) == (n_train, n_train, n_test, n_test), name
        for X in (X_train, X_test):
            if isinstance(lengths, int):
                assert isinstance(X, np.ndarray) and X.dtype == np.float64 and X.shape[1:] == (channels, lengths), name
            else:
                assert isinstance(X, list) and all(x.dtype == np.float64 and x.shape[0] == channels for x in X), name
        if not isinstance(lengths, int):
            seen = [x.shape[1] for x in X_train + X_test]
            assert (min(seen), max(seen)) == lengths, name
        if regression:
            assert y_train.dtype == np.float64 and y_test.dtype == np.float64 and np.isfinite(y_train).all()
        else:
            assert len(np.unique(y_train)) == n_classes and set(np.unique(y_test)) <= set(np.unique(y_train))

    check("ArrowHead", 36, 175, 1, 251, 3)
    check("ACSF1", 100, 100, 1, 1460, 10)
    check("PickupGestureWiimoteZ", 50, 50, 1, (29, 361), 10)
    check("PickupGestureWiimoteZ_eq", 50, 50, 1, 361, 10)
    check("digits", 898, 899, 1, 64, 10)
    check("ItalyPowerDemand", 67, 1029, 1, 24, 2)
    check("GunPoint", 50, 150, 1, 150, 2)
    check("CardanoSentiment", 74, 33, 2, 24, regression=True)
    check("Covid3Month", 140, 61, 1, 84, regression=True)
    check("Tecator", 172, 43, 1, 100, regression=True)
    assert set(classify.CLASSIFICATION_SETS) == {
        "ArrowHead",
        "ACSF1",
        "PickupGestureWiimoteZ",
        "PickupGestureWiimoteZ_eq",
        "digits",
        "ItalyPowerDemand",
        "GunPoint",
    }
    assert set(classify.REGRESSION_SETS) == {"CardanoSentiment", "Covid3Month", "Tecator"}
    # the unequal and equal-length versions hold the same series, the latter padded at the end
    X, y, _, _ = classify.load_classification("PickupGestureWiimoteZ")
    X_eq, y_eq, _, _ = classify.load_classification("PickupGestureWiimoteZ_eq")
    assert (y == y_eq).all() and all(np.allclose(X_eq[i][:, : x.shape[1]], x) for i, x in enumerate(X))
    with pytest.raises(ValueError, match="ships neither"):
        classify.load_classification("NoSuchSet")


def test_classify_benchmark_rows_are_pluggable_and_the_default_rows_are_distinct_models(monkeypatch, capsys):
    """A row is one MODEL_FACTORIES entry (regression, params, seed) -> estimator; no two rows that run
    without --models build the same estimator with the same parameters (a row pinning "earlier"
    defaults equal to today's trained the slowest model twice)."""
    from ssmts.bench import classify

    for regression, rows in ((False, classify.MODELS), (True, classify.REGRESSION_MODELS)):
        built = [classify.make_model(kind, regression, {}, 0) for kind in rows if kind != "mr-hydra"]  # aeon's
        estimators = [
            repr((type(m).__name__, sorted(m.get_params().items()))) for m in built if hasattr(m, "get_params")
        ]
        assert len(estimators) >= 2 and len(set(estimators)) == len(estimators)
    assert classify.make_model("ssm", False, json.loads(TINY), 3).get_params()["d_model"] == 4

    calls = []

    def factory(regression, params, seed):
        calls.append((regression, params, seed))
        return classify.make_model("1nn", regression, {}, seed)

    monkeypatch.setitem(classify.MODEL_FACTORIES, "features", factory)
    assert classify.main(["--sets", "UnitTest", "--models", "features", "--seed", "7", "--no-warmup"]) == 0
    # the row ran as 1-NN ED: 19 of UnitTest's 22 test series
    assert calls == [(False, {}, 7)] and re.search(r"^features\s+0\.864 \(\d+\.\d s\)", capsys.readouterr().out, re.M)
    assert (
        classify.main(
            [
                "--sets",
                "UnitTest",
                "--models",
                "features",
                "--feature-params",
                '{"n_scales": 3}',
                "--params",
                '{"d_model": 4}',
            ]
        )
        == 0
    )
    assert calls[1] == (False, {"n_scales": 3}, 0)  # the ssm row's overrides stay with the ssm row
    monkeypatch.undo()
    features = classify.make_model("features", False, {"n_kernels": 8}, 2)
    assert type(features).__name__ == "SSMFeatureClassifier" and features.get_params()["n_kernels"] == 8
    assert type(classify.make_model("features", True, {}, 0)).__name__ == "SSMFeatureRegressor"
    with pytest.raises(SystemExit) as done:
        classify.main(["--models", "nope"])
    assert done.value.code == 2 and "unknown model(s) ['nope']; choose among" in capsys.readouterr().err


@pytest.mark.parametrize("aeon", ["installed", "absent"])
def test_classify_benchmark_baselines_take_unequal_lengths(capsys, monkeypatch, aeon):
    from ssmts.bench import classify

    if aeon == "absent":  # as in an install without the bench extra: the default sets are then missing,
        # and each option's own error must still be the one reported
        data_dir = classify._data_dir
        monkeypatch.setattr(classify, "_data_dir", lambda package: None if package == "aeon" else data_dir(package))

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(2, n)) for n in (20, 35, 28, 40, 22, 31)]
    y = np.array([0, 1, 0, 1, 0, 1])
    knn = classify.make_model("1nn", False, {}, 0).fit(X, y)
    assert (knn.predict(X) == y).all()  # each series is its own nearest neighbour
    assert knn.predict([rng.normal(size=(2, 60))]).shape == (1,)  # longer than any training series: cut
    assert classify.score([1.0, 2.0], [1.0, 2.0], True, [0.0, 2.0]) == 0.0
    for argv, problem in [
        (["--regression"], "--regression needs --cv K or --resamples R"),  # development protocols only
        (["--regression", "--cv", "2", "--resamples", "2"], "--cv and --resamples are two protocols: pick one"),
        (["--repeats", "2"], "--repeats S (S >= 1) repeats --cv K"),
        # refused before any row runs (they ran, then failed with a traceback, or were taken as they came)
        (["--sets", "GunPoint", "NoSuchSet"], "'NoSuchSet' ships neither with sktime nor with aeon"),
        (["--feature-params", "{bad"], "--feature-params is not valid JSON"),
        (["--params", "[1, 2]"], "--params must be a JSON object of parameters"),
        (["--threads", "0"], "--threads must be an integer >= 1"),
        (["--busy", "-1"], "--busy must be an integer >= 0"),
    ]:
        with pytest.raises(SystemExit) as done:
            classify.main(argv)
        assert done.value.code == 2 and problem in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        classify.main(["--help"])
    assert done.value.code == 0


def test_irregular_quick_prints_the_three_models(capsys):
    """`python -m ssmts.bench irregular --quick`: one seed, a few steps, every model row."""
    from ssmts.bench import irregular as bench_irregular

    assert BENCHMARKS["irregular"] == "ssmts.bench.irregular"
    assert bench_main(["irregular", "--quick"]) == 0
    out = capsys.readouterr().out
    for model in bench_irregular.MODELS:
        assert re.search(rf"^{model}\s+\d+\.\d{{4}}", out, re.M), out


def test_irregular_windows_interpolate_the_context_and_place_the_targets():
    """The resample baseline's grid: context values are the linear interpolation of the observations,
    target positions are the targets' times in grid steps, and the deltas are the gaps in median units."""
    from ssmts.bench.irregular import windows

    t = np.array([0.0, 1.0, 1.5, 3.5, 4.0, 6.0, 6.5])
    y = 2.0 * t
    irregular, gaps, grid_in, positions, targets = windows(t, y, np.array([1]), 3, 2, 0.5, 6)
    assert np.allclose(gaps[0], np.diff(t[0:6]) / 0.5)
    assert np.allclose(irregular[0, 0], [2.0, 3.0, 7.0, 0.0, 0.0]) and np.allclose(irregular[0, 1], [1, 1, 1, 0, 0])
    assert np.allclose(grid_in[0, 0, :3], 2.0 * np.array([2.5, 3.0, 3.5]))  # grid 2.5, 3.0, 3.5 ending at t=3.5
    assert np.allclose(positions[0], (np.array([4.0, 6.0]) - 2.5) / 0.5) and np.allclose(targets[0], [8.0, 12.0])


@pytest.mark.slow
def test_classify_benchmark_runs_multirocket_hydra_and_drcif_on_equal_and_unequal_lengths():
    """The "mr-hydra" and "drcif" rows (aeon's); a ragged list is padded to the longest training series."""
    pytest.importorskip("aeon")
    from ssmts.bench import classify

    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 10)
    X = rng.standard_normal((20, 1, 40)) + y[:, None, None] * np.sin(np.arange(40) / 3)
    model = classify.make_model("mr-hydra", False, {}, 0).fit(X, y)
    assert (model.predict(X) == y).mean() > 0.9
    ragged = [x[:, : 30 + i % 10] for i, x in enumerate(X)]
    model = classify.make_model("mr-hydra", False, {}, 0).fit(ragged, y)
    assert model.length == 39 and model.predict([x[:, :50] for x in X[:3]]).shape == (3,)
    target = y + 0.1 * rng.standard_normal(20)
    assert classify.make_model("mr-hydra", True, {}, 0).fit(X, target).predict(X).shape == (20,)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # --threads 2: every row runs on 2 threads, the numba ones too
    try:
        assert classify.make_model("mr-hydra", False, {}, 0).estimator.n_jobs == 2
        assert classify.make_model("minirocket", False, {}, 0).fit(X, y).transform_.n_jobs == 2
    finally:
        torch.set_num_threads(threads)
    drcif = classify.make_model("drcif", True, {}, 0)
    drcif.estimator.set_params(n_estimators=5)
    assert np.corrcoef(drcif.fit(ragged, target).predict(ragged), target)[0, 1] > 0.5


def test_quant_row_is_aeons_default_forest_on_the_rows_threads():
    # the row hands QUANT an explicit forest only to give it threads: at 1 and 2 threads it must be
    # the very model aeon builds by default (same trees, same predictions of unseen series)
    pytest.importorskip("aeon")
    from aeon.classification.interval_based import QUANTClassifier
    from aeon.regression.interval_based import QUANTRegressor

    from ssmts.bench import classify

    rng = np.random.default_rng(1)
    y = np.arange(80) % 4
    X = rng.normal(size=(80, 2, 64)) + 0.3 * y[:, None, None] * np.cos(np.arange(64) / 4)
    X_new = X[:20] + rng.normal(size=(20, 2, 64))  # unseen series: grown trees memorize the training ones
    target = y + 0.3 * rng.standard_normal(80)
    proba = QUANTClassifier(random_state=3).fit(X, y).predict_proba(X_new)
    values = QUANTRegressor(random_state=3).fit(X, target).predict(X_new)
    threads = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            model = classify.make_model("quant", False, {}, 3)
            assert model.estimator.estimator.n_jobs == n
            # summed over the trees in the order the threads finish: equal to the last bits
            np.testing.assert_allclose(model.fit(X, y).estimator.predict_proba(X_new), proba, rtol=1e-12)
            regressor = classify.make_model("quant", True, {}, 3).fit(X, target)
            np.testing.assert_allclose(regressor.estimator.predict(X_new), values, rtol=1e-12)
    finally:
        torch.set_num_threads(threads)


def test_multirocket_hydra_transforms_in_batches_with_the_same_features():
    # aeon's Hydra convolves every series at once (out of memory for 3,000 clips of 4,000 steps);
    # the bench's baseline transforms 256 at a time: the features and the model must not change.
    pytest.importorskip("aeon")
    from aeon.classification.convolution_based import MultiRocketHydraClassifier
    from aeon.transformations.collection.convolution_based._hydra import HydraTransformer

    from ssmts.bench import classify

    X = np.random.default_rng(0).normal(size=(300, 1, 40))
    y = np.arange(300) % 3
    original = getattr(HydraTransformer._transform, "aeon_original", HydraTransformer._transform)
    try:
        HydraTransformer._transform = original
        whole = HydraTransformer(random_state=0).fit(X).transform(X)
        proba = MultiRocketHydraClassifier(random_state=0).fit(X, y).predict_proba(X)
        classify._hydra_in_batches()
        assert HydraTransformer._transform is not original
        batched = HydraTransformer(random_state=0).fit(X).transform(X)
        torch.testing.assert_close(batched, whole, rtol=0, atol=0)
        np.testing.assert_array_equal(MultiRocketHydraClassifier(random_state=0).fit(X, y).predict_proba(X), proba)
    finally:
        HydraTransformer._transform = original


def test_layer_runs_under_bf16_autocast_and_says_so(capsys):
    """--autocast bf16 (precision='bf16-mixed''s arithmetic): every model still gets a time, and the header
    names the setting; an unknown setting is refused."""
    assert bench_layer.main(["--quick", "--in-process", "--models", "ssm,lstm", "--autocast", "bf16"]) == 0
    out = capsys.readouterr().out
    assert "autocast=bf16" in out
    assert len(re.findall(r"^\s*(ssm|lstm)\s+\d+\s+16\s+\d+\s+\d+\.\d", out, flags=re.M)) == 4
    with pytest.raises(SystemExit):
        bench_layer.main(["--quick", "--autocast", "fp8"])
