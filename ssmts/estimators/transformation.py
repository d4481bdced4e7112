"""SSMTransformer: fixed-length (or per-step) embeddings of time series from a deep SSM backbone."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_array, check_is_fitted, column_or_1d
from torch import nn

from ._base import BACKBONE_DEFAULTS, TRAINING_DEFAULTS, SSMEstimatorMixin, _backbone_of
from ._params import PARAMETER_DOCS, make_init
from .classification import accuracy_of_logits, weighted_cross_entropy
from .regression import mse_loss, negative_mse

OBJECTIVES = ("auto", "reconstruction", "classification", "regression", "none")


class MaskedReconstruction(nn.Module):
    """Self-supervised objective: hide a fraction of the steps and predict them.

    Output (batch, C + 1, L): the reconstruction and, as the last channel, which steps were
    hidden (random in training; every `1/ratio`-th step in evaluation, so validation
    losses are comparable across epochs).
    """

    def __init__(self, backbone: nn.Module, ratio: float = 0.15):
        super().__init__()
        self.backbone, self.ratio = backbone, ratio

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        b, _, L = x.shape
        if self.training:
            hidden = torch.rand(b, L, device=x.device) < self.ratio
        else:
            hidden = (torch.arange(L, device=x.device) % max(1, round(1 / self.ratio)) == 0).expand(b, L)
        if mask is not None:
            hidden = hidden & mask
        prediction = self.backbone(x * (~hidden)[:, None, :], mask)
        return torch.cat([prediction, hidden[:, None, :].to(prediction.dtype)], dim=1)


def masked_reconstruction_loss(outputs, target, sample_weight=None):
    prediction, hidden = outputs[:, :-1], outputs[:, -1:]
    count = hidden.sum().clamp_min(1.0) * prediction.shape[1]
    return (((prediction - target) ** 2) * hidden).sum() / count


class SSMTransformer(ClassNamePrefixFeaturesOutMixin, SSMEstimatorMixin, TransformerMixin, BaseEstimator):
    __doc__ = (
        "Embed time series with a deep SSM: transform gives the pooled backbone output\n"
        "(n_samples, d_model); transform_sequence gives per-step features (n_samples, d_model, L).\n\n"
        "Parameters\n" + PARAMETER_DOCS + "    Transformer\n"
        "        objective : {'auto', 'reconstruction', 'classification', 'regression', 'none'}.\n"
        "            How fit trains the backbone. 'auto': supervised by y when y is given\n"
        "            (classification for discrete labels, regression otherwise), masked-step\n"
        "            reconstruction when y is None. 'none': untrained random features.\n"
    )
    __init__ = make_init({**BACKBONE_DEFAULTS, **TRAINING_DEFAULTS, "objective": "auto"})

    def fit(self, X, y=None):
        continuing = hasattr(self, "model_") and self.warm_start
        self._start_fit(continuing)
        objective = self._resolve_objective(y)
        data = self._prepare_predict_input(X, 1.0) if continuing else self._prepare_fit_input(X)
        C = self.n_channels_in_
        self.objective_ = objective
        if objective == "none":
            if not continuing:
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(self._seed_)
                    self.model_ = self._build_backbone(C, None).eval()
                    self.train_sample_rate_ = self.sample_rate
                    self.history_, self.n_iter_ = [], 0
            return self
        if objective == "reconstruction":
            target = self._scaled(data)
            kwargs = dict(d_output=C, loss_fn=masked_reconstruction_loss,
                          network_factory=lambda: MaskedReconstruction(self._build_backbone(C, C, pooling="none")))
        elif objective == "classification":
            y = column_or_1d(y, warn=True)
            if not continuing:
                self._label_encoder = LabelEncoder().fit(y)
            target = torch.from_numpy(self._label_encoder.transform(y)).long()
            kwargs = dict(d_output=len(self._label_encoder.classes_), loss_fn=weighted_cross_entropy(None),
                          score_fn=accuracy_of_logits, stratify=target.numpy())
        else:
            y2 = check_array(y, ensure_2d=False, dtype=np.float64, input_name="y").reshape(len(y), -1)
            if not continuing:
                self._target_stats = (y2.mean(0), np.where(y2.std(0) > 1e-12, y2.std(0), 1.0))
            target = torch.from_numpy(((y2 - self._target_stats[0]) / self._target_stats[1]).astype(np.float32))
            kwargs = dict(d_output=y2.shape[1], loss_fn=mse_loss, score_fn=negative_mse)
        if len(target) != len(data.x):
            raise ValueError(f"X has {len(data.x)} samples but y has {len(target)}")
        self._fit_network(data, target, continue_training=continuing, **kwargs)
        return self

    def _resolve_objective(self, y) -> str:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {self.objective!r}; choose one of {OBJECTIVES}")
        if self.objective != "auto":
            if self.objective in ("classification", "regression") and y is None:
                raise ValueError(f"objective={self.objective!r} needs y")
            return self.objective
        if y is None:
            return "reconstruction"
        kind = type_of_target(y)
        return "classification" if kind in ("binary", "multiclass") else "regression"

    def transform(self, X, sample_rate=None):
        """Pooled embeddings, (n_samples, d_model) float64."""
        ratio = self._rate_ratio(sample_rate)
        data = self._prepare_predict_input(X, ratio)
        pooling = self.pooling

        def embed(model, x, mask):
            backbone = _backbone_of(model)
            return backbone.pool(backbone.features(x, mask), mask, how=pooling)

        return self._run(data, ratio, embed).double().numpy()

    def transform_sequence(self, X, sample_rate=None):
        """Per-step features, (n_samples, d_model, n_timepoints) float64 (padded steps are zero)."""
        ratio = self._rate_ratio(sample_rate)
        data = self._prepare_predict_input(X, ratio)
        out = self._run(data, ratio, lambda model, x, mask: _backbone_of(model).features(x, mask))
        if data.mask is not None:
            out = out * data.mask[:, None, :]
        return out.double().numpy()

    @property
    def _n_features_out(self):
        check_is_fitted(self, "model_")
        return self.d_model

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        return tags
