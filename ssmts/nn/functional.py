"""Small tensor operations shared by the layer, the blocks and the backbone."""

from __future__ import annotations

import math

import numpy as np
import torch

POOLINGS = ("mean", "last")

SCALE_FLOOR = 1e-12
"""A channel or series whose spread is at most this share of its largest |value| is constant up to the
rounding of the float64 statistics (about 1e-16 of it) and keeps scale 1. Not float32's resolution: data
at 1e5 varying by 0.01 (1e-7 of it) is scaled, since the scaling is formed in float64."""


def pool(x: torch.Tensor, mask: torch.Tensor | None = None, how: str = "mean") -> torch.Tensor:
    """(batch, d, L) -> (batch, d), ignoring padded steps. how: "mean" or "last" (the last real step)."""
    if how not in POOLINGS:
        raise ValueError(f"pooling must be 'mean' or 'last' here, got {how!r}")
    if mask is None:
        return x.mean(dim=-1) if how == "mean" else x[..., -1]
    if how == "mean":
        m = mask[:, None, :].to(x.dtype)
        return (x * m).sum(-1) / m.sum(-1).clamp_min(1.0)
    # Index of the last real step, wherever the padding is (left or right).
    steps = torch.arange(mask.shape[-1], device=mask.device)
    last = torch.where(mask, steps, torch.zeros_like(steps)).amax(-1)
    return x.gather(-1, last[:, None, None].expand(-1, x.shape[1], 1))[..., 0]


def channel_statistics(
    x: torch.Tensor, mask: torch.Tensor | None = None, rel_floor: float = SCALE_FLOOR, flat_scale: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and scale of x: (n, C, L) over samples and (real) steps, in float64: (C,), (C,).

    The scale is the standard deviation, or `flat_scale` (1: unscaled) for a channel that is constant
    up to rounding (std <= rel_floor * max |x|, SCALE_FLOOR): the floor is relative to the data's
    magnitude, so series at 1e-13 or 1e13 are standardized like any other, while a constant channel
    is not blown up by rounding noise.
    """
    return _statistics(x, mask, (0, 2), rel_floor, flat_scale)


def series_statistics(
    x: torch.Tensor, mask: torch.Tensor | None = None, rel_floor: float = SCALE_FLOOR
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and scale of every series and channel of x: (n, C, L) over its own (real) steps, in
    float64: (n, C), (n, C); the scale floor is channel_statistics' (a flat series keeps scale 1)."""
    return _statistics(x, mask, (2,), rel_floor)


def series_summary(
    x: torch.Tensor,
    mask: torch.Tensor | None,
    channel_mean: torch.Tensor,
    channel_scale: torch.Tensor,
    min_spread: float = 1e-3,
    rel_floor: float = SCALE_FLOOR,
) -> torch.Tensor:
    """Where every series lies and how widely it varies, in units of the training data: x (n, C, L),
    channel_mean and channel_scale (C,) -> (n, 2C) float64: each channel's series mean standardized
    by the channel statistics, then log(std / channel_scale), at least log(min_spread) (a flat
    series by series_statistics' floor gets exactly that). What per-series standardization takes
    away from the shapes, given back as numbers."""
    mean, std, informative = _moments(x, mask, (2,), rel_floor)
    mean, std, informative = mean.squeeze(2), std.squeeze(2), informative.squeeze(2)
    channel_mean, channel_scale = channel_mean.double().to(x.device), channel_scale.double().to(x.device)
    level = (mean - channel_mean) / channel_scale
    spread = torch.where(informative, std / channel_scale, torch.zeros_like(std)).clamp_min(min_spread).log()
    return torch.cat([level, spread], dim=1)


def power_of_two_unit(magnitude: np.ndarray) -> np.ndarray:
    """The power of two just above each magnitude (1 for 0), float64: dividing by it is an exact scaling,
    which keeps the squares of values near 1e200 from overflowing and those near 1e-200 from underflowing
    (the torch statistics below form theirs with log2, which exports to ONNX)."""
    return np.ldexp(1.0, np.frexp(np.asarray(magnitude, dtype=np.float64))[1])


def _moments(
    x: torch.Tensor, mask: torch.Tensor | None, dims: tuple[int, ...], rel_floor: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mean, standard deviation and whether the spread exceeds the floor (kept dims). Formed on x over
    the power of two nearest its magnitude, an exact scaling, so that the squares of values near 1e200 do
    not overflow nor those near 1e-200 underflow (the same digits as unscaled in between)."""
    x = x.double()
    m = None if mask is None else mask[:, None, :].double().expand_as(x)
    magnitude = (x.abs() if m is None else x.abs() * m).amax(dim=dims, keepdim=True)
    # a power of two at most the magnitude (1 for 0): log2 and pow export to ONNX, where frexp does not
    unit = torch.where(magnitude > 0, torch.pow(2.0, torch.floor(torch.log2(magnitude))), torch.ones_like(magnitude))
    x = x / unit
    if m is None:
        mean = x.mean(dim=dims, keepdim=True)
        std = x.std(dim=dims, unbiased=False, keepdim=True)
    else:
        count = m.sum(dim=dims, keepdim=True).clamp_min(1.0)
        mean = (x * m).sum(dim=dims, keepdim=True) / count
        std = torch.sqrt((((x - mean) ** 2) * m).sum(dim=dims, keepdim=True) / count)
    # A flat series (std 0) is never above the floor, which is >= 0: it keeps scale 1.
    return mean * unit, std * unit, std > rel_floor * (magnitude / unit)


def _statistics(
    x: torch.Tensor, mask: torch.Tensor | None, dims: tuple[int, ...], rel_floor: float, flat_scale: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    mean, std, informative = _moments(x, mask, dims, rel_floor)
    scale = torch.where(informative, std, torch.full_like(std, flat_scale))
    return mean.squeeze(dims), scale.squeeze(dims)


def chunked_channel_statistics(
    array, rel_floor: float = SCALE_FLOOR, chunk_bytes: int = 1 << 20
) -> tuple[torch.Tensor, torch.Tensor]:
    """channel_statistics of a (n, C, L) array-like read about `chunk_bytes` at a time (a memmap on
    disk is never loaded whole): two passes, the mean and then the spread around it, in float64. The
    chunks' sums are added exactly (math.fsum), so that the error of the mean does not grow with the
    number of chunks: a constant channel of 10^9 values keeps a spread far below SCALE_FLOOR."""
    n, C = array.shape[0], array.shape[1]
    chunk_rows = max(1, chunk_bytes // max(1, 8 * int(np.prod(array.shape[1:]))))

    def chunks():
        for start in range(0, n, chunk_rows):
            yield torch.from_numpy(np.array(array[start : start + chunk_rows], dtype=np.float64))

    def exact_total(parts: list[torch.Tensor]) -> torch.Tensor:  # parts of (C,) -> (C,)
        columns = torch.stack(parts).T.tolist() if parts else [[] for _ in range(C)]
        return torch.tensor([math.fsum(column) for column in columns], dtype=torch.float64)

    sums, count, magnitude = [], 0, torch.zeros(C, dtype=torch.float64)
    for x in chunks():
        sums.append(x.sum(dim=(0, 2)))
        count += x.shape[0] * x.shape[2]
        magnitude = torch.maximum(magnitude, x.abs().amax(dim=(0, 2)))
    mean = exact_total(sums) / max(count, 1)
    squares = exact_total([((x - mean[None, :, None]) ** 2).sum(dim=(0, 2)) for x in chunks()])
    std = torch.sqrt(squares / max(count, 1))
    informative = std > rel_floor * magnitude
    return mean, torch.where(informative, std, torch.ones_like(std))
