"""Deep SSM block (eSSM 4.6, E.1): [norm] -> layer -> activation -> dropout -> + residual -> [norm].

The sequence layer is an SSM (layer="ssm", the default) or a structured linear neural CDE
(layer="lncde", ssmts.nn.lncde.LinearCDE) or, for experiments, a dense HiPPO system
(layer="dense", ssmts.nn.dense.DenseSSM); all map (batch, H, L) -> (batch, H, L) and have
`step`, `initial_state` and a `state`/`return_state` forward.

Shapes: x: (batch, H, L); mask: (batch, L) bool, True on real steps, or None.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from .batch_invariant import channel_linear
from .dense import DenseSSM
from .lncde import LinearCDE
from .ssm import SSM

NORMS = ("layer", "batch", "none")
ACTIVATIONS = ("gated_gelu", "gelu", "leaky_relu")
LAYERS = ("ssm", "lncde")  # the estimators' choices
REFERENCE_LAYERS = ("dense",)  # O(N^2 L) references for experiments (ssmts.nn.dense), not offered by the estimators


def make_layer(kind: str, d_model: int, **kwargs) -> nn.Module:
    """The sequence layer of a block, H -> H: SSM, LinearCDE or DenseSSM (d_model, **kwargs)."""
    if kind == "ssm":
        return SSM(d_model, d_output=d_model, **kwargs)
    if kind == "lncde":
        return LinearCDE(d_model, d_output=d_model, **kwargs)
    if kind == "dense":
        return DenseSSM(d_model, d_output=d_model, **kwargs)
    raise ValueError(f"unknown layer {kind!r}; choose one of {LAYERS + REFERENCE_LAYERS}")


# Updates of the running statistics recorded, rather than applied, by this thread (see below).
_recorded = threading.local()


@contextmanager
def recorded_running_statistics():
    """Inside the block, MaskedBatchNorm layers training in this thread record the updates of their
    running statistics instead of applying them; yields the list of updates, in call order, for
    `apply_running_statistics`. A batch split into shards run on several threads (the CPU training of
    ssmts.training.parallel) normalizes each shard with its own statistics and applies the shards'
    updates in shard order afterwards, so that the result does not depend on which thread ran first."""
    updates: list = []
    previous = getattr(_recorded, "updates", None)
    _recorded.updates = updates
    try:
        yield updates
    finally:
        _recorded.updates = previous


def apply_running_statistics(updates: list) -> None:
    """Apply updates recorded by `recorded_running_statistics`, in order."""
    for module, mean, unbiased in updates:
        module.update_running_statistics(mean, unbiased)


class MaskedBatchNorm(nn.Module):
    """BatchNorm over (batch, length) whose statistics ignore padded steps."""

    def __init__(self, channels: int, momentum: float = 0.1, eps: float = 1e-5):
        super().__init__()
        self.momentum, self.eps = momentum, eps
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.register_buffer("running_mean", torch.zeros(channels))
        self.register_buffer("running_var", torch.ones(channels))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.training:
            if mask is None:
                # sums rather than Tensor.var, whose reduction over two dimensions was 2x slower on a
                # CPU, forward and backward (batch 16, 32 channels, 1,460 steps)
                count = x.shape[0] * x.shape[2]
                mean = x.sum(dim=(0, 2)) / count
                var = ((x - mean[None, :, None]) ** 2).sum(dim=(0, 2)) / count
            else:
                m = mask[:, None, :].to(x.dtype)
                count = m.sum()
                mean = (x * m).sum(dim=(0, 2)) / count
                var = (((x - mean[None, :, None]) ** 2) * m).sum(dim=(0, 2)) / count
            with torch.no_grad():
                # a masked count stays a tensor: reading it would make the host wait for a GPU
                unbiased = var * count / (max(count - 1, 1) if mask is None else (count - 1).clamp_min(1))
                pending = getattr(_recorded, "updates", None)
                if pending is None:
                    self.update_running_statistics(mean, unbiased)
                else:
                    pending.append((self, mean.detach(), unbiased.detach()))
        else:
            mean, var = self.running_mean, self.running_var
        # (x - mean) / sqrt(var + eps) * weight + bias as one scale and shift per channel: two passes
        # over x (and its gradient) instead of four.
        scale = self.weight * torch.rsqrt(var + self.eps)
        shift = self.bias - mean * scale
        return x * scale[None, :, None] + shift[None, :, None]

    @torch.no_grad()
    def update_running_statistics(self, mean: torch.Tensor, unbiased_var: torch.Tensor) -> None:
        """Move the running mean and variance towards one batch's, by `momentum`: (channels,) each."""
        self.running_mean.lerp_(mean.to(self.running_mean.dtype), self.momentum)
        self.running_var.lerp_(unbiased_var.to(self.running_var.dtype), self.momentum)


