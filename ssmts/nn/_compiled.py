"""Compiled CPU loops (numba) of the diagonal linear recurrence and its adjoint, for
`ssmts.nn.scan.diagonal_recurrence`.

A sequence of the recurrence costs one complex multiply-add a step, where its FFT convolution
costs two complex FFTs of twice its length: on a CPU the loop is an order of magnitude faster.
States are stored as real planes, (b, S, 2P, L) with the real parts of the P modes first and
their imaginary parts after, the layout the layer's input projection and read-out multiply, so
no complex tensor is formed. Each mode of each sample runs in a fixed order, so results do not
depend on the batch nor on the threads. The loops release the GIL: the training's worker
threads run them side by side. Compiled on first use and cached on disk.
"""

from __future__ import annotations

import numba


@numba.njit(nogil=True, cache=True)
def recur(v, abar_re, abar_im, initial_re, initial_im, reverse, x):
    """x_k = abar x_{k -+ 1} + v_k along k (backwards when `reverse`) from `initial`, per sample and mode.

    v, x: (b, S, 2P, L) real planes; abar_re, abar_im: (S, P); initial_re, initial_im: (b, S, P).
    """
    b, S, P2, L = v.shape
    P = P2 // 2
    for i in range(b):
        for s in range(S):
            for p in range(P):
                ar, ai = abar_re[s, p], abar_im[s, p]
                sr, si = initial_re[i, s, p], initial_im[i, s, p]
                for j in range(L):
                    k = L - 1 - j if reverse else j
                    sr, si = ar * sr - ai * si + v[i, s, p, k], ar * si + ai * sr + v[i, s, P + p, k]
                    x[i, s, p, k] = sr
                    x[i, s, P + p, k] = si


@numba.njit(nogil=True, cache=True)
def adjoint(grad_x, abar_re, abar_im, x, initial_re, initial_im, reverse, grad_v, grad_abar_re, grad_abar_im):
    """The vector-Jacobian product of `recur`, with complex gradients in torch's convention
    (d/d Re + i d/d Im): grad_v = g with g_k = conj(abar) g_{k +- 1} + grad_x_k run in the opposite
    direction, and per sample grad_abar = sum_k g_k conj(x before step k) (`initial` before the first
    step), summed in float64. The gradient of `initial` is conj(abar) g at the first step (the caller's).
    grad_x, grad_v: (b, S, 2P, L) planes; grad_abar_re, grad_abar_im: (b, S, P)."""
    b, S, P2, L = grad_x.shape
    P = P2 // 2
    for i in range(b):
        for s in range(S):
            for p in range(P):
                ar, ai = abar_re[s, p], abar_im[s, p]
                gr = ar * 0  # zero of the arrays' float type
                gi = ar * 0
                total_re, total_im = 0.0, 0.0
                for j in range(L):
                    k = j if reverse else L - 1 - j
                    gr, gi = ar * gr + ai * gi + grad_x[i, s, p, k], ar * gi - ai * gr + grad_x[i, s, P + p, k]
                    grad_v[i, s, p, k] = gr
                    grad_v[i, s, P + p, k] = gi
                    previous = k + 1 if reverse else k - 1
                    if 0 <= previous < L:
                        xr, xi = x[i, s, p, previous], x[i, s, P + p, previous]
                    else:
                        xr, xi = initial_re[i, s, p], initial_im[i, s, p]
                    total_re += gr * xr + gi * xi
                    total_im += gi * xr - gr * xi
                grad_abar_re[i, s, p] = total_re
                grad_abar_im[i, s, p] = total_im
