"""The pickle-free save format of the scikit-learn estimators (and of the sktime faces, which
extend it in ssmts.sktime._persistence): one .safetensors file.

    weights    the network's state dict (safetensors: tensors only, no code); a face may add
               data tensors under names starting with DATA_PREFIX (a forecaster's series)
    metadata   "ssmts": JSON with the format version, the estimator class, its parameters,
               its fitted attributes, the ssmts / torch / Python versions and a SHA-256
               checksum of the tensors and of the rest of this JSON; saved with a key, also
               an HMAC-SHA256 signature of the same bytes under that key

`load` reads the JSON, checks the class and the checksum (a mismatch is an error: the file
was damaged or edited, in its weights or in its header: the classes, the scaling statistics
and the parameters change predictions as much as the weights do), warns when the versions
differ, rebuilds the network from the
parameters and the fitted sizes, and loads the weights: no code from the file is executed.
The checksum is an integrity check, not a defense: it detects corruption and accidental edits,
but anyone who edits a file can compute it again. Against that, `save(path, key=...)` signs
the file and `load(path, key=...)` refuses it unless the signature matches the key.
What a file cannot hold is said at `save`: callbacks (code) and a numpy RandomState are
not stored, and the optimizer state of `warm_start` / `partial_fit` is not kept (a loaded
estimator continues training with a fresh optimizer).

A face whose state is more than `_saved_attributes` and `model_` defines `_save_state()`
-> (fitted attributes, tensors) and `_restore_state(fitted, tensors, path)`; pandas indexes
in its attributes are written explicitly (kind, values, freq, unit, time zone, name) and
rebuilt and checked on load. A damaged or hostile file gives one ValueError naming the file.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import numbers
import platform
import warnings
from pathlib import Path

import numpy as np
import torch

from .._files import replacing
from .._warnings import caller_stacklevel

FORMAT = "ssmts-estimator"
FORMAT_VERSION = 2
"""2: the checksum covers the header as well as the tensors (1: the tensors only; read only when the
caller allows it, and not at all from LAST_VERSION_READING_FORMAT_1 on)."""
LAST_VERSION_READING_FORMAT_1 = "0.2"
READABLE_VERSIONS = (1, 2)
DATA_PREFIX = "data:"
"""Tensors whose names start with this are a face's data (not network weights): no module name holds ':'."""


def _versions() -> dict:
    from .._version import __version__

    return {"ssmts": __version__, "torch": torch.__version__.split("+")[0], "python": platform.python_version()}


CHECKSUM = "sha256"
SIGNATURE = "hmac_sha256"
"""The header fields of the checksum and of the keyed signature, which neither covers."""


