"""Training-free SSM features: fixed diagonal SSMs at many time scales, applied by FFT
convolution and pooled (an SSM counterpart of ROCKET's random convolutions).

Each time scale j has a step Delta_j and `n_kernels` single-output systems that share the
modes of one head (HiPPO-LegS normal part, as `init="legs"`) with random read-outs C:

    y_m[t] = 2 Re( sum_p C[m, p] x_p[t] ),   x_p[t] = Abar_p x_p[t-1] + gamma_p B_p u_m[t]

where u_m is the sum of a random subset of the input channels. The output is the convolution of
u_m with the kernel K_m[l] = 2 Re( sum_p C[m, p] gamma_p B_p Abar_p^l ): on a CPU, a compiled
pass runs the recurrence of the modes and reads and pools the outputs as it goes, storing none
(ssmts.nn._compiled.mode_features); on a GPU, and while the bank is trained, FFT convolutions. The
steps are log-spaced so that the slowest mode remembers about the whole series and the
fastest a few steps. Every response is pooled into the proportion of steps above a few
biases (PPV, the biases being quantiles of the responses on training series), its mean
and its maximum. With `envelope=True` a bank also pools the envelope |x_p[t]| of each mode of each
channel (each mode is a band-pass filter, and its state's magnitude the band's envelope): its RMS, its
maximum and its mean logarithm, relative to the series' RMS, and how much it is modulated. A linear
read-out (ridge, in closed form) goes on top. Data at another rate
(inside ssmts.nn.scaled_delta) meets the same continuous-time kernels discretized at its step,
a mode above its Nyquist frequency answering quasi-statically (`_modes_at_rate`).

The bank is also the first stage of a network that can be trained from there: Lambda, the
steps Delta and the read-outs C are parameters (frozen until `requires_grad_()`), and while
they carry a gradient PPV is counted exactly but differentiated as a sigmoid of temperature
`PPV_TEMPERATURE` x the response's spread (a straight-through estimator), so that the
trained network starts at exactly the features' predictions.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.fft import next_fast_len
from torch import nn

from .discretization import discretize
from .init import initialize_head
from .resampling import above_nyquist, sampled_turns

_BIAS_BATCH = 16  # training series whose responses fit_biases computes at once
_BIAS_ELEMENTS = 1 << 23  # response values fit_biases computes at once (32 MiB of float32)

COMPILED_RECURRENCE_STATES = 160
"""The compiled pass recurs the modes of every channel (channels x 2P real states) up to this many; with
more it pools FFT convolutions' outputs instead. Measured at 42 kernels and d_state=16 (2P = 16), one
thread: the recurrence 1.5-3.9x faster from 2 to 8 channels (128 states), the FFTs 1.1-1.4x faster at
15 (240)."""

ENVELOPE_STATISTICS = 4
"""Features of each mode's envelope |x[t]| with `envelope=True`: its RMS, its maximum and the mean of
its logarithm, each relative to the series' RMS, and how much it is modulated, log(E|x|^4 / (E|x|^2)^2)
(0 for a steady band, more the more it comes and goes) (`_envelope_features`)."""

ENVELOPE_FLOOR = 1e-6
"""The envelope's logarithm is taken of |x|^2 + (ENVELOPE_FLOOR x the series' RMS)^2: a mode that stays at
zero gives a finite feature, and a series scaled by a constant the same one."""

PPV_TEMPERATURE = 0.1
"""Width of the sigmoid whose gradient stands in for PPV's step, in units of each response's
standard deviation over the batch."""

MAX_REAL_LAMBDA = -1e-4
"""Trained real parts of Lambda are kept at or below this, so that every mode stays stable."""


def log_spaced_steps(length: int, n_scales: int, shortest: float = 4.0) -> torch.Tensor:
    """Steps Delta (n_scales,) float64 whose memory 1 / Delta runs log-spaced from `shortest`
    steps to `length` steps (the modes of the LegS normal part decay as exp(-Delta l / 2))."""
    if length < 1 or n_scales < 1:
        raise ValueError(f"need length >= 1 and n_scales >= 1, got {length} and {n_scales}")
    longest = max(float(length), float(shortest))
    if n_scales == 1:
        return torch.tensor([1.0 / math.sqrt(longest * shortest)], dtype=torch.float64)
    return 1.0 / torch.logspace(math.log10(shortest), math.log10(longest), n_scales, dtype=torch.float64)


class SSMFeatures(nn.Module):
    """Fixed diagonal SSMs at `len(steps)` time scales, `n_kernels` random read-outs each.

    forward(u, mask) -> (batch, n_features) with n_features = scales x kernels x
    (n_biases + 2): for every response, PPV at each bias, its mean and its maximum.
    Call `fit_biases` on training series first. Lambda, steps and the read-outs are
    parameters frozen at their draw; `requires_grad_()` makes them trainable.

    u: (batch, channels, length) float; mask: (batch, length) of 1 for real steps (series
    of unequal lengths padded at the end) or None. backward=True runs every SSM backward in
    time (anti-causal: y[t] = sum_l K[l] u[t + l], each step seeing the steps after it).
    """

    _delta_factor = 1.0  # set by ssmts.nn.scaled_delta: data at another rate (training rate / new rate)

    def __init__(
        self,
        d_input: int,
        steps: torch.Tensor,
        *,
        n_kernels: int = 64,
        d_state: int = 32,
        n_biases: int = 4,
        max_channels: int = 9,
        init: str = "legs",
        backward: bool = False,
        envelope: bool = False,
        seed: int = 0,
    ):
        super().__init__()
        if d_input < 1 or n_kernels < 1 or n_biases < 1:
            raise ValueError(f"need d_input, n_kernels, n_biases >= 1, got {d_input}, {n_kernels}, {n_biases}")
        if d_state < 2 or d_state % 2:  # an odd one would give (d_state + 1) / 2 modes, not the d_state / 2 stated
            raise ValueError(f"d_state={d_state} must be even and >= 2: the bank reads d_state / 2 complex modes")
        generator = torch.Generator().manual_seed(int(seed))
        Lambda, B, _ = initialize_head(init, d_state, 1, n_kernels, generator=generator)
        steps = torch.as_tensor(steps, dtype=torch.float64).reshape(-1).clone()
        if not (steps > 0).all():
            raise ValueError("every step Delta must be > 0")
        S = len(steps)
        # A fresh random read-out C for every scale, times B (gamma, which depends on Delta, comes later).
        readout = torch.stack(
            [initialize_head(init, d_state, 1, n_kernels, generator=generator)[2] for _ in range(S)]
        )  # (S, M, P)
        # Complex parameters kept as (..., 2) real pairs: the save format holds real tensors only.
        frozen = dict(requires_grad=False)
        self.Lambda_pairs = nn.Parameter(torch.view_as_real(Lambda).clone(), **frozen)  # (P, 2)
        self.steps = nn.Parameter(steps, **frozen)  # (S,)
        self.readout_pairs = nn.Parameter(torch.view_as_real(readout * B[:, 0]).clone(), **frozen)  # (S, M, P, 2)
        self.register_buffer("channel_mix", _channel_mix(S, n_kernels, d_input, max_channels, generator))
        self.register_buffer("biases", torch.zeros(S, n_kernels, n_biases))
        self.register_buffer(
            "bias_levels", torch.rand(S, n_kernels, n_biases, generator=generator, dtype=torch.float64) * 0.8 + 0.1
        )
        self.n_scales, self.n_kernels, self.n_biases, self.d_input = S, n_kernels, n_biases, d_input
        self.backward, self.envelope = bool(backward), bool(envelope)

    @property
    def n_modes(self) -> int:
        """P: the modes of the head (one of each conjugate pair)."""
        return self.Lambda_pairs.shape[0]

    @property
    def n_envelope_features(self) -> int:
        """The envelope's features: scales x channels x modes x ENVELOPE_STATISTICS (0 without envelope)."""
        return self.n_scales * self.d_input * self.n_modes * ENVELOPE_STATISTICS if self.envelope else 0

    @property
    def n_features(self) -> int:
        return self.n_scales * self.n_kernels * (self.n_biases + 2) + self.n_envelope_features

    def ssm_parameters(self) -> list[nn.Parameter]:
        """Lambda and Delta: the parameters that set the dynamics (trained at the SSM learning rate)."""
        return [self.Lambda_pairs, self.steps]

    def _trained(self) -> bool:
        return torch.is_grad_enabled() and any(p.requires_grad for p in self.parameters())

    def _discrete_modes(self, scales: slice = slice(None)) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(gamma, exponent, quasi_static), each (s, P): the ZOH gain gamma_p of every mode at the step in
        use and its exponent, Abar_p = exp(exponent_p) (Lambda_p Delta at the training rate; inside
        `scaled_delta`, those of `_modes_at_rate`), and the modes answered quasi-statically there
        (Abar_p = 0)."""
        Lambda_pairs = self.Lambda_pairs
        if self.Lambda_pairs.requires_grad:  # a trained real part must not cross into instability
            Lambda_pairs = torch.stack([Lambda_pairs[:, 0].clamp_max(MAX_REAL_LAMBDA), Lambda_pairs[:, 1]], -1)
        Lambda = torch.view_as_complex(Lambda_pairs)
        Delta = self.steps[scales, None].clamp_min(torch.finfo(torch.float64).tiny)  # (s, 1): training steps
        if self._delta_factor != 1.0:
            return _modes_at_rate(Lambda, Delta, self._delta_factor)
        _, gamma = discretize(Lambda[None, :], Delta)  # (s, P)
        exponent = Lambda[None, :] * Delta
        return gamma, exponent, torch.zeros(exponent.shape, dtype=torch.bool)

    def _readout_weights(self, scales: slice = slice(None)) -> torch.Tensor:
        """(s, kernels, 2P) float64: 2 Re(C B) and -2 Im(C B), the weights of Re and Im of the modes."""
        readout = torch.view_as_complex(self.readout_pairs)[scales]
        return torch.cat([2.0 * readout.real, -2.0 * readout.imag], dim=-1)

    def modes(self, length: int, scales: slice = slice(None)) -> tuple[torch.Tensor, torch.Tensor]:
        """(weights (s, kernels, 2P), basis (s, 2P, length)) float64 with K = weights @ basis: the
        basis holds Re and Im of gamma_p Abar_p^l (ZOH) for the P modes, so every kernel is a real
        combination of 2P mode responses (weights 2 Re(C B) and -2 Im(C B)). Inside `scaled_delta`
        (data at another rate) the modes are those of `_modes_at_rate`."""
        gamma, exponent, quasi_static = self._discrete_modes(scales)
        l = torch.arange(length, dtype=torch.float64)
        powers = torch.exp(exponent[:, :, None] * l)  # Abar^l
        powers = torch.where(quasi_static[:, :, None], (l == 0).to(powers.dtype), powers)  # 0^l
        responses = gamma[:, :, None] * powers
        basis = torch.cat([responses.real, responses.imag], dim=1)
        return self._readout_weights(scales), basis

    def kernels(self, length: int) -> torch.Tensor:
        """K: (scales, kernels, length) float64, K_m[l] = 2 Re(sum_p C_mp gamma_p B_p Abar_p^l) (ZOH)."""
        weights, basis = self.modes(length)
        return weights @ basis

    def modes_above_nyquist(self) -> tuple[int, int]:
        """(modes above the Nyquist frequency of the rate in use, modes in all), over the scales: the
        modes answered quasi-statically (`_modes_at_rate`); none at the training rate or above it."""
        Lambda = torch.view_as_complex(self.Lambda_pairs.detach())
        above = above_nyquist(Lambda, self.steps.detach()[:, None], self._delta_factor)
        return int(above.sum()), above.numel()

    def responses(self, u: torch.Tensor, scales: slice = slice(None)) -> torch.Tensor:
        """y: (batch, scales, kernels, length) float32: every kernel of the chosen scales applied
        causally to its channel mix."""
        u_f, n_fft = self._spectrum(u)
        return self._convolve(u_f, n_fft, u.shape[-1], *self.modes(u.shape[-1], scales), self.channel_mix[scales])

    def _check_input(self, u: torch.Tensor) -> None:
        if u.ndim != 3 or u.shape[1] != self.d_input:
            raise ValueError(f"expected u of shape (batch, {self.d_input}, length), got {tuple(u.shape)}")

    def _spectrum(self, u: torch.Tensor) -> tuple[torch.Tensor, int]:
        """(rfft of u zero-padded to n_fft >= 2 L - 1 (no wrap-around), n_fft)."""
        self._check_input(u)
        n_fft = next_fast_len(2 * u.shape[-1] - 1, real=True)
        return torch.fft.rfft(u.float(), n=n_fft), n_fft

    def _convolve(
        self, u_f: torch.Tensor, n_fft: int, L: int, weights: torch.Tensor, basis: torch.Tensor, mix: torch.Tensor
    ) -> torch.Tensor:
        """(batch, s, M, L) responses from u_f (b, H, F), weights (s, M, 2P), basis (s, 2P, L), mix (s, M, H).
        Backward in time, the product with the kernel's conjugate spectrum is a correlation:
        y[t] = sum_l K[l] u[t + l], which n_fft >= 2 L - 1 keeps free of wrap-around, and which
        padding after a series' end leaves unchanged on its real steps."""
        (b, H, _), (S, M, two_P) = u_f.shape, weights.shape
        if H * two_P < M:
            # Through the modes: H x 2P convolutions per scale instead of M, then one product
            # combines them into the M responses (5x fewer FFTs for one channel, N=16, M=84).
            states = self._mode_states(u_f, n_fft, L, basis)
            combination = (mix[..., None] * weights[:, :, None, :]).reshape(S, M, H * two_P).float()
            return combination @ states.reshape(b, S, H * two_P, L)
        K_f = torch.fft.rfft((weights @ basis).float(), n=n_fft)  # (s, M, F)
        K_f = K_f.conj() if self.backward else K_f
        if H == 1:
            mixed = u_f[:, None, :, :]  # (b, 1, 1, F): every kernel reads the one channel
        else:
            mixed = torch.einsum("smh,bhf->bsmf", mix.to(u_f.dtype), u_f)
        return torch.fft.irfft(mixed * K_f, n=n_fft)[..., :L]

    def _mode_states(self, u_f: torch.Tensor, n_fft: int, L: int, basis: torch.Tensor) -> torch.Tensor:
        """(b, s, H, 2P, L) float32: the states (Re, then Im) of every mode of every channel by FFT convolution
        of u_f (b, H, F) with the basis (s, 2P, L) (`modes`); run backward, a correlation (`_convolve`)."""
        basis_f = torch.fft.rfft(basis.float(), n=n_fft)  # (s, 2P, F)
        basis_f = basis_f.conj() if self.backward else basis_f
        return torch.fft.irfft(u_f[:, None, :, None, :] * basis_f[None, :, None], n=n_fft)[..., :L]

    def _pooled_compiled(self, u: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """forward's features (batch, n_features) float32 by the compiled CPU pass (no response kept, no
        gradient): u (b, H, L), lengths (b,) the real steps of each series, its first ones. With few
        channels, one pass recurs the modes and reads out (H x 2P mode states instead of M responses a
        step; up to COMPILED_RECURRENCE_STATES of them); with more, the responses come from FFT
        convolutions and only their pooling is compiled."""
        from . import _compiled

        self._check_input(u)
        (b, H, L), (S, M, Q) = u.shape, self.biases.shape
        pooled = torch.empty(b, S, M, Q + 2, dtype=torch.float64)
        shape = (b, S, H, self.n_modes, ENVELOPE_STATISTICS) if self.envelope else (0, 1, 1, 1, 1)
        envelope = torch.empty(shape, dtype=torch.float64)
        biases = self.biases.float().transpose(1, 2).contiguous()  # (S, Q, M): time-major pooling
        padded = torch.arange(L) >= lengths[:, None]
        rms = _root_mean_square(u, ~padded) if self.envelope else torch.ones(b, H, dtype=torch.float64)
        with torch.no_grad():
            weights = self._readout_weights()  # (S, M, 2P)
            if H * weights.shape[-1] <= COMPILED_RECURRENCE_STATES:
                gamma, exponent, quasi_static = self._discrete_modes()
                abar = torch.where(quasi_static, 0.0, torch.exp(exponent))
                combination = (self.channel_mix[..., None] * weights[:, :, None, :]).reshape(S, M, -1)
                _compiled.mode_features(
                    u.float().contiguous().numpy(),
                    lengths.numpy(),
                    *(part.contiguous().numpy() for part in (abar.real, abar.imag, gamma.real, gamma.imag)),
                    combination.float().transpose(1, 2).contiguous().numpy(),
                    biases.numpy(),
                    self.backward,
                    pooled.numpy(),
                    envelope.numpy(),
                    ((ENVELOPE_FLOOR * rms) ** 2).numpy(),
                    (rms**2).numpy(),  # the mean power
                )
            else:
                for s, y in enumerate(self._responses_by_scale(u, padded)):
                    y, out = y.transpose(1, 2).contiguous().numpy(), pooled[:, s].numpy()
                    _compiled.pool_responses(y, lengths.numpy(), biases[s].numpy(), out)
                if self.envelope:
                    envelope = self._envelope_pools(u, ~padded, rms)
        count = lengths.clamp_min(1).to(torch.float64)[:, None, None]
        pooled[..., : Q + 1] /= count[..., None]  # PPV and the mean
        features = pooled.float().reshape(b, -1)
        if not self.envelope:
            return features
        return torch.cat([features, _envelope_features(envelope, lengths, rms).float()], 1)

    def _envelope_pools(self, u: torch.Tensor, real: torch.Tensor, rms: torch.Tensor) -> torch.Tensor:
        """(b, S, H, P, 4) float64, as `_compiled.mode_features` pools the envelope (sum of |x|^2, maximum of
        |x|, sum of log((|x|^2 + (ENVELOPE_FLOOR rms)^2) / rms^2) / 2 and sum of (|x|^2 / rms^2)^2 over each
        series' real steps), from the states x of every channel and mode by FFT convolution
        (differentiable). u: (b, H, L); real: (b, L) bool; rms: (b, H) (`_root_mean_square`)."""
        b, H, L = u.shape
        floor, mean_power = ((ENVELOPE_FLOOR * rms) ** 2)[:, :, None, None], (rms**2)[:, :, None, None]
        if self.backward:  # what follows a series' end is zero, not its padding's value
            u = u.masked_fill(~real[:, None, :], 0.0)
        u_f, n_fft = self._spectrum(u)
        _, basis = self.modes(L)  # (S, 2P, L)
        P = self.n_modes
        pools = []
        for s in range(self.n_scales):  # a scale at a time bounds the states kept
            states = self._mode_states(u_f, n_fft, L, basis[s : s + 1])[:, 0].double()  # (b, H, 2P, L)
            power = states[:, :, :P] ** 2 + states[:, :, P:] ** 2  # (b, H, P, L)
            keep = real[:, None, None, :]
            kept = torch.where(keep, power, 0.0)
            pools.append(
                torch.stack(
                    [
                        kept.sum(-1),
                        kept.amax(-1).clamp_min(1e-300).sqrt(),  # clamped: no infinite gradient at a silent mode
                        0.5 * torch.where(keep, torch.log((power + floor) / mean_power), 0.0).sum(-1),
                        (kept / mean_power).pow(2).sum(-1),
                    ],
                    -1,
                )
            )
        return torch.stack(pools, 1)

    def fit_biases(self, series, n_series: int, seed: int) -> "SSMFeatures":
        """Biases of PPV: for every kernel, quantiles (at its fixed random levels in [0.1, 0.9]) of
        its response to one training series drawn at random, as MiniRocket draws them (each midway
        between the two order statistics around its level).
        series(i) -> (channels, length_i): the i-th training series without padding."""
        generator = torch.Generator().manual_seed(int(seed))
        pick = torch.randint(int(n_series), (self.n_scales, self.n_kernels), generator=generator)
        biases = torch.empty(self.n_scales, self.n_kernels, self.n_biases)
        by_length: dict[int, list[tuple[int, torch.Tensor]]] = {}
        for i in torch.unique(pick).tolist():
            row = series(i)
            by_length.setdefault(row.shape[-1], []).append((i, row))
        for L, rows in by_length.items():
            weights, basis = self.modes(L)
            kernels = (weights @ basis).float()  # (S, M, L): every kernel at this length
            block = max(1, _BIAS_ELEMENTS // L)  # kernels whose responses are computed at once
            for start in range(0, len(rows), _BIAS_BATCH):  # series of one length go through together
                chunk = rows[start : start + _BIAS_BATCH]
                u_f, n_fft = self._spectrum(torch.stack([r for _, r in chunk]))
                # Only the kernels drawn for a series run on it: one response per kernel in all.
                drawn = (pick[:, :, None] == torch.tensor([i for i, _ in chunk])).nonzero(as_tuple=True)
                for first in range(0, len(drawn[0]), block):
                    scale, kernel, row = (index[first : first + block] for index in drawn)
                    K_f = torch.fft.rfft(kernels[scale, kernel], n=n_fft)  # (kernels picked, F)
                    K_f = K_f.conj() if self.backward else K_f
                    mixed = torch.einsum("nh,nhf->nf", self.channel_mix[scale, kernel].to(u_f.dtype), u_f[row])
                    responses = torch.fft.irfft(mixed * K_f, n=n_fft)[:, :L].numpy()
                    # Midway between two neighbouring order statistics: a bias equal to one of the series'
                    # own values would count that step as above or not by rounding (with padding, for instance).
                    position = (self.bias_levels[scale, kernel] * (L - 1)).floor().long()  # (kernels picked, Q)
                    ranks = torch.cat([position, (position + 1).clamp_max(L - 1)], 1).numpy()  # (kernels picked, 2Q)
                    ordered = torch.from_numpy(_order_statistics(responses, ranks)).double()
                    Q = position.shape[1]
                    biases[scale, kernel] = (0.5 * (ordered[:, :Q] + ordered[:, Q:])).float()
        self.biases.copy_(biases)
        return self

    def forward(self, u: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        lengths = _prefix_lengths(mask, len(u), u.shape[-1]) if u.device.type == "cpu" else None
        if lengths is None:  # on a GPU, or a mask with gaps
            return self._pooled(u, mask)
        features = self._pooled_compiled(u, lengths)
        if not self._trained():
            return features
        # The values of the compiled pass (those of the fixed features, exactly), the gradient of the
        # differentiable one: a trained bank starts at exactly the features' predictions.
        differentiable = self._pooled(u, mask)
        return features + (differentiable - differentiable.detach())

    def _responses_by_scale(self, u: torch.Tensor, padded: torch.Tensor | None):
        """Yield the responses (b, M, L) of each scale in turn, by FFT convolution (one scale at a time
        bounds the FFT buffers). padded: (b, L) bool of the steps after each series' end, or None; running
        backward they are zeroed first: what follows a series' end is zero, not its padding's value."""
        L = u.shape[-1]
        if self.backward and padded is not None:
            u = u.masked_fill(padded[:, None, :], 0.0)
        u_f, n_fft = self._spectrum(u)
        weights, basis = self.modes(L)
        for s in range(self.n_scales):
            one = slice(s, s + 1)
            yield self._convolve(u_f, n_fft, L, weights[one], basis[one], self.channel_mix[one])[:, 0]

    def _pooled(self, u: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """forward's features by FFT convolutions and tensor operations, differentiable."""
        L = u.shape[-1]
        count = torch.full((len(u), 1), float(L)) if mask is None else mask.sum(-1, keepdim=True).float().clamp_min(1.0)
        trained = self._trained()
        comparisons = _comparison_buffer(len(u), self.n_kernels, self.n_biases, L)
        out = []
        for s, y in enumerate(self._responses_by_scale(u, None if mask is None else mask == 0)):  # y: (b, M, L)
            if mask is not None:
                y = y.masked_fill(mask[:, None, :] == 0, -math.inf)  # padded steps are above no bias
            above = _count_above(y, self.biases[s], comparisons).to(y.dtype)
            ppv = above / count[:, :, None]  # (b, M, Q)
            if trained:
                ppv = ppv + _ppv_surrogate_gradient(y, self.biases[s], count)
            total = (y if mask is None else y.masked_fill(mask[:, None, :] == 0, 0.0)).sum(-1)
            out.append(torch.cat([ppv, (total / count)[..., None], y.amax(-1, keepdim=True)], dim=-1))  # (b, M, Q + 2)
        features = torch.stack(out, 1).reshape(len(u), -1)
        if not self.envelope:
            return features
        real = torch.ones(len(u), L, dtype=torch.bool, device=u.device) if mask is None else mask != 0
        rms = _root_mean_square(u, real)
        envelope = _envelope_features(self._envelope_pools(u, real, rms), real.sum(-1), rms)
        return torch.cat([features, envelope.to(features.dtype)], 1)


class FeatureReadout(nn.Module):
    """SSMFeatures of the series (and, with `difference`, of their first difference, with SSMs
    and biases of its own; with `backward`, of both run backward in time, with their own too;
    with `envelope`, the causal banks pool their modes' envelopes as well), then a linear read-out
    fitted in closed form by the estimators.

    forward(u, mask) -> (batch, d_output); features(u, mask) -> (batch, n_features).
    u: (batch, channels, length); mask: (batch, length) or None.
    """

    def __init__(
        self,
        d_input: int,
        steps: torch.Tensor,
        d_output: int,
        *,
        difference: bool = True,
        backward: bool = False,
        envelope: bool = False,
        n_kernels: int = 64,
        d_state: int = 32,
        n_biases: int = 4,
        seed: int = 0,
    ):
        super().__init__()
        options = dict(n_kernels=n_kernels, d_state=d_state, n_biases=n_biases)
        # The envelope of a mode run backward has nearly the statistics of the mode run forward: the causal
        # banks pool it, the backward ones do not (on the spoken digits of the trial both ways scored the same).
        self.series = SSMFeatures(d_input, steps, seed=seed, envelope=envelope, **options)
        self.difference = (
            SSMFeatures(d_input, steps, seed=seed + 1, envelope=envelope, **options) if difference else None
        )
        self.series_backward = (
            SSMFeatures(d_input, steps, seed=seed + 2, backward=True, **options) if backward else None
        )
        self.difference_backward = (
            SSMFeatures(d_input, steps, seed=seed + 3, backward=True, **options) if backward and difference else None
        )
        n_features = sum(bank.n_features for _, bank, _ in self._banks())
        # float64: a row's output must not depend on the other rows of its batch (blocked sums).
        self.readout = nn.Linear(n_features, d_output, dtype=torch.float64)
        # Where the training series' features lie and how far the training outputs spread, set by
        # `set_training_range`; until then (and in files saved before they existed) nothing is beyond.
        self.register_buffer("feature_low", torch.full((n_features,), -math.inf))
        self.register_buffer("feature_high", torch.full((n_features,), math.inf))
        self.register_buffer("output_spread", torch.ones(d_output, dtype=torch.float64))

    def _banks(self) -> list[tuple[int, SSMFeatures, bool]]:
        """(seed offset, bank, whether it reads the first difference) of every bank, in feature order."""
        banks = (self.series, self.difference, self.series_backward, self.difference_backward)
        return [(offset, bank, offset % 2 == 1) for offset, bank in enumerate(banks) if bank is not None]

    def envelope_columns(self) -> torch.Tensor:
        """(n_features,) bool: the features of the modes' envelopes (`envelope=True`), in feature order."""
        columns = []
        for _, bank, _ in self._banks():
            column = torch.zeros(bank.n_features, dtype=torch.bool)
            column[bank.n_features - bank.n_envelope_features :] = True
            columns.append(column)
        return torch.cat(columns)

    def _differences(self, u: torch.Tensor) -> torch.Tensor:
        """u[t] - u[t-1] per unit of the training step: at another sample rate the differences
        are rescaled like Delta, so that they estimate the same derivative."""
        if u.shape[-1] < 2:
            raise ValueError("the first difference needs series of at least 2 steps (difference=True)")
        return torch.diff(u, dim=-1) / self.difference._delta_factor

    def modes_above_nyquist(self) -> tuple[int, int]:
        """(modes above the Nyquist frequency of the rate in use, modes in all), over every bank."""
        counts = [bank.modes_above_nyquist() for _, bank, _ in self._banks()]
        return sum(above for above, _ in counts), sum(modes for _, modes in counts)

    def fit_biases(self, series, n_series: int, seed: int = 0) -> "FeatureReadout":
        """series(i) -> (channels, length_i): the i-th training series without padding."""
        for offset, bank, reads_difference in self._banks():
            inputs = (lambda i: self._differences(series(i))) if reads_difference else series
            bank.fit_biases(inputs, n_series, seed + offset)
        return self

    def features(self, u: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.difference is not None:
            du, dmask = self._differences(u), None if mask is None else mask[:, 1:]
        return torch.cat(
            [bank(du, dmask) if reads_difference else bank(u, mask) for _, bank, reads_difference in self._banks()], 1
        )

    def forward(self, u: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.readout(self.features(u, mask).double())

    def set_training_range(self, features: torch.Tensor) -> None:
        """Record the range of the training series' features (n, n_features) and the spread of the
        read-out's outputs on them, against which `forward_with_extrapolation` measures new series."""
        features = torch.as_tensor(features)
        self.feature_low.copy_(features.amin(0))
        self.feature_high.copy_(features.amax(0))
        with torch.no_grad():
            outputs = self.readout(features.double())
        # Assigned, not copied: the read-out set by the estimators may have more outputs than at build.
        spread = outputs.std(0, correction=0).clamp_min(1e-12) if len(features) > 1 else torch.ones_like(outputs[0])
        self.output_spread = spread

    def forward_with_extrapolation(self, u: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, d_output + 1): the outputs and, last, how far each row's outputs rest on features
        beyond the training range: the largest change of an output when its features are clipped to
        that range, in units of the spread of the training outputs (0 for a row within the range)."""
        features = self.features(u, mask).double()
        outputs = self.readout(features)
        clipped = self.readout(torch.minimum(torch.maximum(features, self.feature_low), self.feature_high))
        beyond = ((outputs - clipped).abs() / self.output_spread).amax(1, keepdim=True)
        return torch.cat([outputs, beyond], 1)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, *args):
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, *args)
        # Files written before the training range was kept load without it (no extrapolation check).
        for name in ("feature_low", "feature_high", "output_spread"):
            if prefix + name in missing_keys:
                missing_keys.remove(prefix + name)


def _modes_at_rate(Lambda: torch.Tensor, Delta: torch.Tensor, factor: float) -> tuple[torch.Tensor, ...]:
    """(gamma, exponent, quasi_static), each (s, P), of the modes Lambda (P,) for data at another rate,
    whose step is `factor` x the training steps Delta (s, 1): the continuous-time kernels that the
    training rate's ZOH kernels sample, as far as the new rate can represent them: their kernels
    are gamma_p Abar_p^l with Abar_p = exp(exponent_p), and Abar_p = 0 where quasi_static.

    A mode that turns by more than pi per training step (|Im(lambda)| Delta > pi) is aliased at the
    training rate: its ZOH kernel there is that of the mode lambda' whose Im is wrapped into
    (-pi / Delta, pi / Delta], times gamma(lambda) / gamma(lambda'). That mode and that factor carry
    over (for a mode below the Nyquist frequency, lambda' = lambda and the factor is 1). A mode
    above the new Nyquist frequency (|Im(lambda')| Delta factor > pi) would alias onto a frequency
    within the band at the new rate and resonate there. Data at that rate has no content near the
    mode's own frequency, only far below it, where the mode follows its input: it becomes its
    quasi-static response, the feedthrough -1/lambda' of its DC gain (Abar = 0, gamma = -1/lambda':
    the limit of ZOH for a mode much faster than the step). Every kernel keeps its sum, its DC gain,
    at every rate."""
    turns = Lambda.imag * Delta  # (s, P): radians per training step
    wrapped = sampled_turns(Lambda, Delta)
    imag = torch.where(wrapped == turns, Lambda.imag, wrapped / Delta)  # unaliased modes keep their Lambda exactly
    continuous = torch.complex(Lambda.real.expand_as(imag), imag)  # (s, P)
    _, gamma_trained = discretize(Lambda[None, :], Delta)
    _, gamma_continuous = discretize(continuous, Delta)
    _, gamma = discretize(continuous, Delta * factor)
    beyond = above_nyquist(Lambda, Delta, factor)
    gamma = torch.where(beyond, -1.0 / continuous, gamma) * (gamma_trained / gamma_continuous)
    return gamma, continuous * (Delta * factor), beyond


def _root_mean_square(u: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """(b, H) float64: the RMS of every channel of u (b, H, L) over its real steps (b, L) bool, at least
    ENVELOPE_FLOOR (a silent series)."""
    count = real.sum(-1).clamp_min(1).to(torch.float64)[:, None]
    power = torch.where(real[:, None, :], u.double() ** 2, 0.0).sum(-1) / count
    return power.sqrt().clamp_min(ENVELOPE_FLOOR)


def _envelope_features(pools: torch.Tensor, lengths: torch.Tensor, rms: torch.Tensor) -> torch.Tensor:
    """(b, S x H x P x 4): the envelope's pools (b, S, H, P, 4) (`SSMFeatures._envelope_pools`) as features
    of each series' loudness removed: the RMS and the maximum of |x| over the series' RMS (b, H), the mean
    of log |x| less the log of the series' RMS (pooled so), and log(E|x|^4 / (E|x|^2)^2), so that a series
    scaled by a constant has the features of the series. lengths: (b,) the real steps of each series."""
    count = lengths.clamp_min(1).to(torch.float64)[:, None, None, None]
    rms = rms[:, None, :, None]  # (b, 1, H, 1)
    power = (pools[..., 0] / count).clamp_min(1e-300).sqrt() / rms  # clamped: no infinite gradient at silence
    largest, mean_log = pools[..., 1] / rms, pools[..., 2] / count
    # pools[..., 3] / count is E|x|^4 / rms^4, and power^2 is E|x|^2 / rms^2
    modulation = torch.log((pools[..., 3] / count).clamp_min(1e-300) / power.pow(4).clamp_min(1e-300))
    return torch.stack([power, largest, mean_log, modulation], -1).reshape(len(pools), -1)


def _order_statistics(rows: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """(n, k): the order statistics of the given ranks (n, k) of every row of `rows` (n, L), the values
    a sort would put there, by a partial sort of each row (linear time, where a sort is L log L)."""
    picked = np.empty(ranks.shape, dtype=rows.dtype)
    for i, (row, kth) in enumerate(zip(rows, ranks)):
        picked[i] = np.partition(row, kth)[kth]
    return picked


def _prefix_lengths(mask: torch.Tensor | None, b: int, L: int) -> torch.Tensor | None:
    """(b,) int64 real steps of each series when every mask (b, L) marks its first steps only (the
    padding at the end), all L without a mask; None for any other mask."""
    if mask is None:
        return torch.full((b,), L, dtype=torch.int64)
    lengths = mask.sum(-1).to(torch.int64)
    prefix = torch.arange(L, device=mask.device) < lengths[:, None]
    return lengths.cpu() if torch.equal(mask != 0, prefix) else None


_COUNT_CHUNK = 128
"""Steps whose comparisons are summed as bytes before a wider sum (at most 255 fit in a byte)."""


def _comparison_buffer(b: int, M: int, Q: int, L: int) -> torch.Tensor:
    """(b, M, Q, L rounded up to _COUNT_CHUNK) bool of False: _count_above writes its comparisons in the
    first L steps of the last axis; the rest stays False, so it counts nothing."""
    return torch.zeros(b, M, Q, -(-L // _COUNT_CHUNK) * _COUNT_CHUNK, dtype=torch.bool)


def _count_above(y: torch.Tensor, biases: torch.Tensor, buffer: torch.Tensor) -> torch.Tensor:
    """(b, M, Q) int32: the steps at which each response y (b, M, L) exceeds each of its biases (M, Q).
    The comparisons' bytes are summed in chunks of _COUNT_CHUNK steps as bytes, then the chunk sums as
    int32: a sum of the bytes as int32 would first copy every comparison into 4 bytes (1.5x slower)."""
    b, M, Q, padded = buffer.shape
    L = y.shape[-1]
    torch.gt(y[:, :, None, :], biases[None, :, :, None], out=buffer[..., :L])
    chunks = buffer.view(torch.uint8).view(b, M, Q, padded // _COUNT_CHUNK, _COUNT_CHUNK)
    return chunks.sum(-1, dtype=torch.uint8).sum(-1, dtype=torch.int32)


def _ppv_surrogate_gradient(y: torch.Tensor, biases: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """Zero in value, the gradient of a sigmoid PPV: (b, M, Q) from responses y (b, M, L) (padded
    steps at -inf), biases (M, Q) and real steps per series count (b, 1)."""
    real = torch.isfinite(y)
    y = torch.where(real, y, 0.0)
    n_real = real.sum(dim=(0, 2)).clamp_min(2)  # (M,)
    centred = torch.where(real, y.detach() - (y.detach().sum(dim=(0, 2)) / n_real)[None, :, None], 0.0)
    spread = ((centred**2).sum(dim=(0, 2)) / (n_real - 1)).sqrt().clamp_min(1e-12)  # (M,): over real steps
    scaled = (y[:, :, None, :] - biases[None, :, :, None]) / (PPV_TEMPERATURE * spread[None, :, None, None])
    soft = (torch.sigmoid(scaled) * real[:, :, None, :]).sum(-1) / count[:, :, None]
    return soft - soft.detach()


def _channel_mix(S: int, M: int, H: int, max_channels: int, generator: torch.Generator) -> torch.Tensor:
    """(S, M, H): every kernel reads the sum of a random subset of 1 to min(H, max_channels)
    channels (sizes log-uniform, as MiniRocket's multivariate version draws them)."""
    if H == 1:  # every kernel reads the one channel; the same draws as the loop below (randperm(1) draws none)
        torch.rand(S * M, generator=generator)
        return torch.ones(S, M, 1, dtype=torch.float64)
    mix = torch.zeros(S, M, H, dtype=torch.float64)
    top = math.log2(min(H, max_channels) + 1)
    for s in range(S):
        for m in range(M):
            size = int(2 ** (torch.rand(1, generator=generator).item() * top))
            size = max(1, min(size, H))
            mix[s, m, torch.randperm(H, generator=generator)[:size]] = 1.0
    return mix


__all__ = ["SSMFeatures", "FeatureReadout", "log_spaced_steps"]
