"""`python -m ssmts.bench scale`: stratified subsets, resumable rows, the report's crossovers, the plot."""

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from ssmts.bench import scale

TINY = '{"max_epochs": 1, "min_steps": 0, "d_model": 8, "d_state": 4, "n_layers": 1}'


def test_subsets_are_stratified_exact_and_seeded():
    y = np.repeat(np.arange(4), [50, 30, 10, 10])
    index = scale.subset(y, 20, seed=0)
    assert len(index) == 20 and len(set(index)) == 20
    assert np.bincount(y[index]).tolist() == [5, 5, 5, 5]
    small = scale.subset(y, 90, seed=0)  # the small classes run out: the rest from the others
    assert np.bincount(y[small]).tolist() == [40, 30, 10, 10]
    np.testing.assert_array_equal(scale.subset(y, 20, seed=0), index)
    assert not np.array_equal(scale.subset(y, 20, seed=1), index)
    with pytest.raises(ValueError, match="asked for 200 training series but the task's pool has 100"):
        scale.subset(y, 200, seed=0)


def test_one_hot_tokens_leave_padding_at_zero():
    X = np.array([[3, 1, 15, 0, 0]])
    out = scale._one_hot_tokens(X)
    assert out.shape == (1, 15, 5)
    assert out[0, 2, 0] == 1 and out[0, 0, 1] == 1 and out[0, 14, 2] == 1
    assert out[0, :, 3:].sum() == 0 and out.sum() == 3


def _row(task, model, n, seed, accuracy, **extra):
    return dict(task=task, model=model, n=n, seed=seed, accuracy=accuracy, fit_seconds=1.0, **extra)


def test_crossover_is_the_first_size_from_which_the_network_stays_ahead():
    rows = []
    for n, ssm, best_other in [
        (100, 0.5, 0.6),
        (300, 0.7, 0.65),
        (1000, 0.6, 0.7),
        (3000, 0.9, 0.8),
        (10000, 0.95, 0.8),
    ]:
        for seed in (0, 1):
            rows += [_row("t", "ssm", n, seed, ssm), _row("t", "quant", n, seed, best_other)]
            rows.append(_row("t", "minirocket", n, seed, best_other - 0.1))
    summary = scale.summarize(rows)
    assert scale.crossovers(summary) == {"t": 3000}  # ahead at 300, behind again at 1000
    rows_behind = [r for r in rows if r["n"] == 100]
    assert scale.crossovers(scale.summarize(rows_behind)) == {"t": None}


def test_each_seed_has_its_own_crossover_in_the_report():
    rows = []
    for n, ssm_by_seed, other in [(100, (0.5, 0.5), 0.6), (300, (0.7, 0.5), 0.6), (1000, (0.8, 0.7), 0.6)]:
        for seed in (0, 1):
            rows += [_row("t", "ssm", n, seed, ssm_by_seed[seed])]
            rows += [_row("t", m, n, seed, other) for m in scale.TRAINING_FREE]
    assert scale.crossovers(scale.summarize(rows)) == {"t": 1000}  # the means: 0.6 = 0.6 at 300
    assert scale.crossovers_by_seed(rows) == {"t": {0: 300, 1: 1000}}
    assert "each seed alone: seed 0 from n = 300, seed 1 from n = 1000" in scale.format_report(rows)
    behind = [r for r in rows if not (r["seed"] == 1 and r["n"] == 1000 and r["model"] == "ssm")]
    behind.append(_row("t", "ssm", 1000, 1, 0.5))
    assert scale.crossovers_by_seed(behind)["t"] == {0: 300, 1: None}
    assert "seed 1 never" in scale.format_report(behind)
    no_quant_seed_1 = [r for r in rows if not (r["seed"] == 1 and r["model"] == "quant")]
    assert "seed 1 from n = 1000 (not measured there: quant at n = 1000)" in scale.format_report(no_quant_seed_1)


