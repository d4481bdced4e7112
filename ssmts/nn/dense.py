"""A dense (non-diagonal) state-space layer: the HiPPO reference of the PTD experiments.

The diagonal layers (ssmts.nn.ssm) start from the *normal part* of HiPPO-LegS (S4D, S5) or
from a perturbed-then-diagonalized LegS (PTD), because LegS itself is not stably
diagonalizable. This layer keeps LegS whole, the system S4 parametrizes in DPLR form:

    x_k = Abar x_{k-1} + Bbar u_k,   y_k = C x_k + D u_k,   x_{-1} = 0

with a real N x N matrix A (HiPPO-LegS at initialization, learnable), B: (N, H), C: (M, N),
one step Delta, discretized as in ssmts.nn.discretization. It trains by FFT convolution with
the kernel K_l = C Abar^l Bbar, whose powers are built by doubling (log2 L products of N x N
matrices); its cost is O(N^2 L), which is why it is a reference for small N and not a default.

Shapes: u: (batch, H, L) -> y: (batch, M, L); state: (batch, N) real.

`diagonal_system` goes the other way: a given dense system (A, B, C, D) in the diagonal basis of A
(A diagonalized, or perturbed-then-diagonalized when its eigenvectors are ill-conditioned), the
parameters of the diagonal layer `SSM.from_matrices` builds.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from torch import nn

from .._warnings import caller_stacklevel
from .checks import require_tensor
from .discretization import check_discretization, discretize_dense, warn_unless_a_stable
from .feedthrough import add_feedthrough, feedthrough_mode, initial_feedthrough
from .init import hippo_legs, ptd_perturbation
from .resampling import DeltaScaling

DENSE_INITS = ("legs",)


class DenseSSM(DeltaScaling, nn.Module):
    """Causal dense real SSM layer, A initialized to HiPPO-LegS.

    Args:
        d_model: H, input channels.
        d_state: N, state size.
        d_output: M, output channels (default H).
        init: "legs" (HiPPO-LegS A; B and C random as in the diagonal `legs` init before its
            projection on the eigenvectors: B ~ N(0, 1/H), C ~ N(0, 1/N); B = HiPPO's B when H = 1).
        discretization: "zoh", "bilinear" or "gbt" (with `alpha`).
        dt_min, dt_max: log-uniform range of the initial Delta (one Delta for the layer).
        learn_A: False keeps A at its initial value (LSSL-fixed).
        D: feed-through (ssmts.nn.feedthrough): "diagonal" (default when M == H), "full", "identity" or "none".
    """

    def __init__(
        self,
        d_model: int,
        d_state: int = 64,
        *,
        d_output: int | None = None,
        init: str = "legs",
        discretization: str = "zoh",
        alpha: float = 0.5,
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
        learn_A: bool = True,
        D: str | None = None,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        H, N = int(d_model), int(d_state)
        M = H if d_output is None else int(d_output)
        for name, value in (("d_model", H), ("d_state", N), ("d_output", M)):
            if value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value}")
        if init not in DENSE_INITS:
            raise ValueError(f"unknown init {init!r} for a dense SSM; choose one of {DENSE_INITS}")
        check_discretization(discretization, alpha)
        warn_unless_a_stable(discretization, alpha)
        if not (0 < dt_min <= dt_max):
            raise ValueError(f"need 0 < dt_min <= dt_max, got dt_min={dt_min}, dt_max={dt_max}")
        D = feedthrough_mode(D, M, H)
        self.d_model, self.d_state, self.d_output = H, N, M
        self.init, self.discretization, self.alpha, self.D_mode = init, discretization, float(alpha), D
        self.dt_scale = 1.0
        self._delta_factor = 1.0  # set only inside ssmts.nn.scaled_delta

        A, b0 = hippo_legs(N)
        B = (
            b0[:, None]
            if H == 1
            else torch.randn(N, H, generator=generator, dtype=torch.float64).numpy() / math.sqrt(H)
        )
        C = torch.randn(M, N, generator=generator, dtype=torch.float64).numpy() / math.sqrt(N)
        self.A = nn.Parameter(torch.from_numpy(A).float(), requires_grad=bool(learn_A))
        self.B = nn.Parameter(torch.from_numpy(np.ascontiguousarray(B)).float())
        self.C = nn.Parameter(torch.from_numpy(C).float())
        u01 = float(torch.rand((), generator=generator, dtype=torch.float64))
        self.log_dt = nn.Parameter(torch.tensor(math.log(dt_min) + u01 * (math.log(dt_max) - math.log(dt_min))))
        self.D = initial_feedthrough(D, M, H, generator)  # None registers no parameter

    # ------------------------------------------------------------ parameters
    def discrete(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(Abar (N, N), Bbar (N, H)) of the current parameters."""
        return discretize_dense(self.A, self.B, self.Delta, self.discretization, self.alpha)

    def ssm_parameters(self) -> list[nn.Parameter]:
        """The parameters of the continuous system that get the SSM learning rate (A, B, Delta)."""
        return [p for p in (self.A, self.B, self.log_dt) if p.requires_grad]

    # ------------------------------------------------------------ compute
    def _check_input(self, u: torch.Tensor) -> None:
        require_tensor(u, type(self).__name__)
        if u.dim() != 3 or u.shape[1] != self.d_model:
            raise ValueError(f"expected u of shape (batch, {self.d_model}, L), got {tuple(u.shape)}")
        if u.dtype != self.A.dtype:
            raise ValueError(f"u has dtype {u.dtype} but the layer has {self.A.dtype}; convert one of them")

    @staticmethod
    def _state_powers(Abar: torch.Tensor, X: torch.Tensor, length: int) -> torch.Tensor:
        """Abar^l X for l < length: (length, N, R), by doubling (log2 length products)."""
        powers, square = X[None], Abar
        while powers.shape[0] < length:
            powers = torch.cat([powers, square @ powers], dim=0)
            square = square @ square
        return powers[:length]

    def kernel(self, length: int) -> torch.Tensor:
        """Impulse response of the state part (without D): K[:, :, l] = C Abar^l Bbar, (M, H, length)."""
        Abar, Bbar = self.discrete()
        return torch.einsum("mn,lnh->mhl", self.C, self._state_powers(Abar, Bbar, length))

    def forward(self, u: torch.Tensor, state: torch.Tensor | None = None, *, return_state: bool = False):
        """u: (batch, H, L) -> y: (batch, M, L), by FFT convolution with the kernel.

        state: (batch, N) state x_{-1} to continue from; return_state: also return x_{L-1}.
        """
        self._check_input(u)
        b, _, L = u.shape
        Abar, Bbar = self.discrete()
        powers = self._state_powers(Abar, Bbar, L)  # (L, N, H): Abar^l Bbar
        K = torch.einsum("mn,lnh->mhl", self.C, powers)
        n = 2 * L
        y = torch.fft.irfft(torch.einsum("bhf,mhf->bmf", torch.fft.rfft(u, n=n), torch.fft.rfft(K, n=n)), n=n)[..., :L]
        if state is not None:
            self._check_state(state, b)
            # free response C Abar^(k+1) x_{-1}
            free = self._state_powers(Abar, (Abar @ state.T), L)  # (L, N, b)
            y = y + torch.einsum("mn,lnb->bml", self.C, free)
        y = self._feedthrough(y, u)
        if not return_state:
            return y
        # x_{L-1} = Abar^L x_{-1} + sum_k Abar^(L-1-k) Bbar u_k
        x = torch.einsum("lnh,bhl->bn", powers.flip(0), u)
        if state is not None:
            x = x + free[-1].T
        return y, x

    def _feedthrough(self, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return add_feedthrough(y, self.D_mode, self.D, u)

    def _check_state(self, state: torch.Tensor, batch: int) -> None:
        if tuple(state.shape) != (batch, self.d_state) or state.dtype != self.A.dtype:
            raise ValueError(
                f"state must be {self.A.dtype} of shape {(batch, self.d_state)}, got {tuple(state.shape)} {state.dtype}"
            )

    def initial_state(self, batch: int, device=None) -> torch.Tensor:
        """Zero state x_{-1}: (batch, N)."""
        return torch.zeros(
            batch, self.d_state, dtype=self.A.dtype, device=device if device is not None else self.A.device
        )

    def step(self, u_t: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step of the recurrence. u_t: (batch, H), state: (batch, N) -> (y_t (batch, M), state)."""
        if u_t.dim() != 2 or u_t.shape[1] != self.d_model:
            raise ValueError(f"step expects u_t of shape (batch, {self.d_model}), got {tuple(u_t.shape)}")
        self._check_state(state, u_t.shape[0])
        Abar, Bbar = self.discrete()
        state = state @ Abar.T + u_t @ Bbar.T
        y = state @ self.C.T
        return self._feedthrough(y[..., None], u_t[..., None])[..., 0], state

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, d_state={self.d_state}, d_output={self.d_output}, init={self.init!r}, "
            f"discretization={self.discretization!r}, D={self.D_mode!r}, learn_A={self.A.requires_grad}"
        )


def diagonal_system(
    A, B, C, D=None, *, max_condition: float = 1e8, ptd_eps: float = 1e-6
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """The dense real system (A: NxN, B: NxH, C: MxN, D: MxH) in the diagonal basis of A:
    (Lambda (N,) complex, V^-1 B (N, H) complex, C V (M, N) complex, D (M, H) or None), float64.

    A = V Lambda V^-1 with unit-norm eigenvectors; all N complex modes are kept, so that
    y = Re(C~ x~) is exact even when A has real eigenvalues. If cond(V) > max_condition, A is
    perturbed-then-diagonalized instead (PTD) with a warning; the system is then approximated.
    The fallback's `ptd_eps` is smaller than the trainable init's: here fidelity matters more
    than float32 conditioning (HiPPO-LegS N=32: eps=1e-6 gives cond 3.6e4 and a 6e-4 relative
    output error). Refuses non-finite matrices, mismatched shapes and Re(Lambda) >= 0.
    """
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be square (N, N), got {A.shape}")
    N = A.shape[0]
    if B.ndim != 2 or B.shape[0] != N:
        raise ValueError(f"B must have shape (N={N}, H), got {B.shape}")
    if C.ndim != 2 or C.shape[1] != N:
        raise ValueError(f"C must have shape (M, N={N}), got {C.shape}")
    H, M = B.shape[1], C.shape[0]
    if D is not None:
        D = np.asarray(D, dtype=np.float64)
        if D.shape != (M, H):
            raise ValueError(f"D must have shape (M={M}, H={H}), got {D.shape}")
    if not np.all(np.isfinite(A)) or not np.all(np.isfinite(B)) or not np.all(np.isfinite(C)):
        raise ValueError("A, B and C must be finite")

    Lambda, V = np.linalg.eig(A)
    V = V / np.linalg.norm(V, axis=0, keepdims=True)
    condition = float(np.linalg.cond(V))
    if condition > max_condition:
        result = ptd_perturbation(A, eps=ptd_eps)
        warnings.warn(
            f"eigenvector matrix of A is ill-conditioned (cond = {condition:.3g} > {max_condition:.3g}); "
            f"using perturb-then-diagonalize (cond = {result.condition_number:.3g}, "
            f"||E||/||A|| = {result.relative_size:.3g}): the layer approximates the system",
            stacklevel=caller_stacklevel(),  # SSM.from_matrices: the user's line
        )
        Lambda, V, V_inv = result.Lambda, result.V, result.V_inv
    else:
        V_inv = np.linalg.inv(V)
    if np.any(Lambda.real >= 0):
        raise ValueError(
            f"A has eigenvalues with Re >= 0 (max Re = {Lambda.real.max():.3g}); the layer keeps Re(Lambda) < 0"
        )
    return Lambda.astype(np.complex128), V_inv @ B, C @ V, D
