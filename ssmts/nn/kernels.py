"""The SSM layer's convolution kernels and convolutions, as functions of its discrete parameters
(docs/concepts.md#convolution-and-why-it-is-fast).

Notation: S heads, P modes per head, Hh = H / S inputs and Mh = M / S outputs per head, L steps,
b samples. The discrete system of a head s is (Abar_s (P,), Bbar_s (P, Hh), C_s (Mh, P)), and
`factor` is 2 with conjugate symmetry (y = 2 Re(C x)), else 1. Two ways to the same output:

    kernel first   K_s[l] = factor Re(C_s diag(Abar_s^l) Bbar_s), (Mh, Hh) per lag (`head_kernels`),
                   then y = K * u by FFT (`spectral_convolution`);
    state first    x = V * (Bbar u) per mode by FFT, V[l] = Abar^l (`state_spectrum`),
                   then y = factor Re(C x) (`state_convolution`); on a CPU the same states
                   come from the recurrence x_k = Abar x_{k-1} + Bbar u_k run as compiled loops
                   (`recurrent_state_convolution`), an order of magnitude faster than the FFTs there.

With a state x_{-1} to continue from, the free response factor Re(C Abar^(k+1) x_{-1}) is added
(`free_response`) and the final state x_{L-1} comes from `final_state`. Every product over the
batch is made per sample (ssmts.nn.batch_invariant).
"""

from __future__ import annotations

import math

import torch

from .batch_invariant import SpectralProduct
from .scan import diagonal_recurrence

# Working-set target of the state-first convolution's per-chunk intermediates (see state_convolution):
# a few MB, within the L2/L3 caches of current CPUs.
STATE_CHUNK_BYTES = 2 * 2**20