def test_the_report_names_the_training_free_rows_a_crossover_was_not_checked_against():
    rows = [_row("t", "ssm", n, 0, 0.5 if n == 100 else 0.9) for n in (100, 1000)]
    rows += [_row("t", m, 100, 0, 0.6) for m in scale.TRAINING_FREE] + [_row("t", "features", 1000, 0, 0.7)]
    report = scale.format_report(rows)
    assert "t: the network is ahead of every training-free row measured from n = 1000 on" in report
    assert "not measured there: minirocket at n = 1000; mr-hydra at n = 1000; quant at n = 1000" in report
    complete = rows + [_row("t", m, 1000, 0, 0.7) for m in ("minirocket", "mr-hydra", "quant")]
    assert "not measured" not in scale.format_report(complete)


def test_summary_averages_seeds_and_gives_their_spread():
    rows = [_row("t", "ssm", 100, 0, 0.5, test_half_rate=0.4), _row("t", "ssm", 100, 1, 0.7, test_half_rate=0.6)]
    s = scale.summarize(rows)[("t", "ssm", 100)]
    assert s["accuracy"] == pytest.approx(0.6) and s["spread"] == pytest.approx(0.2) and s["seeds"] == 2
    assert s["half_rate"] == pytest.approx(0.5)
    validation = [_row("t", "ssm", 100, 0, 0.9, split="validation", validation_half_rate=0.8)]
    assert scale.summarize(rows + validation)[("t", "ssm", 100)]["accuracy"] == pytest.approx(0.6)
    v = scale.summarize(rows + validation, "validation")[("t", "ssm", 100)]
    assert v["accuracy"] == pytest.approx(0.9) and v["half_rate"] == pytest.approx(0.8)
    with pytest.raises(ValueError, match=r"t ssm n=100: seed\(s\) \[1\] have more than one test row"):
        scale.summarize(rows + [_row("t", "ssm", 100, 1, 0.9)])


def test_a_network_of_other_settings_than_the_preset_is_summarized_as_its_own_model():
    preset = dict(scale.PRESETS["listops"].params)
    rows = [
        _row("listops", "ssm", 100, 0, 0.30, params=preset, own_lengths=True),
        _row("listops", "ssm", 100, 1, 0.40, params=dict(preset, bidirectional=True), own_lengths=True),
        _row("listops", "ssm", 100, 2, 0.50, params=preset),  # written before the key: read the padding
        _row("listops", "ssm", 100, 3, 0.60, params=dict(preset, dropout=0.0), own_lengths=True),  # the default
        _row("listops", "features", 100, 0, 0.20),
    ]
    summary = scale.summarize(rows)
    assert {key[1]: s["accuracy"] for key, s in summary.items()} == {
        "ssm": pytest.approx(0.45),  # seeds 0 and 3: dropout=0.0 is SSMClassifier's default, the same network
        "ssm (bidirectional=True)": 0.40,
        "ssm (padded)": 0.50,
        "features": 0.20,
    }
    assert scale.crossovers(summary) == {  # the preset's rows alone decide the task's; each other network its own
        "listops": 100,
        "listops, ssm (bidirectional=True)": 100,
        "listops, ssm (padded)": 100,
    }


def test_the_speech_preset_takes_at_most_max_3000_n_steps_and_a_row_is_named_by_its_own_n():
    speech, listops = scale.PRESETS["speech"], scale.PRESETS["listops"]
    assert [speech.params_for(n)["max_steps"] for n in (100, 3000, 10000)] == [3000, 3000, 10000]
    assert listops.params_for(10000) == listops.params  # the other tasks keep their cap
    capped = dict(speech.params_for(10000), max_steps=3000)
    rows = [
        _row("speech", "ssm", 1000, 0, 0.7, params=speech.params_for(1000)),
        _row("speech", "ssm", 10000, 0, 0.9, params=speech.params_for(10000)),
        _row("speech", "ssm", 10000, 1, 0.8, params=capped),  # the preset before the cap grew with n
        _row("speech-2000hz", "ssm", 10000, 0, 0.85, params=dict(speech.params_for(10000), sample_rate=2000)),
    ]
    assert [scale._model_of(row) for row in rows] == ["ssm", "ssm", "ssm (max_steps=3000)", "ssm"]
    parser = argparse.ArgumentParser()
    scale._refuse_other_network_settings(parser, rows[:2], "speech", speech.params_for, "rows.jsonl")
    with pytest.raises(SystemExit):
        scale._refuse_other_network_settings(parser, rows[:3], "speech", speech.params_for, "rows.jsonl")


