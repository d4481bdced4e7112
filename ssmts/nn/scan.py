"""Parallel scan of a linear recurrence q_t = M_t q_{t-1} + b_t
(docs/concepts.md#input-dependent-transitions-slice).

One implementation for every layer with input- or time-dependent transitions: the LinearCDE
(structured M_t, ssmts.nn.lncde) and the SSM with per-step Delta_k (diagonal M_t = Abar_k,
ssmts.nn.ssm). The caller says how its transitions act on a state and compose.
"""

from __future__ import annotations

from typing import Callable

import torch

Rep = list[torch.Tensor]


def associative_scan(
    rep: Rep,
    b: torch.Tensor,
    act: Callable[[Rep, torch.Tensor], torch.Tensor],
    compose: Callable[[Rep, Rep], Rep],
) -> torch.Tensor:
    """States q_t = M_t q_{t-1} + b_t, q_{-1} = 0, for t = 0..T-1: rep (batch, T, ...), b (batch, T, ...).

    rep: the transitions M_t as a list of tensors with time on dim 1 (a caller's representation,
    e.g. blocks); act(rep, q) = M q for one time slice or many; compose(later, earlier) = later @ earlier.
    Odd-even associative scan: compose neighbouring pairs (M2 M1, M2 b1 + b2), scan the
    half-length sequence recursively (it gives the states after every odd step), then each
    even step is one application to the state before it. Depth O(log T), O(T) compositions.
    Only matrices are composed; the down-sweep needs matrix-vector products only. Products of
    transitions only (no division, no log): stable for any |M_t|, including exact zeros.
    """
    T = b.shape[1]
    if T == 1:
        return b
    n = T // 2
    odd = [t[:, 1 : 2 * n : 2] for t in rep]
    b_pair = act(odd, b[:, 0 : 2 * n : 2]) + b[:, 1 : 2 * n : 2]
    rep_pair = compose(odd, [t[:, 0 : 2 * n : 2] for t in rep]) if n > 1 else odd
    q_odd = associative_scan(rep_pair, b_pair, act, compose)  # states after steps 1, 3, 5, ...
    rest = [t[:, 2:T:2] for t in rep]  # steps 2, 4, ...: one application each
    q_even = torch.cat([b[:, :1], act(rest, q_odd[:, : (T - 1) // 2]) + b[:, 2:T:2]], dim=1)
    q = torch.stack([q_even[:, :n], q_odd], dim=2).flatten(1, 2)
    return torch.cat([q, q_even[:, n:]], dim=1) if T % 2 else q


def _diagonal_act(rep: Rep, q: torch.Tensor) -> torch.Tensor:
    return rep[0] * q


def _diagonal_compose(later: Rep, earlier: Rep) -> Rep:
    return [later[0] * earlier[0]]


def diagonal_scan(a: torch.Tensor, b: torch.Tensor, initial: torch.Tensor | None = None) -> torch.Tensor:
    """q_t = a_t * q_{t-1} + b_t (elementwise) for t = 0..T-1, from q_{-1} = initial (default 0).

    a, b: (batch, T, ...) (real or complex, broadcastable to each other's shape); initial: (batch, ...).
    """
    a = a.expand_as(b) if a.shape != b.shape else a
    if initial is not None:
        # Fold the initial state into the first input, so that the scan starts from zero.
        b = torch.cat([(a[:, 0] * initial + b[:, 0])[:, None], b[:, 1:]], dim=1)
    return associative_scan([a], b, _diagonal_act, _diagonal_compose)


class _CompiledRecurrence(torch.autograd.Function):
    """x = diagonal_recurrence(v, abar, initial, reverse) by the compiled CPU loops, their adjoint as backward."""

    @staticmethod
    def forward(ctx, v, abar, initial, reverse):
        from . import _compiled

        v = v.detach().contiguous()
        abar = abar.detach()
        a_re, a_im = (part.to(v.dtype).contiguous() for part in (abar.real, abar.imag))
        b, S, _, _ = v.shape
        if initial is None:
            i_re = i_im = torch.zeros(b, S, abar.shape[-1], dtype=v.dtype)
        else:
            i_re, i_im = (part.detach().to(v.dtype).contiguous() for part in (initial.real, initial.imag))
        x = torch.empty_like(v)
        _compiled.recur(v.numpy(), a_re.numpy(), a_im.numpy(), i_re.numpy(), i_im.numpy(), reverse, x.numpy())
        ctx.save_for_backward(a_re, a_im, x, i_re, i_im)
        ctx.abar_dtype, ctx.has_initial, ctx.reverse = abar.dtype, initial is not None, reverse
        return x

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_x):
        from . import _compiled

        a_re, a_im, x, i_re, i_im = ctx.saved_tensors
        b, S, P2, L = x.shape
        grad_x = grad_x.to(x.dtype).contiguous()
        grad_v = torch.empty_like(x)
        ga_re, ga_im = torch.empty(b, S, P2 // 2, dtype=x.dtype), torch.empty(b, S, P2 // 2, dtype=x.dtype)
        _compiled.adjoint(
            grad_x.numpy(),
            a_re.numpy(),
            a_im.numpy(),
            x.numpy(),
            i_re.numpy(),
            i_im.numpy(),
            ctx.reverse,
            grad_v.numpy(),
            ga_re.numpy(),
            ga_im.numpy(),
        )
        grad_abar = grad_initial = None
        if ctx.needs_input_grad[1]:  # per-sample sums, then over the batch in sample order
            grad_abar = torch.complex(ga_re.sum(0), ga_im.sum(0)).to(ctx.abar_dtype)
        if ctx.has_initial and ctx.needs_input_grad[2]:
            first = grad_v[..., L - 1 if ctx.reverse else 0]
            g = torch.complex(first[:, :, : P2 // 2], first[:, :, P2 // 2 :])
            grad_initial = g * torch.complex(a_re, -a_im)
        return grad_v, grad_abar, grad_initial, None


def diagonal_recurrence(
    v: torch.Tensor, abar: torch.Tensor, initial: torch.Tensor | None = None, reverse: bool = False
) -> torch.Tensor:
    """States x_k = abar * x_{k-1} + v_k of a time-invariant diagonal system, x_{-1} = initial (default 0).

    v: (batch, S, 2P, L) real planes (the real parts of the P modes, then their imaginary parts),
    abar: (S, P) complex, initial: (batch, S, P) complex -> x (batch, S, 2P, L), the same planes.
    reverse: run from the last step back (x_k = abar * x_{k+1} + v_k, x_L = initial), the
    anti-causal direction of a bidirectional layer. The causal convolution of v with Abar^l,
    which the FFT path computes with two FFTs of size 2L; this runs compiled CPU loops of one
    multiply-add a step (ssmts.nn._compiled). A GPU runs the FFT path (kernels.state_convolution).
    """
    if v.device.type != "cpu":
        raise ValueError(f"diagonal_recurrence runs on the CPU, got a tensor on {v.device}; a GPU runs the FFTs")
    return _CompiledRecurrence.apply(v, abar, initial, reverse)
