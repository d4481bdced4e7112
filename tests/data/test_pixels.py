"""Pixel-sequence loaders on tiny MNIST idx / CIFAR-10 fixtures, and the sklearn stand-ins."""

from __future__ import annotations

import gzip
import pickle
import struct

import numpy as np
import pytest

from ssmts.data.base import DataNotFoundError
from ssmts.data.pixels import (
    DEFAULT_PERMUTATION_SEED,
    load_digits_permuted,
    load_digits_rgb,
    load_digits_sequential,
    load_psmnist,
    load_scifar,
    load_smnist,
    read_mnist,
)

N_TRAIN, N_TEST = 10, 4


def mnist_arrays(n):
    """Images whose pixel 0 is the image number and pixel 783 is 255; labels n % 10."""
    images = np.zeros((n, 28, 28), dtype=np.uint8)
    images[:, 0, 0] = np.arange(n)
    images[:, 27, 27] = 255
    images[:, 0, 1] = 3 * np.arange(n)  # pixel 1, so a permutation is visible
    return images, (np.arange(n) % 10).astype(np.uint8)


def idx_bytes(array, magic):
    return struct.pack(">i", magic) + struct.pack(f">{array.ndim}i", *array.shape) + array.tobytes()


def write_mnist(directory, compress=False):
    directory.mkdir(parents=True, exist_ok=True)
    for prefix, n in (("train", N_TRAIN), ("t10k", N_TEST)):
        images, labels = mnist_arrays(n)
        for name, payload in (
            (f"{prefix}-images-idx3-ubyte", idx_bytes(images, 2051)),
            (f"{prefix}-labels-idx1-ubyte", idx_bytes(labels, 2049)),
        ):
            if compress:
                with gzip.open(directory / f"{name}.gz", "wb") as f:
                    f.write(payload)
            else:
                (directory / name).write_bytes(payload)


@pytest.mark.parametrize("compress", [False, True])
def test_smnist_reads_idx_plain_and_gz(tmp_path, compress):
    write_mnist(tmp_path, compress)
    data = load_smnist(tmp_path, val_fraction=0.2)
    assert data.train.X.shape == (8, 1, 784) and data.train.X.dtype == np.float32
    assert (len(data.val), len(data.test)) == (2, N_TEST)
    assert data.train.X.min() >= 0 and data.train.X.max() == 1.0
    assert np.allclose(data.train.X[:, 0, 0] * 255, np.arange(8))
    assert np.allclose(data.val.X[:, 0, 0] * 255, [8, 9])  # the tail of the training file
    assert data.train.y.tolist() == list(range(8)) and data.val.y.tolist() == [8, 9]
    assert data.test.y.dtype == np.int64 and data.n_classes == 10


def test_mnist_torchvision_layout(tmp_path):
    write_mnist(tmp_path / "MNIST" / "raw", compress=True)
    train_images, train_labels, test_images, test_labels = read_mnist(tmp_path)
    assert train_images.shape == (N_TRAIN, 28, 28) and test_labels.shape == (N_TEST,)