class ChannelLayerNorm(nn.LayerNorm):
    """LayerNorm over channels of a (batch, H, L) tensor, independently at every step."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return super().forward(x.transpose(1, 2)).transpose(1, 2)


class Identity(nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return x


def make_norm(kind: str, channels: int) -> nn.Module:
    if kind == "layer":
        return ChannelLayerNorm(channels)
    if kind == "batch":
        return MaskedBatchNorm(channels)
    if kind == "none":
        return Identity()
    raise ValueError(f"unknown norm {kind!r}; choose one of {NORMS}")


class GatedGELU(nn.Module):
    """eSSM activation: u' = GELU(y) * sigmoid(W GELU(y)), W: (M, M)."""

    def __init__(self, channels: int):
        super().__init__()
        self.gate = nn.Linear(channels, channels)

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        g = F.gelu(y)
        return g * torch.sigmoid(channel_linear(self.gate, g))


def make_activation(kind: str, channels: int) -> nn.Module:
    if kind == "gated_gelu":
        return GatedGELU(channels)
    if kind == "gelu":
        return nn.GELU()
    if kind == "leaky_relu":
        return nn.LeakyReLU()
    raise ValueError(f"unknown activation {kind!r}; choose one of {ACTIVATIONS}")


class SSMBlock(nn.Module):
    """Residual SSM block. x: (batch, H, L) -> (batch, H, L).

    prenorm=True: x + drop(act(layer(norm(x)))); prenorm=False: norm(x + drop(act(layer(x)))).
    layer: "ssm" (SSM, the default), "lncde" (LinearCDE) or "dense" (DenseSSM, a reference);
    **layer_kwargs go to that layer.
    The layer is the attribute `ssm` whichever it is (the name of the saved weights).
    Padded steps (mask False) are zeroed before the layer. For an SSM they change nothing on
    real steps. A LinearCDE still moves its state on a zero input (the time channel of its
    path), so with layer="lncde" only padding at the end (what ssmts does with ragged input)
    leaves the real steps untouched; the layer is causal, so later steps never reach them.
    """

    def __init__(
        self,
        d_model: int,
        *,
        norm: str = "layer",
        prenorm: bool = True,
        activation: str = "gated_gelu",
        dropout: float = 0.0,
        layer: str = "ssm",
        **layer_kwargs,
    ):
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
        self.prenorm = bool(prenorm)
        self.layer_kind = layer
        self.norm = make_norm(norm, d_model)
        self.ssm = make_layer(layer, d_model, **layer_kwargs)
        self.activation = make_activation(activation, d_model)
        self.dropout = nn.Dropout(dropout)

    def _time_deltas(self, dt: torch.Tensor | None) -> dict:
        """Keyword arguments that pass per-step time deltas to the layer (SSM layers only)."""
        if dt is None:
            return {}
        if self.layer_kind != "ssm":
            raise ValueError(
                f"per-step time deltas (dt) need layer='ssm'; a layer={self.layer_kind!r} block has no per-step Delta"
            )
        return {"dt": dt}

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, dt: torch.Tensor | None = None
    ) -> torch.Tensor:
        """dt: None or per-step time deltas (batch, L) / (L,), see SSM.forward."""
        z = self.norm(x, mask) if self.prenorm else x
        if mask is not None:
            z = z * mask[:, None, :].to(z.dtype)
        x = x + self.dropout(self.activation(self.ssm(z, **self._time_deltas(dt))))
        return x if self.prenorm else self.norm(x, mask)

    def forward_with_state(
        self, x: torch.Tensor, state: torch.Tensor | None, dt: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Causal pass that starts from `state` and returns the final state (no mask)."""
        z = self.norm(x) if self.prenorm else x
        y, state = self.ssm(z, state=state, return_state=True, **self._time_deltas(dt))
        x = x + self.dropout(self.activation(y))
        return (x if self.prenorm else self.norm(x)), state

    def step(
        self, x_t: torch.Tensor, state: torch.Tensor, dt: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x_t: (batch, H) -> (batch, H); dt: None or this step's time delta (batch,).
        Needs eval mode when norm='batch'."""
        x = x_t[..., None]
        z = self.norm(x) if self.prenorm else x
        y, state = self.ssm.step(z[..., 0], state, **self._time_deltas(dt))
        x = x + self.dropout(self.activation(y[..., None]))
        x = x if self.prenorm else self.norm(x)
        return x[..., 0], state
