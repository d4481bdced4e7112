"""ssmts.nn.analysis against independent float64 oracles.

* ``transfer_function``: the realized real system written out densely from the layer's parameters,
  ``C_full (i w I - A_full)^-1 B_full`` by ``np.linalg.solve`` (stored modes and their conjugates),
  block diagonal over heads, ``+ D``, then the mixer ``W``.
* ``frequency_response``: the DTFT of the layer's own impulse response, obtained by running the
  layer (its forward pass) on unit impulses: ``sum_n y[n] e^{-i theta n}``.
* HiPPO reference: the dense HiPPO-LegS matrix written from its formula with the init's B0 = B_hippo
  and C0 drawn exactly as the init draws it.
* peaks: local maxima (ends included, ties on a plateau at the right edge) found by a plain loop.
"""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import ssmts
from ssmts.nn import SSM
from ssmts.nn.analysis import (
    SensitiveModes,
    _peaks,
    digital_frequency,
    frequency_response,
    hippo_reference_transfer_function,
    layers_of,
    sensitive_frequencies,
    transfer_function,
    transfer_gap,
)


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def make_layer(H=4, N=4, *, heads=2, D="full", M=None, conj_sym=True, bidirectional=False, dt=0.5, init="lin"):
    layer = SSM(
        H,
        N,
        d_output=M,
        heads=heads,
        init=init,
        D=D,
        conj_sym=conj_sym,
        bidirectional=bidirectional,
        dt_min=dt,
        dt_max=dt,
        generator=gen(),
    ).double()
    with torch.no_grad():
        if layer.mixer is not None:
            layer.mixer.weight.copy_(torch.randn(layer.mixer.weight.shape, generator=gen(3), dtype=torch.float64))
            layer.mixer.bias.fill_(0.7)
        if layer.D is not None:
            layer.D.copy_(torch.randn(layer.D.shape, generator=gen(4), dtype=torch.float64))
        if bidirectional == "ldnn":  # a backward system clearly different from the forward one
            layer.Lambda_backward_re_raw.add_(math.log(2.0))
            layer.Lambda_backward_im.add_(0.9)
    return layer


def dense_G(layer, omegas, backward=False, with_D=True, with_mixer=True):
    """Dense realized system from the raw parameters (lambda_enforce='exp': lambda = -exp(re) + i im)."""
    prefix = "Lambda_backward" if backward else "Lambda"
    re = getattr(layer, f"{prefix}_re_raw").detach().numpy()
    im = getattr(layer, f"{prefix}_im").detach().numpy()
    lam = -np.exp(re) + 1j * im  # (S, P)
    B = torch.view_as_complex(layer.B.detach()).numpy()  # (S, P, Hh)
    C = torch.view_as_complex(layer.C.detach()).numpy()  # (S, Mh, P)
    scale = 1.0 if layer.conj_sym else 0.5
    M, H = layer.d_output, layer.d_model
    Mh, Hh = M // layer.heads, H // layer.heads
    G = np.zeros((M, H, len(omegas)), dtype=complex)
    for s in range(layer.heads):
        A_full = np.diag(np.concatenate([lam[s], np.conj(lam[s])]))
        B_full = np.concatenate([B[s], np.conj(B[s])], axis=0)
        C_full = scale * np.concatenate([C[s], np.conj(C[s])], axis=1)
        n = A_full.shape[0]
        for k, w in enumerate(omegas):
            G[s * Mh : (s + 1) * Mh, s * Hh : (s + 1) * Hh, k] = C_full @ np.linalg.solve(
                1j * w * np.eye(n) - A_full, B_full
            )
    if backward:
        return G
    if layer.bidirectional == "essm":
        G = 2 * G.real + 0j
    elif layer.bidirectional == "ldnn":
        G = 0.5 * (G + np.conj(dense_G(layer, omegas, backward=True, with_D=False, with_mixer=False)))
    if with_D:
        if layer.D_mode == "identity":
            G = G + np.eye(M, H)[..., None]
        elif layer.D_mode == "diagonal":
            G = G + np.diag(layer.D.detach().numpy())[..., None]
        elif layer.D_mode == "full":
            G = G + layer.D.detach().numpy()[..., None]
    if with_mixer and layer.mixer is not None:
        W = layer.mixer.weight.detach().numpy()
        G = np.einsum("om,mhk->ohk", W, G)
    return G


