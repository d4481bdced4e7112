"""Compiled CPU loops (numba) of the diagonal linear recurrence and its adjoint, for
`ssmts.nn.scan.diagonal_recurrence`.

A sequence of the recurrence costs one complex multiply-add a step, where its FFT convolution
costs two complex FFTs of twice its length: on a CPU the loop is an order of magnitude faster.
Each row (one sample's mode) is independent and runs in a fixed order, so results do not
depend on the batch nor on the threads. The loops release the GIL: the training's worker
threads run them side by side. Compiled on first use and cached on disk.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def recur(v, abar, initial, reverse, x):
    """x[r, k] = abar[r % modes] x[r, k -+ 1] + v[r, k] along k (backwards when `reverse`), from
    initial[r] (zeros for none). v, x: (rows, L) complex; abar: (modes,); initial: (rows,)."""
    rows, L = v.shape
    modes = abar.shape[0]
    for r in range(rows):
        a = abar[r % modes]
        s = initial[r]
        for i in range(L):
            k = L - 1 - i if reverse else i
            s = a * s + v[r, k]
            x[r, k] = s


@numba.njit(nogil=True, cache=True)
def adjoint(grad_x, abar, x, initial, reverse, grad_v, grad_abar):
    """The vector-Jacobian product of `recur` (torch's convention for complex gradients, the
    conjugate of a complex multiplier): grad_v[r, k] = g_k with g_k = conj(a) g_{k +- 1} + grad_x[r, k]
    in the opposite direction, and grad_abar[r] = sum_k g_k conj(x_{k -+ 1}) (x before the first step:
    initial[r]). The gradient of `initial` is conj(a) g at the first step, made by the caller."""
    rows, L = grad_x.shape
    modes = abar.shape[0]
    for r in range(rows):
        a = np.conj(abar[r % modes])
        g = initial[r] * 0
        total = initial[r] * 0
        for i in range(L):
            k = i if reverse else L - 1 - i
            g = a * g + grad_x[r, k]
            grad_v[r, k] = g
            previous = k + 1 if reverse else k - 1
            if 0 <= previous < L:
                total += g * np.conj(x[r, previous])
            else:
                total += g * np.conj(initial[r])
        grad_abar[r] = total
