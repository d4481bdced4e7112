"""The compiled diagonal recurrence (ssmts.nn.scan.diagonal_recurrence) that the CPU state path runs
instead of FFTs: its states and gradients against naive loops in float64, and the SSM layer's outputs
and gradients by recurrence against its FFT path."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ssmts.nn.ssm as ssm_module
from ssmts.nn import SSM
from ssmts.nn.scan import diagonal_recurrence as recurrence_of_planes


def _planes(z):
    return torch.cat([z.real, z.imag], dim=2)


def diagonal_recurrence(v, abar, initial=None, reverse=False):
    """The recurrence on complex states (b, S, P, L), through the planes layout it runs on."""
    x = recurrence_of_planes(_planes(v), abar, initial, reverse)
    P = abar.shape[-1]
    return torch.complex(x[:, :, :P], x[:, :, P:])


def _system(seed: int, b=3, S=2, P=4, L=40):
    g = torch.Generator().manual_seed(seed)
    v = torch.complex(
        torch.randn(b, S, P, L, generator=g, dtype=torch.float64),
        torch.randn(b, S, P, L, generator=g, dtype=torch.float64),
    )
    # |abar| from 0.5 to 0.999: fast and slow modes
    radius = 0.5 + 0.499 * torch.rand(S, P, generator=g, dtype=torch.float64)
    abar = torch.polar(radius, 3 * torch.randn(S, P, generator=g, dtype=torch.float64))
    initial = torch.complex(
        torch.randn(b, S, P, generator=g, dtype=torch.float64), torch.randn(b, S, P, generator=g, dtype=torch.float64)
    )
    return v, abar, initial


def _loop(v, abar, initial, reverse):
    """x_k = abar x_{k-1} + v_k (or from the end), one step at a time in numpy."""
    v, abar = v.detach().numpy(), abar.detach().numpy()
    x = np.zeros_like(v)
    s = np.zeros(v.shape[:-1], v.dtype) if initial is None else initial.detach().numpy().copy()
    steps = range(v.shape[-1] - 1, -1, -1) if reverse else range(v.shape[-1])
    for k in steps:
        s = abar * s + v[..., k]
        x[..., k] = s
    return x


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("with_initial", [False, True])
def test_states_are_those_of_the_loop(reverse, with_initial):
    v, abar, initial = _system(0)
    initial = initial if with_initial else None
    x = diagonal_recurrence(v, abar, initial, reverse=reverse)
    np.testing.assert_allclose(x.numpy(), _loop(v, abar, initial, reverse), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reverse", [False, True])
def test_gradients_are_those_of_the_loop_through_autograd(reverse):
    """The adjoint loops against autograd through the plain torch loop (float64), for every input,
    with complex gradients in torch's convention; plus torch's own finite-difference check."""
    v, abar, initial = _system(1, L=25)
    inputs = [t.clone().requires_grad_() for t in (v, abar, initial)]
    weights = torch.randn_like(v)

    def torch_loop(v, abar, initial):
        s, out = initial, [None] * v.shape[-1]
        for k in range(v.shape[-1] - 1, -1, -1) if reverse else range(v.shape[-1]):
            s = abar * s + v[..., k]
            out[k] = s
        return torch.stack(out, -1)

    def loss(f):
        return (f(*inputs) * weights.conj()).real.sum()

    ours = torch.autograd.grad(loss(lambda *a: diagonal_recurrence(*a, reverse=reverse)), inputs)
    reference = torch.autograd.grad(loss(torch_loop), inputs)
    for got, want in zip(ours, reference):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-10)
    small = (v[:1, :1, :2, :6], abar[:1, :2], initial[:1, :1, :2])
    small = [t.clone().requires_grad_() for t in small]
    assert torch.autograd.gradcheck(lambda *a: diagonal_recurrence(*a, reverse=reverse), small)


def test_float32_states_stay_close_over_a_long_sequence():
    """complex64 over 20,000 steps of a slow mode: rounding does not build up past float32's scale."""
    v, abar, _ = _system(2, b=1, S=1, P=4, L=20_000)
    x32 = diagonal_recurrence(v.to(torch.complex64), abar.to(torch.complex64))
    exact = _loop(v, abar, None, False)
    assert np.abs(x32.numpy() - exact).max() < 1e-4 * np.abs(exact).max()


def test_results_do_not_depend_on_the_batch():
    """A sample's states are the same alone and inside a batch (bitwise)."""
    v, abar, initial = _system(3, b=5)
    together = diagonal_recurrence(v.to(torch.complex64), abar.to(torch.complex64))
    alone = diagonal_recurrence(v[2:3].to(torch.complex64), abar.to(torch.complex64))
    assert torch.equal(together[2:3], alone)


@pytest.mark.parametrize(
    "options",
    [
        dict(),
        dict(heads=2),
        dict(bidirectional=True),
        dict(bidirectional="ldnn"),
        dict(chunk_length=16),
    ],
    ids=["causal", "two heads", "essm", "ldnn", "chunked"],
)
def test_the_layer_by_recurrence_matches_its_fft_path(monkeypatch, options):
    """SSM outputs and every parameter's gradient, float64: the recurrence (CPU) against the FFT path
    (what a GPU runs), with and without a state to continue from (causal)."""
    torch.manual_seed(4)
    layer = SSM(6, 8, convolution="state", **options).double()
    u = torch.randn(3, 6, 50, dtype=torch.float64)

    def run(by_recurrence):
        monkeypatch.setattr(ssm_module, "states_by_recurrence", lambda u: by_recurrence)
        layer.zero_grad()
        if options.get("bidirectional"):
            y, final = layer(u), None
        else:
            y, final = layer(u, state=layer.initial_state(3).normal_(), return_state=True)
        (y * torch.linspace(-1, 1, y.shape[-1], dtype=y.dtype)).sum().backward()
        grads = {name: p.grad.clone() for name, p in layer.named_parameters() if p.grad is not None}
        return y.detach(), final, grads

    torch.manual_seed(5)
    y_rec, x_rec, g_rec = run(True)
    torch.manual_seed(5)
    y_fft, x_fft, g_fft = run(False)
    np.testing.assert_allclose(y_rec.numpy(), y_fft.numpy(), rtol=1e-9, atol=1e-9)
    if x_rec is not None:
        np.testing.assert_allclose(x_rec.detach().numpy(), x_fft.detach().numpy(), rtol=1e-9, atol=1e-9)
    assert g_rec.keys() == g_fft.keys() and g_rec
    for name in g_rec:
        np.testing.assert_allclose(g_rec[name].numpy(), g_fft[name].numpy(), rtol=1e-8, atol=1e-9, err_msg=name)
