"""Initializations of the diagonal SSM (docs/concepts.md#initialization-hippo-its-normal-part-and-ptd).

All matrix work is float64 numpy/torch, done once at construction. Each
initializer returns the continuous-time diagonal system of ONE head:

    Lambda: (P,) complex,  B: (P, H) complex,  C: (M, P) complex

where P = N/2 conjugate-pair representatives when `conj_sym` (output
y = 2 Re(C x) + D u) and P = N otherwise (output y = Re(C x) + D u).
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from .._warnings import caller_stacklevel

INITS = ("legs", "lin", "inv", "half", "randn", "ptd")


# ---------------------------------------------------------------- HiPPO matrices
def hippo_legs(N: int) -> tuple[np.ndarray, np.ndarray]:
    """HiPPO-LegS (LSSL, S4): A: (N, N), B: (N,).

    A_nk = -sqrt(2n+1) sqrt(2k+1) for n > k, -(n+1) for n = k, 0 for n < k;  B_n = sqrt(2n+1).
    """
    n = np.arange(N, dtype=np.float64)
    r = np.sqrt(2.0 * n + 1.0)
    A = -np.tril(np.outer(r, r), -1) - np.diag(n + 1.0)
    return A, r.copy()


def hippo_legs_normal(N: int) -> np.ndarray:
    """Normal part of HiPPO-LegS, A^N = A + p p^T with p_n = sqrt(n + 1/2): (N, N).

    A^N = -I/2 + S with S skew-symmetric (LDNN eq. C.30; eSSM eqs. 17/35 misprint
    a minus sign in front of all three cases, which would make it symmetric).
    """
    A, _ = hippo_legs(N)
    p = np.sqrt(np.arange(N, dtype=np.float64) + 0.5)
    return A + np.outer(p, p)


def diagonalize_legs_normal(N: int) -> tuple[np.ndarray, np.ndarray]:
    """Eigen-decomposition of A^N: Lambda (N,) = -1/2 + i w, V (N, N) unitary.

    Done through the Hermitian matrix -iS with numpy.linalg.eigh, which is stable,
    unlike a general eig of A^N. Cached (every head of every layer of size N shares it);
    copies are returned so callers may modify them.
    """
    Lambda, V = _diagonalize_legs_normal_cached(int(N))
    return Lambda.copy(), V.copy()


@functools.lru_cache(maxsize=16)
def _diagonalize_legs_normal_cached(N: int) -> tuple[np.ndarray, np.ndarray]:
    A_normal = hippo_legs_normal(N)
    S = A_normal + 0.5 * np.eye(N)
    w, V = np.linalg.eigh(-1j * S)
    return -0.5 + 1j * w, V


# ---------------------------------------------------------------- PTD
@dataclass(frozen=True)
class PTDResult:
    """Perturb-then-diagonalize of a real matrix A: A + E = V diag(Lambda) V^-1."""

    Lambda: np.ndarray  # (N,) complex
    V: np.ndarray  # (N, N) complex, unit-norm columns
    V_inv: np.ndarray  # (N, N) complex
    E: np.ndarray  # (N, N) real perturbation
    condition_number: float  # cond_2(V)
    relative_size: float  # ||E||_2 / ||A||_2


def ptd_perturbation(
    A: np.ndarray,
    *,
    eps: float = 1e-4,
    gamma: float = 1e3,
    steps: int = 200,
    max_relative_size: float = 0.1,
    seed: int = 0,
) -> PTDResult:
    """Find E so that A + E has a well-conditioned eigenvector matrix (PTD paper, sec. 4).

    Starts from a Ginibre perturbation E0 = eps ||A|| G / sqrt(N) (its Theorem 4
    bounds cond(V) with high probability) and improves it by gradient descent on the
    paper's soft-constrained objective (its eq. 12), written scale-free:

        log cond(V_{A+E}) + gamma ||E||_2 / ||A||_2 + sum_j relu(Re lambda_j)

    log cond is a monotone stand-in for cond that keeps the step sizes sane; the last
    term (ours) penalizes eigenvalues the perturbation moves right of the imaginary axis,
    which the layer cannot use (a penalty, not a guarantee: a defective 2 x 2 Jordan block
    ends at Re lambda = +0.013; the layers' lambda_enforce keeps Re lambda < 0 whatever the
    start). The best iterate with ||E||/||A|| <= max_relative_size is returned.
    `eps` is the exposed perturbation size; gamma trades conditioning against it. The
    defaults keep cond(V) < 1e3 with ||E||/||A|| < 1e-3 for N = 16..128 (measured), small
    enough for the transfer function to stay close to HiPPO's (the paper's Theorem 3).
    """
    if eps <= 0:
        raise ValueError(f"PTD perturbation size eps must be > 0, got {eps}")
    A = np.asarray(A, dtype=np.float64)
    N = A.shape[0]
    norm_A = float(np.linalg.norm(A, 2))
    rng = np.random.default_rng(seed)
    E0 = eps * norm_A * rng.standard_normal((N, N)) / math.sqrt(N)

    A_t = torch.from_numpy(A)
    E = torch.from_numpy(E0.copy()).requires_grad_(True)
    optimizer = torch.optim.Adam([E], lr=0.05 * eps * norm_A / math.sqrt(N))

    def objective(E_t: torch.Tensor) -> tuple[torch.Tensor, float]:
        w, V = torch.linalg.eig(A_t + E_t)
        V = V / torch.linalg.vector_norm(V, dim=0, keepdim=True)
        s = torch.linalg.svdvals(V)
        rel = torch.linalg.matrix_norm(E_t, ord=2) / norm_A
        loss = torch.log(s[0] / s[-1]) + gamma * rel + torch.relu(w.real).sum()
        return loss, float(rel.detach())

    best_loss, best_E = math.inf, E0
    with torch.enable_grad():
        for _ in range(steps + 1):
            loss, rel = objective(E)
            if rel <= max_relative_size and float(loss.detach()) < best_loss:
                best_loss = float(loss.detach())
                best_E = E.detach().numpy().copy()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    Lambda, V = np.linalg.eig(A + best_E)
    V = V / np.linalg.norm(V, axis=0, keepdims=True)
    return PTDResult(
        Lambda=Lambda,
        V=V,
        V_inv=np.linalg.inv(V),
        E=best_E,
        condition_number=float(np.linalg.cond(V)),
        relative_size=float(np.linalg.norm(best_E, 2) / norm_A),
    )


@functools.lru_cache(maxsize=16)
def _ptd_legs_cached(N: int, eps: float, gamma: float, steps: int) -> PTDResult:
    # The perturbation is deterministic (fixed seed), so layers of equal size share it.
    A, _ = hippo_legs(N)
    return ptd_perturbation(A, eps=eps, gamma=gamma, steps=steps)


def ptd_legs(N: int, eps: float = 1e-4, gamma: float = 1e3, steps: int = 200) -> PTDResult:
    """PTD of the full HiPPO-LegS matrix of size N (cached)."""
    return _ptd_legs_cached(int(N), float(eps), float(gamma), int(steps))


# ---------------------------------------------------------------- conjugate halves
def conjugate_half(Lambda: np.ndarray, V: np.ndarray, V_inv: np.ndarray, P: int | None = None):
    """Keep one representative per conjugate pair of a real system's modes.

    Returns (Lambda (P,), V (N, P), V_inv (P, N), c_scale (P,)). A pair is kept
    through its Im > 0 member and contributes 2 Re(c x). A real mode also fits one
    slot, exactly, with c halved (c_scale = 1/2). P=None keeps every mode: P is then
    pairs + real modes, N/2 plus half the number of real modes (exact). With a given P
    that real modes would exceed, the fastest-decaying real modes are dropped (they carry
    the least memory) with a warning; the kept system then only approximates the full one.
    """
    tol = 1e-9 * max(1.0, float(np.abs(Lambda).max()))
    upper = np.flatnonzero(Lambda.imag > tol)
    real = np.flatnonzero(np.abs(Lambda.imag) <= tol)
    if P is None:
        P = len(upper) + len(real)
    room = P - len(upper)
    if room < 0:
        raise ValueError(f"{len(upper)} conjugate pairs do not fit in {P} modes")
    if len(real) > room:
        warnings.warn(
            f"{len(real)} real eigenvalues and {len(upper)} conjugate pairs exceed {P} conjugate-symmetric "
            f"modes; dropping the {len(real) - room} fastest-decaying real modes",
            stacklevel=caller_stacklevel(),
        )
        real = real[np.argsort(-Lambda.real[real])][:room]
    keep = np.concatenate([upper, real])
    c_scale = np.concatenate([np.ones(len(upper)), np.full(len(real), 0.5)])
    order = np.argsort(-Lambda.imag[keep], kind="stable")
    keep, c_scale = keep[order], c_scale[order]
    return Lambda[keep], V[:, keep], V_inv[keep, :], c_scale


# ---------------------------------------------------------------- per-head init
def _randn(shape, generator, std=1.0, dtype=torch.float64) -> torch.Tensor:
    return torch.randn(shape, generator=generator, dtype=dtype) * std


def initialize_head(
    init: str,
    d_state: int,
    d_input: int,
    d_output: int,
    *,
    conj_sym: bool = True,
    generator: torch.Generator | None = None,
    ptd_eps: float = 1e-4,
    ptd_gamma: float = 1e3,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Lambda (P,), B (P, H), C (M, P) complex128 for one head of `d_state` = N states.

    P = N without conj_sym; with it N/2, except for ptd, whose perturbed LegS can have real
    eigenvalues: each takes a slot of its own, so P = N/2 + (real modes)/2 and the stored
    system is the PTD system exactly (N = 16: 2 real modes, P = 9).

    legs:  normal part of HiPPO-LegS (S4D-LegS / S5 / eSSM); B, C projected on its
           eigenvectors as in S5 (B = V^-1 B0, C = C0 V; B0 is HiPPO's B for SISO heads).
    ptd:   perturb-then-diagonalize of the full HiPPO-LegS, projected the same way.
    lin:   S4D-Lin  lambda_n = -1/2 + i pi n.
    inv:   S4D-Inv  lambda_n = -1/2 + i (N/pi)(N/(2n+1) - 1).
    half:  LDNN     lambda_n = -1/2 (real).
    randn: LDNN     random Re (through the enforcing function later) and Im.
    """
    if init not in INITS:
        raise ValueError(f"unknown init {init!r}; choose one of {INITS}")
    N, H, M = d_state, d_input, d_output
    P = N // 2 if conj_sym else N
    gen = generator

    if init in ("legs", "ptd"):
        if init == "legs":
            Lambda_full, V = diagonalize_legs_normal(N)
            V_inv = V.conj().T
        else:
            result = ptd_legs(N, eps=ptd_eps, gamma=ptd_gamma)
            Lambda_full, V, V_inv = result.Lambda, result.V, result.V_inv
        c_scale = np.ones(N)
        if conj_sym:
            Lambda_full, V, V_inv, c_scale = conjugate_half(Lambda_full, V, V_inv)
        if H == 1:
            B0 = hippo_legs(N)[1][:, None]
        else:
            B0 = _randn((N, H), gen, std=1.0 / math.sqrt(H)).numpy()
        C0 = _randn((M, N), gen, std=1.0 / math.sqrt(N)).numpy()
        B = V_inv @ B0
        C = (C0 @ V) * c_scale[None, :]
        Lambda = torch.from_numpy(np.asarray(Lambda_full, dtype=np.complex128))
        return Lambda, torch.from_numpy(B.astype(np.complex128)), torch.from_numpy(C.astype(np.complex128))

    n = torch.arange(P, dtype=torch.float64)
    if init == "lin":
        Lambda = torch.complex(torch.full((P,), -0.5, dtype=torch.float64), math.pi * n)
    elif init == "inv":
        Lambda = torch.complex(torch.full((P,), -0.5, dtype=torch.float64), (N / math.pi) * (N / (2 * n + 1) - 1))
    elif init == "half":
        Lambda = torch.complex(torch.full((P,), -0.5, dtype=torch.float64), torch.zeros(P, dtype=torch.float64))
    else:  # randn: Re through a positive map so it starts stable; Im spread like S4D-Lin
        Lambda = torch.complex(-torch.exp(_randn((P,), gen, std=0.5)) * 0.5, _randn((P,), gen, std=math.pi))
    # S4D: B = 1 for SISO; random for MIMO. C: complex normal with unit total variance.
    if H == 1:
        B = torch.ones((P, 1), dtype=torch.complex128)
    else:
        B = torch.complex(_randn((P, H), gen, std=1.0 / math.sqrt(H)), torch.zeros(P, H, dtype=torch.float64))
    C = torch.complex(_randn((M, P), gen), _randn((M, P), gen)) * math.sqrt(0.5 / P)
    return Lambda, B, C
