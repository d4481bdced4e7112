"""Loaders for the Long Range Arena (LRA) benchmark in its released on-disk formats.

The LRA release (https://storage.googleapis.com/long-range-arena/lra_release.gz)
extracts to ``lra_release/``; every loader takes that directory, its parent, or the
task's own subfolder::

    lra_release/
      listops-1000/basic_{train,val,test}.tsv              ListOps        -> load_lra_listops
      tsv_data/new_aan_pairs.{train,eval,test}.tsv         Retrieval/AAN  -> load_lra_retrieval
      pathfinder32/curv_contour_length_14/                 Pathfinder     -> load_lra_pathfinder
        imgs/<k>/sample_<n>.png, metadata/<k>.npy
      pathfinder128/curv_contour_length_14/                Path-X         -> load_lra_pathx

Two LRA tasks are not in that archive: Text (IMDB, read here from the raw
``aclImdb/`` release, `load_lra_text`) and Image (CIFAR-10 python batches,
`load_lra_image`).

Token tasks return int64 ids with 0 reserved for padding and record the true
(unpadded, truncated) lengths; image tasks return float32 ``(n, 1, H*W)`` in [0, 1].
Byte-level tasks map byte b to id b + 1 (tfds' ByteTextEncoder, as in the LRA code),
so vocab_size is 257.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ssmts._warnings import caller_stacklevel
from ssmts.data.base import DataNotFoundError, Split, TaskData, require_files
from ssmts.data.layouts import AAN_DIR, AAN_FILES, LISTOPS_DIR, LISTOPS_FILES, PATHFINDER_DIFFICULTY
from ssmts.data.pixels import CIFAR10_CLASSES, read_cifar10

_LRA_HOW_TO_GET = (
    "Download https://storage.googleapis.com/long-range-arena/lra_release.gz (about 7 GB), "
    "extract it and pass the extracted lra_release/ directory."
)

# ---------------------------------------------------------------------------- ListOps

LISTOPS_MAX_LENGTH = 2000
LISTOPS_OPERATORS = ("[MIN", "[MAX", "[MED", "[SM")
LISTOPS_CLOSE = "X"
"""The closing bracket ``]`` after tokenization (the LRA pipeline rewrites it to X)."""

LISTOPS_VOCAB: dict[str, int] = {
    **{str(digit): digit + 1 for digit in range(10)},  # "0".."9" -> 1..10
    **{op: 11 + i for i, op in enumerate(LISTOPS_OPERATORS)},  # [MIN 11, [MAX 12, [MED 13, [SM 14
    LISTOPS_CLOSE: 15,
}
"""Fixed ListOps vocabulary; id 0 is padding, so vocab_size is 16."""

LISTOPS_VOCAB_SIZE = len(LISTOPS_VOCAB) + 1


def tokenize_listops(source: str) -> list[str]:
    """Split a ListOps expression into tokens the way the LRA pipeline does.

    ``]`` becomes ``X``, parentheses are dropped, the rest splits on whitespace:
    ``"( ( [MAX 2 ) 9 ] )"`` -> ``["[MAX", "2", "9", "X"]``.
    """
    return source.replace("]", LISTOPS_CLOSE).replace("(", " ").replace(")", " ").split()


def encode_listops(sources: Sequence[str], targets: Sequence[int], max_length: int = LISTOPS_MAX_LENGTH) -> Split:
    """Token ids of ListOps expressions, padded with 0 (truncated past `max_length`).

    Returns Split with X: (n, max_length) int64, y: (n,) int64 in 0..9,
    lengths: (n,) int64 token counts (after truncation).
    Raises ValueError naming the first unknown token or out-of-range target.
    """
    return _encode_listops(sources, targets, max_length)[0]


def _encode_listops(sources: Sequence[str], targets: Sequence[int], max_length: int) -> tuple[Split, int]:
    """`encode_listops`, plus how many expressions were longer than max_length."""
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} expressions but {len(targets)} targets")
    X = np.zeros((len(sources), max_length), dtype=np.int64)
    lengths = np.zeros(len(sources), dtype=np.int64)
    n_truncated = 0
    for row, source in enumerate(sources):
        tokens = tokenize_listops(source)
        n_truncated += len(tokens) > max_length
        try:
            ids = [LISTOPS_VOCAB[token] for token in tokens[:max_length]]
        except KeyError as error:
            raise ValueError(
                f"example {row} has the token {error.args[0]!r}, which is not in the ListOps "
                f"vocabulary {sorted(LISTOPS_VOCAB)}"
            ) from None
        X[row, : len(ids)] = ids
        lengths[row] = len(ids)
    y = np.asarray(targets, dtype=np.int64).reshape(-1)
    if y.size and (y.min() < 0 or y.max() > 9):
        raise ValueError(f"ListOps targets must be digits 0..9, found {y.min()}..{y.max()}")
    return Split(X, y, lengths), n_truncated


def read_listops_tsv(path: str | Path) -> tuple[list[str], list[int]]:
    """Read one ListOps TSV (header ``Source<TAB>Target``) into (sources, targets)."""
    path = Path(path)
    sources: list[str] = []
    targets: list[int] = []
    try:
        with open(path, encoding="utf-8", newline="") as f:
            header = f.readline().rstrip("\r\n").split("\t")
            if header != ["Source", "Target"]:
                raise DataNotFoundError(f"{path}:1: expected the header 'Source<TAB>Target', found {header}")
            for line_number, line in enumerate(f, start=2):
                line = line.rstrip("\r\n")
                if not line:
                    continue
                fields = line.split("\t")
                if len(fields) != 2 or not fields[1].strip().isdigit():
                    raise DataNotFoundError(
                        f"{path}:{line_number}: expected '<expression><TAB><digit>', found {line[:80]!r}"
                    )
                sources.append(fields[0])
                targets.append(int(fields[1]))
    except UnicodeDecodeError:
        raise _not_utf8(path) from None
    return sources, targets


def _not_utf8(path: Path) -> DataNotFoundError:
    """Where the first byte that is not UTF-8 lies: the text reader decodes in chunks, so the line it
    was reading says nothing; the file is read again as bytes, line by line."""
    with open(path, "rb") as f:
        for line_number, line in enumerate(f, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as error:
                return DataNotFoundError(
                    f"{path}:{line_number}: byte 0x{line[error.start]:02x} (column {error.start + 1}) is not "
                    "UTF-8 text; the released ListOps files are plain ASCII, so this one is damaged or not a "
                    f"ListOps TSV. {_LRA_HOW_TO_GET}"
                )
    return DataNotFoundError(f"{path} is not UTF-8 text. {_LRA_HOW_TO_GET}")  # changed since it was read


def _task_dir(root: Path, subdir: str, marker: str) -> Path:
    """Directory holding `marker`: root/subdir, root/lra_release/subdir, or root itself.

    Falls back to root/subdir so that `require_files` reports what is missing there.
    """
    for candidate in (root / subdir, root / "lra_release" / subdir, root):
        if (candidate / marker).exists():
            return candidate
    return root / subdir


def listops_task(
    splits: dict[str, tuple[Sequence[str], Sequence[int]]], max_length: int, source: str, meta: dict
) -> TaskData:
    """TaskData from {"train"|"val"|"test": (sources, targets)}; shared by loader and generator.

    Raises ValueError naming the split and example with an unknown token.
    """
    encoded, n_truncated = {}, {}
    for name in ("train", "val", "test"):
        sources, targets = splits[name]
        try:
            encoded[name], n_truncated[name] = _encode_listops(sources, targets, max_length)
        except ValueError as error:
            raise ValueError(f"ListOps {name} split: {error}") from None
    return TaskData(
        encoded["train"],
        encoded["val"],
        encoded["test"],
        n_classes=10,
        vocab_size=LISTOPS_VOCAB_SIZE,
        classes=[str(d) for d in range(10)],
        source=source,
        meta={
            "task": "listops",
            "max_length": max_length,
            "vocab": dict(LISTOPS_VOCAB),
            "n_truncated": n_truncated,
            **meta,
        },
    )


def load_lra_listops(root: str | Path, max_length: int = LISTOPS_MAX_LENGTH) -> TaskData:
    """LRA ListOps: nested MIN/MAX/MED/SM expressions, 10 classes (the value 0..9).

    X: (n, max_length) int64 ids from `LISTOPS_VOCAB` (0 = padding); y: (n,) int64;
    lengths: (n,) token counts (after truncation; meta["n_truncated"] counts the
    longer ones). Splits are the released files (96000 / 2000 / 2000).
    """
    root = Path(root).expanduser()
    directory = _task_dir(root, LISTOPS_DIR, LISTOPS_FILES["train"])
    how = _LRA_HOW_TO_GET + " Or generate a stand-in with `python -m ssmts.data.make_listops --out DIR`."
    require_files(directory, list(LISTOPS_FILES.values()), how)
    splits = {}
    for name, filename in LISTOPS_FILES.items():
        sources, targets = read_listops_tsv(directory / filename)
        if not sources:
            raise DataNotFoundError(f"{directory / filename} has a header but no examples")
        splits[name] = (sources, targets)
    try:
        return listops_task(splits, max_length, str(directory), {"split_protocol": "released files"})
    except ValueError as error:
        raise DataNotFoundError(f"{directory}: {error} (is this a ListOps release?)") from None


# ---------------------------------------------------------------------------- byte-level text

BYTE_VOCAB_SIZE = 257
"""Byte-level vocabulary: ids 1..256 are bytes 0..255, id 0 is padding."""


def encode_bytes(documents: Iterable[bytes], max_length: int) -> tuple[np.ndarray, np.ndarray]:
    """Byte ids (byte value + 1) of each document, truncated/padded with 0 to `max_length`.

    Returns (X (n, max_length) int64, lengths (n,) int64).
    """
    documents = list(documents)
    X = np.zeros((len(documents), max_length), dtype=np.int64)
    lengths = np.zeros(len(documents), dtype=np.int64)
    for row, document in enumerate(documents):
        lengths[row] = _put_bytes(X[row], document)
    return X, lengths


def _put_bytes(out: np.ndarray, document: bytes) -> int:
    """Write the byte ids of `document` into the zeroed row `out`; returns how many fit."""
    head = np.frombuffer(document[: len(out)], dtype=np.uint8)
    out[: len(head)] = head
    out[: len(head)] += 1
    return len(head)


# ---------------------------------------------------------------------------- Retrieval (AAN)

AAN_MAX_LENGTH = 4000


def read_aan_tsv(path: str | Path, max_length: int = AAN_MAX_LENGTH, max_samples: int | None = None) -> Split:
    """Read one AAN pairs TSV (no header; label, id1, id2, text1, text2).

    Returns Split with X: (n, 2, max_length) int64 byte ids of (text1, text2),
    y: (n,) int64 in {0, 1}, lengths: (n, 2) int64 byte counts after truncation.
    Quotes are not special (the LRA reader sets use_quote_delim=False).
    """
    path = Path(path)
    pairs, labels = [], []
    with open(path, "rb") as f:
        for line_number, line in enumerate(f, start=1):
            if max_samples is not None and len(labels) >= max_samples:
                break
            line = line.rstrip(b"\r\n")
            if not line:
                continue
            fields = line.split(b"\t")
            if len(fields) != 5:
                raise DataNotFoundError(
                    f"{path}:{line_number}: expected 5 tab-separated fields "
                    f"(label, id1, id2, text1, text2), found {len(fields)}"
                )
            try:
                label = float(fields[0])
            except ValueError:
                label = -1.0
            if label not in (0.0, 1.0):
                raise DataNotFoundError(f"{path}:{line_number}: the label must be 0 or 1, found {fields[0][:20]!r}")
            labels.append(int(label))
            # Keep only what is used: the papers can be far longer than max_length.
            pairs.append((fields[3][:max_length], fields[4][:max_length]))
    X = np.zeros((len(pairs), 2, max_length), dtype=np.int64)
    lengths = np.zeros((len(pairs), 2), dtype=np.int64)
    for row, pair in enumerate(pairs):
        for side, document in enumerate(pair):
            lengths[row, side] = _put_bytes(X[row, side], document)
    return Split(X, np.asarray(labels, dtype=np.int64), lengths)


def load_lra_retrieval(root: str | Path, max_length: int = AAN_MAX_LENGTH, max_samples: int | None = None) -> TaskData:
    """LRA Retrieval (ACL Anthology Network): do two papers cite each other? 2 classes.

    X: (n, 2, max_length) int64 byte ids, X[:, 0] the first and X[:, 1] the second
    document; y: (n,) int64; lengths: (n, 2) byte counts per document. Models encode
    both documents with one shared encoder into y1, y2 and classify
    [y1, y2, y1 * y2, y1 - y2] (the LRA two-tower head).
    max_samples: read at most this many pairs per split (the full train split is
    147086 pairs, about 9.4 GB as int64 at length 4000).
    """
    root = Path(root).expanduser()
    directory = _task_dir(root, AAN_DIR, AAN_FILES["train"])
    require_files(directory, list(AAN_FILES.values()), _LRA_HOW_TO_GET)
    splits = {name: read_aan_tsv(directory / filename, max_length, max_samples) for name, filename in AAN_FILES.items()}
    for name, split in splits.items():
        if len(split) == 0:
            raise DataNotFoundError(f"{directory / AAN_FILES[name]} holds no examples")
    return TaskData(
        splits["train"],
        splits["val"],
        splits["test"],
        n_classes=2,
        vocab_size=BYTE_VOCAB_SIZE,
        classes=["unrelated", "citation"],
        source=str(directory),
        meta={
            "task": "retrieval",
            "max_length": max_length,
            "tokenizer": "bytes (id = byte + 1)",
            "input_layout": "X[:, 0] = text1, X[:, 1] = text2",
            "max_samples": max_samples,
            "split_protocol": "released files (eval file = val)",
        },
    )


# ---------------------------------------------------------------------------- Text (IMDB)

IMDB_DIR = "aclImdb"
IMDB_MAX_LENGTH = 4096
IMDB_CLASSES = ["neg", "pos"]
IMDB_VAL_FRACTION = 0.1
_IMDB_HOW_TO_GET = (
    "Download https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz and extract it "
    "so that aclImdb/ lies in this directory."
)


def _read_imdb_split(directory: Path) -> tuple[list[bytes], list[int]]:
    documents, labels = [], []
    for label, name in enumerate(IMDB_CLASSES):
        for path in sorted((directory / name).glob("*.txt")):
            documents.append(path.read_bytes())
            labels.append(label)
    return documents, labels


def load_lra_text(
    root: str | Path,
    max_length: int = IMDB_MAX_LENGTH,
    val_fraction: float = IMDB_VAL_FRACTION,
    seed: int = 0,
) -> TaskData:
    """LRA Text: IMDB sentiment at byte level, 2 classes (neg = 0, pos = 1).

    Reads the raw release ``aclImdb/{train,test}/{pos,neg}/*.txt`` (the unlabelled
    ``train/unsup`` is ignored). X: (n, max_length) int64 byte ids (0 = padding);
    y: (n,) int64; lengths: (n,) byte counts after truncation.
    Splits: a seeded random `val_fraction` (default 10%, 2500 reviews) of the training
    reviews is validation, the rest train (22500); test is the official 25000. (The
    LRA code has no validation split and reports test.)
    """
    root = Path(root).expanduser()
    directory = _task_dir(root, IMDB_DIR, "train")
    expected = [f"{split}/{label}" for split in ("train", "test") for label in IMDB_CLASSES]
    require_files(directory, expected, _IMDB_HOW_TO_GET)
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must lie in (0, 1), got {val_fraction}")
    train_docs, train_labels = _read_imdb_split(directory / "train")
    test_docs, test_labels = _read_imdb_split(directory / "test")
    for split, docs in (("train", train_docs), ("test", test_docs)):
        if not docs:
            raise DataNotFoundError(f"{directory / split}/{{pos,neg}} holds no .txt reviews. {_IMDB_HOW_TO_GET}")
    X, lengths = encode_bytes(train_docs, max_length)
    y = np.asarray(train_labels, dtype=np.int64)
    n_val = int(round(len(y) * val_fraction))
    order = np.random.default_rng(seed).permutation(len(y))
    val_index, train_index = np.sort(order[:n_val]), np.sort(order[n_val:])
    X_test, lengths_test = encode_bytes(test_docs, max_length)
    return TaskData(
        Split(X[train_index], y[train_index], lengths[train_index]),
        Split(X[val_index], y[val_index], lengths[val_index]),
        Split(X_test, np.asarray(test_labels, dtype=np.int64), lengths_test),
        n_classes=2,
        vocab_size=BYTE_VOCAB_SIZE,
        classes=list(IMDB_CLASSES),
        source=str(directory),
        meta={
            "task": "text",
            "max_length": max_length,
            "tokenizer": "bytes (id = byte + 1)",
            "val_protocol": f"random {val_fraction:.0%} of train, seed {seed}",
        },
    )


# ---------------------------------------------------------------------------- Image (CIFAR-10)

LUMA_WEIGHTS = np.array([0.299, 0.587, 0.114], dtype=np.float32)
"""ITU-R BT.601 luma weights (tf.image.rgb_to_grayscale, used by LRA, rounds them to 0.2989/0.5870/0.1140)."""

CIFAR_VAL_SIZE = 5000


def load_lra_image(root: str | Path, val_size: int = CIFAR_VAL_SIZE) -> TaskData:
    """LRA Image: CIFAR-10 in grayscale, one pixel per step, 10 classes.

    Reads ``cifar-10-batches-py/`` under `root`. X: (n, 1, 1024) float32 luma in [0, 1]
    (0.299 R + 0.587 G + 0.114 B, not rounded to integers); y: (n,) int64.
    Splits: the first 45000 training images / the last `val_size` (5000) / the 10000
    test images, matching the LRA code's train[:90%] / train[90%:] / test.
    """
    train_data, train_labels, test_data, test_labels = read_cifar10(root)
    if not 0 < val_size < len(train_data):
        raise ValueError(f"val_size must lie in 1..{len(train_data) - 1}, got {val_size}")

    def to_gray(data: np.ndarray) -> np.ndarray:
        rgb = data.reshape(len(data), 3, 1024).astype(np.float32)
        gray = np.einsum("c,ncl->nl", LUMA_WEIGHTS, rgb) / np.float32(255.0)
        return np.clip(gray, 0.0, 1.0)[:, None, :]

    X = to_gray(train_data)
    n_train = len(X) - val_size
    return TaskData(
        Split(X[:n_train], train_labels[:n_train]),
        Split(X[n_train:], train_labels[n_train:]),
        Split(to_gray(test_data), test_labels),
        n_classes=10,
        classes=list(CIFAR10_CLASSES),
        source=str(Path(root)),
        meta={
            "task": "image",
            "grayscale": "ITU-R 601 luma 0.299/0.587/0.114",
            "val_protocol": f"last {val_size} of the training batches",
        },
    )


# ---------------------------------------------------------------------------- Pathfinder

PATHFINDER_SPLIT = (0.8, 0.1, 0.1)
PATHFINDER_SPLIT_SEED = 0


def _numeric_key(path: Path) -> tuple[int, str]:
    """Sort metadata/10.npy after metadata/9.npy."""
    return (int(path.stem), path.name) if path.stem.isdigit() else (10**12, path.name)


def read_pathfinder_metadata(directory: str | Path) -> list[tuple[str, str, int]]:
    """Read every text ``metadata/*.npy`` under a Pathfinder difficulty directory.

    Each line holds whitespace-separated fields: image folder (``imgs/0``), file name
    (``sample_0.png``), an index, the label (0/1), then generator settings.
    Returns [(image folder, file name, label)] in metadata-file (numeric) and line order.
    """
    directory = Path(directory)
    entries = []
    for meta_path in sorted((directory / "metadata").glob("*.npy"), key=_numeric_key):
        text = meta_path.read_bytes().decode("utf-8", errors="replace")
        for line_number, line in enumerate(text.splitlines(), start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) < 4 or fields[3] not in ("0", "1"):
                raise DataNotFoundError(
                    f"{meta_path}:{line_number}: expected 'imgs/<k> sample_<n>.png <index> <label 0|1> ...', "
                    f"found {line[:80]!r} (the metadata .npy files are text, not numpy arrays)"
                )
            entries.append((fields[0], fields[1], int(fields[3])))
    return entries


def _load_gray_image(path: Path, resolution: int) -> np.ndarray | None:
    """(resolution * resolution,) float32 in [0, 1], or None when the file is empty or unreadable."""
    from PIL import Image, UnidentifiedImageError

    try:
        if path.stat().st_size == 0:
            return None
        with Image.open(path) as image:
            image.load()
            gray = image.convert("L")
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError):
        return None  # SyntaxError/ValueError: PIL's answers to some truncated PNGs
    if gray.size != (resolution, resolution):
        raise DataNotFoundError(
            f"{path} is {gray.size[0]}x{gray.size[1]} but resolution={resolution} was asked for; "
            "point the loader at the matching pathfinder<res> directory or change resolution"
        )
    return np.asarray(gray, dtype=np.float32).reshape(-1) / np.float32(255.0)


def split_indices(n: int, fractions: Sequence[float], seed: int, limit: int | None = None) -> list[np.ndarray]:
    """Deterministic random split of range(n) by `fractions` (summing to 1); each part sorted.

    The order is `numpy.random.default_rng(seed).permutation(n)`, cut into consecutive
    parts (the last takes the rounding remainder). limit: use only the first `limit`
    indices of that order.
    """
    if abs(sum(fractions) - 1.0) > 1e-9:
        raise ValueError(f"split fractions must sum to 1, got {fractions}")
    order = np.random.default_rng(seed).permutation(n)[:limit]
    bounds = np.round(np.cumsum(fractions)[:-1] * len(order)).astype(int)
    return [np.sort(part) for part in np.split(order, bounds)]


def pathfinder_task_from_arrays(X: np.ndarray, y: np.ndarray, seed: int, source: str, meta: dict) -> TaskData:
    """Split (n, 1, L) images 80/10/10 with `split_indices`; shared by loader and generator."""
    train, val, test = (Split(X[i], y[i]) for i in split_indices(len(y), PATHFINDER_SPLIT, seed))
    return TaskData(train, val, test, n_classes=2, classes=["disconnected", "connected"], source=source, meta=meta)


def load_lra_pathfinder(
    root: str | Path,
    resolution: int = 32,
    difficulty: str = PATHFINDER_DIFFICULTY,
    seed: int = PATHFINDER_SPLIT_SEED,
    max_samples: int | None = None,
) -> TaskData:
    """LRA Pathfinder: are the two circles joined by one dashed path? 2 classes.

    Reads ``pathfinder<resolution>/<difficulty>/`` under `root` (or that directory
    itself): every text ``metadata/*.npy`` and the PNGs it names.
    X: (n, 1, resolution**2) float32 grayscale in [0, 1], row-major; y: (n,) int64.
    Split: every listed example is assigned 80/10/10 to train/val/test by a random
    permutation from `numpy.random.default_rng(seed)`, before images are read.
    max_samples: keep only the first max_samples of that permutation (then split them
    80/10/10); the full 128x128 release is 200000 images, about 13 GB as float32.
    Empty or unreadable images (the release has one) are skipped with a warning; a listed image
    that is missing is refused (an incomplete copy).
    """
    root = Path(root).expanduser()
    folder = f"pathfinder{resolution}"
    directory = root
    for candidate in (root / folder / difficulty, root / "lra_release" / folder / difficulty, root / difficulty, root):
        if (candidate / "metadata").is_dir():
            directory = candidate
            break
    else:
        require_files(
            root,
            [f"{folder}/{difficulty}/metadata", f"{folder}/{difficulty}/imgs"],
            _LRA_HOW_TO_GET + " Or generate a stand-in with `python -m ssmts.data.make_pathfinder --out DIR`.",
        )
    entries = read_pathfinder_metadata(directory)
    if not entries:
        raise DataNotFoundError(f"{directory / 'metadata'} holds no *.npy metadata lines. {_LRA_HOW_TO_GET}")
    # Assign splits on the metadata list, before reading images, so an unreadable image
    # only removes itself and never moves another example to a different split.
    parts = split_indices(len(entries), PATHFINDER_SPLIT, seed, limit=max_samples)
    n_listed = sum(len(part) for part in parts)
    # An image the metadata lists but the copy lacks is an incomplete download, not the release's one
    # empty image: reading on would train on lopsided splits.
    missing = [
        directory / entries[i][0] / entries[i][1]
        for part in parts
        for i in part
        if not (directory / entries[i][0] / entries[i][1]).is_file()
    ]
    if missing:
        raise DataNotFoundError(
            f"{len(missing)} of the {n_listed} Pathfinder images listed in {directory / 'metadata'} are missing "
            f"(first: {missing[0]}): the copy is incomplete. {_LRA_HOW_TO_GET}"
        )
    splits, skipped = [], []
    for part in parts:
        X = np.empty((len(part), 1, resolution * resolution), dtype=np.float32)
        y = np.empty(len(part), dtype=np.int64)
        kept = 0
        for index in part:
            image_dir, file_name, label = entries[index]
            path = directory / image_dir / file_name
            pixels = _load_gray_image(path, resolution)
            if pixels is None:
                skipped.append(path)
                continue
            X[kept, 0], y[kept] = pixels, label
            kept += 1
        splits.append(Split(X[:kept], y[:kept]))
    if skipped:
        warnings.warn(
            f"skipped {len(skipped)} of {n_listed} Pathfinder images that are empty or unreadable "
            f"(first: {skipped[0]})",
            stacklevel=caller_stacklevel(),
        )
    if all(len(split) == 0 for split in splits):
        raise DataNotFoundError(f"none of the images listed in {directory / 'metadata'} could be read")
    return TaskData(
        *splits,
        n_classes=2,
        classes=["disconnected", "connected"],
        source=str(directory),
        meta={
            "task": f"pathfinder{resolution}",
            "difficulty": difficulty,
            "resolution": resolution,
            "split_protocol": "seeded random 80/10/10",
            "split_seed": seed,
            "n_skipped_images": len(skipped),
            "max_samples": max_samples,
        },
    )


def load_lra_pathx(root: str | Path, **kwargs) -> TaskData:
    """LRA Path-X: Pathfinder at 128x128, X: (n, 1, 16384) float32. See `load_lra_pathfinder`."""
    return load_lra_pathfinder(root, resolution=128, **kwargs)


__all__ = [
    "BYTE_VOCAB_SIZE",
    "LISTOPS_VOCAB",
    "LISTOPS_VOCAB_SIZE",
    "encode_bytes",
    "encode_listops",
    "listops_task",
    "load_lra_image",
    "load_lra_listops",
    "load_lra_pathfinder",
    "load_lra_pathx",
    "load_lra_retrieval",
    "load_lra_text",
    "pathfinder_task_from_arrays",
    "read_aan_tsv",
    "read_listops_tsv",
    "read_pathfinder_metadata",
    "split_indices",
    "tokenize_listops",
]
