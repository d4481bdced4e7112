"""The SSM layer's compute paths (irregular dt, LDNN backward system, chunked FFT, step, state
continuation) against an independent float64 numpy loop over time of the diagonal recurrence

    x_k = Abar_k x_{k-1} + gamma_k B u_k,   y_k = 2 Re(C x_k) + D u_k,

with ZOH per mode (Abar = exp(Lambda Delta_k), gamma = (exp(Lambda Delta_k) - 1) / Lambda), built
from the layer's raw parameters; plus its validation messages, dtype contracts and step cache."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from ssmts.nn import SSM


# ---------------------------------------------------------------- oracle
def _params(layer: SSM, backward: bool = False):
    """Lambda (S, P), Delta (S, P), B (S, P, Hh), C (S, Mh, P), D (M,) or None, as float64/complex128 numpy."""
    with torch.no_grad():
        prefix = "Lambda_backward" if backward else "Lambda"
        lam = layer._lambda(prefix).to(torch.complex128).numpy()
        delta = layer.Delta.double().numpy()
        B = layer._complex(layer.B).to(torch.complex128).numpy()
        C = layer._complex(layer.C).to(torch.complex128).numpy()
        D = None if layer.D is None else layer.D.double().numpy()
    return lam, delta, B, C, D


def _zoh(lam, delta):
    abar = np.exp(lam * delta)
    return abar, (abar - 1.0) / lam


def _loop(layer: SSM, u, dt=None, state=None, reverse=False, backward_lambda=False):
    """States (b, S, P, L) of the recurrence over u (b, H, L) float64, dt (b, L) or None (= 1), from `state`.
    reverse: run from k = L-1 down to 0 (the step into sample k uses dt[k])."""
    lam, delta, B, _, _ = _params(layer)
    lam_a = _params(layer, backward=True)[0] if backward_lambda else lam
    b, H, L = u.shape
    S, P = lam.shape
    Hh = H // S
    dt = np.ones((b, L)) if dt is None else dt
    x = np.zeros((b, S, P), complex) if state is None else np.array(state, complex)
    xs = np.zeros((b, S, P, L), complex)
    for k in reversed(range(L)) if reverse else range(L):
        for i in range(b):
            for s in range(S):
                abar, _ = _zoh(lam_a[s], delta[s] * dt[i, k])
                _, gamma = _zoh(lam[s], delta[s] * dt[i, k])
                x[i, s] = abar * x[i, s] + gamma * (B[s] @ u[i, s * Hh : (s + 1) * Hh, k])
                xs[i, s, :, k] = x[i, s]
    return xs


def _readout(layer: SSM, xs, u):
    """y (b, M, L) = factor Re(C x) per head + diagonal D u, then the mixer W y + bias when heads > 1."""
    _, _, _, C, D = _params(layer)
    factor = 2.0 if layer.conj_sym else 1.0
    y = np.concatenate([factor * np.einsum("mp,bpl->bml", C[s], xs[:, s]).real for s in range(C.shape[0])], axis=1)
    y = y if D is None else y + D[None, :, None] * u
    if layer.mixer is not None:
        W, bias = layer.mixer.weight.detach().double().numpy(), layer.mixer.bias.detach().double().numpy()
        y = np.einsum("nm,bml->bnl", W, y) + bias[None, :, None]
    return y


def _layer(seed: int, **kwargs) -> SSM:
    kwargs.setdefault("D", "diagonal")
    layer = SSM(4, 4, generator=torch.Generator().manual_seed(seed), **kwargs).double()
    layer.log_dt.data.uniform_(-1.5, -0.5, generator=torch.Generator().manual_seed(seed + 1))
    return layer


def _inputs(seed: int, b: int = 2, H: int = 4, L: int = 7):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((b, H, L)), rng.uniform(0.3, 2.0, (b, L))


def _close(a, b, tol=1e-10):
    a, b = np.asarray(a), np.asarray(b)
    assert np.abs(a - b).max() <= tol * max(1.0, np.abs(b).max())


# ---------------------------------------------------------------- irregular time stamps
@pytest.mark.parametrize("mode", ["fft", "recurrence"])
def test_irregular_ldnn_backward_has_its_own_lambda_and_shares_bbar(mode):
    """LDNN with dt: x = (forward loop + backward loop with Lambda_backward in Abar, forward gamma) / 2;
    the backward step into sample k spans dt_{k+1}, sample L-1 takes dt_0. Oracle: float64 loops."""
    layer = _layer(0, heads=2, bidirectional="ldnn")
    with torch.no_grad():  # make the backward system differ from the forward one
        layer.Lambda_backward_re_raw.add_(0.7)
        layer.Lambda_backward_im.mul_(1.9).add_(0.3)
    u, dt = _inputs(1)
    back_dt = np.concatenate([dt[:, 1:], dt[:, :1]], axis=1)
    xs = (_loop(layer, u, dt) + _loop(layer, u, back_dt, reverse=True, backward_lambda=True)) / 2
    y = layer(torch.from_numpy(u), mode=mode, dt=torch.from_numpy(dt))
    _close(y.detach().numpy(), _readout(layer, xs, u))


@pytest.mark.parametrize("mode", ["fft", "recurrence"])
def test_irregular_continues_from_given_state(mode):
    """forward(u, state, dt=...) starts the per-step recurrence from x_{-1} = state and returns x_{L-1}.
    Oracle: float64 loop from the same state."""
    layer = _layer(2, heads=2)
    u, dt = _inputs(3)
    state = torch.randn(2, 2, layer.P, dtype=torch.complex128, generator=torch.Generator().manual_seed(4))
    xs = _loop(layer, u, dt, state=state.numpy())
    y, x = layer(torch.from_numpy(u), state, mode=mode, dt=torch.from_numpy(dt), return_state=True)
    _close(y.detach().numpy(), _readout(layer, xs, u))
    _close(x.detach().numpy(), xs[..., -1])


def test_irregular_float64_dt_keeps_a_float32_layer_in_float32():
    """dt is converted to the layer's dtype: float64 dt on a float32 layer gives the float32 result."""
    layer = SSM(4, 4, heads=2, generator=torch.Generator().manual_seed(5))
    u = torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(6))
    dt = torch.rand(2, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(7)) + 0.5
    y = layer(u, dt=dt)
    assert y.dtype == torch.float32
    assert torch.equal(y, layer(u, dt=dt.float()))
    y1, x1 = layer.step(u[..., 0], layer.initial_state(2), dt=dt[:, 0])
    assert y1.dtype == torch.float32 and x1.dtype == torch.complex64


