"""discretize() / log_transition() against scipy.signal.cont2discrete and closed forms.

A complex eigenvalue lambda = a + ib acts on (Re x, Im x) as the real 2x2 block
[[a, -b], [b, a]]; scipy discretizes that block with B = I2, so its Ad and Bd are
the real 2x2 representations of Abar and of gamma (Bbar = gamma * B). This makes
scipy an independent per-state oracle for complex modes too.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.signal import cont2discrete

from ssmts.nn import DISCRETIZATIONS, discretize
from ssmts.nn.discretization import log_transition

# A spread of stable modes: slow and fast decay, small and large rotation, purely real ones.
LAMBDAS = np.array([-0.5 + 0.0j, -0.5 + 3.0j, -0.01 + 40.0j, -3.0 - 1.0j, -20.0 + 0.5j, -1e-3 + 1e-3j, -7.0 + 0.0j])
DELTAS = np.array([1e-3, 1e-2, 0.05, 0.1, 0.3, 1.0, 0.02])

METHODS = [("zoh", 0.5), ("bilinear", 0.5), ("gbt", 0.0), ("gbt", 0.3), ("gbt", 0.5), ("gbt", 1.0)]


def _block(z: complex) -> np.ndarray:
    """Real 2x2 matrix of multiplication by the complex number z."""
    return np.array([[z.real, -z.imag], [z.imag, z.real]])


def _scipy_per_state(lam: complex, dt: float, method: str, alpha: float) -> tuple[complex, complex]:
    """(Abar, gamma) of one mode from scipy's Ad, Bd of the 2x2 real block (C, D are not used)."""
    Ad, Bd, *_ = cont2discrete((_block(lam), np.eye(2), np.eye(2), np.zeros((2, 2))), dt, method=method, alpha=alpha)
    # Ad, Bd must themselves be multiplication-by-complex blocks.
    assert np.allclose(Ad[0, 0], Ad[1, 1], rtol=1e-12, atol=1e-15) and np.allclose(
        Ad[0, 1], -Ad[1, 0], rtol=1e-12, atol=1e-15
    )
    return complex(Ad[0, 0], Ad[1, 0]), complex(Bd[0, 0], Bd[1, 0])


@pytest.mark.parametrize("method,alpha", METHODS)
def test_discretize_matches_scipy_cont2discrete_per_state(method, alpha):
    """Oracle: scipy.signal.cont2discrete on each mode's real 2x2 block (float64, rel 1e-12)."""
    Lam = torch.from_numpy(LAMBDAS)
    Delta = torch.from_numpy(DELTAS)
    Abar, gamma = discretize(Lam, Delta, method, alpha)
    for p, (lam, dt) in enumerate(zip(LAMBDAS, DELTAS)):
        a_ref, g_ref = _scipy_per_state(complex(lam), float(dt), method, alpha)
        assert abs(complex(Abar[p]) - a_ref) <= 1e-12 * abs(a_ref) + 1e-15, (method, alpha, lam, dt)
        assert abs(complex(gamma[p]) - g_ref) <= 1e-12 * abs(g_ref), (method, alpha, lam, dt)


def test_discretize_matches_scipy_on_real_1x1_systems():
    """Oracle: scipy cont2discrete on scalar real systems (real eigenvalues, no 2x2 block needed)."""
    for method, alpha in METHODS:
        for lam, dt in [(-0.5, 0.1), (-4.0, 0.3), (-1e-4, 1e-3)]:
            Ad, Bd, *_ = cont2discrete(
                (np.array([[lam]]), np.array([[1.0]]), np.array([[1.0]]), np.array([[0.0]])),
                dt,
                method=method,
                alpha=alpha,
            )
            Abar, gamma = discretize(
                torch.tensor([complex(lam, 0.0)]), torch.tensor([dt], dtype=torch.float64), method, alpha
            )
            assert complex(Abar[0]) == pytest.approx(Ad[0, 0], rel=1e-12)
            assert complex(gamma[0]) == pytest.approx(Bd[0, 0], rel=1e-12)


