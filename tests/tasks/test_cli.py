"""The `ssmts` command line: tasks list/show/run, error messages and exit codes, resume, demo."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ssmts.cli import main
from ssmts.tasks.registry import PTD_EXPERIMENTS, task_presets

from .task_names import TASK_NAMES

ROOT = Path(__file__).resolve().parents[2]
# Modules `ssmts tasks list` has no use for: the network, the estimators' libraries, the data stack.
HEAVY_MODULES = ("torch", "numpy", "scipy", "sklearn", "sktime", "pandas", "soundfile", "matplotlib")


pytestmark = pytest.mark.usefixtures("one_thread")


def _lines_by_task(text: str) -> dict[str, str]:
    return {line.split()[0]: line for line in text.splitlines() if line.split() and line.split()[0] in TASK_NAMES}


def test_tasks_list_names_every_task_with_description_and_status(capsys):
    assert main(["tasks", "list"]) == 0
    lines = _lines_by_task(capsys.readouterr().out)
    assert list(lines) == TASK_NAMES
    assert "can be synthesized" in lines["sc10"] and "Speech Commands" in lines["sc10"]
    assert "needs download" in lines["bidmc-spo2"]
    assert "regression" in lines["bidmc-rr"] and "rmse" in lines["bidmc-rr"]


def test_tasks_list_with_data_dir_reports_present_data(tmp_path, capsys):
    for name in ("BIDMC32RR_TRAIN.ts", "BIDMC32RR_TEST.ts"):
        (tmp_path / name).write_text("")
    assert main(["tasks", "list", "--data-dir", str(tmp_path)]) == 0
    lines = _lines_by_task(capsys.readouterr().out)
    assert " present " in lines["bidmc-rr"]
    assert "missing; can be synthesized" in lines["bidmc-hr"]
    assert "missing; needs download" in lines["bidmc-spo2"]


def test_tasks_list_says_when_the_data_directory_itself_is_absent(tmp_path, capsys):
    """Every task read 'missing' without a word that the directory does not exist (a typo in the path)."""
    assert main(["tasks", "list", "--data-dir", str(tmp_path / "typo")]) == 0
    assert f"Data directory: {tmp_path / 'typo'} does not exist" in capsys.readouterr().out
    (tmp_path / "a_file").write_text("")
    assert main(["tasks", "list", "--data-dir", str(tmp_path / "a_file")]) == 0
    assert "is a file, not a directory" in capsys.readouterr().out


def test_tasks_list_imports_neither_torch_nor_the_data_stack(tmp_path):
    """The registry is declarative: listing the tasks (and checking a data directory) loads no heavy module."""
    code = (
        "import sys; from ssmts.cli import main; "
        f"status = main(['tasks', 'list']) + main(['tasks', 'list', '--data-dir', {str(tmp_path)!r}]); "
        f"print(status, sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "0 []", result.stdout.splitlines()[-1]


def test_python_dash_m_ssmts_tasks_list_does_not_import_torch():
    """The console path itself (`python -m ssmts tasks list`): -X importtime names every module it imports."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ssmts", "tasks", "list"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "lra-listops" in result.stdout and "ptd-ablation" in result.stdout
    lines = [line for line in result.stderr.splitlines() if line.startswith("import time:")]
    imported = {line.rsplit("|", 1)[-1].strip() for line in lines}
    assert "ssmts.tasks.registry" in imported
    assert not {name for name in imported if name.split(".")[0] in HEAVY_MODULES}


def _shown_presets(name: str, capsys) -> list[str]:
    assert main(["tasks", "show", name]) == 0
    return re.findall(r"^  preset (\w+):", capsys.readouterr().out, re.MULTILINE)


def _run_preset_choices(capsys) -> set[str]:
    """What `ssmts tasks run --preset` offers, read from argparse's refusal of another value."""
    with pytest.raises(SystemExit) as exit_info:
        main(["tasks", "run", "sc10", "--synthetic", "--preset", "no-such-preset"])
    assert exit_info.value.code == 2
    return set(re.findall(r"[\w-]+", capsys.readouterr().err.split("choose from", 1)[1]))


def test_bidmc_show_lists_the_tiny_preset_that_run_offers(capsys):
    assert _shown_presets("bidmc-rr", capsys) == ["paper", "small", "tiny"]
    assert _run_preset_choices(capsys) == {"paper", "small", "tiny"}


@pytest.mark.parametrize("name", [*TASK_NAMES, *PTD_EXPERIMENTS])
def test_show_lists_exactly_the_presets_run_accepts(name, tmp_path, capsys):
    """One declaration (task_presets): `show` prints each of them, built; `run` refuses any other."""
    shown = _shown_presets(name, capsys)
    assert tuple(shown) == task_presets(name) and shown
    choices = _run_preset_choices(capsys)
    assert set(shown) <= choices
    for preset in sorted(choices - set(shown)):
        out = tmp_path / "r.json"
        assert main(["tasks", "run", name, "--synthetic", "--preset", preset, "--out", str(out)]) == 2
        assert f"no {preset!r} preset" in capsys.readouterr().err
        assert not out.exists()


def test_tasks_show_prints_layout_and_paper_preset(capsys):
    assert main(["tasks", "show", "lra-listops"]) == 0
    out = capsys.readouterr().out
    assert "listops-1000/basic_{train,val,test}.tsv" in out and "lra_release.gz" in out
    assert "preset paper: depth 6, heads 4, H 256, N 256" in out and "activation leaky_relu" in out


