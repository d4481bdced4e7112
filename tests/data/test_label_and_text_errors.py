"""Real-format files that parse but hold what no release holds: an MNIST label outside 0..9, a
CIFAR-10 label outside 0..9, non-UTF-8 bytes in a ListOps TSV. Each names the file and where."""

from __future__ import annotations

import pickle
import struct

import numpy as np
import pytest

from ssmts.cli import EXIT_USAGE, main
from ssmts.data.base import DataNotFoundError
from ssmts.data.lra import load_lra_listops, read_listops_tsv
from ssmts.data.pixels import load_scifar, load_smnist, read_mnist


def _idx(path, array, magic):
    path.write_bytes(struct.pack(">i", magic) + struct.pack(f">{array.ndim}i", *array.shape) + array.tobytes())


def _mnist(directory, bad_label, position=5, split="train"):
    """Four idx files of 20 train / 6 test images; label `bad_label` at `position` of `split`."""
    directory.mkdir(parents=True, exist_ok=True)
    for prefix, n in (("train", 20), ("t10k", 6)):
        labels = (np.arange(n) % 10).astype(np.uint8)
        if prefix == ("train" if split == "train" else "t10k"):
            labels[position] = bad_label
        _idx(directory / f"{prefix}-images-idx3-ubyte", np.zeros((n, 28, 28), np.uint8), 2051)
        _idx(directory / f"{prefix}-labels-idx1-ubyte", labels, 2049)
    return directory


@pytest.mark.parametrize("label, position, split", [(11, 5, "train"), (255, 0, "train"), (10, 4, "test")])
def test_an_mnist_label_outside_the_digits_names_file_label_and_position(label, position, split, tmp_path):
    _mnist(tmp_path, label, position, split)
    name = "train-labels-idx1-ubyte" if split == "train" else "t10k-labels-idx1-ubyte"
    with pytest.raises(DataNotFoundError) as raised:
        read_mnist(tmp_path)
    message = str(raised.value)
    assert f"{tmp_path / name} holds the label {label} at position {position}" in message, message
    assert "0..9" in message and "Download" in message


def test_the_cli_reports_an_mnist_label_before_training(tmp_path, capsys):
    _mnist(tmp_path / "mnist", 11)
    args = ["tasks", "run", "smnist", "--data-dir", str(tmp_path / "mnist"), "--preset", "tiny", "--quiet"]
    assert main([*args, "--limit", "100", "--device", "cpu", "--out", str(tmp_path / "r.json")]) == EXIT_USAGE
    assert "holds the label 11 at position 5" in capsys.readouterr().err


def test_good_mnist_labels_still_load(tmp_path):
    data = load_smnist(_mnist(tmp_path, 9))
    assert data.train.y.max() == 9 and data.n_classes == 10


def test_a_cifar_label_outside_the_classes_names_file_label_and_position(tmp_path):
    directory = tmp_path / "cifar-10-batches-py"
    directory.mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        labels = [i % 10 for i in range(4)]
        if name == "data_batch_3":
            labels[2] = 42
        batch = {b"data": np.zeros((4, 3072), np.uint8), b"labels": labels}
        (directory / name).write_bytes(pickle.dumps(batch))
    with pytest.raises(DataNotFoundError, match=r"data_batch_3 holds the label 42 at position 2"):
        load_scifar(tmp_path)


def _listops(directory, val_bytes: bytes):
    directory.mkdir(parents=True, exist_ok=True)
    good = b"Source\tTarget\n( ( [MAX 2 ) 9 ] )\t9\n( ( [MIN 3 ) 4 ] )\t3\n"
    for split in ("train", "val", "test"):
        (directory / f"basic_{split}.tsv").write_bytes(val_bytes if split == "val" else good)
    return directory


@pytest.mark.parametrize(
    "content, line, column, byte",
    [
        (b"Source\tTarget\n( ( [MAX 2 ) 9 ] )\t9\n( ( [MAX 2 ) \xff9 ] )\t9\n", 3, 14, "0xff"),
        (
            b"Source\tTarget\r\n( ( [MIN 3 ) 4 ] )\t3\r\n" * 1 + b"( ( [MAX 2 ) 9 ] )\t9\r\n" * 5000 + b"\xc3(\t1\n",
            5003,
            1,
            "0xc3",
        ),
        (b"Sou\x80rce\tTarget\n", 1, 4, "0x80"),
    ],
    ids=["line 3", "after an 8 KB chunk", "header"],
)
def test_non_utf8_bytes_in_a_listops_file_name_the_file_and_line(content, line, column, byte, tmp_path):
    directory = _listops(tmp_path / "listops-1000", content)
    path = directory / "basic_val.tsv"
    with pytest.raises(DataNotFoundError) as raised:
        read_listops_tsv(path)
    message = str(raised.value)
    assert message.startswith(f"{path}:{line}: byte {byte} (column {column}) is not UTF-8"), message
    assert "lra_release" in message
    with pytest.raises(DataNotFoundError, match=f"basic_val.tsv:{line}: byte {byte}"):
        load_lra_listops(tmp_path)


def test_the_cli_reports_non_utf8_listops_with_file_and_line(tmp_path, capsys):
    _listops(tmp_path / "listops-1000", b"Source\tTarget\n( ( [MAX 2 ) \xff9 ] )\t9\n")
    args = ["tasks", "run", "lra-listops", "--data-dir", str(tmp_path), "--preset", "tiny", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "r.json")]) == EXIT_USAGE
    assert f"{tmp_path / 'listops-1000' / 'basic_val.tsv'}:2: byte 0xff" in capsys.readouterr().err


def test_utf8_listops_files_still_load(tmp_path):
    _listops(tmp_path / "listops-1000", b"Source\tTarget\r\n( ( [MIN 3 ) 4 ] )\t3\r\n")
    assert load_lra_listops(tmp_path).val.y.tolist() == [3]