def test_gbt_endpoints_are_forward_and_backward_euler():
    """Oracle: the textbook formulas Abar = 1 + dt*lam, gamma = dt (alpha=0);
    Abar = 1/(1 - dt*lam), gamma = dt/(1 - dt*lam) (alpha=1)."""
    Lam = torch.from_numpy(LAMBDAS)
    Delta = torch.from_numpy(DELTAS)
    A0, g0 = discretize(Lam, Delta, "gbt", 0.0)
    torch.testing.assert_close(A0, 1 + Delta * Lam, rtol=1e-14, atol=1e-15)
    torch.testing.assert_close(g0, Delta.to(g0.dtype), rtol=1e-14, atol=0.0)
    A1, g1 = discretize(Lam, Delta, "gbt", 1.0)
    torch.testing.assert_close(A1, 1 / (1 - Delta * Lam), rtol=1e-14, atol=1e-15)
    torch.testing.assert_close(g1, Delta / (1 - Delta * Lam), rtol=1e-14, atol=0.0)
    # bilinear is gbt(1/2), whatever alpha is passed along with it.
    Ab, gb = discretize(Lam, Delta, "bilinear", 0.9)
    Ah, gh = discretize(Lam, Delta, "gbt", 0.5)
    torch.testing.assert_close(Ab, Ah, rtol=0, atol=0)
    torch.testing.assert_close(gb, gh, rtol=0, atol=0)


@pytest.mark.parametrize("angle", [0.3, math.pi / 2, 2.9, math.pi])
def test_zoh_gamma_accurate_for_tiny_lambda_delta(angle):
    """Oracle: the series gamma = Delta * sum_k z^k/(k+1)!, z = Lambda*Delta, exact in float64 for |z| <= 1e-3.

    The naive (exp(z) - 1)/Lambda loses ~|log10 z| digits here; the check on it shows the test can fail.
    """
    z = torch.polar(torch.logspace(-15, -3, 13, dtype=torch.float64), torch.tensor(angle, dtype=torch.float64))
    Delta = torch.full(z.shape, 1e-2, dtype=torch.float64)
    Lam = z / Delta
    ref = Delta * sum(z**k / math.factorial(k + 1) for k in range(10))
    _, gamma = discretize(Lam, Delta, "zoh")
    assert ((gamma - ref).abs() / ref.abs()).max() < 1e-14
    if abs(math.cos(angle)) > 0.1:  # on the imaginary axis exp(z) - 1 happens to stay accurate in modulus
        naive = (torch.exp(z) - 1) / Lam
        assert ((naive - ref).abs() / ref.abs()).max() > 1e-5  # what the expm1 path avoids (measured >= 8e-4)
    # float32: one rounding of the inputs, nothing more (measured 1.6e-7).
    _, gamma32 = discretize(Lam.to(torch.complex64), Delta.float(), "zoh")
    assert ((gamma32.to(torch.complex128) - ref).abs() / ref.abs()).max() < 1e-6


@pytest.mark.parametrize("method,alpha", [("zoh", 0.5), ("bilinear", 0.5), ("gbt", 0.0), ("gbt", 1.0)])
def test_log_transition_powers_equal_repeated_products(method, alpha):
    """Oracle: Abar^l by repeated multiplication (numpy loop) vs exp(l * log Abar), l < 64.

    Includes forward Euler with dt*Re(lam) < -1, where Abar is negative real / in the left half plane.
    """
    Lam = torch.tensor([-0.5 + 2j, -15.0 + 0j, -8.0 + 3j, -0.01 + 0.2j], dtype=torch.complex128)
    Delta = torch.tensor([0.1, 0.1, 0.2, 1.0], dtype=torch.float64)
    Abar, _ = discretize(Lam, Delta, method, alpha)
    log_abar = log_transition(Abar, Lam, Delta, method)
    steps = torch.arange(64, dtype=torch.float64)
    fast = torch.exp(log_abar[:, None] * steps).numpy()
    a = Abar.numpy()
    slow = np.empty_like(fast)
    power = np.ones_like(a)
    for l in range(64):
        slow[:, l] = power
        power = power * a
    np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-300)
    if method == "gbt" and alpha == 0.0:
        assert Abar[1].real < -0.4  # the negative-real case was exercised


