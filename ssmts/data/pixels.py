"""Pixel-sequence tasks: sequential MNIST, permuted MNIST and sequential CIFAR-10.

An image is read one pixel per step in row-major order. On-disk formats are the
public releases::

    mnist root/                              (or root/MNIST/raw, torchvision's layout)
      train-images-idx3-ubyte[.gz]           idx: magic 2051, (60000, 28, 28) uint8
      train-labels-idx1-ubyte[.gz]           idx: magic 2049, (60000,) uint8
      t10k-images-idx3-ubyte[.gz]            (10000, 28, 28)
      t10k-labels-idx1-ubyte[.gz]

    cifar root/cifar-10-batches-py/          (or that folder itself)
      data_batch_1 ... data_batch_5          pickled dicts: b"data" (10000, 3072) uint8
      test_batch                             (1024 R, 1024 G, 1024 B, rows first), b"labels"

Validation split: the last 10% of the official training set in file order
(MNIST 54000/6000, CIFAR-10 45000/5000), which is what the LRA code's
``train[:90%]`` / ``train[90%:]`` selects.

Offline stand-ins built from scikit-learn's bundled 8x8 digits (1797 images, no
download) have the same shapes contract at 64 steps; see `load_digits_sequential`,
`load_digits_permuted` and `load_digits_rgb`.
"""

from __future__ import annotations

import gzip
import pickle
import struct
from pathlib import Path

import numpy as np

from ssmts.data.base import DataNotFoundError, Split, TaskData, require_files
from ssmts.data.layouts import CIFAR10_DIR, CIFAR10_TEST_BATCH, CIFAR10_TRAIN_BATCHES, MNIST_FILES

DEFAULT_PERMUTATION_SEED = 0
"""Seed of `numpy.random.default_rng` that draws the fixed pixel permutation of psMNIST."""

VAL_FRACTION = 0.1
"""Share of the official training set (its tail, in file order) used as validation."""

IDX_IMAGES_MAGIC = 2051  # 0x00000803: unsigned bytes, 3 dimensions
IDX_LABELS_MAGIC = 2049  # 0x00000801: unsigned bytes, 1 dimension

CIFAR10_CLASSES = [
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
]

_MNIST_HOW_TO_GET = (
    "Download the four MNIST idx files (gzip or not) from "
    "https://ossci-datasets.s3.amazonaws.com/mnist/ (mirror of http://yann.lecun.com/exdb/mnist/) "
    "into this directory; without network use load_digits_sequential() as a stand-in."
)
_CIFAR_HOW_TO_GET = (
    "Download https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz and extract it so that "
    f"{CIFAR10_DIR}/ lies in this directory; without network use load_digits_rgb() as a stand-in."
)


# ---------------------------------------------------------------------------- MNIST


IDX_MAX_BYTES = 2**30
"""Largest idx payload read (MNIST's largest file holds 47 MB): a header declaring more is refused
before anything is read, so a crafted or gzip-bombed file cannot exhaust memory."""


def _read_idx(path: Path, expected_magic: int) -> np.ndarray:
    """Read one idx file (plain or gzip) into a uint8 array of the shape in its header; only the
    declared number of bytes is ever inflated."""
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            head = f.read(4)
            if len(head) < 4:
                raise DataNotFoundError(
                    f"{path} is {len(head)} bytes, too short for an idx header. {_MNIST_HOW_TO_GET}"
                )
            (magic,) = struct.unpack(">i", head)
            if magic != expected_magic:
                raise DataNotFoundError(
                    f"{path} has idx magic number {magic}, expected {expected_magic}; "
                    f"is it the right file? {_MNIST_HOW_TO_GET}"
                )
            n_dims = magic & 0xFF
            dims_raw = f.read(4 * n_dims)
            if len(dims_raw) < 4 * n_dims:
                raise DataNotFoundError(
                    f"{path} ends inside its idx header; the file is truncated. {_MNIST_HOW_TO_GET}"
                )
            dims = struct.unpack(f">{n_dims}i", dims_raw)
            n_values = int(np.prod(dims, dtype=np.int64))
            if min(dims) < 0 or n_values > IDX_MAX_BYTES:
                raise DataNotFoundError(
                    f"{path} declares shape {dims}, which no MNIST file has; the file is corrupt. {_MNIST_HOW_TO_GET}"
                )
            raw = f.read(n_values + 1)  # one byte more than declared shows a file that is too long
    except DataNotFoundError:  # an OSError itself: already says what is wrong and how to get the files
        raise
    except (OSError, EOFError) as error:  # a truncated .gz raises EOFError
        raise DataNotFoundError(f"{path} could not be read: {error}. {_MNIST_HOW_TO_GET}") from error
    if len(raw) != n_values:
        held = "more" if len(raw) > n_values else len(raw)
        raise DataNotFoundError(
            f"{path} declares shape {dims} ({n_values} bytes of data) but holds {held}; "
            f"the file is truncated or corrupt. {_MNIST_HOW_TO_GET}"
        )
    return np.frombuffer(raw, dtype=np.uint8).reshape(dims)


