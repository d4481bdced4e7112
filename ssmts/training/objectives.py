"""Losses loss(outputs, target, weight) and validation scores score(outputs, target) -> float,
shared by the estimators, the forecaster and the task runner."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def weighted_cross_entropy(class_weight: torch.Tensor | None = None, label_smoothing: float = 0.0):
    """Cross-entropy of logits (b, K) against labels (b,); class_weight (K,) as in scikit-learn's
    class_weight (a weighted mean over the batch); label_smoothing e: the target of a sample of class y
    is (1 - e) onehot(y) + e / K."""

    def loss(logits, y, sample_weight=None):
        weight = None if class_weight is None else class_weight.to(logits.device)
        losses = F.cross_entropy(logits, y, weight=weight, reduction="none", label_smoothing=label_smoothing)
        if weight is not None:
            return losses.sum() / weight[y].sum()
        return losses.mean()

    return loss


def accuracy_of_logits(logits: torch.Tensor, y: torch.Tensor) -> float:
    return float((logits.argmax(-1) == y).float().mean())


def accuracy_of_step_logits(logits: torch.Tensor, y: torch.Tensor) -> float:
    """Accuracy over every step of per-step logits (b, K, L) against labels (b, L)."""
    return float((logits.argmax(1) == y).float().mean())


def mse_loss(pred, y, sample_weight=None):
    """Mean squared error over every element; pred and y of the same shape."""
    if pred.shape != y.shape:
        raise ValueError(f"outputs {tuple(pred.shape)} and targets {tuple(y.shape)} differ in shape")
    return torch.mean((pred - y) ** 2)


def negative_mse(pred, y) -> float:
    return -float(torch.mean((pred - y) ** 2))


def masked_reconstruction_loss(outputs, target, sample_weight=None):
    """outputs (b, C + 1, L) of MaskedReconstruction (reconstruction, hidden-step indicator);
    the squared error on the hidden steps only."""
    prediction, hidden = outputs[:, :-1], outputs[:, -1:]
    count = hidden.sum().clamp_min(1.0) * prediction.shape[1]
    return (((prediction - target) ** 2) * hidden).sum() / count


def pinball_loss(levels: torch.Tensor):
    """Mean pinball (quantile) loss over the quantile grid `levels` (Q,), averaged over the observed targets.

    outputs (b, H, C, Q) or, for an ensemble, (b, members, H, C, Q); target (b, H, C);
    weight (b, H, C): 1 where the target exists.
    """

    def loss(outputs, target, weight=None):
        if outputs.dim() == target.dim() + 2:  # a member axis: every member is scored alike
            target = target[:, None]
            weight = None if weight is None else weight[:, None].expand(outputs.shape[:-1])
        diff = target[..., None] - outputs
        lv = levels.to(outputs.device)
        per_step = torch.maximum(lv * diff, (lv - 1.0) * diff).mean(-1)
        if weight is None:
            return per_step.mean()
        return (per_step * weight).sum() / weight.sum().clamp_min(1.0)

    return loss


__all__ = ["weighted_cross_entropy", "accuracy_of_logits", "accuracy_of_step_logits", "mse_loss", "negative_mse",
           "masked_reconstruction_loss", "pinball_loss"]
