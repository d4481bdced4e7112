"""Turning user input into (n, channels, length) tensors plus masks: float64, or float32 as given
(the estimators standardize in float64 and hand the network float32).

Accepted:
  * 2D array-like (n_samples, n_timepoints): one univariate series per row (sklearn style);
  * 3D array (n_samples, n_channels, n_timepoints): sktime/aeon "numpy3D";
  * a list of 1D (L_i,) or 2D (C, L_i) arrays of different lengths: padded at the end and masked.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.utils.validation import check_array

from ..training import LazyRows


@dataclass
class PreparedInput:
    x: torch.Tensor | LazyRows  # (n, C, L) float64 (float32 X kept as given), or a memmap's rows read batch by batch
    mask: torch.Tensor | None  # (n, L) bool, None when every series has full length
    lengths: np.ndarray  # (n,) true lengths
    ragged: bool  # came as a list of unequal lengths
    n_features: int  # X.shape[1] of the array form (timepoints for 2D, channels for 3D)
    ndim: int  # 2 or 3 (ragged lists count as 3)
    channel_range: np.ndarray | None = None  # (2, C) float64 min and max of a memmap's float32 values per channel


FLOAT32_MAX = float(np.finfo(np.float32).max)
# The smallest magnitude whose float32 keeps all 24 bits of precision for the values within 2^-23 of it:
# data whose largest |x| is below it become subnormal numbers or zeros in float32.
FLOAT32_SMALLEST_FULL = float(np.finfo(np.float32).tiny) * 2.0**23


def _float32_peak(arr: np.ndarray, name: str) -> float:
    """The largest |value| of arr (0 for none), refusing values a float32 network input could not hold
    (infinity). arr keeps its precision: the standardization is formed in float64 and cast to the network's
    float32 after it, so that a large level does not swallow small variations, as 1e8 + sin(t) in float32
    would."""
    peak = max(float(arr.max()), -float(arr.min())) if arr.size else 0.0  # no |arr| copy of a large X
    if peak > FLOAT32_MAX:
        raise ValueError(
            f"{name} has values beyond the float32 range (|x| > {FLOAT32_MAX:.3g}); the network computes "
            "in float32, so rescale the data first"
        )
    return peak


def _check_not_below_float32(peak: float, name: str) -> None:
    """Refuse data whose largest magnitude `peak` is positive but so small that float32 turns the data into
    zeros or subnormal numbers (series at 1e-150 would all read as zeros: every prediction the same)."""
    if 0.0 < peak < FLOAT32_SMALLEST_FULL:
        raise ValueError(
            f"{name} has no value above {FLOAT32_SMALLEST_FULL:.3g} in magnitude (the largest is {peak:.3g}); the "
            "network computes in float32, where such values lose their precision or become 0, so rescale the "
            "data first"
        )


def _float_array(X, input_name: str, keep_float32: bool = False, **kwargs) -> np.ndarray:
    """check_array to float64 (float32 kept as it is with keep_float32: a large X is not copied at twice its
    size); text that is not a number is named as such (numpy says only "could not convert string to float")."""
    try:
        dtype = (np.float64, np.float32) if keep_float32 else np.float64
        return check_array(X, dtype=dtype, input_name=input_name, **kwargs)
    except ValueError as error:
        if "could not convert string to float" not in str(error):
            raise
        raise ValueError(
            f"{input_name} must hold numbers, but it holds text ({error}); convert or encode it as numbers first"
        ) from None


def _tensor_of(arr: np.ndarray) -> torch.Tensor:
    """A tensor on arr's memory (no copy of a large X), which is only ever read: a read-only array (a
    pandas frame's values, a memmap opened "r") needs no writable copy, so torch's warning about it is
    not shown; an array with negative strides (X[:, ::-1], scipy's decimate) is copied, torch cannot view it."""
    if any(stride < 0 for stride in arr.strides):
        arr = arr.copy()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable", category=UserWarning)
        return torch.from_numpy(arr)


def _check_list_items(X) -> None:
    """A list of series holds one series per item, (timepoints,) or (channels, timepoints): an item
    that is None, a scalar, a 3-D or deeper array, or not rectangular is named by its place (numpy
    would only say "inhomogeneous shape"). A list of numbers (one 1-D row) is left to the rank checks."""
    kinds = []
    for item in X:
        try:
            kinds.append(None if item is None else np.ndim(item))
        except ValueError:  # nested lists of unequal lengths
            kinds.append("ragged")
    if not any(isinstance(k, int) and k >= 1 for k in kinds):
        return
    for i, kind in enumerate(kinds):
        if kind in (1, 2):
            continue
        if kind is None or kind == "ragged":
            what = "None" if kind is None else "not a rectangular array (nested lists of unequal lengths)"
        else:
            what = f"a scalar ({type(X[i]).__name__})" if kind == 0 else f"a {kind}-D array of shape {np.shape(X[i])}"
        raise ValueError(
            f"X[{i}] is {what}, not a series: a list X holds one series per item, each of shape (timepoints,) "
            "or (channels, timepoints)"
        )


def _is_ragged_list(X) -> bool:
    if not isinstance(X, (list, tuple)) or len(X) == 0:
        return False
    try:
        lengths = {np.shape(item)[-1] for item in X}
        ranks = {np.ndim(item) for item in X}
    except (TypeError, IndexError):
        return False
    return len(lengths) > 1 and ranks <= {1, 2}


def _prepare_memmap(X: np.memmap) -> PreparedInput:
    """A memory-mapped (n, L) or (n, C, L) array stays on disk: validated chunk by chunk, read
    batch by batch during fit and predict (LazyRows), so memory does not grow with n."""
    if X.ndim not in (2, 3):
        raise ValueError(
            f"a memory-mapped X must be 2-D (n_samples, n_timepoints) or 3-D (n_samples, n_channels, "
            f"n_timepoints), got shape {X.shape}"
        )
    if X.dtype.kind not in "fiu":
        raise ValueError(f"a memory-mapped X must hold real numbers, got dtype {X.dtype}")
    if X.shape[0] < 1 or X.shape[-1] < 1 or (X.ndim == 3 and X.shape[1] < 1):
        raise ValueError(f"X has shape {X.shape}: need at least one sample, channel and timepoint")
    view = X[:, None, :] if X.ndim == 2 else X
    # The one pass over the file: every value checked, and each channel's range taken (for the
    # extrapolation check) in float64, as the rows reach the standardization.
    low, high = np.full(view.shape[1], np.inf), np.full(view.shape[1], -np.inf)
    rows = max(1, (1 << 20) // max(1, X[0].nbytes))  # about 1 MB at a time
    peak = 0.0
    for start in range(0, X.shape[0], rows):
        chunk = np.asarray(view[start : start + rows])
        if not np.isfinite(chunk).all():
            bad = start + int(np.flatnonzero(~np.isfinite(chunk.reshape(len(chunk), -1)).all(axis=1))[0])
            raise ValueError(f"X contains NaN or infinity (first in sample {bad})")
        peak = max(peak, _float32_peak(chunk, "X"))
        low, high = np.minimum(low, chunk.min(axis=(0, 2))), np.maximum(high, chunk.max(axis=(0, 2)))
    _check_not_below_float32(peak, "X")
    lengths = np.full(X.shape[0], X.shape[-1])
    return PreparedInput(LazyRows(view), None, lengths, False, X.shape[1], X.ndim, np.stack([low, high]))


def prepare_input(X) -> PreparedInput:
    """Validate X (NaN/inf, empty, complex, sparse, rank) and convert it to a float64 tensor, or a float32
    one for float32 X (a numpy memmap stays on disk and is read batch by batch)."""
    if isinstance(X, np.memmap):
        return _prepare_memmap(X)
    if isinstance(X, (list, tuple)) and len(X) == 0:
        raise ValueError("X is empty: need at least one series (0 samples given)")
    if isinstance(X, (list, tuple)):
        _check_list_items(X)
    if _is_ragged_list(X):
        series = []
        for i, item in enumerate(X):
            arr = np.asarray(item)
            if arr.ndim == 1:
                arr = arr[None, :]
            arr = _float_array(arr, f"X[{i}]", ensure_min_samples=1)
            series.append(arr)
        channels = {s.shape[0] for s in series}
        if len(channels) > 1:
            raise ValueError(f"all series must have the same number of channels, got {sorted(channels)}")
        lengths = np.array([s.shape[1] for s in series])
        n, C, L = len(series), series[0].shape[0], int(lengths.max())
        x = np.zeros((n, C, L), dtype=np.float64)
        peaks = [_float32_peak(s, f"X[{i}]") for i, s in enumerate(series)]
        _check_not_below_float32(max(peaks), "X")
        for i, s in enumerate(series):
            x[i, :, : s.shape[1]] = s
        mask = torch.arange(L)[None, :] < torch.from_numpy(lengths)[:, None]
        return PreparedInput(torch.from_numpy(x), mask, lengths, True, C, 3)

    if isinstance(X, (list, tuple)) and len(X) and np.ndim(X[0]) == 2:
        shapes = {np.shape(item) for item in X}
        if len(shapes) > 1:
            channels = sorted({shape[0] if len(shape) == 2 else 1 for shape in shapes})
            raise ValueError(
                f"all series must have the same number of channels, got {channels} (series shapes {sorted(shapes)[:5]})"
            )
        X = np.asarray(X)  # equal-length (C, L) series: a numpy3D array
    elif isinstance(X, (list, tuple)) and all(isinstance(item, np.ndarray) and item.ndim == 1 for item in X):
        # numpy series that happen to share a length: still series, which may have any length at predict,
        # as they would if one were shorter (a list of lists of numbers stays scikit-learn's 2-D X)
        X = np.stack(X)[:, None, :]
    ndim = getattr(X, "ndim", None)
    if ndim is not None and ndim > 3:
        raise ValueError(
            f"X must be 2-D (n_samples, n_timepoints), 3-D (n_samples, n_channels, n_timepoints) or "
            f"a list of series; got a {ndim}-D array of shape {tuple(X.shape)}"
        )
    if getattr(X, "ndim", None) == 3:
        arr = _float_array(X, "X", keep_float32=True, allow_nd=True, ensure_min_samples=1)
        if arr.shape[1] < 1 or arr.shape[2] < 1:
            raise ValueError(f"X has shape {arr.shape}: need at least one channel and one timepoint")
        _check_not_below_float32(_float32_peak(arr, "X"), "X")
        return PreparedInput(_tensor_of(arr), None, np.full(arr.shape[0], arr.shape[2]), False, arr.shape[1], 3)

    arr = _float_array(X, "X", keep_float32=True, ensure_min_samples=1, ensure_min_features=1)
    _check_not_below_float32(_float32_peak(arr, "X"), "X")
    return PreparedInput(_tensor_of(arr)[:, None, :], None, np.full(arr.shape[0], arr.shape[1]), False, arr.shape[1], 2)
