"""Containers shared by every data loader and generator.

Loaders return plain numpy arrays so that the same data feeds the sklearn
estimators, the sktime estimators and the task pipelines without conversion.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


class DataNotFoundError(FileNotFoundError):
    """A data directory is missing or malformed.

    The message says which files were expected where, and how to obtain them.
    """


@dataclass
class Split:
    """One split of a sequence data set.

    X: (n, channels, length) float32 for signals, or (n, length) int64 token ids
       (0 is reserved for padding) for token tasks.
    y: (n,) integer class labels or float targets; (n, k) for multi-output.
    lengths: (n,) true lengths when sequences were padded, else None.
    """

    X: np.ndarray
    y: np.ndarray
    lengths: np.ndarray | None = None

    def __post_init__(self) -> None:
        if len(self.X) != len(self.y):
            raise ValueError(f"X has {len(self.X)} samples but y has {len(self.y)}")
        if self.lengths is not None and len(self.lengths) != len(self.X):
            raise ValueError(f"lengths has {len(self.lengths)} entries but X has {len(self.X)} samples")

    def __len__(self) -> int:
        return len(self.X)

    def subset(self, index: np.ndarray | slice) -> "Split":
        return Split(self.X[index], self.y[index], None if self.lengths is None else self.lengths[index])


@dataclass
class TaskData:
    """Train/validation/test splits plus what a model needs to know about them.

    n_classes: number of classes for classification, None for regression.
    vocab_size: number of token ids (including padding id 0) for token inputs, else None.
    sample_rate: samples per second of signal inputs (Hz), None where it has no meaning.
    classes: class names in label order, when known.
    source: where the data came from (a path, or "synthetic: <generator>").
    meta: anything else worth recording with results (split protocol, permutation seed ...).
    """

    train: Split
    val: Split
    test: Split
    n_classes: int | None = None
    vocab_size: int | None = None
    sample_rate: float | None = None
    classes: list[str] | None = None
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


def require_files(root: Path, relative_paths: list[str], how_to_get: str) -> None:
    """Raise DataNotFoundError listing every missing file under `root`; a file reached through a
    symbolic link loop is an OSError (ELOOP) naming the link, as the file is there but broken."""
    root = Path(root)
    if not root.is_dir():
        # a file where the directory (or one above it) should be: --data-dir given a file's path
        file = next((p for p in (root, *root.parents) if p.exists() and not p.is_dir()), None)
        problem = "does not exist" if file is None else f"is not a directory ({file} is a file)"
        raise DataNotFoundError(
            f"data directory {root} {problem}; expected {', '.join(relative_paths)} inside it. {how_to_get}"
        )
    for relative in relative_paths:
        _refuse_symlink_loop(root, relative)
    missing = [p for p in relative_paths if not (root / p).exists()]
    if missing:
        raise DataNotFoundError(f"data directory {root} is missing {', '.join(missing)}. {how_to_get}")


def _refuse_symlink_loop(root: Path, relative: str) -> None:
    """Raise OSError(ELOOP) naming the first link on the way from `root` to root/relative that loops
    (Path.exists() answers False for it, which would call the file missing)."""
    path = root
    for part in Path(relative).parts:
        path = path / part
        try:
            os.stat(path)
        except OSError as error:
            if error.errno != errno.ELOOP:
                return  # missing, or unreadable: the caller's message says which file it expected
            raise OSError(
                errno.ELOOP,
                f"data directory {root}: {path} is a symbolic link loop (following its links comes back around "
                f"to it, never to a file), so {relative} cannot be read; repair the link (ls -l {path})",
            ) from None
