"""The MIMO diagonal SSM layer of LDNN / eSSM (docs/concepts.md#the-continuous-mimo-system and the
sections after it: diagonalization, discretization, convolution, heads, zero-shot resampling).

Shapes: u: (batch, H, L) -> y: (batch, M, L). The H channels are split into
`heads` groups of H/heads; each head is its own MIMO diagonal system

    x_k = Abar x_{k-1} + Bbar u_k,   y_k = 2 Re(C x_k) + D u_k       (conj_sym)

with P = N/2 complex modes (N = d_state per head), and the heads' outputs are
concatenated (block-diagonal system, eSSM eq. 14) and mixed by a linear map when
heads > 1. Three compute modes give the same numbers: FFT convolution (training),
the sequential recurrence (reference), and `step` (streaming).

Irregular time stamps: with `dt` (batch, L), in units of the training sample period, step k
uses Delta_k = Delta * dt_k, i.e. Abar_k = Abar(Delta_k), Bbar_k = Bbar(Delta_k); the
transitions then vary with k, there is no convolution, and the states come from a parallel
associative scan (ssmts.nn.scan). Constant dt_k = c is the same as dt_scale = c.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .batch_invariant import channel_linear, per_sample_mv
from .checks import require_tensor
from .dense import diagonal_system
from .discretization import check_discretization, discretize, log_transition, warn_unless_a_stable
from .feedthrough import add_feedthrough, feedthrough_mode, initial_feedthrough
from .init import INITS, initialize_head
from .kernels import (
    final_state,
    free_response,
    head_kernels,
    input_projection,
    powers,
    readout,
    recurrent_state_convolution,
    spectral_convolution,
    state_convolution,
    state_powers,
    state_spectrum,
    states_by_recurrence,
    two_sided_kernel,
)
from .resampling import DeltaScaling, above_nyquist, delta_factor
from .scan import diagonal_scan

LAMBDA_ENFORCERS = ("exp", "softplus", "clip")
BIDIRECTIONAL_MODES = (False, True, "essm", "ldnn")
CONVOLUTIONS = ("auto", "state", "kernel")


def _softplus_inverse(x: torch.Tensor) -> torch.Tensor:
    return x + torch.log(-torch.expm1(-x))


class SSM(DeltaScaling, nn.Module):
    """Multi-head MIMO diagonal state-space layer.

    Args:
        d_model: H, input channels.
        d_state: N, state size of each head (N/2 complex modes with conj_sym; init="ptd" keeps
            every real eigenvalue of the perturbed LegS in a slot of its own, one more per pair).
        d_output: M, output channels (default H).
        heads: number of diagonal blocks s; 1 = one full MIMO system (S5-like),
            H = stacked SISO systems (S4D-like). A channel mixer follows when s > 1.
        init: "legs" (HiPPO-LegS normal part), "ptd", "lin", "inv", "half", "randn".
        discretization: "zoh", "bilinear" or "gbt" (with `alpha`).
        lambda_enforce: map keeping Re(Lambda) < 0: "exp", "softplus" or "clip".
        conj_sym: keep N/2 conjugate-pair modes and output 2 Re(C x).
        real_bc: eSSM variant with real B and C (cheaper; not every real system).
        bidirectional: False; "essm"/True (backward kernel = forward kernel flipped,
            no extra parameters) or "ldnn" (separate backward Lambda, averaged; the
            discrete Bbar is shared, literally LDNN eq. 18: x = (V-> + V<-) Bbar / 2 * u).
        D: feed-through "none", "identity", "diagonal" or "full" (default: diagonal
            when M == H, else full).
        dt_min, dt_max: range of the log-uniform init of Delta (one per state).
        ptd_eps, ptd_gamma: PTD perturbation size and its penalty weight.
        fixed_transition: LSSL-fixed (LSSL's fixed-A variant): Lambda and Delta keep their
            initial values (``requires_grad=False``; ``ssm_parameters`` then lists only B);
            B, C, D and the mixer still learn. Default False (everything learns).
        min_decay: floor on -Re(Lambda) so that huge optimizer steps cannot reach 0.
        convolution: how the FFT mode convolves. "state" (eSSM): x = V * (Bbar u) per mode, then
            C x, a few samples at a time; memory (batch, heads, P, 2L) complex kept for backward
            (a chunk of it without gradients). "kernel" (S4D): build each head's
            (M/s x H/s x L) kernel 2 Re(C Abar^l Bbar) and convolve u with it; memory
            (batch, H, 2L). "auto" takes the kernel when (M/s)(H/s) < 16 P, i.e. for many small
            heads such as the eSSM paper presets and stacked SISO, and the state otherwise.
        chunk_length: None (default) or T: the FFT mode runs sequences longer than T in chunks of T
            steps, carrying the state from chunk to chunk (bidirectional: a second, reversed pass), so
            the working memory grows with T, not with L (beyond the output). The result is the
            unchunked one up to float rounding. Can be changed later (``layer.chunk_length = T``).
    """

    def __init__(
        self,
        d_model: int,
        d_state: int = 64,
        *,
        d_output: int | None = None,
        heads: int = 1,
        init: str = "legs",
        discretization: str = "zoh",
        alpha: float = 0.5,
        lambda_enforce: str = "exp",
        conj_sym: bool = True,
        real_bc: bool = False,
        bidirectional: bool | str = False,
        D: str | None = None,
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
        ptd_eps: float = 1e-4,
        ptd_gamma: float = 1e3,
        fixed_transition: bool = False,
        min_decay: float = 1e-4,
        convolution: str = "auto",
        chunk_length: int | None = None,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        H, N = int(d_model), int(d_state)
        M = H if d_output is None else int(d_output)
        for name, value in (("d_model", H), ("d_state", N), ("d_output", M), ("heads", heads)):
            if value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value}")
        if H % heads or M % heads:
            raise ValueError(f"d_model={H} and d_output={M} must both be divisible by heads={heads}")
        if conj_sym and N % 2:
            raise ValueError(f"d_state={N} must be even with conj_sym=True (N/2 conjugate pairs)")
        if init not in INITS:
            raise ValueError(f"unknown init {init!r}; choose one of {INITS}")
        check_discretization(discretization, alpha)
        warn_unless_a_stable(discretization, alpha)
        if lambda_enforce not in LAMBDA_ENFORCERS:
            raise ValueError(f"unknown lambda_enforce {lambda_enforce!r}; choose one of {LAMBDA_ENFORCERS}")
        if bidirectional not in BIDIRECTIONAL_MODES:
            raise ValueError(f"unknown bidirectional {bidirectional!r}; choose False, True, 'essm' or 'ldnn'")
        if not (0 < dt_min <= dt_max):
            raise ValueError(f"need 0 < dt_min <= dt_max, got dt_min={dt_min}, dt_max={dt_max}")
        if min_decay <= 0:
            raise ValueError(f"min_decay must be > 0, got {min_decay}")
        if convolution not in CONVOLUTIONS:
            raise ValueError(f"unknown convolution {convolution!r}; choose one of {CONVOLUTIONS}")
        D = feedthrough_mode(D, M, H)

        self.d_model, self.d_state, self.d_output, self.heads = H, N, M, int(heads)
        self.d_head_in, self.d_head_out = H // heads, M // heads
        self.init, self.discretization, self.alpha = init, discretization, float(alpha)
        self.lambda_enforce, self.conj_sym, self.real_bc = lambda_enforce, bool(conj_sym), bool(real_bc)
        self.bidirectional = "essm" if bidirectional is True else (bidirectional or False)
        self.D_mode, self.min_decay = D, float(min_decay)
        self.convolution = convolution
        self.chunk_length = chunk_length
        self.dt_min, self.dt_max = float(dt_min), float(dt_max)
        self.ptd_eps, self.ptd_gamma = float(ptd_eps), float(ptd_gamma)
        if not isinstance(fixed_transition, (bool, np.bool_)):
            raise ValueError(f"fixed_transition must be True or False, got {fixed_transition!r}")
        self.fixed_transition = bool(fixed_transition)
        # A constant factor on every Delta, part of the model (e.g. Path-X's 0.0625).
        self.dt_scale = 1.0
        # Zero-shot resampling, set only inside `scaled_delta` (ssmts.nn.resampling).
        self._delta_factor = 1.0

        heads_init = [
            initialize_head(
                init,
                N,
                self.d_head_in,
                self.d_head_out,
                conj_sym=conj_sym,
                generator=generator,
                ptd_eps=ptd_eps,
                ptd_gamma=ptd_gamma,
            )
            for _ in range(heads)
        ]
        Lambda = torch.stack([h[0] for h in heads_init])  # (S, P)
        self.P = Lambda.shape[-1]  # ptd with conj_sym: N/2 plus a slot per pair of real eigenvalues
        B = torch.stack([h[1] for h in heads_init])  # (S, P, Hh)
        C = torch.stack([h[2] for h in heads_init])  # (S, Mh, P)
        self._set_lambda("Lambda", Lambda)
        if self.bidirectional == "ldnn":
            self._set_lambda("Lambda_backward", Lambda.clone())
        self._set_bc(B, C)

        u01 = torch.rand((heads, self.P), generator=generator, dtype=torch.float64)
        log_dt = math.log(dt_min) + u01 * (math.log(dt_max) - math.log(dt_min))
        self.log_dt = nn.Parameter(log_dt.float())

        self.D = initial_feedthrough(D, M, H, generator)  # None registers no parameter
        self.mixer = nn.Linear(M, M) if heads > 1 else None
        if self.fixed_transition:
            for p in self.transition_parameters():
                p.requires_grad_(False)

    # ------------------------------------------------------------ parameters
    def _set_lambda(self, prefix: str, Lambda: torch.Tensor) -> None:
        decay = (-Lambda.real).clamp_min(self.min_decay)
        if self.lambda_enforce == "exp":
            raw = torch.log(decay)
        elif self.lambda_enforce == "softplus":
            raw = _softplus_inverse(decay)
        else:
            raw = decay
        setattr(self, f"{prefix}_re_raw", nn.Parameter(raw.float()))
        setattr(self, f"{prefix}_im", nn.Parameter(Lambda.imag.float()))

    def _set_bc(self, B: torch.Tensor, C: torch.Tensor) -> None:
        if self.real_bc:
            self.B = nn.Parameter(B.real.float().contiguous())
            self.C = nn.Parameter(C.real.float().contiguous())
        else:
            self.B = nn.Parameter(torch.view_as_real(B.to(torch.complex64)).contiguous())
            self.C = nn.Parameter(torch.view_as_real(C.to(torch.complex64)).contiguous())

    def _lambda(self, prefix: str = "Lambda") -> torch.Tensor:
        raw = getattr(self, f"{prefix}_re_raw")
        if self.lambda_enforce == "exp":
            decay = torch.exp(raw)
        elif self.lambda_enforce == "softplus":
            decay = F.softplus(raw)
        else:
            decay = raw
        return torch.complex(-decay.clamp_min(self.min_decay), getattr(self, f"{prefix}_im"))

    @property
    def Lambda(self) -> torch.Tensor:
        """Continuous-time eigenvalues, (heads, P) complex, Re < 0."""
        return self._lambda()

    @property
    def chunk_length(self) -> int | None:
        """Chunk size T of the FFT mode for long sequences (None: one FFT over the whole sequence)."""
        return getattr(self, "_chunk_length", None)

    @chunk_length.setter
    def chunk_length(self, value: int | None) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1):
            raise ValueError(f"chunk_length must be None or a positive integer, got {value!r}")
        self._chunk_length = None if value is None else int(value)

    def _complex(self, param: torch.Tensor) -> torch.Tensor:
        if self.real_bc:
            return param.to(self._complex_dtype())
        return torch.view_as_complex(param)

    def _complex_dtype(self) -> torch.dtype:
        return torch.complex128 if self.log_dt.dtype == torch.float64 else torch.complex64

    def set_sample_rate(self, new_rate: float, train_rate: float) -> None:
        """Set dt_scale = train_rate / new_rate for good (replacing any base scale).

        For a scoped change that composes with the base scale and is undone afterwards, use
        ``with ssmts.nn.scaled_delta(layer, delta_factor(train_rate, new_rate)):``.
        """
        self.dt_scale = delta_factor(train_rate, new_rate)

    def modes_above_nyquist(self) -> tuple[int, int]:
        """(modes above the Nyquist frequency of the rate in use, modes in all): the modes that turn by more
        than pi per step once Delta is scaled (a `scaled_delta` factor > 1: data at a lower rate), measured
        from their turn per step at the layer's own Delta (exp(log_dt) * dt_scale). Such a mode aliases
        onto a frequency within the band, where the data has lost what it answered to."""
        with torch.no_grad():
            own = torch.exp(self.log_dt) * self.dt_scale
            names = ("Lambda", "Lambda_backward") if self.bidirectional == "ldnn" else ("Lambda",)
            above = [above_nyquist(self._lambda(name), own, self._delta_factor) for name in names]
        return sum(int(a.sum()) for a in above), sum(a.numel() for a in above)

    def discrete(self, backward: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(Abar (S, P), Bbar (S, P, Hh), log Abar (S, P), C (S, Mh, P)) of the current parameters."""
        Lambda = self._lambda("Lambda_backward" if backward else "Lambda")
        Delta = self.Delta
        Abar, gamma = discretize(Lambda, Delta, self.discretization, self.alpha)
        Bbar = gamma[..., None] * self._complex(self.B)
        log_abar = log_transition(Abar, Lambda, Delta, self.discretization)
        return Abar, Bbar, log_abar, self._complex(self.C)

    def transition_parameters(self) -> list[nn.Parameter]:
        """Lambda (both directions) and Delta: what ``fixed_transition=True`` freezes."""
        params = [self.Lambda_re_raw, self.Lambda_im, self.log_dt]
        if self.bidirectional == "ldnn":
            params += [self.Lambda_backward_re_raw, self.Lambda_backward_im]
        return params

    def ssm_parameters(self) -> list[nn.Parameter]:
        """Lambda, Delta and B: the parameters trained with their own rate and no weight decay (eSSM Table 10).

        Frozen ones (``fixed_transition=True``: Lambda and Delta) are left out.
        """
        params = [self.Lambda_re_raw, self.Lambda_im, self.log_dt, self.B]  # this order: optimizer checkpoints
        if self.bidirectional == "ldnn":
            params += [self.Lambda_backward_re_raw, self.Lambda_backward_im]
        return [p for p in params if p.requires_grad]

    # ------------------------------------------------------------ helpers
    def _check_input(self, u: torch.Tensor) -> None:
        require_tensor(u, type(self).__name__)
        if u.dim() != 3:
            raise ValueError(f"SSM expects input of shape (batch, {self.d_model}, length), got {tuple(u.shape)}")
        if u.shape[1] != self.d_model:
            raise ValueError(
                f"SSM expects {self.d_model} input channels, got {u.shape[1]} (input shape {tuple(u.shape)})"
            )
        if u.shape[2] < 1:
            raise ValueError("SSM input has length 0")
        self._check_dtype(u)

    def _check_dtype(self, u: torch.Tensor) -> None:
        """Any floating dtype matching the layer's (float32 or float64); others get a clear error.
        Under autocast the mixed dtypes are autocast's to manage."""
        if not u.is_floating_point():
            raise TypeError(
                f"SSM input must be floating point, got {u.dtype}; cast it with u.to({self.log_dt.dtype}) "
                "(integer token ids go through SSMBackbone(vocab_size=...))"
            )
        if u.dtype != self.log_dt.dtype and not torch.is_autocast_enabled(u.device.type):
            raise TypeError(
                f"SSM input has dtype {u.dtype} but the layer's parameters are {self.log_dt.dtype}: "
                f"cast the input with u.to({self.log_dt.dtype}) or the layer with .to({u.dtype})"
            )

    @property
    def _factor(self) -> float:
        """y = factor Re(C x): 2 with conjugate symmetry (each pair's second mode implied), else 1."""
        return 2.0 if self.conj_sym else 1.0

    def _feedthrough(self, y: torch.Tensor, u: torch.Tensor, with_d: bool = True) -> torch.Tensor:
        """y + D u (with_d=False: the kernels already hold an identity or diagonal D), then the mixer."""
        if with_d:
            y = add_feedthrough(y, self.D_mode, self.D, u)
        if self.mixer is not None:
            y = channel_linear(self.mixer, y)
        return y

    # ------------------------------------------------------------ compute modes
    def forward(
        self,
        u: torch.Tensor,
        state: torch.Tensor | None = None,
        *,
        mode: str = "fft",
        return_state: bool = False,
        dt: torch.Tensor | None = None,
    ):
        """u: (batch, H, L) -> y: (batch, M, L).

        mode: "fft" (convolution, default) or "recurrence" (sequential reference loop).
        state: (batch, heads, P) complex state x_{-1} to continue from (causal only).
        return_state: also return the final state x_{L-1}, (batch, heads, P), for `step`.
        dt: None, or per-step time deltas (batch, L) or (L,), finite and > 0, in units of the
            training sample period: step k uses Delta_k = Delta * dt_k (irregular time stamps).
            Mode "fft" then runs the parallel scan (`chunk_length` does not apply). Bidirectional:
            the backward direction runs over the reversed sequence with the gaps of that
            direction: the step from sample k+1 back to k is the gap dt_{k+1} (the same gap as
            forward), and the boundary sample L-1 takes dt_0, as sample 0 does forward.
        With `chunk_length` set and L above it, the FFT mode runs chunk by chunk (same result).
        """
        self._check_input(u)
        if mode not in ("fft", "recurrence"):
            raise ValueError(f"unknown mode {mode!r}; choose 'fft' or 'recurrence'")
        if self.bidirectional and (state is not None or return_state):
            raise ValueError("a bidirectional SSM has no causal state: state/return_state need bidirectional=False")
        if state is not None:
            self._check_state(state, u.shape[0])
            state = state.to(self._complex_dtype())  # a state of another precision, as `step` takes it
        if dt is not None:
            dt = self._check_dt(dt, u.shape[0], u.shape[-1], u.device)
            y, x = self._in_layer_precision(self._irregular, u, dt, state, mode)
            y = self._feedthrough(y, u)
            return (y, x) if return_state else y
        if mode == "recurrence":
            y, x = self._in_layer_precision(self._sequential, u, state)
            y = self._feedthrough(y, u)
            return (y, x) if return_state else y
        y, x, d_done = self._in_layer_precision(self._fft_core, u, state, return_state)
        y = self._feedthrough(y, u, with_d=not d_done)
        return (y, x) if return_state else y

    def _in_layer_precision(self, ssm_part, u: torch.Tensor, *args):
        """ssm_part(u, *args), the SSM part of a forward mode (states, kernels, FFTs), in the layer's dtype:
        under autocast it runs with autocast off on u cast to that dtype (D and the mixer, applied after
        it by _feedthrough, stay under autocast)."""
        if not torch.is_autocast_enabled(u.device.type):
            return ssm_part(u, *args)
        with torch.autocast(u.device.type, enabled=False):
            return ssm_part(u.to(self.log_dt.dtype), *args)

    def _fft_core(self, u: torch.Tensor, state: torch.Tensor | None, return_state: bool):
        """The FFT-mode SSM part: -> (y before the mixer (b, M, L), final state or None, whether D is in y)."""
        L = u.shape[-1]
        chunk = self.chunk_length
        if chunk is not None and L > chunk:
            y, x = self._chunked(u, chunk, state, return_state)
            if self.bidirectional:
                y_back, _ = self._chunked(u.flip(-1), chunk, None, False, backward=True)
                y = (y + y_back.flip(-1)) / 2 if self.bidirectional == "ldnn" else y + y_back.flip(-1)
            return y, x, False
        if state is None and not return_state:
            if self.kernel_first:
                spectrum = self._kernel_spectrum(L, 2 * L, two_sided=bool(self.bidirectional), fold_d=True)
                return spectral_convolution(u, spectrum, 2 * L), None, self.D_mode in ("identity", "diagonal")
            if self.bidirectional:
                Abar, Bbar, log_abar, C = self.discrete()
                ldnn = self.bidirectional == "ldnn"
                backward = self.discrete(backward=True) if ldnn else (Abar, Bbar, log_abar, C)
                if states_by_recurrence(u):
                    y, _ = recurrent_state_convolution(u, Bbar, C, self._factor, Abar, backward[0], average=ldnn)
                    return y, None, False
                spectrum = state_spectrum(log_abar, L, backward[2], average=ldnn)
                return state_convolution(u, Bbar, C, self._factor, spectrum)[0], None, False
        y, x = self._causal_with_state(u, state, return_state)
        return y, x, False

    def _sequential(self, u: torch.Tensor, state: torch.Tensor | None):
        """The recurrence-mode SSM part (before D and mixer): -> (y (b, M, L), x_{L-1})."""
        Abar, Bbar, _, C = self.discrete()
        v = input_projection(u, Bbar)
        x = self._recurrence(v, Abar, state)
        if self.bidirectional:
            Abar_b = self.discrete(backward=True)[0] if self.bidirectional == "ldnn" else Abar
            x_back = self._recurrence(v.flip(-1), Abar_b, None).flip(-1)
            x = (x + x_back) / 2 if self.bidirectional == "ldnn" else x + x_back
        return readout(x, C, self._factor), x[..., -1]

    def _recurrence(self, v: torch.Tensor, Abar: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
        """States one step at a time: v (b, S, P, L); Abar (S, P), or (b, S, P, L) per step."""
        x_prev = torch.zeros_like(v[..., 0]) if state is None else state.to(v.dtype)
        states = []
        for k in range(v.shape[-1]):
            x_prev = (Abar[..., k] if Abar.dim() == 4 else Abar) * x_prev + v[..., k]
            states.append(x_prev)
        return torch.stack(states, dim=-1)

    # ------------------------------------------------------------ irregular time stamps
    def _check_dt(self, dt, batch: int, length: int | None, device) -> torch.Tensor:
        """Per-step time deltas -> (batch, length) (or (batch,) when length is None) in the layer's dtype."""
        dt = torch.as_tensor(dt, device=device)
        if dt.is_complex() or dt.dtype == torch.bool:
            raise TypeError(f"dt must hold real time deltas, got dtype {dt.dtype}")
        dt = dt.to(self.log_dt.dtype)
        expected = (batch,) if length is None else (batch, length)
        if length is not None and dt.dim() == 1 and dt.shape[0] == length:
            dt = dt.expand(batch, length)
        elif length is None and dt.dim() == 0:
            dt = dt.expand(batch)
        if tuple(dt.shape) != expected:
            allowed = f"{expected} or ({length},)" if length is not None else f"{expected} or a scalar"
            raise ValueError(f"dt must have shape {allowed}, got {tuple(dt.shape)}")
        if not bool(torch.isfinite(dt).all()):
            raise ValueError("dt has NaN or infinite time deltas; every step needs a finite delta > 0")
        if not bool((dt > 0).all()):
            raise ValueError(
                f"dt must be > 0 at every step (time stamps strictly increasing), got min {float(dt.min()):.3g}"
            )
        return dt

    def _per_step(self, dt: torch.Tensor, backward: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(Abar_k, gamma_k), each (..., S, P), of Delta_k = Delta * dt_k for dt (...). The LDNN backward
        system has its own Lambda in Abar and shares the forward Bbar (LDNN eq. 18), as without dt."""
        Lambda = self._lambda()
        Delta = self.Delta * dt[..., None, None]
        Abar, gamma = discretize(Lambda, Delta, self.discretization, self.alpha)
        if backward and self.bidirectional == "ldnn":
            Abar, _ = discretize(self._lambda("Lambda_backward"), Delta, self.discretization, self.alpha)
        return Abar, gamma

    def _irregular_states(
        self, Bu: torch.Tensor, dt: torch.Tensor, state: torch.Tensor | None, mode: str, backward: bool = False
    ) -> torch.Tensor:
        """States x_k = Abar_k x_{k-1} + gamma_k (B u_k): Bu (b, S, P, L) complex, dt (b, L) -> (b, S, P, L)."""
        Abar, gamma = self._per_step(dt, backward)  # (b, L, S, P)
        v = gamma * Bu.permute(0, 3, 1, 2)
        if mode == "recurrence":
            return self._recurrence(v.permute(0, 2, 3, 1), Abar.permute(0, 2, 3, 1), state)
        return diagonal_scan(Abar, v, state).permute(0, 2, 3, 1)

    def _irregular(self, u: torch.Tensor, dt: torch.Tensor, state: torch.Tensor | None, mode: str):
        """SSM part (before D and mixer) with per-step Delta_k: -> (y (b, M, L), x_{L-1})."""
        C = self._complex(self.C)
        # B u_k once; gamma_k (the only part of Bbar_k that depends on k) is applied per step.
        Bu = input_projection(u, self._complex(self.B))
        x = self._irregular_states(Bu, dt, state, mode)
        if self.bidirectional:
            # The step from sample k+1 back to k spans the gap dt_{k+1}; the boundary sample L-1 takes dt_0.
            back_dt = torch.roll(dt, -1, dims=1).flip(1)
            x_back = self._irregular_states(Bu.flip(-1), back_dt, None, mode, backward=True).flip(-1)
            x = (x + x_back) / 2 if self.bidirectional == "ldnn" else x + x_back
        return readout(x, C, self._factor), x[..., -1]

    def _check_state(self, state: torch.Tensor, batch: int) -> None:
        expected = (batch, self.heads, self.P)
        if tuple(state.shape) != expected or not state.is_complex():
            raise ValueError(f"state must be complex of shape {expected}, got {tuple(state.shape)} {state.dtype}")

    def initial_state(self, batch: int, device=None) -> torch.Tensor:
        """Zero state x_{-1}: (batch, heads, P) complex."""
        if self.bidirectional:
            raise ValueError("a bidirectional SSM cannot run step by step")
        device = device if device is not None else self.log_dt.device
        return torch.zeros(batch, self.heads, self.P, dtype=self._complex_dtype(), device=device)

    def step(
        self, u_t: torch.Tensor, state: torch.Tensor, dt: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step of the recurrence. u_t: (batch, H), state: (batch, heads, P) -> (y_t (batch, M), state).

        dt: None, or the time delta of this step, (batch,) or a scalar (see `forward`): Delta_k = Delta * dt.

        The discretized Abar, Bbar and C are computed once and reused while the parameters (and
        dt_scale) stay unchanged, when no gradient is being recorded; with autograd on they are
        recomputed every step so that gradients reach the parameters.
        """
        if self.bidirectional:
            raise ValueError("a bidirectional SSM cannot run step by step")
        if u_t.dim() != 2 or u_t.shape[1] != self.d_model:
            raise ValueError(f"step expects u_t of shape (batch, {self.d_model}), got {tuple(u_t.shape)}")
        self._check_dtype(u_t)
        self._check_state(state, u_t.shape[0])
        Abar, Bi, Ci = self._step_constants()
        b, S, P, Hh, Mh = u_t.shape[0], self.heads, self.P, self.d_head_in, self.d_head_out
        u_t = u_t.to(Bi.dtype)
        # Every product keeps the batch as a batch index (per-sample results do not depend on the batch).
        if Hh == 1:
            v = Bi[..., 0] * u_t[:, :, None]  # (b, S, 2P)
        else:
            v = per_sample_mv(Bi, u_t.reshape(b, S, Hh))
        v = torch.view_as_complex(v.reshape(b, S, P, 2))
        if dt is not None:
            # Bi holds Bbar of the constant Delta; with a delta of its own the step needs B u and gamma(Delta dt).
            Abar, gamma = self._per_step(self._check_dt(dt, b, None, u_t.device))  # (b, S, P)
            B = self._complex(self.B)
            v = gamma * (B[None] * u_t.reshape(b, S, 1, Hh)).sum(-1)
        state = torch.addcmul(v, Abar, state.to(v.dtype))
        x = torch.view_as_real(state).reshape(b, S, 2 * P)
        if Mh == 1:
            y = (Ci[:, 0] * x).sum(-1)
        else:
            y = per_sample_mv(Ci, x)
        y = add_feedthrough(y.reshape(b, self.d_output), self.D_mode, self.D, u_t)
        if self.mixer is not None:
            y = per_sample_mv(self.mixer.weight[None], y[:, None], self.mixer.bias[None])[:, 0]
        return y, state

    def _step_constants(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(Abar (S, P) complex, Bbar (S, 2P, Hh) and factor*[C_re, -C_im] (S, Mh, 2P), real with the
        real and imaginary parts interleaved, the layout of torch.view_as_real of the state)."""
        params = (self.Lambda_re_raw, self.Lambda_im, self.log_dt, self.B, self.C)
        cacheable = not (torch.is_grad_enabled() and any(p.requires_grad for p in params))
        key = (tuple((p._version, p.data_ptr(), p.dtype, p.device) for p in params), self.dt_scale, self._delta_factor)
        cached = self.__dict__.get("_step_cache")
        if cacheable and cached is not None and cached[0] == key:
            return cached[1]
        Abar, Bbar, _, C = self.discrete()
        S, P = self.heads, self.P
        Bi = torch.view_as_real(Bbar).permute(0, 1, 3, 2).reshape(S, 2 * P, self.d_head_in)
        Ci = torch.stack([C.real, -C.imag], dim=-1).reshape(S, self.d_head_out, 2 * P)
        if self.conj_sym:
            Ci = 2.0 * Ci
        constants = (Abar, Bi.contiguous(), Ci.contiguous())
        if cacheable:
            self.__dict__["_step_cache"] = (key, constants)
        return constants

    # ------------------------------------------------------------ kernel-first convolution
    @property
    def kernel_first(self) -> bool:
        """Whether the FFT mode convolves with per-head kernels (see `convolution`).

        "auto" takes the kernels when (M/s)(H/s) < 16 P: the kernels' cost grows with their
        number H (H/s) (building, transforming and applying them), the state's with the
        batch * s * P complex convolutions; the factor 16 is where the two cross in CPU
        measurements (forward+backward, batch 16, H 64 and 256, N 16 to 256).
        """
        if self.convolution == "auto":
            return self.d_head_out * self.d_head_in < 16 * self.P
        return self.convolution == "kernel"

    # ------------------------------------------------------------ convolution kernels
    def _discrete_direction(self, backward: bool):
        """(Abar, Bbar, log Abar, C) of one direction. The LDNN backward system has its own Abar and
        shares the forward Bbar and C (LDNN eq. 18)."""
        Abar, Bbar, log_abar, C = self.discrete()
        if backward and self.bidirectional == "ldnn":
            Abar, _, log_abar, _ = self.discrete(backward=True)
        return Abar, Bbar, log_abar, C

    def _block_kernels(self, length: int, backward: bool = False) -> torch.Tensor:
        """Per-head kernels (S, Mh, Hh, length) of one direction (`head_kernels`); the LDNN backward
        kernel has its own Abar and shares Bbar (eq. 18)."""
        _, Bbar, log_abar, C = self._discrete_direction(backward)
        return head_kernels(Bbar, C, log_abar, self._factor, length)

    def _kernel_spectrum(self, length: int, n: int, *, two_sided: bool, fold_d: bool) -> torch.Tensor:
        """rfft (size n) of the per-head kernels of `_convolution_kernels`: (S, Mh, Hh, n/2 + 1) complex."""
        return torch.fft.rfft(self._convolution_kernels(length, n, two_sided=two_sided, fold_d=fold_d), n=n)

    def _convolution_kernels(self, length: int, n: int, *, two_sided: bool, fold_d: bool) -> torch.Tensor:
        """The per-head kernels the FFT mode convolves with: (S, Mh, Hh, length) real, or with
        `two_sided` (S, Mh, Hh, n) on a circular grid of n >= 2 length - 1 taps.

        two_sided: the bidirectional kernel (forward taps at l >= 0, backward taps at -l, index n - l),
        so that one convolution gives both directions. fold_d: a diagonal/identity D added to tap 0
        (then the feed-through costs nothing at run time). ssmts.nn.export applies them directly.
        """
        K = self._block_kernels(length)
        if two_sided:
            back = K if self.bidirectional == "essm" else self._block_kernels(length, backward=True)
            K = two_sided_kernel(K, back, n, average=self.bidirectional == "ldnn")
        if fold_d and self.D_mode in ("identity", "diagonal"):
            d = self.D if self.D_mode == "diagonal" else torch.ones(self.d_model, dtype=K.dtype, device=K.device)
            K = torch.cat(
                [K[..., :1] + torch.diag_embed(d.reshape(self.heads, self.d_head_in))[..., None], K[..., 1:]], -1
            )
        return K

    # ------------------------------------------------------------ causal pieces with a state
    def _causal_with_state(
        self,
        u: torch.Tensor,
        state: torch.Tensor | None,
        want_state: bool,
        backward: bool = False,
        cache: dict | None = None,
    ):
        """The SSM part (before D and mixer) of a causal pass from `state`: -> (y (b, M, L), x_{L-1} or None).

        `cache` (a dict) keeps what depends only on the parameters and L between calls (chunked runs).
        """
        cache = {} if cache is None else cache

        def cached(key, make):
            if key not in cache:
                cache[key] = make()
            return cache[key]

        L = u.shape[-1]
        Abar, Bbar, log_abar, C = cached("discrete", lambda: self._discrete_direction(backward))
        if self.kernel_first:
            spectrum = cached(
                ("spectrum", L), lambda: torch.fft.rfft(self._block_kernels(L, backward=backward), n=2 * L)
            )
            y = spectral_convolution(u, spectrum, 2 * L)
            if state is None and not want_state:
                return y, None

            free, reversed_powers, abar_length = cached(("powers", L), lambda: state_powers(log_abar, L))
            if state is not None:
                y = y + free_response(state, free, C, self._factor)
            new_state = final_state(u, state, reversed_powers, Bbar, abar_length) if want_state else None
            return y, new_state
        if states_by_recurrence(u):
            return recurrent_state_convolution(u, Bbar, C, self._factor, Abar, state=state, want_state=want_state)
        spectrum = cached(("state spectrum", L), lambda: state_spectrum(log_abar, L))
        free = None if state is None else cached(("free", L), lambda: powers(log_abar, L, start=1))
        return state_convolution(u, Bbar, C, self._factor, spectrum, state, free, want_state)

    def _chunked(
        self, u: torch.Tensor, chunk: int, state: torch.Tensor | None, want_state: bool, backward: bool = False
    ):
        """Causal SSM part over chunks of `chunk` steps, the state carried between them."""
        cache: dict = {}
        ys = []
        for start in range(0, u.shape[-1], chunk):
            last = start + chunk >= u.shape[-1]
            y, state = self._causal_with_state(
                u[..., start : start + chunk], state, want_state or not last, backward, cache
            )
            ys.append(y)
        return torch.cat(ys, dim=-1), state

    # ------------------------------------------------------------ analysis
    def kernel(self, length: int) -> torch.Tensor:
        """Impulse response of the SSM part (without D and mixer): (M, H, length) real.

        K[:, :, l] = 2 Re(C Abar^l Bbar) per head, zero off the head blocks. Meant for
        plots and tests; training never builds the full matrix.
        """
        if isinstance(length, bool) or not isinstance(length, numbers.Integral) or length < 1:
            raise ValueError(f"length must be a positive integer (the kernel's number of steps), got {length!r}")
        block = self._block_kernels(int(length))
        K = torch.zeros(self.d_output, self.d_model, length, dtype=block.dtype, device=block.device)
        for s in range(self.heads):
            K[s * self.d_head_out : (s + 1) * self.d_head_out, s * self.d_head_in : (s + 1) * self.d_head_in] = block[s]
        return K

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, d_state={self.d_state}, d_output={self.d_output}, heads={self.heads}, "
            f"init={self.init!r}, discretization={self.discretization!r}, bidirectional={self.bidirectional!r}, "
            f"D={self.D_mode!r}, conj_sym={self.conj_sym}, real_bc={self.real_bc}, "
            f"convolution={self.convolution!r}" + (", fixed_transition=True" if self.fixed_transition else "")
        )

    # ------------------------------------------------------------ dense systems
    @classmethod
    def from_matrices(
        cls,
        A,
        B,
        C,
        D=None,
        *,
        dt: float,
        discretization: str = "zoh",
        alpha: float = 0.5,
        max_condition: float = 1e8,
        ptd_eps: float = 1e-6,
        dtype: torch.dtype = torch.float64,
    ) -> "SSM":
        """A layer whose output equals the dense real system (A: NxN, B: NxH, C: MxN, D: MxH).

        Convention (the seed convention): x_k = Abar x_{k-1} + Bbar u_k, y_k = C x_k + D u_k,
        x_{-1} = 0, with Abar, Bbar of step dt. The layer holds A's diagonal form (Lambda, V^-1 B,
        C V) of ssmts.nn.dense.diagonal_system with all N complex modes (conj_sym=False,
        y = Re(C~ x~)); if A's eigenvectors are worse conditioned than max_condition, A is
        perturbed-then-diagonalized (ptd_eps) with a warning, and the layer approximates the system.
        """
        if not dt > 0:
            raise ValueError(f"dt must be > 0, got {dt}")
        Lambda, B_tilde, C_tilde, D = diagonal_system(A, B, C, D, max_condition=max_condition, ptd_eps=ptd_eps)
        (M, N), H = C_tilde.shape, B_tilde.shape[1]
        layer = cls(
            H,
            N,
            d_output=M,
            heads=1,
            init="lin",
            discretization=discretization,
            alpha=alpha,
            conj_sym=False,
            D="full" if D is not None else "none",
            min_decay=float(min(1e-4, 0.5 * (-Lambda.real).min())),  # keeps modes slower than the floor
        ).to(dtype)
        complex_dtype = torch.complex128 if dtype == torch.float64 else torch.complex64
        with torch.no_grad():
            Lt = torch.from_numpy(Lambda)[None]
            layer.Lambda_re_raw.copy_(torch.log(-Lt.real))
            layer.Lambda_im.copy_(Lt.imag)
            layer.log_dt.fill_(math.log(dt))
            layer.B.copy_(torch.view_as_real(torch.from_numpy(B_tilde).to(complex_dtype))[None])
            layer.C.copy_(torch.view_as_real(torch.from_numpy(C_tilde).to(complex_dtype))[None])
            if D is not None:
                layer.D.copy_(torch.from_numpy(D))
        return layer
