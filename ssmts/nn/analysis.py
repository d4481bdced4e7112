"""Frequency-domain analysis of a trained SSM layer (the transfer functions of
docs/concepts.md#diagonalization-and-conjugate-symmetry).

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

Sensitive frequencies (PTD paper, sections 3.4 and 5.2): ``hippo_reference_transfer_function``,
``transfer_gap``, ``sensitive_frequencies`` and ``digital_frequency`` compare a layer
initialized from HiPPO-LegS (``init="legs"``, the S4D/S5 normal part, or ``init="ptd"``)
with the dense HiPPO-LegS system it stands for, and locate the frequencies where the two
differ most. Those comparisons are continuous-time: ``w`` in radians per unit of model
time. On sampled data a mode runs at ``z = exp(lambda Delta)`` (ZOH), so a continuous
frequency ``w`` is seen at the digital frequency ``theta = w Delta`` radians per sample,
folded into ``[0, pi]`` (aliasing): ``digital_frequency`` does exactly this map.

Every computation is float64/complex128 numpy on detached copies of the parameters.
"""

from __future__ import annotations

import numpy as np
import torch

from .._warnings import caller_stacklevel
from .ssm import SSM

__all__ = [
    "transfer_function",
    "frequency_response",
    "hippo_reference_transfer_function",
    "transfer_gap",
    "digital_frequency",
    "sensitive_frequencies",
    "SensitiveModes",
    "layers_of",
]


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

    return _assemble(layer, s, stored_modes, include_feedthrough, include_mixer)


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

    return _assemble(layer, z_inv, stored_modes, include_feedthrough, include_mixer)


# ---------------------------------------------------------------- helpers
def _assemble(
    layer: SSM, points: np.ndarray, stored_modes, include_feedthrough: bool, include_mixer: bool
) -> np.ndarray:
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


# ---------------------------------------------------------------- sensitive frequencies
def layers_of(obj) -> list[SSM]:
    """The SSM layers of a layer, a module (a backbone, a head with ``.backbone``) or a fitted
    estimator (its ``model_``), first layer first. Duck-typed: no scikit-learn import."""
    from torch import nn

    if isinstance(obj, SSM):
        return [obj]
    if not isinstance(obj, nn.Module):
        network = getattr(obj, "model_", None)
        if network is None:
            raise TypeError(
                f"expected an ssmts.nn.SSM, a torch module holding SSM layers or a fitted ssmts estimator "
                f"(with model_), got {type(obj).__name__}; an estimator must be fitted first"
            )
        obj = network
    layers = [m for m in obj.modules() if isinstance(m, SSM)]
    if not layers:
        raise TypeError(f"the {type(obj).__name__} module contains no ssmts.nn.SSM layer")
    return layers


def _init_eigenvectors(layer: SSM) -> tuple[np.ndarray, np.ndarray]:
    """The eigenvectors the layer's init projected B and C with, as the layer stores its modes.

    Returns (V_half (N, P), c_scale (P,)): the stored modes' columns and the output factor
    the init applied (1/2 on a real mode kept in a conjugate-pair slot).
    """
    from .init import conjugate_half, diagonalize_legs_normal, ptd_legs

    N = layer.d_state
    if layer.init == "legs":
        Lambda, V = diagonalize_legs_normal(N)
        V_inv = V.conj().T
    elif layer.init == "ptd":
        result = ptd_legs(N, eps=layer.ptd_eps, gamma=layer.ptd_gamma)
        Lambda, V, V_inv = result.Lambda, result.V, result.V_inv
    else:
        raise ValueError(
            f"the HiPPO-LegS reference needs a layer with init='legs' or init='ptd' (its B and C are "
            f"HiPPO's projected on known eigenvectors); this layer has init={layer.init!r}. Pass "
            f"reference=<an SSM layer>, e.g. SSM.from_matrices(A, B, C, dt=...), to compare with another system"
        )
    if layer.conj_sym:
        import warnings

        with warnings.catch_warnings():  # the layer warned when it dropped modes; do not repeat it
            warnings.simplefilter("ignore")
            _, V_half, _, c_scale = conjugate_half(Lambda, V, V_inv, layer.P)
        return V_half, c_scale
    return V, np.ones(N)


