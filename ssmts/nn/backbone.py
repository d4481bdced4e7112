"""Deep SSM backbone: encoder -> n_layers SSM blocks -> decoder (eSSM 4.6).

The blocks' sequence layer is an SSM (layer="ssm", default) or a structured linear neural
CDE (layer="lncde", see ssmts.nn.lncde.LinearCDE).

Shapes: u: (batch, d_input, L) float, or (batch, L) int64 token ids (0 = padding)
when `vocab_size` is set; mask: (batch, L) bool, True on real steps.
Output: (batch, d_output) with pooling "mean"/"last", (batch, d_output, L) with "none".
"""

from __future__ import annotations

import torch
from torch import nn

from .batch_invariant import channel_linear
from .blocks import SSMBlock, make_norm
from .dense import DenseSSM
from .features import SSMFeatures
from .functional import POOLINGS, pool
from .lncde import LinearCDE
from .resampling import check_delta_factor
from .ssm import SSM


class SSMBackbone(nn.Module):
    """Stack of SSM blocks with a linear (or embedding) encoder and a pooled or per-step decoder.

    Args:
        d_input: input channels (ignored for tokens, where vocab_size sets the embedding).
        d_output: output size of the decoder (classes, targets); None: no decoder, the
            pooled or per-step features (d_model) are returned.
        pooling: "mean" or "last" for sequence-level outputs, "none" for per-step outputs.
        norm, prenorm, activation, dropout: block options (see SSMBlock).
        layer: "ssm" (default) or "lncde": the sequence layer of every block; "dense" (DenseSSM, the
            HiPPO reference of the PTD experiments) for experiments.
        **ssm_kwargs: passed to every layer: for an SSM d_state, heads, init, discretization,
            bidirectional, D, dt_min, dt_max, lambda_enforce, conj_sym, real_bc, chunk_length ...; for a
            LinearCDE d_state, structure, block_size, block_sizes, rank, dt, max_norm ...

    Zero-shot rate change: ``dt_scale`` and ``set_sample_rate`` are the SSM layers' base
    factor on Delta and change nothing in LinearCDE layers; ``ssmts.nn.scaled_delta``
    multiplies the Delta of SSM layers and the path step dt of LinearCDE layers alike.
    """

    def __init__(
        self,
        d_input: int,
        d_model: int = 64,
        n_layers: int = 4,
        d_output: int | None = None,
        *,
        vocab_size: int | None = None,
        pooling: str = "mean",
        norm: str = "layer",
        prenorm: bool = True,
        activation: str = "gated_gelu",
        dropout: float = 0.0,
        layer: str = "ssm",
        **ssm_kwargs,
    ):
        super().__init__()
        if pooling not in (*POOLINGS, "none"):
            raise ValueError(f"unknown pooling {pooling!r}; choose one of {POOLINGS} or 'none' (per-step outputs)")
        if n_layers < 1:
            raise ValueError(f"n_layers must be >= 1, got {n_layers}")
        self.d_input, self.d_model, self.n_layers, self.pooling = d_input, d_model, n_layers, pooling
        self.vocab_size, self.layer = vocab_size, layer
        self.encoder = nn.Embedding(vocab_size, d_model, padding_idx=0) if vocab_size else nn.Linear(d_input, d_model)
        self.blocks = nn.ModuleList(
            SSMBlock(
                d_model, norm=norm, prenorm=prenorm, activation=activation, dropout=dropout, layer=layer, **ssm_kwargs
            )
            for _ in range(n_layers)
        )
        # Pre-norm stacks leave the residual stream unnormalized: normalize once at the end.
        self.final_norm = make_norm(norm if prenorm else "none", d_model)
        self.decoder = nn.Linear(d_model, d_output) if d_output is not None else None

    # ------------------------------------------------------------ resampling
    @property
    def ssm_layers(self) -> list[SSM]:
        return [m for m in self.modules() if isinstance(m, SSM)]

    @property
    def lncde_layers(self) -> list[LinearCDE]:
        return [m for m in self.modules() if isinstance(m, LinearCDE)]

    @property
    def dt_scale(self) -> float:
        """The SSM layers' constant factor on Delta (1.0 in a backbone without SSM layers)."""
        layers = self.ssm_layers
        return layers[0].dt_scale if layers else 1.0

    @dt_scale.setter
    def dt_scale(self, value: float) -> None:
        value = check_delta_factor(value, "dt_scale")
        if value != 1.0 and self.lncde_layers:
            raise ValueError(
                f"dt_scale={value} is a factor on the Delta of SSM layers; a backbone with layer='lncde' "
                "has none (set the LinearCDE step with lncde_dt, or use ssmts.nn.scaled_delta)"
            )
        for layer in self.ssm_layers:
            layer.dt_scale = value

    @property
    def chunk_length(self) -> int | None:
        """The SSM layers' chunk size for long sequences (see SSM's `chunk_length`; None: unchunked)."""
        layers = self.ssm_layers
        return layers[0].chunk_length if layers else None

    @chunk_length.setter
    def chunk_length(self, value: int | None) -> None:
        for layer in self.ssm_layers:
            layer.chunk_length = value

    def set_sample_rate(self, new_rate: float, train_rate: float) -> None:
        """Set every SSM layer's dt_scale to train_rate / new_rate for good (see SSM.set_sample_rate;
        ``ssmts.nn.scaled_delta`` is the scoped form). LinearCDE layers have no base factor: for
        them use ``scaled_delta`` (or build them with another ``dt``); a ValueError says so."""
        if self.lncde_layers:
            raise ValueError(
                "set_sample_rate changes SSM layers only; a backbone with layer='lncde' takes a "
                "rate change through ssmts.nn.scaled_delta(model, delta_factor(train_rate, new_rate))"
            )
        for layer in self.ssm_layers:
            layer.set_sample_rate(new_rate, train_rate)

    # ------------------------------------------------------------ forward
    def _encode_input(self, u: torch.Tensor) -> torch.Tensor:
        if self.vocab_size:
            if u.dim() != 2 or u.dtype not in (torch.int64, torch.int32):
                raise ValueError(f"token input must be int64 of shape (batch, length), got {tuple(u.shape)} {u.dtype}")
            return self.encoder(u.long()).transpose(1, 2)
        if u.dim() != 3 or u.shape[1] != self.d_input:
            raise ValueError(f"input must have shape (batch, {self.d_input}, length), got {tuple(u.shape)}")
        return channel_linear(self.encoder, u)

    def features(
        self, u: torch.Tensor, mask: torch.Tensor | None = None, dt: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Per-step features after the last block: (batch, d_model, L).

        dt: None, or per-step time deltas (batch, L) or (L,) in units of the training sample period
        (irregular time stamps): every SSM layer steps by Delta * dt_k (see SSM.forward).
        """
        x = self._encode_input(u)
        if mask is not None:
            if mask.shape != (x.shape[0], x.shape[2]):
                raise ValueError(f"mask must have shape {(x.shape[0], x.shape[2])}, got {tuple(mask.shape)}")
            x = x * mask[:, None, :].to(x.dtype)
        for block in self.blocks:
            x = block(x, mask, dt)
        return self.final_norm(x, mask)

    def pool(self, x: torch.Tensor, mask: torch.Tensor | None = None, how: str | None = None) -> torch.Tensor:
        """(batch, d_model, L) -> (batch, d_model), ignoring padded steps. how: "mean"/"last" (default: pooling)."""
        return pool(x, mask, self.pooling if how is None else how)

    def forward(
        self, u: torch.Tensor, mask: torch.Tensor | None = None, dt: torch.Tensor | None = None
    ) -> torch.Tensor:
        """u -> pooled (batch, d_output) or per-step (batch, d_output, L) outputs; dt as in `features`."""
        x = self.features(u, mask, dt)
        if self.pooling == "none":
            return x if self.decoder is None else channel_linear(self.decoder, x)
        z = self.pool(x, mask)
        return z if self.decoder is None else channel_linear(self.decoder, z[..., None])[..., 0]

    # ------------------------------------------------------------ streaming
    def initial_state(self, batch: int) -> list[torch.Tensor]:
        return [block.ssm.initial_state(batch) for block in self.blocks]

    def forward_with_state(
        self, u: torch.Tensor, state: list[torch.Tensor] | None = None, dt: torch.Tensor | None = None
    ):
        """Causal per-step pass continuing from `state`: -> ((batch, d_output|d_model, L), final state).
        dt: None or per-step time deltas (batch, L) / (L,), as in `features`.

        Reads a context in one pass (FFT for SSM layers, the scan for LinearCDE layers) and
        returns what `step` needs to roll forward.
        """
        x = self._encode_input(u)
        new_state = []
        for i, block in enumerate(self.blocks):
            x, s = block.forward_with_state(x, None if state is None else state[i], dt)
            new_state.append(s)
        x = self.final_norm(x)
        y = x if self.decoder is None else channel_linear(self.decoder, x)
        return y, new_state

    def step(self, u_t: torch.Tensor, state: list[torch.Tensor], dt: torch.Tensor | None = None):
        """One step: u_t (batch, d_input) or (batch,) tokens -> ((batch, d_output|d_model), state).
        dt: None or this step's time delta, (batch,) or a scalar."""
        if len(state) != len(self.blocks):
            raise ValueError(
                f"state must hold one tensor per block ({len(self.blocks)}), got {len(state)}; "
                "start from initial_state(batch) or forward_with_state"
            )
        x = self._encode_input(u_t[:, None] if self.vocab_size else u_t[..., None])[..., 0]
        new_state = []
        for block, s in zip(self.blocks, state):
            x, s = block.step(x, s, dt)
            new_state.append(s)
        x = self.final_norm(x[..., None])[..., 0]
        return (x if self.decoder is None else self.decoder(x)), new_state


def parameter_groups(model: nn.Module, lr: float, lr_ssm: float | None = None, weight_decay: float = 0.0) -> list[dict]:
    """AdamW groups: SSM parameters (Lambda, Delta, B) at `lr_ssm` without weight decay
    (eSSM Table 10 "LR SSM"); biases and norm weights without decay; the rest with it.

    LinearCDE layers put their transition parameters (every A^j) and B in the same "ssm"
    group: they set the dynamics as Lambda and Delta do, and weight decay would pull every
    transition towards the identity. Their path projection, C and D are trained like the
    other weights."""
    ssm_ids = set()
    ssm_params = []
    for module in model.modules():
        if isinstance(module, (SSM, LinearCDE, DenseSSM, SSMFeatures)):
            for p in module.ssm_parameters():
                if id(p) not in ssm_ids:
                    ssm_ids.add(id(p))
                    ssm_params.append(p)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if id(p) in ssm_ids or not p.requires_grad:
            continue
        (no_decay if p.dim() < 2 or name.endswith(".D") else decay).append(p)
    groups = [
        {"params": decay, "lr": lr, "weight_decay": weight_decay, "name": "other"},
        {"params": no_decay, "lr": lr, "weight_decay": 0.0, "name": "no_decay"},
        {"params": ssm_params, "lr": lr if lr_ssm is None else lr_ssm, "weight_decay": 0.0, "name": "ssm"},
    ]
    return [g for g in groups if g["params"]]
