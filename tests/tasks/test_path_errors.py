"""Paths the user names that cannot be used (a symlink loop, an --out that cannot be written): one
clear message naming the option and the path, before any work."""

from __future__ import annotations

import errno
import os
import re
import tempfile
from pathlib import Path

import pytest

from ssmts.cli import EXIT_IO, main

pytestmark = pytest.mark.usefixtures("one_thread")


def _loop(tmp_path: Path) -> Path:
    (tmp_path / "loop_a").symlink_to(tmp_path / "loop_b")
    (tmp_path / "loop_b").symlink_to(tmp_path / "loop_a")
    return tmp_path / "loop_a"


def _a_file(tmp_path: Path) -> Path:
    path = tmp_path / "a_file"
    path.write_text("not a directory")
    return path


def _unwritable_dir() -> Path | None:
    """A directory that refuses new files even to root (sysfs), or None where there is none."""
    try:
        handle, name = tempfile.mkstemp(dir="/sys")
    except OSError:
        return Path("/sys") if Path("/sys").is_dir() else None
    os.close(handle)
    os.unlink(name)
    return None


RUN = ["tasks", "run", "bidmc-rr", "--preset", "tiny", "--quiet"]


@pytest.mark.parametrize(
    "args, option",
    [
        (lambda loop, tmp: [*RUN, "--data-dir", str(loop)], "--data-dir"),
        (lambda loop, tmp: [*RUN, "--data-dir", str(loop / "inside")], "--data-dir"),
        (lambda loop, tmp: ["tasks", "list", "--data-dir", str(loop)], "--data-dir"),
        (lambda loop, tmp: ["demo", "--quick", "--quiet", "--data-dir", str(loop)], "--data-dir"),
        (
            lambda loop, tmp: [*RUN, "--synthetic", "--cache-dir", str(loop), "--out", str(tmp / "r.json")],
            "--cache-dir",
        ),
        (lambda loop, tmp: [*RUN, "--synthetic", "--out", str(loop / "results.json")], "--out"),
        (lambda loop, tmp: [*RUN, "--synthetic", "--out", str(loop.parent / "loop_b" / "deeper" / "r.json")], "--out"),
        (
            lambda loop, tmp: ["tasks", "run", "ptd-sinusoids", "--preset", "tiny", "--out", str(loop / "r.json")],
            "--out",
        ),
    ],
    ids=[
        "run --data-dir",
        "a path under the loop",
        "list --data-dir",
        "demo --data-dir",
        "--cache-dir",
        "--out",
        "--out deeper",
        "ptd --out",
    ],
)
def test_a_symlink_loop_is_named_with_its_option(args, option, tmp_path, capsys):
    loop = _loop(tmp_path)
    assert main(args(loop, tmp_path)) == EXIT_IO
    captured = capsys.readouterr()
    assert option in captured.err and "symbolic link loop" in captured.err, captured.err
    assert str(tmp_path / "loop_") in captured.err  # the link in the loop, by its path
    assert "building the synthetic stand-in" not in captured.out  # refused before any work


@pytest.mark.parametrize("task", ["bidmc-rr", "lra-pathfinder"])
def test_a_symlink_loop_in_the_cache_dir_variable_is_named_like_the_option(task, tmp_path, capsys, monkeypatch):
    loop = _loop(tmp_path)
    monkeypatch.setenv("SSMTS_CACHE_DIR", str(loop / "cache"))
    args = ["tasks", "run", task, "--synthetic", "--preset", "tiny", "--quiet", "--out", str(tmp_path / "r.json")]
    assert main(args) == EXIT_IO
    captured = capsys.readouterr()
    assert f"$SSMTS_CACHE_DIR {loop / 'cache'}: {loop} is a symbolic link loop" in captured.err, captured.err
    assert "point $SSMTS_CACHE_DIR at the real location" in captured.err
    assert "building the synthetic stand-in" not in captured.out  # refused before any work, as --cache-dir is


def test_the_cache_dir_option_overrides_the_variable(tmp_path, monkeypatch):
    """A --cache-dir replaces $SSMTS_CACHE_DIR, so a loop in the variable is not in the way."""
    monkeypatch.setenv("SSMTS_CACHE_DIR", str(_loop(tmp_path)))
    out = tmp_path / "r.json"
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert main([*RUN, "--synthetic", *cache, "--out", str(out)]) == 0 and out.is_file()


@pytest.mark.parametrize("task", [["bidmc-rr", "--synthetic"], ["ptd-sinusoids"], ["state-tracking", "--synthetic"]])
def test_an_out_under_a_file_is_refused_before_the_data_are_built(task, tmp_path, capsys):
    a_file = _a_file(tmp_path)
    out = a_file / "run" / "results.json"
    assert main(["tasks", "run", *task, "--preset", "tiny", "--quiet", "--out", str(out)]) == EXIT_IO
    captured = capsys.readouterr()
    assert f"--out {out}" in captured.err and f"{a_file} is a file, not a directory" in captured.err, captured.err
    assert "building the synthetic stand-in" not in captured.out and "[state-tracking]" not in captured.out
    assert a_file.read_text() == "not a directory"


def test_an_out_that_is_a_directory_is_refused_before_training(tmp_path, capsys):
    out = tmp_path / "results.json"
    out.mkdir()
    assert main([*RUN, "--synthetic", "--out", str(out)]) == EXIT_IO
    captured = capsys.readouterr()
    assert f"--out {out} is a directory" in captured.err and "building" not in captured.out, captured.err


