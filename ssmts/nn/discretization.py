"""Discretization of a diagonal continuous-time SSM (docs/concepts.md#discretization-and-the-step-size).

Every function works per state: Lambda, Delta: (..., P). The input matrix is
discretized as Bbar = gamma[..., None] * B, so only the per-state coefficient
gamma is returned; C and D are unchanged by every method here.
"""

from __future__ import annotations

import warnings

import torch

from .._warnings import caller_stacklevel

DISCRETIZATIONS = ("zoh", "bilinear", "gbt")


def check_discretization(method: str, alpha: float) -> None:
    if method not in DISCRETIZATIONS:
        raise ValueError(f"unknown discretization {method!r}; choose one of {DISCRETIZATIONS}")
    if method == "gbt" and not 0.0 <= float(alpha) <= 1.0:
        raise ValueError(f"gbt alpha must lie in [0, 1] (0 forward Euler, 1/2 bilinear, 1 backward Euler), got {alpha}")


def warn_unless_a_stable(method: str, alpha: float) -> None:
    """ZOH and GBT with alpha >= 1/2 (bilinear, backward Euler) map every Re(lambda) < 0 inside the unit
    circle; GBT with alpha < 1/2 (forward Euler at 0) only while |1 + (1 - alpha) Delta lambda| <
    |1 - alpha Delta lambda|, so a layer with fast modes or long steps grows with the sequence length."""
    if method == "gbt" and float(alpha) < 0.5:
        warnings.warn(
            f"discretization='gbt' with alpha={alpha} < 1/2 is not A-stable: a mode with Re(lambda) < 0 decays "
            "only while |1 + (1 - alpha) Delta lambda| < |1 - alpha Delta lambda| (small steps, slow modes), and "
            "otherwise grows with the sequence length; alpha >= 1/2 or 'zoh' is stable for every step",
            UserWarning,
            stacklevel=caller_stacklevel(),
        )


def discretize(
    Lambda: torch.Tensor, Delta: torch.Tensor, method: str = "zoh", alpha: float = 0.5
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (Abar, gamma) with Abar = diag of the discrete state matrix, Bbar = gamma * B.

    Lambda: (..., P) complex; Delta: (..., P) real, > 0.
    ZOH:        Abar = exp(Lambda Delta),  gamma = (exp(Lambda Delta) - 1) / Lambda
    GBT(alpha): Abar = (1 + (1 - alpha) Delta Lambda) / (1 - alpha Delta Lambda),
                gamma = Delta / (1 - alpha Delta Lambda)
    bilinear is GBT with alpha = 1/2.
    """
    check_discretization(method, alpha)
    dt_lambda = Lambda * Delta
    if method == "zoh":
        Abar = torch.exp(dt_lambda)
        # expm1 keeps precision for |Lambda Delta| << 1, where exp(.) - 1 cancels.
        gamma = _expm1_complex(dt_lambda) / Lambda
        return Abar, gamma
    if method == "bilinear":
        alpha = 0.5
    denominator = 1.0 - alpha * dt_lambda
    Abar = (1.0 + (1.0 - alpha) * dt_lambda) / denominator
    gamma = Delta / denominator
    return Abar, gamma


def _expm1_complex(z: torch.Tensor) -> torch.Tensor:
    """exp(z) - 1 for complex z without cancellation: expm1(a) cos b - 2 sin^2(b/2) + i e^a sin b."""
    a, b = z.real, z.imag
    real = torch.expm1(a) * torch.cos(b) - 2.0 * torch.sin(b / 2.0) ** 2
    imag = torch.exp(a) * torch.sin(b)
    return torch.complex(real, imag)


def log_transition(Abar: torch.Tensor, Lambda: torch.Tensor, Delta: torch.Tensor, method: str) -> torch.Tensor:
    """log(Abar), used to build the kernel Abar^l = exp(l log Abar) for l = 0..L-1.

    For ZOH this is exactly Lambda * Delta. For GBT the principal complex log is
    used; any branch gives the same integer powers. The modulus is floored so that
    an exactly zero Abar (forward Euler at Delta Lambda = -1) gives a zero kernel
    after l = 0 instead of NaN.
    """
    if method == "zoh":
        return Lambda * Delta
    tiny = torch.finfo(Abar.real.dtype).tiny
    modulus = Abar.abs().clamp_min(tiny)
    return torch.complex(torch.log(modulus), torch.angle(Abar))


def discretize_dense(
    A: torch.Tensor, B: torch.Tensor, Delta: torch.Tensor, method: str = "zoh", alpha: float = 0.5
) -> tuple[torch.Tensor, torch.Tensor]:
    """(Abar (N, N), Bbar (N, H)) of a dense real system dx/dt = A x + B u with one step Delta.

    A: (N, N), B: (N, H), Delta: scalar tensor > 0. The same rules as `discretize`, for a
    matrix that is not diagonal (the HiPPO reference of ssmts.nn.dense):
    ZOH:        Abar = exp(Delta A), Bbar = A^-1 (exp(Delta A) - I) B, from one matrix
                exponential of [[A, B], [0, 0]] Delta (Van Loan), so A need not be invertible.
    GBT(alpha): Abar = (I - alpha Delta A)^-1 (I + (1 - alpha) Delta A),
                Bbar = (I - alpha Delta A)^-1 Delta B.
    """
    check_discretization(method, alpha)
    N, H = B.shape
    if method == "zoh":
        block = torch.zeros(N + H, N + H, dtype=A.dtype, device=A.device)
        block[:N, :N], block[:N, N:] = A, B
        E = torch.linalg.matrix_exp(block * Delta)
        return E[:N, :N], E[:N, N:]
    if method == "bilinear":
        alpha = 0.5
    eye = torch.eye(N, dtype=A.dtype, device=A.device)
    left = eye - alpha * Delta * A
    Abar = torch.linalg.solve(left, eye + (1.0 - alpha) * Delta * A)
    Bbar = torch.linalg.solve(left, Delta * B)
    return Abar, Bbar