def test_unknown_task_exits_2_with_the_known_names(capsys):
    assert main(["tasks", "run", "sc11", "--synthetic"]) == 2
    err = capsys.readouterr().err
    assert "unknown task 'sc11'" in err and "did you mean" in err and "lra-listops" in err
    assert "Traceback" not in err


def test_missing_data_dir_exits_2_with_what_was_expected(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert main(["tasks", "run", "smnist", "--data-dir", str(missing), "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "train-images-idx3-ubyte" in err and "https://" in err
    assert "Traceback" not in err
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "r_config.json").exists()


def test_malformed_data_dir_names_the_bad_file(tmp_path, capsys):
    folder = tmp_path / "listops-1000"
    folder.mkdir()
    (folder / "basic_train.tsv").write_text("Expression,Label\n")
    for split in ("val", "test"):
        (folder / f"basic_{split}.tsv").write_text("Source\tTarget\n( [MAX 1 2 ] )\t2\n")
    assert main(["tasks", "run", "lra-listops", "--data-dir", str(tmp_path), "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "basic_train.tsv:1" in err and "Source<TAB>Target" in err


def test_synthetic_without_stand_in_exits_2(tmp_path, capsys):
    assert main(["tasks", "run", "bidmc-spo2", "--synthetic", "--out", str(tmp_path / "r.json")]) == 2
    assert "no synthetic stand-in" in capsys.readouterr().err


def test_run_needs_a_data_source(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["tasks", "run", "sc10"])
    assert exit_info.value.code == 2
    assert "--data-dir" in capsys.readouterr().err


def test_run_writes_results_history_and_resumes(tmp_path, capsys):
    out = tmp_path / "runs" / "results.json"
    base = ["tasks", "run", "sc10", "--synthetic", "--preset", "tiny", "--out", str(out), "--quiet"]
    assert main([*base, "--epochs", "1"]) == 0
    printed = capsys.readouterr().out
    assert "zero-shot change of sample rate" in printed and "half rate, Delta rescaled, decimated" in printed
    results = json.loads(out.read_text())
    for key in (
        "task",
        "preset",
        "data",
        "hyperparameters",
        "epochs",
        "best_val",
        "test_metric",
        "timings",
        "zero_shot",
    ):
        assert key in results
    assert results["data"]["source"].startswith("synthetic: espeak-ng")
    assert results["hyperparameters"]["d_model"] == 8 and results["epochs"]["completed"] == 1
    assert {row["delta_scale"] for row in results["zero_shot"]} == {1.0, 2.0}

    assert main([*base, "--epochs", "2", "--resume"]) == 0
    resumed = json.loads(out.read_text())
    assert resumed["epochs"] == {"requested": 2, "completed": 2, "resumed_from": 1}
    with open(out.with_name("results_history.csv"), newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["epoch"] for row in rows] == ["1", "2"]
    assert {"train_loss", "val_loss", "val_accuracy", "lr", "seconds"} <= set(rows[0])

    # A checkpoint is never continued under other settings.
    assert main([*base, "--epochs", "3", "--resume", "--seed", "7"]) == 2
    assert "other settings (seed differ)" in capsys.readouterr().err


def test_demo_quick_prints_the_zero_shot_table(capsys):
    assert main(["demo", "--quick", "--epochs", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "160 training / 20 validation / 20 test clips" not in out  # --quick keeps 2 clips per word
    assert "20 training / 20 validation / 20 test clips" in out
    assert "training at 1000 Hz" in out and "resampled (band-limited)" in out
    for condition in (
        "training rate",
        "half rate, Delta rescaled, decimated x[::2]",
        "half rate, Delta rescaled, resampled",
        "half rate, no rescaling, decimated x[::2]",
    ):
        assert condition in out
    assert "chance level: 10.0%" in out
    # The network beside the SSM features, each accuracy with its interval; MiniRocket is left out of --quick.
    assert "at 1000 Hz (95 % interval)" in out and "at 500 Hz (95 % interval)" in out
    assert "SSMClassifier (the network)" in out and "SSMFeatureClassifier(n_scales=2, n_kernels=4)" in out
    assert "MiniRocket" not in out
    assert "20 test clips" in out and "two accuracies less than 31.0 points apart are within noise" in out


def test_demo_quick_keeps_2_clips_per_word_on_a_data_dir_too(capsys):
    from ssmts.data.speech import default_spoken_commands_dir

    assert main(["demo", "--quick", "--epochs", "1", "--quiet", "--data-dir", str(default_spoken_commands_dir())]) == 0
    assert "20 training / 20 validation / 20 test clips" in capsys.readouterr().out


def test_demo_with_a_missing_data_dir_exits_2(tmp_path, capsys):
    assert main(["demo", "--quick", "--data-dir", str(tmp_path / "speech")]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "speech") in err and "validation_list.txt" in err and "Traceback" not in err


def test_demo_rejects_an_odd_rate(capsys):
    assert main(["demo", "--quick", "--rate", "3001"]) == 2
    assert "even integer" in capsys.readouterr().err


def test_python_dash_m_ssmts_runs_the_cli():
    result = subprocess.run(
        [sys.executable, "-m", "ssmts", "tasks", "show", "bidmc-spo2"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "red to infrared" in result.stdout
