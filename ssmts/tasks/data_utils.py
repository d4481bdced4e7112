"""TaskData helpers of the task pipelines: subsets, caching, and conversion to Trainer tensors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ssmts.data.base import Split, TaskData
from ssmts.training import LazyRows, SequenceData


def _subset_index(n: int, limit: int | None, seed: int) -> np.ndarray | None:
    """The sorted indices of a seeded random subset of `limit` of n samples (kept in their order); None to
    keep all."""
    if limit is None or n <= limit:
        return None
    if limit < 1:
        raise ValueError(f"a sample limit must be >= 1, got {limit}")
    return np.sort(np.random.default_rng(seed).choice(n, size=int(limit), replace=False))


def limit_task_data(data: TaskData, max_train: int | None, max_eval: int | None, seed: int = 0) -> TaskData:
    """Cap the training split at max_train and validation/test at max_eval samples (seeded subsets);
    a loader's list of each split's files (meta["files"]) keeps the files of the samples kept."""
    if max_train is None and max_eval is None:
        return data
    sizes = {"train": len(data.train), "val": len(data.val), "test": len(data.test)}
    files = dict(data.meta.get("files") or {})
    for offset, (name, limit) in enumerate([("train", max_train), ("val", max_eval), ("test", max_eval)]):
        split = getattr(data, name)
        index = _subset_index(len(split), limit, seed + offset)
        if index is None:
            continue
        setattr(data, name, split.subset(index))
        if isinstance(files.get(name), list) and len(files[name]) == len(split):
            files[name] = [files[name][i] for i in index]
    data.meta = dict(
        data.meta, subset={"from_sizes": sizes, "max_train": max_train, "max_eval": max_eval, "seed": seed}
    )
    if files:
        data.meta["files"] = files
    return data


def json_safe(value: Any) -> Any:
    """`value` with numpy scalars/arrays, tuples and paths turned into JSON types."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist() if value.size <= 64 else f"<array shape {list(value.shape)}>"
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def save_task_arrays(data: TaskData, directory: str | Path) -> None:
    """Write the splits of `data` as .npy files (train_X.npy, train_y.npy, ...) and its descriptors
    as header.json into `directory`, built in a temporary directory and renamed into place."""
    directory = Path(directory)
    staging = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in ("train", "val", "test"):
        split = getattr(data, name)
        np.save(staging / f"{name}_X.npy", np.asarray(split.X))
        np.save(staging / f"{name}_y.npy", np.asarray(split.y))
        if split.lengths is not None:
            np.save(staging / f"{name}_lengths.npy", np.asarray(split.lengths))
    header = {
        "n_classes": data.n_classes,
        "vocab_size": data.vocab_size,
        "sample_rate": data.sample_rate,
        "classes": data.classes,
        "source": data.source,
        "meta": json_safe(data.meta),
    }
    (staging / "header.json").write_text(json.dumps(header))
    shutil.rmtree(directory, ignore_errors=True)
    staging.replace(directory)


