"""Products whose result for one sample does not depend on the rest of the batch.

Every layer of ssmts.nn makes its batched products with these (or elementwise): the SSM's mixer,
D and spectral products, the LinearCDE's path and read-out, the blocks' gates and the decoders.
"""

from __future__ import annotations

import torch
from torch import nn

# Batch invariance. A sample's output must not depend on what else is in the batch (scikit-learn's
# estimator checks compare a batch with every sample alone, to ~1e-7 in float32). A BLAS product
# whose rows are the batch folded with time (a (batch * L, K) matrix) does not give that: the
# library picks kernels and splits work between threads by matrix shape, so a row's sums are
# accumulated in another order in another batch. Nor does a batched matmul of larger matrices
# (MKL's batch GEMM splits one matrix between threads when the batch is small). So every product
# in ssmts.nn is one of:
# - elementwise, or a reduction (sum, amax) over a fixed dimension: per-output work whatever the batch;
# - a product per sample (`matmul_each_sample`): the same call, with the same shapes, whatever the batch;
# - a batch of small matrices, fewer than `NAIVE_BMM_MACS` multiply-adds each, that torch's CPU bmm
#   computes with its own loop, one fixed order per matrix (bmm_out_or_baddbmm_ in ATen's
#   LinearAlgebra.cpp); larger ones take one of the first two forms (ssmts.nn.lncde's NAIVE_BMM_MACS).
# tests/nn/test_lncde_batch_invariance.py and the estimators' checks test it.

# Products with a shared matrix of at most this many multiply-adds per sample are an elementwise
# product and a sum (one batched operation instead of a call per sample).
ELEMENTWISE_MACS = 8192


def channel_linear(linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """Apply `linear` to the channels of every step: x (batch, C_in, L) -> (batch, C_out, L).

    One matrix product per sample (bmm with the weight broadcast over the batch) rather than
    nn.Linear on a (batch * L, C_in) matrix: BLAS picks kernels by matrix shape, so folding
    the batch into the rows would make a sample's result depend (at float32 resolution) on
    how many samples it is batched with. It also avoids two transposed copies.
    """
    weight = linear.weight.expand(x.shape[0], -1, -1)
    y = torch.bmm(weight, x)
    return y if linear.bias is None else y + linear.bias[None, :, None]


def per_sample_mv(A: torch.Tensor, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """y[i, s] = A[s] @ x[i, s] (+ bias[s]): A (S, m, k), x (b, S, k) -> (b, S, m), one product per sample
    (a sample's result never depends on the batch; a stride-0 batched matmul would copy A b times)."""
    if A.shape[0] == 1:
        out = [torch.mv(A[0], xi[0]) if bias is None else torch.addmv(bias[0], A[0], xi[0]) for xi in x]
        return torch.stack(out)[:, None]
    out = [torch.bmm(A, xi[:, :, None])[..., 0] for xi in x]
    y = torch.stack(out)
    return y if bias is None else y + bias


class SpectralProduct(torch.autograd.Function):
    """Y[i, s, f] = K[s, f] @ U[i, s, f]: K (S, F, Mh, Hh), U (b, S, F, Hh) -> (b, S, F, Mh), complex.

    The forward pass runs one batched product per sample, so that a sample's output never depends on
    the batch it is in (a GEMM over the batch picks its kernels, and summation order, by batch size).
    The backward pass contracts over the batch in one GEMM per (head, frequency): the kernel's
    gradient is a sum over the batch anyway.
    """

    @staticmethod
    def forward(ctx, K, U):
        ctx.save_for_backward(K, U)
        return torch.stack([torch.matmul(K, Ui[..., None])[..., 0] for Ui in U])

    @staticmethod
    def backward(ctx, grad):
        K, U = ctx.saved_tensors
        grad_K = grad_U = None
        g = grad.permute(1, 2, 3, 0)  # (S, F, Mh, b)
        if ctx.needs_input_grad[0]:
            grad_K = torch.matmul(g, U.conj().permute(1, 2, 0, 3))  # sum_i g_i U_i^H
        if ctx.needs_input_grad[1]:
            grad_U = torch.matmul(K.conj().transpose(-1, -2), g).permute(3, 0, 1, 2)  # K^H g_i
        return grad_K, grad_U


def _matmul_each_sample(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """out[n] = a[n] @ b[n] by one call per sample, written in place (no autograd)."""
    if a.dim() == 2:
        batch, a_parts, b_parts = b.shape[0], [a] * b.shape[0], b.unbind(0)
    elif b.dim() == 2:
        batch, a_parts, b_parts = a.shape[0], a.unbind(0), [b] * a.shape[0]
    else:
        batch, a_parts, b_parts = a.shape[0], a.unbind(0), b.unbind(0)
    lead = a.shape[1:-2] if a.dim() > 2 else b.shape[1:-2]
    out = torch.empty((batch, *lead, a.shape[-2], b.shape[-1]), dtype=torch.result_type(a, b), device=a.device)
    product = torch.matmul if lead else torch.mm
    for a_n, b_n, out_n in zip(a_parts, b_parts, out.unbind(0)):
        product(a_n, b_n, out=out_n)
    return out


class _MatmulEachSample(torch.autograd.Function):
    """`matmul_each_sample` with autograd: the forward one sample at a time, the backward (no batch
    invariance needed there) batched as usual."""

    @staticmethod
    def forward(ctx, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        return _matmul_each_sample(a, b)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        a, b = ctx.saved_tensors
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            if a.dim() == 2:  # shared left factor: sum over the samples
                grad_a = torch.matmul(grad, b.mT).sum(0)
            else:
                grad_a = torch.matmul(grad, b.mT)
        if ctx.needs_input_grad[1]:
            if b.dim() == 2 and a.dim() == 3:  # shared right factor: one product over all rows
                grad_b = a.reshape(-1, a.shape[-1]).mT @ grad.reshape(-1, grad.shape[-1])
            elif b.dim() == 2:
                grad_b = torch.matmul(a.mT, grad).flatten(0, -3).sum(0)
            else:
                grad_b = torch.matmul(a.mT, grad)
        return grad_a, grad_b


def matmul_each_sample(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b for a batch of samples (dim 0), out[n] = a[n] @ b[n], such that a sample's result does not
    depend on the rest of the batch: one call per sample, the same call with the same shapes whatever
    else is in the batch; or, for a shared matrix and at most ELEMENTWISE_MACS multiply-adds per sample,
    an elementwise product and a sum over the contracted dimension (innermost and contiguous, so each
    output is one row's sum). One of a, b may be a 2-D matrix shared by all samples (the other's
    samples are then matrices too), or both have the same dimensions after the batch. E.g.
    a (batch, L, K) @ W (K, N) -> (batch, L, N), or W (N, K) @ x (batch, K, L) -> (batch, N, L)."""
    if b.dim() == 2 and a.dim() == 3 and a.shape[1] * a.shape[2] * b.shape[1] <= ELEMENTWISE_MACS:
        return (a.contiguous()[..., None, :] * b.T.contiguous()).sum(-1)
    if a.dim() == 2 and b.dim() == 3 and b.shape[2] * b.shape[1] * a.shape[0] <= ELEMENTWISE_MACS:
        return (b.transpose(1, 2).contiguous()[..., None, :] * a.contiguous()).sum(-1).transpose(1, 2).contiguous()
    if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
        return _MatmulEachSample.apply(a, b)
    return _matmul_each_sample(a, b)


__all__ = ["ELEMENTWISE_MACS", "SpectralProduct", "channel_linear", "matmul_each_sample", "per_sample_mv"]
