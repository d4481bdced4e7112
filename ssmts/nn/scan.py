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
    """x = diagonal_recurrence(v, abar, initial) by the compiled CPU loops, with their adjoint as backward."""

    @staticmethod
    def forward(ctx, v, abar, initial, reverse):
        from . import _compiled

        b, S, P, L = v.shape
        v = v.detach().contiguous()
        abar = abar.detach().to(v.dtype).contiguous()
        rows = v.reshape(b * S * P, L)
        x = torch.empty_like(v)
        start = _initial_rows(initial, rows)
        _compiled.recur(
            rows.numpy(),
            abar.reshape(-1).numpy(),
            start.numpy(),
            reverse,
            x.reshape(rows.shape).numpy(),
        )
        ctx.save_for_backward(abar, x, start)
        ctx.has_initial, ctx.reverse = initial is not None, reverse
        return x

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_x):
        from . import _compiled

        abar, x, start = ctx.saved_tensors
        b, S, P, L = x.shape
        grad_x = grad_x.to(x.dtype).contiguous()
        grad_v = torch.empty_like(x)
        grad_abar_rows = torch.empty(b * S * P, dtype=x.dtype)
        _compiled.adjoint(
            grad_x.reshape(-1, L).numpy(),
            abar.reshape(-1).numpy(),
            x.reshape(-1, L).numpy(),
            start.numpy(),
            ctx.reverse,
            grad_v.reshape(-1, L).numpy(),
            grad_abar_rows.numpy(),
        )
        # Per-sample sums first, then over the batch in sample order (as every batch product here).
        grad_abar = grad_abar_rows.reshape(b, S, P).sum(0) if ctx.needs_input_grad[1] else None
        first = 0 if not ctx.reverse else L - 1
        grad_initial = grad_v[..., first] * abar.conj() if ctx.has_initial and ctx.needs_input_grad[2] else None
        return grad_v, grad_abar, grad_initial, None


def _initial_rows(initial: torch.Tensor | None, rows: torch.Tensor) -> torch.Tensor:
    """The initial state as one value per row of `rows` (zeros, unused, without one)."""
    if initial is None:
        return torch.zeros(rows.shape[0], dtype=rows.dtype)
    return initial.detach().to(rows.dtype).reshape(-1).contiguous()


def diagonal_recurrence(
    v: torch.Tensor, abar: torch.Tensor, initial: torch.Tensor | None = None, reverse: bool = False
) -> torch.Tensor:
    """States x_k = abar * x_{k-1} + v_k of a time-invariant diagonal system, x_{-1} = initial (default 0).

    v: (batch, S, P, L) complex, abar: (S, P) complex, initial: (batch, S, P) -> x (batch, S, P, L).
    reverse: run from the last step back (x_k = abar * x_{k+1} + v_k, x_L = initial), the
    anti-causal direction of a bidirectional layer. The causal convolution of v with Abar^l,
    which the FFT path computes with two FFTs of size 2L; on a CPU this runs compiled loops of
    one multiply-add a step (ssmts.nn._compiled), elsewhere the parallel scan.
    """
    if v.device.type == "cpu":
        return _CompiledRecurrence.apply(v, abar, initial, reverse)
    if reverse:
        return diagonal_recurrence(v.flip(-1), abar, initial).flip(-1)
    a = abar[None, None].expand(v.shape[0], v.shape[-1], *abar.shape)
    return diagonal_scan(a, v.permute(0, 3, 1, 2), initial).permute(0, 2, 3, 1)
