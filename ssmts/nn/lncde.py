"""Structured linear neural CDE layer (SLiCE; docs/concepts.md#input-dependent-transitions-slice).

Shapes: u: (batch, H, L) -> y: (batch, M, L); hidden state h: (batch, d_state).

    h_{i+1} = h_i + sum_j A^j h_i x^j_i + B x_i          (linear neural CDE)
            = M_i h_i + b_i,   M_i = I + sum_j A^j x^j_i,   b_i = B x_i
    y_i     = C h_{i+1} + D u_i

The transitions depend on the input, so there is no convolution view; the three compute
modes are the sequential recurrence (reference), a parallel associative scan over the pairs
(M_i, b_i), and the same scan in chunks with the state carried between chunks.
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import nn

from .._warnings import caller_stacklevel
from .batch_invariant import matmul_each_sample
from .checks import require_tensor
from .feedthrough import add_feedthrough, feedthrough_mode, initial_feedthrough
from .scan import associative_scan

LNCDE_STRUCTURES = ("diagonal", "block_diagonal", "dplr", "walsh_hadamard", "dense")
LNCDE_MODES = ("recurrence", "scan", "chunked")

# Batch invariance (ssmts.nn.batch_invariant): matrices of fewer multiply-adds than this go through
# torch's own bmm loop, one fixed order per matrix; larger ones one product per sample.
NAIVE_BMM_MACS = 400
# The recurrence makes its products with the path for as many steps as fit this many numbers per
# sample (at most chunk_length steps), so that they stay in cache while the steps use them.
RECURRENCE_CHUNK_NUMBERS = 2**15


# Arguments renamed so that one idea has one name in ssmts.nn (the SSM layer's d_state and
# chunk_length); the old names are accepted with a warning until the next release.
RENAMED_ARGUMENTS = {"d_hidden": "d_state", "chunk_size": "chunk_length"}


def _renamed_arguments(renamed: dict, d_state: int, chunk_length: int) -> tuple[int, int]:
    unknown = set(renamed) - set(RENAMED_ARGUMENTS)
    if unknown:
        raise TypeError(f"LinearCDE got unexpected keyword argument(s) {sorted(unknown)}")
    values = {"d_state": d_state, "chunk_length": chunk_length}
    for old, value in renamed.items():
        new = RENAMED_ARGUMENTS[old]
        warnings.warn(
            f"LinearCDE's {old} is now {new} (as in the SSM layer); {old} will be removed in the next release",
            FutureWarning,
            stacklevel=caller_stacklevel(),
        )
        values[new] = value
    return values["d_state"], values["chunk_length"]


def _matvec(M: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """M @ v for (..., s, s) matrices and (..., s) vectors, batch-invariant: torch's own bmm loop for
    small matrices, an elementwise product and a row sum for larger ones."""
    if M.shape[-1] * M.shape[-2] < NAIVE_BMM_MACS:
        return (M @ v[..., None])[..., 0]
    return (M * v[..., None, :]).sum(-1)


def _matmul(later: torch.Tensor, earlier: torch.Tensor) -> torch.Tensor:
    """later @ earlier for (batch, ..., s, s) matrices, batch-invariant: torch's own bmm loop for small
    matrices, one batched product per sample for larger ones."""
    if later.shape[-1] ** 3 < NAIVE_BMM_MACS:
        return later @ earlier
    return matmul_each_sample(later, earlier)


def hadamard(order: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Sylvester Hadamard matrix of a power-of-two `order`, entries +-1 (not normalized)."""
    if order < 1 or order & (order - 1):
        raise ValueError(f"order must be a power of two, got {order}")
    H = torch.ones(1, 1, dtype=dtype)
    while H.shape[0] < order:
        H = torch.cat([torch.cat([H, H], 1), torch.cat([H, -H], 1)], 0)
    return H


