"""Compiled CPU loops (numba): the diagonal linear recurrence and its adjoint, for
`ssmts.nn.scan.diagonal_recurrence`, and the fused pass of the SSM features
(`ssmts.nn.features.SSMFeatures`), which recurs, reads out and pools without keeping any response.

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
import numpy as np

FEATURE_CHUNK = 256
"""Steps whose states and responses `mode_features` keeps at once (they stay in the cache)."""

LOG_BLOCK = 8
"""`mode_features` sums the logarithms of the envelope's powers as the logarithm of their product over this
many steps (a logarithm costs tens of multiplications here; numba finds no vectorized one): each factor lies
between the floor, 1e-12 of the series' mean power, and about (2 sqrt(length))^2 of it, so the product of 8
stays within float64's range."""


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


@numba.njit(nogil=True, cache=True)
def pool(y, steps, biases, counts, totals, maxima):
    """Add the first `steps` rows of responses y (>= steps, M) to the running pools of M responses:
    counts (Q, M) of steps above each bias of biases (Q, M), totals (M,) float64 and maxima (M,).
    Time-major, so that the inner loops run over the M responses of a step (vectorized)."""
    Q, M = biases.shape
    for t in range(steps):
        row = y[t]
        for q in range(Q):
            bias, count = biases[q], counts[q]
            for m in range(M):
                count[m] += row[m] > bias[m]
        for m in range(M):
            totals[m] += row[m]
            maxima[m] = max(maxima[m], row[m])


@numba.njit(nogil=True, cache=True)
def _write_pools(counts, totals, maxima, out):
    """out (M, Q + 2): the counts (Q, M), totals and maxima side by side."""
    Q, M = counts.shape
    for m in range(M):
        for q in range(Q):
            out[m, q] = counts[q, m]
        out[m, Q] = totals[m]
        out[m, Q + 1] = maxima[m]


@numba.njit(nogil=True, cache=True)
def pool_responses(y, lengths, biases, out):
    """`pool` for a batch: responses y (b, L, M) float32 of which sample i's first lengths[i] steps are
    real; biases (Q, M); out (b, M, Q + 2) float64, written (steps above each bias, sum, maximum)."""
    Q, M = biases.shape
    counts = np.empty((Q, M), dtype=np.int64)
    totals = np.empty(M)
    maxima = np.empty(M, dtype=np.float32)
    for i in range(y.shape[0]):
        counts[:] = 0
        totals[:] = 0.0
        maxima[:] = -np.inf
        pool(y[i], lengths[i], biases, counts, totals, maxima)
        _write_pools(counts, totals, maxima, out[i])


@numba.njit(nogil=True, cache=True)
def mode_features(
    u, lengths, abar_re, abar_im, gamma_re, gamma_im, combination, biases, reverse, out, envelope, floors, mean_powers
):
    """Every response of a bank of SSM features, pooled in one pass without keeping the responses.

    For each sample i and scale s, the states of every channel h and mode p, x[t] = abar x[t -+ 1] +
    gamma u[h, t] (backwards from the sample's last step when `reverse`), over the sample's first
    lengths[i] steps, in float64, in chunks of FEATURE_CHUNK steps (the modes of a step side by side);
    each chunk's responses y = states @ combination[s] (states as real planes, channel by channel: Re of
    the P modes, then Im), pooled by `pool`. With a non-empty `envelope`, the envelope |x[t]| of every
    mode is pooled as well.
    u: (b, H, L) float32; lengths: (b,) int64; abar_*, gamma_*: (S, P) float64;
    combination: (S, H * 2P, M) float32; biases: (S, Q, M) float32;
    out: (b, S, M, Q + 2) float64, written: steps above each bias, sum, maximum (-inf with no step);
    envelope: (b, S, H, P, 4) float64, written: the sum of |x|^2, the maximum of |x|, the sum of
    log((|x|^2 + floors[i, h]) / mean_powers[i, h]) / 2 and the sum of (|x|^2 / mean_powers[i, h])^2
    over the steps; or of shape (0, ...), skipped; floors, mean_powers: (b, H) float64 (positive).
    """
    b, H, L = u.shape
    S, P = abar_re.shape
    Q, M = biases.shape[1], biases.shape[2]
    T = FEATURE_CHUNK
    states = np.zeros((T, H * 2 * P), dtype=np.float32)
    y = np.empty((T, M), dtype=np.float32)
    state_re = np.empty((H, P))
    state_im = np.empty((H, P))
    counts = np.empty((Q, M), dtype=np.int64)
    totals = np.empty(M)
    maxima = np.empty(M, dtype=np.float32)
    with_envelope = envelope.shape[0] > 0
    powers_sum = np.empty((H, P))  # per channel and mode: the sum of |x|^2, its largest, the sums of
    largest = np.empty((H, P))  # log |x|^2 and of |x|^4
    logs = np.empty((H, P))
    squares = np.empty((H, P))
    products = np.empty((H, P))  # the last few steps' |x|^2 multiplied: one logarithm for LOG_BLOCK steps
    for i in range(b):
        n = lengths[i]
        for s in range(S):
            ar, ai, gr, gi = abar_re[s], abar_im[s], gamma_re[s], gamma_im[s]
            state_re[:] = 0.0
            state_im[:] = 0.0
            counts[:] = 0
            totals[:] = 0.0
            maxima[:] = -np.inf
            powers_sum[:] = 0.0
            largest[:] = 0.0
            logs[:] = 0.0
            squares[:] = 0.0
            products[:] = 1.0
            for start in range(0, n, T):
                steps = min(T, n - start)
                for h in range(H):
                    xr, xi, first = state_re[h], state_im[h], h * 2 * P
                    power_sum, power_max, product, square_sum = powers_sum[h], largest[h], products[h], squares[h]
                    floor, scale = floors[i, h], 1.0 / mean_powers[i, h]
                    for j in range(steps):
                        v = u[i, h, n - 1 - (start + j) if reverse else start + j]
                        row = states[j]
                        for p in range(P):  # independent modes: vectorized
                            r = ar[p] * xr[p] - ai[p] * xi[p] + gr[p] * v
                            xi[p] = ar[p] * xi[p] + ai[p] * xr[p] + gi[p] * v
                            xr[p] = r
                            row[first + p] = r
                            row[first + P + p] = xi[p]
                        if with_envelope:
                            for p in range(P):
                                power = xr[p] * xr[p] + xi[p] * xi[p]
                                power_sum[p] += power
                                square_sum[p] += power * power * scale * scale
                                power_max[p] = max(power_max[p], power)
                                product[p] *= (power + floor) * scale
                            if (start + j + 1) % LOG_BLOCK == 0:
                                for p in range(P):
                                    logs[h, p] += np.log(product[p])
                                    product[p] = 1.0
                np.dot(states[:steps], combination[s], y[:steps])
                pool(y, steps, biases[s], counts, totals, maxima)
            _write_pools(counts, totals, maxima, out[i, s])
            if with_envelope:
                for h in range(H):
                    for p in range(P):
                        envelope[i, s, h, p, 0] = powers_sum[h, p]
                        envelope[i, s, h, p, 1] = np.sqrt(largest[h, p])
                        envelope[i, s, h, p, 2] = 0.5 * (logs[h, p] + np.log(products[h, p]))
                        envelope[i, s, h, p, 3] = squares[h, p]
