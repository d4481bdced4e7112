"""A network with its SSM layers as direct convolutions, for export (ONNX, TorchScript).

The FFT mode does not export: its kernels come from complex parameters (ONNX has no complex
type; both torch.onnx exporters stop at the first complex op). The kernels of a trained layer do
not depend on the input, though, so `convolution_form` computes them once, for sequences of up to
`max_length` steps, with the layer's own kernel function (`SSM._convolution_kernels`, the one the
FFT mode transforms) and applies them as a direct convolution: the exported graph holds only
Conv, MatMul and elementwise operations.

What is exported and what is refused:

* every SSM layer of the estimators' options: any heads, discretization, init, D, real_bc,
  conj_sym, and both bidirectional forms ("essm"/True and "ldnn");
* the Delta in force when `convolution_form` is called is baked into the kernels (a new sample
  rate: call it inside ``scaled_delta``);
* LinearCDE (layer="lncde") and DenseSSM layers are refused: their transitions depend on the input
  (LinearCDE) or are dense, so there is no fixed kernel to materialize;
* no per-step time deltas (irregular sampling), no state: a layer in this form has no `step`.

Cost: a causal layer stores (d_output x d_model / heads x max_length) taps and computes
d_output x (d_model / heads) x max_length multiply-adds per step (twice for bidirectional
layers), against the FFT's O(log L): meant for serving moderate lengths.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from .batch_invariant import channel_linear
from .dense import DenseSSM
from .lncde import LinearCDE
from .ssm import SSM


class KernelConvolution(nn.Module):
    """An SSM layer's forward (no state, no time deltas) as a direct convolution with its kernels
    computed for sequences of up to `max_length` steps: (batch, d_model, L) -> (batch, d_output, L),
    L <= max_length. Causal layers pad max_length - 1 steps on the left; bidirectional layers also
    on the right (two-sided kernel of 2 max_length - 1 taps). The taps beyond a shorter input meet
    only padding, so every L up to max_length gives the layer's output on that sequence.

    The kernels are computed in the layer's dtype at construction (later changes of the layer's
    parameters or Delta do not reach them)."""

    def __init__(self, layer: SSM, max_length: int):
        super().__init__()
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
            raise ValueError(f"max_length must be a positive integer, got {max_length!r}")
        two_sided = bool(layer.bidirectional)
        n = 2 * max_length - 1 if two_sided else max_length
        with torch.no_grad():
            K = layer._convolution_kernels(max_length, n, two_sided=two_sided, fold_d=True)  # (S, Mh, Hh, n)
        if two_sided:
            K = torch.roll(K, max_length - 1, dims=-1)  # circular grid -> lags -(L - 1) .. L - 1 in order
        # conv1d correlates: the weight runs from the largest lag to the smallest.
        S, Mh, Hh, _ = K.shape
        self.register_buffer("weight", K.flip(-1).reshape(S * Mh, Hh, n).contiguous())
        self.groups, self.max_length = S, max_length
        self.padding = (max_length - 1, max_length - 1 if two_sided else 0)
        # What the FFT mode adds after the convolution (SSM._feedthrough): a full D and the heads' mixer.
        self.D = copy.deepcopy(layer.D) if layer.D_mode == "full" else None
        self.mixer = copy.deepcopy(layer.mixer)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        if u.shape[-1] > self.max_length:
            raise ValueError(f"this convolution form takes up to {self.max_length} steps, got {u.shape[-1]}")
        y = F.conv1d(F.pad(u, self.padding), self.weight, groups=self.groups)
        if self.D is not None:
            y = y + torch.matmul(self.D, u)
        if self.mixer is not None:
            y = channel_linear(self.mixer, y)
        return y

    def extra_repr(self) -> str:
        out, per_group, taps = self.weight.shape
        return f"d_output={out}, d_model={per_group * self.groups}, heads={self.groups}, taps={taps}"


LENGTH_TABLE = "steps"
"""The buffer of LengthLimit that the exported check indexes (exporters find its Gather by this name)."""


class LengthLimit(nn.Module):
    """x (batch, channels, L) unchanged when L <= max_length; an error otherwise, also in an exported
    graph: the check indexes a table of max_length entries at L - 1 (an ONNX Gather, which onnxruntime
    refuses out of range; scripted, the check keeps its message in TorchScript), where a convolution
    would silently cut the kernels short."""

    def __init__(self, max_length: int):
        super().__init__()
        self.max_length = int(max_length)
        self.register_buffer(LENGTH_TABLE, torch.arange(self.max_length, dtype=torch.int64), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] > self.max_length:
            raise ValueError(
                "this model takes series of up to max_length={} steps, got {}".format(self.max_length, x.shape[-1])
            )
        last = self.steps[x.shape[-1] - 1]  # out of range beyond max_length
        return x * (last >= 0).to(x.dtype)  # times 1: keeps the check in the graph


class InputCheck(nn.Module):
    """x unchanged when it is (batch, n_channels, length) in float64 (double) or float32, of exactly
    `length` steps where given; an error naming the difference otherwise. Scripted in a TorchScript
    export, where a trace keeps no `if`: a single channel given to a model of three broadcast against
    the scaling's (1, 3, 1) statistics and was answered as that channel copied three times. In ONNX
    the input's rank, channels and dtype are fixed by the graph's input type (checked at export here)."""

    def __init__(self, name: str, n_channels: int, what: str, double: bool, length: int = 0):
        super().__init__()
        self.name, self.n_channels, self.what = name, int(n_channels), what
        self.double, self.length = bool(double), int(length)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3:
            raise ValueError(
                "this model takes {} of shape (batch, {}, length), got {} dimension(s)".format(
                    self.name, self.n_channels, x.dim()
                )
            )
        if x.shape[1] != self.n_channels:
            raise ValueError(
                "this model takes {} with {} {}, got {}".format(self.name, self.n_channels, self.what, x.shape[1])
            )
        if self.double and x.dtype != torch.float64:
            raise ValueError("this model takes {} as float64 values (convert it with .double())".format(self.name))
        if not self.double and x.dtype != torch.float32:
            raise ValueError("this model takes {} as float32 values (convert it with .float())".format(self.name))
        if self.length > 0 and x.shape[-1] != self.length:
            raise ValueError(
                "this model reads the last {} steps of {}, got {}".format(self.length, self.name, x.shape[-1])
            )
        return x


def convolution_form(model: nn.Module, max_length: int) -> nn.Module:
    """A copy of `model` (a head of ssmts.nn.heads, an SSMBackbone, a block ...) in eval mode whose SSM
    layers are KernelConvolution of `max_length`, so that it exports to ONNX and TorchScript. Its
    forward equals the model's FFT-mode forward (without mask or time deltas) on sequences of up to
    max_length steps, to float rounding; longer ones raise. LinearCDE and DenseSSM layers are refused.

    The Delta in force is baked in: for data at another sample rate call it inside
    ``scaled_delta(model, delta_factor(train_rate, new_rate))``.
    """
    for module in model.modules():
        if isinstance(module, LinearCDE):
            raise ValueError(
                "a LinearCDE layer (layer='lncde') has input-dependent transitions, so no fixed convolution "
                "kernel: it cannot be put in convolution form (only layer='ssm' exports)"
            )
        if isinstance(module, DenseSSM):
            raise ValueError("a DenseSSM layer (layer='dense') cannot be put in convolution form")
    copy_ = copy.deepcopy(model).eval()
    for parent in list(copy_.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, SSM):
                setattr(parent, name, KernelConvolution(child, max_length))
    return copy_


__all__ = ["InputCheck", "KernelConvolution", "LENGTH_TABLE", "LengthLimit", "convolution_form"]
