"""Sensitive frequencies (ssmts.nn.analysis, PTD paper sections 3.3-3.4) against dense float64
numpy computations written here from the formulas, sharing no code with the analysis module:
HiPPO-LegS A_nk = -sqrt(2n+1) sqrt(2k+1) (n > k), -(n+1) (n = k); B_n = sqrt(2n+1); its normal
part A + p p^T, p_n = sqrt(n + 1/2); G(iw) = C0 (iw I - A)^-1 B0.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from ssmts.nn import SSM, SequenceHead, SSMBackbone
from ssmts.nn.analysis import (
    digital_frequency,
    frequency_response,
    hippo_reference_transfer_function,
    sensitive_frequencies,
    transfer_function,
    transfer_gap,
)

from .test_init import _legs_loop


def dense_legs(N):
    """HiPPO-LegS (the entry-by-entry oracle of test_init) and its normal part A + P P^T."""
    A, B = _legs_loop(N)
    p = np.sqrt(np.arange(N) + 0.5)
    return A, B, A + np.outer(p, p)


def dense_G(A, B, C, omegas):
    N = len(B)
    return np.array([C @ np.linalg.solve(1j * w * np.eye(N) - A, B) for w in omegas])


def siso_legs_layer(N, seed=0, **kwargs):
    """A SISO legs layer and the C0 its init drew (the first N normals of the generator / sqrt(N))."""
    layer = SSM(1, N, init="legs", D="none", generator=torch.Generator().manual_seed(seed), **kwargs).double()
    C0 = torch.randn((1, N), generator=torch.Generator().manual_seed(seed), dtype=torch.float64).numpy()[0] / math.sqrt(
        N
    )
    return layer, C0


@pytest.mark.parametrize("N", [8, 16])
def test_legs_layer_is_the_normal_part_and_the_reference_is_dense_hippo(N):
    layer, C0 = siso_legs_layer(N)
    A, B, A_normal = dense_legs(N)
    omegas = np.linspace(0.0, 1.3 * np.abs(np.linalg.eigvals(A_normal).imag).max(), 1500)
    G_layer = transfer_function(layer, omegas, include_feedthrough=False)[0, 0]
    G_normal, G_hippo = dense_G(A_normal, B, C0, omegas), dense_G(A, B, C0, omegas)
    scale = np.abs(G_normal).max()
    # B and C are stored in complex64: agreement to float32 precision
    assert np.abs(G_layer - G_normal).max() < 1e-4 * max(scale, 1.0)
    G_ref = hippo_reference_transfer_function(layer, omegas)[0, 0]
    assert np.abs(G_ref - G_hippo).max() < 1e-4 * np.abs(G_hippo).max()
    gap = transfer_gap(layer, omegas)
    np.testing.assert_allclose(gap, np.abs(G_normal - G_hippo), atol=1e-4 * max(scale, 1.0))


def test_largest_spike_of_the_legs_init_sits_at_its_top_eigenfrequency():
    N = 16
    layer, C0 = siso_legs_layer(N)
    A, B, A_normal = dense_legs(N)
    top = np.abs(np.linalg.eigvals(A_normal).imag).max()
    omegas = np.linspace(0.0, 1.2 * top, 6001)
    modes = sensitive_frequencies(layer, 3, omegas=omegas)[0]
    dense_gap = np.abs(dense_G(A_normal, B, C0, omegas) - dense_G(A, B, C0, omegas))
    assert modes.peak_omegas[0] == pytest.approx(omegas[np.argmax(dense_gap)], abs=2 * (omegas[1] - omegas[0]))
    assert modes.peak_omegas[0] == pytest.approx(top, rel=0.01)
    # a spike: the gap there dwarfs the HiPPO system's own gain (PTD paper Fig. 1)
    assert modes.peak_gaps[0] > 5 * np.abs(dense_G(A, B, C0, omegas)).max()
    assert list(modes.peak_gaps) == sorted(modes.peak_gaps, reverse=True)


def test_ptd_init_stays_uniformly_close_to_hippo_where_legs_spikes():
    N = 16
    gen = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    legs = SSM(1, N, init="legs", D="none", conj_sym=False, generator=gen()).double()
    ptd = SSM(1, N, init="ptd", D="none", conj_sym=False, generator=gen()).double()
    omegas = np.linspace(0.0, 150.0, 3001)
    assert transfer_gap(ptd, omegas).max() < 0.02 * transfer_gap(legs, omegas).max()


def test_reference_can_be_another_layer_and_must_match_its_channels():
    layer, _ = siso_legs_layer(8)
    omegas = np.linspace(0, 50, 101)
    np.testing.assert_allclose(transfer_gap(layer, omegas, reference=layer), 0.0, atol=1e-12)
    with pytest.raises(ValueError, match="channels"):
        transfer_gap(layer, omegas, reference=SSM(2, 8, D="none"))
    with pytest.raises(ValueError, match="init='lin'"):
        transfer_gap(SSM(1, 8, init="lin"), omegas)
    with pytest.raises(ValueError, match="reference must be"):
        transfer_gap(layer, omegas, reference="s4")


def test_digital_frequency_folds_w_delta_into_zero_to_pi():
    np.testing.assert_allclose(digital_frequency([1.0, 10.0], 0.1), [0.1, 1.0])
    # 3 pi / 2 aliases to pi / 2, 2 pi + 0.3 to 0.3
    np.testing.assert_allclose(digital_frequency([1.5 * np.pi, 2 * np.pi + 0.3], 1.0), [0.5 * np.pi, 0.3])
    np.testing.assert_allclose(digital_frequency([1.5 * np.pi], 1.0, fold=False), [1.5 * np.pi])
    with pytest.raises(ValueError, match="delta"):
        digital_frequency([1.0], 0.0)


def test_zoh_response_at_w_delta_matches_the_continuous_transfer_function():
    """With one Delta for all modes, the discrete response at theta = w Delta is G(iw) for small w Delta."""
    delta = 1e-3
    layer = SSM(1, 8, init="legs", D="none", dt_min=delta, dt_max=delta).double()
    omegas = np.array([1.0, 5.0, 20.0])
    theta = digital_frequency(omegas, delta)
    G = transfer_function(layer, omegas, include_feedthrough=False)[0, 0]
    H = frequency_response(layer, theta, include_feedthrough=False)[0, 0]
    np.testing.assert_allclose(H, G, rtol=0.05)
    modes = sensitive_frequencies(layer, 2, omegas=np.linspace(0, 100, 2001))[0]
    assert modes.delta == pytest.approx(delta)
    np.testing.assert_allclose(modes.peak_thetas, modes.peak_omegas * delta)


def test_sensitive_frequencies_of_networks_and_fitted_estimators():
    backbone = SSMBackbone(1, 4, 2, None, d_state=8, init="legs")
    head = SequenceHead(backbone, 3)
    modes = sensitive_frequencies(head, 2)
    assert [m.layer_index for m in modes] == [0, 1]
    delta = backbone.ssm_layers[1].Delta.detach().numpy()
    assert modes[1].delta_range == pytest.approx((delta.min(), delta.max()), rel=1e-6)

    class Fitted:  # what an ssmts estimator exposes after fit
        model_ = head

    assert sensitive_frequencies(Fitted(), 1, layers=[1])[0].layer_index == 1
    with pytest.raises(TypeError, match="fitted"):
        sensitive_frequencies(object())
    with pytest.raises(TypeError, match="no ssmts.nn.SSM"):
        sensitive_frequencies(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="n_peaks"):
        sensitive_frequencies(head, 0)
    with pytest.raises(ValueError, match="layers"):
        sensitive_frequencies(head, layers=[5])


def test_bidirectional_layers_have_no_causal_hippo_reference():
    with pytest.raises(ValueError, match="bidirectional"):
        transfer_gap(SSM(1, 8, bidirectional=True), [1.0])


def test_conj_sym_ptd_keeps_its_real_modes_and_is_the_full_system():
    gen = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    # PTD of LegS at N=16 has 2 real eigenvalues and 7 pairs: 9 slots, the system exactly (no warning).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        half = SSM(2, 16, init="ptd", D="none", dt_min=0.05, dt_max=0.05, generator=gen()).double()
    full = SSM(2, 16, init="ptd", D="none", conj_sym=False, dt_min=0.05, dt_max=0.05, generator=gen()).double()
    assert half.P == 9 and full.P == 16
    np.testing.assert_allclose(half.kernel(64).detach().numpy(), full.kernel(64).detach().numpy(), rtol=1e-7, atol=1e-9)
    omegas = np.linspace(0.0, 30.0, 61)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(transfer_gap(half, omegas), transfer_gap(full, omegas), rtol=1e-6, atol=1e-9)
    u = torch.randn(3, 2, 40, generator=gen(), dtype=torch.float64)
    np.testing.assert_allclose(half(u).detach().numpy(), half(u, mode="recurrence").detach().numpy(), atol=1e-10)


def test_conjugate_half_with_too_few_slots_drops_the_fastest_real_modes_with_a_warning():
    from ssmts.nn.init import conjugate_half

    Lambda = np.array([-1.0 + 2j, -1.0 - 2j, -0.5 + 0j, -3.0 + 0j])
    V = np.eye(4, dtype=complex)
    with pytest.warns(UserWarning, match="dropping the 1 fastest-decaying real modes"):
        kept, _, _, c_scale = conjugate_half(Lambda, V, V, 2)
    np.testing.assert_allclose(kept, [-1.0 + 2j, -0.5])
    np.testing.assert_allclose(c_scale, [1.0, 0.5])
    kept, _, _, _ = conjugate_half(Lambda, V, V)  # P=None: every mode
    assert len(kept) == 3


# ---------------------------------------------------------------- LSSL-fixed
def test_fixed_transition_freezes_lambda_and_delta_only():
    layer = SSM(2, 8, fixed_transition=True, bidirectional="ldnn")
    frozen = {id(p) for p in layer.transition_parameters()}
    assert len(frozen) == 5 and all(not p.requires_grad for p in layer.transition_parameters())
    assert [p for p in layer.ssm_parameters()] == [layer.B]
    assert layer.C.requires_grad and layer.D.requires_grad
    with pytest.raises(ValueError, match="fixed_transition"):
        SSM(2, 8, fixed_transition="yes")


def test_wide_layers_are_analysed_in_frequency_chunks_with_the_same_numbers():
    layer = SSM(64, 8, init="legs", D="none")  # 64 x 64 channels: chunks of 512 frequencies
    omegas = np.linspace(0.0, 60.0, 1500)
    pieces = np.concatenate([transfer_gap(layer, omegas[i : i + 7]) for i in range(0, len(omegas), 7)])
    np.testing.assert_allclose(transfer_gap(layer, omegas), pieces, rtol=1e-12)
