"""The feed-through term D u of a layer (SSM, LinearCDE, DenseSSM): its modes, their check, the
initial D and its application, in one place.

    "none"       no term
    "identity"   y += u                       (d_output == d_model)
    "diagonal"   y += D * u, D (H,) ~ N(0, 1)  (d_output == d_model)
    "full"       y += D u,   D (M, H) ~ N(0, 1/H)
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .batch_invariant import matmul_each_sample, per_sample_mv

D_MODES = ("none", "identity", "diagonal", "full")


def feedthrough_mode(D: str | None, d_output: int, d_model: int) -> str:
    """The checked mode of D (None: "diagonal" when d_output == d_model, else "full")."""
    mode = D if D is not None else ("diagonal" if d_output == d_model else "full")
    if mode not in D_MODES:
        raise ValueError(f"unknown D {mode!r}; choose one of {D_MODES}")
    if mode in ("identity", "diagonal") and d_output != d_model:
        raise ValueError(f"D={mode!r} needs d_output == d_model, got {d_output} != {d_model}; use D='full' or 'none'")
    return mode


def initial_feedthrough(
    mode: str, d_output: int, d_input: int, generator: torch.Generator | None = None
) -> nn.Parameter | None:
    """The initial D: "diagonal" (H,) ~ N(0, 1), "full" (M, H) ~ N(0, 1/H), or None for "none" and
    "identity" (no parameter)."""
    if mode == "diagonal":
        return nn.Parameter(torch.randn(d_input, generator=generator))
    if mode == "full":
        return nn.Parameter(torch.randn(d_output, d_input, generator=generator) / math.sqrt(d_input))
    return None


def add_feedthrough(y: torch.Tensor, mode: str, D: torch.Tensor | None, u: torch.Tensor) -> torch.Tensor:
    """y + D u: u (batch, H, L) or one step (batch, H), y (batch, M, ...) alike. The full product is
    made per sample (ssmts.nn.batch_invariant)."""
    if mode == "identity":
        return y + u
    if mode == "diagonal":
        return y + D[:, None] * u if u.dim() == 3 else torch.addcmul(y, D, u)
    if mode == "full":
        return y + (matmul_each_sample(D, u) if u.dim() == 3 else per_sample_mv(D[None], u[:, None])[:, 0])
    return y


__all__ = ["D_MODES", "feedthrough_mode", "initial_feedthrough", "add_feedthrough"]
