"""Networks of the task pipelines: the plain SSMBackbone, and the two-tower retrieval model."""
from __future__ import annotations

import torch
from torch import nn

from ssmts.data.base import TaskData
from ssmts.nn import SSMBackbone

from .presets import Preset


class RetrievalTwoTower(nn.Module):
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
        pooled = self.backbone.pool(self.backbone.features(documents, doc_mask), doc_mask, how="mean")
        pooled = pooled.reshape(batch, 2, -1)
        y1, y2 = pooled[:, 0], pooled[:, 1]
        return self.head(torch.cat([y1, y2, y1 * y2, y1 - y2], dim=-1))


def backbone_of(model: nn.Module) -> SSMBackbone:
    """The SSMBackbone of a task model (the model itself or its .backbone)."""
    return model if isinstance(model, SSMBackbone) else model.backbone


def build_model(inputs: str, kind: str, data: TaskData, preset: Preset) -> nn.Module:
    """The network of a task under a preset.

    inputs: "tokens", "token_pairs" or "signal" (see Task.inputs); kind: "classification"
    (d_output = n_classes) or "regression" (d_output = 1).
    """
    kwargs = preset.model_kwargs()
    d_model, n_layers = kwargs.pop("d_model"), kwargs.pop("n_layers")
    d_output = data.n_classes if kind == "classification" else 1
    if inputs == "token_pairs":
        kwargs["pooling"] = "mean"
        encoder = SSMBackbone(1, d_model, n_layers, None, vocab_size=data.vocab_size, **kwargs)
        model: nn.Module = RetrievalTwoTower(encoder, n_classes=d_output)
    elif inputs == "tokens":
        model = SSMBackbone(1, d_model, n_layers, d_output, vocab_size=data.vocab_size, **kwargs)
    else:
        d_input = int(data.train.X.shape[1])
        model = SSMBackbone(d_input, d_model, n_layers, d_output, **kwargs)
    if preset.dt_scale != 1.0:
        # Path-X (eSSM E.2.6): a constant factor on every Delta, kept during training.
        backbone_of(model).dt_scale = preset.dt_scale
    return model