# ---------------------------------------------------------------- step with dt
def test_step_accepts_a_scalar_or_per_sample_dt():
    """step(u_t, state, dt) with dt a scalar (every sample) or (batch,): one step of the float64 loop."""
    layer = _layer(8, heads=2)
    u, _ = _inputs(9, L=1)
    state = torch.randn(2, 2, layer.P, dtype=torch.complex128, generator=torch.Generator().manual_seed(10))
    for dt in (0.5, torch.tensor(0.625, dtype=torch.float64), torch.tensor([0.6, 1.7], dtype=torch.float64)):
        dt_np = np.broadcast_to(np.asarray(dt, float), (2,))[:, None]
        xs = _loop(layer, u, dt_np, state=state.numpy())
        y, x = layer.step(torch.from_numpy(u[..., 0]), state, dt=dt)
        _close(y.detach().numpy(), _readout(layer, xs, u)[..., 0])
        _close(x.detach().numpy(), xs[..., 0])


def test_step_dt_of_wrong_shape_is_a_clear_error():
    layer = _layer(11)
    u_t = torch.randn(2, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match=re.escape("dt must have shape (2,) or a scalar, got (3,)")):
        layer.step(u_t, layer.initial_state(2), dt=torch.ones(3))


def test_forward_dt_errors_name_the_problem():
    layer = _layer(12)
    u = torch.randn(2, 4, 5, dtype=torch.float64)
    with pytest.raises(ValueError, match=re.escape("dt must have shape (2, 5) or (5,), got ()")):
        layer(u, dt=torch.tensor(1.0))
    with pytest.raises(ValueError, match="^dt has NaN or infinite time deltas; every step needs a finite delta > 0$"):
        layer(u, dt=torch.tensor([1.0, float("nan"), 1.0, 1.0, 1.0]))