def test_a_run_writes_a_row_per_fit_resumes_and_reports(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(scale, "POOL_SIZES", {})  # a pool of 12 images, not 3,000
    monkeypatch.setattr(scale, "PATHFINDER_BLOCK", 12)
    out = tmp_path / "rows.jsonl"
    argv = [
        "--tasks", "pathfinder", "--sizes", "12", "--seeds", "0", "--models", "features", "ssm",
        "--test-size", "10", "--params", TINY, "--threads", "1", "--out", str(out),
    ]  # fmt: skip
    assert scale.main(argv) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["task"], r["model"], r["n"], r["seed"]) for r in rows] == [
        ("pathfinder", "features", 12, 0),
        ("pathfinder", "ssm", 12, 0),
    ]
    for row in rows:
        assert 0 <= row["accuracy"] <= 1 and row["n_test"] == 10 and row["threads"] == 1
    assert rows[1]["params"]["d_model"] == 8  # the override is recorded
    assert scale.main(argv) == 0  # resumed: nothing left to run
    assert len(out.read_text().splitlines()) == 2
    assert scale.main([*argv[:-2], "--models", "features", "--out", str(out), "--validation"]) == 0
    validation = json.loads(out.read_text().splitlines()[-1])
    assert validation["split"] == "validation" and validation["model"] == "features"
    capsys.readouterr()
    assert scale.main(["--out", str(out), "--report", "--plot", str(tmp_path / "curves.png")]) == 0
    report = capsys.readouterr().out
    # --params gave another network than the preset's: named by the settings it changes, crossover included
    network = "ssm (d_model=8, d_state=4, max_epochs=1, min_steps=0, n_layers=1)"
    assert f"| pathfinder | {network} | 12 | 1 |" in report
    assert report.index("Validation splits") < report.index(
        "| pathfinder | features | 12 | 1 |", report.index("Validation")
    )
    assert f"pathfinder, {network}: the network is ahead" in report or f"pathfinder, {network}: no crossover" in report
    assert (tmp_path / "curves.png").stat().st_size > 1000


def test_one_fit_scored_on_both_splits_gives_a_row_each_as_separate_runs_would(tmp_path, monkeypatch):
    monkeypatch.setattr(scale, "POOL_SIZES", {})
    monkeypatch.setattr(scale, "PATHFINDER_BLOCK", 12)
    fits = []
    real = scale.run_row
    monkeypatch.setattr(scale, "run_row", lambda *a, **k: fits.append(a[7]) or real(*a, **k))
    common = [
        "--tasks", "pathfinder", "--sizes", "12", "--seeds", "0", "--models", "ssm",
        "--test-size", "10", "--params", TINY, "--threads", "1",
    ]  # fmt: skip
    both, apart = tmp_path / "both.jsonl", tmp_path / "apart.jsonl"
    assert scale.main([*common, "--out", str(both), "--splits", "validation", "test"]) == 0
    rows = [json.loads(line) for line in both.read_text().splitlines()]
    assert [r["split"] for r in rows] == ["validation", "test"] and fits == [["validation", "test"]]
    assert rows[0]["fit_seconds"] == rows[1]["fit_seconds"]  # one fit
    assert scale.main([*common, "--out", str(apart), "--validation"]) == 0
    assert scale.main([*common, "--out", str(apart)]) == 0
    separate = [json.loads(line) for line in apart.read_text().splitlines()]
    assert [r["accuracy"] for r in separate] == [r["accuracy"] for r in rows]
    fits.clear()
    assert scale.main([*common, "--out", str(apart), "--splits", "test", "validation"]) == 0
    assert fits == [] and len(apart.read_text().splitlines()) == 2  # both rows there: nothing fitted
    with pytest.raises(SystemExit):
        scale.main([*common, "--out", str(apart), "--splits", "test", "--validation"])