def hippo_reference_transfer_function(layer: SSM, omegas) -> np.ndarray:
    """``G_HiPPO(i w) = C0 (i w I - A)^-1 B0`` with the dense HiPPO-LegS ``A`` (N x N): ``(M, H, n)``.

    The reference of a layer built with ``init="legs"`` or ``"ptd"``: the same input and output
    maps in HiPPO's own coordinates, ``B0 = V B`` and ``C0 = C V^-1`` (V: the eigenvectors the
    init projected with, both members of each conjugate pair), with the dense HiPPO-LegS matrix
    in place of the diagonal ``Lambda``. At initialization this is exactly the system whose
    normal part (legs) or perturbation (ptd) the layer diagonalizes; after training it keeps
    the layer's learned B and C, so the gap to it measures what replacing HiPPO's ``A`` by the
    layer's ``Lambda`` does. The map back is exact: ``legs`` has no real modes, and a ``ptd``
    layer keeps each real eigenvalue in a slot of its own (with ``conj_sym``, c halved); a layer
    that kept fewer than N independent modes would get a least-squares map and a warning. Per
    head; without D and mixer (they would cancel in a difference). ``w`` is
    continuous (radians per unit of model time); see ``digital_frequency`` for samples.
    """
    from .init import hippo_legs

    _check_layer(layer)
    if layer.bidirectional:
        raise ValueError(f"the HiPPO-LegS reference is causal; this layer has bidirectional={layer.bidirectional!r}")
    omegas = _as_frequencies(omegas, "omegas")
    V_half, c_scale = _init_eigenvectors(layer)
    s0 = 1.0 if layer.conj_sym else 0.5
    # Realized system: stored modes and their conjugates, x_orig = W x_full.
    W = s0 * np.concatenate([V_half * c_scale, np.conj(V_half) * c_scale], axis=1)  # (N, 2P)
    W_pinv = np.linalg.pinv(W)
    if np.linalg.matrix_rank(W) < W.shape[0]:
        import warnings

        warnings.warn(
            f"the layer keeps fewer than N={layer.d_state} independent modes (conj_sym dropped real "
            "eigenvalues of the PTD system), so B and C map back to HiPPO's coordinates only approximately; "
            "build the layer with conj_sym=False for an exact reference",
            stacklevel=caller_stacklevel(),
        )
    A = hippo_legs(layer.d_state)[0]
    N = A.shape[0]
    resolvent = np.linalg.inv(1j * omegas[:, None, None] * np.eye(N) - A)  # (n, N, N)
    B_all = _numpy(layer._complex(layer.B))  # (S, P, Hh)
    C_all = _numpy(layer._complex(layer.C))  # (S, Mh, P)
    G = np.zeros((layer.d_output, layer.d_model, len(omegas)), dtype=np.complex128)
    Mh, Hh = layer.d_head_out, layer.d_head_in
    for head in range(layer.heads):
        B_full = np.concatenate([B_all[head], np.conj(B_all[head])], axis=0)  # (2P, Hh)
        C_full = s0 * np.concatenate([C_all[head], np.conj(C_all[head])], axis=1)  # (Mh, 2P)
        B0 = (W @ B_full).real  # (N, Hh): a real system
        C0 = (C_full @ W_pinv).real  # (Mh, N); C_full = C0 W
        G[head * Mh : (head + 1) * Mh, head * Hh : (head + 1) * Hh] = np.einsum("mi,nij,jh->mhn", C0, resolvent, B0)
    return G


def transfer_gap(layer: SSM, omegas, reference: "SSM | str" = "hippo") -> np.ndarray:
    """``||G_layer(i w) - G_ref(i w)||_F`` over the (output, input) channels: ``(n,)`` float.

    reference: ``"hippo"`` (``hippo_reference_transfer_function``: the dense HiPPO-LegS system
    with the layer's B and C, for ``init="legs"``/``"ptd"`` layers) or another ``SSM`` layer with
    the same channels (e.g. ``SSM.from_matrices(A, B, C, dt=...)`` of a dense system). D and the
    mixer are left out of both. ``w``: radians per unit of continuous model time. For a
    single-input single-output layer this is ``|G_layer(i w) - G_ref(i w)|``, the quantity whose
    spikes the PTD paper plots (its Figure 1).
    """
    _check_layer(layer)
    omegas = _as_frequencies(omegas, "omegas")
    reference_of = _reference_function(layer, reference)
    return _chunked(
        layer,
        omegas,
        lambda w: _frobenius(
            transfer_function(layer, w, include_feedthrough=False, include_mixer=False) - reference_of(w)
        ),
    )