# ---------------------------------------------------------------- regular paths with a state
@pytest.mark.parametrize("convolution", ["kernel", "state"])
def test_chunked_fft_continues_from_given_state(convolution):
    """chunk_length < L with a state x_{-1}: same as the float64 loop from that state (dt = 1)."""
    layer = _layer(13, heads=2, convolution=convolution, chunk_length=3)
    u, _ = _inputs(14, L=10)
    state = torch.randn(2, 2, layer.P, dtype=torch.complex128, generator=torch.Generator().manual_seed(15))
    xs = _loop(layer, u, state=state.numpy())
    y, x = layer(torch.from_numpy(u), state, return_state=True)
    _close(y.detach().numpy(), _readout(layer, xs, u))
    _close(x.detach().numpy(), xs[..., -1])


@pytest.mark.parametrize("mode", ["fft", "recurrence"])
def test_length_one_sequence(mode):
    """L = 1: y_0 = 2 Re(C Bbar u_0) + D u_0 (float64 loop)."""
    layer = _layer(16, heads=2)
    u, _ = _inputs(17, L=1)
    y = layer(torch.from_numpy(u), mode=mode)
    _close(y.detach().numpy(), _readout(layer, _loop(layer, u), u))


def test_state_of_other_precision_is_cast_to_the_layers():
    """A complex128 state on a float32 layer: states, outputs and the returned state stay in the layer's
    precision in every mode (recurrence, FFT, step)."""
    layer = SSM(4, 4, heads=2, generator=torch.Generator().manual_seed(18))
    u = torch.randn(2, 4, 5, generator=torch.Generator().manual_seed(19))
    state = torch.randn(2, 2, layer.P, dtype=torch.complex128, generator=torch.Generator().manual_seed(20))
    y_rec, x_rec = layer(u, state, mode="recurrence", return_state=True)
    assert y_rec.dtype == torch.float32 and x_rec.dtype == torch.complex64
    y_t, x_t = layer.step(u[..., 0], state)
    assert y_t.dtype == torch.float32 and x_t.dtype == torch.complex64
    torch.testing.assert_close(y_t, y_rec[..., 0], rtol=1e-5, atol=1e-5)


