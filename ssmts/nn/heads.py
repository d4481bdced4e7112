"""Task heads on a deep SSM backbone (pure PyTorch). Every head exposes `.backbone`.

    SequenceHead         classification / regression: pool the per-step features, then linear
    PerStepHead          a linear map at every step (sequence outputs, one-step-ahead models)
    MaskedReconstruction self-supervised: hide steps, predict them
    DirectForecastHead   the last context step (+ future covariates) -> every horizon step at once
    RecursiveForecastHead  one-step-ahead quantiles, rolled with the layer's step mode
    ForecastEnsemble     independently initialized forecast heads trained side by side
    TwoTowerRetrieval    LRA Retrieval: one encoder for both documents, a pair classifier

Shapes: x: (batch, d_input, L) float or (batch, L) int64 tokens; mask: (batch, L) bool.
The backbone passed in has no decoder of its own (SSMBackbone(..., d_output=None)).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from .backbone import SSMBackbone
from .batch_invariant import channel_linear
from .functional import POOLINGS, pool


def _headless(backbone: SSMBackbone, name: str) -> SSMBackbone:
    if backbone.decoder is not None:
        raise ValueError(f"the backbone of {name} must have no decoder (build SSMBackbone with d_output=None)")
    return backbone


class SequenceHead(nn.Module):
    """Classification / regression: pool(backbone features) -> Linear(d_model, d_output).

    forward -> (batch, d_output); with d_output=None the pooled features (batch, d_model).
    """

    def __init__(self, backbone: SSMBackbone, d_output: int | None, pooling: str = "mean"):
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {pooling!r}; choose one of {POOLINGS}")
        self.backbone, self.pooling = _headless(backbone, "SequenceHead"), pooling
        self.decoder = nn.Linear(backbone.d_model, d_output) if d_output is not None else None

    def embed(self, x: torch.Tensor, mask: torch.Tensor | None = None, pooling: str | None = None) -> torch.Tensor:
        """Pooled features (batch, d_model)."""
        return pool(self.backbone.features(x, mask), mask, pooling or self.pooling)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        z = self.embed(x, mask)
        return z if self.decoder is None else channel_linear(self.decoder, z[..., None])[..., 0]


class PerStepHead(nn.Module):
    """A linear map of the features at every step: (batch, d_output, L).

    forward_with_state / step give the causal streaming form (see SSMBackbone).
    """

    def __init__(self, backbone: SSMBackbone, d_output: int):
        super().__init__()
        self.backbone = _headless(backbone, "PerStepHead")
        self.decoder = nn.Linear(backbone.d_model, d_output)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return channel_linear(self.decoder, self.backbone.features(x, mask))

    def forward_with_state(self, x: torch.Tensor, state=None):
        """((batch, d_output, L), final state): read a context with the FFT, continue with `step`."""
        features, state = self.backbone.forward_with_state(x, state)
        return channel_linear(self.decoder, features), state

    def step(self, x_t: torch.Tensor, state):
        """x_t (batch, d_input) -> ((batch, d_output), state)."""
        features, state = self.backbone.step(x_t, state)
        return self.decoder(features), state


class MaskedReconstruction(nn.Module):
    """Self-supervised objective: hide a fraction of the steps and predict them.

    Output (batch, C + 1, L): the reconstruction of the C input channels and, as the last
    channel, which steps were hidden (random in training; every `1/ratio`-th step in
    evaluation, so validation losses are comparable across epochs).
    """

    def __init__(self, backbone: SSMBackbone, d_output: int, ratio: float = 0.15):
        super().__init__()
        self.backbone = _headless(backbone, "MaskedReconstruction")
        self.decoder = nn.Linear(backbone.d_model, d_output)
        self.ratio = ratio

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        b, _, L = x.shape
        if self.training:
            hidden = torch.rand(b, L, device=x.device) < self.ratio
        else:
            hidden = (torch.arange(L, device=x.device) % max(1, round(1 / self.ratio)) == 0).expand(b, L)
        if mask is not None:
            hidden = hidden & mask
        prediction = channel_linear(self.decoder, self.backbone.features(x * (~hidden)[:, None, :], mask))
        return torch.cat([prediction, hidden[:, None, :].to(prediction.dtype)], dim=1)


class _ForecastHead(nn.Module):
    """What both forecast heads hold: the backbone and the sizes of the problem."""

    def __init__(
        self, backbone: SSMBackbone, n_targets: int, n_exog: int, context_length: int, horizon: int, n_quantiles: int
    ):
        super().__init__()
        self.backbone = _headless(backbone, type(self).__name__)
        self.n_targets, self.n_exog = n_targets, n_exog
        self.context_length, self.horizon, self.n_quantiles = context_length, horizon, n_quantiles


class DirectForecastHead(_ForecastHead):
    """Direct multi-step forecast: the last context step's features (+ the future covariates of
    every horizon step, flattened) -> (batch, horizon, n_targets, n_quantiles) at once.

    x: (batch, n_targets + n_exog, context + horizon); the target channels of the last
    `horizon` steps are zero, the covariate channels hold the future X.
    """

    def __init__(
        self, backbone: SSMBackbone, n_targets: int, n_exog: int, context_length: int, horizon: int, n_quantiles: int
    ):
        super().__init__(backbone, n_targets, n_exog, context_length, horizon, n_quantiles)
        self.head = nn.Linear(backbone.d_model + horizon * n_exog, horizon * n_targets * n_quantiles)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        c, C = self.context_length, self.n_targets
        z = self.backbone.features(x[..., :c])[..., -1]
        if self.n_exog:
            z = torch.cat([z, x[:, C:, c:].flatten(1)], dim=1)
        return self.head(z).view(x.shape[0], self.horizon, C, self.n_quantiles)


class RecursiveForecastHead(_ForecastHead):
    """One-step-ahead quantile model: position p reads [y_p, X_{p+1}] and predicts y_{p+1}.

    Training (teacher forcing): x (batch, n_targets + n_exog, context + horizon - 1) ->
    (batch, horizon, n_targets, n_quantiles), the outputs from the last context step on.
    Forecasting: `rollout` reads the context with the FFT and continues with `step`.

    time_deltas: x has one more channel, last, the gap from position p to the time of y_{p+1}
    (in units of the training period; irregular time stamps). It is not an input: position p
    steps by Delta times that gap (SSM dt), so that the state reaches the time it forecasts,
    having held y_p over the gap. A gap of 0 marks padding past the end of a series (masked
    targets) and steps by one unit.
    """

    def __init__(
        self,
        backbone: SSMBackbone,
        n_targets: int,
        n_exog: int,
        context_length: int,
        horizon: int,
        n_quantiles: int,
        time_deltas: bool = False,
    ):
        super().__init__(backbone, n_targets, n_exog, context_length, horizon, n_quantiles)
        self.decoder = nn.Linear(backbone.d_model, n_targets * n_quantiles)
        self.time_deltas = bool(time_deltas)

    def _decode(self, features: torch.Tensor) -> torch.Tensor:
        return channel_linear(self.decoder, features)

    def _split_dt(self, x: torch.Tensor) -> tuple[torch.Tensor, dict]:
        """x without the gap channel, and the backbone's dt keyword (none without time_deltas)."""
        if not self.time_deltas:
            return x, {}
        gaps = x[:, -1]
        return x[:, :-1], {"dt": torch.where(gaps > 0, gaps, torch.ones_like(gaps))}

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        b, C, Q, H = x.shape[0], self.n_targets, self.n_quantiles, self.horizon
        x, dt = self._split_dt(x)
        out = self._decode(self.backbone.features(x, **dt))[..., self.context_length - 1 :]
        return out.reshape(b, C, Q, H).permute(0, 3, 1, 2)

    @torch.no_grad()
    def rollout(
        self,
        context: torch.Tensor,
        future_exog: torch.Tensor | None,
        steps: int,
        pick: Callable[[torch.Tensor], torch.Tensor],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Recursive forecast from `context` (batch, C + C_x, c).

        future_exog: (batch, C_x, steps - 1), X at steps 2..steps (X at step 1 is the
        context's last position). pick(q (batch, C, Q)) -> (batch, C) chooses the value fed
        back (median or a sample). Returns (picked (batch, steps, C), quantiles (batch, steps, C, Q)).
        With time_deltas the gap channel is last in both context and future_exog.
        """
        b, C, Q = context.shape[0], self.n_targets, self.n_quantiles
        context, dt = self._split_dt(context)
        features, state = self.backbone.forward_with_state(context, **dt)
        q = self._decode(features)[..., -1].view(b, C, Q)
        picked, quantiles = [], []
        for k in range(steps):
            quantiles.append(q)
            value = pick(q)
            picked.append(value)
            if k == steps - 1:
                break
            future, dt = self._split_dt(future_exog[..., k, None]) if future_exog is not None else (None, {})
            u = value if not self.n_exog else torch.cat([value, future[..., 0]], dim=1)
            features, state = self.backbone.step(u, state, **{k_: v[:, 0] for k_, v in dt.items()})
            q = self.decoder(features).view(b, C, Q)
        return torch.stack(picked, 1), torch.stack(quantiles, 1)


class ForecastEnsemble(nn.Module):
    """Independently initialized forecast heads trained side by side (a deep ensemble).

    forward(x) -> (batch, members, horizon, n_targets, n_quantiles). The members see the
    same batches and differ only in their initial weights; the loss is the mean of their
    losses, so each member's gradient is its own.
    """

    def __init__(self, members: list[nn.Module]):
        super().__init__()
        self.members = nn.ModuleList(members)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return torch.stack([member(x, mask) for member in self.members], dim=1)

    @torch.no_grad()
    def rollout(self, context, future_exog, steps: int, pick) -> tuple[torch.Tensor, torch.Tensor]:
        """RecursiveForecastHead.rollout of each member: (batch, members, steps, C), (batch, members, steps, C, Q)."""
        rolls = [member.rollout(context, future_exog, steps, pick) for member in self.members]
        return torch.stack([r[0] for r in rolls], 1), torch.stack([r[1] for r in rolls], 1)


class TwoTowerRetrieval(nn.Module):
    """LRA Retrieval model (eSSM E.2.3, following S4): one SSM encoder for both documents.

    Each document is encoded and mean-pooled (over its real bytes) into y1, y2 of size H;
    [y1, y2, y1 * y2, y1 - y2] (4H) -> Linear(4H, H) -> GELU -> Linear(H, n_classes).

    x: (batch, 2, L) int64 byte ids (0 = padding); mask: (batch, 2, L) bool or None.
    Returns logits (batch, n_classes).
    """

    def __init__(self, backbone: SSMBackbone, n_classes: int = 2):
        super().__init__()
        if backbone.decoder is not None:
            raise ValueError("the retrieval encoder must have no decoder (build SSMBackbone with d_output=None)")
        self.backbone = backbone
        width = backbone.d_model
        self.head = nn.Sequential(nn.Linear(4 * width, width), nn.GELU(), nn.Linear(width, n_classes))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if x.dim() != 3 or x.shape[1] != 2:
            raise ValueError(f"retrieval input must have shape (batch, 2, length), got {tuple(x.shape)}")
        batch, _, length = x.shape
        # Both documents of every pair go through the encoder as one batch of 2 * batch.
        documents = x.reshape(batch * 2, length)
        doc_mask = None if mask is None else mask.reshape(batch * 2, length)
        pooled = pool(self.backbone.features(documents, doc_mask), doc_mask, "mean").reshape(batch, 2, -1)
        y1, y2 = pooled[:, 0], pooled[:, 1]
        return self.head(torch.cat([y1, y2, y1 * y2, y1 - y2], dim=-1))


__all__ = [
    "pool",
    "SequenceHead",
    "PerStepHead",
    "MaskedReconstruction",
    "DirectForecastHead",
    "RecursiveForecastHead",
    "ForecastEnsemble",
    "TwoTowerRetrieval",
    "POOLINGS",
]
