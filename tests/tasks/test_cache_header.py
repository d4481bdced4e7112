"""A task cache whose header declares an impossible class count (1, 10**9, not a number) or whose labels
exceed it: refused, naming the file and the value, instead of a crash in the loss or a huge allocation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest


def _cache(tmp_path: Path, **header) -> Path:
    from ssmts.data.pixels import load_digits_sequential
    from ssmts.tasks.data_utils import limit_task_data, save_task_arrays

    directory = tmp_path / "cache"
    save_task_arrays(limit_task_data(load_digits_sequential(), 40, 20), directory)
    written = json.loads((directory / "header.json").read_text())
    (directory / "header.json").write_text(json.dumps({**written, **header}))
    return directory


@pytest.mark.parametrize(
    "header, fragment",
    [
        ({"n_classes": 1}, "declares n_classes=1: a classifier needs 2 or more (its labels go up to 9)"),
        ({"n_classes": 10**9, "classes": None}, "declares n_classes=1000000000, but its 80 labels go up to 9"),
        ({"n_classes": 10**9}, "declares n_classes=1000000000, but names 10 classes"),
        ({"n_classes": 0}, "declares n_classes=0"),
        ({"n_classes": True}, "declares n_classes=True"),
        ({"n_classes": "10"}, "declares n_classes='10'"),
        ({"n_classes": 2.5}, "declares n_classes=2.5"),
    ],
)
def test_a_cache_header_with_an_impossible_class_count_is_refused(header, fragment, tmp_path):
    from ssmts.tasks.data_utils import load_task_arrays

    directory = _cache(tmp_path, **header)
    with pytest.raises(ValueError, match="cache") as raised:
        load_task_arrays(directory)
    message = str(raised.value)
    assert fragment in message and str(directory / "header.json") in message, message
    assert f"delete {directory}" in message


def test_a_cache_whose_labels_exceed_its_class_count_names_the_label(tmp_path):
    from ssmts.tasks.data_utils import load_task_arrays

    directory = _cache(tmp_path)
    labels = np.load(directory / "val_y.npy")
    labels[3] = 12
    np.save(directory / "val_y.npy", labels)
    with pytest.raises(ValueError, match=r"val_y\.npy holds the label 12 at position 3") as raised:
        load_task_arrays(directory)
    assert "n_classes=10" in str(raised.value)


def test_a_good_cache_still_loads(tmp_path):
    from ssmts.tasks.data_utils import load_task_arrays

    data = load_task_arrays(_cache(tmp_path))
    assert data.n_classes == 10 and isinstance(data.train.X, np.memmap)


def test_the_task_cache_rebuilds_a_refused_header_and_says_why(tmp_path):
    from ssmts.data.pixels import load_digits_sequential
    from ssmts.tasks.data_utils import limit_task_data
    from ssmts.tasks.sources import cached_task

    _cache(tmp_path, n_classes=10**9)
    built = []

    def build():
        built.append(1)
        return limit_task_data(load_digits_sequential(), 40, 20)

    with pytest.warns(UserWarning, match=r"building the task cache .* again.*n_classes=1000000000"):
        data = cached_task(tmp_path, "cache", build)
    assert built == [1] and data.n_classes == 10


def _token_cache(tmp_path: Path, **header) -> Path:
    from ssmts.tasks.data_utils import save_task_arrays
    from ssmts.tasks.synthetic_text import make_text_standin

    directory = tmp_path / "tokens"
    save_task_arrays(make_text_standin(6, 2, 2, max_length=128), directory)
    written = json.loads((directory / "header.json").read_text())
    (directory / "header.json").write_text(json.dumps({**written, **header}))
    return directory


@pytest.mark.parametrize(
    "header, fragment",
    [
        ({"vocab_size": 10**9}, "declares vocab_size=1000000000, but its 1280 tokens go up to the id"),
        ({"vocab_size": 1}, "declares vocab_size=1: a vocabulary holds the padding id 0"),
        ({"vocab_size": 0}, "declares vocab_size=0"),
        ({"vocab_size": -3}, "declares vocab_size=-3"),
        ({"vocab_size": True}, "declares vocab_size=True"),
        ({"vocab_size": 257.0}, "declares vocab_size=257.0"),
        ({"vocab_size": 20}, "outside the ids 0..19 of"),
    ],
)
def test_a_cache_header_with_an_impossible_vocabulary_is_refused(header, fragment, tmp_path):
    from ssmts.tasks.data_utils import load_task_arrays

    directory = _token_cache(tmp_path, **header)
    with pytest.raises(ValueError, match="cache") as raised:
        load_task_arrays(directory)
    message = str(raised.value)
    assert fragment in message and str(directory / "header.json") in message, message
    assert f"delete {directory}" in message


def test_a_vocabulary_on_signal_inputs_is_refused(tmp_path):
    from ssmts.tasks.data_utils import load_task_arrays

    directory = _cache(tmp_path, vocab_size=16)
    with pytest.raises(ValueError, match=r"declares vocab_size=16, but .*train_X\.npy holds float"):
        load_task_arrays(directory)


def test_a_good_token_cache_still_loads(tmp_path):
    from ssmts.tasks.data_utils import load_task_arrays
    from ssmts.tasks.synthetic_text import BYTE_VOCAB_SIZE

    data = load_task_arrays(_token_cache(tmp_path))
    assert data.vocab_size == BYTE_VOCAB_SIZE and int(np.asarray(data.train.X).max()) < BYTE_VOCAB_SIZE