def impulse_dtft(layer, thetas, L=400):
    """DTFT of the layer's impulse response from its forward pass (impulse at the centre: two-sided for
    bidirectional layers); the mixer's bias, the response to zero input, is subtracted."""
    H = layer.d_model
    c = L // 2 if layer.bidirectional else 0
    u = torch.zeros(H + 1, H, L, dtype=torch.float64)
    for h in range(H):
        u[h, h, c] = 1.0
    with torch.no_grad():
        y = layer(u).numpy()
    y = y[:H] - y[H]  # (H, M, L)
    phase = np.exp(-1j * np.outer(np.arange(L) - c, thetas))  # (L, n)
    return np.einsum("hml,ln->mhn", y, phase)


OMEGAS = np.array([-3.0, 0.0, 0.37, 1.0, 2.5, 7.0])
THETAS = np.array([0.0, 0.3, 1.1, 2.0, np.pi])


# ---------------------------------------------------------------- transfer_function
@pytest.mark.parametrize("D", ["full", "none"])
@pytest.mark.parametrize("bidirectional", [False, "essm", "ldnn"])
def test_transfer_function_defaults_include_D_and_mixer_and_match_the_dense_system(D, bidirectional):
    layer = make_layer(D=D, bidirectional=bidirectional)
    np.testing.assert_allclose(transfer_function(layer, OMEGAS), dense_G(layer, OMEGAS), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        transfer_function(layer, OMEGAS, include_feedthrough=False, include_mixer=False),
        dense_G(layer, OMEGAS, with_D=False, with_mixer=False),
        rtol=1e-10,
        atol=1e-12,
    )


@pytest.mark.parametrize("D", ["identity", "diagonal", "full", "none"])
def test_transfer_function_adds_each_feedthrough_mode(D):
    layer = make_layer(H=3, N=4, heads=1, D=D, conj_sym=False)
    np.testing.assert_allclose(transfer_function(layer, OMEGAS), dense_G(layer, OMEGAS), rtol=1e-10, atol=1e-12)


def test_transfer_function_full_D_with_fewer_outputs_than_inputs():
    layer = make_layer(H=4, M=2, heads=2, D="full")
    G = transfer_function(layer, OMEGAS)
    assert G.shape == (2, 4, len(OMEGAS))
    np.testing.assert_allclose(G, dense_G(layer, OMEGAS), rtol=1e-10, atol=1e-12)


def test_scalar_frequency_is_a_grid_of_one():
    layer = make_layer()
    G = transfer_function(layer, 0.37)
    assert G.shape == (4, 4, 1)
    np.testing.assert_allclose(G[..., 0], dense_G(layer, [0.37])[..., 0], rtol=1e-10)


# ---------------------------------------------------------------- frequency_response
@pytest.mark.parametrize("bidirectional", [False, "essm", "ldnn"])
def test_frequency_response_defaults_are_the_dtft_of_the_layers_impulse_response(bidirectional):
    layer = make_layer(D="full", bidirectional=bidirectional)
    np.testing.assert_allclose(frequency_response(layer, THETAS), impulse_dtft(layer, THETAS), rtol=1e-9, atol=1e-9)


def test_frequency_response_in_hz_converts_with_the_sample_rate():
    layer = make_layer()
    fs = 250.0
    hz = THETAS * fs / (2 * np.pi)
    np.testing.assert_allclose(
        frequency_response(layer, hz, sample_rate=fs), impulse_dtft(layer, THETAS), rtol=1e-9, atol=1e-9
    )
    fs = 0.5  # a sample rate below 1 Hz is valid
    np.testing.assert_allclose(
        frequency_response(layer, THETAS * fs / (2 * np.pi), sample_rate=fs),
        impulse_dtft(layer, THETAS),
        rtol=1e-9,
        atol=1e-9,
    )


