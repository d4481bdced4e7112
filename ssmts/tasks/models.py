"""Networks of the task pipelines: a head of ssmts.nn.heads on the preset's backbone."""

from __future__ import annotations

from torch import nn

from ssmts.data.base import TaskData
from ssmts.nn import SequenceHead, TwoTowerRetrieval

from .presets import Preset


def build_model(inputs: str, kind: str, data: TaskData, preset: Preset) -> nn.Module:
    """The network of a task under a preset.

    inputs: "tokens", "token_pairs" or "signal" (see Task.inputs); kind: "classification"
    (d_output = n_classes) or "regression" (d_output = 1).
    """
    params = preset.backbone_params()
    d_output = data.n_classes if kind == "classification" else 1
    if inputs == "token_pairs":
        model: nn.Module = TwoTowerRetrieval(params.build_backbone(1, vocab_size=data.vocab_size), n_classes=d_output)
    elif inputs == "tokens":
        model = SequenceHead(params.build_backbone(1, vocab_size=data.vocab_size), d_output, preset.pooling)
    else:
        model = SequenceHead(params.build_backbone(int(data.train.X.shape[1])), d_output, preset.pooling)
    # Path-X (eSSM E.2.6): a constant factor on every Delta, part of the model.
    model.backbone.dt_scale = preset.dt_scale
    return model