def _check_labels(labels: np.ndarray, path: Path, how_to_get: str) -> None:
    """Every label one of the 10 classes: a label beyond would reach the loss as an index error,
    far from the file that holds it."""
    outside = np.flatnonzero((labels < 0) | (labels > 9))
    if outside.size:
        raise DataNotFoundError(
            f"{path} holds the label {labels[outside[0]]} at position {outside[0]} ({outside.size} in all outside "
            f"the classes 0..9); the file is damaged or not from the release. {how_to_get}"
        )


def _mnist_dir(root: Path) -> Path:
    for candidate in (root, root / "MNIST" / "raw"):
        name = MNIST_FILES["train_images"]
        if (candidate / name).exists() or (candidate / f"{name}.gz").exists():
            return candidate
    return root


def _mnist_file(directory: Path, name: str) -> Path:
    """Prefer the uncompressed file, fall back to the .gz one."""
    if (directory / name).exists():
        return directory / name
    if (directory / f"{name}.gz").exists():
        return directory / f"{name}.gz"
    raise DataNotFoundError(f"data directory {directory} is missing {name} (or {name}.gz). {_MNIST_HOW_TO_GET}")


def read_mnist(root: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Read the MNIST idx files under `root`.

    Returns (train_images (60000, 28, 28) uint8, train_labels (60000,) uint8,
    test_images (10000, 28, 28) uint8, test_labels (10000,) uint8).
    """
    root = Path(root).expanduser()
    if not root.is_dir():
        require_files(root, list(MNIST_FILES.values()), _MNIST_HOW_TO_GET)
    directory = _mnist_dir(root)
    arrays = {}
    for key, name in MNIST_FILES.items():
        path = _mnist_file(directory, name)
        magic = IDX_IMAGES_MAGIC if key.endswith("images") else IDX_LABELS_MAGIC
        arrays[key] = _read_idx(path, magic)
        if key.endswith("labels"):
            _check_labels(arrays[key], path, _MNIST_HOW_TO_GET)
    for split in ("train", "test"):
        images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        if len(images) != len(labels):
            raise DataNotFoundError(
                f"MNIST {split} files under {directory} disagree: {len(images)} images but "
                f"{len(labels)} labels. {_MNIST_HOW_TO_GET}"
            )
    return arrays["train_images"], arrays["train_labels"], arrays["test_images"], arrays["test_labels"]


def _tail_val_split(X: np.ndarray, y: np.ndarray, val_fraction: float) -> tuple[Split, Split]:
    """Train on the head, validate on the last `val_fraction` of the rows (file order)."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must lie in (0, 1), got {val_fraction}")
    n_val = int(round(len(X) * val_fraction))
    n_train = len(X) - n_val
    return Split(X[:n_train], y[:n_train]), Split(X[n_train:], y[n_train:])


def load_smnist(root: str | Path, val_fraction: float = VAL_FRACTION) -> TaskData:
    """Sequential MNIST: each image as 784 steps of one pixel.

    X: (n, 1, 784) float32 in [0, 1], row-major; y: (n,) int64 digits.
    Splits: 54000 / 6000 (tail of the training file) / 10000.
    """
    train_images, train_labels, test_images, test_labels = read_mnist(root)

    def to_sequence(images: np.ndarray) -> np.ndarray:
        return (images.reshape(len(images), 1, -1).astype(np.float32)) / np.float32(255.0)

    train, val = _tail_val_split(to_sequence(train_images), train_labels.astype(np.int64), val_fraction)
    test = Split(to_sequence(test_images), test_labels.astype(np.int64))
    return TaskData(
        train,
        val,
        test,
        n_classes=10,
        classes=[str(d) for d in range(10)],
        source=str(Path(root)),
        meta={"task": "smnist", "val_protocol": f"last {val_fraction:.0%} of the training file"},
    )


