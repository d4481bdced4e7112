"""The fast compute paths of the SSM layer (chunked-GEMM kernels, two-sided bidirectional
convolution, D folded into the kernel, kernel-first state hand-over, chunked forward, cached
`step`) against a naive float64 numpy loop of the recurrence, and their gradients against
finite differences (torch.autograd.gradcheck)."""

from __future__ import annotations

import itertools
import math
import os

import numpy as np
import pytest
import torch

from ssmts.nn import SSM, SSMBackbone
from ssmts.nn.kernels import powers, vandermonde


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _np(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    return t.to(torch.complex128).numpy() if t.is_complex() else t.double().numpy()


def _loop_oracle(layer: SSM, u: np.ndarray, state: np.ndarray | None = None):
    """Naive loop: x_k = Abar x_{k-1} + Bbar u_k per head, y_k = factor Re(C x_k) (+ the reversed pass,
    averaged for LDNN) + D u_k, then the mixer. From layer.discrete() only. -> (y (b, M, L), x_{L-1})."""
    Abar, Bbar, _, C = (_np(t) for t in layer.discrete())
    S, Hh, Mh = layer.heads, layer.d_head_in, layer.d_head_out
    factor = 2.0 if layer.conj_sym else 1.0
    b, H, L = u.shape

    def run(A, seq, x0):
        ys = np.zeros((b, layer.d_output, L))
        x = np.zeros((b, S, layer.P), dtype=complex) if x0 is None else x0.copy()
        for k in range(L):
            for s in range(S):
                x[:, s] = A[s] * x[:, s] + seq[:, s * Hh : (s + 1) * Hh, k] @ Bbar[s].T
                ys[:, s * Mh : (s + 1) * Mh, k] = factor * np.real(x[:, s] @ C[s].T)
        return ys, x

    y, x_last = run(Abar, u, state)
    if layer.bidirectional:
        A_back = _np(layer.discrete(backward=True)[0]) if layer.bidirectional == "ldnn" else Abar
        y_back = run(A_back, u[..., ::-1], None)[0][..., ::-1]
        y = (y + y_back) / 2 if layer.bidirectional == "ldnn" else y + y_back
    if layer.D_mode == "identity":
        y = y + u
    elif layer.D_mode == "diagonal":
        y = y + _np(layer.D)[None, :, None] * u
    elif layer.D_mode == "full":
        y = y + np.einsum("mh,bhl->bml", _np(layer.D), u)
    if layer.mixer is not None:
        y = np.einsum("nm,bml->bnl", _np(layer.mixer.weight), y) + _np(layer.mixer.bias)[None, :, None]
    return y, x_last


def _rel(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.abs(a - b).max() / np.abs(b).max())


def _layer(heads, bidirectional, conj_sym, discretization, convolution, D="diagonal", H=4, seed=0) -> SSM:
    method, alpha = discretization if isinstance(discretization, tuple) else (discretization, 0.5)
    N = 4 if conj_sym else 3
    layer = SSM(
        H,
        N,
        heads=heads,
        bidirectional=bidirectional,
        conj_sym=conj_sym,
        discretization=method,
        alpha=alpha,
        convolution=convolution,
        D=D,
        generator=_gen(seed),
    ).double()
    with torch.no_grad():  # Delta up to 0.5: kernels that neither die out nor stay flat over L
        layer.log_dt.uniform_(math.log(1e-2), math.log(0.5), generator=_gen(seed + 1))
        if bidirectional == "ldnn":
            layer.Lambda_backward_im.add_(0.3)
            layer.Lambda_backward_re_raw.add_(0.2)
    layer.dt_scale = 1.7
    return layer


DISCRETIZATIONS = ["zoh", "bilinear", ("gbt", 0.0), ("gbt", 0.3), ("gbt", 1.0)]
GRID = list(itertools.product([1, 2, 4], [False, "essm", "ldnn"], [True, False], DISCRETIZATIONS, ["kernel", "state"]))


@pytest.mark.parametrize("heads,bidirectional,conj_sym,discretization,convolution", GRID)
def test_every_fft_path_equals_the_naive_loop(heads, bidirectional, conj_sym, discretization, convolution):
    """Oracle: the numpy loop (float64, rel < 1e-10). heads 1, 2 and H = 4 (stacked SISO), both
    directions modes, every discretization, dt_scale = 1.7; one pass, chunked (7 steps), and, causal,
    split in two with the state handed over, chunked with the state returned, and `step`."""
    layer = _layer(heads, bidirectional, conj_sym, discretization, convolution)
    u = torch.randn(2, 4, 23, generator=_gen(2), dtype=torch.float64)
    ref, x_ref = _loop_oracle(layer, u.numpy())
    outputs = {"fft": layer(u)}
    layer.chunk_length = 7
    outputs["chunked"] = layer(u)
    if not bidirectional:
        y, x = layer(u, return_state=True)
        outputs["chunked+state"] = y
        assert _rel(_np(x), x_ref) < 1e-10
        layer.chunk_length = None
        y1, x1 = layer(u[..., :9], return_state=True)
        outputs["handed over"] = torch.cat([y1, layer(u[..., 9:], state=x1)], dim=-1)
        state, steps = layer.initial_state(2), []
        with torch.no_grad():
            for k in range(23):
                y_k, state = layer.step(u[..., k], state)
                steps.append(y_k)
        outputs["step"] = torch.stack(steps, dim=-1)
        assert _rel(_np(state), x_ref) < 1e-10
    for name, y in outputs.items():
        assert _rel(_np(y), ref) < 1e-10, name


@pytest.mark.parametrize("D", ["none", "identity", "full"])
@pytest.mark.parametrize("bidirectional", [False, "essm", "ldnn"])
def test_feedthrough_variants_with_kernel_first(D, bidirectional):
    """D folded into tap 0 (identity, diagonal) or applied after (full, none): the naive loop."""
    layer = _layer(4, bidirectional, True, "zoh", "kernel", D=D)
    u = torch.randn(2, 4, 19, generator=_gen(3), dtype=torch.float64)
    assert _rel(_np(layer(u)), _loop_oracle(layer, u.numpy())[0]) < 1e-10


@pytest.mark.parametrize("length", [1, 2, 5, 16, 17, 100])
def test_chunked_powers_and_vandermonde_equal_direct_exponentials(length):
    """Oracle: exp(l log Abar) and the sum over modes formed directly (float64)."""
    g = _gen(length)
    log_abar = torch.complex(
        -torch.rand(3, 5, generator=g, dtype=torch.float64) * 0.3, torch.randn(3, 5, generator=g, dtype=torch.float64)
    )
    steps = torch.arange(length, dtype=torch.float64)
    direct = torch.exp(log_abar[..., None] * steps)
    torch.testing.assert_close(powers(log_abar, length), direct, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(
        powers(log_abar, length, start=3), direct * torch.exp(3 * log_abar)[..., None], rtol=1e-12, atol=1e-14
    )
    for outputs in (1, 4, 40):  # few outputs: chunks of the lag; many: the powers times W (both orders)
        W = torch.randn(3, 5, outputs, generator=g, dtype=torch.complex128)
        expected = torch.einsum("spr,spl->srl", W, direct).real
        torch.testing.assert_close(vandermonde(W, log_abar, length), expected, rtol=1e-12, atol=1e-13)


GRAD_CASES = [
    dict(heads=2, convolution="kernel", bidirectional=False),  # stacked SISO, D folded into the kernel
    dict(heads=2, convolution="kernel", bidirectional="essm"),  # two-sided kernel
    dict(heads=1, convolution="kernel", bidirectional="ldnn", discretization="bilinear"),  # 2x2 kernels per head
    dict(heads=1, convolution="kernel", D="full", real_bc=True),
    dict(heads=1, convolution="state", bidirectional="essm"),  # two-sided state convolution
    dict(heads=1, convolution="state", bidirectional="ldnn", conj_sym=False, d_state=3),
    dict(
        heads=2, convolution="kernel", chunk_length=4, discretization="gbt", alpha=0.3
    ),  # chunks: free response, final state
    dict(heads=1, convolution="state", chunk_length=4),
    dict(heads=2, convolution="kernel", chunk_length=4, bidirectional="ldnn"),
]


@pytest.mark.parametrize("cfg", GRAD_CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_gradcheck_fast_paths(cfg):
    """Oracle: torch.autograd.gradcheck (finite differences, float64) on H=2, N=4, L=9, dt_scale=1.5."""
    cfg = dict(cfg)
    chunk = cfg.pop("chunk_length", None)
    layer = SSM(2, cfg.pop("d_state", 4), generator=_gen(0), chunk_length=chunk, **cfg).double()
    layer.dt_scale = 1.5
    names = [n for n, _ in layer.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for _, p in layer.named_parameters()]
    u = torch.randn(2, 2, 9, dtype=torch.float64, generator=_gen(1), requires_grad=True)

    def f(u, *ps):
        return torch.func.functional_call(layer, dict(zip(names, ps)), (u,))

    assert torch.autograd.gradcheck(f, (u, *params), eps=1e-6, atol=1e-6, rtol=1e-5)


def test_gradcheck_through_state_handover_and_steps():
    """Gradients through a kernel-first pass that returns a state, a pass from it, and two steps."""
    layer = SSM(2, 4, heads=2, convolution="kernel", generator=_gen(0)).double()
    stepper = _Stepper(layer)
    names = [n for n, _ in layer.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for _, p in layer.named_parameters()]
    u = torch.randn(1, 2, 8, dtype=torch.float64, generator=_gen(1), requires_grad=True)

    def f(u, *ps):
        p = dict(zip(names, ps))
        y1, x = torch.func.functional_call(layer, p, (u[..., :4],), dict(return_state=True))
        y2, x = torch.func.functional_call(layer, p, (u[..., 4:6],), dict(state=x, return_state=True))
        outs = [y1, y2]
        for k in (6, 7):
            y, x = torch.func.functional_call(stepper, {f"layer.{n}": v for n, v in p.items()}, (u[..., k], x))
            outs.append(y[..., None])
        return torch.cat(outs, -1)

    assert torch.autograd.gradcheck(f, (u, *params), eps=1e-6, atol=1e-6, rtol=1e-5)


class _Stepper(torch.nn.Module):
    def __init__(self, layer: SSM):
        super().__init__()
        self.layer = layer

    def forward(self, u_t, x):
        return self.layer.step(u_t, x)


def test_chunked_forward_equals_one_pass_at_moderate_length():
    """L = 3000 in chunks of 256 (the last one shorter), float32 and float64, kernel- and state-first."""
    for convolution, bidirectional in (("kernel", False), ("state", False), ("kernel", "essm"), ("state", "ldnn")):
        layer = SSM(
            8,
            16,
            heads=4 if convolution == "kernel" else 1,
            convolution=convolution,
            bidirectional=bidirectional,
            generator=_gen(0),
        )
        u = torch.randn(2, 8, 3000, generator=_gen(1))
        for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 1e-4)):
            layer = layer.to(dtype)
            x = u.to(dtype)
            layer.chunk_length = None
            full = layer(x)
            layer.chunk_length = 256
            assert _rel(_np(layer(x)), _np(full)) < tol, (convolution, bidirectional, dtype)


def _peak_rss() -> int | None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return None


def _rss_high_water() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux /proc peak-RSS reset")
def test_chunked_forward_at_one_million_steps_keeps_memory_near_the_output():
    """L = 2^20, H = 2, chunks of 4096, no grad: the peak resident memory grows by less than the input
    and output (8 MB each) plus 40 MB; one unchunked FFT over 2^21 points needs several hundred MB."""
    layer = SSM(2, 16, chunk_length=4096, generator=_gen(0))
    u = torch.randn(1, 2, 2**20, generator=_gen(1))
    with torch.no_grad():
        layer(u[..., :8192])  # FFT plans, allocator
        base = _peak_rss()
        if base is None:
            pytest.skip("cannot reset the peak RSS here")
        y = layer(u)
        grown = _rss_high_water() - base
    assert y.shape == (1, 2, 2**20) and torch.isfinite(y).all()
    assert grown < 2 * u.nbytes + 40 * 2**20, f"peak grew by {grown / 2**20:.0f} MB"


def test_chunk_length_is_validated_and_set_through_the_backbone():
    with pytest.raises(ValueError, match="chunk_length must be None or a positive integer"):
        SSM(4, 4, chunk_length=0)
    with pytest.raises(ValueError, match="chunk_length"):
        SSM(4, 4).chunk_length = 2.5
    torch.manual_seed(0)
    model = SSMBackbone(3, d_model=8, n_layers=2, d_state=8, heads=2, pooling="none", generator=_gen(0)).double().eval()
    u = torch.randn(2, 3, 50, generator=_gen(1), dtype=torch.float64)
    full = model(u)
    full_state = model.forward_with_state(u)
    model.chunk_length = 8
    assert model.chunk_length == 8 and all(layer.chunk_length == 8 for layer in model.ssm_layers)
    assert _rel(_np(model(u)), _np(full)) < 1e-10
    y, state = model.forward_with_state(u)
    assert _rel(_np(y), _np(full_state[0])) < 1e-10
    for a, b in zip(state, full_state[1]):
        assert _rel(_np(a), _np(b)) < 1e-10
    assert SSMBackbone(3, d_model=8, n_layers=1, chunk_length=16).chunk_length == 16


def test_step_cache_follows_parameter_changes_and_keeps_gradients():
    """The cached discretization is refreshed after an in-place parameter update and a dt_scale change,
    and with autograd on the step still sends gradients to Lambda, Delta, B and C."""
    layer = SSM(4, 8, heads=2, generator=_gen(0)).double()
    u = torch.randn(3, 4, generator=_gen(1), dtype=torch.float64)
    state = layer.initial_state(3)
    with torch.no_grad():
        y0, _ = layer.step(u, state)
        layer.log_dt.add_(0.3)
        y1, _ = layer.step(u, state)
        layer.dt_scale = 2.0
        y2, _ = layer.step(u, state)
    fresh = SSM(4, 8, heads=2, generator=_gen(0)).double()
    fresh.load_state_dict(layer.state_dict())
    fresh.dt_scale = 2.0
    with torch.no_grad():
        expected = _loop_oracle(fresh, u.numpy()[..., None])[0][..., 0]
    assert not torch.equal(y0, y1) and not torch.equal(y1, y2)
    assert _rel(_np(y2), expected) < 1e-12
    y, state = layer.step(u, state)
    y, _ = layer.step(u, state)
    y.square().sum().backward()
    for p in (layer.Lambda_re_raw, layer.Lambda_im, layer.log_dt, layer.B, layer.C):
        assert p.grad is not None and p.grad.abs().sum() > 0


@pytest.mark.parametrize("convolution", ["kernel", "state"])
def test_autocast_runs_the_ssm_part_in_float32(convolution):
    """Under CPU bf16 autocast the kernels, FFTs and states stay float32 (no mixer: the output equals the
    float32 one exactly); with a mixer only the mixer's product runs in bf16 (its float32 bias promotes the
    sum back to float32; rel. error at bf16 resolution)."""
    u = torch.randn(2, 4, 40, generator=_gen(1))
    plain = SSM(4, 8, convolution=convolution, generator=_gen(0))
    mixed = SSM(4, 8, heads=2, convolution=convolution, generator=_gen(0))
    for layer, exact in ((plain, True), (mixed, False)):
        reference = layer(u)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = layer(u)
        assert y.dtype == torch.float32
        if exact:
            assert torch.equal(y, reference)
        else:
            assert not torch.equal(y, reference) and _rel(_np(y), _np(reference)) < 3e-2


@pytest.mark.parametrize("heads,convolution", [(2, "kernel"), (8, "kernel"), (1, "state"), (16, "kernel")])
def test_a_samples_output_does_not_depend_on_its_batch(heads, convolution):
    """Bitwise: the batch of 6 against each sample alone and against the first 3 (float32)."""
    layer = SSM(16, 16, heads=heads, convolution=convolution, bidirectional="essm", generator=_gen(0))
    u = torch.randn(6, 16, 64, generator=_gen(1))
    with torch.no_grad():
        y = layer(u)
        assert torch.equal(y, torch.cat([layer(u[i : i + 1]) for i in range(6)]))
        assert torch.equal(y[:3], layer(u[:3]))
