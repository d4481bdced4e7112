"""Export of a fitted estimator for serving without ssmts: an ONNX graph (onnxruntime) or a
TorchScript module, holding the input scaling fitted, the network with its SSM layers as direct
convolutions (ssmts.nn.export) and the estimator's outputs (probabilities, predictions ...)."""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from .._files import replacing
from .._version import __version__
from ..nn.export import LENGTH_TABLE, InputCheck, LengthLimit, convolution_form
from ..nn.resampling import scaled_delta

EXPORT_FORMATS = ("onnx", "torchscript")
ONNX_OPSET = 18
INPUT_NAME = "X"
INPUT_LAYOUT = "(batch, channels, length)"
VALID_NAME = "valid"
SCALED_LIMIT = 1e18
"""The largest |x| after the training scaling that predict and an exported model answer for: beyond
it a network's float32 arithmetic overflows, or with batch normalization answers from saturated
units; predict refuses such rows (SSMEstimatorMixin._refuse_beyond_limit)."""


def check_format(format: str) -> None:
    if format not in EXPORT_FORMATS:
        raise ValueError(f"unknown format {format!r}; choose one of {EXPORT_FORMATS}")


def serving_network(model: nn.Module, max_length: int, owner: str, delta_factor: float = 1.0) -> nn.Module:
    """A float32 copy of the fitted `model` in convolution form for up to max_length steps (ssmts.nn.export),
    its kernels computed in float64 with every Delta times delta_factor; a network that has no
    convolution form is refused naming `owner`, the estimator being exported."""
    network = copy.deepcopy(model).cpu().double()  # the fitted model stays where and what it is
    try:
        with scaled_delta(network, delta_factor):
            return convolution_form(network, max_length).float()
    except ValueError as error:
        raise ValueError(f"this {owner} cannot be exported: {error}") from None


class ServingModel(nn.Module):
    """X (batch, channels, length) float32, length <= max_length -> the estimator's outputs and `valid`
    (a tuple): X scaled as fitted, the network in convolution form, then the face's outputs.

    valid (batch,) bool is False for a row that predict refuses: one holding NaN or inf, one beyond
    SCALED_LIMIT after the training scaling, or one whose outputs are not finite. Such a row's
    float outputs are NaN and its integer outputs (label_index) -1, never a label."""

    def __init__(
        self,
        standardize: Callable[[torch.Tensor], torch.Tensor],
        network: nn.Module,
        outputs: Callable[[nn.Module, torch.Tensor], tuple[torch.Tensor, ...]],
        max_length: int,
        n_channels: int,
    ):
        super().__init__()
        self.expected = InputCheck(INPUT_NAME, n_channels, "channels", double=False)
        self.limit = LengthLimit(max_length)
        self.network = network.eval()
        self._standardize, self._outputs = standardize, outputs
        self.eval().requires_grad_(False)  # served outputs carry no autograd graph

    def forward(self, X: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x = self._standardize(self.limit(self.expected(X)))
        outputs = tuple(self._outputs(self.network, x))
        valid = (x.abs() <= SCALED_LIMIT).flatten(1).all(1)  # False for NaN too
        for out in outputs:
            if out.is_floating_point():
                valid = valid & torch.isfinite(out).reshape(out.shape[0], -1).all(1)
        flagged = []
        for out in outputs:
            keep = valid.reshape(-1, *[1] * (out.dim() - 1))
            invalid = torch.full_like(out, float("nan") if out.is_floating_point() else -1)
            flagged.append(torch.where(keep, out, invalid))
        return (*flagged, valid)


def _example(n_channels: int, max_length: int) -> torch.Tensor:
    # torch.export specializes dimensions of size 0 and 1: the example has 2 samples and 2 steps.
    return torch.zeros(2, n_channels, min(2, max_length))


def length_shapes(max_length: int) -> tuple[dict, ...]:
    """torch.export's dynamic shapes of one input (batch, channels, length): any batch, 1..max_length steps."""
    Dim = torch.export.Dim
    length = Dim("length", min=1, max=max_length) if max_length > 1 else None
    return ({0: Dim("batch"), **({2: length} if length is not None else {})},)


def write_onnx(
    model: nn.Module,
    path: Path,
    example: torch.Tensor,
    dynamic_shapes: tuple[dict, ...],
    input_name: str,
    output_names,
    metadata: dict[str, str],
) -> None:
    """model(example) exported by torch.onnx (dynamo) to `path`, with `metadata` as metadata_props."""
    try:
        import onnx
        import onnxscript  # noqa: F401  (torch.onnx's exporter needs it)
    except ImportError as error:
        raise ImportError(
            f"format='onnx' needs the onnx and onnxscript packages ({error}); install them with "
            "pip install 'ssmts[export]' (onnxruntime runs the file)"
        ) from None
    with replacing(path, "the exported model") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's progress notes (and torchvision's absence)
        torch.onnx.export(
            model,
            (example,),
            str(tmp),
            dynamo=True,
            input_names=[input_name],
            output_names=list(output_names),
            dynamic_shapes=dynamic_shapes,
            opset_version=ONNX_OPSET,
            external_data=False,
            verbose=False,
        )
        graph = onnx.load(str(tmp))
        for node in graph.graph.node:  # the exporter's provenance notes: stack traces with local paths
            del node.metadata_props[:]
            if node.op_type == "Gather" and node.input and node.input[0].endswith(LENGTH_TABLE):
                # onnxruntime names the failing node in its message: an input longer than max_length
                # is the only way this Gather goes out of range, so its name says so.
                node.name = f"input_longer_than_max_length_{metadata.get('max_length', '')}"
        for key, value in metadata.items():
            entry = graph.metadata_props.add()
            entry.key, entry.value = key, value
        graph.doc_string = metadata.get("description", "")
        onnx.save(graph, str(tmp))


