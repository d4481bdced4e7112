"""The pretrained forecaster's weights: one .safetensors file shipped inside the package.

    tensors    the state dict of the forecaster's network (a ForecastEnsemble of direct heads)
    metadata   "ssmts_pretrained": JSON with the parameters that define the network and its inputs
               (backbone, strategy, normalize, quantile grid), the context and horizon it was
               trained for, how it was trained (corpus, steps, seed, version), and the SHA-256
               checksum of the tensors and of the rest of this JSON (as the estimators' save format)

`SSMForecaster(pretrained=True)` reads it (see ssmts.sktime.forecasting); the script that writes it
is ssmts.bench.pretrain (`python -m ssmts.bench pretrain`). Reading never runs code from the file:
safetensors holds tensors only, the checksum must match (an integrity check: it detects a damaged
file and an edit of a weight or of the metadata made without recomputing it, not a deliberate edit
that recomputes it), the metadata is JSON whose keys, types and values are checked, and the tensors
must be finite and match the network the metadata describes exactly.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import numpy as np
import torch

from .._files import replacing
from ..estimators._persistence import filled_network, sign, verify
from ..training.params import _same

FORMAT = "ssmts-pretrained-forecaster"
METADATA_KEY = "ssmts_pretrained"
WEIGHTS_FILE = "forecaster-small.safetensors"

# pretrained="fine-tune": a smaller learning rate and budget than training from scratch. On the
# development panels the defaults' lr 1e-3 and 16000 steps drifted far from the pretrained weights
# (MASE macrodata 1.54, fertility 2.94, zero-shot 1.30 and 2.08); lr 1e-4 for 2000 steps: 1.24, 2.07.
MAX_CONTEXT_LENGTH = 1 << 16
"""The longest context_length pretrained weights may declare (the shipped weights: 48 steps)."""
FINE_TUNE = {"lr": 1e-4, "lr_ssm": 1e-4, "max_steps": 2000}

# The forecaster parameters a pretrained network fixes, besides the backbone group.
NETWORK_PARAMS = ("strategy", "normalize", "quantiles", "ensemble_size")
# Parameter names that weights written by earlier versions hold, and their names now.
RENAMED_PARAMS = {"instance_norm": "normalize"}
# Fields of the metadata, with their types: anything else is refused.
FIELDS = {
    "format": str,
    "version": str,
    "params": dict,
    "context_length": int,
    "horizon": int,
    "quantile_levels": list,
    "window_location": str,
    "training": dict,
    "sha256": str,
}


def default_weights() -> Path:
    """Path of the weights shipped with ssmts."""
    return Path(str(resources.files("ssmts.sktime") / "weights" / WEIGHTS_FILE))


def pretrained_metadata(forecaster, training: dict) -> dict:
    """The metadata (without its checksum) that write_pretrained writes for a fitted SSMForecaster;
    training: how it was trained (JSON)."""
    from .._version import __version__
    from ..training.params import BackboneParams

    params = forecaster.param_values(BackboneParams)
    params.update({name: getattr(forecaster, name) for name in NETWORK_PARAMS})
    params["normalize"] = forecaster._normalize
    params["quantiles"] = [float(q) for q in np.asarray(params["quantiles"], dtype=np.float64).ravel()]
    metadata = {
        "format": FORMAT,
        "version": __version__,
        "params": params,
        "context_length": int(forecaster.context_length_),
        "horizon": int(forecaster.horizon_),
        "quantile_levels": [float(q) for q in forecaster.quantile_levels_],
        "window_location": forecaster.window_location_,
        "training": training,
    }
    return metadata


def _save(state: dict[str, torch.Tensor], metadata: dict, path: Path) -> Path:
    from safetensors.torch import save_file

    sign(state, metadata, key=None)
    with replacing(path, "pretrained weights") as tmp:
        save_file(state, str(tmp), metadata={METADATA_KEY: json.dumps(metadata, sort_keys=True)})
    return path


def write_pretrained(forecaster, path: str | Path, training: dict) -> Path:
    """Write a fitted SSMForecaster's network as pretrained weights; training: how it was trained (JSON)."""
    metadata = pretrained_metadata(forecaster, training)
    state = {name: t.detach().cpu().contiguous() for name, t in forecaster.model_.state_dict().items()}
    return _save(state, metadata, Path(path))


# What the members of a stacked file must share: anything else would feed them different inputs
# or average grids of different quantiles.
SHARED_FIELDS = ("context_length", "horizon", "quantile_levels", "window_location")