class LinearCDE(nn.Module):
    """Linear neural CDE with input-dependent structured transitions (SLiCE).

    The driving path. With P = d_path + 1 channels, the increment at step i is

        x_i = dt * (1, tanh(W u_i + c))          (P,)

    channel 0 is the time increment dt (a constant channel: with no input the state still
    evolves by I + dt A^0, the Euler step of dh = A^0 h dt), channels 1..d_path are a learned
    linear projection (W, c) = `path` of the layer input, squashed by tanh so that |x^j| <= dt.

    Structures of each A^j (j = 0..d_path), stored in these parameters:

    - "diagonal":       A^j = diag(a^j); `A_blocks[0]`: (P, d).
    - "block_diagonal": A^j = BlockDiag(B^j_1, ..., B^j_k), blocks in the order of `block_sizes`
      on consecutive state indices. Blocks of one size share a tensor: `A_blocks[g]` holds the
      g-th distinct size s (in order of first appearance), (P, n_g) for s = 1 and
      (P, n_g, s, s) otherwise, its blocks in the order they appear.
    - "dplr":           A^j = diag(d^j) + U^j V^j^T; `A_diag` (P, d), `A_U`, `A_V` (P, d, rank).
    - "walsh_hadamard": A^j = H diag(d^j), H the normalized Sylvester Hadamard matrix
      (H H^T = I; d_state a power of two); `A_diag` (P, d).
    - "dense":          `A` (P, d, d).

    Stability. Every transition is rescaled so that its spectral norm is at most `max_norm`:

        M_i <- M_i / max(1, nu(M_i) / max_norm)

    with nu(M) >= ||M||_2 a bound computed at the structure's own cost:
    - diagonal and 1x1 blocks: |m_k| per state, i.e. an exact clip of m_k to [-max_norm, max_norm];
    - larger blocks, per block, and dense, for the whole matrix: sqrt(||M||_1 ||M||_inf);
    - dplr: max_k |1 + g_k| + sum_j |x^j| ||U^j||_F ||V^j||_F, with g = sum_j x^j d^j;
    - walsh_hadamard: 1 + max_k |g_k| (||H diag(g)||_2 = max|g|). This is >= 1 whenever g != 0,
      so with max_norm = 1 every WH transition is scaled down a little: it decays at about
      max|g| per step.
    Scaling block by block keeps the block structure. A product of k transitions then has
    norm <= max_norm^k, so the state can never grow exponentially: ||h_i|| <= ||h_0|| +
    sum_{k<i} ||b_k|| (at most linear growth, reached only by states held at norm exactly 1),
    and with max_norm < 1, ||h_i|| <= ||h_0|| + max_k ||b_k|| / (1 - max_norm) at every length.
    max_norm=None switches the rescaling off (the plain linear CDE, stable only as trained).
    Initialization keeps the rescaling mostly idle: the time channel's A^0 starts with a
    diagonal -r_k / dt (per-step decay rates r_k log-uniform in [decay_min, decay_max]; not
    possible for walsh_hadamard), and the other entries have std init_std / (s sqrt(P)) for
    s x s blocks (s = d for dense; diagonal parts of dplr and WH: init_std / sqrt(P); the dplr
    factors so that ||U^j||_F ||V^j||_F = init_std / P), so the input-driven part adds about
    init_std * dt / 2 to the bounds above. The path's W, B and C start at the fan-in scales
    1 / sqrt(H), 1 / sqrt(P) and 1 / sqrt(d) (the path's bias at zero). The sqrt(||M||_1 ||M||_inf)
    bound is loose for large dense blocks (by up to ~sqrt(s)), so strongly input-dependent dense
    transitions are damped more than their true norm requires; and for rotations: a 2 x 2
    rotation by theta has the bound |cos theta| + |sin theta| (up to sqrt(2)), so with
    max_norm = 1 a rotation by other than a multiple of 90 degrees is scaled down by that
    factor at every step (0.71 for 45 degrees): an oscillating memory decays.

    Compute modes (one result, to round-off; in every mode a sample's output does not depend,
    to the last bit, on the rest of the batch: see the note on batch invariance at the top):
    - "recurrence": the sequential loop h_{i+1} = M_i h_i + b_i, applying dplr (O(P rank d))
      and WH transitions without forming them; the reference. Its products with the path are
      made for a few steps at once.
    - "scan": a parallel associative scan over the pairs (M_i, b_i) with (M2, b2) o (M1, b1) =
      (M2 M1, M2 b1 + b2), depth O(log L). Products are structure-aware: elementwise for 1x1
      blocks, batched s x s matmuls per block group (the scan stores blocks, never a d x d
      matrix: cost O(L d sum_j b_j^2) instead of O(L d^3)), dense for dense, dplr and WH
      (products of those have no structure). Memory O(batch L sum_j b_j^2).
    - "chunked": the scan over chunks of `chunk_length` steps, the state carried from chunk to
      chunk, so the transitions held at once are bounded by the chunk (in inference; autograd
      still keeps every chunk's intermediates for the backward pass).

    Args:
        d_model: H, input channels.
        d_state: d, hidden state size.
        d_output: M, output channels (default H).
        d_path: channels of the learned path besides the time channel (default H).
        structure: one of LNCDE_STRUCTURES.
        block_size: block_diagonal with equal blocks (must divide d_state; default 4).
        block_sizes: block_diagonal with the given block sizes (sum d_state), e.g. the mixed
            form [1] * 60 + [4]: 60 diagonal states and one dense 4x4 block.
        rank: rank of the low-rank part of each A^j (dplr only; default 1).
        dt: the step size of the path increments.
        max_norm: bound on ||M_i||_2, in (0, 1], or None for no rescaling.
        init_std: scale of the A^j initialization.
        decay_min, decay_max: range of the initial per-step decay rates of the time channel.
        D: feed-through "none", "identity", "diagonal" or "full" (default: diagonal when
            M == H, else full).
        mode: default compute mode, one of LNCDE_MODES (forward can override it).
        chunk_length: steps per chunk in mode "chunked".
        generator: random generator for the initialization.
    """

    def __init__(
        self,
        d_model: int,
        d_state: int = 64,
        *,
        d_output: int | None = None,
        d_path: int | None = None,
        structure: str = "block_diagonal",
        block_size: int | None = None,
        block_sizes: list[int] | tuple[int, ...] | None = None,
        rank: int | None = None,
        dt: float = 0.1,
        max_norm: float | None = 1.0,
        init_std: float = 1.0,
        decay_min: float = 1e-3,
        decay_max: float = 1e-1,
        D: str | None = None,
        mode: str = "scan",
        chunk_length: int = 128,
        generator: torch.Generator | None = None,
        **renamed,
    ):
        super().__init__()
        d_state, chunk_length = _renamed_arguments(renamed, d_state, chunk_length)
        H, d = int(d_model), int(d_state)
        M = H if d_output is None else int(d_output)
        p = H if d_path is None else int(d_path)
        if structure not in LNCDE_STRUCTURES:
            raise ValueError(f"unknown structure {structure!r}; choose one of {LNCDE_STRUCTURES}")
        if rank is not None and structure != "dplr":
            raise ValueError(f"rank is only used with structure='dplr', got rank={rank} with structure={structure!r}")
        rank = 1 if rank is None else rank
        for name, value in (
            ("d_model", H),
            ("d_state", d),
            ("d_output", M),
            ("d_path", p),
            ("rank", rank),
            ("chunk_length", chunk_length),
        ):
            if value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value}")
        if mode not in LNCDE_MODES:
            raise ValueError(f"unknown mode {mode!r}; choose one of {LNCDE_MODES}")
        if not dt > 0:
            raise ValueError(f"dt must be > 0, got {dt}")
        if max_norm is not None and not 0 < max_norm <= 1:
            raise ValueError(f"max_norm must lie in (0, 1] (or be None: no normalization), got {max_norm}")
        if not 0 < decay_min <= decay_max < 1:
            raise ValueError(f"need 0 < decay_min <= decay_max < 1, got decay_min={decay_min}, decay_max={decay_max}")
        if not init_std > 0:
            raise ValueError(f"init_std must be > 0, got {init_std}")
        if structure != "block_diagonal" and (block_size is not None or block_sizes is not None):
            raise ValueError(
                f"block_size/block_sizes are only used with structure='block_diagonal', got structure={structure!r}"
            )
        if structure == "walsh_hadamard" and d & (d - 1):
            raise ValueError(
                f"d_state={d} must be a power of two for structure='walsh_hadamard' (Sylvester Hadamard matrix)"
            )
        D = feedthrough_mode(D, M, H)

        self.d_model, self.d_state, self.d_output, self.d_path = H, d, M, p
        self.structure, self.rank = structure, int(rank)
        self.dt, self.init_std = float(dt), float(init_std)
        self.max_norm = None if max_norm is None else float(max_norm)
        self.D_mode, self.mode, self.chunk_length = D, mode, int(chunk_length)
        # Zero-shot change of sample rate, set only inside `ssmts.nn.scaled_delta`: the step of the
        # path, dt, is multiplied by it (the path is an integral over time, see `path_increments`).
        self._delta_factor = 1.0
        P = p + 1

        def randn(*shape: int, std: float) -> nn.Parameter:
            return nn.Parameter(torch.randn(*shape, generator=generator) * std)

        # Per-step decay rates r_k, log-uniform: the time channel's diagonal starts at -r_k / dt, so that
        # with no input M = I + dt A^0 ~ diag(1 - r_k) (memories of 1/r_k steps) and the normalization
        # below is mostly inactive at initialization. Walsh-Hadamard A^0 = H D^0 has no diagonal to hold it.
        log_r = torch.rand(d, generator=generator, dtype=torch.float64) * math.log(decay_max / decay_min) + math.log(
            decay_min
        )
        kappa = (torch.exp(log_r) / dt).to(torch.get_default_dtype())
        # Groups of equal-size blocks, (size, count); the scan's representation of a transition is
        # one tensor per group. Dense, DPLR and WH transitions have no closed structure under products,
        # so their scan representation is one dense d x d "block".
        if structure in ("diagonal", "block_diagonal"):
            sizes = self._check_blocks(d, block_size, block_sizes) if structure == "block_diagonal" else [1] * d
            self.block_sizes = tuple(sizes)
            distinct = list(dict.fromkeys(sizes))
            self._groups = [(s, sizes.count(s)) for s in distinct]
            offsets = [0]
            for s in sizes:
                offsets.append(offsets[-1] + s)
            # perm[grouped index] = state index: the grouped layout stores each group's blocks contiguously.
            perm = [
                i for s in distinct for k, sk in enumerate(sizes) if sk == s for i in range(offsets[k], offsets[k] + s)
            ]
            blocks, start = [], 0
            for s, n in self._groups:
                k = kappa[start : start + n * s]
                if s == 1:
                    A = randn(P, n, std=init_std / math.sqrt(P))
                    A.data[0] -= k
                else:
                    A = randn(P, n, s, s, std=init_std / (s * math.sqrt(P)))
                    A.data[0] -= torch.diag_embed(k.reshape(n, s))
                blocks.append(A)
                start += n * s
            self.A_blocks = nn.ParameterList(blocks)
        else:
            self.block_sizes = (d,)
            self._groups = [(d, 1)]
            perm = list(range(d))
            if structure == "dense":
                self.A = randn(P, d, d, std=init_std / (d * math.sqrt(P)))
                self.A.data[0] -= torch.diag(kappa)
            else:
                self.A_diag = randn(P, d, std=init_std / math.sqrt(P))
                if structure == "dplr":
                    self.A_diag.data[0] -= kappa
                    # ||U^j||_F ||V^j||_F = d rank std^2 = init_std / P: the low-rank part's share of the bound
                    # below, sum_j |x^j| ||U^j||_F ||V^j||_F <= dt init_std, is as large as a row of the others.
                    std = math.sqrt(init_std / (P * d * self.rank))
                    self.A_U = randn(P, d, self.rank, std=std)
                    self.A_V = randn(P, d, self.rank, std=std)
                else:
                    # +-1 entries are exact in every dtype; the 1/sqrt(d) is applied in `hadamard`.
                    self.register_buffer("_hadamard_signs", hadamard(d, torch.get_default_dtype()), persistent=False)
        self._permuted = perm != list(range(d))
        self.register_buffer("_perm", torch.tensor(perm, dtype=torch.long), persistent=False)
        self.register_buffer("_inverse_perm", torch.argsort(torch.tensor(perm)), persistent=False)

        self.path = nn.Linear(H, p)
        with torch.no_grad():  # from `generator` like every other parameter; tanh(W u) starts unbiased
            self.path.weight.copy_(torch.randn(p, H, generator=generator) / math.sqrt(H))
            self.path.bias.zero_()
        self.B = randn(d, P, std=1.0 / math.sqrt(P))
        self.C = randn(M, d, std=1.0 / math.sqrt(d))
        self.D = initial_feedthrough(D, M, H, generator)  # None registers no parameter

    @staticmethod
    def _check_blocks(d: int, block_size, block_sizes) -> list[int]:
        if block_size is not None and block_sizes is not None:
            raise ValueError("give either block_size or block_sizes, not both")
        if block_sizes is None:
            default = block_size is None
            block_size = 4 if default else block_size
            if int(block_size) != block_size or block_size < 1:
                raise ValueError(f"block_size must be a positive integer, got {block_size}")
            if d % block_size:
                what = " (the default)" if default else ""
                raise ValueError(f"block_size={block_size}{what} must divide d_state={d}; or give block_sizes")
            return [int(block_size)] * (d // int(block_size))
        sizes = list(block_sizes)
        if not sizes or any(int(s) != s or s < 1 for s in sizes):
            raise ValueError(f"block_sizes must be a non-empty list of positive integers, got {block_sizes}")
        if sum(sizes) != d:
            raise ValueError(f"block_sizes must sum to d_state={d}, got sum {sum(sizes)}")
        return [int(s) for s in sizes]

    # ------------------------------------------------------------ path and transitions
    @property
    def step_size(self) -> float:
        """The step of the path in use: dt times the factor of an enclosing `scaled_delta` block."""
        return self.dt * self._delta_factor

    def path_increments(self, u: torch.Tensor) -> torch.Tensor:
        """x = dt * (1, tanh(W u + c)): u (batch, H, L) -> (batch, L, P).

        The driving path is omega(t) = int_0^t (1, tanh(W u(s) + c)) ds, and x_i its increment over
        one sample interval; data sampled at another rate covers another interval per step, which
        ``scaled_delta`` accounts for by multiplying dt (see `step_size`).
        """
        z = torch.tanh(matmul_each_sample(u.transpose(1, 2), self.path.weight.T) + self.path.bias)
        ones = torch.ones_like(z[..., :1])
        return self.step_size * torch.cat([ones, z], dim=-1)

    def ssm_parameters(self) -> list[nn.Parameter]:
        """The transition parameters (every A^j) and B: what the optimizer groups train at the SSM
        learning rate without weight decay, as Lambda, Delta and B of an SSM layer."""
        if self.structure in ("diagonal", "block_diagonal"):
            transitions = list(self.A_blocks)
        elif self.structure == "dense":
            transitions = [self.A]
        elif self.structure == "dplr":
            transitions = [self.A_diag, self.A_U, self.A_V]
        else:
            transitions = [self.A_diag]
        return [*transitions, self.B]

    @property
    def d_hidden(self) -> int:
        warnings.warn(
            "LinearCDE.d_hidden is now d_state; d_hidden will be removed in the next release",
            FutureWarning,
            stacklevel=caller_stacklevel(),
        )
        return self.d_state

    @property
    def chunk_size(self) -> int:
        warnings.warn(
            "LinearCDE.chunk_size is now chunk_length; chunk_size will be removed in the next release",
            FutureWarning,
            stacklevel=caller_stacklevel(),
        )
        return self.chunk_length

    @property
    def hadamard(self) -> torch.Tensor:
        """The normalized Hadamard matrix H (H H^T = I) of structure "walsh_hadamard": (d, d)."""
        return self._hadamard_signs / math.sqrt(self.d_state)

    def _scale(self, nu: torch.Tensor) -> torch.Tensor:
        """1 / max(1, nu / max_norm): leaves transitions within the bound untouched."""
        if self.max_norm is None:
            return torch.ones_like(nu)
        return 1.0 / torch.clamp(nu / self.max_norm, min=1.0)

    @staticmethod
    def _holder(M: torch.Tensor) -> torch.Tensor:
        """sqrt(||M||_1 ||M||_inf) >= ||M||_2 of (..., s, s) matrices -> (...)."""
        a = M.abs()
        return torch.sqrt(a.sum(-2).amax(-1) * a.sum(-1).amax(-1))

    def _dense_A(self) -> torch.Tensor:
        """The A^j as dense (P, d, d) matrices (dense, dplr and walsh_hadamard only)."""
        if self.structure == "dense":
            return self.A
        if self.structure == "dplr":
            return torch.diag_embed(self.A_diag) + self.A_U @ self.A_V.transpose(1, 2)
        return self.hadamard[None] * self.A_diag[:, None, :]  # H diag(d^j): column k scaled by d^j_k

    def _structured_aux(self) -> tuple[torch.Tensor, ...]:
        """Per-forward constants of the dplr / walsh_hadamard steps. dplr: ||U^j||_F ||V^j||_F (P,), V as
        (P, rank, d) and U as (d, P * rank), both contiguous; walsh_hadamard: the normalized Hadamard matrix."""
        if self.structure == "dplr":
            norms = torch.linalg.vector_norm(self.A_U, dim=(1, 2)) * torch.linalg.vector_norm(self.A_V, dim=(1, 2))
            V = self.A_V.transpose(1, 2).contiguous()
            U = self.A_U.permute(1, 0, 2).reshape(self.d_state, -1).contiguous()
            return norms, V, U
        return (self.hadamard,)

    def _structured_nu(self, x: torch.Tensor, g: torch.Tensor, aux: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """The norm bound of dplr / walsh_hadamard transitions from x (..., P) and g = x @ A_diag (..., d)."""
        if self.structure == "dplr":
            return (1 + g).abs().amax(-1) + (x.abs() * aux[0]).sum(-1)
        return 1 + g.abs().amax(-1)

    # ------------------------------------------------------------ the products with the path
    def _input_weight(self, formed: bool) -> tuple[torch.Tensor, list[int]]:
        """Everything linear in the path increment x, as one (P, K) matrix and its column widths:
        B^T, then the input-dependent part of the transitions, sum_j x^j A^j, in the scan's
        representation (per block group; d x d for dense, and for dplr / walsh_hadamard when
        `formed`), then for dplr / walsh_hadamard g = sum_j x^j d^j (their norm bound and steps)."""
        P, d = self.d_path + 1, self.d_state
        B, _ = self._grouped_BC()
        parts = [B.T]
        if self.structure in ("diagonal", "block_diagonal"):
            parts += [A.reshape(P, -1) for A in self.A_blocks]
        else:
            if formed or self.structure == "dense":
                parts.append(self._dense_A().reshape(P, d * d))
            if self.structure != "dense":
                parts.append(self.A_diag)
        return torch.cat(parts, dim=1), [t.shape[1] for t in parts]

    @staticmethod
    def _input_products(x: torch.Tensor, weight: tuple[torch.Tensor, list[int]]) -> list[torch.Tensor]:
        """x (batch, T, P) -> [b (batch, T, d), then the other parts of `_input_weight`], one product per sample."""
        W, widths = weight
        return list(matmul_each_sample(x, W).split(widths, dim=-1))

    def _transitions(self, x: torch.Tensor, parts: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
        """Normalized M_i in the scan's representation: x (..., P) -> one tensor per group,
        (..., n) for 1x1 blocks and (..., n, s, s) otherwise, in the grouped state layout.
        `parts`: the products of `_input_weight(formed=True)` after b (computed here, for x of shape
        (batch, T, P), when None)."""
        if parts is None:  # x: (batch, T, P)
            parts = self._input_products(x, self._input_weight(formed=True))[1:]
        lead = x.shape[:-1]
        if self.structure in ("diagonal", "block_diagonal"):
            rep = []
            for (s, n), m in zip(self._groups, parts):
                if s == 1:
                    m = 1 + m
                    rep.append(m * self._scale(m.abs()))
                else:
                    Mg = m.reshape(*lead, n, s, s) + torch.eye(s, dtype=m.dtype, device=m.device)
                    rep.append(Mg * self._scale(self._holder(Mg))[..., None, None])
            return rep
        d = self.d_state
        Mi = parts[0].reshape(*lead, 1, d, d) + torch.eye(d, dtype=x.dtype, device=x.device)
        if self.structure == "dense":
            nu = self._holder(Mi)
        else:
            nu = self._structured_nu(x, parts[1], self._structured_aux())[..., None]
        Mi = Mi * self._scale(nu)[..., None, None]
        # d_state = 1 makes self._groups [(1, 1)], one group of 1 x 1 blocks: stored (..., 1) as those are.
        return [Mi[..., 0, 0] if d == 1 else Mi]

    def _split(self, h: torch.Tensor) -> list[torch.Tensor]:
        """Grouped-layout state (..., d) -> per group (..., n) for s = 1, (..., n, s) otherwise."""
        parts, start = [], 0
        for s, n in self._groups:
            part = h[..., start : start + n * s]
            parts.append(part if s == 1 else part.reshape(*h.shape[:-1], n, s))
            start += n * s
        return parts

    def _act(self, rep: list[torch.Tensor], h: torch.Tensor) -> torch.Tensor:
        """M h for a representation and a grouped-layout state (..., d), block-wise."""
        out = []
        for (s, _), Mg, hg in zip(self._groups, rep, self._split(h)):
            out.append(Mg * hg if s == 1 else _matvec(Mg, hg).flatten(-2))
        return out[0] if len(out) == 1 else torch.cat(out, dim=-1)

    def _compose(self, later: list[torch.Tensor], earlier: list[torch.Tensor]) -> list[torch.Tensor]:
        """The transition of `earlier` then `later`: later @ earlier, block by block (blocks stay blocks).
        Both (batch, ...) with the batch first."""
        return [l * e if s == 1 else _matmul(l, e) for (s, _), l, e in zip(self._groups, later, earlier)]

    def _step_structured(
        self, x: torch.Tensor, g: torch.Tensor, h: torch.Tensor, aux: tuple[torch.Tensor, ...]
    ) -> torch.Tensor:
        """M_i h for one step of dplr / walsh_hadamard without building M_i: x (b, P), g = x @ A_diag (b, d),
        h (b, d). Elementwise products and sums over fixed dimensions only (batch-invariant)."""
        if self.structure == "dplr":
            _, V, U = aux
            vh = (V * h[:, None, None, :]).sum(-1) * x[..., None]  # (b, P, rank): x^j V^j^T h
            Mh = (1 + g) * h + (U * vh.flatten(1)[:, None, :]).sum(-1)
        else:
            Mh = h + (aux[0] * (g * h)[:, None, :]).sum(-1)  # H (g * h), H the normalized Hadamard matrix
        return Mh * self._scale(self._structured_nu(x, g, aux))[..., None]

    # ------------------------------------------------------------ scan
    def _scan(self, rep: list[torch.Tensor], b: torch.Tensor) -> torch.Tensor:
        """States q_t = M_t q_{t-1} + b_t, q_{-1} = 0, for t = 0..T-1: rep (b, T, ...), b (b, T, d).
        The odd-even associative scan of ssmts.nn.scan, with this layer's blocks."""
        return associative_scan(rep, b, self._act, self._compose)

    def _scan_states(self, x: torch.Tensor, h: torch.Tensor, chunk: int) -> torch.Tensor:
        """States h_1..h_L by the scan over chunks of `chunk` steps, carrying h between chunks."""
        weight = self._input_weight(formed=True)
        states = []
        for start in range(0, x.shape[1], chunk):
            xc = x[:, start : start + chunk]
            bc, *parts = self._input_products(xc, weight)
            rep = self._transitions(xc, parts)
            # Fold the carried state into the first input: h_1 = M_0 h_0 + b_0, so the scan starts from 0.
            first = self._act([t[:, 0] for t in rep], h) + bc[:, 0]
            q = self._scan(rep, torch.cat([first[:, None], bc[:, 1:]], dim=1))
            states.append(q)
            h = q[:, -1]
        return states[0] if len(states) == 1 else torch.cat(states, dim=1)

    def _recurrence_states(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """States h_1..h_L one step at a time. The products with the path are made for a chunk of steps
        at once: at most `chunk_length`, and as many as keep them within RECURRENCE_CHUNK_NUMBERS numbers
        per sample (a few dense d x d transitions), so that a chunk stays in cache. dplr and
        walsh_hadamard steps apply their transitions without forming them."""
        formed = self.structure not in ("dplr", "walsh_hadamard")
        weight = self._input_weight(formed)
        chunk = max(1, min(self.chunk_length, RECURRENCE_CHUNK_NUMBERS // weight[0].shape[1]))
        aux = None if formed else self._structured_aux()
        states = []
        for start in range(0, x.shape[1], chunk):
            xc = x[:, start : start + chunk]
            bc, *parts = self._input_products(xc, weight)
            # Per-step views by unbind: one backward node per chunk (indexing step by step would
            # give every step a gradient the size of the whole chunk).
            per_step = self._transitions(xc, parts) if formed else [xc, parts[0]]
            for b_i, *step in zip(bc.unbind(1), *(t.unbind(1) for t in per_step)):
                if formed:
                    h = self._act(step, h) + b_i
                else:
                    h = self._step_structured(*step, h, aux) + b_i
                states.append(h)
        return torch.stack(states, dim=1)

    # ------------------------------------------------------------ layout
    def _to_grouped(self, h: torch.Tensor) -> torch.Tensor:
        return h[..., self._perm] if self._permuted else h

    def _from_grouped(self, h: torch.Tensor) -> torch.Tensor:
        return h[..., self._inverse_perm] if self._permuted else h

    def _grouped_BC(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._permuted:
            return self.B[self._perm], self.C[:, self._perm]
        return self.B, self.C

    # ------------------------------------------------------------ forward
    def _check_input(self, u: torch.Tensor) -> None:
        require_tensor(u, type(self).__name__)
        if u.dim() != 3:
            raise ValueError(f"LinearCDE expects input of shape (batch, {self.d_model}, length), got {tuple(u.shape)}")
        if u.shape[1] != self.d_model:
            raise ValueError(
                f"LinearCDE expects {self.d_model} input channels, got {u.shape[1]} (input shape {tuple(u.shape)})"
            )
        if u.shape[2] < 1:
            raise ValueError("LinearCDE input has length 0")

    def _check_state(self, state: torch.Tensor, batch: int) -> None:
        expected = (batch, self.d_state)
        if tuple(state.shape) != expected or state.is_complex():
            raise ValueError(f"state must be real of shape {expected}, got {tuple(state.shape)} {state.dtype}")

    def _output(self, states: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """y = C h + D u: states (batch, L, d) in the grouped layout, u (batch, H, L) -> (batch, M, L)."""
        _, C = self._grouped_BC()
        y = matmul_each_sample(C, states.transpose(1, 2))
        return add_feedthrough(y, self.D_mode, self.D, u)

    def _states(self, u: torch.Tensor, state: torch.Tensor | None, mode: str) -> torch.Tensor:
        """States h_1..h_L in the grouped layout, (batch, L, d)."""
        if state is None:
            state = self.initial_state(u.shape[0], device=u.device, dtype=u.dtype)
        self._check_state(state, u.shape[0])
        x = self.path_increments(u)  # (b, L, P)
        h0 = self._to_grouped(state.to(x.dtype))
        if mode == "recurrence":
            return self._recurrence_states(x, h0)
        return self._scan_states(x, h0, u.shape[-1] if mode == "scan" else self.chunk_length)

    def forward(
        self,
        u: torch.Tensor,
        state: torch.Tensor | None = None,
        *,
        mode: str | None = None,
        return_state: bool = False,
    ):
        """u: (batch, H, L) -> y: (batch, M, L), y_i = C h_{i+1} + D u_i.

        state: (batch, d_state) state h_0 before the first step (default zeros).
        mode: "recurrence", "scan" or "chunked" (default: the layer's `mode`).
        return_state: also return the final state h_L, (batch, d_state), for `step`.
        """
        self._check_input(u)
        mode = self.mode if mode is None else mode
        if mode not in LNCDE_MODES:
            raise ValueError(f"unknown mode {mode!r}; choose one of {LNCDE_MODES}")
        states = self._states(u, state, mode)
        y = self._output(states, u)
        if return_state:
            return y, self._from_grouped(states[:, -1])
        return y

    def initial_state(self, batch: int, device=None, dtype: torch.dtype | None = None) -> torch.Tensor:
        """Zero state h_0: (batch, d_state)."""
        device = device if device is not None else self.B.device
        return torch.zeros(batch, self.d_state, dtype=dtype or self.B.dtype, device=device)

    def step(self, u_t: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step. u_t: (batch, H), state h_t: (batch, d_state) -> (y_t (batch, M), h_{t+1})."""
        if u_t.dim() != 2 or u_t.shape[1] != self.d_model:
            raise ValueError(f"step expects u_t of shape (batch, {self.d_model}), got {tuple(u_t.shape)}")
        u = u_t[..., None]
        h = self._states(u, state, "recurrence")
        return self._output(h, u)[..., 0], self._from_grouped(h[:, 0])

    # ------------------------------------------------------------ analysis
    def transition_product(self, u: torch.Tensor) -> torch.Tensor:
        """M_{L-1} ... M_1 M_0 of the normalized transitions: u (batch, H, L) -> (batch, d, d) dense.

        Composed pairwise by the scan's products in its own representation (blocks for
        block-diagonal structures, never a dense matrix), then expanded to a dense matrix in
        the state layout. Meant for tests and analysis.
        """
        self._check_input(u)
        rep = self._transitions(self.path_increments(u))
        while rep[0].shape[1] > 1:
            T, n = rep[0].shape[1], rep[0].shape[1] // 2
            pairs = self._compose([t[:, 1 : 2 * n : 2] for t in rep], [t[:, 0 : 2 * n : 2] for t in rep])
            rep = [torch.cat([p, t[:, 2 * n :]], dim=1) for p, t in zip(pairs, rep)] if T % 2 else pairs
        out = u.new_zeros(u.shape[0], self.d_state, self.d_state)
        start = 0
        for (s, n), t in zip(self._groups, rep):
            t = t[:, 0]
            for k in range(n):
                block = t[:, k, None, None] if s == 1 else t[:, k]
                out[:, start : start + s, start : start + s] = block
                start += s
        idx = self._inverse_perm
        return out[:, idx][:, :, idx] if self._permuted else out

    def extra_repr(self) -> str:
        blocks = ""
        if self.structure == "block_diagonal":
            blocks = ", blocks=" + "+".join(f"{n}x{s}" for s, n in self._groups)
        return (
            f"d_model={self.d_model}, d_state={self.d_state}, d_output={self.d_output}, d_path={self.d_path}, "
            f"structure={self.structure!r}{blocks}{f', rank={self.rank}' if self.structure == 'dplr' else ''}, "
            f"dt={self.dt}, max_norm={self.max_norm}, D={self.D_mode!r}, mode={self.mode!r}, "
            f"chunk_length={self.chunk_length}"
        )