@pytest.mark.parametrize("rate", [0, -2.0])
def test_frequency_response_rejects_a_non_positive_sample_rate(rate):
    with pytest.raises(ValueError, match=rf"^sample_rate must be > 0, got {re.escape(str(rate))}$"):
        frequency_response(make_layer(), [0.1], sample_rate=rate)


# ---------------------------------------------------------------- input validation
CALLS = {
    "transfer_function": (lambda layer, w: transfer_function(layer, w), "omegas"),
    "frequency_response": (lambda layer, w: frequency_response(layer, w), "frequencies"),
    "hippo_reference": (lambda layer, w: hippo_reference_transfer_function(layer, w), "omegas"),
    "transfer_gap": (lambda layer, w: transfer_gap(layer, w), "omegas"),
    "digital_frequency": (lambda layer, w: digital_frequency(w, 0.1), "omegas"),
    "sensitive_frequencies": (lambda layer, w: sensitive_frequencies(layer, omegas=w), "omegas"),
}


@pytest.mark.parametrize("which", sorted(CALLS))
def test_frequency_grids_must_be_finite_and_one_dimensional_and_errors_name_the_argument(which):
    call, name = CALLS[which]
    layer = SSM(1, 4, init="legs", D="none")
    with pytest.raises(ValueError, match=rf"^{name} must be one-dimensional, got shape \(2, 2\)$"):
        call(layer, np.ones((2, 2)))
    with pytest.raises(ValueError, match=rf"^{name} must be finite$"):
        call(layer, [1.0, np.nan])


def test_non_layers_are_rejected_with_a_hint():
    backbone = nn.Sequential(SSM(1, 4))
    with pytest.raises(
        TypeError, match=r"^expected an ssmts\.nn\.SSM layer, got Sequential; .*estimator pick one layer"
    ):
        transfer_function(backbone, [1.0])
    with pytest.raises(TypeError, match=r"e\.g\. backbone\.ssm_layers\[0\]$"):
        frequency_response(backbone, [1.0])


def test_layers_of_names_what_it_got():
    with pytest.raises(TypeError, match=r"got object; an estimator must be fitted first"):
        layers_of(object())
    with pytest.raises(TypeError, match=r"^the Sequential module contains no ssmts\.nn\.SSM layer$"):
        layers_of(nn.Sequential(nn.Linear(2, 2)))


def test_digital_frequency_is_float64_for_float32_input():
    omegas = np.array([0.1, 1.3, 2.7], dtype=np.float32)
    theta = digital_frequency(omegas, 0.3, fold=False)
    assert theta.dtype == np.float64
    np.testing.assert_array_equal(theta, omegas.astype(np.float64) * 0.3)


# ---------------------------------------------------------------- HiPPO reference
def dense_hippo(N):
    n = np.arange(N)
    A = np.array(
        [
            [-math.sqrt(2 * i + 1) * math.sqrt(2 * k + 1) if i > k else (-(i + 1) if i == k else 0.0) for k in n]
            for i in n
        ]
    )
    return A, np.sqrt(2 * n + 1.0)


@pytest.mark.parametrize("conj_sym", [True, False])
def test_hippo_reference_of_a_ptd_layer_with_its_own_eps_and_gamma_is_dense_hippo(conj_sym):
    """At init the reference is C0 (iw - A_hippo)^-1 B_hippo, C0 the init's draw, per head (block diagonal)."""
    N, heads = 8, 2
    layer = SSM(
        heads, N, heads=heads, init="ptd", D="none", conj_sym=conj_sym, ptd_eps=0.05, ptd_gamma=5.0, generator=gen()
    )
    layer = layer.double()
    g = gen()
    C0 = [torch.randn((1, N), generator=g, dtype=torch.float64).numpy()[0] / math.sqrt(N) for _ in range(heads)]
    A, B = dense_hippo(N)
    G = hippo_reference_transfer_function(layer, OMEGAS)
    for k, w in enumerate(OMEGAS):
        R = np.linalg.solve(1j * w * np.eye(N) - A, B)
        expected = np.diag([C0[s] @ R for s in range(heads)])
        np.testing.assert_allclose(G[..., k], expected, rtol=1e-4, atol=1e-5)


