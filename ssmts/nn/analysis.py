"""Frequency-domain analysis of a trained SSM layer (ssm-math.md sections 1-5).

Two views of the same layer, both returned as ``(M, H, n_frequencies)`` complex arrays
(output channel, input channel, frequency):

``transfer_function(layer, omegas)``
    The continuous-time transfer function ``G(i w) = C (i w I - Lambda)^-1 B + D`` of the
    system the layer was built from, before discretization. ``w`` is in radians per unit
    of the model's continuous time (the unit ``Delta`` is measured in). It does not depend
    on ``Delta``: it is what the layer would compute on a continuous signal.

``frequency_response(layer, frequencies)``
    The exact discrete-time frequency response of the layer as it runs on sampled data,
    ``H(e^{i theta}) = sum_l K_l e^{-i theta l}`` with ``K_l = C Abar^l Bbar`` the
    (infinitely long) convolution kernel, in closed form per mode. ``theta`` is in
    radians per sample (0 .. pi), or frequencies in Hz when ``sample_rate`` is given.
    This one depends on every state's own ``Delta`` and on the discretization.

Both handle the parts of the layer that a plain ``C (sI - A)^-1 B`` formula misses:

* Conjugate symmetry. With ``conj_sym=True`` the layer stores one of each pair of
  conjugate modes and outputs ``2 Re(C x)``. The realized real system has the stored
  modes *and* their conjugates, so ``G(i w) = T(i w) + conj(T(-i w))`` with
  ``T(s) = C (sI - Lambda)^-1 B`` over the stored modes. This is not ``2 Re T(i w)``:
  the conjugate modes are evaluated at ``-w``. Without ``conj_sym`` the layer outputs
  ``Re(C x)``, which is ``(T(i w) + conj(T(-i w))) / 2``; for a layer built by
  ``SSM.from_matrices`` from a real system this equals ``T(i w)``.
* Heads. Each head is its own system on its block of channels: ``G`` is block diagonal.
* Feed-through ``D`` and the channel mixer (a linear map ``W`` after the heads when
  ``heads > 1``): ``W (G + D)``; the mixer's bias is a constant offset, not part of a
  transfer function.
* Bidirectional layers. ``"essm"`` adds the flipped forward kernel (impulse response
  ``h(t) + h(-t)``), so ``G(i w) + G(-i w) = 2 Re G(i w)`` entrywise: zero phase.
  ``"ldnn"`` averages the forward system with a backward one that has its own Lambda:
  ``(G_forward(i w) + conj(G_backward(i w))) / 2``. The layer shares the *discretized*
  input matrix between the two directions (LDNN eq. 18), which ``frequency_response``
  reproduces exactly; ``transfer_function`` shares the continuous ``B``, which agrees
  with it to first order in ``Delta``.

Every computation is float64/complex128 numpy on detached copies of the parameters.
"""
from __future__ import annotations

import numpy as np
import torch

from .ssm import SSM

__all__ = ["transfer_function", "frequency_response"]


def transfer_function(
    layer: SSM,
    omegas,
    *,
    include_feedthrough: bool = True,
    include_mixer: bool = True,
) -> np.ndarray:
    """Continuous-time transfer function ``G(i w)`` of an SSM layer: ``(M, H, len(omegas))`` complex.

    Args:
        layer: an ``ssmts.nn.SSM``.
        omegas: angular frequencies ``w`` (radians per unit of continuous time), any real
            numbers, shape ``(n,)``.
        include_feedthrough: add ``D`` (the layer's ``D`` mode: none, identity, diagonal, full).
        include_mixer: apply the channel mixer of multi-head layers (``W (G + D)``).

    Entry ``[m, h, k]`` is the gain and phase from input channel ``h`` to output channel
    ``m`` at ``omegas[k]``. See the module docstring for how conjugate symmetry, heads and
    bidirectional layers enter.
    """
    _check_layer(layer)
    omegas = _as_frequencies(omegas, "omegas")
    s = 1j * omegas

    def stored_modes(backward: bool) -> np.ndarray:
        Lambda = _numpy(layer._lambda("Lambda_backward" if backward else "Lambda"))  # (S, P)
        B = _numpy(layer._complex(layer.B))  # (S, P, Hh)
        C = _numpy(layer._complex(layer.C))  # (S, Mh, P)
        # T(s) = sum_p C[:, p] B[p, :] / (s - lambda_p), per head: (S, Mh, Hh, n)
        return lambda points: np.einsum("smp,sph,spn->smhn", C, B, 1.0 / (points[None, None, :] - Lambda[..., None]))

    return _assemble(layer, s, stored_modes, include_feedthrough, include_mixer, discrete=False)


