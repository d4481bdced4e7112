"""SSMClassifier: sequence classification with a deep diagonal SSM."""

from __future__ import annotations

import numbers

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.metrics import accuracy_score
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import column_or_1d

from ..training import ClassifierParams
from ..training.config import with_params_doc
from ..training.objectives import accuracy_of_logits, weighted_cross_entropy
from ..training.params import CLASSIFIER_DEFAULTS
from ._base import SSMEstimatorMixin, require_y, transactional
from ._export import labels_json


def _no_label(label) -> bool:
    """None, a float NaN, or pandas' NA (named by its type: no pandas import for a label check)."""
    return label is None or (isinstance(label, float) and label != label) or type(label).__name__ == "NAType"


def check_labels(y, n_samples: int) -> np.ndarray:
    """y as a 1D array of class labels, one per sample; clear errors for missing labels."""
    y = column_or_1d(y, warn=True)
    if len(y) != n_samples:
        raise ValueError(f"X has {n_samples} samples but y has {len(y)}")
    if y.dtype == object:  # None, NaN and pandas' NA all mean "no label"
        missing = np.flatnonzero([_no_label(label) for label in y])
    else:
        missing = np.flatnonzero(np.isnan(y)) if y.dtype.kind == "f" else []
    if len(missing):
        raise ValueError(
            f"y has no label (None or NaN) for {len(missing)} sample(s), e.g. index {int(missing[0])}; "
            "every sample needs a class label"
        )
    if y.dtype == object:
        kinds = {
            "text"
            if isinstance(label, str)
            else "number"
            if isinstance(label, numbers.Number)
            else type(label).__name__
            for label in y
        }
        if len(kinds) > 1:
            raise ValueError(
                f"y mixes labels of different kinds ({', '.join(sorted(kinds))}); the classes cannot be "
                "ordered: give every label as the same kind (e.g. all strings)"
            )
    check_classification_targets(y)
    return y


def label_encoder(estimator, classes) -> LabelEncoder:
    """The LabelEncoder of `classes`; a classifier needs at least two."""
    encoder = LabelEncoder().fit(classes)
    if len(encoder.classes_) < 2:
        raise ValueError(
            f"{type(estimator).__name__} needs samples of at least 2 classes in the data, got 1 class: "
            f"{encoder.classes_[0]!r}"
        )
    return encoder


def restored_label_encoder(classes) -> LabelEncoder:
    """The LabelEncoder of the classes_ a saved file holds. fit writes them as LabelEncoder does
    (np.unique: sorted, no repeats), and transform's binary search needs that order; classes_ in any
    other order (reversed, they would swap the labels of every prediction) were not written by fit."""
    classes = np.asarray(classes)
    try:
        written_by_fit = classes.ndim == 1 and len(classes) >= 1 and np.array_equal(np.unique(classes), classes)
    except TypeError:  # labels of types that do not compare
        written_by_fit = False
    if not written_by_fit:
        shown = np.array2string(classes, threshold=8) if classes.ndim else repr(classes)
        raise ValueError(
            f"classes_ {shown} are not distinct labels in sorted order, as fit writes them; the file was altered"
        )
    encoder = LabelEncoder()
    encoder.classes_ = classes
    return encoder


class RateClassifierMixin(ClassifierMixin):
    """What every ssmts classifier adds to sklearn's: the accuracy of data at a given sample rate."""

    def score(self, X, y, sample_weight=None, sample_rate=None):
        """Accuracy of predict(X, sample_rate) against y."""
        return accuracy_score(y, self.predict(X, sample_rate=sample_rate), sample_weight=sample_weight)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = False
        return tags


