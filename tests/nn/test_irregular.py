"""Per-step Delta_k (irregular time stamps) in the SSM layer and the backbone, against independent
oracles: a dense numpy loop of the recurrence with the discretization formulas written out, scipy's
cont2discrete per step for a dense real system, the FFT path (constant dt = dt_scale), and
torch.autograd.gradcheck."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.signal import cont2discrete

from ssmts.nn import SSM, SSMBackbone
from ssmts.nn.scan import diagonal_scan

DISCRETIZATIONS = [("zoh", 0.5), ("bilinear", 0.5), ("gbt", 0.0), ("gbt", 0.3), ("gbt", 1.0)]


def _rel(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.abs(a - b).max() / np.abs(b).max())


def _gaps(seed: int, batch: int, L: int) -> torch.Tensor:
    """Uneven positive gaps (batch, L) between 0.2 and 3 sample periods."""
    g = torch.Generator().manual_seed(seed)
    return 0.2 + 2.8 * torch.rand(batch, L, generator=g, dtype=torch.float64)


def _layer(seed: int, **kwargs) -> SSM:
    torch.manual_seed(seed)
    layer = SSM(4, 6, d_output=4, init="lin", dt_min=0.05, dt_max=0.5, **kwargs).double()
    with torch.no_grad():  # random B, C and D, so that every entry matters
        layer.B.normal_()
        layer.C.normal_()
        if layer.D is not None:
            layer.D.normal_()
    return layer


def _naive(layer: SSM, u: np.ndarray, dt: np.ndarray) -> np.ndarray:
    """Dense loop of x_k = Abar(Delta dt_k) x_{k-1} + Bbar(Delta dt_k) u_k per head, written from the
    formulas of docs/concepts.md ("Discretization and the step size Δ"), then y = factor Re(C x) + D u
    and the mixer. u (b, H, L), dt (b, L).

    Bidirectional: the backward state runs from the end, x<_k = Abar(Delta g_k) x<_{k+1} + Bbar(Delta g_k) u_k
    with g_k = dt_{k+1} (the gap between samples k and k+1) and g_{L-1} = dt_0.
    """
    with torch.no_grad():
        lam = layer._lambda().numpy()
        lam_back = layer._lambda("Lambda_backward").numpy() if layer.bidirectional == "ldnn" else lam
        Delta = layer.Delta.numpy()
        B, C = layer._complex(layer.B).numpy(), layer._complex(layer.C).numpy()
        D = None if layer.D is None else layer.D.numpy()
        W = None if layer.mixer is None else (layer.mixer.weight.numpy(), layer.mixer.bias.numpy())
    method, alpha = layer.discretization, (0.5 if layer.discretization == "bilinear" else layer.alpha)

    def disc(lmb, step):
        z = lmb * step
        if method == "zoh":
            return np.exp(z), (np.exp(z) - 1.0) / lmb
        return (1 + (1 - alpha) * z) / (1 - alpha * z), step / (1 - alpha * z)

    b, H, L = u.shape
    S, Hh, Mh = layer.heads, layer.d_head_in, layer.d_head_out
    factor = 2.0 if layer.conj_sym else 1.0
    y = np.zeros((b, layer.d_output, L))
    for i in range(b):
        for s in range(S):
            us = u[i, s * Hh : (s + 1) * Hh]
            xs = np.zeros((L, layer.P), dtype=complex)
            x = np.zeros(layer.P, dtype=complex)
            for k in range(L):
                Abar, gamma = disc(lam[s], Delta[s] * dt[i, k])
                x = Abar * x + gamma * (B[s] @ us[:, k])
                xs[k] = x
            if layer.bidirectional:
                xb = np.zeros((L, layer.P), dtype=complex)
                x = np.zeros(layer.P, dtype=complex)
                for k in range(L - 1, -1, -1):
                    gap = dt[i, k + 1] if k + 1 < L else dt[i, 0]
                    Abar, _ = disc(lam_back[s], Delta[s] * gap)
                    _, gamma = disc(lam[s], Delta[s] * gap)  # LDNN: the forward Bbar is shared
                    x = Abar * x + gamma * (B[s] @ us[:, k])
                    xb[k] = x
                xs = (xs + xb) / 2 if layer.bidirectional == "ldnn" else xs + xb
            y[i, s * Mh : (s + 1) * Mh] = factor * (C[s] @ xs.T).real
    if layer.D_mode == "diagonal":
        y += D[None, :, None] * u
    elif layer.D_mode == "full":
        y += np.einsum("mh,bhl->bml", D, u)
    if W is not None:
        y = np.einsum("nm,bml->bnl", W[0], y) + W[1][None, :, None]
    return y


# ---------------------------------------------------------------- the layer against the naive loop
@pytest.mark.parametrize("method,alpha", DISCRETIZATIONS)
@pytest.mark.parametrize("bidirectional", [False, "essm", "ldnn"])
@pytest.mark.parametrize("heads", [1, 2, 4])
@pytest.mark.parametrize("conj_sym", [True, False])
def test_per_step_delta_matches_naive_loop(method, alpha, bidirectional, heads, conj_sym):
    """Oracle: dense numpy loop (float64, rel < 1e-10; measured ~1e-14), scan and recurrence modes."""
    layer = _layer(3, heads=heads, discretization=method, alpha=alpha, bidirectional=bidirectional, conj_sym=conj_sym)
    u = torch.randn(2, 4, 29, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    dt = _gaps(2, 2, 29)
    expected = _naive(layer, u.numpy(), dt.numpy())
    with torch.no_grad():
        assert _rel(layer(u, dt=dt).numpy(), expected) < 1e-10
        assert _rel(layer(u, dt=dt, mode="recurrence").numpy(), expected) < 1e-10


@pytest.mark.parametrize("method,alpha", [("zoh", 0.5), ("bilinear", 0.5), ("gbt", 0.25)])
def test_dense_real_system_against_scipy_per_step(method, alpha):
    """Oracle: scipy.signal.cont2discrete of the dense (A, B) at every step's Delta_k, in a dense loop."""
    rng = np.random.default_rng(0)
    N, H, M, L = 6, 2, 3, 40
    A = rng.standard_normal((N, N)) / math.sqrt(N)
    A -= (np.linalg.eigvals(A).real.max() + 0.3) * np.eye(N)
    B, C, D = rng.standard_normal((N, H)), rng.standard_normal((M, N)), rng.standard_normal((M, H))
    layer = SSM.from_matrices(A, B, C, D, dt=0.3, discretization=method, alpha=alpha)
    u = rng.standard_normal((H, L))
    dt = rng.uniform(0.1, 4.0, L)
    x, ys = np.zeros(N), []
    for k in range(L):
        Ad, Bd, *_ = cont2discrete((A, B, C, D), 0.3 * dt[k], method=method, alpha=alpha)
        x = Ad @ x + Bd @ u[:, k]
        ys.append(C @ x + D @ u[:, k])
    with torch.no_grad():
        y = layer(torch.from_numpy(u)[None], dt=torch.from_numpy(dt))[0].numpy()
    assert _rel(y, np.stack(ys, axis=1)) < 1e-9


