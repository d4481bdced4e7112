"""The pickle-free save format of the sktime faces: the scikit-learn estimators' format
(ssmts.estimators._persistence: one .safetensors file, the weights in safetensors and a JSON
header under a SHA-256 checksum, and an HMAC-SHA256 signature when saved with a key), with what
sktime and the forecaster keep besides a network.

    SSMForecaster       weights: its network (all members of an ensemble). Data tensors
                        (DATA_PREFIX), whatever the number of series: "y" and "x", the
                        stored tails of every series concatenated (float64); "y_time" and
                        "x_time", their time stamps (int64 ticks or ordinals, or float64);
                        "statics", the static covariates of each series. Header: the
                        parameters; the fitted attributes (context_length_, horizon_, sp_,
                        time_unit_, the scaling statistics, quantile levels, conformal
                        widening, y and X columns, the roles of X's columns); per series its
                        key, its numbers of rows and the layout of its time indexes (kind,
                        freq, unit, time zone, name: the few distinct layouts listed once);
                        and sktime's state: cutoff, fh, the metadata and mtype of y (so
                        forecasts come back as y came, with the same index).
    SSMPanelClassifier  the inner scikit-learn estimator's attributes and weights, as its own
    SSMPanelRegressor   file holds them, and sktime's fitted state (classes, the metadata of X
                        and y, the inner mtype of y).

pandas indexes are written explicitly (see _persistence.index_layout) and rebuilt and checked
on load; series keys are strings or numbers. `load` checks every attribute's type and shape
against the others and the parameters, the series' rows against the tensors, and the sizes
of the network before building it: a damaged or altered file gives one ValueError naming
the file.
"""

from __future__ import annotations

import uuid
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..estimators._persistence import (
    DATA_PREFIX,
    filled_network,
    index_from_layout,
    index_layout,
    is_integer,
    layout_dtype,
    load_estimator,
    n_weights,
    network_state,
    restore_network_state,
    save_estimator,
)
from ._windows import CONTEXT_SEASONS, quantile_levels, window_location

SUFFIX = ".safetensors"
FORMATS = ("safetensors", "sktime")


class SaveLoadMixin:
    """`save` / `load` of the sktime faces: the scikit-learn estimators' pickle-free format, with
    sktime's own (pickles) kept for what sktime's tools call: `save()` without a path and
    `save(path)` of a path not ending in .safetensors."""

    def save(
        self,
        path: str | Path | None = None,
        serialization_format: str = "pickle",
        *,
        format: str | None = None,
        key: bytes | str | None = None,
    ):
        """Save the estimator.

        format="safetensors" (the default for a path ending in ".safetensors"): the fitted
        estimator as one file, as the scikit-learn estimators save: the weights (and, for the
        forecaster, the stored tails of its series) in safetensors, and a JSON header of the
        parameters, the fitted state, the ssmts/torch/Python versions and a checksum; `load`
        runs no code from it, and refuses a damaged or accidentally edited file. The checksum is
        no defense against someone who edits the file and computes it again: key (bytes or a str,
        a secret) adds an HMAC-SHA256 signature, which `load(path, key=...)` checks. Returns the path.

        format="sktime" (the default otherwise): sktime's own `save`: with a path, a zip of
        pickles at path + ".zip"; without one, in-memory bytes; `sktime.base.load` reads
        either (serialization_format: "pickle" or "cloudpickle"). Unpickling RUNS CODE from
        the file: load only files you made or trust.
        """
        if format is None:
            format = "safetensors" if path is not None and str(path).endswith(SUFFIX) else "sktime"
        if format not in FORMATS:
            raise ValueError(f"unknown format {format!r}; choose one of {', '.join(map(repr, FORMATS))}")
        if format == "sktime":
            if key is not None:
                raise ValueError("key= signs format='safetensors'; sktime's format cannot be signed")
            try:
                return super().save(path, serialization_format=serialization_format)
            except FileNotFoundError:
                # sktime writes path + ".zip" but returns a ZipFile of its name less the suffix, which
                # does not exist for a path such as "model.pkl": the archive is there, so return it
                zipped = Path(f"{path}.zip")
                if path is None or Path(path).suffix == "" or not zipped.is_file():
                    raise
                return zipfile.ZipFile(zipped)
        if path is None:
            raise ValueError(f"format='safetensors' writes a file: give its path, such as 'model{SUFFIX}'")
        if serialization_format != "pickle":
            raise ValueError(
                f"serialization_format={serialization_format!r} is an option of sktime's format; "
                "format='safetensors' pickles nothing"
            )
        return save_estimator(self, path, key)

    @classmethod
    def load(cls, path, *, format: str = "safetensors", allow_format_1: bool = False, key: bytes | str | None = None):
        """Load an estimator written by `save`, checking that it is an instance of this class.

        format="safetensors" executes no code from the file, refuses a damaged or accidentally
        edited file (checksum, and the consistency of everything it holds) and warns when it was
        written by other ssmts/torch versions; with key, the key `save` signed with, it also refuses
        a file edited on purpose or signed with another key (a signed file needs its key); files of
        the first save format, whose checksum does not cover the header, load only with
        allow_format_1=True. format="sktime": `sktime.base.load` of what sktime's save
        wrote (a path, or the in-memory result), which unpickles and so RUNS CODE from it:
        only for files you trust.
        """
        if format == "safetensors":
            zipped = path.filename if isinstance(path, zipfile.ZipFile) else f"{path}.zip"
            if isinstance(path, zipfile.ZipFile) or (not Path(path).exists() and Path(zipped).is_file()):
                raise ValueError(
                    f"{zipped} is in sktime's format, which save(path) writes for a path not ending in {SUFFIX}: "
                    f"load it with {cls.__name__}.load(..., format='sktime') (it unpickles, so it runs code from "
                    f"the file: only for files you trust), or save to a path ending in {SUFFIX}"
                )
            return load_estimator(cls, path, allow_format_1, key)
        if key is not None:
            raise ValueError("key= checks the signature of format='safetensors'; sktime's format has none")
        if format != "sktime":
            raise ValueError(f"unknown format {format!r}; choose one of {', '.join(map(repr, FORMATS))}")
        from sktime.base import load

        obj = load(path)
        if not isinstance(obj, cls):
            raise TypeError(f"{path} holds a {type(obj).__name__}, not a {cls.__name__}")
        return obj