@with_params_doc
class SSMClassifier(SSMEstimatorMixin, ClassifierParams, RateClassifierMixin, BaseEstimator):
    """Classify time series with a deep MIMO diagonal SSM (pooled backbone + linear head).

    X: (n_samples, n_timepoints), (n_samples, n_channels, n_timepoints), or a list of
    series of different lengths (padded and masked). Labels can be any hashable values.
    """

    _param_defaults = CLASSIFIER_DEFAULTS

    def fit(self, X, y):
        """Train from scratch (or continue, with warm_start=True)."""
        return self._fit(X, y, classes=None, partial=False)

    def partial_fit(self, X, y, classes=None):
        """One more epoch on (X, y). `classes` is required on the first call."""
        return self._fit(X, y, classes=classes, partial=True)

    @transactional
    def _fit(self, X, y, classes, partial: bool):
        continuing = hasattr(self, "model_") and (partial or self.warm_start)
        if partial and not continuing and classes is None:
            raise ValueError("classes must be passed on the first call to partial_fit")
        self._start_fit(continuing)
        require_y(self, y)
        data = self._fit_input(X, continuing)
        y = check_labels(y, len(data.x))
        if continuing and classes is not None and not np.array_equal(np.unique(classes), self.classes_):
            raise ValueError(
                f"classes={np.unique(classes).tolist()} differs from the classes of the fitted model "
                f"({self.classes_.tolist()}); a continued fit keeps them (fit anew for other classes)"
            )
        if continuing:
            unseen = np.setdiff1d(np.unique(y), self.classes_)
            if unseen.size:
                raise ValueError(
                    f"y contains labels {unseen.tolist()} not seen in the first fit ({self.classes_.tolist()})"
                )
        else:
            self._encoder = label_encoder(self, np.unique(y) if classes is None else classes)
            self.classes_ = self._encoder.classes_
        y_index = self._encoder.transform(y)
        weight = self._class_weights(y_index)
        self._fit_network(
            data,
            torch.from_numpy(y_index).long(),
            d_output=len(self.classes_),
            loss_fn=weighted_cross_entropy(weight, self.label_smoothing),
            score_fn=accuracy_of_logits,
            stratify=y_index,
            epochs=1 if partial else None,
            continue_training=continuing,
        )
        return self

    _saved_attributes = SSMEstimatorMixin._saved_attributes + ("classes_",)

    def _restore_after_load(self) -> None:
        self._encoder = restored_label_encoder(self.classes_)

    def _rebuild_network(self):
        return self._network(self._network_channels, len(self.classes_))

    def _class_weights(self, y_index: np.ndarray) -> torch.Tensor | None:
        if self.class_weight is None:
            return None
        labels = np.arange(len(self.classes_))
        if isinstance(self.class_weight, str):  # "balanced" (validated with the other parameters)
            present = np.unique(y_index)
            w = np.ones(len(labels))
            w[present] = compute_class_weight("balanced", classes=present, y=y_index)
        elif isinstance(self.class_weight, dict):
            unknown = set(self.class_weight) - set(self.classes_.tolist())
            if unknown:
                raise ValueError(f"class_weight names unknown classes {sorted(map(str, unknown))}")
            w = np.array([float(self.class_weight.get(c, 1.0)) for c in self.classes_])
        return torch.as_tensor(w, dtype=torch.float32)

    def _logits(self, X, sample_rate) -> torch.Tensor:
        ratio = self._rate_ratio(sample_rate)
        return self._predict_outputs(self._prepare_predict_input(X, ratio), ratio)

    def decision_function(self, X, sample_rate=None):
        """Logits, (n_samples, n_classes); for two classes the logit difference, (n_samples,)."""
        logits = self._logits(X, sample_rate).double().numpy()
        if logits.shape[1] == 2:
            return logits[:, 1] - logits[:, 0]
        return logits

    def predict_proba(self, X, sample_rate=None):
        """Class probabilities, (n_samples, n_classes), columns in the order of classes_."""
        return torch.softmax(self._logits(X, sample_rate).double(), dim=-1).numpy()

    def predict(self, X, sample_rate=None):
        """Predicted labels, (n_samples,). sample_rate: rate of X if not the estimator's."""
        index = self._logits(X, sample_rate).argmax(-1).numpy()
        return self.classes_[index]

    def _export_outputs(self):
        def outputs(network, x):
            logits = network(x)
            return torch.softmax(logits, dim=-1), logits.argmax(-1)

        return ("probabilities", "label_index"), outputs, {"classes": labels_json(self.classes_)}

    def stream(self, X_new, state=None, sample_rate=None):
        """Classify streams as they arrive: X_new (n, k) or (n, channels, k), the next k steps of
        n streams; state: what the previous call returned (None to start). Returns (proba
        (n, k, n_classes), state), where proba[:, t] equals predict_proba on each stream's
        prefix up to that step. Needs a causal model (bidirectional=False)."""
        logits, state = self._stream_outputs(X_new, state, sample_rate)
        return torch.softmax(logits.double(), dim=-1).numpy(), state