def test_hippo_reference_warns_at_the_callers_line_when_the_modes_do_not_span_the_state(monkeypatch):
    """A map back that loses rank gives a least-squares reference, flagged (no layer of ssmts' own inits
    reaches it: a ptd layer keeps each real eigenvalue in a slot of its own; stand in a rank-1 map)."""
    import ssmts.nn.analysis as analysis

    layer = SSM(1, 4, init="legs", D="none", conj_sym=False, generator=gen())
    V, c_scale = analysis._init_eigenvectors(layer)
    assert np.linalg.matrix_rank(V) == 4  # the real map back is exact
    rank_one = np.outer(V[:, 0], np.ones(V.shape[1]))
    monkeypatch.setattr(analysis, "_init_eigenvectors", lambda layer: (rank_one, c_scale))
    with pytest.warns(UserWarning, match=r"^the layer keeps fewer than N=4 independent modes") as record:
        hippo_reference_transfer_function(layer, OMEGAS)
    # the whole message: the cause (real PTD eigenvalues dropped by conj_sym), the effect and the remedy
    assert str(record[0].message) == (
        "the layer keeps fewer than N=4 independent modes (conj_sym dropped real eigenvalues of the PTD "
        "system), so B and C map back to HiPPO's coordinates only approximately; build the layer with "
        "conj_sym=False for an exact reference"
    )
    # named outside ssmts (under mutation testing mutmut's trampoline is the frame next to ssmts)
    assert Path(ssmts.__file__).parent not in Path(record[0].filename).resolve().parents


# ---------------------------------------------------------------- transfer_gap
def test_transfer_gap_to_another_layer_leaves_out_D_and_the_mixer_of_both():
    layer, other = make_layer(D="full"), make_layer(D="full", init="inv")
    with torch.no_grad():
        other.D.mul_(-3.0)
        other.mixer.weight.mul_(2.0)
    expected = np.sqrt(
        np.sum(
            np.abs(
                dense_G(layer, OMEGAS, with_D=False, with_mixer=False)
                - dense_G(other, OMEGAS, with_D=False, with_mixer=False)
            )
            ** 2,
            axis=(0, 1),
        )
    )
    np.testing.assert_allclose(transfer_gap(layer, OMEGAS, reference=other), expected, rtol=1e-10)


def test_transfer_gap_rejects_other_references_by_type():
    with pytest.raises(TypeError, match=r"^reference must be 'hippo' or an ssmts\.nn\.SSM, got int$"):
        transfer_gap(SSM(1, 4), [1.0], reference=3)


def test_very_wide_layers_are_chunked_and_give_every_frequency_once():
    """1024 x 1024 channels: chunks of 2 frequencies; the gap frequency by frequency is the oracle."""
    layer = SSM(1024, 2, init="legs", D="none", generator=gen())
    omegas = np.array([0.0, 0.5, 1.0, 2.0, 4.0])
    whole = transfer_gap(layer, omegas)
    assert whole.shape == (5,)
    np.testing.assert_allclose(whole, [transfer_gap(layer, [w])[0] for w in omegas], rtol=1e-12)


