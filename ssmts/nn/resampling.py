"""Zero-shot change of sample rate (docs/concepts.md#zero-shot-resampling) as a scoped argument.

A model trained on signals sampled at f_train reads signals sampled at f_new with every
step size multiplied by f_train / f_new; nothing is retrained:

    with scaled_delta(model, delta_factor(train_rate=16000, new_rate=8000)):   # Delta x 2
        y = model(u_8k)

The factor multiplies whatever Delta the layers have (including a base ``SSM.dt_scale``
such as Path-X's), blocks nest by multiplying, and the previous factors are restored when
the block exits, also on an exception: nothing is left set after a call.

`change_rate` is the other approach: it changes the data (decimation or band-limited
resampling) instead of the model.
"""

from __future__ import annotations

import math
import numbers
from contextlib import contextmanager
from typing import Iterator

import numpy as np
import torch
from torch import nn

RESAMPLE_METHODS = ("decimate", "resample")
# Work on this many signals at a time when resampling, so that the temporary torch tensors
# stay small next to the output array.
_CHUNK = 2048


def check_delta_factor(value, name: str = "factor") -> float:
    """`value` as a float if it is a finite number > 0 (not a bool); otherwise a ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be > 0 and finite, got {value!r}")
    return float(value)


def delta_factor(train_rate: float, new_rate: float) -> float:
    """train_rate / new_rate: the factor on Delta that runs a model trained at train_rate on data at new_rate."""
    try:
        train, new = check_delta_factor(train_rate, "train_rate"), check_delta_factor(new_rate, "new_rate")
    except ValueError:
        raise ValueError(
            f"sample rates must be > 0 and finite, got train_rate={train_rate!r}, new_rate={new_rate!r}"
        ) from None
    factor = train / new
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f"the rates {train_rate} and {new_rate} give the unusable factor {factor} on Delta")
    return factor


class DeltaScaling:
    """Mixin of the layers with a learned step ``log_dt``: ``dt_scale``, a constant factor on every
    Delta kept with the model (e.g. Path-X's 0.0625, or a new sample rate set for good), and
    ``Delta``, the step in use: exp(log_dt) * dt_scale, times the factor of an enclosing
    `scaled_delta` block (``_delta_factor``, 1 outside one)."""

    _delta_factor = 1.0

    @property
    def dt_scale(self) -> float:
        """Constant factor on every Delta, kept with the model (finite, > 0)."""
        return self._dt_scale

    @dt_scale.setter
    def dt_scale(self, value: float) -> None:
        self._dt_scale = check_delta_factor(value, "dt_scale")

    @property
    def Delta(self):
        """Step sizes in use, the shape of ``log_dt``: exp(log_dt) * dt_scale * the scaled_delta factor."""
        return torch.exp(self.log_dt) * (self.dt_scale * self._delta_factor)


@contextmanager
def scaled_delta(module: nn.Module, factor: float) -> Iterator[nn.Module]:
    """Multiply every Delta of the SSM layers in `module` by `factor` inside the block."""
    factor = check_delta_factor(factor)
    layers = [m for m in module.modules() if hasattr(m, "_delta_factor")]
    previous = [layer._delta_factor for layer in layers]
    try:
        for layer, old in zip(layers, previous):
            layer._delta_factor = old * factor
        yield module
    finally:
        for layer, old in zip(layers, previous):
            layer._delta_factor = old


def sampled_turns(Lambda: torch.Tensor, Delta: torch.Tensor) -> torch.Tensor:
    """The turn of every mode Lambda per training step Delta (shapes that broadcast, e.g. (P,) and (s, 1)),
    Im(lambda) Delta, wrapped into [-pi, pi]: the frequency at which the training rate samples it."""
    turns = Lambda.imag * Delta
    return turns - 2 * math.pi * torch.round(turns / (2 * math.pi))


def above_nyquist(Lambda: torch.Tensor, Delta: torch.Tensor, factor: float) -> torch.Tensor:
    """Bool, the broadcast shape of Lambda and Delta: the modes whose sampled turn exceeds pi at a step of
    `factor` x the training steps, above the Nyquist frequency of that rate."""
    return sampled_turns(Lambda, Delta).abs() * factor > math.pi


def positive_int(value: object, name: str) -> int:
    """Accept 8000 or 8000.0 (rates are often stored as floats); reject 0, negatives, 7999.5, True."""
    is_number = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    if not is_number or not math.isfinite(value) or value != int(value) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def change_rate(X: np.ndarray, orig_rate: int, new_rate: int, method: str = "decimate") -> np.ndarray:
    """Change the sample rate of signals along the last axis.

    X: (..., length) float array. Returns (..., new_length) float32.

    method="decimate": keep every `orig_rate // new_rate`-th sample, x[..., ::factor],
        with no anti-aliasing filter: the protocol of the S4 code for the zero-shot
        change of resolution. `new_rate` must divide `orig_rate`;
        new_length = ceil(length / factor).
    method="resample": band-limited (windowed-sinc) resampling with
        torchaudio.functional.resample, to any rate; new_length = ceil(length * new_rate / orig_rate).
    """
    if method not in RESAMPLE_METHODS:
        raise ValueError(f"method must be one of {RESAMPLE_METHODS}, got {method!r}")
    orig_rate, new_rate = positive_int(orig_rate, "orig_rate"), positive_int(new_rate, "new_rate")
    X = np.asarray(X)
    if X.ndim == 0:
        raise ValueError("X must have at least one (time) axis")
    if new_rate == orig_rate:
        return X.astype(np.float32, copy=True)
    if method == "decimate":
        if new_rate > orig_rate or orig_rate % new_rate:
            raise ValueError(
                f"method='decimate' keeps every k-th sample, so new_rate must divide orig_rate; "
                f"{orig_rate} Hz -> {new_rate} Hz is not possible. Use method='resample'."
            )
        return np.ascontiguousarray(X[..., :: orig_rate // new_rate], dtype=np.float32)

    import torch
    import torchaudio.functional as AF

    lead_shape, length = X.shape[:-1], X.shape[-1]
    flat = X.reshape(-1, length)
    new_length = -(-length * new_rate // orig_rate)  # ceil, as torchaudio computes it
    out = np.empty((flat.shape[0], new_length), dtype=np.float32)
    with torch.no_grad():
        for start in range(0, flat.shape[0], _CHUNK):
            chunk = torch.from_numpy(np.ascontiguousarray(flat[start : start + _CHUNK], dtype=np.float32))
            out[start : start + _CHUNK] = AF.resample(chunk, orig_rate, new_rate).numpy()
    return out.reshape(*lead_shape, new_length)


def half_rate(x: torch.Tensor) -> torch.Tensor:
    """x: (..., L) float -> (..., ceil(L / 2)): the signals at half their rate, band-limited as
    change_rate's "resample" (windowed sinc), on x's device."""
    import torchaudio.functional as AF

    if not x.is_floating_point():
        raise ValueError(f"only real-valued signals can be read at half their rate, got {x.dtype} (token ids?)")
    return AF.resample(x, 2, 1)


__all__ = ["check_delta_factor", "delta_factor", "scaled_delta", "change_rate", "half_rate", "RESAMPLE_METHODS"]
