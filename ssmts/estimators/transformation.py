"""SSMTransformer: fixed-length (or per-step) embeddings of time series from a deep SSM backbone."""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_array, check_is_fitted

from ..nn import MaskedReconstruction
from ..training.config import Options, param, with_params_doc
from ..training.objectives import (
    accuracy_of_logits,
    masked_reconstruction_loss,
    mse_loss,
    negative_mse,
    weighted_cross_entropy,
)
from ._base import (
    SSMEstimatorMixin,
    continued_target_statistics,
    standardized_targets,
    target_statistics,
    transactional,
)
from .classification import check_labels, label_encoder, restored_label_encoder

OBJECTIVES = ("auto", "reconstruction", "classification", "regression", "none")


@with_params_doc
class SSMTransformer(ClassNamePrefixFeaturesOutMixin, SSMEstimatorMixin, TransformerMixin, BaseEstimator):
    """Embed time series with a deep SSM: transform gives the pooled backbone output
    (n_samples, d_model); transform_sequence gives per-step features (n_samples, d_model, L).
    """

    objective: Literal["auto", "reconstruction", "classification", "regression", "none"] = param(
        default="auto",
        doc="How fit trains the backbone. 'auto': supervised by y when y is given (classification for "
        "discrete labels, regression otherwise), masked-step reconstruction when y is None. 'none': "
        "untrained random features.",
        constraint=Options(*OBJECTIVES),
        group="Transformer",
    )

    @transactional
    def fit(self, X, y=None):
        """Train the backbone (see objective); with warm_start=True continue the fitted one."""
        continuing = hasattr(self, "model_") and self.warm_start
        self._start_fit(continuing)
        objective = self._resolve_objective(y)
        if continuing and objective != self.objective_:
            raise ValueError(
                f"warm_start continues the fitted backbone with its head for objective {self.objective_!r}, but "
                f"this fit's objective is {objective!r} (objective={self.objective!r}, y "
                f"{'not given' if y is None else 'given'}); set warm_start=False to train anew"
            )
        data = self._fit_input(X, continuing)
        C = self._network_channels
        if objective == "none":
            if not continuing:
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(self._seed_)
                    self.model_ = self._network(C, None).eval()
                self.train_sample_rate_ = self.lowest_trained_rate_ = self.sample_rate  # no earlier fit's
                self.history_, self.n_iter_, self.best_epoch_ = [], 0, 0
            self.objective_ = objective
            return self
        if objective == "reconstruction":
            target = self._scaled(data)
            kwargs = dict(
                d_output=C,
                loss_fn=masked_reconstruction_loss,
                network=lambda: MaskedReconstruction(self.build_backbone(C), C),
            )
        elif objective == "classification":
            y = check_labels(y, len(data.x))  # the classifier's checks: no missing labels, two classes or more
            encoder = self._label_encoder if continuing else label_encoder(self, np.unique(y))
            target = torch.from_numpy(encoder.transform(y)).long()
            kwargs = dict(
                d_output=len(encoder.classes_),
                loss_fn=weighted_cross_entropy(None),
                score_fn=accuracy_of_logits,
                stratify=target.numpy(),
            )
        else:
            y2 = check_array(y, ensure_2d=False, dtype=np.float64, input_name="y").reshape(len(y), -1)
            stats = continued_target_statistics(y2, *self._target_stats) if continuing else target_statistics(y2)
            target = standardized_targets(y2, *stats)
            kwargs = dict(d_output=y2.shape[1], loss_fn=mse_loss, score_fn=negative_mse)
        if len(target) != len(data.x):
            raise ValueError(f"X has {len(data.x)} samples but y has {len(target)}")
        self._fit_network(data, target, continue_training=continuing, per_step=objective == "reconstruction", **kwargs)
        self.objective_ = objective
        if objective == "classification":
            self._label_encoder = encoder
        elif objective == "regression":
            self._target_stats = stats
        return self

    _saved_attributes = SSMEstimatorMixin._saved_attributes + ("objective_", "_target_stats", "_label_classes")

    @property
    def _label_classes(self):
        return self._label_encoder.classes_

    @_label_classes.setter
    def _label_classes(self, classes) -> None:
        self._label_encoder = restored_label_encoder(classes)

    def _rebuild_network(self):
        C = self._network_channels
        if self.objective_ == "reconstruction":
            return MaskedReconstruction(self.build_backbone(C), C)
        if self.objective_ == "classification":
            return self._network(C, len(self._label_classes))
        if self.objective_ == "regression":
            return self._network(C, len(self._target_stats[0]))
        return self._network(C, None)

    def _resolve_objective(self, y) -> str:
        if self.objective != "auto":
            if self.objective in ("classification", "regression") and y is None:
                raise ValueError(f"objective={self.objective!r} needs y")
            return self.objective
        if y is None:
            return "reconstruction"
        kind = type_of_target(y)
        return "classification" if kind in ("binary", "multiclass") else "regression"

    def _embed(self, model, x, mask):
        """Pooled backbone features of any head, pooled as fitted (the head's pooling, as the classifier's
        predictions are: a pooling set after fit does not describe the fitted model, and save keeps the fitted one)."""
        return model.backbone.pool(model.backbone.features(x, mask), mask, how=self._fitted_param("pooling"))

    def transform(self, X, sample_rate=None):
        """Pooled embeddings, (n_samples, d_model) float64."""
        ratio = self._rate_ratio(sample_rate)
        data = self._prepare_predict_input(X, ratio)
        return self._predict_outputs(data, ratio, self._embed).double().numpy()

    def transform_sequence(self, X, sample_rate=None):
        """Per-step features, (n_samples, d_model, n_timepoints) float64 (padded steps are zero)."""
        ratio = self._rate_ratio(sample_rate)
        data = self._prepare_predict_input(X, ratio)
        out = self._predict_outputs(data, ratio, lambda model, x, mask: model.backbone.features(x, mask), per_step=True)
        if data.mask is not None:
            out = out * data.mask[:, None, :]
        return out.double().numpy()

    def _export_outputs(self):
        pooling = self._fitted_param("pooling")

        def outputs(network, x):
            return (network.backbone.pool(network.backbone.features(x), None, how=pooling),)

        return ("embeddings",), outputs, {}

    @property
    def _n_features_out(self):
        check_is_fitted(self, "model_")
        return self._fitted_param("d_model")  # the fitted network's width, whatever was set since

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        return tags