def write_torchscript(model: nn.Module, path: Path, example: torch.Tensor, metadata: dict[str, str]) -> None:
    """model traced on `example` (torch.jit.trace) to `path`, with `metadata` as the extra file ssmts.json.
    Its input checks are scripted, so that the traced file keeps them and their messages (a trace keeps no
    `if`)."""
    with warnings.catch_warnings():
        # PyTorch 2.11 marks torch.jit deprecated (in favour of torch.export); ONNX is the lasting format.
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        model = copy.deepcopy(model)
        for parent in list(model.modules()):
            for name, child in list(parent.named_children()):
                if isinstance(child, (LengthLimit, InputCheck)):
                    setattr(parent, name, torch.jit.script(child))
        traced = torch.jit.trace(model, (example,), check_trace=False)
    with replacing(path, "the exported model") as tmp:
        torch.jit.save(traced, str(tmp), _extra_files={"ssmts.json": json.dumps(metadata)})


def write_serving_file(model: ServingModel, path: Path, format: str, n_channels: int, output_names, metadata) -> None:
    """An estimator's ServingModel (inputs of 1..max_length steps) in `format`."""
    max_length = model.limit.max_length
    example = _example(n_channels, max_length)
    if format == "onnx":
        write_onnx(model, path, example, length_shapes(max_length), INPUT_NAME, output_names, metadata)
    else:
        write_torchscript(model, path, example, metadata)


def export_metadata(estimator, output_names, max_length: int, sample_rate, extra: dict[str, str]) -> dict[str, str]:
    """What a server needs to know besides the graph, as strings (ONNX metadata_props)."""
    name = type(estimator).__name__
    return {
        "description": f"ssmts {name}: {INPUT_NAME} float32 {INPUT_LAYOUT}, 1 <= length <= {max_length} -> "
        + ", ".join(output_names),
        "estimator": name,
        "ssmts_version": __version__,
        "input_layout": INPUT_LAYOUT,
        "n_channels": str(estimator.n_channels_in_),
        "max_length": str(max_length),
        "sample_rate": "" if sample_rate is None else repr(sample_rate),
        "normalize": str(estimator.normalization_),
        "outputs": json.dumps(list(output_names)),
        **extra,
    }


def labels_json(classes) -> str:
    """Class labels (numbers, strings, booleans) as a JSON list, in the order of the probability columns."""
    return json.dumps(list(classes.tolist()), default=str)


__all__ = [
    "EXPORT_FORMATS",
    "check_format",
    "serving_network",
    "ServingModel",
    "write_onnx",
    "write_torchscript",
    "write_serving_file",
    "export_metadata",
    "labels_json",
]