def _reference_function(layer: SSM, reference):
    """w -> G_ref(i w) (M, H, n) of a reference given as "hippo" or an SSM layer."""
    if isinstance(reference, str):
        if reference != "hippo":
            raise ValueError(f"reference must be 'hippo' or an SSM layer, got {reference!r}")
        return lambda w: hippo_reference_transfer_function(layer, w)
    if isinstance(reference, SSM):
        if (reference.d_output, reference.d_model) != (layer.d_output, layer.d_model):
            raise ValueError(
                f"reference maps {reference.d_model} -> {reference.d_output} channels, the layer "
                f"{layer.d_model} -> {layer.d_output}; they must match"
            )
        return lambda w: transfer_function(reference, w, include_feedthrough=False, include_mixer=False)
    raise TypeError(f"reference must be 'hippo' or an ssmts.nn.SSM, got {type(reference).__name__}")


def _frobenius(G: np.ndarray) -> np.ndarray:
    return np.sqrt(np.sum(np.abs(G) ** 2, axis=(0, 1)))


def _chunked(layer: SSM, omegas: np.ndarray, per_chunk) -> np.ndarray:
    """per_chunk(omegas[a:b]) -> (b - a,) over chunks holding at most ~2^21 complex entries of G
    (wide layers: an (M, H, n) array for a fine grid would not fit in memory)."""
    size = max(1, (1 << 21) // max(1, layer.d_output * layer.d_model, layer.d_state**2))
    if len(omegas) <= size:
        return per_chunk(omegas)
    return np.concatenate([per_chunk(omegas[i : i + size]) for i in range(0, len(omegas), size)])


def digital_frequency(omegas, delta: float, *, fold: bool = True) -> np.ndarray:
    """The digital frequency (radians per sample) at which a layer with step ``delta`` sees ``w``.

    Under zero-order hold a mode ``lambda`` becomes ``exp(lambda delta)``, and the continuous
    point ``s = i w`` becomes ``z = exp(i w delta)``: digital frequency ``theta = w delta``.
    Sampled signals only have ``theta`` in ``[0, pi]``; with ``fold=True`` (default) ``w delta``
    is aliased into that band (``theta`` and ``2 pi k +- theta`` are the same samples), with
    ``fold=False`` it is returned as ``w delta``. A sinusoid ``sin(theta k)`` of the sample index
    ``k`` excites the layer at ``theta``. Divide by ``2 pi`` for cycles per sample, multiply by
    ``sample_rate / (2 pi)`` for Hz.
    """
    omegas = _as_frequencies(omegas, "omegas")
    if not (np.isfinite(delta) and delta > 0):
        raise ValueError(f"delta must be a finite step size > 0, got {delta}")
    theta = omegas * float(delta)
    if not fold:
        return theta
    theta = np.mod(theta, 2 * np.pi)
    return np.where(theta > np.pi, 2 * np.pi - theta, theta)


class SensitiveModes:
    """What ``sensitive_frequencies`` found in one layer.

    Attributes:
        layer_index: position of the layer in the network (0 = first).
        omegas: the continuous frequency grid (radians per unit model time), ``(n,)``.
        gap: ``transfer_gap`` on that grid, ``(n,)``.
        reference_gain: ``||G_ref(i w)||_F`` on the grid (to judge the gap's size), ``(n,)``.
        peak_omegas: continuous frequencies of the largest spikes (local maxima of ``gap``),
            largest first, ``(k,)``.
        peak_gaps: the gap at each spike, ``(k,)``.
        delta: the step size used for the continuous-to-discrete map.
        delta_range: (smallest, largest) Delta in the layer: the map is exact when they agree;
            otherwise modes with other steps see the same ``w`` at other digital frequencies.
        peak_thetas: ``digital_frequency(peak_omegas, delta)`` in radians per sample ``[0, pi]``.
    """

    def __init__(self, layer_index, omegas, gap, reference_gain, peak_index, delta, delta_range):
        self.layer_index = int(layer_index)
        self.omegas, self.gap, self.reference_gain = omegas, gap, reference_gain
        self.peak_omegas = omegas[peak_index]
        self.peak_gaps = gap[peak_index]
        self.delta, self.delta_range = float(delta), (float(delta_range[0]), float(delta_range[1]))
        self.peak_thetas = digital_frequency(self.peak_omegas, self.delta)

    @property
    def peak_cycles_per_sample(self) -> np.ndarray:
        return self.peak_thetas / (2 * np.pi)

    def as_dict(self) -> dict:
        return {
            "layer": self.layer_index,
            "delta": self.delta,
            "delta_range": list(self.delta_range),
            "peak_omegas": self.peak_omegas.tolist(),
            "peak_gaps": self.peak_gaps.tolist(),
            "peak_thetas": self.peak_thetas.tolist(),
            "max_reference_gain": float(self.reference_gain.max()),
        }

    def __repr__(self) -> str:
        peaks = ", ".join(f"w={w:.4g} (theta={t:.3f})" for w, t in zip(self.peak_omegas, self.peak_thetas))
        return f"SensitiveModes(layer={self.layer_index}, delta={self.delta:.3g}, peaks=[{peaks}])"


def default_omegas(layer: SSM, n: int = 4000) -> np.ndarray:
    """A grid covering the layer's eigenfrequencies: 0 .. 1.5 max |Im Lambda| + 10, ``n`` points."""
    top = float(np.abs(_numpy(layer.Lambda).imag).max())
    return np.linspace(0.0, 1.5 * top + 10.0, int(n))


def sensitive_frequencies(
    obj,
    n_peaks: int = 5,
    *,
    omegas=None,
    reference: "SSM | str" = "hippo",
    delta: float | None = None,
    layers=None,
) -> list[SensitiveModes]:
    """The frequencies where each SSM layer's transfer function departs most from a reference.

    Args:
        obj: an ``SSM``, a network holding SSM layers (``SSMBackbone``, a head with
            ``.backbone``) or a fitted ssmts estimator (its ``model_``).
        n_peaks: how many spikes (local maxima of ``transfer_gap``, largest first) to return.
        omegas: continuous frequency grid (radians per unit model time); default
            ``default_omegas(layer)``, 0 to 1.5 x the largest ``|Im lambda|``. Spikes are narrow
            (width about ``|Re lambda|``): use a grid fine enough to resolve them.
        reference: ``"hippo"`` (the dense HiPPO-LegS system with the layer's B, C; layers with
            ``init="legs"`` or ``"ptd"``) or an ``SSM`` to compare with (``transfer_gap``).
        delta: step size of the continuous-to-discrete map ``theta = w delta`` (ZOH). Default:
            the geometric mean of the layer's ``Delta`` (every state has its own); the result
            records the layer's smallest and largest Delta so the spread is visible.
        layers: indices of the layers to analyse (default all).

    Returns:
        One ``SensitiveModes`` per analysed layer: the grid, the gap, the spikes in continuous
        (``peak_omegas``) and digital (``peak_thetas``, radians per sample) frequency.
    """
    all_layers = layers_of(obj)
    chosen = range(len(all_layers)) if layers is None else list(layers)
    if isinstance(n_peaks, bool) or int(n_peaks) != n_peaks or n_peaks < 1:
        raise ValueError(f"n_peaks must be a positive integer, got {n_peaks!r}")
    results = []
    for index in chosen:
        if not 0 <= index < len(all_layers):
            raise ValueError(f"layers: index {index} out of range for {len(all_layers)} SSM layers")
        layer = all_layers[index]
        grid = default_omegas(layer) if omegas is None else _as_frequencies(omegas, "omegas")
        gap = transfer_gap(layer, grid, reference)
        reference_of = _reference_function(layer, reference)
        reference_gain = _chunked(layer, grid, lambda w: _frobenius(reference_of(w)))
        Delta = _numpy(layer.Delta).ravel()
        step = float(np.exp(np.mean(np.log(Delta)))) if delta is None else float(delta)
        if not (np.isfinite(step) and step > 0):
            raise ValueError(f"delta must be a finite step size > 0, got {delta}")
        results.append(
            SensitiveModes(
                index, grid, gap, reference_gain, _peaks(gap, int(n_peaks)), step, (Delta.min(), Delta.max())
            )
        )
    return results


def _peaks(values: np.ndarray, count: int) -> np.ndarray:
    """Indices of the `count` largest local maxima of a 1-d array (ends included), largest first."""
    left = np.concatenate([[-np.inf], values[:-1]])
    right = np.concatenate([values[1:], [-np.inf]])
    candidates = np.flatnonzero((values >= left) & (values > right))
    return candidates[np.argsort(-values[candidates], kind="stable")][:count]