def stack_pretrained(paths: list[str | Path], path: str | Path, training: dict) -> Path:
    """Write one pretrained ensemble whose members are the networks of the pretrained files `paths`
    (each checked as read_pretrained checks it): its quantile grid is their average, as
    ensemble_size > 1 averages members trained side by side. The files must describe the same
    network and inputs; training: how the stack was made (the members' own records are kept in
    it, under "members")."""
    from .._version import __version__

    if len(paths) < 2:
        raise ValueError(f"stacking takes at least two pretrained files, got {len(paths)}")
    state: dict[str, torch.Tensor] = {}
    records, first, members = [], None, 0
    for file in paths:
        metadata, tensors = read_pretrained(file)
        params = {k: v for k, v in metadata["params"].items() if k != "ensemble_size"}
        if first is None:
            first = dict(metadata, params=params)
        for name in SHARED_FIELDS + ("params",):
            value = params if name == "params" else metadata[name]
            if value != first[name]:
                raise ValueError(
                    f"{file} has {name} {value!r:.200}, but {paths[0]} has {first[name]!r:.200}: only networks "
                    "of the same parameters, context, horizon and quantile grid can be stacked"
                )
        taken = 0
        for k in range(int(metadata["params"]["ensemble_size"])):
            prefix = f"members.{k}."
            member = {f"members.{members}.{n[len(prefix) :]}": t for n, t in tensors.items() if n.startswith(prefix)}
            state.update({n: t.contiguous() for n, t in member.items()})
            taken, members = taken + len(member), members + 1
        if taken != len(tensors):  # a weight outside every member would be dropped
            raise ValueError(f"{file} holds weights outside its {metadata['params']['ensemble_size']} member(s)")
        records.append(dict(metadata["training"], sha256=metadata["sha256"]))
    metadata = {name: first[name] for name in FIELDS if name not in ("sha256", "training", "params")}
    metadata["version"] = __version__
    metadata["params"] = dict(first["params"], ensemble_size=members)
    metadata["training"] = dict(training, members=records)
    return _save(state, metadata, Path(path))