# ---------------------------------------------------------------- constant dt is the zero-shot rate change
@pytest.mark.parametrize("bidirectional", [False, "essm", "ldnn"])
@pytest.mark.parametrize("convolution", ["state", "kernel"])
@pytest.mark.parametrize("method,alpha", [("zoh", 0.5), ("gbt", 0.3)])
@pytest.mark.parametrize("c", [0.5, 3.0])
def test_constant_dt_equals_dt_scale_fft_path(bidirectional, convolution, method, alpha, c):
    """dt_k = c everywhere equals dt_scale = c on the FFT path (float64, rel < 1e-10)."""
    layer = _layer(5, heads=2, bidirectional=bidirectional, convolution=convolution, discretization=method, alpha=alpha)
    u = torch.randn(3, 4, 50, dtype=torch.float64)
    with torch.no_grad():
        layer.dt_scale = c
        expected = layer(u)
        layer.dt_scale = 1.0
        assert _rel(layer(u, dt=torch.full((50,), c, dtype=torch.float64)), expected) < 1e-10
        # The two factors compose: dt_scale times dt_k.
        layer.dt_scale = 2.0
        assert _rel(layer(u, dt=torch.full((3, 50), c / 2, dtype=torch.float64)), expected) < 1e-10


# ---------------------------------------------------------------- state, streaming, gradients
@pytest.mark.parametrize("heads", [1, 2])
def test_state_continuation_and_step_with_dt(heads):
    layer = _layer(7, heads=heads)
    u = torch.randn(2, 4, 31, dtype=torch.float64)
    dt = _gaps(4, 2, 31)
    with torch.no_grad():
        y, x = layer(u, dt=dt, return_state=True)
        y1, x1 = layer(u[..., :13], dt=dt[:, :13], return_state=True)
        y2, x2 = layer(u[..., 13:], x1, dt=dt[:, 13:], return_state=True)
        assert _rel(torch.cat([y1, y2], -1), y) < 1e-12 and _rel(x2, x) < 1e-12
        state, ys = layer.initial_state(2), []
        for k in range(31):
            yk, state = layer.step(u[..., k], state, dt=dt[:, k])
            ys.append(yk)
        assert _rel(torch.stack(ys, -1), y) < 1e-12 and _rel(state, x) < 1e-12