def test_own_lengths_cuts_each_series_after_its_last_nonzero_step():
    X = np.zeros((3, 2, 6), dtype=np.float32)
    X[0, 0, [0, 3]] = 1.0  # a zero step inside is kept: length 4
    X[1, 1, 5] = 2.0  # no padding: length 6
    parts = scale.own_lengths(X)
    assert [p.shape for p in parts] == [(2, 4), (2, 6), (2, 1)]  # an all-zero series keeps one step
    np.testing.assert_array_equal(parts[0], X[0, :, :4])


def test_the_network_reads_listops_at_its_own_lengths_and_the_baselines_padded(tmp_path, monkeypatch):
    """The ListOps preset's network reads each expression at its own length; --padded gives it the padding."""
    from ssmts.bench import classify

    seen = {}
    real = classify.make_model

    def recording(kind, *args, **kwargs):
        model = real(kind, *args, **kwargs)
        fit = model.fit

        def fit_recorded(X, y):
            seen[kind] = X
            return fit(X, y)

        model.fit = fit_recorded
        return model

    monkeypatch.setattr(classify, "make_model", recording)
    out = tmp_path / "rows.jsonl"
    argv = [
        "--tasks", "listops", "--sizes", "20", "--seeds", "0", "--models", "ssm", "minirocket",
        "--listops-length", "40", "--test-size", "10", "--params", TINY, "--threads", "1", "--out", str(out),
    ]  # fmt: skip
    monkeypatch.setattr(scale, "POOL_SIZES", {})
    assert scale.main(argv) == 0
    rows = {r["model"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert rows["ssm"]["own_lengths"] is True and "own_lengths" not in rows["minirocket"]
    assert isinstance(seen["ssm"], list) and isinstance(seen["minirocket"], np.ndarray)
    lengths = [x.shape[-1] for x in seen["ssm"]]
    assert min(lengths) >= 10 and max(lengths) <= 40 and len(set(lengths)) > 1  # lengths 10-40, unequal
    padded = seen["minirocket"]
    for x, cut in zip(padded, seen["ssm"]):
        np.testing.assert_array_equal(x[:, : cut.shape[-1]], cut)
        assert not x[:, cut.shape[-1] :].any()  # what was cut is padding
    seen.clear()
    padded_out = tmp_path / "padded.jsonl"
    assert scale.main([*argv[:-2], "--models", "ssm", "--padded", "--out", str(padded_out)]) == 0
    (row,) = map(json.loads, padded_out.read_text().splitlines())
    assert row["own_lengths"] is False and isinstance(seen["ssm"], np.ndarray) and seen["ssm"].shape[-1] == 40
    with pytest.raises(SystemExit):  # padded rows into the file of the preset's: refused, not mixed
        scale.main([*argv[:-2], "--models", "ssm", "--padded", "--out", str(out)])
    with pytest.raises(SystemExit):  # and the other way round
        scale.main([*argv[:-2], "--models", "ssm", "--out", str(padded_out)])
    for argv_padded in (["--tasks", "pathfinder"], ["--tasks", "listops", "--models", "quant"]):
        with pytest.raises(SystemExit):  # the flag would do nothing
            scale.main([*argv_padded, "--padded", "--out", str(out)])


def test_speech_at_another_rate_is_its_own_task_scored_zero_shot_at_half_that_rate(tmp_path, monkeypatch):
    from ssmts.data.speech import default_spoken_commands_dir

    seen = []
    real = scale.run_row
    monkeypatch.setattr(scale, "run_row", lambda *a, **k: seen.append(a) or real(*a, **k))
    out = tmp_path / "rows.jsonl"
    argv = [
        "--tasks", "speech", "--speech-dir", str(default_spoken_commands_dir()), "--speech-rate", "2000",
        "--sizes", "10", "--seeds", "0", "--models", "features", "--threads", "1", "--out", str(out),
    ]  # fmt: skip
    assert scale.main(argv) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["task"] == "speech-2000hz" and row["n_test"] == 400 and 0 <= row["test_half_rate"] <= 1
    (args,) = seen
    data = args[2]
    assert data.rate == 2000 and data.splits["test"].X.shape[-1] == 2000  # one-second clips at 2 kHz
    assert len(data.splits["validation"].y) == 40
    X_half, _, half = data.splits["test"].conditions["half_rate"]
    assert half == 1000 and X_half.shape[-1] == 1000
    assert args[5] == {"sample_rate": 2000}  # the network would be told the rate
    with pytest.raises(SystemExit):
        scale.main([*argv[:4], "--speech-rate", "50", "--out", str(out)])


def test_a_larger_speech_corpus_gives_the_same_test_set_and_a_pool_that_starts_with_the_smaller(tmp_path):
    import shutil

    from ssmts.data.speech_corpus import make_corpus

    if shutil.which("espeak-ng") is None:
        pytest.skip("needs espeak-ng (apt-get install espeak-ng)")
    sizes = {}
    for per_word in (1, 2):
        make_corpus(tmp_path / f"c{per_word}", "sc10", per_word, 1, 1, seed=3, jobs=1, progress=False)
        sizes[per_word] = scale.load_speech(tmp_path / f"c{per_word}", 10 * per_word, rate=1000)
    small, large = sizes[1], sizes[2]
    assert large.y_pool[:10].tolist() == small.y_pool.tolist() == list(range(10))  # k = 0 of every word first
    np.testing.assert_array_equal(large.X_pool[:10], small.X_pool)
    np.testing.assert_array_equal(large.splits["test"].X, small.splits["test"].X)
    assert large.y_pool[10:].tolist() == list(range(10)) and not np.array_equal(large.X_pool[10:], small.X_pool)


@pytest.mark.parametrize("loader", [scale.load_listops, scale.load_pathfinder])
def test_the_generated_tasks_held_out_sets_do_not_depend_on_the_pool_size(loader, monkeypatch):
    monkeypatch.setattr(scale, "PATHFINDER_BLOCK", 10)
    make = (lambda n: loader(n, 60, n_test=6)) if loader is scale.load_listops else (lambda n: loader(n, n_test=6))
    small, large = make(10), make(30)
    for split in ("test", "validation"):
        np.testing.assert_array_equal(small.splits[split].X, large.splits[split].X)
        np.testing.assert_array_equal(small.splits[split].y, large.splits[split].y)
    np.testing.assert_array_equal(small.X_pool, large.X_pool[:10])  # the pool grows at its end
    np.testing.assert_array_equal(small.y_pool, large.y_pool[:10])
    assert len(large.y_pool) == 30 and not np.array_equal(large.X_pool[:10], large.X_pool[10:20])
    pool = {x.tobytes() for x in large.X_pool}
    held = [x.tobytes() for split in ("test", "validation") for x in large.splits[split].X]
    assert not pool & set(held) and len(set(held)) == len(held)  # no series both trained on and scored


def test_pathfinder_images_are_kept_and_read_back_from_the_cache(tmp_path, monkeypatch):
    from ssmts.data import pathfinder_synth

    monkeypatch.setattr(scale, "PATHFINDER_BLOCK", 8)
    drawn = scale.load_pathfinder(12, n_test=4, seed=3)
    kept = scale.load_pathfinder(12, n_test=4, seed=3, cache_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "pathfinder32-3-0-4.npz", "pathfinder32-3-1-4.npz", "pathfinder32-3-2-1-8.npz", "pathfinder32-3-2-8.npz",
    ]  # fmt: skip

    def no_drawing(*args, **kwargs):
        raise AssertionError("the images should have been read from the cache")

    monkeypatch.setattr(pathfinder_synth, "generate_pathfinder", no_drawing)
    read = scale.load_pathfinder(12, n_test=4, seed=3, cache_dir=tmp_path)
    for data in (kept, read):
        np.testing.assert_array_equal(data.X_pool, drawn.X_pool)
        np.testing.assert_array_equal(data.y_pool, drawn.y_pool)
        for split in ("test", "validation"):
            np.testing.assert_array_equal(data.splits[split].X, drawn.splits[split].X)
            np.testing.assert_array_equal(data.splits[split].y, drawn.splits[split].y)
    assert drawn.X_pool.shape == (12, 1, 1024) and drawn.X_pool.dtype == np.float32 and drawn.X_pool.max() <= 1
    np.savez(tmp_path / "pathfinder32-3-0-4.npz", pixels=np.zeros((3, 1024), np.uint8), labels=np.zeros(3))
    with pytest.raises(ValueError, match="does not hold 4 Pathfinder images of 32 x 32: delete it"):
        scale.load_pathfinder(12, n_test=4, seed=3, cache_dir=tmp_path)


def test_a_size_draws_from_the_task_pool_whatever_the_largest_size_of_the_command(monkeypatch):
    # rows of one size from commands with different largest sizes are the same measurement
    y = np.arange(40) % 2
    data = scale.ScaleData(
        np.arange(40, dtype=np.float32)[:, None, None], y, {"test": scale.HeldOut(np.zeros((2, 1, 1)), y[:2])}
    )
    fitted = []

    class Recorder:
        def fit(self, X, y):
            fitted.append(X[:, 0, 0].astype(int).tolist())
            return self

        def predict(self, X):
            return np.zeros(len(X), dtype=int)

    monkeypatch.setattr("ssmts.bench.classify.make_model", lambda *args: Recorder())
    monkeypatch.setattr(scale, "POOL_SIZES", {"pathfinder": 20})
    scale.run_row("pathfinder", "minirocket", data, 6, 0)
    scale.run_row("pathfinder", "minirocket", scale.ScaleData(data.X_pool[:20], y[:20], data.splits), 6, 0)
    scale.run_row("pathfinder", "minirocket", data, 30, 0)
    assert fitted[0] == fitted[1] and max(fitted[0]) < 20
    assert len(fitted[2]) == 30 and max(fitted[2]) >= 20  # beyond the task's pool: the whole pool


def test_network_rows_of_other_settings_are_refused_before_any_fit_and_no_fit_is_dropped_unseen(
    tmp_path, monkeypatch, capsys
):
    """A file holds one network a task: rows of another --params would count as done (nothing fitted,
    exit 0) and the report would average the two networks."""
    monkeypatch.setattr(scale, "POOL_SIZES", {})
    monkeypatch.setattr(scale, "PATHFINDER_BLOCK", 12)
    out = tmp_path / "rows.jsonl"
    common = [
        "--tasks", "pathfinder", "--sizes", "12", "--seeds", "0", "--test-size", "10", "--threads", "1",
        "--out", str(out),
    ]  # fmt: skip
    assert scale.main([*common, "--models", "ssm", "--params", TINY]) == 0
    fits = []
    real = scale.run_row
    monkeypatch.setattr(scale, "run_row", lambda *a, **k: fits.append(a[1]) or real(*a, **k))
    other = json.dumps(dict(json.loads(TINY), d_model=4))
    with pytest.raises(SystemExit):
        scale.main([*common, "--models", "features", "ssm", "--params", other])
    assert "d_model: 8 there, 4 now" in capsys.readouterr().err and fits == []
    assert scale.main([*common, "--models", "features", "--params", other]) == 0  # no network row asked
    assert fits == ["features"]
    assert scale.main([*common, "--models", "ssm", "--params", TINY]) == 0 and fits == ["features"]  # done

    def another_command_writes_it_first(*a, **k):
        rows = real(*a, **k)
        with open(out, "a") as f:
            f.write(json.dumps(rows[0]) + "\n")
        return rows

    monkeypatch.setattr(scale, "run_row", another_command_writes_it_first)
    capsys.readouterr()
    assert scale.main([*common, "--models", "features", "--validation"]) == 0
    printed = capsys.readouterr().out
    assert "not written" in printed and '"split": "validation"' in printed
    assert len(out.read_text().splitlines()) == 3  # the other command's row only


def test_bad_requests_are_refused(tmp_path):
    with pytest.raises(SystemExit):
        scale.main(["--tasks", "speech", "--out", str(tmp_path / "x.jsonl")])  # no --speech-dir
    with pytest.raises(SystemExit):
        scale.main(["--sizes", "5", "--tasks", "listops", "--out", str(tmp_path / "x.jsonl")])
    with pytest.raises(SystemExit):
        scale.main(["--report", "--out", str(tmp_path / "empty.jsonl")])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task": "t"}\nnot json\n')
    with pytest.raises(ValueError, match="line 2: not a JSON row"):
        scale.read_rows(bad)


def _three_classes_with_half_rate():
    """90 series of 2 x 48 steps in 3 classes: the first 60 the pool, the last 30 the test split with
    its half-rate copy (1000 Hz -> 500 Hz). Returns X, y, the half-rate copy and the ScaleData."""
    rng = np.random.default_rng(0)
    y = np.arange(90) % 3
    X = rng.normal(size=(90, 2, 48)).astype(np.float32) + 0.4 * y[:, None, None] * np.sin(np.arange(48) / 3)
    half = X[60:, :, ::2]
    data = scale.ScaleData(
        X[:60], y[:60], {"test": scale.HeldOut(X[60:], y[60:], {"half_rate": (half, y[60:], 500)})}, rate=1000
    )
    return X, y, half, data


def test_quant_in_chunks_is_the_mean_vote_of_its_seeded_chunks_and_resumes(tmp_path, monkeypatch):
    """--work-dir: QUANT's trees grown chunk by chunk, each chunk's class probabilities kept; the
    prediction is the class of the highest mean probability over the chunks (oracle: sklearn forests
    of the documented seeds on aeon's transform). A stopped fit continues with the missing chunks only."""
    pytest.importorskip("aeon")
    from aeon.transformations.collection.interval_based import QUANTTransformer
    from sklearn.ensemble import ExtraTreesClassifier

    monkeypatch.setattr(scale, "QUANT_TREES", 12)
    monkeypatch.setattr(scale, "QUANT_CHUNKS", 3)
    X, y, half, data = _three_classes_with_half_rate()
    [row] = scale.run_row("t", "quant", data, 30, 1, work_dir=tmp_path)
    assert row["tree_chunks"] == 3 and row["n"] == 30 and row["fit_seconds"] > 0 and row["predict_seconds"] > 0

    index = scale.subset(y[:60], 30, 1)
    transform = QUANTTransformer().fit(X[:1])
    from ssmts.nn.resampling import change_rate

    held = {"": X[60:], "half_rate": change_rate(half, 500, 1000, method="resample")}
    mean = {name: 0.0 for name in held}
    for chunk in range(3):
        forest = ExtraTreesClassifier(4, max_features=0.1, criterion="entropy", random_state=1 * 3 + chunk)
        forest.fit(transform.transform(X[index]), y[index])
        for name, inputs in held.items():
            mean[name] = mean[name] + forest.predict_proba(transform.transform(inputs))
    _, _, predicted = scale._quant_in_chunks(data, index, 1, "test", tmp_path / "direct")
    for name in held:
        np.testing.assert_array_equal(predicted[name], np.argmax(mean[name], 1))
    assert row["accuracy"] == pytest.approx(np.mean(np.argmax(mean[""], 1) == y[60:]))
    assert row["test_half_rate"] == pytest.approx(np.mean(np.argmax(mean["half_rate"], 1) == y[60:]))

    work = tmp_path / "quant-t-30-1-test"
    (work / "chunk-1.npz").unlink()  # as if stopped before its second chunk was saved
    grown = []
    real = scale._quant_in_chunks.__globals__["np"].savez
    monkeypatch.setattr(np, "savez", lambda path, **arrays: grown.append(Path(path).name) or real(path, **arrays))
    [again] = scale.run_row("t", "quant", data, 30, 1, work_dir=tmp_path)
    assert grown == ["chunk-1.partial.npz"] and again["accuracy"] == row["accuracy"]
    other = scale.ScaleData(X[:60] + 1, y[:60], data.splits, rate=1000)
    with pytest.raises(ValueError, match="holds the work of other training series"):
        scale.run_row("t", "quant", other, 30, 1, work_dir=tmp_path)


def test_a_chunk_claim_holds_while_its_process_runs_and_passes_on_when_it_has_stopped(tmp_path):
    import os
    import subprocess
    import sys

    claim = tmp_path / "chunk-0.claim"
    assert scale._claim(claim) and claim.read_text() == str(os.getpid())
    assert scale._claim(claim)  # this process's own claim
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        claim.write_text(str(other.pid))
        assert not scale._claim(claim)  # alive: its chunk is left to it
    finally:
        other.kill()
        other.wait()
    assert scale._claim(claim) and claim.read_text() == str(os.getpid())  # stopped: taken over


def test_mr_hydra_in_pieces_is_aeons_model_and_resumes(tmp_path, monkeypatch):
    """--work-dir: MultiRocket-Hydra's transforms kept piece by piece are aeon's classifier exactly (oracle:
    MultiRocketHydraClassifier fitted in one go, its predictions on the split and on its half-rate copy
    resampled back); a stopped fit makes its missing pieces only; other training series are refused."""
    pytest.importorskip("aeon")
    from aeon.classification.convolution_based import MultiRocketHydraClassifier

    from ssmts.nn.resampling import change_rate

    monkeypatch.setattr(scale, "MR_HYDRA_PIECE", 7)
    X, y, half, data = _three_classes_with_half_rate()
    [row] = scale.run_row("t", "mr-hydra", data, 30, 1, work_dir=tmp_path)
    assert row["n"] == 30 and row["fit_seconds"] > 0 and row["predict_seconds"] > 0 and "tree_chunks" not in row

    index = scale.subset(y[:60], 30, 1)
    reference = MultiRocketHydraClassifier(random_state=1, n_jobs=1).fit(X[index], y[index])
    predicted = reference.predict(X[60:])
    at_half = reference.predict(change_rate(half, 500, 1000, method="resample"))
    assert 0.5 < np.mean(predicted == y[60:]) < 1  # a task where the model's choices show
    assert row["accuracy"] == pytest.approx(np.mean(predicted == y[60:]))
    assert row["test_half_rate"] == pytest.approx(np.mean(at_half == y[60:]))
    _, _, pieces = scale._mr_hydra_in_pieces(data, index, 1, ["test"], tmp_path / "direct")
    np.testing.assert_array_equal(pieces["test", ""], predicted)
    np.testing.assert_array_equal(pieces["test", "half_rate"], at_half)

    work = tmp_path / "mr-hydra-t-30-1"
    assert sorted(path.name for path in work.glob("train-*.npz")) == [f"train-{i}.npz" for i in (0, 14, 21, 28, 7)]
    for name in ("train-14.npz", "model-test.npz"):  # as if stopped before these were saved
        (work / name).unlink()
    made = []
    real = np.savez
    monkeypatch.setattr(np, "savez", lambda path, **arrays: made.append(Path(path).name) or real(path, **arrays))
    [again] = scale.run_row("t", "mr-hydra", data, 30, 1, work_dir=tmp_path)
    assert made == ["train-14.partial.npz", "model-test.partial.npz"] and again["accuracy"] == row["accuracy"]
    other = scale.ScaleData(X[:60] + 1, y[:60], data.splits, rate=1000)
    with pytest.raises(ValueError, match="holds the work of other training series"):
        scale.run_row("t", "mr-hydra", other, 30, 1, work_dir=tmp_path)