def permute_sequence_task(data: TaskData, seed: int = DEFAULT_PERMUTATION_SEED) -> TaskData:
    """Apply one fixed permutation of the time axis to every split.

    The permutation is `numpy.random.default_rng(seed).permutation(length)`; it and the
    seed are recorded in meta ("permutation", "permutation_seed"), so results can be
    reproduced or the permutation undone (X_orig[..., perm] = X_perm).
    """
    length = data.train.X.shape[-1]
    permutation = np.random.default_rng(seed).permutation(length)

    def permute(split: Split) -> Split:
        return Split(np.ascontiguousarray(split.X[..., permutation]), split.y, split.lengths)

    meta = dict(data.meta, permutation_seed=seed, permutation=permutation)
    meta["task"] = f"p{data.meta.get('task', 'sequence')}"
    return TaskData(
        permute(data.train),
        permute(data.val),
        permute(data.test),
        n_classes=data.n_classes,
        vocab_size=data.vocab_size,
        sample_rate=data.sample_rate,
        classes=data.classes,
        source=data.source,
        meta=meta,
    )


def load_psmnist(
    root: str | Path, seed: int = DEFAULT_PERMUTATION_SEED, val_fraction: float = VAL_FRACTION
) -> TaskData:
    """Permuted sequential MNIST: sMNIST with one fixed pixel permutation (seeded).

    X: (n, 1, 784) float32 in [0, 1]; meta records "permutation_seed" and "permutation".
    """
    return permute_sequence_task(load_smnist(root, val_fraction), seed)


# ---------------------------------------------------------------------------- CIFAR-10


def _cifar_dir(root: Path) -> Path:
    for candidate in (root / CIFAR10_DIR, root):
        if (candidate / CIFAR10_TEST_BATCH).exists():
            return candidate
    return root / CIFAR10_DIR


class _CifarUnpickler(pickle.Unpickler):
    """CIFAR-10's python batches are pickles by format, and unpickling can run code. This
    unpickler resolves only what a CIFAR batch holds (numpy arrays and dtypes; dicts, lists,
    bytes and numbers need no class lookup), so a crafted batch file cannot execute anything."""

    _ALLOWED = {
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
    }

    def find_class(self, module: str, name: str):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(
                f"refusing to load {module}.{name}: a CIFAR-10 batch holds only numpy arrays, lists, bytes and numbers"
            )
        return super().find_class(module, name)


