"""The pretrained forecaster's weights: one .safetensors file shipped inside the package.

    tensors    the state dict of the forecaster's network (a ForecastEnsemble of direct heads)
    metadata   "ssmts_pretrained": JSON with the parameters that define the network and its inputs
               (backbone, strategy, instance_norm, quantile grid), the context and horizon it was
               trained for, and how it was trained (corpus, steps, seed, version)

`SSMForecaster(pretrained=True)` reads it (see ssmts.sktime.forecasting); the script that writes it
is ssmts.bench.pretrain (`python -m ssmts.bench pretrain`). Reading never runs code from the file:
safetensors holds tensors only, the metadata is JSON whose keys and types are checked, and the
tensors must match the network the metadata describes exactly.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import numpy as np
import torch

FORMAT = "ssmts-pretrained-forecaster"
METADATA_KEY = "ssmts_pretrained"
WEIGHTS_FILE = "forecaster-small.safetensors"

# The forecaster parameters a pretrained network fixes, besides the backbone group.
NETWORK_PARAMS = ("strategy", "instance_norm", "quantiles", "ensemble_size")
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
}


def default_weights() -> Path:
    """Path of the weights shipped with ssmts."""
    return Path(str(resources.files("ssmts.sktime") / "weights" / WEIGHTS_FILE))


def write_pretrained(forecaster, path: str | Path, training: dict) -> Path:
    """Write a fitted SSMForecaster's network as pretrained weights; training: how it was trained (JSON)."""
    from safetensors.torch import save_file

    from .._version import __version__
    from ..training.params import BackboneParams

    params = forecaster.param_values(BackboneParams)
    params.update({name: getattr(forecaster, name) for name in NETWORK_PARAMS})
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
    state = {name: t.detach().cpu().contiguous() for name, t in forecaster.model_.state_dict().items()}
    path = Path(path)
    save_file(state, str(path), metadata={METADATA_KEY: json.dumps(metadata, sort_keys=True)})
    return path


def read_pretrained(path: str | Path | None = None) -> tuple[dict, dict[str, torch.Tensor]]:
    """(metadata, state dict) of pretrained weights (default: those shipped with ssmts), checked."""
    from safetensors import SafetensorError
    from safetensors.torch import safe_open

    from ..estimators._persistence import _check_sizes, n_weights

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
    if not isinstance(metadata, dict) or set(metadata) != set(FIELDS):
        raise ValueError(f"the metadata of {path} must have exactly the fields {sorted(FIELDS)}")
    for name, kind in FIELDS.items():
        if not isinstance(metadata[name], kind) or isinstance(metadata[name], bool):
            raise ValueError(f"the metadata field {name!r} of {path} must be a {kind.__name__}")
    if metadata["format"] != FORMAT:
        raise ValueError(f"{path} is a {metadata['format']!r} file, not a {FORMAT!r}")
    if not (metadata["context_length"] >= 1 and metadata["horizon"] >= 1):
        raise ValueError(f"{path} declares context_length and horizon that are not positive")
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