def load_task_arrays(directory: str | Path, mmap: bool = True) -> TaskData:
    """Read what `save_task_arrays` wrote; with mmap the inputs X stay on disk (numpy memmaps,
    read batch by batch by the training path), so a large set needs no room in memory."""
    directory = Path(directory)
    try:
        header = json.loads((directory / "header.json").read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{directory} is not a readable task cache ({error})") from error
    except RecursionError:
        raise ValueError(f"{directory} is not a readable task cache (header.json is nested too deeply)") from None
    splits = []
    for name in ("train", "val", "test"):
        lengths = directory / f"{name}_lengths.npy"
        splits.append(
            Split(
                np.load(directory / f"{name}_X.npy", mmap_mode="r" if mmap else None, allow_pickle=False),
                np.load(directory / f"{name}_y.npy", allow_pickle=False),
                np.load(lengths, allow_pickle=False) if lengths.exists() else None,
            )
        )
    _check_class_count(directory, header, splits)
    _check_vocabulary(directory, header, splits)
    return TaskData(
        *splits,
        n_classes=header["n_classes"],
        vocab_size=header["vocab_size"],
        sample_rate=header["sample_rate"],
        classes=header["classes"],
        source=header["source"],
        meta=dict(header["meta"], cached_dir=str(directory)),
    )


def _check_class_count(directory: Path, header: dict, splits: list[Split]) -> None:
    """The header's n_classes against the labels and class names the cache holds: the network's
    output layer has n_classes units, so a damaged count would be a crash in the loss or an
    allocation of any size."""
    n_classes = header.get("n_classes")
    if n_classes is None:  # regression
        return
    where = directory / "header.json"
    fix = f"the cache is damaged: delete {directory} and run again (the stand-in is rebuilt)"
    if not isinstance(n_classes, int) or isinstance(n_classes, bool):
        raise ValueError(f"{where} declares n_classes={n_classes!r}, not a whole number of classes; {fix}")
    labels = {}
    for name, split in zip(("train", "val", "test"), splits):
        y = np.asarray(split.y)
        if y.dtype.kind not in "iu":
            raise ValueError(f"{directory / f'{name}_y.npy'} holds {y.dtype} labels, not class numbers; {fix}")
        labels[name] = y.reshape(-1)
    n_labels = sum(y.size for y in labels.values())
    highest = max((int(y.max()) for y in labels.values() if y.size), default=None)
    if n_classes < 2:
        held = "" if highest is None else f" (its labels go up to {highest})"
        raise ValueError(f"{where} declares n_classes={n_classes}: a classifier needs 2 or more{held}; {fix}")
    names = header.get("classes")
    if isinstance(names, list) and len(names) != n_classes:
        raise ValueError(f"{where} declares n_classes={n_classes}, but names {len(names)} classes; {fix}")
    if n_classes > max(n_labels, (highest or 0) + 1):
        raise ValueError(
            f"{where} declares n_classes={n_classes}, but its {n_labels} labels go up to {highest}: "
            f"more classes than labelled samples; {fix}"
        )
    for name, y in labels.items():
        outside = np.flatnonzero((y < 0) | (y >= n_classes))
        if outside.size:
            raise ValueError(
                f"{directory / f'{name}_y.npy'} holds the label {y[outside[0]]} at position {outside[0]}, "
                f"outside the classes 0..{n_classes - 1} of {where} (n_classes={n_classes}); {fix}"
            )


def _check_vocabulary(directory: Path, header: dict, splits: list[Split]) -> None:
    """The header's vocab_size against the token ids the cache holds: the network's embedding table
    has vocab_size rows, so a damaged size would be an index error in the embedding or an allocation
    of any size. Ids never present in the cache cannot be learned, so a vocabulary larger than both
    the highest id + 1 and the number of tokens held is refused, as n_classes is beside the labels."""
    vocab_size = header.get("vocab_size")
    if vocab_size is None:  # signal inputs
        return
    where = directory / "header.json"
    fix = f"the cache is damaged: delete {directory} and run again (the stand-in is rebuilt)"
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
        raise ValueError(f"{where} declares vocab_size={vocab_size!r}, not a whole number of token ids; {fix}")
    if vocab_size < 2:
        raise ValueError(
            f"{where} declares vocab_size={vocab_size}: a vocabulary holds the padding id 0 and at least one "
            f"token, so it needs 2 or more; {fix}"
        )
    n_tokens, highest = 0, None
    for name, split in zip(("train", "val", "test"), splits):
        X = split.X
        if X.dtype.kind not in "iu":
            raise ValueError(
                f"{where} declares vocab_size={vocab_size}, but {directory / f'{name}_X.npy'} holds {X.dtype} "
                f"values, not token ids; {fix}"
            )
        if X.size == 0:
            continue
        low, high = int(X.min()), int(X.max())
        if low < 0 or high >= vocab_size:
            flat = np.asarray(X).reshape(-1)
            position = int(np.flatnonzero((flat < 0) | (flat >= vocab_size))[0])
            raise ValueError(
                f"{directory / f'{name}_X.npy'} holds the token id {flat[position]} at flat position {position}, "
                f"outside the ids 0..{vocab_size - 1} of {where} (vocab_size={vocab_size}); {fix}"
            )
        n_tokens += X.size
        highest = high if highest is None else max(highest, high)
    if vocab_size > max(n_tokens, (highest or 0) + 1):
        raise ValueError(
            f"{where} declares vocab_size={vocab_size}, but its {n_tokens} tokens go up to the id {highest}: "
            f"more token ids than tokens held; {fix}"
        )


def length_mask(lengths: np.ndarray | None, length: int) -> torch.Tensor | None:
    """(..., ) true lengths -> (..., length) bool mask, True on real steps; None if lengths is None."""
    if lengths is None:
        return None
    return torch.arange(length)[None, :] < torch.as_tensor(np.asarray(lengths))[..., None]


def to_sequence_data(
    split: Split, inputs: str, kind: str, target_mean: float = 0.0, target_scale: float = 1.0
) -> SequenceData:
    """Trainer tensors of a split.

    inputs "tokens": x (n, L) int64 + mask (n, L) from lengths; "token_pairs": x (n, 2, L)
    int64 + mask (n, 2, L); "signal": x (n, C, L) float32, no mask (clips are zero-padded
    to a fixed length, as the S4 code feeds them). Classification y: (n,) int64; regression
    y: (n, 1) float32 (one target, like the network's output), standardized as
    (y - target_mean) / target_scale.
    """
    if inputs in ("tokens", "token_pairs"):
        x = torch.from_numpy(np.ascontiguousarray(split.X)).long()
        mask = length_mask(split.lengths, x.shape[-1])
    elif inputs == "signal":
        # A memory-mapped split (a task cache) stays on disk and is read batch by batch.
        x = (
            LazyRows(split.X)
            if isinstance(split.X, np.memmap)
            else torch.from_numpy(np.ascontiguousarray(split.X, dtype=np.float32))
        )
        mask = None
    else:
        raise ValueError(f"unknown input kind {inputs!r}")
    if kind == "classification":
        y = torch.from_numpy(np.asarray(split.y, dtype=np.int64))
    else:
        y = torch.from_numpy(((np.asarray(split.y, dtype=np.float64) - target_mean) / target_scale).astype(np.float32))
        y = y.reshape(-1, 1)
    return SequenceData(x, y, mask)