# ---------------------------------------------------------------------------- checks
def _altered(path, message: str) -> ValueError:
    return ValueError(f"{path}: {message}; the file is damaged or was altered")


def _check_array(path, name: str, value, kind: str, shape: tuple) -> np.ndarray:
    if not (isinstance(value, np.ndarray) and value.dtype.kind == kind and value.shape == shape):
        got = f"{value.dtype} array of shape {value.shape}" if isinstance(value, np.ndarray) else type(value).__name__
        want = {"f": "float", "b": "bool"}[kind]
        raise _altered(path, f"{name} is a {got}, not a {want} array of shape {shape}")
    return value


def _check_index(path, name: str, value, length: int | None = None) -> pd.Index:
    if not isinstance(value, pd.Index) or isinstance(value, pd.MultiIndex):
        raise _altered(path, f"{name} is a {type(value).__name__}, not an index")
    if length is not None and len(value) != length:
        raise _altered(path, f"{name} has {len(value)} entries, not {length}")
    return value


def _check_time_index(path, name: str, value) -> pd.Index:
    index = _check_index(path, name, value)
    time_like = isinstance(index, (pd.PeriodIndex, pd.DatetimeIndex)) or index.dtype.kind in "iuf"
    if not time_like or not len(index) or not index.is_monotonic_increasing or not index.is_unique:
        raise _altered(path, f"{name} is not an increasing time index")
    return index


# ---------------------------------------------------------------------------- sktime's state
def _dtype_kind():
    try:
        from sktime.datatypes._dtypekind import DtypeKind
    except ImportError:  # an sktime without feature kinds in its metadata
        return None
    return DtypeKind