def frequency_response(
    layer: SSM,
    frequencies,
    *,
    sample_rate: float | None = None,
    include_feedthrough: bool = True,
    include_mixer: bool = True,
) -> np.ndarray:
    """Exact discrete-time frequency response of an SSM layer: ``(M, H, len(frequencies))`` complex.

    Args:
        layer: an ``ssmts.nn.SSM`` (uses its current ``Delta``, including any ``dt_scale``
            set for zero-shot resampling, and its discretization).
        frequencies: radians per sample ``theta`` when ``sample_rate`` is None (``pi`` is
            the Nyquist frequency), otherwise frequencies in Hz, converted with
            ``theta = 2 pi f / sample_rate``. Shape ``(n,)``.
        sample_rate: samples per second of the data the layer runs on, or None.
        include_feedthrough, include_mixer: as in ``transfer_function``.

    Equals the discrete-time Fourier transform of the layer's impulse response, i.e. of
    ``layer.kernel(L)`` as ``L`` grows (plus ``D``), computed per mode in closed form
    ``sum_l abar^l e^{-i theta l} = 1 / (1 - abar e^{-i theta})`` (``|abar| < 1``).
    """
    _check_layer(layer)
    theta = _as_frequencies(frequencies, "frequencies")
    if sample_rate is not None:
        if not sample_rate > 0:
            raise ValueError(f"sample_rate must be > 0, got {sample_rate}")
        theta = 2.0 * np.pi * theta / float(sample_rate)
    z_inv = np.exp(-1j * theta)

    def stored_modes(backward: bool) -> np.ndarray:
        # The "ldnn" backward system runs its own Abar on the forward system's Bbar u
        # (LDNN eq. 18: B shared after discretization), so Bbar always comes from forward.
        Abar = _numpy(layer.discrete(backward=backward)[0])
        _, Bbar, _, C = layer.discrete()
        Bbar, C = _numpy(Bbar), _numpy(C)

        def response(points: np.ndarray) -> np.ndarray:
            # points are e^{-i theta}; for the conjugate-mode term they are e^{+i theta}.
            geometric = 1.0 / (1.0 - Abar[..., None] * points[None, None, :])  # (S, P, n)
            return np.einsum("smp,sph,spn->smhn", C, Bbar, geometric)

        return response

    return _assemble(layer, z_inv, stored_modes, include_feedthrough, include_mixer, discrete=True)


# ---------------------------------------------------------------- helpers
def _assemble(layer: SSM, points: np.ndarray, stored_modes, include_feedthrough: bool, include_mixer: bool,
              discrete: bool) -> np.ndarray:
    """Combine stored modes, their conjugates, heads, bidirectionality, D and the mixer.

    `points` are s = i w (continuous) or e^{-i theta} (discrete); the mirrored frequency
    (-w, -theta) is conj(points) in both cases, since both lie on the unit circle or the
    imaginary axis.
    """
    scale = 1.0 if layer.conj_sym else 0.5
    mirrored = np.conj(points)

    def system(backward: bool) -> np.ndarray:
        T = stored_modes(backward)
        # Realized real system: stored modes at w plus conjugate modes, i.e. conj(T(-w)).
        return scale * (T(points) + np.conj(T(mirrored)))  # (S, Mh, Hh, n)

    forward = system(False)
    if layer.bidirectional == "essm":
        blocks = forward + np.conj(forward)
    elif layer.bidirectional == "ldnn":
        blocks = 0.5 * (forward + np.conj(system(True)))
    else:
        blocks = forward

    n = len(points)
    G = np.zeros((layer.d_output, layer.d_model, n), dtype=np.complex128)
    Mh, Hh = layer.d_head_out, layer.d_head_in
    for head in range(layer.heads):
        G[head * Mh : (head + 1) * Mh, head * Hh : (head + 1) * Hh] = blocks[head]
    if include_feedthrough:
        G += _feedthrough_matrix(layer)[..., None]
    if include_mixer and layer.mixer is not None:
        W = _numpy(layer.mixer.weight)
        G = np.einsum("om,mhn->ohn", W, G)
    return G


def _feedthrough_matrix(layer: SSM) -> np.ndarray:
    M, H = layer.d_output, layer.d_model
    if layer.D_mode == "identity":
        return np.eye(M, H)
    if layer.D_mode == "diagonal":
        return np.diag(_numpy(layer.D).real)
    if layer.D_mode == "full":
        return _numpy(layer.D).real
    return np.zeros((M, H))


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    array = tensor.detach().cpu()
    array = array.to(torch.complex128) if array.is_complex() else array.to(torch.float64)
    return array.numpy()


def _check_layer(layer) -> None:
    if not isinstance(layer, SSM):
        raise TypeError(
            f"expected an ssmts.nn.SSM layer, got {type(layer).__name__}; for a backbone or a fitted "
            "estimator pick one layer, e.g. backbone.ssm_layers[0]"
        )


def _as_frequencies(values, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 0:
        array = array[None]
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite")
    return array