def read_pretrained(path: str | Path | None = None) -> tuple[dict, dict[str, torch.Tensor]]:
    """(metadata, state dict) of pretrained weights (default: those shipped with ssmts), checked."""
    from safetensors import SafetensorError
    from safetensors.torch import safe_open

    from ..estimators._persistence import _check_sizes, n_weights
    from ._windows import window_location

    path = default_weights() if path is None else Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no pretrained forecaster weights at {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            raw = (f.metadata() or {}).get(METADATA_KEY)
            state = {name: f.get_tensor(name) for name in f.keys()}
    except SafetensorError as error:
        raise ValueError(f"{path} is not a readable safetensors file: {error}") from None
    if raw is None:
        raise ValueError(f"{path} holds no pretrained forecaster (no {METADATA_KEY!r} metadata)")
    try:
        metadata = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ValueError(f"the metadata of {path} is not valid JSON: {error}") from None
    except RecursionError:
        raise ValueError(f"the metadata of {path} is nested too deeply to be pretrained-forecaster metadata") from None
    if isinstance(metadata, dict) and set(FIELDS) - set(metadata) == {"sha256"} and set(metadata) <= set(FIELDS):
        raise ValueError(
            f"{path} has no checksum: it was written before pretrained weights carried one (ssmts 0.1.0 before "
            "2026-11-27), or altered; write it again with this ssmts (python -m ssmts.bench pretrain)"
        )
    if not isinstance(metadata, dict) or set(metadata) != set(FIELDS):
        raise ValueError(f"the metadata of {path} must have exactly the fields {sorted(FIELDS)}")
    for name, kind in FIELDS.items():
        if not isinstance(metadata[name], kind) or isinstance(metadata[name], bool):
            raise ValueError(f"the metadata field {name!r} of {path} must be a {kind.__name__}")
    if metadata["format"] != FORMAT:
        raise ValueError(f"{path} is a {metadata['format']!r} file, not a {FORMAT!r}")
    verify(path, state, metadata, key=None, what="weights or metadata")
    for name, tensor in state.items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise ValueError(f"{path}: the weight {name!r} holds NaN or infinite values; the file is damaged")
    _check_levels(path, metadata)
    for old, new in RENAMED_PARAMS.items():
        if old in metadata["params"]:
            if new in metadata["params"]:
                raise ValueError(f"the metadata of {path} sets both {old!r} and its new name {new!r}")
            metadata["params"][new] = metadata["params"].pop(old)
    if not (metadata["context_length"] >= 1 and metadata["horizon"] >= 1):
        raise ValueError(f"{path} declares context_length and horizon that are not positive")
    if metadata["context_length"] > MAX_CONTEXT_LENGTH:
        # No weight depends on the context length, so the tensors cannot bound it as they bound the sizes below.
        raise ValueError(
            f"{path} declares context_length={metadata['context_length']}, beyond {MAX_CONTEXT_LENGTH}, the longest "
            "context a pretrained forecaster may have (every series is padded to it: a fit would allocate "
            "context_length values per window); the file was altered"
        )
    normalize = metadata["params"].get("normalize", True)
    if metadata["window_location"] != window_location(normalize):
        # forecasts would be mapped back from another location than the network was trained with
        raise ValueError(
            f"the metadata of {path} has window_location={metadata['window_location']!r:.40}, which contradicts "
            f"its normalize={normalize!r:.40}; the file was altered"
        )
    # Sizes against the weights the file holds, before any network is built: a small file must not
    # make fit allocate a huge one. The direct head alone has d_model x horizon x quantiles weights.
    weights = n_weights(state)
    _check_sizes(path, metadata["params"], weights)
    d_model = metadata["params"].get("d_model")
    if isinstance(d_model, int) and d_model * metadata["horizon"] * len(metadata["quantile_levels"]) > weights:
        raise ValueError(
            f"{path}: horizon={metadata['horizon']} cannot describe a network of the {weights} weights the "
            "file holds; the file was altered"
        )
    return metadata, state


def _check_levels(path: Path, metadata: dict) -> None:
    """The quantile levels the head's outputs stand for: numbers in (0, 1), increasing, holding the
    median, and exactly those the forecaster derives from the `quantiles` parameter."""
    from ._windows import quantile_levels

    def levels(values, what):
        if not isinstance(values, list) or not values:
            raise ValueError(f"the metadata of {path}: {what} must be a non-empty list of numbers in (0, 1)")
        for q in values:
            if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0.0 < q < 1.0:
                raise ValueError(f"the metadata of {path}: {what} holds {q!r:.40}, not a number in (0, 1)")
        return np.asarray(values, dtype=np.float64)

    declared = levels(metadata["quantile_levels"], "quantile_levels")
    if not (np.diff(declared) > 0).all() or 0.5 not in declared:
        raise ValueError(
            f"the metadata of {path}: quantile_levels {metadata['quantile_levels']!r:.200} must increase strictly and "
            "hold 0.5 (the point forecast); the file was altered"
        )
    implied = quantile_levels(levels(metadata["params"].get("quantiles"), "params.quantiles"))
    if not np.array_equal(implied, declared):
        raise ValueError(
            f"the metadata of {path}: quantile_levels {metadata['quantile_levels']!r:.200} are not those of its "
            f"quantiles parameter ({implied.tolist()!r:.200}); the file was altered"
        )


class PretrainedMixin:
    """SSMForecaster's use of the pretrained weights: pretrained=True / "zero-shot" / "fine-tune"."""

    @property
    def _zero_shot(self) -> bool:
        return self.pretrained is True or self.pretrained == "zero-shot"

    def _read_pretrained(self, y, X) -> tuple[dict, dict]:
        """The pretrained weights (metadata, state dict), checked against the data and the parameters:
        a parameter the weights fix may be left at its default (it takes the pretrained value) or equal it."""
        metadata, state = read_pretrained(self.pretrained_weights)
        if y.shape[1] != 1 or X is not None or self.irregular != "refuse":
            raise ValueError(
                f"pretrained={self.pretrained!r} forecasts one series at a time from its own past: it takes a "
                f"univariate y without X on an evenly spaced index, got {y.shape[1]} column(s) in y"
                + (", X" if X is not None else "")
                + (f", irregular={self.irregular!r}" if self.irregular != "refuse" else "")
                + "; use pretrained=False"
            )

        def plain(value):  # JSON has lists where the parameters have tuples
            return [plain(v) for v in value] if isinstance(value, (list, tuple, np.ndarray)) else value

        fixed = dict(metadata["params"], context_length=metadata["context_length"])
        for name, value in fixed.items():
            if name not in type(self).__params__:
                raise ValueError(f"the pretrained weights set {name!r}, which SSMForecaster does not have")
            mine, default = getattr(self, name), type(self).__params__[name].default
            if name == "normalize":  # or as given under its former name
                mine = self._normalize
            if name == "context_length" and mine == "auto":
                continue
            if not (_same(plain(mine), plain(default)) or _same(plain(mine), plain(value))):
                raise ValueError(
                    f"the pretrained network has {name}={value!r}, but {name}={mine!r}: leave {name} at its default "
                    f"to use the pretrained network, or train from scratch (pretrained=False)"
                )
        self.pretrained_params_ = dict(fixed, horizon=metadata["horizon"])
        return metadata, state

    def _fine_tune_settings(self) -> dict:
        """pretrained='fine-tune': the training parameters left at their defaults take FINE_TUNE values."""
        if self.pretrained != "fine-tune":
            return {}
        params = type(self).__params__
        return {name: value for name, value in FINE_TUNE.items() if _same(getattr(self, name), params[name].default)}

    def _pretrained_network(self, metadata: dict, state: dict) -> torch.nn.Module:
        """The network the pretrained metadata describes, holding its weights."""
        template = type(self)(**dict(metadata["params"], quantiles=tuple(metadata["params"]["quantiles"])))
        template.validate_params()
        return filled_network(self._build_network(template), state, self.pretrained_weights or default_weights())