def test_single_input_layers_with_many_outputs_are_chunked_by_their_output_count():
    """1 input, 4096 outputs, N = 2: 4096 entries of G per frequency, so 513 frequencies take two chunks
    (512 + 1). Oracle: the Frobenius norm of transfer_function minus the HiPPO reference evaluated on the
    whole grid at once (neither chunks); the same float64 numbers, so rtol 1e-12."""
    layer = SSM(1, 2, d_output=4096, init="legs", D="none", generator=gen())
    omegas = np.linspace(0.0, 3.0, 513)
    difference = transfer_function(layer, omegas, include_feedthrough=False, include_mixer=False)
    difference = difference - hippo_reference_transfer_function(layer, omegas)
    expected = np.sqrt(np.sum(np.abs(difference) ** 2, axis=(0, 1)))
    np.testing.assert_allclose(transfer_gap(layer, omegas), expected, rtol=1e-12)


# ---------------------------------------------------------------- sensitive_frequencies
def loop_peaks(values):
    """Local maxima, ends included (outside = -inf), >= left and > right: largest first, ties by index."""
    v = np.concatenate([[-np.inf], values, [-np.inf]])
    found = [i - 1 for i in range(1, len(v) - 1) if v[i] >= v[i - 1] and v[i] > v[i + 1]]
    return sorted(found, key=lambda i: (-values[i], i))


@pytest.mark.parametrize(
    "values",
    [[1.0], [1.0, 2.0], [2.0, 1.0], [3.0, 3.0], [1.0, 3.0, 2.0], [2.0, 1.0, 2.0], [1.0, 1.0, 1.0, 0.0]],
)
def test_peaks_are_local_maxima_for_every_length(values):
    """Short grids too: [1, 2] has one peak (index 1), not both points."""
    values = np.array(values)
    np.testing.assert_array_equal(_peaks(values, 10), loop_peaks(values))


def test_peaks_of_random_grids_equal_the_loop_and_are_cut_at_count():
    rng = np.random.default_rng(0)
    for length in (1, 2, 3, 50):
        values = rng.integers(0, 4, size=length).astype(float)  # ties and plateaus
        np.testing.assert_array_equal(_peaks(values, 3), loop_peaks(values)[:3])


def test_sensitive_frequencies_defaults_grid_peaks_and_delta():
    layer = SSM(1, 16, init="legs", D="none", generator=gen())  # float32 parameters
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (modes,) = sensitive_frequencies(layer)
    lam = layer.Lambda.detach().numpy().astype(np.complex128)
    top = np.abs(lam.imag).max()
    np.testing.assert_array_equal(modes.omegas, np.linspace(0.0, 1.5 * top + 10.0, 4000))
    expected_peaks = loop_peaks(modes.gap)
    assert len(expected_peaks) > 5
    np.testing.assert_array_equal(modes.peak_omegas, modes.omegas[expected_peaks[:5]])
    np.testing.assert_array_equal(modes.peak_gaps, modes.gap[expected_peaks[:5]])
    Delta = layer.Delta.detach().numpy().astype(np.float64).ravel()
    assert modes.delta == pytest.approx(math.exp(np.mean(np.log(Delta))), rel=1e-14)
    assert modes.delta_range == (Delta.min(), Delta.max())
    assert isinstance(modes.delta, float) and isinstance(modes.delta_range[0], float)
    # reference gain: the Frobenius norm of the dense HiPPO system on the grid
    A, B = dense_hippo(16)
    C0 = torch.randn((1, 16), generator=gen(), dtype=torch.float64).numpy()[0] / math.sqrt(16)
    grid = modes.omegas[::400]
    dense = np.abs([C0 @ np.linalg.solve(1j * w * np.eye(16) - A, B) for w in grid])
    np.testing.assert_allclose(modes.reference_gain[::400], dense, rtol=1e-4)