def test_gradcheck_float64():
    """Gradients of the scan reach u, dt and the parameters Lambda, Delta, B (gradcheck, float64)."""
    layer = SSM(2, 4, heads=1, init="lin", bidirectional="ldnn").double()
    names = ["Lambda_re_raw", "Lambda_im", "log_dt", "B", "Lambda_backward_re_raw"]
    params = [getattr(layer, n).detach().clone().requires_grad_() for n in names]
    u = torch.randn(1, 2, 6, dtype=torch.float64, requires_grad=True)
    dt = (0.5 + torch.rand(1, 6, dtype=torch.float64)).requires_grad_()

    def f(u, dt, *p):
        return torch.func.functional_call(layer, dict(zip(names, p)), (u,), {"dt": dt})

    assert torch.autograd.gradcheck(f, (u, dt, *params))


def test_diagonal_scan_against_loop():
    """The shared scan: odd and even lengths, an initial state, exact zeros in the transitions."""
    g = torch.Generator().manual_seed(0)
    for T in (1, 2, 5, 8, 13):
        a = torch.randn(2, T, 3, dtype=torch.complex128, generator=g)
        a[:, T // 2, 0] = 0
        b = torch.randn(2, T, 3, dtype=torch.complex128, generator=g)
        h0 = torch.randn(2, 3, dtype=torch.complex128, generator=g)
        q, states = h0, []
        for t in range(T):
            q = a[:, t] * q + b[:, t]
            states.append(q)
        assert torch.allclose(diagonal_scan(a, b, h0), torch.stack(states, 1), rtol=1e-12, atol=1e-12)


def test_diagonal_scan_broadcasts_transitions_over_time_and_batch():
    """a of shape (1, 1, N) (one transition for every step and series) against the loop: the scan
    must expand it to b's shape rather than read its missing steps."""
    g = torch.Generator().manual_seed(1)
    for T in (2, 5, 8):
        a = 0.9 * torch.randn(1, 1, 3, dtype=torch.complex128, generator=g)
        b = torch.randn(2, T, 3, dtype=torch.complex128, generator=g)
        q, states = torch.zeros(2, 3, dtype=torch.complex128), []
        for t in range(T):
            q = a[:, 0] * q + b[:, t]
            states.append(q)
        assert torch.allclose(diagonal_scan(a, b), torch.stack(states, 1), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- errors
def test_clear_errors_for_bad_deltas():
    layer = _layer(0)
    u = torch.randn(2, 4, 10, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"dt must have shape \(2, 10\) or \(10,\)"):
        layer(u, dt=torch.ones(2, 9, dtype=torch.float64))
    with pytest.raises(ValueError, match="NaN or infinite"):
        layer(u, dt=torch.tensor([1.0] * 9 + [float("nan")]))
    with pytest.raises(ValueError, match="must be > 0"):
        layer(u, dt=torch.tensor([1.0] * 9 + [0.0]))
    with pytest.raises(ValueError, match="must be > 0"):
        layer.step(u[..., 0], layer.initial_state(2), dt=torch.tensor([1.0, -1.0]))
    with pytest.raises(TypeError, match="real time deltas"):
        layer(u, dt=torch.ones(10, dtype=torch.complex128))
    backbone = SSMBackbone(3, 8, n_layers=1, layer="lncde")
    with pytest.raises(ValueError, match="need layer='ssm'"):
        backbone.features(torch.randn(2, 3, 10), dt=torch.ones(10))


# ---------------------------------------------------------------- backbone
@pytest.mark.parametrize("heads,conj_sym,bidirectional", [(1, True, False), (4, False, False), (2, True, "essm")])
def test_backbone_constant_dt_equals_dt_scale_and_streaming(heads, conj_sym, bidirectional):
    torch.manual_seed(0)
    model = (
        SSMBackbone(
            3,
            8,
            n_layers=2,
            d_output=2,
            pooling="none",
            d_state=4,
            heads=heads,
            conj_sym=conj_sym,
            bidirectional=bidirectional,
        )
        .double()
        .eval()
    )
    u = torch.randn(2, 3, 25, dtype=torch.float64)
    mask = torch.ones(2, 25, dtype=torch.bool)
    mask[1, 20:] = False
    with torch.no_grad():
        model.dt_scale = 1.7
        expected = model(u, mask)
        model.dt_scale = 1.0
        assert _rel(model(u, mask, dt=torch.full((2, 25), 1.7, dtype=torch.float64)), expected) < 1e-10
        dt = _gaps(1, 2, 25)
        y = model(u, dt=dt)
        assert not torch.allclose(y, model(u, dt=_gaps(2, 2, 25)))  # the deltas matter
        if not bidirectional:
            y_state, state = model.forward_with_state(u[..., :10], dt=dt[:, :10])
            ys = [y_state]
            for k in range(10, 25):
                yk, state = model.step(u[..., k], state, dt=dt[:, k])
                ys.append(yk[..., None])
            assert _rel(torch.cat(ys, -1), y) < 1e-10


def test_recursive_head_splits_off_the_gap_channel():
    """RecursiveForecastHead(time_deltas=True): the last channel is the per-step dt, not an input; all-one gaps
    give the regular head, a gap of 0 (padding past a series' end) steps by one unit, and rollout agrees."""
    from ssmts.nn import RecursiveForecastHead

    torch.manual_seed(0)
    backbone = SSMBackbone(2, 8, n_layers=1, d_state=4).double()
    head = RecursiveForecastHead(backbone, 1, 1, 6, 3, 3, time_deltas=True).double().eval()
    x = torch.randn(2, 2, 8, dtype=torch.float64)
    gaps = _gaps(0, 2, 8)[:, None]
    with torch.no_grad():
        regular = head(torch.cat([x, torch.ones_like(gaps)], 1))
        head.time_deltas = False
        assert _rel(regular, head(x)) < 1e-12
        head.time_deltas = True
        padded = gaps.clone()
        padded[:, :, -1] = 0.0
        one = gaps.clone()
        one[:, :, -1] = 1.0
        assert _rel(head(torch.cat([x, padded], 1)), head(torch.cat([x, one], 1))) < 1e-12
        assert not torch.allclose(head(torch.cat([x, gaps], 1)), regular)
        # rollout: the context's gaps, then the future gaps with the future X, fed back medians
        context, future = torch.cat([x, gaps], 1)[..., :6], torch.cat([x, gaps], 1)[:, 1:, 6:]
        picked, _ = head.rollout(context, future, 3, lambda q: q[..., 1])
        teacher = torch.cat([x, gaps], 1).clone()
        teacher[:, 0, 6] = picked[:, 0, 0]
        teacher[:, 0, 7] = head(teacher[..., :8])[:, 1, 0, 1]
        assert _rel(picked[:, 1, 0], head(teacher)[:, 1, 0, 1]) < 1e-10
        assert _rel(picked[:, 2, 0], head(teacher)[:, 2, 0, 1]) < 1e-10
