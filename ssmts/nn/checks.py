"""Checks of what a layer is given, shared by the layer families (torch only)."""

from __future__ import annotations

import torch


def require_tensor(u, layer: str) -> None:
    """A layer's input must be a torch.Tensor: anything else (a numpy array, a list) is named, with the
    conversion, instead of failing on a tensor method deep inside."""
    if not isinstance(u, torch.Tensor):
        raise TypeError(
            f"{layer} takes a torch.Tensor of shape (batch, channels, length), got {type(u).__module__}."
            f"{type(u).__qualname__}; convert it with torch.as_tensor(u, dtype=torch.float32)"
        )