def test_mnist_errors_name_the_problem(tmp_path):
    with pytest.raises(DataNotFoundError, match="train-images-idx3-ubyte"):
        load_smnist(tmp_path / "missing")
    write_mnist(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(DataNotFoundError, match="t10k-labels-idx1-ubyte"):
        load_smnist(tmp_path)
    images, _ = mnist_arrays(N_TEST)
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(idx_bytes(images, 2051))  # images, not labels
    with pytest.raises(DataNotFoundError, match="magic number 2051, expected 2049") as refused:
        load_smnist(tmp_path)
    assert str(refused.value).count("Download the four MNIST idx files") == 1  # once, not wrapped again
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(idx_bytes(np.zeros(N_TEST, np.uint8), 2049)[:-1])
    with pytest.raises(DataNotFoundError, match="truncated"):
        load_smnist(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(idx_bytes(np.zeros(3, np.uint8), 2049))
    with pytest.raises(DataNotFoundError, match="4 images but 3 labels"):
        load_smnist(tmp_path)


def test_a_gzip_bomb_or_a_huge_declared_shape_is_refused_without_inflating_it(tmp_path):
    """Only the declared bytes are read: a .gz whose payload is far larger than its header says, or a
    header declaring more than any MNIST file, is refused after a bounded read."""
    import tracemalloc

    write_mnist(tmp_path)
    for name in [p.name for p in tmp_path.iterdir() if p.name.startswith("train-images")]:
        (tmp_path / name).unlink()
    header = idx_bytes(np.zeros((N_TRAIN, 28, 28), np.uint8), 2051)[:16]
    with gzip.open(tmp_path / "train-images-idx3-ubyte.gz", "wb") as f:  # 200 MB of zeros behind a small header
        f.write(header)
        for _ in range(200):
            f.write(bytes(2**20))
    tracemalloc.start()
    with pytest.raises(DataNotFoundError, match=r"\(7840 bytes of data\) but holds more; the file is truncated"):
        load_smnist(tmp_path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 50 * 2**20, f"{peak / 2**20:.0f} MB allocated"
    huge = struct.pack(">iiii", 2051, 2**30, 2**20, 28)
    (tmp_path / "train-images-idx3-ubyte.gz").unlink()
    (tmp_path / "train-images-idx3-ubyte").write_bytes(huge)
    with pytest.raises(DataNotFoundError, match="which no MNIST file has"):
        load_smnist(tmp_path)


def test_psmnist_fixed_recorded_permutation(tmp_path):
    write_mnist(tmp_path)
    plain = load_smnist(tmp_path)
    permuted = load_psmnist(tmp_path)
    perm = permuted.meta["permutation"]
    assert permuted.meta["permutation_seed"] == DEFAULT_PERMUTATION_SEED
    assert np.array_equal(perm, np.random.default_rng(DEFAULT_PERMUTATION_SEED).permutation(784))
    for a, b in ((plain.train, permuted.train), (plain.test, permuted.test)):
        assert np.array_equal(b.X, a.X[..., perm])  # same permutation in every split
        assert np.array_equal(b.y, a.y)
    assert not np.array_equal(permuted.train.X, plain.train.X)
    other = load_psmnist(tmp_path, seed=1)
    assert not np.array_equal(other.meta["permutation"], perm)
    assert np.array_equal(load_psmnist(tmp_path).train.X, permuted.train.X)


def write_cifar(directory, n=4):
    directory.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for b, name in enumerate([f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]):
        data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
        data[:, 0], data[:, 1024], data[:, 2048] = 255, 0, 51  # pixel 0 is (255, 0, 51)
        with open(directory / name, "wb") as f:
            pickle.dump({b"labels": [b % 10] * n, b"data": data}, f)


def test_scifar_rgb_and_normalization(tmp_path):
    write_cifar(tmp_path / "cifar-10-batches-py")
    data = load_scifar(tmp_path / "cifar-10-batches-py", val_fraction=0.2)
    assert data.train.X.shape == (16, 3, 1024) and data.train.X.dtype == np.float32
    assert (len(data.val), len(data.test)) == (4, 4)
    assert np.allclose(data.train.X[:, :, 0], [1.0, 0.0, 0.2])
    assert data.val.y.tolist() == [4] * 4 and data.test.y.tolist() == [5] * 4
    assert data.meta["normalized"] is False
    normalized = load_scifar(tmp_path, normalize=True, val_fraction=0.2)
    assert np.allclose(normalized.train.X.mean(axis=(0, 2)), 0, atol=1e-5)
    assert np.allclose(normalized.train.X.std(axis=(0, 2)), 1, atol=1e-4)
    mean, std = normalized.meta["channel_mean"], normalized.meta["channel_std"]
    assert np.allclose(normalized.test.X, (data.test.X - mean[:, None]) / std[:, None], atol=1e-5)


def test_scifar_bad_batch(tmp_path):
    write_cifar(tmp_path / "cifar-10-batches-py")
    with open(tmp_path / "cifar-10-batches-py" / "test_batch", "wb") as f:
        pickle.dump({"data": np.zeros((2, 3072), np.uint8), "labels": [0, 1]}, f)  # str keys
    with pytest.raises(DataNotFoundError, match="test_batch should hold a dict with keys b'data'"):
        load_scifar(tmp_path)


def test_digits_stand_ins():
    data = load_digits_sequential()
    assert data.train.X.shape == (1077, 1, 64) and data.train.X.dtype == np.float32
    assert (len(data.val), len(data.test)) == (360, 360)
    assert data.train.X.min() == 0.0 and data.train.X.max() == 1.0
    for split in (data.train, data.val, data.test):
        assert set(split.y.tolist()) == set(range(10))  # stratified: every class everywhere
    assert np.array_equal(load_digits_sequential().test.X, data.test.X)

    permuted = load_digits_permuted(seed=5)
    perm = permuted.meta["permutation"]
    assert np.array_equal(perm, np.random.default_rng(5).permutation(64))
    assert np.array_equal(permuted.train.X, data.train.X[..., perm])

    rgb = load_digits_rgb()
    assert rgb.train.X.shape == (1077, 3, 64) and rgb.train.X.max() <= 1.0
    # Each channel is the digit times its image's own colour in [0.3, 1].
    ratio = rgb.train.X.sum(-1) / data.train.X.sum(-1)
    assert ratio.min() >= 0.3 - 1e-5 and ratio.max() <= 1.0 + 1e-5
    assert np.allclose(rgb.train.X, ratio[:, :, None] * data.train.X, atol=1e-6)
    assert np.array_equal(rgb.test.y, data.test.y)