def chunk_sizes(length: int) -> tuple[int, int]:
    """(c, J) with c * J >= length and c ~ sqrt(length): lag l = j c + i, i < c, j < J."""
    c = max(1, math.isqrt(max(length - 1, 0)) + 1)
    return c, -(-length // c)


def chunk_exponentials(log_abar: torch.Tensor, length: int, start: int = 0):
    """(head, tail, c, J): head = Abar^i for i < c and tail = Abar^(start + j c) for j < J, (..., c) and
    (..., J) complex, with c J >= length (see `chunk_sizes`): Abar^(start + j c + i) = tail_j head_i."""
    c, J = chunk_sizes(length)
    dtype, device = log_abar.real.dtype, log_abar.device
    head = torch.exp(log_abar[..., None] * torch.arange(c, device=device, dtype=dtype))
    tail = torch.exp(log_abar[..., None] * (torch.arange(J, device=device, dtype=dtype) * c + start))
    return head, tail, c, J


def powers(log_abar: torch.Tensor, length: int, start: int = 0) -> torch.Tensor:
    """Abar^(start + l) for l < length: (..., length) complex, from c + J ~ 2 sqrt(length) complex
    exponentials per mode (Abar^(start + j c) Abar^i) instead of `length` of them."""
    head, tail, _, _ = chunk_exponentials(log_abar, length, start)
    return (tail[..., :, None] * head[..., None, :]).flatten(-2)[..., :length]


def vandermonde(W: torch.Tensor, log_abar: torch.Tensor, length: int) -> torch.Tensor:
    """K[s, r, l] = Re(sum_p W[s, p, r] Abar_sp^l) for l < length: (S, R, length) real.

    W: (S, P, R) complex, log_abar: (S, P). One real GEMM per head on the real and imaginary parts
    (only the real part is formed), 2 P R length multiply-adds either way; the order is the one
    with the smaller operand. Few outputs per head (R c < length, e.g. SISO): with l = j c + i,
    K[s, r, j c + i] = Re(sum_p Abar_sp^(jc) (W[s, p, r] Abar_sp^i)), (J x 2P) @ (2P x R c).
    Many (a MIMO head's (M/s)(H/s) kernels): K = Re(W^T Abar^l), (R x 2P) @ (2P x length), whose
    operand Abar^l (2P x length) is smaller than the (2P x R c) one.
    """
    S, P, R = W.shape
    c, _ = chunk_sizes(length)
    if R * c >= length:
        pw = powers(log_abar, length)  # (S, P, length)
        Wt = torch.cat([W.real, -W.imag], dim=1).transpose(1, 2)  # (S, R, 2P)
        return torch.bmm(Wt, torch.cat([pw.real, pw.imag], dim=1))
    head, tail, c, J = chunk_exponentials(log_abar, length)  # (S, P, c), (S, P, J)
    X = W[..., None] * head[:, :, None, :]  # (S, P, R, c)
    X = torch.cat([X.real, X.imag], dim=1).reshape(S, 2 * P, R * c)
    T = torch.cat([tail.real, -tail.imag], dim=1).transpose(1, 2)  # (S, J, 2P)
    K = torch.bmm(T, X).reshape(S, J, R, c)
    if R > 1:
        K = K.transpose(1, 2)
    return K.reshape(S, R, J * c)[..., :length]


def two_sided_kernel(forward: torch.Tensor, backward: torch.Tensor, n: int, average: bool) -> torch.Tensor:
    """Bidirectional kernel on a circular grid of n >= 2L - 1: forward taps at l >= 0, backward taps at
    n - l (lag -l), both at l = 0 (the eSSM sum counts that tap twice); halved when `average` (LDNN)."""
    L = forward.shape[-1]
    gap = torch.zeros(*forward.shape[:-1], n - 2 * L + 1, dtype=forward.dtype, device=forward.device)
    kernel = torch.cat([forward[..., :1] + backward[..., :1], forward[..., 1:], gap, backward[..., 1:].flip(-1)], -1)
    return kernel / 2 if average else kernel


def state_spectrum(
    log_abar: torch.Tensor, L: int, log_abar_back: torch.Tensor | None = None, average: bool = False
) -> torch.Tensor:
    """FFT (size 2L) of the state kernel Abar^l, l < L: (S, P, 2L) complex, log_abar: (S, P).

    With `log_abar_back` also the anti-causal taps Abar_back^l at lag -l (the bidirectional state,
    both directions in one two-sided kernel), halved when `average` (LDNN).
    """
    n = 2 * L  # zero padding to 2L removes the circular wrap-around
    kernel = powers(log_abar, L)  # (S, P, L): Abar^l
    if log_abar_back is not None:
        kernel = two_sided_kernel(kernel, powers(log_abar_back, L), n, average)
    return torch.fft.fft(kernel, n=n)


def projection_planes(u: torch.Tensor, Bbar: torch.Tensor) -> torch.Tensor:
    """Bbar u per head as real planes: u (b, H, L) real, Bbar (S, P, Hh) -> (b, S, 2P, L), the real
    parts of the P modes, then their imaginary parts."""
    b, _, L = u.shape
    S, _, Hh = Bbar.shape
    Br = torch.cat([Bbar.real, Bbar.imag], dim=1)  # (S, 2P, Hh)
    return torch.matmul(Br, u.reshape(b, S, Hh, L))


def input_projection(u: torch.Tensor, Bbar: torch.Tensor) -> torch.Tensor:
    """Bbar u per head: u (b, H, L) real, Bbar (S, P, Hh) -> (b, S, P, L) complex."""
    v = projection_planes(u, Bbar)
    P = Bbar.shape[1]
    return torch.complex(v[:, :, :P], v[:, :, P:])


def readout_planes(x: torch.Tensor, C: torch.Tensor, factor: float) -> torch.Tensor:
    """factor Re(C x) per head from the states' real planes: x (b, S, 2P, L) ([Re; Im], as
    `projection_planes`), C (S, Mh, P) -> (b, M, L)."""
    b, S, _, L = x.shape
    # 2 Re(C x) = 2 (C_re x_re - C_im x_im): real matmuls are much faster than complex einsum on
    # CPU; the factor goes into the small C rather than the (b, M, L) output.
    Cr = torch.cat([C.real, -C.imag], dim=-1)  # (S, Mh, 2P)
    if factor != 1.0:
        Cr = factor * Cr
    return torch.matmul(Cr, x).reshape(b, S * C.shape[1], L)


def readout(x: torch.Tensor, C: torch.Tensor, factor: float) -> torch.Tensor:
    """factor Re(C x) per head: x (b, S, P, L) complex, C (S, Mh, P) -> (b, M, L)."""
    return readout_planes(torch.cat([x.real, x.imag], dim=2), C, factor)


def state_convolution(
    u: torch.Tensor,
    Bbar: torch.Tensor,
    C: torch.Tensor,
    factor: float,
    spectrum: torch.Tensor,
    state: torch.Tensor | None = None,
    free: torch.Tensor | None = None,
    want_state: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The states x = V * (Bbar u) by FFT and y = factor Re(C x), a few samples at a time.

    u: (b, H, L), spectrum: (S, P, 2L) from `state_spectrum`; state x_{-1} (b, S, P) with `free`
    (S, P, L) = Abar^(k+1) adds the free response. -> (y (b, M, L), x_{L-1} (b, S, P) or None).
    The (samples, S, P, 2L) complex intermediates are made for as many samples as fit in
    STATE_CHUNK_BYTES: past the CPU's caches every pass over them (FFTs, products, copies) is
    memory-bound, and one big batch was 1.2x to 2.6x slower (CPU, forward+backward, H=256, heads 2 to 16).
    """
    b, _, L = u.shape
    n = 2 * L
    per_sample = spectrum.shape[0] * spectrum.shape[1] * n * spectrum.element_size()
    # On a GPU the whole batch goes at once: its memory is not a cache hierarchy a chunk could stay in.
    chunk = max(1, STATE_CHUNK_BYTES // per_sample) if u.device.type == "cpu" else b
    ys, finals = [], []
    # split, not u[start:stop]: the backward of a slice zero-fills a gradient of the whole batch
    # for every chunk (b / chunk full-size fills, 27 ms each at b=32, H=64, L=1460); split's is one cat.
    states = state.split(chunk) if state is not None else [None] * len(range(0, b, chunk))
    for u_part, state_part in zip(u.split(chunk), states):
        v = input_projection(u_part, Bbar)
        x = torch.fft.ifft(torch.fft.fft(v, n=n) * spectrum, n=n)[..., :L]
        if state_part is not None:  # free response of x_{-1}: Abar^(k+1) x_{-1}
            x = x + free * state_part[..., None]
        ys.append(readout(x, C, factor))
        if want_state:
            finals.append(x[..., -1])
    y = ys[0] if len(ys) == 1 else torch.cat(ys)
    return y, ((finals[0] if len(finals) == 1 else torch.cat(finals)) if want_state else None)


def states_by_recurrence(u: torch.Tensor) -> bool:
    """Whether the state-first path runs the recurrence (`recurrent_state_convolution`) rather than
    FFTs for input u: on a CPU, where a multiply-add a step beats two FFTs of size 2L a sequence;
    a GPU runs the FFTs, whose parallel depth is log L rather than L."""
    return u.device.type == "cpu"


def recurrent_state_convolution(
    u: torch.Tensor,
    Bbar: torch.Tensor,
    C: torch.Tensor,
    factor: float,
    abar: torch.Tensor,
    abar_back: torch.Tensor | None = None,
    average: bool = False,
    state: torch.Tensor | None = None,
    want_state: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`state_convolution` by the recurrence: x_k = Abar x_{k-1} + Bbar u_k from x_{-1} = state (or 0),
    y = factor Re(C x). u: (b, H, L), Bbar (S, P, Hh), C (S, Mh, P), abar (S, P).
    With `abar_back` also the anti-causal states x_k = Abar_back x_{k+1} + Bbar u_k added (both count
    u_k, as the two-sided kernel counts its lag-0 tap twice), halved when `average` (LDNN).
    -> (y (b, M, L), x_{L-1} (b, S, P) or None)."""
    v = projection_planes(u, Bbar)  # real planes throughout: no complex tensor is formed
    x = diagonal_recurrence(v, abar, state)
    if abar_back is not None:
        x = x + diagonal_recurrence(v, abar_back, reverse=True)
        if average:
            x = x / 2
    if not want_state:
        return readout_planes(x, C, factor), None
    P = abar.shape[-1]
    return readout_planes(x, C, factor), torch.complex(x[:, :, :P, -1], x[:, :, P:, -1])


def head_kernels(
    Bbar: torch.Tensor, C: torch.Tensor, log_abar: torch.Tensor, factor: float, length: int
) -> torch.Tensor:
    """Per-head kernels K[s, m, h, l] = factor Re(C_s Abar_s^l Bbar_s)[m, h]: (S, Mh, Hh, length) real,
    from Bbar (S, P, Hh), C (S, Mh, P), log Abar (S, P).

    Built as one real GEMM per head over chunks of the lag (see `vandermonde`), not from
    S * P * length complex exponentials.
    """
    S, P, Hh = Bbar.shape
    Mh = C.shape[1]
    W = (factor * C).transpose(1, 2)[:, :, :, None] * Bbar[:, :, None, :]  # (S, P, Mh, Hh)
    return vandermonde(W.reshape(S, P, Mh * Hh), log_abar, length).reshape(S, Mh, Hh, length)


def spectral_convolution(u: torch.Tensor, kernel_spectrum: torch.Tensor, n: int) -> torch.Tensor:
    """y = K * u by FFT with per-head kernel spectra (S, Mh, Hh, n/2 + 1) (the rfft of size n of
    kernels of at most n - L + 1 taps): u (b, H, L) -> (b, M, L)."""
    b, _, L = u.shape
    S, Mh, Hh, _ = kernel_spectrum.shape
    if b == 0:  # an empty batch: MKL's FFT refuses it (the kernel's spectrum kept in the graph)
        return u.new_zeros((0, S * Mh, L)) + 0 * kernel_spectrum.real.sum()
    U = torch.fft.rfft(u, n=n)  # (b, H, F)
    F = U.shape[-1]
    if Mh == 1 and Hh == 1:  # stacked SISO (S4D): one product per channel
        Y = U * kernel_spectrum.reshape(S, F)
    else:
        Up = U.reshape(b, S, Hh, F).permute(0, 1, 3, 2)  # (b, S, F, Hh)
        Y = SpectralProduct.apply(kernel_spectrum.permute(0, 3, 1, 2).contiguous(), Up)  # (b, S, F, Mh)
        Y = Y.permute(0, 1, 3, 2).reshape(b, S * Mh, F)
    return torch.fft.irfft(Y, n=n)[..., :L]


def free_response(state: torch.Tensor, shifted_powers: torch.Tensor, C: torch.Tensor, factor: float) -> torch.Tensor:
    """factor Re(C Abar^(k+1) x_{-1}) for k < L: state (b, S, P), shifted_powers (S, 2P, L) real
    ([Re; -Im] of Abar^(k+1)), C (S, Mh, P) -> (b, M, L). One GEMM per sample (batch-independent results)."""
    w = (factor * C)[None] * state[:, :, None, :]  # (b, S, Mh, P)
    w = torch.cat([w.real, w.imag], dim=-1)  # (b, S, Mh, 2P)
    y = torch.stack([torch.bmm(wi, shifted_powers) for wi in w])  # (b, S, Mh, L)
    return y.reshape(state.shape[0], -1, y.shape[-1])


def final_state(
    u: torch.Tensor,
    state: torch.Tensor | None,
    reversed_powers: torch.Tensor,
    Bbar: torch.Tensor,
    abar_length: torch.Tensor,
) -> torch.Tensor:
    """x_{L-1} = Abar^L x_{-1} + sum_k Abar^(L-1-k) Bbar u_k. u (b, H, L), reversed_powers (S, L, 2P)
    real ([Re, Im] of Abar^(L-1-k)), Bbar (S, P, Hh), abar_length: Abar^L (S, P) -> (b, S, P) complex."""
    b, _, L = u.shape
    S, P, Hh = Bbar.shape
    uh = u.reshape(b, S, Hh, L)
    q = torch.stack([torch.bmm(ui, reversed_powers) for ui in uh])  # (b, S, Hh, 2P)
    q = torch.complex(q[..., :P], q[..., P:])
    x = (Bbar.transpose(1, 2)[None] * q).sum(2)  # (b, S, P)
    return x if state is None else x + abar_length * state


def state_powers(log_abar: torch.Tensor, L: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What a causal pass from a state needs of Abar: ([Re; -Im] of Abar^(k+1), (S, 2P, L)) for
    `free_response`, ([Re, Im] of Abar^(L-1-k), (S, L, 2P)) for `final_state`, and Abar^L (S, P)."""
    pw = powers(log_abar, L + 1)  # Abar^0 .. Abar^L
    return (
        torch.cat([pw[..., 1:].real, -pw[..., 1:].imag], dim=1),
        torch.cat([pw[..., :L].real, pw[..., :L].imag], dim=1).flip(-1).transpose(1, 2),
        pw[..., L],
    )


__all__ = [
    "STATE_CHUNK_BYTES",
    "chunk_sizes",
    "chunk_exponentials",
    "powers",
    "vandermonde",
    "two_sided_kernel",
    "state_spectrum",
    "projection_planes",
    "input_projection",
    "readout_planes",
    "readout",
    "state_convolution",
    "states_by_recurrence",
    "recurrent_state_convolution",
    "head_kernels",
    "spectral_convolution",
    "free_response",
    "final_state",
    "state_powers",
]