def test_a_checkpoint_path_taken_by_a_directory_is_refused_before_training(tmp_path, capsys):
    """The files written next to --out (checkpoint, history, config) are checked too."""
    (tmp_path / "results_checkpoint.pt").mkdir()
    assert main([*RUN, "--synthetic", "--out", str(tmp_path / "results.json")]) == EXIT_IO
    captured = capsys.readouterr()
    assert f"{tmp_path / 'results_checkpoint.pt'} is a directory" in captured.err and "--out" in captured.err
    assert "building" not in captured.out


@pytest.mark.skipif(_unwritable_dir() is None, reason="no directory here refuses new files to this user")
def test_an_out_in_a_directory_that_refuses_new_files(tmp_path, capsys):
    out = _unwritable_dir() / "ssmts-run" / "results.json"
    assert main([*RUN, "--synthetic", "--out", str(out)]) == EXIT_IO
    captured = capsys.readouterr()
    assert f"--out {out}" in captured.err and "cannot create files in /sys" in captured.err, captured.err
    assert "building" not in captured.out and not out.parent.exists()


def test_an_out_without_write_permission_is_refused(tmp_path, capsys, monkeypatch):
    """Permission bits (which root ignores, hence the patched probe) give the same message."""
    import ssmts.tasks.paths as paths

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(paths.tempfile, "mkstemp", refuse)
    assert main([*RUN, "--synthetic", "--out", str(tmp_path / "runs" / "results.json")]) == EXIT_IO
    err = capsys.readouterr().err
    assert f"cannot create files in {tmp_path} (Permission denied)" in err and "--out" in err, err


def test_a_good_out_leaves_no_trace_of_the_check(tmp_path):
    from ssmts.tasks.paths import check_output_files

    check_output_files([tmp_path / "new" / "results.json"])
    assert list(tmp_path.iterdir()) == []


def test_a_symlink_loop_on_a_file_inside_a_good_data_dir_is_named_not_called_missing(tmp_path, capsys):
    from ssmts.data.layouts import bidmc_file_names

    train, test = bidmc_file_names("rr")
    data = tmp_path / "data"
    data.mkdir()
    (data / train).write_text("@problemName BIDMC32RR\n")
    (data / test).symlink_to(data / "other")
    (data / "other").symlink_to(data / test)
    assert main(["tasks", "run", "bidmc-rr", "--preset", "tiny", "--quiet", "--data-dir", str(data)]) == EXIT_IO
    err = capsys.readouterr().err
    assert f"{data / test} is a symbolic link loop" in err and "missing" not in err, err


def test_a_symlink_loop_on_a_folder_on_the_way_to_a_data_file_is_named(tmp_path):
    from ssmts.data.base import require_files

    (tmp_path / "sub").symlink_to(tmp_path / "sub")
    with pytest.raises(OSError, match=r"sub is a symbolic link loop .* so sub/train\.csv cannot be read") as raised:
        require_files(tmp_path, ["present.txt", "sub/train.csv"], "")
    assert raised.value.errno == errno.ELOOP and str(tmp_path / "sub") in str(raised.value)


def test_a_speech_copy_in_a_subfolder_that_lacks_words_is_named_with_the_missing_words(tmp_path):
    """--data-dir holding speech_commands_v0.02/ with its split lists but two of sc10's words: the loader
    reports the missing word folders there (it named the lists as missing, from --data-dir itself)."""
    from ssmts.data.base import DataNotFoundError
    from ssmts.data.speech import SC10_WORDS, load_speech_commands
    from ssmts.tasks.sources import speech_commands_dir

    copy = tmp_path / "speech_commands_v0.02"
    for word in SC10_WORDS[:2]:
        (copy / word).mkdir(parents=True)
    for name in ("validation_list.txt", "testing_list.txt"):
        (copy / name).write_text("")
    assert speech_commands_dir(tmp_path) == copy
    with pytest.raises(DataNotFoundError, match=re.escape(f"{copy} is missing {SC10_WORDS[2]}/")):
        load_speech_commands(speech_commands_dir(tmp_path), words="sc10")


@pytest.mark.parametrize("task", ["bidmc-rr", "smnist", "lra-listops"])
def test_a_data_dir_that_is_a_file_is_named_a_file_not_missing(tmp_path, capsys, task):
    """--data-dir given a file's path: the loaders said the directory (or one inside it) 'does not exist'."""
    path = _a_file(tmp_path)
    assert main(["tasks", "run", task, "--preset", "tiny", "--quiet", "--data-dir", str(path)]) != 0
    err = capsys.readouterr().err
    assert f"{path} is a file" in err or f"{path}" in err and "is a directory, not" in err, err
    assert "does not exist" not in err, err


def test_an_empty_split_names_the_data_and_the_file_that_splits_it(tmp_path, capsys):
    """A Speech Commands copy whose validation_list.txt names none of the task's clips: the run said only
    'the val split is empty', not which data or which file."""
    import shutil

    from ssmts.data.speech import default_spoken_commands_dir

    copy = tmp_path / "speech"
    shutil.copytree(default_spoken_commands_dir(), copy)
    (copy / "validation_list.txt").write_text("")
    argv = ["tasks", "run", "sc10", "--preset", "tiny", "--quiet", "--data-dir", str(copy)]
    assert main([*argv, "--out", str(tmp_path / "r.json")]) != 0
    err = capsys.readouterr().err
    assert f"the val split is empty (data from {copy}; splits by validation_list.txt" in err, err