def _checksum(tensors: dict[str, torch.Tensor], header: dict | None = None, key: bytes | None = None) -> str:
    """SHA-256 of the tensors (names, dtypes, shapes, bytes) and, from format 2 on, of the header
    without its checksum and signature (canonical JSON: sorted keys, no spaces). With a key, the
    HMAC-SHA256 of the same bytes under it: a signature only a holder of the key can compute."""
    digest = hashlib.sha256() if key is None else hmac.new(key, digestmod=hashlib.sha256)
    if header is not None:
        fields = {name: value for name, value in header.items() if name not in (CHECKSUM, SIGNATURE)}
        digest.update(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode())
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        digest.update(name.encode())
        digest.update(str(t.dtype).encode())
        digest.update(str(tuple(t.shape)).encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def signing_key(key) -> bytes | None:
    """A save or load's key= as bytes (a str is encoded as UTF-8); None for no key."""
    if key is None:
        return None
    if isinstance(key, str):
        key = key.encode()
    if not isinstance(key, (bytes, bytearray)):
        raise TypeError(f"key must be bytes or a str (a secret shared by who saves and who loads), got {key!r:.40}")
    if not key:
        raise ValueError("key must not be empty: an empty key signs nothing anyone could not sign")
    return bytes(key)


def sign(tensors: dict[str, torch.Tensor], header: dict, key: bytes | None) -> None:
    """Set the header's checksum and, with a key, its signature (both over the tensors and header)."""
    header[CHECKSUM] = _checksum(tensors, header)
    if key is not None:
        header[SIGNATURE] = _checksum(tensors, header, key)


def verify(
    path,
    tensors: dict[str, torch.Tensor],
    header: dict,
    key: bytes | None,
    *,
    covers_header: bool = True,
    what: str = "weights or header",
) -> None:
    """Refuse a file whose checksum does not match (damaged or edited) and, with a key, one whose
    signature does not match the key; a signed file is refused without a key, so that an
    unchecked load of a file meant to be checked does not pass unseen. covers_header=False for
    files of format 1, whose checksum covers the tensors only; what: the parts, for the message."""
    if _checksum(tensors, header if covers_header else None) != header.get(CHECKSUM):
        raise ValueError(f"{path}: the file does not match its checksum ({what}); it was damaged or altered")
    signature = header.get(SIGNATURE)
    if key is None:
        if signature is not None:
            raise ValueError(f"{path} is signed with a key (HMAC-SHA256): load it with key= the key it was saved with")
        return
    if signature is None:
        raise ValueError(
            f"{path} carries no signature (it was saved without a key), so key= cannot vouch for it: load it "
            "without a key only if you trust where it came from, and save it again with key="
        )
    expected = _checksum(tensors, header, key)
    if not (isinstance(signature, str) and signature.isascii() and hmac.compare_digest(signature, expected)):
        raise ValueError(
            f"{path}: the signature does not match the key: the file was changed after it was signed "
            "(its checksum recomputed), or signed with another key"
        )


def same_param(a, b) -> bool:
    """Whether two parameter values are equal (values whose == is not a plain bool count as equal only
    when they are the same object)."""
    if a is b:
        return True
    try:
        return bool(type(a) is type(b) and a == b)
    except (TypeError, ValueError):
        return False


def _to_json(value, name: str):
    """Fitted attributes as JSON; arrays keep their dtype, tuples and numpy scalars are marked."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufUO":
            raise TypeError(
                f"cannot save {name}: arrays of dtype {value.dtype} are not representable in the save "
                "format (labels must be numbers, strings or booleans); use save(format='joblib')"
                " (format='sktime' for the sktime estimators)"
            )
        if value.dtype == object:
            return {"__ndarray_object__": [_to_json(v, name) for v in value.tolist()]}
        return {"__ndarray__": value.tolist(), "dtype": value.dtype.str}
    if isinstance(value, np.generic):
        return _to_json(value.item(), name)
    if isinstance(value, tuple):
        return {"__tuple__": [_to_json(v, name) for v in value]}
    if isinstance(value, list):
        return [_to_json(v, name) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            return {"__dict_items__": [[_to_json(k, name), _to_json(v, name)] for k, v in value.items()]}
        return {k: _to_json(v, name) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if type(value).__module__.split(".")[0] == "pandas":
        import pandas as pd

        if isinstance(value, pd.Index):
            return {"__index__": _index_to_json(value, name)}
        if isinstance(value, pd.Timedelta):
            return {"__timedelta__": int(value.as_unit("ns").value)}
    raise TypeError(
        f"cannot save {name}: a {type(value).__name__} is not representable in the save format "
        "(labels and parameters must be numbers, strings, booleans or None); use save(format='joblib')"
        " (format='sktime' for the sktime estimators)"
    )


def _array(values, dtype) -> np.ndarray:
    """An array of a header; its declared dtype is checked before anything is allocated: a number,
    bool or string type no wider than the values need (a header declaring '<U100000000' for a
    few labels would otherwise allocate gigabytes)."""
    try:
        declared = np.dtype(dtype)
    except TypeError as error:
        raise ValueError(f"the header declares an unknown array dtype {dtype!r}") from error
    if declared.kind not in "biufU":
        raise ValueError(f"the header declares arrays of dtype {declared}, which the save format never writes")
    natural = np.array(values)
    if declared.kind == "U" and natural.dtype.kind == "U" and declared.itemsize > natural.dtype.itemsize:
        raise ValueError(
            f"the header declares strings of {declared.itemsize // 4} characters for values of at most "
            f"{natural.dtype.itemsize // 4}"
        )
    return natural.astype(declared)


def _from_json(value):
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    if isinstance(value, dict):
        if "__ndarray__" in value:
            return _array(value["__ndarray__"], value.get("dtype"))
        if "__ndarray_object__" in value:
            out = np.empty(len(value["__ndarray_object__"]), dtype=object)
            out[:] = [_from_json(v) for v in value["__ndarray_object__"]]
            return out
        if "__tuple__" in value:
            return tuple(_from_json(v) for v in value["__tuple__"])
        if "__dict_items__" in value:
            return {_from_json(k): _from_json(v) for k, v in value["__dict_items__"]}
        if "__index__" in value:
            return _index_from_json(value["__index__"])
        if "__timedelta__" in value:
            import pandas as pd

            if type(value["__timedelta__"]) is not int:
                raise ValueError(f"a duration of the header is not an integer of nanoseconds: {value!r:.80}")
            return pd.Timedelta(value["__timedelta__"], unit="ns")
        return {k: _from_json(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------- pandas indexes
DATETIME_UNITS = ("s", "ms", "us", "ns")
_LABEL_TYPES = (str, int, float, bool, type(None))


def _labels_to_json(values: list, name: str) -> list:
    out = []
    for v in values:
        v = v.item() if isinstance(v, np.generic) else v
        if isinstance(v, tuple):
            out.append({"__tuple__": _labels_to_json(list(v), name)})
        elif type(v) in _LABEL_TYPES:
            out.append(v)
        else:
            raise TypeError(
                f"cannot save {name}: its label {v!r} is a {type(v).__name__}; the save format holds labels "
                "that are strings, numbers, booleans or None (or tuples of them)"
            )
    return out


def _labels_from_json(values) -> list:
    if not isinstance(values, list):
        raise ValueError("the labels of an index are not a list")
    out = []
    for v in values:
        if isinstance(v, dict) and set(v) == {"__tuple__"}:
            out.append(tuple(_labels_from_json(v["__tuple__"])))
        elif type(v) in _LABEL_TYPES:
            out.append(v)
        else:
            raise ValueError(f"an index label of the header is a {type(v).__name__}")
    return out


def index_layout(index, name: str) -> tuple[dict, np.ndarray]:
    """A time index as (layout, values): the layout (kind, name, freq, unit, time zone, dtype;
    plain JSON) and its values as an array (int64 ticks of a DatetimeIndex's unit, ordinals of a
    PeriodIndex, the values of a RangeIndex or numeric index). A long index's values belong in a
    tensor, its layout in the header. Checked by rebuilding: an index the format cannot
    reproduce exactly is refused here, not at load."""
    import pandas as pd

    layout: dict = {"name": _labels_to_json([index.name], f"the name of {name}")[0]}
    if isinstance(index, pd.MultiIndex):
        raise TypeError(f"cannot save {name}: a MultiIndex is not representable in the save format")
    if isinstance(index, pd.RangeIndex):
        layout.update(kind="range", step=int(index.step))
        values = np.asarray(index, dtype=np.int64)
    elif isinstance(index, pd.PeriodIndex):
        layout.update(kind="period", freq=index.freqstr)
        values = index.asi8
    elif isinstance(index, pd.DatetimeIndex):
        layout.update(kind="datetime", unit=index.unit, tz=None if index.tz is None else str(index.tz))
        layout["freq"] = index.freqstr
        values = index.asi8
    elif isinstance(index, pd.TimedeltaIndex):
        layout.update(kind="timedelta", unit=index.unit, freq=index.freqstr)
        values = index.asi8
    elif type(index) is pd.Index and index.dtype.kind in "iuf" and index.dtype.itemsize <= 8:
        layout.update(kind="numeric", dtype=index.dtype.str)
        values = index.to_numpy()
    else:
        raise TypeError(
            f"cannot save {name}: a {type(index).__name__} of dtype {index.dtype} is not representable in the "
            "save format (it holds RangeIndex, integer and float indexes, PeriodIndex, DatetimeIndex, TimedeltaIndex "
            "and labels)"
        )
    values = np.array(values, copy=True)
    try:
        same = same_index(index_from_layout(layout, values), index)
    except ValueError:
        same = False
    if not same:
        raise TypeError(f"cannot save {name}: its {type(index).__name__} does not survive the save format unchanged")
    return layout, values


LAYOUT_FIELDS = {
    "range": {"step"},
    "numeric": {"dtype"},
    "period": {"freq"},
    "datetime": {"unit", "tz", "freq"},
    "timedelta": {"unit", "freq"},
}


def layout_dtype(layout) -> np.dtype:
    """The dtype of an index layout's values (refusing a layout that is not one)."""
    if not isinstance(layout, dict) or layout.get("kind") not in LAYOUT_FIELDS:
        raise ValueError(f"an index of the header has an unknown layout ({str(layout)[:80]})")
    if set(layout) != LAYOUT_FIELDS[layout["kind"]] | {"kind", "name"}:
        raise ValueError(f"an index of the header has an unknown layout (fields {sorted(layout)})")
    if layout["kind"] != "numeric":
        return np.dtype(np.int64)
    try:
        dtype = np.dtype(layout["dtype"]) if isinstance(layout["dtype"], str) else None
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in "iuf" or dtype.itemsize > 8:
        raise ValueError(f"a numeric index of the header declares dtype {layout['dtype']!r}")
    return dtype


def index_from_layout(layout: dict, values: np.ndarray):
    """The pandas Index of index_layout's (layout, values), every field checked (ValueError otherwise)."""
    import pandas as pd
    from pandas.tseries.frequencies import to_offset

    dtype = layout_dtype(layout)
    if not (isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype == dtype):
        raise ValueError(f"the values of an index of the header are not a 1-D {dtype} array")
    (name,) = _labels_from_json([layout["name"]])
    kind = layout["kind"]
    try:
        if kind == "range":
            step, n = layout["step"], len(values)
            if type(step) is not int or step == 0:
                raise ValueError("a RangeIndex of the header has a step that is not a non-zero integer")
            start = int(values[0]) if n else 0
            if n and not np.array_equal(values, start + step * np.arange(n, dtype=np.int64)):
                raise ValueError("the values of a RangeIndex of the header are not evenly spaced by its step")
            return pd.RangeIndex(start, start + step * n, step, name=name)
        if kind == "numeric":
            return pd.Index(values, name=name)
        if kind == "period":
            if not isinstance(layout["freq"], str):
                raise ValueError("a PeriodIndex of the header has no frequency")
            period = pd.PeriodDtype(layout["freq"])
            if hasattr(pd.PeriodIndex, "from_ordinals"):  # pandas >= 2.2
                return pd.PeriodIndex.from_ordinals(values, freq=period.freq, name=name)
            return pd.PeriodIndex(pd.arrays.PeriodArray(values, dtype=period), name=name)
        if layout["unit"] not in DATETIME_UNITS:
            raise ValueError(f"a {kind} index of the header has the unit {layout['unit']!r}")
        if kind == "timedelta":
            if not (layout["freq"] is None or isinstance(layout["freq"], str)):
                raise ValueError("a TimedeltaIndex of the header has a frequency that is not a string")
            index = pd.TimedeltaIndex(values.view(f"timedelta64[{layout['unit']}]"), name=name)
            return index if layout["freq"] is None else pd.TimedeltaIndex(index, freq=to_offset(layout["freq"]))
        if not all(layout[k] is None or isinstance(layout[k], str) for k in ("tz", "freq")):
            raise ValueError("a DatetimeIndex of the header has a time zone or frequency that is not a string")
        index = pd.DatetimeIndex(values.view(f"datetime64[{layout['unit']}]"), name=name)
        if layout["tz"] is not None:
            index = index.tz_localize("UTC").tz_convert(layout["tz"])
        return index if layout["freq"] is None else pd.DatetimeIndex(index, freq=to_offset(layout["freq"]))
    except (TypeError, ValueError, OverflowError, KeyError, AttributeError) as error:
        raise ValueError(f"an index of the header cannot be rebuilt ({type(error).__name__}: {error})") from None


def _is_str_dtype(dtype) -> bool:
    """pandas' string dtype (the default for strings from pandas 3 on)."""
    import pandas as pd

    return isinstance(dtype, pd.StringDtype)


def _index_to_json(index, name: str) -> dict:
    """A pandas Index as plain JSON: labels as a list; a RangeIndex as start, stop and step; any
    other as its layout (index_layout) and its values as a list of numbers."""
    import pandas as pd

    if type(index) is pd.Index and (index.dtype == object or _is_str_dtype(index.dtype)):
        spec = {"name": _labels_to_json([index.name], f"the name of {name}")[0], "kind": "labels"}
        spec["values"] = _labels_to_json(index.tolist(), name)
        if index.dtype != object:
            spec["dtype"] = "str"  # pandas >= 3 keeps strings in its own dtype
        back = _index_from_json(spec)
        if not same_index(back, index):
            raise TypeError(f"cannot save {name}: its labels do not survive the save format unchanged")
        return spec
    layout, values = index_layout(index, name)
    if layout["kind"] == "range":
        return {**layout, "start": int(index.start), "stop": int(index.stop)}
    return {**layout, "values": values.tolist()}


def same_index(a, b) -> bool:
    """Whether two indexes are the same in everything the save format keeps: class, dtype, values
    (their Python types too, for labels), freq and name."""
    if type(a) is not type(b) or a.dtype != b.dtype or not a.equals(b) or a.name != b.name:
        return False
    if getattr(a, "freq", None) != getattr(b, "freq", None):
        return False
    if a.dtype == object or _is_str_dtype(a.dtype):
        kind = lambda v: type(v.item() if isinstance(v, np.generic) else v)  # noqa: E731
        return [kind(v) for v in a] == [kind(v) for v in b]
    return True


def _index_from_json(spec):
    """The pandas Index that _index_to_json wrote, every field checked (ValueError otherwise)."""
    import pandas as pd

    if not isinstance(spec, dict):
        raise ValueError("an index of the header is not a JSON object")
    kind = spec.get("kind")
    if kind == "labels":
        if set(spec) - {"dtype"} != {"kind", "name", "values"} or spec.get("dtype", "object") not in ("object", "str"):
            raise ValueError(f"an index of the header has an unknown layout (fields {sorted(spec)})")
        (name,) = _labels_from_json([spec["name"]])
        labels = _labels_from_json(spec["values"])
        if spec.get("dtype") == "str":
            if not all(isinstance(v, str) or v is None or (isinstance(v, float) and math.isnan(v)) for v in labels):
                raise ValueError("an index of strings in the header holds labels that are not strings")
            return pd.Index(labels, dtype="str", name=name)
        return pd.Index(labels, dtype=object, name=name)
    if kind == "range":
        layout = {k: v for k, v in spec.items() if k not in ("start", "stop")}
        bounds = [spec.get("start"), spec.get("stop"), spec.get("step")]
        if not all(type(v) is int for v in bounds) or bounds[2] == 0:
            raise ValueError("a RangeIndex of the header has a start, stop or step that is not an integer")
        layout_dtype(layout)
        (name,) = _labels_from_json([spec["name"]])
        return pd.RangeIndex(*bounds, name=name)  # lazy: no memory for its length
    layout = {k: v for k, v in spec.items() if k != "values"}
    dtype = layout_dtype(layout)
    values = spec.get("values")
    allowed = (int,) if dtype.kind in "iu" else (int, float)
    if not isinstance(values, list) or not all(type(v) in allowed for v in values):
        raise ValueError(
            f"the values of an index of the header are not a list of {dtype.kind in 'iu' and 'integers' or 'numbers'}"
        )
    try:
        array = np.array(values, dtype=dtype)
    except (OverflowError, ValueError) as error:
        raise ValueError(f"the values of an index of the header do not fit {dtype}: {error}") from None
    return index_from_layout(layout, array)


def network_state(estimator) -> tuple[dict, dict[str, torch.Tensor]]:
    """(fitted attributes, tensors) of an estimator holding one network `model_`: its
    `_saved_attributes` and the network's state dict (on the CPU)."""
    if not hasattr(estimator, "model_"):
        raise ValueError(f"this {type(estimator).__name__} is not fitted yet; fit it before save")
    fitted = {attr: getattr(estimator, attr) for attr in estimator._saved_attributes if hasattr(estimator, attr)}
    return fitted, {k: v.detach().cpu().contiguous() for k, v in estimator.model_.state_dict().items()}


def restore_network_state(estimator, fitted: dict, tensors: dict[str, torch.Tensor], path) -> None:
    """The inverse of network_state on an estimator built with the saved parameters: its attributes
    set, the network rebuilt from them and filled with the weights."""
    if not isinstance(fitted, dict):
        raise ValueError(f"{path}: the fitted attributes of the header are not a JSON object")
    for attr, value in fitted.items():
        if attr not in type(estimator)._saved_attributes:
            raise ValueError(f"{path} holds an unexpected attribute {attr!r}")
        setattr(estimator, attr, value)
    _check_input_attributes(estimator, path)
    estimator._restore_after_load()
    estimator.model_ = filled_network(estimator._rebuild_network(), tensors, path)


def is_integer(value, low: int) -> bool:
    """An integer of at least `low` (not a bool) as a header may hold one."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)) and value >= low


def _check_input_attributes(estimator, path) -> None:
    """The fitted attributes every sequence estimator reads X by, as fit leaves them: a header edited with
    its checksum computed again (the checksum cannot refuse it) fails here, naming the file and the
    attribute, not at predict with an IndexError or, worse, with predictions read through a wrong scaling."""

    def refuse(attr: str, what: str) -> None:
        raise ValueError(f"{path}: the fitted attribute {attr} is {getattr(estimator, attr, None)!r}, not {what}")

    def whole(attr: str, low: int) -> int:
        value = getattr(estimator, attr, None)
        if not is_integer(value, low):
            refuse(attr, f"an integer >= {low}")
        return int(value)

    def real_array(attr: str, shape: tuple[int, ...], positive: bool = False) -> None:
        try:
            array = np.asarray(getattr(estimator, attr, None), dtype=np.float64)
        except (TypeError, ValueError):
            array = None
        if array is None or array.shape != shape or not np.isfinite(array).all() or (positive and (array <= 0).any()):
            refuse(attr, f"{'positive ' if positive else ''}finite numbers of shape {shape}")

    channels = whole("n_channels_in_", 1)
    whole("n_features_in_", 1)
    whole("n_timepoints_in_", 1)
    epochs = whole("n_iter_", 0)
    if hasattr(estimator, "best_epoch_") and whole("best_epoch_", 0) > epochs:  # files before it have none
        refuse("best_epoch_", f"an epoch of the {epochs} run")
    if hasattr(estimator, "_seed_"):
        whole("_seed_", 0)
    if getattr(estimator, "input_ndim_", None) not in (2, 3):
        refuse("input_ndim_", "2 or 3")
    normalize = estimator.get_params(deep=False).get("normalize")
    allowed = ("channel", "series", "series+stats", "none") if normalize == "auto" else (normalize,)
    if getattr(estimator, "normalization_", None) not in allowed:
        refuse("normalization_", f"one of {allowed} (normalize={normalize!r})")
    real_array("input_mean_", (channels,))
    real_array("input_scale_", (channels,), positive=True)
    if getattr(estimator, "input_range_", None) is not None:
        real_array("input_range_", (2, channels))
    for attr in ("train_sample_rate_", "lowest_trained_rate_"):  # files before the second have none
        rate = getattr(estimator, attr, None)
        if rate is not None and (
            isinstance(rate, bool) or not isinstance(rate, numbers.Real) or not np.isfinite(rate) or rate <= 0
        ):
            refuse(attr, "None or a positive number")
    if not isinstance(getattr(estimator, "history_", None), list):
        refuse("history_", "a list of the epochs' records")


def filled_network(model: torch.nn.Module, tensors: dict[str, torch.Tensor], path) -> torch.nn.Module:
    """model holding the saved weights (exactly its own set), in eval mode; a ValueError naming path if not."""
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as error:
        raise ValueError(f"{path}: the weights do not fit the network its parameters describe: {error}") from error
    return model.eval()


RUN_TIME_PARAMS = ("batch_size", "device", "verbose")
"""Parameters of how an estimator runs, which set after fit describe the fitted model as well."""


def save_estimator(estimator, path: str | Path, key=None) -> Path:
    """Write a fitted estimator to `path` (.safetensors); with a key (bytes or str), signed."""
    from safetensors.torch import save_file

    key = signing_key(key)
    name = type(estimator).__name__
    # Its fitted state first: an estimator that is not fitted says so before anything else.
    save_state = getattr(estimator, "_save_state", None)
    fitted, tensors = save_state() if save_state is not None else network_state(estimator)
    params = estimator.get_params(deep=False)
    fitted_params = getattr(estimator, "_fitted_params_", params)
    # how predict runs, not what was fitted: saved as set now (the predictions do not depend on them)
    run_time = {k: params[k] for k in RUN_TIME_PARAMS if k in params}
    changed = sorted(k for k in params if k not in run_time and not same_param(params[k], fitted_params.get(k)))
    if changed:
        warnings.warn(
            f"{name}.save: {', '.join(f'{k}={params[k]!r}' for k in changed)} was set after the "
            f"last fit and does not describe the fitted model; the file holds the values it was fitted with "
            f"({', '.join(f'{k}={fitted_params.get(k)!r}' for k in changed)}); set them again after "
            "load, or refit",
            stacklevel=caller_stacklevel(),
        )
    params = {**fitted_params, **run_time}
    if params.get("callbacks"):
        warnings.warn(
            f"{name}.save does not store callbacks (they are code); the loaded estimator has callbacks=None",
            stacklevel=caller_stacklevel(),
        )
        params["callbacks"] = None
    if isinstance(params.get("random_state"), np.random.RandomState):
        warnings.warn(
            f"{name}.save stores random_state=None in place of a numpy RandomState", stacklevel=caller_stacklevel()
        )
        params["random_state"] = None
    header = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "class": name,
        "params": _to_json(params, "the parameters"),
        "fitted": _to_json(fitted, "the fitted attributes"),
        "versions": _versions(),
    }
    sign(tensors, header, key)
    path = Path(path)
    with replacing(path, f"{name} (save)") as tmp:
        save_file(tensors, str(tmp), metadata={"ssmts": json.dumps(header)})
    return path


def is_safetensors(path) -> bool:
    """Whether the file opens as safetensors (a header of its own, read without running anything)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt"):
            return True
    except Exception:  # noqa: BLE001 - any failure to open means no
        return False


def read_header(
    path: str | Path, allow_format_1: bool = False, key: bytes | None = None
) -> tuple[dict, dict[str, torch.Tensor]]:
    """(header, tensors) of a saved estimator; clear errors for anything that is not one. A file of
    format 1, whose header no checksum covers, is refused unless allow_format_1; with a key, any
    file whose signature does not match it (see `verify`)."""
    from safetensors import SafetensorError
    from safetensors.torch import safe_open

    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory, not a saved estimator's file")
    if not path.is_file():
        raise FileNotFoundError(f"no saved estimator at {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except (SafetensorError, OSError, ValueError) as error:
        raise ValueError(
            f"{path} is not a readable ssmts save file (damaged, truncated, or another format; "
            f"files written by joblib/pickle load with joblib.load, which runs code): {error}"
        ) from error
    try:
        header = json.loads(metadata["ssmts"])
    except (KeyError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is a safetensors file without ssmts metadata") from error
    except RecursionError:  # JSON nested deeper than Python's parser goes: no header of ours
        raise ValueError(
            f"{path}: its ssmts metadata is nested too deeply to be a header; the file was altered"
        ) from None
    if header.get("format") != FORMAT:
        raise ValueError(f"{path} is not an ssmts estimator file (format {header.get('format')!r})")
    version = header.get("format_version")
    if version not in READABLE_VERSIONS:
        raise ValueError(
            f"{path} has save-format version {version!r}; this ssmts reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}"
        )
    verify(path, tensors, header, key, covers_header=version >= 2)
    if version < 2:
        # An edited header (reversed classes_, say) would load without a trace: the caller must vouch for it.
        unchecked = (
            f"{path} was saved in format {version}, whose checksum covers the weights but not the header "
            "(classes, scaling statistics, parameters), so an edit of the header cannot be detected"
        )
        if not allow_format_1:
            raise ValueError(
                f"{unchecked}. If you wrote this file and trust it, load it with load(path, allow_format_1=True) and "
                f"save it again (format 2's checksum covers both); ssmts {LAST_VERSION_READING_FORMAT_1} is the last "
                "version that reads format 1"
            )
        warnings.warn(
            f"{unchecked}; save it again for a checksum of both (ssmts {LAST_VERSION_READING_FORMAT_1} is the last "
            "version that reads format 1)",
            stacklevel=caller_stacklevel(),
        )
    return header, tensors


# Parameters and fitted attributes that size the network: none can exceed the number of weights a
# file holds, so a small file cannot make load build (or initialize) a huge network.
NETWORK_SIZES = (
    "d_model",
    "d_state",
    "n_layers",
    "heads",
    "n_scales",
    "n_kernels",
    "n_biases",
    "n_channels_in_",
    "n_targets_",
    "n_exog_",
    "ensemble_size",
)


def _check_sizes(path, values: dict, n_weights: int) -> None:
    """values: parameters and fitted attributes; nested objects (a face's inner estimator) too."""
    for name, value in values.items():
        if isinstance(value, dict):
            _check_sizes(path, value, n_weights)
        elif (
            name in NETWORK_SIZES
            and isinstance(value, numbers.Integral)
            and not isinstance(value, bool)
            and value > n_weights
        ):
            raise ValueError(
                f"{path}: {name}={value} cannot describe a network of the {n_weights} weights the file "
                "holds; the file was altered"
            )


def n_weights(tensors: dict[str, torch.Tensor]) -> int:
    """The number of network weights among a file's tensors (its data tensors left out)."""
    return sum(t.numel() for name, t in tensors.items() if not name.startswith(DATA_PREFIX))


def load_estimator(cls, path: str | Path, allow_format_1: bool = False, key=None):
    """Rebuild an estimator of class `cls` from a file written by save_estimator; with a key (bytes
    or str), only if the file is signed with it."""
    if not isinstance(allow_format_1, bool):
        raise TypeError(f"allow_format_1 must be True or False, got {allow_format_1!r}")
    header, tensors = read_header(path, allow_format_1, signing_key(key))
    if header.get("class") != cls.__name__:
        raise TypeError(f"{path} holds a {header.get('class')}, not a {cls.__name__}")
    try:
        return _rebuild(cls, path, header, tensors)
    except ValueError as error:
        if str(path) in str(error):
            raise
        raise ValueError(f"{path}: {error}") from error  # every error names the file
    except (TypeError, KeyError, IndexError, AttributeError, OverflowError) as error:
        # Whatever a hostile header holds, the caller gets one kind of error, naming the file.
        raise ValueError(
            f"{path}: the header does not describe a valid {cls.__name__} ({type(error).__name__}: {error}); "
            "the file was altered"
        ) from error


def _rebuild(cls, path, header: dict, tensors: dict[str, torch.Tensor]):
    here, there = _versions(), header.get("versions", {})
    differing = {k: (there.get(k), here[k]) for k in ("ssmts", "torch") if there.get(k) != here[k]}
    if differing:
        warnings.warn(
            f"{path} was saved with other versions "
            f"({', '.join(f'{k} {a} -> {b}' for k, (a, b) in differing.items())}); "
            "check its predictions before relying on them",
            stacklevel=caller_stacklevel(),
        )
    params = _from_json(header["params"])
    if not isinstance(params, dict):
        raise ValueError(f"{path}: the parameters of the header are not a JSON object")
    unknown = set(params) - set(cls.__params__)
    if unknown:
        raise ValueError(f"{path} names parameters this version of {cls.__name__} does not have: {sorted(unknown)}")
    for name, value in getattr(cls, "_params_added", {}).items():  # a file saved before the parameter existed
        params.setdefault(name, value)
    fitted = _from_json(header["fitted"])
    if not isinstance(fitted, dict):
        raise ValueError(f"{path}: the fitted attributes of the header are not a JSON object")
    _check_sizes(path, {**params, **fitted}, n_weights(tensors))
    estimator = cls(**params)
    estimator.validate_params()
    restore_state = getattr(estimator, "_restore_state", None)
    if restore_state is not None:
        restore_state(fitted, tensors, path)
    else:
        if any(name.startswith(DATA_PREFIX) for name in tensors):
            raise ValueError(f"{path} holds data tensors, which a {cls.__name__} never writes")
        restore_network_state(estimator, fitted, tensors, path)
    estimator._fitted_params_ = estimator.get_params(deep=False)  # what the loaded model was fitted with
    return estimator
