"""Small tensor operations shared by the layer, the blocks and the backbone."""
from __future__ import annotations

import torch
from torch import nn


def channel_linear(linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """Apply `linear` to the channels of every step: x (batch, C_in, L) -> (batch, C_out, L).

    One matrix product per sample (bmm with the weight broadcast over the batch) rather than
    nn.Linear on a (batch * L, C_in) matrix: BLAS picks kernels by matrix shape, so folding
    the batch into the rows would make a sample's result depend (at float32 resolution) on
    how many samples it is batched with. It also avoids two transposed copies.
    """
    weight = linear.weight.expand(x.shape[0], -1, -1)
    y = torch.bmm(weight, x)
    return y if linear.bias is None else y + linear.bias[None, :, None]
