"""LRA loaders on tiny fixtures written in the release's exact on-disk formats."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from PIL import Image

from ssmts.data.base import DataNotFoundError
from ssmts.data.lra import (
    BYTE_VOCAB_SIZE,
    LISTOPS_VOCAB,
    LISTOPS_VOCAB_SIZE,
    encode_bytes,
    load_lra_image,
    load_lra_listops,
    load_lra_pathfinder,
    load_lra_pathx,
    load_lra_retrieval,
    load_lra_text,
    split_indices,
    tokenize_listops,
)

# ---------------------------------------------------------------------------- ListOps

LISTOPS_ROWS = {
    "train": [
        ("( ( ( [MAX 2 ) 9 ) ] )", 9),
        ("( ( ( ( [SM 4 ) ( ( ( [MIN 7 ) 3 ) ] ) ) 8 ) ] )", 5),
        ("( ( ( [MED 1 ) 4 ) ] )", 2),
    ],
    "val": [("( ( ( [MIN 0 ) 6 ) ] )", 0)],
    "test": [("( ( ( ( [MAX 1 ) 2 ) 3 ) ] )", 3), ("( ( ( [SM 5 ) 5 ) ] )", 0)],
}


def write_listops_release(directory):
    directory.mkdir(parents=True)
    for name, rows in LISTOPS_ROWS.items():
        lines = ["Source\tTarget"] + [f"{source}\t{target}" for source, target in rows]
        (directory / f"basic_{name}.tsv").write_text("\n".join(lines) + "\n")


def test_listops_tokenization_and_fixed_vocabulary():
    assert tokenize_listops("( ( ( [MAX 2 ) 9 ) ] )") == ["[MAX", "2", "9", "X"]
    assert LISTOPS_VOCAB_SIZE == 16
    assert sorted(LISTOPS_VOCAB.values()) == list(range(1, 16))  # 0 is left for padding
    assert LISTOPS_VOCAB["0"] == 1 and LISTOPS_VOCAB["9"] == 10 and LISTOPS_VOCAB["X"] == 15


def test_listops_loader_shapes_tokens_lengths(tmp_path):
    write_listops_release(tmp_path / "lra_release" / "listops-1000")
    for root in (tmp_path / "lra_release", tmp_path, tmp_path / "lra_release" / "listops-1000"):
        data = load_lra_listops(root)
        assert data.train.X.shape == (3, 2000) and data.train.X.dtype == np.int64
        assert (len(data.val), len(data.test)) == (1, 2)
    first = data.train.X[0]
    assert first[:4].tolist() == [LISTOPS_VOCAB["[MAX"], 3, 10, 15]  # "[MAX 2 9 ]"
    assert not first[4:].any()
    assert data.train.lengths.tolist() == [4, 8, 4]
    assert data.train.y.tolist() == [9, 5, 2] and data.test.y.tolist() == [3, 0]
    assert data.n_classes == 10 and data.vocab_size == 16


def test_listops_truncates_and_counts(tmp_path):
    write_listops_release(tmp_path / "listops-1000")
    data = load_lra_listops(tmp_path, max_length=5)
    assert data.train.X.shape == (3, 5)
    assert data.train.lengths.tolist() == [4, 5, 4]
    assert data.meta["n_truncated"] == {"train": 1, "val": 0, "test": 0}


def test_listops_missing_and_malformed(tmp_path):
    with pytest.raises(DataNotFoundError, match="basic_train.tsv"):
        load_lra_listops(tmp_path / "nowhere")
    write_listops_release(tmp_path / "listops-1000")
    (tmp_path / "listops-1000" / "basic_val.tsv").unlink()
    with pytest.raises(DataNotFoundError, match="basic_val.tsv"):
        load_lra_listops(tmp_path)
    (tmp_path / "listops-1000" / "basic_val.tsv").write_text("Source\tTarget\n( ( [FIRST 1 ) ] )\t1\n")
    with pytest.raises(DataNotFoundError, match=r"\[FIRST"):
        load_lra_listops(tmp_path)
    (tmp_path / "listops-1000" / "basic_val.tsv").write_text("( ( [MAX 1 ) ] )\t1\n")
    with pytest.raises(DataNotFoundError, match="header"):
        load_lra_listops(tmp_path)


# ---------------------------------------------------------------------------- Retrieval (AAN)

AAN_ROWS = {
    "train": [("1.0", "a1", "b1", "ab", "c\u00e9"), ("0.0", "a2", "b2", "x" * 10, "")],
    "eval": [("0", "a3", "b3", 'quote " stays', "y")],
    "test": [("1", "a4", "b4", "z", "w")],
}


def write_aan_release(directory):
    directory.mkdir(parents=True)
    for name, rows in AAN_ROWS.items():
        text = "".join("\t".join(row) + "\n" for row in rows)  # no header
        (directory / f"new_aan_pairs.{name}.tsv").write_text(text, encoding="utf-8")


def test_retrieval_loader(tmp_path):
    write_aan_release(tmp_path / "tsv_data")
    data = load_lra_retrieval(tmp_path)
    assert data.train.X.shape == (2, 2, 4000) and data.train.X.dtype == np.int64
    assert data.train.X[0, 0, :3].tolist() == [ord("a") + 1, ord("b") + 1, 0]
    assert data.train.X[0, 1, :4].tolist() == [ord("c") + 1, 0xC3 + 1, 0xA9 + 1, 0]  # UTF-8 bytes of é
    assert data.train.lengths.tolist() == [[2, 3], [10, 0]]
    assert data.train.y.tolist() == [1, 0] and data.val.y.tolist() == [0] and data.test.y.tolist() == [1]
    assert data.val.X[0, 0, :7].tolist() == [b + 1 for b in b'quote "']  # quotes are ordinary bytes
    assert data.vocab_size == BYTE_VOCAB_SIZE == 257 and data.n_classes == 2

    short = load_lra_retrieval(tmp_path, max_length=4, max_samples=1)
    assert short.train.X.shape == (1, 2, 4) and short.train.lengths.tolist() == [[2, 3]]


def test_retrieval_missing_and_malformed(tmp_path):
    write_aan_release(tmp_path / "tsv_data")
    (tmp_path / "tsv_data" / "new_aan_pairs.eval.tsv").unlink()
    with pytest.raises(DataNotFoundError, match="new_aan_pairs.eval.tsv"):
        load_lra_retrieval(tmp_path)
    (tmp_path / "tsv_data" / "new_aan_pairs.eval.tsv").write_text("1\ta\tb\tonly four fields\n")
    with pytest.raises(DataNotFoundError, match=r"eval.tsv:1: expected 5"):
        load_lra_retrieval(tmp_path)
    (tmp_path / "tsv_data" / "new_aan_pairs.eval.tsv").write_text("2\ta\tb\tc\td\n")
    with pytest.raises(DataNotFoundError, match="label must be 0 or 1"):
        load_lra_retrieval(tmp_path)


def test_encode_bytes_pads_and_truncates():
    X, lengths = encode_bytes([b"\x00\xff", b"abcdef"], max_length=4)
    assert X.tolist() == [[1, 256, 0, 0], [98, 99, 100, 101]]
    assert lengths.tolist() == [2, 4]


# ---------------------------------------------------------------------------- Pathfinder


def write_pathfinder_release(directory, resolution=32, per_file=(5, 5, 4)):
    """imgs/<k>/sample_<n>.png with pixel [0, 0] = a global image number, text metadata.

    Metadata file names 0, 1, 10 check numeric ordering; one PNG is empty (zero bytes).
    Returns {image number: label} of the readable images and the empty PNG's path.
    """
    labels, number = {}, 0
    empty = None
    for folder, count in zip((0, 1, 10), per_file):
        (directory / "imgs" / str(folder)).mkdir(parents=True)
        (directory / "metadata").mkdir(parents=True, exist_ok=True)
        lines = []
        for n in range(count):
            label = (number * 7) % 3 % 2
            path = directory / "imgs" / str(folder) / f"sample_{n}.png"
            if folder == 1 and n == 2:
                path.write_bytes(b"")  # the release has one empty image
                empty = path
            else:
                pixels = np.full((resolution, resolution), 50, dtype=np.uint8)
                pixels[0, 0] = number
                pixels[-1, -1] = 255
                Image.fromarray(pixels).save(path)
                labels[number] = label
            # Same fields as the release: folder, file, index, label, then generator settings.
            lines.append(f"imgs/{folder} sample_{n}.png {n} {label} 2 14 1.0 {resolution}")
            number += 1
        (directory / "metadata" / f"{folder}.npy").write_text("\n".join(lines) + "\n")
    return labels, empty


def load_quietly(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_lra_pathfinder(*args, **kwargs)


def test_pathfinder_loader_reads_text_metadata_and_skips_empty_png(tmp_path):
    labels, empty = write_pathfinder_release(tmp_path / "pathfinder32" / "curv_contour_length_14")
    with pytest.warns(UserWarning, match="skipped 1 of 14") as caught:
        data = load_lra_pathfinder(tmp_path)
    assert str(empty) in str(caught[0].message) and caught[0].filename == __file__
    assert data.meta["n_skipped_images"] == 1
    X = np.concatenate([data.train.X, data.val.X, data.test.X])
    y = np.concatenate([data.train.y, data.val.y, data.test.y])
    assert X.shape == (13, 1, 1024) and X.dtype == np.float32
    assert X.min() >= 0.0 and X.max() == 1.0
    assert np.allclose(X[:, 0, 1], 50 / 255)
    numbers = np.rint(X[:, 0, 0] * 255).astype(int)
    assert sorted(numbers) == sorted(labels)  # every readable image exactly once
    assert [labels[k] for k in numbers] == y.tolist()  # labels travel with their images
    assert data.n_classes == 2 and y.dtype == np.int64


def test_pathfinder_split_is_seeded_80_10_10(tmp_path):
    root = tmp_path / "pathfinder32" / "curv_contour_length_14"
    write_pathfinder_release(root, per_file=(10, 10, 10))
    first, again = load_quietly(tmp_path), load_quietly(root)
    assert (len(first.train), len(first.val), len(first.test)) == (23, 3, 3)  # 24/3/3, one empty
    for a, b in ((first.train, again.train), (first.val, again.val), (first.test, again.test)):
        assert np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y)
    other = load_quietly(tmp_path, seed=1)
    assert not np.array_equal(first.test.X, other.test.X)
    subset = load_quietly(tmp_path, max_samples=10)
    assert len(subset.train) + len(subset.val) + len(subset.test) in (9, 10)


def test_split_indices_partition():
    parts = split_indices(101, (0.8, 0.1, 0.1), seed=3)
    assert [len(p) for p in parts] == [81, 10, 10]
    assert sorted(np.concatenate(parts).tolist()) == list(range(101))


def test_pathx_reads_128(tmp_path):
    write_pathfinder_release(
        tmp_path / "lra_release" / "pathfinder128" / "curv_contour_length_14", resolution=128, per_file=(2, 3, 1)
    )
    with pytest.raises(DataNotFoundError, match="pathfinder32"):  # the default resolution is 32
        load_quietly(tmp_path)
    data = load_quietly(tmp_path, resolution=128)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pathx = load_lra_pathx(tmp_path / "lra_release")
    assert pathx.train.X.shape[1:] == (1, 16384)
    assert np.array_equal(pathx.train.X, data.train.X)


def test_pathfinder_missing_and_malformed(tmp_path):
    with pytest.raises(DataNotFoundError, match="pathfinder32/curv_contour_length_14/metadata"):
        load_lra_pathfinder(tmp_path)
    root = tmp_path / "pathfinder32" / "curv_contour_length_14"
    write_pathfinder_release(root, per_file=(2, 3, 1))
    with pytest.raises(DataNotFoundError, match="resolution=64"):
        load_quietly(root, resolution=64)  # root given directly: finds 32x32 images
    (root / "metadata" / "0.npy").write_text("imgs/0 sample_0.png\n")
    with pytest.raises(DataNotFoundError, match="0.npy:1"):
        load_lra_pathfinder(tmp_path)


# ---------------------------------------------------------------------------- Text (IMDB)


def write_aclimdb(root, n_per_class=5):
    texts = {}
    for split in ("train", "test"):
        for label, name in enumerate(("neg", "pos")):
            (root / "aclImdb" / split / name).mkdir(parents=True)
            for i in range(n_per_class):
                text = f"{split} {name} review {i} caf\u00e9<br />".encode()
                (root / "aclImdb" / split / name / f"{i}_{3 + 6 * label}.txt").write_bytes(text)
                texts[(split, name, i)] = text
    (root / "aclImdb" / "train" / "unsup").mkdir()
    (root / "aclImdb" / "train" / "unsup" / "0_0.txt").write_text("unlabelled, ignored")
    return texts


def test_text_loader(tmp_path):
    texts = write_aclimdb(tmp_path)
    data = load_lra_text(tmp_path, val_fraction=0.2)
    assert data.train.X.shape == (8, 4096) and data.train.X.dtype == np.int64
    assert (len(data.val), len(data.test)) == (2, 10)
    expected = texts[("test", "neg", 0)]
    assert data.test.X[0, : len(expected)].tolist() == [b + 1 for b in expected]
    assert not data.test.X[0, len(expected) :].any() and data.test.lengths[0] == len(expected)
    assert data.test.y.tolist() == [0] * 5 + [1] * 5
    for i in range(len(data.train)):  # labels follow the folder names
        text = bytes((data.train.X[i, : data.train.lengths[i]] - 1).tolist())
        assert (b" pos " in text) == bool(data.train.y[i])
    again = load_lra_text(tmp_path / "aclImdb", val_fraction=0.2)
    assert np.array_equal(again.val.X, data.val.X)
    assert data.vocab_size == 257 and data.classes == ["neg", "pos"]
    assert load_lra_text(tmp_path, max_length=8).train.X.shape[1] == 8


def test_text_missing(tmp_path):
    write_aclimdb(tmp_path)
    import shutil

    shutil.rmtree(tmp_path / "aclImdb" / "test" / "pos")
    with pytest.raises(DataNotFoundError, match="test/pos"):
        load_lra_text(tmp_path)


# ---------------------------------------------------------------------------- Image (CIFAR-10)


def write_cifar_batches(directory, n_per_batch=4):
    """Rows: pixel 0 of each plane encodes (batch, row); labels cycle 0..9."""
    directory.mkdir(parents=True)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for b, name in enumerate(names):
        data = np.zeros((n_per_batch, 3072), dtype=np.uint8)
        data[:, 0] = 255  # red of pixel 0
        data[:, 1024 + 1] = 255  # green of pixel 1
        data[:, 2048 + 2] = 255  # blue of pixel 2
        data[:, 3] = np.arange(n_per_batch) + 10 * b  # red of pixel 3 numbers the image
        labels = [(b * n_per_batch + i) % 10 for i in range(n_per_batch)]
        with open(directory / name, "wb") as f:
            pickle.dump(
                {
                    b"batch_label": name.encode(),
                    b"labels": labels,
                    b"data": data,
                    b"filenames": [b"x.png"] * n_per_batch,
                },
                f,
            )


def test_image_loader_grayscale_and_split(tmp_path):
    write_cifar_batches(tmp_path / "cifar-10-batches-py")
    data = load_lra_image(tmp_path, val_size=5)
    assert data.train.X.shape == (15, 1, 1024) and data.train.X.dtype == np.float32
    assert (len(data.val), len(data.test)) == (5, 4)
    assert np.allclose(data.train.X[:, 0, :3], [0.299, 0.587, 0.114], atol=1e-6)
    assert data.train.X.min() >= 0 and data.train.X.max() <= 1
    # The last val_size training images, in batch order, are validation.
    assert np.allclose(data.val.X[:, 0, 3] * 255 / 0.299, [33, 40, 41, 42, 43], atol=1e-3)
    assert data.val.y.tolist() == [5, 6, 7, 8, 9]
    assert data.test.y.tolist() == [0, 1, 2, 3]
    assert data.classes[0] == "airplane" and data.n_classes == 10


def test_image_missing_batch(tmp_path):
    write_cifar_batches(tmp_path / "cifar-10-batches-py")
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(DataNotFoundError, match="data_batch_3"):
        load_lra_image(tmp_path, val_size=5)
    with pytest.raises(DataNotFoundError, match="cifar-10-batches-py"):
        load_lra_image(tmp_path / "missing")


def test_pathfinder_images_missing_from_the_copy_are_refused_not_skipped(tmp_path):
    directory = tmp_path / "pathfinder32" / "curv_contour_length_14"
    write_pathfinder_release(directory)
    removed = sorted((directory / "imgs").rglob("*.png"))[:3]
    for path in removed:
        path.unlink()
    with pytest.raises(DataNotFoundError, match=r"^3 of the 14 Pathfinder images listed in .* are missing \(first: "):
        load_lra_pathfinder(tmp_path)