def test_log_transition_zero_abar_gives_delta_kernel():
    """Forward Euler at Delta*Lambda = -1 makes Abar exactly 0: the kernel must be [1, 0, 0, ...], not NaN."""
    Lam = torch.tensor([-10.0 + 0j], dtype=torch.complex128)
    Delta = torch.tensor([0.1], dtype=torch.float64)
    Abar, _ = discretize(Lam, Delta, "gbt", 0.0)
    assert Abar.abs().item() == 0.0
    kernel = torch.exp(log_transition(Abar, Lam, Delta, "gbt")[:, None] * torch.arange(5, dtype=torch.float64))
    assert torch.isfinite(kernel).all()
    torch.testing.assert_close(kernel.abs(), torch.tensor([[1.0, 0.0, 0.0, 0.0, 0.0]], dtype=torch.float64))


def test_discretize_rejects_unknown_method_and_bad_alpha():
    Lam = torch.tensor([-1.0 + 0j])
    Delta = torch.tensor([0.1])
    assert set(DISCRETIZATIONS) == {"zoh", "bilinear", "gbt"}
    with pytest.raises(ValueError, match="unknown discretization 'euler'"):
        discretize(Lam, Delta, "euler")
    with pytest.raises(ValueError, match=r"alpha must lie in \[0, 1\]"):
        discretize(Lam, Delta, "gbt", 1.5)
    # "gbt" without alpha is the bilinear rule (alpha = 1/2)
    for got, want in zip(discretize(Lam, Delta, "gbt"), discretize(Lam, Delta, "bilinear")):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("method, alpha", [("zoh", 0.5), ("bilinear", 0.5), ("gbt", 0.3)])
def test_discretize_dense_works_in_the_dtype_of_a_not_the_default_dtype(float64_default_dtype, method, alpha):
    """float32 (A, B, Delta) give float32 (Abar, Bbar) also when torch's default dtype is float64, with
    the values of scipy's cont2discrete in float64 to float32 accuracy: 1e-5 on entries of order 1 (the
    float32 matrix exponential is measured 3.4e-6 off, some 50 float32 epsilons)."""
    from ssmts.nn import discretize_dense

    A = np.array([[-1.0, 2.0, 0.0], [-2.0, -1.0, 0.5], [0.3, 0.0, -4.0]])
    B = np.array([[1.0, 0.0], [0.5, -1.0], [0.0, 2.0]])
    delta = 0.1
    scipy_method = "zoh" if method == "zoh" else "gbt"
    Ad, Bd, *_ = cont2discrete((A, B, np.eye(3), np.zeros((3, 2))), delta, method=scipy_method, alpha=alpha)
    Abar, Bbar = discretize_dense(
        torch.tensor(A, dtype=torch.float32),
        torch.tensor(B, dtype=torch.float32),
        torch.tensor(delta, dtype=torch.float32),
        method,
        alpha,
    )
    assert Abar.dtype == Bbar.dtype == torch.float32
    np.testing.assert_allclose(Abar.numpy(), Ad, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(Bbar.numpy(), Bd, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("method,alpha", METHODS)
def test_a_layer_warns_exactly_when_its_discretization_can_map_a_stable_mode_outside_the_unit_circle(method, alpha):
    """Oracle: scipy's discretization of the stable modes above at steps up to 10. ZOH and GBT with
    alpha >= 1/2 keep every |Abar| < 1 and build silently; GBT with alpha < 1/2 takes one of them outside
    (forward Euler: |1 + Delta lambda| > 1 for -0.5 + 3i at Delta 0.3), and the layer warns when built."""
    import warnings

    from ssmts.nn import SSM

    outside = any(
        np.abs(np.linalg.eigvals(_scipy_block(lam, dt, method, alpha))).max() > 1.0
        for lam in LAMBDAS
        for dt in np.geomspace(1e-3, 10.0, 30)
    )
    assert outside == (method == "gbt" and alpha < 0.5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SSM(2, 4, discretization=method, alpha=alpha)
    assert any("not A-stable" in str(w.message) for w in caught) == outside


def _scipy_block(lam: complex, dt: float, method: str, alpha: float) -> np.ndarray:
    """scipy's discrete state matrix of the 2x2 real block of lambda."""
    return cont2discrete((_block(lam), np.eye(2), np.eye(2), np.zeros((2, 2))), dt, method=method, alpha=alpha)[0]
