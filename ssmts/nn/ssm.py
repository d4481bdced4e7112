"""The MIMO diagonal SSM layer of LDNN / eSSM (ssm-math.md sections 1-5, 7).

Shapes: u: (batch, H, L) -> y: (batch, M, L). The H channels are split into
`heads` groups of H/heads; each head is its own MIMO diagonal system

    x_k = Abar x_{k-1} + Bbar u_k,   y_k = 2 Re(C x_k) + D u_k       (conj_sym)

with P = N/2 complex modes (N = d_state per head), and the heads' outputs are
concatenated (block-diagonal system, eSSM eq. 14) and mixed by a linear map when
heads > 1. Three compute modes give the same numbers: FFT convolution (training),
the sequential recurrence (reference), and `step` (streaming).
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .functional import channel_linear
from .discretization import check_discretization, discretize, log_transition
from .init import INITS, initialize_head, ptd_perturbation
from .resampling import check_delta_factor, delta_factor

LAMBDA_ENFORCERS = ("exp", "softplus", "clip")
D_MODES = ("none", "identity", "diagonal", "full")
BIDIRECTIONAL_MODES = (False, True, "essm", "ldnn")
CONVOLUTIONS = ("auto", "state", "kernel")


def _softplus_inverse(x: torch.Tensor) -> torch.Tensor:
    return x + torch.log(-torch.expm1(-x))


class SSM(nn.Module):
    """Multi-head MIMO diagonal state-space layer.

    Args:
        d_model: H, input channels.
        d_state: N, state size of each head (N/2 complex modes with conj_sym).
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
            C x; memory (batch, heads, P, 2L) complex. "kernel" (S4D): build each head's
            (M/s x H/s x L) kernel 2 Re(C Abar^l Bbar) and convolve u with it; memory
            (batch, H, 2L). "auto" takes the kernel when P > (M/s)(H/s), i.e. for many small
            heads such as the eSSM paper presets, and the state otherwise.
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
        D = D if D is not None else ("diagonal" if M == H else "full")
        if D not in D_MODES:
            raise ValueError(f"unknown D {D!r}; choose one of {D_MODES}")
        if D in ("identity", "diagonal") and M != H:
            raise ValueError(f"D={D!r} needs d_output == d_model, got {M} != {H}; use D='full' or 'none'")

        self.d_model, self.d_state, self.d_output, self.heads = H, N, M, int(heads)
        self.d_head_in, self.d_head_out = H // heads, M // heads
        self.P = N // 2 if conj_sym else N
        self.init, self.discretization, self.alpha = init, discretization, float(alpha)
        self.lambda_enforce, self.conj_sym, self.real_bc = lambda_enforce, bool(conj_sym), bool(real_bc)
        self.bidirectional = "essm" if bidirectional is True else (bidirectional or False)
        self.D_mode, self.min_decay = D, float(min_decay)
        self.convolution = convolution
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
                init, N, self.d_head_in, self.d_head_out, conj_sym=conj_sym, generator=generator,
                ptd_eps=ptd_eps, ptd_gamma=ptd_gamma,
            )
            for _ in range(heads)
        ]
        Lambda = torch.stack([h[0] for h in heads_init])  # (S, P)
        B = torch.stack([h[1] for h in heads_init])  # (S, P, Hh)
        C = torch.stack([h[2] for h in heads_init])  # (S, Mh, P)
        self._set_lambda("Lambda", Lambda)
        if self.bidirectional == "ldnn":
            self._set_lambda("Lambda_backward", Lambda.clone())
        self._set_bc(B, C)

        u01 = torch.rand((heads, self.P), generator=generator, dtype=torch.float64)
        log_dt = math.log(dt_min) + u01 * (math.log(dt_max) - math.log(dt_min))
        self.log_dt = nn.Parameter(log_dt.float())

        if D == "diagonal":
            self.D = nn.Parameter(torch.randn(H, generator=generator))
        elif D == "full":
            self.D = nn.Parameter(torch.randn(M, H, generator=generator) / math.sqrt(H))
        else:
            self.register_parameter("D", None)
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
    def dt_scale(self) -> float:
        """Constant factor on every Delta, kept with the model (finite, > 0)."""
        return self._dt_scale

    @dt_scale.setter
    def dt_scale(self, value: float) -> None:
        self._dt_scale = check_delta_factor(value, "dt_scale")

    @property
    def Delta(self) -> torch.Tensor:
        """Step sizes in use, (heads, P): exp(log_dt) * dt_scale, times the factor of an
        enclosing `scaled_delta` block."""
        return torch.exp(self.log_dt) * (self.dt_scale * self._delta_factor)

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
        if u.dim() != 3:
            raise ValueError(f"SSM expects input of shape (batch, {self.d_model}, length), got {tuple(u.shape)}")
        if u.shape[1] != self.d_model:
            raise ValueError(f"SSM expects {self.d_model} input channels, got {u.shape[1]} (input shape {tuple(u.shape)})")
        if u.shape[2] < 1:
            raise ValueError("SSM input has length 0")
        self._check_dtype(u)

    def _check_dtype(self, u: torch.Tensor) -> None:
        """Any floating dtype matching the layer's (float32 or float64); others get a clear error.
        Under autocast the mixed dtypes are autocast's to manage."""
        if not u.is_floating_point():
            raise TypeError(f"SSM input must be floating point, got {u.dtype}; cast it with u.to({self.log_dt.dtype}) "
                            "(integer token ids go through SSMBackbone(vocab_size=...))")
        if u.dtype != self.log_dt.dtype and not torch.is_autocast_enabled(u.device.type):
            raise TypeError(f"SSM input has dtype {u.dtype} but the layer's parameters are {self.log_dt.dtype}: "
                            f"cast the input with u.to({self.log_dt.dtype}) or the layer with .to({u.dtype})")

    def _readout(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """y from states. x: (b, S, P, L) complex, u: (b, H, L) real -> (b, M, L)."""
        C = self._complex(self.C)
        b, L = u.shape[0], u.shape[-1]
        # 2 Re(C x) = 2 (C_re x_re - C_im x_im): real matmuls are much faster than complex einsum on
        # CPU; the factor 2 goes into the small C rather than the (b, M, L) output.
        Cr = torch.cat([C.real, -C.imag], dim=-1)  # (S, Mh, 2P)
        if self.conj_sym:
            Cr = 2.0 * Cr
        xr = torch.cat([x.real, x.imag], dim=2)  # (b, S, 2P, L)
        y = torch.matmul(Cr, xr).reshape(b, self.d_output, L)
        return self._feedthrough(y, u)

    def _feedthrough(self, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        if self.D_mode == "identity":
            y = y + u
        elif self.D_mode == "diagonal":
            y = y + self.D[:, None] * u
        elif self.D_mode == "full":
            y = y + torch.bmm(self.D.expand(u.shape[0], -1, -1), u)
        if self.mixer is not None:
            y = channel_linear(self.mixer, y)
        return y

    def _input_projection(self, u: torch.Tensor, Bbar: torch.Tensor) -> torch.Tensor:
        """Bbar u per head: u (b, H, L) real, Bbar (S, P, Hh) -> (b, S, P, L) complex."""
        b, _, L = u.shape
        uh = u.reshape(b, self.heads, self.d_head_in, L)
        Br = torch.cat([Bbar.real, Bbar.imag], dim=1)  # (S, 2P, Hh)
        v = torch.matmul(Br, uh)  # (b, S, 2P, L)
        return torch.complex(v[:, :, : self.P], v[:, :, self.P :])

    @staticmethod
    def _causal_conv(v: torch.Tensor, log_abar: torch.Tensor) -> torch.Tensor:
        """x_k = sum_{l<=k} Abar^l v_{k-l} by FFT. v: (..., S, P, L) complex, log_abar: (S, P)."""
        L = v.shape[-1]
        n = 2 * L  # zero padding to 2L removes the circular wrap-around
        steps = torch.arange(L, device=v.device, dtype=log_abar.real.dtype)
        kernel = torch.exp(log_abar[..., None] * steps)  # (S, P, L): Abar^l
        x = torch.fft.ifft(torch.fft.fft(v, n=n) * torch.fft.fft(kernel, n=n), n=n)
        return x[..., :L]

    # ------------------------------------------------------------ compute modes
    def forward(
        self,
        u: torch.Tensor,
        state: torch.Tensor | None = None,
        *,
        mode: str = "fft",
        return_state: bool = False,
    ):
        """u: (batch, H, L) -> y: (batch, M, L).

        mode: "fft" (convolution, default) or "recurrence" (sequential reference loop).
        state: (batch, heads, P) complex state x_{-1} to continue from (causal only).
        return_state: also return the final state x_{L-1}, (batch, heads, P), for `step`.
        """
        self._check_input(u)
        if mode not in ("fft", "recurrence"):
            raise ValueError(f"unknown mode {mode!r}; choose 'fft' or 'recurrence'")
        if self.bidirectional and (state is not None or return_state):
            raise ValueError("a bidirectional SSM has no causal state: state/return_state need bidirectional=False")
        if state is not None:
            self._check_state(state, u.shape[0])
        if mode == "fft" and state is None and not return_state and self.kernel_first:
            return self._feedthrough(self._kernel_conv(u), u)
        Abar, Bbar, log_abar, _ = self.discrete()
        v = self._input_projection(u, Bbar)
        if mode == "recurrence":
            x = self._recurrence(v, Abar, state)
            if self.bidirectional:
                Abar_b, _, _, _ = self.discrete(backward=True) if self.bidirectional == "ldnn" else (Abar, None, None, None)
                x_back = self._recurrence(v.flip(-1), Abar_b, None).flip(-1)
                x = (x + x_back) / 2 if self.bidirectional == "ldnn" else x + x_back
        else:
            if self.bidirectional:
                log_abar_b = self.discrete(backward=True)[2] if self.bidirectional == "ldnn" else log_abar
                both = self._causal_conv(torch.stack([v, v.flip(-1)]), torch.stack([log_abar, log_abar_b])[:, None])
                x = (both[0] + both[1].flip(-1)) / 2 if self.bidirectional == "ldnn" else both[0] + both[1].flip(-1)
            else:
                x = self._causal_conv(v, log_abar)
                if state is not None:
                    # Free response of x_{-1}: Abar^(k+1) x_{-1}.
                    steps = torch.arange(1, u.shape[-1] + 1, device=u.device, dtype=log_abar.real.dtype)
                    x = x + torch.exp(log_abar[..., None] * steps) * state[..., None]
        y = self._readout(x, u)
        if return_state:
            return y, x[..., -1]
        return y

    def _recurrence(self, v: torch.Tensor, Abar: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
        x_prev = torch.zeros_like(v[..., 0]) if state is None else state.to(v.dtype)
        states = []
        for k in range(v.shape[-1]):
            x_prev = Abar * x_prev + v[..., k]
            states.append(x_prev)
        return torch.stack(states, dim=-1)

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

    def step(self, u_t: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step of the recurrence. u_t: (batch, H), state: (batch, heads, P) -> (y_t (batch, M), state)."""
        if self.bidirectional:
            raise ValueError("a bidirectional SSM cannot run step by step")
        if u_t.dim() != 2 or u_t.shape[1] != self.d_model:
            raise ValueError(f"step expects u_t of shape (batch, {self.d_model}), got {tuple(u_t.shape)}")
        self._check_dtype(u_t)
        self._check_state(state, u_t.shape[0])
        Abar, Bbar, _, _ = self.discrete()
        v = self._input_projection(u_t[..., None], Bbar)[..., 0]
        state = Abar * state + v
        y = self._readout(state[..., None], u_t[..., None])[..., 0]
        return y, state

    # ------------------------------------------------------------ kernel-first convolution
    @property
    def kernel_first(self) -> bool:
        """Whether the FFT mode convolves with per-head kernels (see `convolution`)."""
        if self.convolution == "auto":
            return self.P > self.d_head_out * self.d_head_in
        return self.convolution == "kernel"

    def _block_kernels(self, length: int, backward: bool = False) -> torch.Tensor:
        """Per-head kernels K[s, m, h, l] = 2 Re(C_s Abar_s^l Bbar_s)[m, h]: (S, Mh, Hh, length) real.

        The backward (LDNN) kernel has its own Abar and shares Bbar (eq. 18).
        """
        _, Bbar, log_abar, C = self.discrete()
        if backward:
            log_abar = self.discrete(backward=True)[2]
        steps = torch.arange(length, device=log_abar.device, dtype=log_abar.real.dtype)
        powers = torch.exp(log_abar[..., None] * steps)  # (S, P, L)
        S, Mh, Hh = self.heads, self.d_head_out, self.d_head_in
        CB = (C[:, :, None, :] * Bbar.transpose(1, 2)[:, None, :, :]).reshape(S, Mh * Hh, -1)  # (S, Mh Hh, P)
        # One (Mh Hh x P) @ (P x L) product per head; broadcasting powers over Mh would copy it Mh times.
        K = torch.bmm(CB, powers).real.reshape(S, Mh, Hh, length)
        return K * (2.0 if self.conj_sym else 1.0)

    def _kernel_conv(self, u: torch.Tensor) -> torch.Tensor:
        """y = K * u with per-head kernels, by FFT: u (b, H, L) -> (b, M, L), before D and mixer."""
        b, _, L = u.shape
        n = 2 * L  # zero padding to 2L removes the circular wrap-around
        uh = u.reshape(b, self.heads, 1, self.d_head_in, L)

        def spectrum(kernel: torch.Tensor) -> torch.Tensor:
            return torch.fft.rfft(kernel, n=n)[None]  # (1, S, Mh, Hh, n/2 + 1)

        def convolve(kernel_spectrum: torch.Tensor, signal: torch.Tensor) -> torch.Tensor:
            # Broadcast-multiply and sum over the (few) head inputs: one sample's result does not
            # depend on the batch it is in (a batched GEMM would pick kernels by batch size).
            product = (kernel_spectrum * torch.fft.rfft(signal, n=n)).sum(3)
            return torch.fft.irfft(product, n=n)[..., :L]  # (b, S, Mh, L)

        K_f = spectrum(self._block_kernels(L))
        y = convolve(K_f, uh)
        if self.bidirectional == "essm":  # the same kernel on the reversed sequence
            y = y + convolve(K_f, uh.flip(-1)).flip(-1)
        elif self.bidirectional == "ldnn":
            y = (y + convolve(spectrum(self._block_kernels(L, backward=True)), uh.flip(-1)).flip(-1)) / 2
        return y.reshape(b, self.d_output, L)

    # ------------------------------------------------------------ analysis
    def kernel(self, length: int) -> torch.Tensor:
        """Impulse response of the SSM part (without D and mixer): (M, H, length) real.

        K[:, :, l] = 2 Re(C Abar^l Bbar) per head, zero off the head blocks. Meant for
        plots and tests; training never builds the full matrix.
        """
        block = self._block_kernels(length)
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
        x_{-1} = 0. A is diagonalized, A = V Lambda V^-1, giving (Lambda, V^-1 B, C V). All N
        complex modes are kept (conj_sym=False, y = Re(C~ x~)): exact even when A has real
        eigenvalues. If cond(V) > max_condition, A is perturbed-then-diagonalized instead (PTD)
        with a warning; the layer then approximates the system. The fallback's `ptd_eps` is
        smaller than the trainable init's: here fidelity matters more than float32 conditioning
        (HiPPO-LegS N=32: eps=1e-6 gives cond 3.6e4 and a 6e-4 relative output error).
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
        if not dt > 0:
            raise ValueError(f"dt must be > 0, got {dt}")

        Lambda, V = np.linalg.eig(A)
        V = V / np.linalg.norm(V, axis=0, keepdims=True)
        condition = float(np.linalg.cond(V))
        if condition > max_condition:
            result = ptd_perturbation(A, eps=ptd_eps)
            warnings.warn(
                f"eigenvector matrix of A is ill-conditioned (cond = {condition:.3g} > {max_condition:.3g}); "
                f"using perturb-then-diagonalize (cond = {result.condition_number:.3g}, "
                f"||E||/||A|| = {result.relative_size:.3g}): the layer approximates the system",
                stacklevel=2,
            )
            Lambda, V, V_inv = result.Lambda, result.V, result.V_inv
        else:
            V_inv = np.linalg.inv(V)
        if np.any(Lambda.real >= 0):
            raise ValueError(
                f"A has eigenvalues with Re >= 0 (max Re = {Lambda.real.max():.3g}); the layer keeps Re(Lambda) < 0"
            )
        min_decay = float(min(1e-4, 0.5 * (-Lambda.real).min()))
        layer = cls(
            H, N, d_output=M, heads=1, init="lin", discretization=discretization, alpha=alpha,
            conj_sym=False, D="full" if D is not None else "none", min_decay=min_decay,
        ).to(dtype)
        complex_dtype = torch.complex128 if dtype == torch.float64 else torch.complex64
        with torch.no_grad():
            Lt = torch.from_numpy(Lambda.astype(np.complex128))[None]
            layer.Lambda_re_raw.copy_(torch.log(-Lt.real))
            layer.Lambda_im.copy_(Lt.imag)
            layer.log_dt.fill_(math.log(dt))
            layer.B.copy_(torch.view_as_real(torch.from_numpy(V_inv @ B).to(complex_dtype))[None])
            layer.C.copy_(torch.view_as_real(torch.from_numpy(C @ V).to(complex_dtype))[None])
            if D is not None:
                layer.D.copy_(torch.from_numpy(D))
        return layer