def test_fft_accepts_a_state_of_other_precision():
    """The FFT mode casts the state like the recurrence does (it used to fail in a matmul)."""
    layer = SSM(4, 4, heads=2, generator=torch.Generator().manual_seed(18))
    u = torch.randn(2, 4, 5, generator=torch.Generator().manual_seed(19))
    state = torch.randn(2, 2, layer.P, dtype=torch.complex128, generator=torch.Generator().manual_seed(20))
    y, x = layer(u, state, return_state=True)
    y_rec, x_rec = layer(u, state, mode="recurrence", return_state=True)
    assert y.dtype == torch.float32 and x.dtype == torch.complex64
    torch.testing.assert_close(y, y_rec, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(x, x_rec, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- step cache
def test_step_reuses_discretization_without_autograd_and_recomputes_after_changes(monkeypatch):
    """Documented in `step`: without gradient recording Abar, Bbar, C are computed once and reused
    while the parameters stay unchanged; with autograd on they are recomputed every step."""
    layer = _layer(21, heads=2)
    calls = []
    original = layer.discrete
    monkeypatch.setattr(layer, "discrete", lambda *a, **k: calls.append(1) or original(*a, **k))
    u_t = torch.randn(2, 4, dtype=torch.float64)
    state = layer.initial_state(2)
    with torch.no_grad():
        y1, _ = layer.step(u_t, state)
        y2, _ = layer.step(u_t, state)
        assert len(calls) == 1 and torch.equal(y1, y2)
        layer.log_dt.add_(0.1)  # an in-place change invalidates the cache
        y3, _ = layer.step(u_t, state)
        assert len(calls) == 2 and not torch.allclose(y1, y3)
    layer.step(u_t, state)
    layer.step(u_t, state)
    assert len(calls) == 4


# ---------------------------------------------------------------- validation messages
def test_error_messages():
    layer = _layer(22)
    with pytest.raises(ValueError, match="^SSM input has length 0$"):
        layer(torch.zeros(1, 4, 0, dtype=torch.float64))
    bi = _layer(23, bidirectional=True)
    u = torch.zeros(1, 4, 3, dtype=torch.float64)
    msg = "a bidirectional SSM has no causal state: state/return_state need bidirectional=False"
    with pytest.raises(ValueError, match=f"^{re.escape(msg)}$"):
        bi(u, return_state=True)
    with pytest.raises(ValueError, match="^a bidirectional SSM cannot run step by step$"):
        bi.initial_state(1)
    with pytest.raises(ValueError, match="^a bidirectional SSM cannot run step by step$"):
        bi.step(u[..., 0], layer.initial_state(1))


def test_repr_mentions_fixed_transition_only_when_set():
    assert repr(SSM(2, 4)).endswith("convolution='auto')")
    assert repr(SSM(2, 4, fixed_transition=True)).endswith("convolution='auto', fixed_transition=True)")


def test_irregular_under_autocast_runs_the_ssm_part_in_the_layers_precision():
    """Under CPU bfloat16 autocast, forward(u, state, dt=...) computes the states in float32 from the given
    state: the returned state equals the float32 run without autocast (and the float64 loop)."""
    layer = SSM(4, 4, D="none", generator=torch.Generator().manual_seed(24))
    u = torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(25)).bfloat16()
    dt = torch.rand(2, 6, generator=torch.Generator().manual_seed(26)) + 0.5
    state = torch.randn(2, 1, layer.P, dtype=torch.complex64, generator=torch.Generator().manual_seed(27))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, x = layer(u, state, dt=dt, mode="recurrence", return_state=True)
    y_ref, x_ref = layer(u.float(), state, dt=dt, mode="recurrence", return_state=True)
    torch.testing.assert_close(x, x_ref, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(y.float(), y_ref, rtol=1e-6, atol=1e-6)
    xs = _loop(layer, u.double().numpy(), dt.double().numpy(), state=state.numpy())
    _close(x.detach().numpy(), xs[..., -1], tol=1e-5)


@pytest.mark.parametrize("convolution", ["kernel", "state"])
def test_fft_under_autocast_continues_from_state_in_the_layers_precision(convolution):
    """Under CPU bfloat16 autocast the FFT mode computes kernels and states in float32 from the given state:
    y and the returned state equal the float32 run without autocast (no mixer, no D)."""
    layer = SSM(4, 4, D="none", convolution=convolution, generator=torch.Generator().manual_seed(28))
    u = torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(29)).bfloat16()
    state = torch.randn(2, 1, layer.P, dtype=torch.complex64, generator=torch.Generator().manual_seed(30))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, x = layer(u, state, return_state=True)
    y_ref, x_ref = layer(u.float(), state, return_state=True)
    assert x is not None and y.dtype == torch.float32
    torch.testing.assert_close(x, x_ref, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(y, y_ref, rtol=1e-6, atol=1e-6)


def test_input_dtype_errors():
    """Integer input and a float input of the wrong precision are refused outside autocast, with a hint."""
    layer = SSM(4, 4)
    msg = (
        "SSM input must be floating point, got torch.int64; cast it with u.to(torch.float32) "
        "(integer token ids go through SSMBackbone(vocab_size=...))"
    )
    with pytest.raises(TypeError, match=f"^{re.escape(msg)}$"):
        layer(torch.zeros(1, 4, 3, dtype=torch.int64))
    msg = (
        "SSM input has dtype torch.float64 but the layer's parameters are torch.float32: "
        "cast the input with u.to(torch.float32) or the layer with .to(torch.float64)"
    )
    with pytest.raises(TypeError, match=f"^{re.escape(msg)}$"):
        layer(torch.zeros(1, 4, 3, dtype=torch.float64))


def test_step_under_autocast_takes_bfloat16_input():
    """Under CPU bfloat16 autocast `step` accepts bfloat16 u_t (cast to the layer's float32): one full-MIMO
    head gives exactly the float32 step of the same values."""
    layer = SSM(4, 4, generator=torch.Generator().manual_seed(31))
    u_t = torch.randn(2, 4, generator=torch.Generator().manual_seed(32)).bfloat16()
    state = torch.randn(2, 1, layer.P, dtype=torch.complex64, generator=torch.Generator().manual_seed(33))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, x = layer.step(u_t, state)
    y_ref, x_ref = layer.step(u_t.float(), state)
    torch.testing.assert_close(x, x_ref, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(y, y_ref, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- kernels module and dtype contracts
@pytest.mark.parametrize("n_extra", [0, -1])  # n = 2L (what the layer uses) and the odd n = 2L - 1
@pytest.mark.parametrize("S, Mh, Hh", [(3, 1, 1), (2, 2, 3)])  # stacked SISO and MIMO heads
def test_spectral_convolution_is_the_causal_convolution_for_any_n_without_wrap(n_extra, S, Mh, Hh):
    """spectral_convolution(u, rfft(K, n), n) = the causal convolution sum_l K[l] u[k - l] per head, for every
    FFT size n that leaves no circular wrap-around (kernels of at most n - L + 1 taps), odd n included.
    Oracle: a float64 numpy loop over lags; 1e-10 is float64 FFT rounding with margin."""
    from ssmts.nn.kernels import spectral_convolution

    rng = np.random.default_rng(40)
    b, L = 2, 6
    n = 2 * L + n_extra
    taps = n - L + 1
    K = rng.standard_normal((S, Mh, Hh, taps))
    u = rng.standard_normal((b, S * Hh, L))
    y = spectral_convolution(torch.from_numpy(u), torch.fft.rfft(torch.from_numpy(K), n=n), n)
    expected = np.zeros((b, S * Mh, L))
    for k in range(L):
        for lag in range(min(k + 1, taps)):
            for s in range(S):
                expected[:, s * Mh : (s + 1) * Mh, k] += np.einsum(
                    "mh,bh->bm", K[s, :, :, lag], u[:, s * Hh : (s + 1) * Hh, k - lag]
                )
    assert y.shape == (b, S * Mh, L)
    _close(y.numpy(), expected)


@pytest.mark.parametrize("bidirectional", [False, "essm", "ldnn"])
@pytest.mark.parametrize("convolution", ["kernel", "state"])
@pytest.mark.parametrize("D", ["identity", "diagonal"])
def test_a_float32_layer_stays_float32_under_a_float64_default_dtype(
    float64_default_dtype, bidirectional, convolution, D
):
    """The layer's dtype, not torch's global default dtype, sets the precision of everything the FFT mode
    builds (the zero gap of the two-sided kernel, the identity D folded into tap 0): a float32 layer gives
    float32 outputs equal to the same run under the float32 default. 1e-6: float32 rounding (both runs are
    float32; only the order of FFT sums could differ)."""
    layer = SSM(
        4, 4, D=D, bidirectional=bidirectional, convolution=convolution, generator=torch.Generator().manual_seed(41)
    )
    layer = layer.float()
    u = torch.randn(2, 4, 9, generator=torch.Generator().manual_seed(42)).float()
    y = layer(u)
    torch.set_default_dtype(torch.float32)
    y_ref = layer(u)
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, y_ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("autocast_dtype", [torch.bfloat16, torch.float16])
def test_recurrence_under_autocast_runs_the_ssm_part_in_the_layers_precision(autocast_dtype):
    """Under CPU autocast the recurrence mode, like the FFT mode, runs the states in the layer's float32 from
    the given complex64 state (bfloat16 complex numbers do not exist; float16 ones would round the state):
    y and x_{L-1} equal the float32 run without autocast (no D, no mixer), 1e-6 being float32 rounding."""
    layer = SSM(4, 4, D="none", generator=torch.Generator().manual_seed(43))
    u = torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(44)).to(autocast_dtype)
    state = torch.randn(2, 1, layer.P, dtype=torch.complex64, generator=torch.Generator().manual_seed(45))
    with torch.autocast("cpu", dtype=autocast_dtype):
        y, x = layer(u, state, mode="recurrence", return_state=True)
    y_ref, x_ref = layer(u.float(), state, mode="recurrence", return_state=True)
    assert y.dtype == torch.float32 and x.dtype == torch.complex64
    torch.testing.assert_close(x, x_ref, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(y, y_ref, rtol=1e-6, atol=1e-6)


def _random_system(seed: int, S: int = 2, P: int = 3, Hh: int = 2, Mh: int = 2):
    """log Abar (S, P) with Re < 0, Bbar (S, P, Hh), C (S, Mh, P), complex128."""
    rng = np.random.default_rng(seed)
    log_abar = -rng.uniform(0.05, 0.6, (S, P)) + 1j * rng.uniform(-1.0, 1.0, (S, P))
    Bbar = rng.standard_normal((S, P, Hh)) + 1j * rng.standard_normal((S, P, Hh))
    C = rng.standard_normal((S, Mh, P)) + 1j * rng.standard_normal((S, Mh, P))
    return log_abar, Bbar, C


def test_state_spectrum_is_the_fft_of_the_causal_or_two_sided_state_kernel():
    """state_spectrum(log Abar, L) = FFT_2L of [Abar^0 .. Abar^(L-1), 0 ...]; with a backward system the
    anti-causal taps Abar_back^l sit at index 2L - l and both systems add at lag 0 (the eSSM sum), halved
    only when average=True (LDNN). Oracle: the kernel written out in numpy, float64 (1e-10: FFT rounding)."""
    from ssmts.nn.kernels import state_spectrum

    log_abar, _, _ = _random_system(46)
    log_back, _, _ = _random_system(47)
    L = 5
    lags = np.arange(L)
    causal = np.zeros(log_abar.shape + (2 * L,), complex)
    causal[..., :L] = np.exp(log_abar[..., None] * lags)
    two_sided = causal.copy()
    two_sided[..., 0] += 1.0
    two_sided[..., 2 * L - lags[1:]] = np.exp(log_back[..., None] * lags[1:])
    spectrum = state_spectrum(torch.from_numpy(log_abar), L)
    _close(spectrum.numpy(), np.fft.fft(causal))
    summed = state_spectrum(torch.from_numpy(log_abar), L, torch.from_numpy(log_back))
    _close(summed.numpy(), np.fft.fft(two_sided))
    averaged = state_spectrum(torch.from_numpy(log_abar), L, torch.from_numpy(log_back), average=True)
    _close(averaged.numpy(), np.fft.fft(two_sided) / 2)


def test_state_convolution_gives_the_readout_and_final_state_of_a_loop():
    """state_convolution: y_k = factor Re(C x_k) with x_k = Abar x_{k-1} + Bbar u_k from x_{-1} = state (the free
    response through `free` = Abar^(k+1)); x_{L-1} only when want_state=True (else None); without a state the
    zero-state output. Oracle: a float64 numpy loop over time (1e-10: FFT rounding with margin)."""
    from ssmts.nn.kernels import powers, state_convolution, state_spectrum

    log_abar, Bbar, C = _random_system(48)
    S, P, Hh = Bbar.shape
    rng = np.random.default_rng(49)
    b, L = 3, 6
    u = rng.standard_normal((b, S * Hh, L))
    state = rng.standard_normal((b, S, P)) + 1j * rng.standard_normal((b, S, P))
    abar = np.exp(log_abar)

    def loop(x):
        ys = []
        for k in range(L):
            x = abar * x + np.einsum("sph,bsh->bsp", Bbar, u[:, :, k].reshape(b, S, Hh))
            ys.append(2.0 * np.einsum("smp,bsp->bsm", C, x).real.reshape(b, -1))
        return np.stack(ys, -1), x

    t = torch.from_numpy
    spectrum = state_spectrum(t(log_abar), L)
    free = powers(t(log_abar), L, start=1)
    y, x = state_convolution(t(u), t(Bbar), t(C), 2.0, spectrum, t(state), free, want_state=True)
    y_ref, x_ref = loop(state)
    _close(y.numpy(), y_ref)
    _close(x.numpy(), x_ref)
    y0, none = state_convolution(t(u), t(Bbar), t(C), 2.0, spectrum)
    assert none is None
    _close(y0.numpy(), loop(np.zeros_like(state))[0])


@pytest.mark.parametrize("shape", [(4,), (2, 3, 2)])  # one system's modes; a stack of heads over a batch
def test_powers_take_any_leading_shape(shape):
    """powers(log Abar, length, start) = Abar^(start + l) for l < length, shape (..., length) for log Abar of any
    shape (...), built from chunked exponentials. Oracle: numpy exp((start + l) log Abar), float64 (1e-12: the
    product of two exponentials against one)."""
    from ssmts.nn.kernels import powers

    rng = np.random.default_rng(50)
    log_abar = -rng.uniform(0.01, 0.3, shape) + 1j * rng.uniform(-2.0, 2.0, shape)
    for length, start in [(1, 0), (7, 0), (10, 1)]:
        got = powers(torch.from_numpy(log_abar), length, start=start)
        expected = np.exp(log_abar[..., None] * (start + np.arange(length)))
        assert got.shape == shape + (length,)
        _close(got.numpy(), expected, tol=1e-12)


# ---------------------------------------------------------------- constructor defaults
def test_default_delta_is_log_uniform_on_1e3_1e1():
    """Delta = exp(log_dt) starts log-uniform on [dt_min, dt_max] = [1e-3, 1e-1] by default, one per state (the
    S4/S5 range). Oracle: the range itself, and a Kolmogorov-Smirnov test of the position of log Delta in it
    against the uniform law (256 states of one fixed seed; p > 1e-3)."""
    from scipy.stats import kstest

    layer = SSM(8, heads=8, generator=torch.Generator().manual_seed(53))
    deltas = layer.Delta.detach().double().numpy().ravel()
    assert deltas.size == 8 * 32
    assert deltas.min() >= 1e-3 * (1 - 1e-6) and deltas.max() <= 1e-1 * (1 + 1e-6)
    position = (np.log(deltas) - np.log(1e-3)) / (np.log(1e-1) - np.log(1e-3))
    assert kstest(position, "uniform").pvalue > 1e-3


def test_gbt_without_alpha_is_the_bilinear_transform():
    """discretization="gbt" with the default alpha is the bilinear (Tustin) transform, per mode:
    Abar = (1 + Lambda Delta / 2) / (1 - Lambda Delta / 2), Bbar = Delta / (1 - Lambda Delta / 2) B.
    Oracle: that closed form in numpy, float64 (1e-12: a few roundings)."""
    layer = SSM(2, 4, discretization="gbt", generator=torch.Generator().manual_seed(54)).double()
    lam, delta, B, _, _ = _params(layer)
    half = lam * delta / 2
    Abar, Bbar, _, _ = layer.discrete()
    _close(Abar.detach().numpy(), (1 + half) / (1 - half), tol=1e-12)
    _close(Bbar.detach().numpy(), (delta / (1 - half))[..., None] * B, tol=1e-12)


@pytest.mark.parametrize("D", ["diagonal", "full"])
def test_the_generator_alone_fixes_the_initial_parameters(D):
    """Without a mixer (heads=1) every initial parameter, D included, is drawn from `generator`: layers built from
    equal generators are equal whatever state the global random number generator is in."""
    layers = []
    for global_seed in (55, 56):
        with torch.random.fork_rng():
            torch.manual_seed(global_seed)
            layers.append(
                SSM(4, 4, d_output=2 if D == "full" else None, D=D, generator=torch.Generator().manual_seed(57))
            )
    first, second = (layer.state_dict() for layer in layers)
    assert first.keys() == second.keys() and "D" in first
    assert all(torch.equal(first[key], second[key]) for key in first)


def test_bidirectional_true_is_the_essm_layer():
    """bidirectional=True is another name for "essm": the layer keeps and shows "essm" and gives the "essm" output."""
    alias = SSM(4, 4, bidirectional=True, generator=torch.Generator().manual_seed(58))
    essm = SSM(4, 4, bidirectional="essm", generator=torch.Generator().manual_seed(58))
    assert alias.bidirectional == "essm" and "bidirectional='essm'" in repr(alias)
    u = torch.randn(2, 4, 7, generator=torch.Generator().manual_seed(59))
    torch.testing.assert_close(alias(u), essm(u), rtol=0, atol=0)
