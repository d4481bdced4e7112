"""The pickle-free save format of the scikit-learn estimators: one .safetensors file.

    weights    the network's state dict (safetensors: tensors only, no code)
    metadata   "ssmts": JSON with the format version, the estimator class, its parameters,
               its fitted attributes, the ssmts / torch / Python versions and a SHA-256
               checksum of the tensors and of the rest of this JSON

`load` reads the JSON, checks the class and the checksum (a mismatch is an error: the file
was damaged or altered, in its weights or in its header: the classes, the scaling statistics
and the parameters change predictions as much as the weights do), warns when the versions
differ, rebuilds the network from the
parameters and the fitted sizes, and loads the weights: no code from the file is executed.
What a file cannot hold is said at `save`: callbacks (code) and a numpy RandomState are
not stored, and the optimizer state of `warm_start` / `partial_fit` is not kept (a loaded
estimator continues training with a fresh optimizer).
"""

from __future__ import annotations

import hashlib
import json
import numbers
import platform
import warnings
from pathlib import Path

import numpy as np
import torch

FORMAT = "ssmts-estimator"
FORMAT_VERSION = 2
"""2: the checksum covers the header as well as the tensors (1: the tensors only; still read)."""
READABLE_VERSIONS = (1, 2)


def _versions() -> dict:
    from .._version import __version__

    return {"ssmts": __version__, "torch": torch.__version__.split("+")[0], "python": platform.python_version()}


def _checksum(tensors: dict[str, torch.Tensor], header: dict | None = None) -> str:
    """SHA-256 of the tensors (names, dtypes, shapes, bytes) and, from format 2 on, of the header
    without its own checksum (canonical JSON: sorted keys, no spaces)."""
    digest = hashlib.sha256()
    if header is not None:
        fields = {key: value for key, value in header.items() if key != "sha256"}
        digest.update(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode())
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        digest.update(name.encode())
        digest.update(str(t.dtype).encode())
        digest.update(str(tuple(t.shape)).encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def _same(a, b) -> bool:
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
    raise TypeError(
        f"cannot save {name}: a {type(value).__name__} is not representable in the save format "
        "(labels and parameters must be numbers, strings, booleans or None); use save(format='joblib')"
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
        return {k: _from_json(v) for k, v in value.items()}
    return value


def save_estimator(estimator, path: str | Path) -> Path:
    """Write a fitted estimator to `path` (.safetensors)."""
    from safetensors.torch import save_file

    name = type(estimator).__name__
    if not hasattr(estimator, "model_"):
        raise ValueError(f"this {name} is not fitted yet; fit it before save")
    params = estimator.get_params(deep=False)
    fitted_params = getattr(estimator, "_fitted_params_", params)
    changed = sorted(key for key in params if not _same(params[key], fitted_params.get(key)))
    if changed:
        warnings.warn(
            f"{name}.save: {', '.join(f'{key}={params[key]!r}' for key in changed)} was set after the "
            f"last fit and does not describe the fitted model; the file holds the values it was fitted with "
            f"({', '.join(f'{key}={fitted_params.get(key)!r}' for key in changed)}); set them again after "
            "load, or refit",
            stacklevel=3,
        )
        params = dict(fitted_params)
    if params.get("callbacks"):
        warnings.warn(
            f"{name}.save does not store callbacks (they are code); the loaded estimator has callbacks=None",
            stacklevel=3,
        )
        params["callbacks"] = None
    if isinstance(params.get("random_state"), np.random.RandomState):
        warnings.warn(f"{name}.save stores random_state=None in place of a numpy RandomState", stacklevel=3)
        params["random_state"] = None
    fitted = {attr: getattr(estimator, attr) for attr in estimator._saved_attributes if hasattr(estimator, attr)}
    tensors = {k: v.detach().cpu().contiguous() for k, v in estimator.model_.state_dict().items()}
    header = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "class": name,
        "params": _to_json(params, "the parameters"),
        "fitted": _to_json(fitted, "the fitted attributes"),
        "versions": _versions(),
    }
    header["sha256"] = _checksum(tensors, header)
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(
            f"cannot save {name} to {path}: it is a directory; give a file name such as {path / 'model.safetensors'}"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        save_file(tensors, str(tmp), metadata={"ssmts": json.dumps(header)})
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)  # a failed write leaves nothing behind
    return path


def read_header(path: str | Path) -> tuple[dict, dict[str, torch.Tensor]]:
    """(header, tensors) of a saved estimator; clear errors for anything that is not one."""
    from safetensors import SafetensorError
    from safetensors.torch import safe_open

    path = Path(path)
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
    if header.get("format") != FORMAT:
        raise ValueError(f"{path} is not an ssmts estimator file (format {header.get('format')!r})")
    version = header.get("format_version")
    if version not in READABLE_VERSIONS:
        raise ValueError(
            f"{path} has save-format version {version!r}; this ssmts reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}"
        )
    if _checksum(tensors, header if version >= 2 else None) != header.get("sha256"):
        raise ValueError(f"{path}: the file does not match its checksum (weights or header); it was damaged or altered")
    if version < 2:
        warnings.warn(
            f"{path} was saved in format {version}, whose checksum covers the weights but not the header "
            "(classes, scaling statistics, parameters); save it again to protect both",
            stacklevel=3,
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
)


def _check_sizes(path, values: dict, n_weights: int) -> None:
    for name in NETWORK_SIZES:
        value = values.get(name)
        if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value > n_weights:
            raise ValueError(
                f"{path}: {name}={value} cannot describe a network of the {n_weights} weights the file "
                "holds; the file was altered"
            )


def load_estimator(cls, path: str | Path):
    """Rebuild an estimator of class `cls` from a file written by save_estimator."""
    header, tensors = read_header(path)
    if header["class"] != cls.__name__:
        raise TypeError(f"{path} holds a {header['class']}, not a {cls.__name__}")
    here, there = _versions(), header.get("versions", {})
    differing = {k: (there.get(k), here[k]) for k in ("ssmts", "torch") if there.get(k) != here[k]}
    if differing:
        warnings.warn(
            f"{path} was saved with other versions "
            f"({', '.join(f'{k} {a} -> {b}' for k, (a, b) in differing.items())}); "
            "check its predictions before relying on them",
            stacklevel=3,
        )
    params = _from_json(header["params"])
    unknown = set(params) - set(cls.__params__)
    if unknown:
        raise ValueError(f"{path} names parameters this version of {cls.__name__} does not have: {sorted(unknown)}")
    _check_sizes(path, {**params, **_from_json(header["fitted"])}, sum(t.numel() for t in tensors.values()))
    estimator = cls(**params)
    estimator.validate_params()
    for attr, value in _from_json(header["fitted"]).items():
        if attr not in cls._saved_attributes:
            raise ValueError(f"{path} holds an unexpected attribute {attr!r}")
        setattr(estimator, attr, value)
    estimator._restore_after_load()
    model = estimator._rebuild_network()
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as error:
        raise ValueError(f"{path}: the weights do not fit the network its parameters describe: {error}") from error
    estimator.model_ = model.eval()
    return estimator
