"""Losses loss(outputs, target, sample_weight=None) and validation scores score(outputs, target) -> float,
shared by the estimators, the forecaster and the task runner. The Trainer passes a batch's weights
as the third argument: one per sample (b,), or for the forecaster one per target (b, H, C)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _weighted_mean(per_sample: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """sum_i w_i l_i / sum_i w_i (the plain mean without weights): scikit-learn's sample weighting."""
    if weight is None:
        return per_sample.mean()
    weight = weight.to(per_sample)
    if weight.shape != per_sample.shape:
        raise ValueError(f"sample weights {tuple(weight.shape)} do not match the {tuple(per_sample.shape)} samples")
    return (per_sample * weight).sum() / weight.sum()


def weighted_cross_entropy(class_weight: torch.Tensor | None = None, label_smoothing: float = 0.0):
    """Cross-entropy of logits (b, K) against labels (b,), weighted as scikit-learn weights samples.

    A sample of class y has the loss l = -sum_k q_k log softmax(z)_k with the smoothed target
    q = (1 - e) onehot(y) + e / K, and the weight w = class_weight[y] x sample_weight (1 where not
    given); the loss is the weighted mean sum_i w_i l_i / sum_i w_i, as sklearn.metrics.log_loss
    weights samples, with or without smoothing. (PyTorch's own `weight=` would instead weight every
    class's term of the smoothing part by that class's weight.)
    """

    def loss(logits, y, sample_weight=None):
        per_sample = F.cross_entropy(logits, y, reduction="none", label_smoothing=label_smoothing)
        weight = sample_weight
        if class_weight is not None:
            weight = class_weight.to(logits.device)[y] * (1.0 if sample_weight is None else sample_weight.to(logits))
        return _weighted_mean(per_sample, weight)

    return loss


def accuracy_of_logits(logits: torch.Tensor, y: torch.Tensor) -> float:
    """Share of samples whose largest logit is their label: logits (b, K), y (b,)."""
    return float((logits.argmax(-1) == y).float().mean())


def accuracy_of_step_logits(logits: torch.Tensor, y: torch.Tensor) -> float:
    """Accuracy over every step of per-step logits (b, K, L) against labels (b, L)."""
    return float((logits.argmax(1) == y).float().mean())


def mse_loss(pred, y, sample_weight=None):
    """Mean squared error: over every element, or the sample_weight (b,) weighted mean of each
    sample's mean squared error; pred and y of the same shape (b, ...)."""
    if pred.shape != y.shape:
        raise ValueError(f"outputs {tuple(pred.shape)} and targets {tuple(y.shape)} differ in shape")
    if sample_weight is None:
        return torch.mean((pred - y) ** 2)
    return _weighted_mean(((pred - y) ** 2).reshape(len(pred), -1).mean(1), sample_weight)


def negative_mse(pred, y) -> float:
    return -float(torch.mean((pred - y) ** 2))


def masked_reconstruction_loss(outputs, target, sample_weight=None):
    """outputs (b, C + 1, L) of MaskedReconstruction (reconstruction, hidden-step indicator);
    the squared error on the hidden steps only, per hidden value; with sample_weight (b,), each
    sample's hidden squared errors count with its weight."""
    prediction, hidden = outputs[:, :-1], outputs[:, -1:]
    if sample_weight is not None:
        hidden = hidden * sample_weight.to(hidden)[:, None, None]
    count = hidden.sum() * prediction.shape[1]
    # No hidden step (or no weight) at all: nothing to learn from, a loss of 0.
    return (((prediction - target) ** 2) * hidden).sum() / count.clamp_min(torch.finfo(count.dtype).tiny)


def pinball_loss(levels: torch.Tensor):
    """Mean pinball (quantile) loss over the quantile grid `levels` (Q,), averaged over the observed targets.

    outputs (b, H, C, Q) or, for an ensemble, (b, members, H, C, Q); target (b, H, C);
    sample_weight (b, H, C): the weight of each target, 0 where it is missing.
    """

    def loss(outputs, target, sample_weight=None):
        if outputs.dim() == target.dim() + 2:  # a member axis: every member is scored alike
            target = target[:, None]
            sample_weight = None if sample_weight is None else sample_weight[:, None].expand(outputs.shape[:-1])
        diff = target[..., None] - outputs
        lv = levels.to(outputs)  # the outputs' device and dtype (float64 levels must not promote a float32 loss)
        per_step = torch.maximum(lv * diff, (lv - 1.0) * diff).mean(-1)
        if sample_weight is None:
            return per_step.mean()
        return (per_step * sample_weight).sum() / sample_weight.sum().clamp_min(1.0)

    return loss


__all__ = [
    "weighted_cross_entropy",
    "accuracy_of_logits",
    "accuracy_of_step_logits",
    "mse_loss",
    "negative_mse",
    "masked_reconstruction_loss",
    "pinball_loss",
]