def _plain(value):
    """sktime's metadata as values the header holds: its DtypeKind enums tagged by their value."""
    kinds = _dtype_kind()
    if kinds is not None and isinstance(value, kinds):
        return {"__dtypekind__": int(value.value)}
    if isinstance(value, dict):
        return {key: _plain(v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


def _unplain(path, name: str, value):
    """The inverse of _plain, every value checked: plain JSON values, indexes, arrays, lists, dicts."""
    if isinstance(value, dict):
        if set(value) == {"__dtypekind__"}:
            kinds = _dtype_kind()
            try:
                return kinds(value["__dtypekind__"])
            except (TypeError, ValueError):
                raise _altered(path, f"{name} holds an unknown data kind {value['__dtypekind__']!r}") from None
        if not all(isinstance(key, str) for key in value):
            raise _altered(path, f"{name} has keys that are not strings")
        return {key: _unplain(path, name, v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_unplain(path, name, v) for v in value)
    if value is None or isinstance(value, (bool, int, float, str, pd.Index, np.ndarray)):
        return value
    raise _altered(path, f"{name} holds a {type(value).__name__}")


def _check_mtype(path, name: str, value) -> str:
    from sktime.datatypes import mtype_to_scitype

    try:
        if isinstance(value, str):
            mtype_to_scitype(value)
            return value
    except (ValueError, KeyError, TypeError):
        pass
    raise _altered(path, f"{name} is {value!r:.80}, not an sktime mtype")


def _metadata(path, name: str, value) -> dict:
    """sktime's metadata of a checked y or X: a dict of plain values whose mtype is one sktime knows."""
    value = _unplain(path, name, value)
    if not isinstance(value, dict):
        raise _altered(path, f"{name} is not a JSON object")
    if "mtype" in value:
        _check_mtype(path, f"{name}['mtype']", value["mtype"])
    return value


def _conversion_store(path, name: str, value) -> dict:
    store = _unplain(path, name, value)
    if not isinstance(store, dict):
        raise _altered(path, f"{name} is not a JSON object")
    return store


def _not_vectorized(estimator) -> None:
    if getattr(estimator, "_is_vectorized", False):
        raise ValueError(
            f"this {type(estimator).__name__} was fitted through sktime's vectorization (one copy per "
            "series or column), which the safetensors format does not hold; use format='sktime'"
        )


# ---------------------------------------------------------------------------- the forecaster
FORECASTER_ATTRIBUTES = (
    "n_targets_",
    "n_exog_",
    "horizon_",
    "context_length_",
    "sp_",
    "window_location_",
    "quantile_levels_",
    "y_mean_",
    "y_scale_",
    "scale_floor_",
    "x_mean_",
    "x_scale_",
    "time_unit_",
    "interval_widening_",
    "calibration_",
    "history_",
    "n_iter_",
    "best_epoch_",
    "_seed_",
    "_x_past",
    "_x_static",
    "_index_names",
    "_y_columns",
    "_x_columns",
    "pretrained_params_",
)
FORECASTER_SKTIME = ("cutoff", "fh", "y_metadata", "y_mtype_last_seen", "converter_store_y")
SERIES_FIELDS = ("keys", "time_layouts", "y_layout", "y_rows", "x_layout", "x_rows")
SERIES_TENSORS = tuple(DATA_PREFIX + name for name in ("y", "y_time", "x", "x_time", "statics"))


def _key_to_json(key: tuple) -> tuple:
    plain = tuple(k.item() if isinstance(k, np.generic) else k for k in key)
    for k in plain:
        if not isinstance(k, (str, int, float)) or isinstance(k, bool):
            raise TypeError(
                f"cannot save the series {key!r}: its key holds a {type(k).__name__}; the save format holds "
                "series keys of strings and numbers"
            )
    return plain


class _SeriesWriter:
    """The stored series of a forecaster in the layout of the file: their values, time stamps and
    static covariates concatenated into a few tensors (one header entry each, whatever the number of
    series), and in the header per series its key, the layout of its time indexes (kind, freq,
    unit, time zone, name: the few distinct ones listed once) and its numbers of rows."""

    def __init__(self):
        self.header_lists = {field: [] for field in SERIES_FIELDS}
        self.parts = {"y": [], "y_time": [], "x": [], "x_time": []}
        self.statics = []

    def _layout(self, index, what: str) -> int:
        layout, values = index_layout(index, what)
        layouts = self.header_lists["time_layouts"]
        if layout not in layouts:
            layouts.append(layout)
        self.parts[f"{what[0]}_time"].append(values)
        return layouts.index(layout)

    def add(self, key: tuple, tail: pd.DataFrame, x_part: pd.DataFrame | None, statics) -> None:
        h = self.header_lists
        h["keys"].append(_key_to_json(key))
        h["y_layout"].append(self._layout(tail.index, f"y's time index of the series {key!r}"))
        h["y_rows"].append(len(tail))
        self.parts["y"].append(tail.to_numpy(np.float64))
        if x_part is None:
            h["x_layout"].append(None)
            h["x_rows"].append(None)
        else:
            h["x_layout"].append(self._layout(x_part.index, f"x's time index of the series {key!r}"))
            h["x_rows"].append(len(x_part))
            self.parts["x"].append(x_part.to_numpy(np.float64))
        if statics is not None:
            self.statics.append(np.asarray(statics, dtype=np.float64))

    def header(self) -> dict:
        return self.header_lists

    def tensors(self) -> dict[str, torch.Tensor]:
        out = {}
        for name, parts in self.parts.items():
            if not parts:
                continue
            if name.endswith("_time"):  # int64 time stamps, or float64 for a float index
                floats = {part.dtype.kind == "f" for part in parts}
                if len(floats) > 1:
                    raise TypeError("cannot save the series: their time indexes mix integer and float time stamps")
                dtype = np.float64 if floats.pop() else np.int64
                array = np.concatenate([part.astype(dtype) for part in parts])
            else:
                array = np.concatenate(parts)
            out[DATA_PREFIX + name] = torch.from_numpy(np.ascontiguousarray(array)).contiguous()
        if self.statics and self.statics[0].size:
            out[DATA_PREFIX + "statics"] = torch.from_numpy(np.stack(self.statics))
        return out


def _tensor(path, tensors: dict, name: str, dtypes: tuple, shape: tuple) -> np.ndarray:
    """The data tensor `name` of one of `dtypes` and of `shape`, as a numpy array."""
    tensor = tensors.get(DATA_PREFIX + name)
    if tensor is None:
        raise _altered(path, f"the tensor {DATA_PREFIX + name} is missing")
    if tensor.dtype not in dtypes or tuple(tensor.shape) != shape:
        raise _altered(
            path, f"the tensor {DATA_PREFIX + name} is {tensor.dtype} {tuple(tensor.shape)}, not {dtypes[0]} {shape}"
        )
    return tensor.numpy()


def _counts(path, what: str, values, n: int, low: int, high: int, optional: bool = False) -> list:
    """n integers in low..high (or None, if optional)."""
    if not isinstance(values, list) or len(values) != n:
        raise _altered(path, f"its {what} are not a list of {n}")
    for value in values:
        if not ((optional and value is None) or (is_integer(value, low) and value <= high)):
            raise _altered(path, f"its {what} hold {value!r:.40}, not an integer in {low}..{high}")
    return values


def _read_series(path, header, tensors, n_levels: int, max_rows: int, y_columns, x_columns, n_static: int):
    """({key: (tail, X part or None)}, {key: static covariates}) of a forecaster's file, every
    count, layout and tensor shape checked against the others."""
    if not isinstance(header, dict) or set(header) != set(SERIES_FIELDS):
        raise _altered(path, f"its series are not an object of the fields {list(SERIES_FIELDS)}")
    keys, layouts = header["keys"], header["time_layouts"]
    if not isinstance(keys, list) or not keys or (n_levels == 0 and len(keys) != 1):
        raise _altered(path, "its list of series is empty, or holds several series of a single-series y")
    if not isinstance(layouts, list) or not layouts:
        raise _altered(path, "its list of time index layouts is empty")
    try:
        dtypes = [layout_dtype(layout) for layout in layouts]
    except ValueError as error:
        raise _altered(path, str(error)) from None
    n, C, n_exog = len(keys), len(y_columns), 0 if x_columns is None else len(x_columns)
    y_layout = _counts(path, "y layouts", header["y_layout"], n, 0, len(layouts) - 1)
    y_rows = _counts(path, "numbers of y rows", header["y_rows"], n, 1, max_rows)
    x_layout = _counts(path, "X layouts", header["x_layout"], n, 0, len(layouts) - 1, optional=True)
    x_rows = _counts(path, "numbers of X rows", header["x_rows"], n, 1, 2**62, optional=True)
    if any((a is None) != (b is None) for a, b in zip(x_layout, x_rows)):
        raise _altered(path, "a series has an X layout without X rows, or the other way round")
    has_x = [rows is not None for rows in x_rows]
    if any(has_x) and not n_exog:
        raise _altered(path, "it stores X, but n_exog_ is 0")
    N, M = sum(y_rows), sum(rows for rows in x_rows if rows is not None)
    times = (torch.int64, torch.float64)
    y = _tensor(path, tensors, "y", (torch.float64,), (N, C))
    y_time = _tensor(path, tensors, "y_time", times, (N,))
    x = _tensor(path, tensors, "x", (torch.float64,), (M, n_exog)) if any(has_x) else None
    x_time = _tensor(path, tensors, "x_time", times, (M,)) if any(has_x) else None
    if n_exog:
        statics = _tensor(path, tensors, "statics", (torch.float64,), (n, n_static)) if n_static else np.zeros((n, 0))
    present = {DATA_PREFIX + name for name, used in (("x", any(has_x)), ("x_time", any(has_x))) if not used}
    present |= {DATA_PREFIX + "statics"} if not (n_exog and n_static) else set()
    unexpected = sorted(present & set(tensors))
    if unexpected:
        raise _altered(path, f"it holds the unexpected data tensors {unexpected}")

    def frame(values, stamps, layout: int, start: int, rows: int, columns, what: str) -> pd.DataFrame:
        raw = stamps[start : start + rows]
        cast = raw.astype(dtypes[layout])
        if not np.array_equal(cast.astype(raw.dtype), raw):
            raise _altered(path, f"the time stamps of {what} do not fit the dtype {dtypes[layout]}")
        try:
            index = index_from_layout(layouts[layout], cast)
        except ValueError as error:
            raise _altered(path, f"{what}: {error}") from None
        index = _check_time_index(path, what, index)
        return pd.DataFrame(values[start : start + rows].copy(), index=index, columns=columns)

    store, static_values, y_start, x_start = {}, {}, 0, 0
    for i, key in enumerate(keys):
        if not isinstance(key, tuple) or len(key) != n_levels:
            raise _altered(path, f"the key of series {i} is not a tuple of {n_levels} labels")
        try:
            key = _key_to_json(key)
        except TypeError as error:
            raise _altered(path, str(error)) from None
        tail = frame(y, y_time, y_layout[i], y_start, y_rows[i], y_columns, f"the time index of series {i}")
        y_start += y_rows[i]
        x_part = None
        if has_x[i]:
            x_part = frame(x, x_time, x_layout[i], x_start, x_rows[i], x_columns, f"the X time index of series {i}")
            x_start += x_rows[i]
        if key in store:
            raise _altered(path, f"two of its series have the key {key!r}")
        store[key] = (tail, x_part)
        if n_exog:
            static_values[key] = statics[i].copy()
    return store, static_values


class ForecasterPersistenceMixin(SaveLoadMixin):
    """SSMForecaster's state for the save format (see the module docstring)."""

    def _save_state(self) -> tuple[dict, dict[str, torch.Tensor]]:
        name = type(self).__name__
        if not self.is_fitted or not hasattr(self, "model_"):
            raise ValueError(f"this {name} is not fitted yet; fit it before save")
        _not_vectorized(self)
        fitted = {attr: getattr(self, attr) for attr in FORECASTER_ATTRIBUTES if hasattr(self, attr)}
        tensors = {k: v.detach().cpu().contiguous() for k, v in self.model_.state_dict().items()}
        series = _SeriesWriter()
        for key, (tail, x_part) in self._store.items():
            for frame, columns, what in ((tail, self._y_columns, "y"), (x_part, self._x_columns, "X")):
                if frame is not None and not frame.columns.equals(columns):
                    raise ValueError(
                        f"cannot save this {name}: the stored {what} of series {key!r} has the columns "
                        f"{list(frame.columns)}, not those it was fitted with ({list(columns)})"
                    )
            series.add(key, tail, x_part, self._statics.get(key) if self.n_exog_ else None)
        tensors.update(series.tensors())
        fh = self._fh
        fitted["series"] = series.header()
        fitted["sktime"] = {
            "cutoff": self._cutoff,
            "fh": {"values": fh.to_pandas(), "is_relative": bool(fh.is_relative), "freq": fh.freq},
            "y_metadata": _plain(self._y_metadata),
            "y_mtype_last_seen": self._y_mtype_last_seen,
            "converter_store_y": _plain(self._converter_store_y),
        }
        return fitted, tensors

    def _restore_state(self, fitted: dict, tensors: dict[str, torch.Tensor], path) -> None:
        from sktime.forecasting.base import ForecastingHorizon

        self.backbone_kwargs()  # the cross-parameter checks of fit
        self._check_params()
        known = set(FORECASTER_ATTRIBUTES) | {"series", "sktime"}
        unknown = sorted(set(fitted) - known)
        if unknown:
            raise _altered(path, f"it holds unexpected attributes {unknown}")
        exog = fitted.get("n_exog_")
        # calibration_: absent from files written before it existed
        optional = {"interval_widening_", "calibration_", "best_epoch_"} | (
            {"x_mean_", "x_scale_"} if exog == 0 else set()
        )
        optional |= set() if self.irregular == "time_deltas" else {"time_unit_"}
        optional |= set() if self.pretrained is not False else {"pretrained_params_"}
        missing = sorted(known - set(fitted) - optional)
        if missing:
            raise _altered(path, f"it lacks the attributes {missing}")
        # What defines the network: the parameters, or those of the pretrained weights it started from.
        spec, pretrained = self._network_spec(fitted.get("pretrained_params_"), path)

        # sizes and attributes, against each other and the parameters
        for name, low in (("n_targets_", 1), ("n_exog_", 0), ("horizon_", 1), ("context_length_", 1), ("sp_", 1)):
            if not is_integer(fitted[name], low):
                raise _altered(path, f"{name} is {fitted[name]!r:.80}, not an integer >= {low}")
        for name in ("n_iter_", "_seed_"):
            if not is_integer(fitted[name], 0):
                raise _altered(path, f"{name} is {fitted[name]!r:.80}, not a non-negative integer")
        kept = fitted.get("best_epoch_", 0)  # absent from files written before it existed
        if not is_integer(kept, 0) or kept > fitted["n_iter_"]:
            raise _altered(path, f"best_epoch_ is {kept!r:.80}, not an epoch of the {fitted['n_iter_']} run")
        C, n_exog, H, c = fitted["n_targets_"], fitted["n_exog_"], fitted["horizon_"], fitted["context_length_"]
        if fitted["window_location_"] != window_location(spec._normalize):
            raise _altered(path, f"window_location_={fitted['window_location_']!r:.80} contradicts normalize")
        levels = quantile_levels(spec.quantiles)
        grid = _check_array(path, "quantile_levels_", fitted["quantile_levels_"], "f", levels.shape)
        if not np.array_equal(grid, levels):
            raise _altered(path, "quantile_levels_ contradicts quantiles")
        if self.sp is not None and fitted["sp_"] != self.sp:
            raise _altered(path, f"sp_={fitted['sp_']} contradicts sp={self.sp}")
        if pretrained is not None:
            if (c, H) != (pretrained["context_length"], pretrained["horizon"]) or (C, exog) != (1, 0):
                raise _altered(path, "its sizes are not those of the pretrained network it holds")
        elif self.context_length != "auto" and c != self.context_length:
            raise _altered(path, f"context_length_={c} contradicts context_length={self.context_length}")
        elif self.context_length == "auto" and c > max(2, CONTEXT_SEASONS * max(H, fitted["sp_"])):
            raise _altered(path, f"context_length_={c} is longer than context_length='auto' chooses")
        for name in ("y_mean_", "y_scale_", "scale_floor_"):
            _check_array(path, name, fitted[name], "f", (C,))
        if n_exog:
            for name in ("x_mean_", "x_scale_"):
                _check_array(path, name, fitted[name], "f", (n_exog,))
        for name in ("_x_past", "_x_static"):
            _check_array(path, name, fitted[name], "b", (n_exog,))
        y_columns = _check_index(path, "_y_columns", fitted["_y_columns"], C)
        x_columns = fitted["_x_columns"]
        if n_exog:
            x_columns = _check_index(path, "_x_columns", x_columns, n_exog)
            roles = (("_x_past", self.past_covariates), ("_x_static", self.static_covariates))
            for name, named in roles:
                if not np.array_equal(fitted[name], np.array([column in named for column in x_columns], dtype=bool)):
                    raise _altered(path, f"{name} contradicts the parameters naming the covariates")
        elif x_columns is not None or self.past_covariates or self.static_covariates:
            raise _altered(path, "it names X columns or covariates, but n_exog_ is 0")
        if self.irregular == "time_deltas":
            unit = fitted["time_unit_"]
            if not (isinstance(unit, float) and np.isfinite(unit) and unit > 0):
                raise _altered(path, f"time_unit_={unit!r:.80} is not a positive number")
        widening = fitted.get("interval_widening_")
        if widening is not None:
            _check_array(path, "interval_widening_", widening, "f", (H, len(levels)))
        widened = widening is not None
        # before calibration_ was saved, a widening came from 'holdout' or, with early stopping, 'conformal'
        earlier = ("conformal" if self.early_stopping else "holdout") if widened else "none"
        calibration = fitted.get("calibration_", earlier)
        if calibration not in ("holdout", "refit", "conformal", "none") or (calibration != "none") != widened:
            raise _altered(path, f"calibration_={calibration!r:.80} contradicts interval_widening_")
        names = fitted["_index_names"]
        if not isinstance(names, list) or not names or not all(isinstance(n, (str, int, type(None))) for n in names):
            raise _altered(path, "_index_names is not a list of level names")
        if not isinstance(fitted["history_"], list) or not all(isinstance(r, dict) for r in fitted["history_"]):
            raise _altered(path, "history_ is not a list of records")

        # The network's sizes, before it is built: its heads alone need this many weights.
        Q, members, d_model = len(levels), spec.ensemble_size, spec.d_model
        head = (d_model + H * n_exog) * H * C * Q if spec.strategy == "direct" else d_model * C * Q
        weights = n_weights(tensors)
        if head * members > weights:
            raise _altered(
                path,
                f"its sizes (horizon_={H}, n_targets_={C}, n_exog_={n_exog}, {Q} quantiles, {members} members) "
                f"need more weights than the {weights} it holds",
            )

        # the series: keys, time indexes and stored values
        store, statics = _read_series(
            path, fitted["series"], tensors, len(names) - 1, c + H, y_columns, x_columns, int(fitted["_x_static"].sum())
        )
        extra = sorted(name for name in tensors if name.startswith(DATA_PREFIX) and name not in SERIES_TENSORS)
        if extra:
            raise _altered(path, f"it holds unexpected data tensors {extra[:5]}")

        # sktime's state
        sk = fitted["sktime"]
        if not isinstance(sk, dict) or set(sk) != set(FORECASTER_SKTIME):
            raise _altered(path, f"its sktime state is not an object of the fields {list(FORECASTER_SKTIME)}")
        cutoff = _check_index(path, "the cutoff", sk["cutoff"], 1)
        fh = sk["fh"]
        if not (
            isinstance(fh, dict)
            and set(fh) == {"values", "is_relative", "freq"}
            and isinstance(fh["is_relative"], bool)
            and (fh["freq"] is None or isinstance(fh["freq"], str))
        ):
            raise _altered(path, "its fh is not an object of values, is_relative and freq")
        try:
            fh = ForecastingHorizon(
                _check_index(path, "fh", fh["values"]), is_relative=fh["is_relative"], freq=fh["freq"]
            )
        except (TypeError, ValueError) as error:
            raise _altered(path, f"its fh cannot be rebuilt ({error})") from None
        y_metadata = _metadata(path, "the metadata of y", sk["y_metadata"])
        mtype = _check_mtype(path, "the mtype of y", sk["y_mtype_last_seen"])
        converter_store = _conversion_store(path, "sktime's conversion store of y", sk["converter_store_y"])
        # the cutoff is the latest time the series hold (fit and update keep it so): another one would
        # forecast from a time the stored series do not reach, or cut them short
        ends = [tail.index[-1] for tail, _ in store.values() if len(tail)]
        try:
            consistent = bool(ends) and max(ends) == cutoff[0]
        except (TypeError, ValueError):  # times of another kind or frequency than the series'
            consistent = False
        if not consistent:
            raise _altered(
                path, f"its cutoff {cutoff[0]!r} is not the last time of its series ({max(ends, default=None)!r})"
            )

        # all checked: set the state, then build the network and fill it
        for attr in FORECASTER_ATTRIBUTES:
            if attr in fitted:
                setattr(self, attr, fitted[attr])
        self.interval_widening_, self.calibration_ = widening, calibration
        self._y_columns, self._x_columns = y_columns, x_columns  # the checked ones
        self._store, self._statics = store, statics
        self._cutoff, self._fh = cutoff, fh
        self._y_metadata, self._y_mtype_last_seen, self._converter_store_y = y_metadata, mtype, converter_store
        self._is_vectorized = False
        self._is_fitted = True
        self._fit_id_ = uuid.uuid4().hex  # streams of the saved forecaster do not continue here
        weights = {name: t for name, t in tensors.items() if not name.startswith(DATA_PREFIX)}
        # a pretrained forecaster's network has the parameters of its weights (spec), not its own
        self.model_ = filled_network(self._build_network(spec), weights, path)

    def _network_spec(self, pretrained, path):
        """(an estimator holding the parameters that define the network, the pretrained parameters or
        None): self, or for a forecaster that started from pretrained weights, one with their values."""
        if pretrained is None:
            if self.pretrained is not False:
                raise _altered(path, f"pretrained={self.pretrained!r}, but it holds no pretrained_params_")
            return self, None
        names = set(type(self).__params__)
        if self.pretrained is False or not isinstance(pretrained, dict):
            raise _altered(path, "it holds pretrained_params_, but pretrained=False")
        unknown = sorted(set(pretrained) - names - {"horizon"})
        if unknown:
            raise _altered(path, f"its pretrained_params_ name unknown parameters {unknown}")
        for name in ("context_length", "horizon"):
            if not is_integer(pretrained.get(name), 1):
                raise _altered(path, f"its pretrained_params_ have {name}={pretrained.get(name)!r:.40}")
        params = {k: v for k, v in pretrained.items() if k in names and k not in ("context_length", "pretrained")}
        if isinstance(params.get("quantiles"), list):
            params["quantiles"] = tuple(params["quantiles"])
        spec = type(self)(**params)
        spec.validate_params()
        return spec, pretrained


# ---------------------------------------------------------------------------- the panel adapters
PANEL_SKTIME = (
    "classes_",
    "n_classes_",
    "fit_time_",
    "_X_metadata",
    "_y_metadata",
    "_y_inner_mtype",
    "_converter_store_y",
    "_is_timed",
)


class PanelPersistenceMixin(SaveLoadMixin):
    """The panel adapters' state for the save format: the inner scikit-learn estimator's (its class
    is `_sklearn_class`) and sktime's fitted state."""

    _sklearn_class: type

    def _save_state(self) -> tuple[dict, dict[str, torch.Tensor]]:
        name = type(self).__name__
        if not self.is_fitted:
            raise ValueError(f"this {name} is not fitted yet; fit it before save")
        if not hasattr(self, "estimator_"):
            raise ValueError(
                f"this {name} was fitted on one class, which sktime predicts without a network: there is "
                "nothing to save in the safetensors format; use format='sktime'"
            )
        _not_vectorized(self)
        inner, tensors = network_state(self.estimator_)
        state = {attr: _plain(getattr(self, attr)) for attr in PANEL_SKTIME if hasattr(self, attr)}
        return {"estimator": inner, "sktime": state}, tensors

    def _restore_state(self, fitted: dict, tensors: dict[str, torch.Tensor], path) -> None:
        if set(fitted) != {"estimator", "sktime"}:
            raise _altered(path, f"its fitted state has the fields {sorted(fitted)}, not estimator and sktime")
        if any(name.startswith(DATA_PREFIX) for name in tensors):
            raise _altered(path, f"it holds data tensors, which a {type(self).__name__} never writes")
        state = fitted["sktime"]
        if not isinstance(state, dict):
            raise _altered(path, "its sktime state is not a JSON object")
        unknown = sorted(set(state) - set(PANEL_SKTIME))
        if unknown:
            raise _altered(path, f"its sktime state holds unexpected attributes {unknown}")
        for name in ("_X_metadata", "_y_metadata"):
            if name in state:
                state[name] = _metadata(path, name, state[name])
        if "_converter_store_y" in state:
            state["_converter_store_y"] = _conversion_store(path, "_converter_store_y", state["_converter_store_y"])
        if "_y_inner_mtype" in state:
            _check_mtype(path, "_y_inner_mtype", state["_y_inner_mtype"])
        for name in ("n_classes_", "fit_time_"):
            if name in state and not is_integer(state[name], 0):
                raise _altered(path, f"{name} is {state[name]!r:.80}, not a non-negative integer")
        if "_is_timed" in state and not isinstance(state["_is_timed"], bool):
            raise _altered(path, "_is_timed is not a boolean")

        if "classes_" in state:
            classes = state["classes_"]
            inner = fitted["estimator"].get("classes_") if isinstance(fitted["estimator"], dict) else None
            if not (
                isinstance(classes, np.ndarray)
                and isinstance(inner, np.ndarray)
                and classes.ndim == 1
                and np.array_equal(classes, inner)
            ):
                raise _altered(path, "its classes_ are not those of the network")
            if state.get("n_classes_", len(classes)) != len(classes):
                raise _altered(path, "n_classes_ is not the number of classes")
            self._class_dictionary = {label: i for i, label in enumerate(classes)}

        estimator = self._sklearn_class(**self.get_params(deep=False))
        estimator.validate_params()
        restore_network_state(estimator, fitted["estimator"], tensors, path)
        for attr, value in state.items():
            setattr(self, attr, value)
        self.estimator_ = estimator
        self._is_vectorized = False
        self._is_fitted = True