def _read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open(path, "rb") as f:
            batch = _CifarUnpickler(f, encoding="bytes").load()
    except (OSError, EOFError, pickle.UnpicklingError, ValueError) as error:
        raise DataNotFoundError(f"{path} is not a readable CIFAR-10 batch: {error}. {_CIFAR_HOW_TO_GET}") from error
    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        keys = sorted(batch) if isinstance(batch, dict) else type(batch).__name__
        raise DataNotFoundError(
            f"{path} should hold a dict with keys b'data' and b'labels', found {keys}. {_CIFAR_HOW_TO_GET}"
        )
    data = np.asarray(batch[b"data"])
    labels = np.asarray(batch[b"labels"], dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072 or len(data) != len(labels):
        raise DataNotFoundError(
            f"{path}: b'data' should be (n, 3072) uint8 with one label per row, found "
            f"{data.shape} {data.dtype} and {len(labels)} labels. {_CIFAR_HOW_TO_GET}"
        )
    _check_labels(labels, path, _CIFAR_HOW_TO_GET)
    return data, labels


def read_cifar10(root: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Read the CIFAR-10 python batches under `root` (or `root/cifar-10-batches-py`).

    Returns (train_data (50000, 3072) uint8, train_labels (50000,) int64,
    test_data (10000, 3072) uint8, test_labels (10000,) int64); each row is
    1024 red, 1024 green, 1024 blue values, each plane row-major 32x32.
    """
    root = Path(root).expanduser()
    directory = _cifar_dir(root)
    names = [*CIFAR10_TRAIN_BATCHES, CIFAR10_TEST_BATCH]
    if directory == root:
        require_files(directory, names, _CIFAR_HOW_TO_GET)
    else:
        require_files(root, [f"{CIFAR10_DIR}/{name}" for name in names], _CIFAR_HOW_TO_GET)
    train = [_read_cifar_batch(directory / name) for name in CIFAR10_TRAIN_BATCHES]
    test_data, test_labels = _read_cifar_batch(directory / CIFAR10_TEST_BATCH)
    train_data = np.concatenate([d for d, _ in train])
    train_labels = np.concatenate([labels for _, labels in train])
    return train_data, train_labels, test_data, test_labels


def load_scifar(root: str | Path, normalize: bool = False, val_fraction: float = VAL_FRACTION) -> TaskData:
    """Sequential CIFAR-10: each image as 1024 steps of one RGB pixel.

    X: (n, 3, 1024) float32, in [0, 1] unless `normalize`; y: (n,) int64.
    Splits: 45000 / 5000 (tail of the training batches) / 10000.
    normalize: subtract the per-channel mean and divide by the per-channel std of the
    training split (after the validation tail is removed) in every split; the
    statistics are recorded in meta ("channel_mean", "channel_std").
    """
    train_data, train_labels, test_data, test_labels = read_cifar10(root)

    def to_sequence(data: np.ndarray) -> np.ndarray:
        return data.reshape(len(data), 3, 1024).astype(np.float32) / np.float32(255.0)

    train, val = _tail_val_split(to_sequence(train_data), train_labels, val_fraction)
    test = Split(to_sequence(test_data), test_labels)
    meta: dict = {
        "task": "scifar",
        "val_protocol": f"last {val_fraction:.0%} of the training batches",
        "normalized": normalize,
    }
    if normalize:
        mean = train.X.mean(axis=(0, 2), dtype=np.float64).astype(np.float32)
        std = train.X.std(axis=(0, 2), dtype=np.float64).astype(np.float32)
        for split in (train, val, test):
            split.X -= mean[None, :, None]
            split.X /= std[None, :, None]
        meta.update(channel_mean=mean, channel_std=std)
    return TaskData(train, val, test, n_classes=10, classes=list(CIFAR10_CLASSES), source=str(Path(root)), meta=meta)


# ---------------------------------------------------------------------------- offline stand-ins

DIGITS_SPLIT = (0.6, 0.2, 0.2)
"""Train/val/test shares of the stratified split of scikit-learn's 1797 digits."""


def _digits_splits(random_state: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """Stratified 60/20/20 split of sklearn's digits, as ((X, y) train, val, test), X (n, 64) in [0, 1]."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    X = (digits.data / 16.0).astype(np.float32)  # pixel values are 0..16
    y = digits.target.astype(np.int64)
    _, val_share, test_share = DIGITS_SPLIT
    X_rest, X_test, y_rest, y_test = train_test_split(X, y, test_size=test_share, stratify=y, random_state=random_state)
    X_train, X_val, y_train, y_val = train_test_split(
        X_rest, y_rest, test_size=val_share / (1.0 - test_share), stratify=y_rest, random_state=random_state
    )
    return (X_train, y_train), (X_val, y_val), (X_test, y_test)


def load_digits_sequential(random_state: int = 0) -> TaskData:
    """Offline sMNIST stand-in: sklearn's 8x8 digits read pixel by pixel.

    X: (n, 1, 64) float32 in [0, 1] (pixel value / 16), row-major; y: (n,) int64.
    Split: stratified 60/20/20 (1077 / 360 / 360), fixed by `random_state`.
    """
    splits = [Split(X[:, None, :], y) for X, y in _digits_splits(random_state)]
    return TaskData(
        *splits,
        n_classes=10,
        classes=[str(d) for d in range(10)],
        source="sklearn.datasets.load_digits",
        meta={
            "task": "sdigits",
            "stand_in_for": "smnist",
            "split": "stratified 60/20/20",
            "split_random_state": random_state,
        },
    )


def load_digits_permuted(seed: int = DEFAULT_PERMUTATION_SEED, random_state: int = 0) -> TaskData:
    """Offline psMNIST stand-in: `load_digits_sequential` with a fixed 64-step permutation.

    X: (n, 1, 64) float32; meta records "permutation_seed" and "permutation".
    """
    return permute_sequence_task(load_digits_sequential(random_state), seed)


def load_digits_rgb(random_state: int = 0) -> TaskData:
    """Offline sCIFAR stand-in: 8x8 digits tinted with a random colour per image.

    Each image is multiplied by its own RGB colour drawn uniformly from [0.3, 1]^3
    (seeded by `random_state`), so the input has sCIFAR's three channels and the colour
    is a nuisance that carries no class information, as it mostly is in CIFAR-10. It
    checks the 3-channel plumbing; it is far easier than sCIFAR and says nothing about
    sCIFAR accuracy.

    X: (n, 3, 64) float32 in [0, 1]; y: (n,) int64. Same split as `load_digits_sequential`.
    """
    rng = np.random.default_rng(random_state)
    splits = []
    for X, y in _digits_splits(random_state):
        colours = rng.uniform(0.3, 1.0, size=(len(X), 3, 1)).astype(np.float32)
        splits.append(Split(colours * X[:, None, :], y))
    return TaskData(
        *splits,
        n_classes=10,
        classes=[str(d) for d in range(10)],
        source="sklearn.datasets.load_digits",
        meta={
            "task": "sdigits_rgb",
            "stand_in_for": "scifar",
            "split": "stratified 60/20/20",
            "split_random_state": random_state,
            "transform": "per-image RGB tint drawn from U[0.3, 1]^3",
        },
    )