def test_sensitive_frequencies_with_a_given_grid_reference_delta_and_peak_count():
    layer, other = make_layer(D="full"), make_layer(D="full", init="inv")
    omegas = np.linspace(-4.0, 9.0, 301)
    (modes,) = sensitive_frequencies(layer, 2, omegas=omegas, reference=other, delta=0.25)
    np.testing.assert_array_equal(modes.omegas, omegas)
    dense = dense_G(layer, omegas, with_D=False, with_mixer=False) - dense_G(
        other, omegas, with_D=False, with_mixer=False
    )
    np.testing.assert_allclose(modes.gap, np.sqrt(np.sum(np.abs(dense) ** 2, axis=(0, 1))), rtol=1e-10)
    ref = dense_G(other, omegas, with_D=False, with_mixer=False)
    np.testing.assert_allclose(modes.reference_gain, np.sqrt(np.sum(np.abs(ref) ** 2, axis=(0, 1))), rtol=1e-10)
    expected = loop_peaks(modes.gap)[:2]
    assert len(modes.peak_omegas) == 2
    np.testing.assert_array_equal(modes.peak_omegas, omegas[expected])
    assert modes.delta == 0.25
    np.testing.assert_allclose(modes.peak_thetas, digital_frequency(omegas[expected], 0.25))


@pytest.mark.parametrize("bad", [True, 2.5, 0])
def test_n_peaks_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match=rf"^n_peaks must be a positive integer, got {bad!r}$"):
        sensitive_frequencies(SSM(1, 4), bad, omegas=[1.0, 2.0, 3.0])


def test_layer_index_one_past_the_end_is_out_of_range():
    with pytest.raises(ValueError, match=r"^layers: index 1 out of range for 1 SSM layers$"):
        sensitive_frequencies(SSM(1, 4), omegas=[1.0, 2.0], layers=[1])


@pytest.mark.parametrize("delta", [0, -1.0, float("inf")])
def test_delta_must_be_finite_and_positive_and_the_error_quotes_it(delta):
    with pytest.raises(ValueError, match=rf"^delta must be a finite step size > 0, got {delta}$"):
        sensitive_frequencies(SSM(1, 4), omegas=[1.0, 2.0, 3.0], delta=delta)


def test_sensitive_modes_as_dict_and_repr_report_the_peaks():
    omegas = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    gap = np.array([0.0, 5.0, 1.0, 2.0, 0.5])
    modes = SensitiveModes(2, omegas, gap, np.array([1.0, 7.5, 2.0, 0.1, 0.0]), np.array([1, 3]), 1.0, (0.5, 2.0))
    assert modes.as_dict() == {
        "layer": 2,
        "delta": 1.0,
        "delta_range": [0.5, 2.0],
        "peak_omegas": [1.0, 3.0],
        "peak_gaps": [5.0, 2.0],
        "peak_thetas": [1.0, 3.0],
        "max_reference_gain": 7.5,
    }
    assert repr(modes) == "SensitiveModes(layer=2, delta=1, peaks=[w=1 (theta=1.000), w=3 (theta=3.000)])"


# ---------------------------------------------------------------- peak picking
@pytest.mark.parametrize(
    "values",
    [
        [1.0, 0.0, 2.0],  # three points: local maxima at both ends, not the middle
        [5.0, 1.0, 0.0, 3.0, 4.0],  # the largest at the first end, another at the last end
        [0.0, 1.0, 2.0, 3.0, 2.0],  # monotone rise: only the top
        [0.0, 2.0, 2.0, 0.0],  # plateau: its right edge
    ],
)
def test_peaks_are_local_maxima_with_ends_largest_first(values):
    values = np.array(values)
    np.testing.assert_array_equal(_peaks(values, 10), loop_peaks(values)[:10])
    np.testing.assert_array_equal(_peaks(values, 1), loop_peaks(values)[:1])


@pytest.mark.parametrize("values", [[1.0, 3.0], [3.0, 1.0], [2.0]])
def test_fewer_than_three_points_give_the_largest_first(values):
    values = np.array(values)
    assert _peaks(values, 1).tolist() == [int(np.argmax(values))]


def test_tied_peaks_come_in_frequency_order():
    values = np.zeros(81)
    values[1::2] = np.tile([1.0, 2.0], 20)  # 40 spikes of two heights, interleaved
    expected = np.concatenate([np.arange(3, 81, 4), np.arange(1, 81, 4)])
    np.testing.assert_array_equal(loop_peaks(values), expected)
    np.testing.assert_array_equal(_peaks(values, 40), expected)
