"""SSMRegressor: sequence regression (single and multi-output) with a deep diagonal SSM."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.metrics import r2_score
from sklearn.utils.validation import check_array

from ..nn.functional import power_of_two_unit
from ..training.config import with_params_doc
from ..training.objectives import mse_loss, negative_mse
from ..training.params import REGRESSOR_DEFAULTS
from ._base import (
    SSMEstimatorMixin,
    continued_target_statistics,
    require_y,
    standardized_targets,
    target_statistics,
    transactional,
)


def check_targets(y) -> tuple[np.ndarray, bool]:
    """(y as (n_samples, n_targets) float64, whether it came 1-D); finite numbers only."""
    try:
        y = check_array(y, ensure_2d=False, allow_nd=True, dtype=np.float64, input_name="y")
    except ValueError as error:
        if "could not convert" not in str(error):
            raise
        raise ValueError(
            f"y must hold numbers: a regressor's targets are numeric, but {error} (for class labels use a "
            "classifier; for numbers stored as text, convert y with y.astype(float))"
        ) from error
    if y.ndim not in (1, 2):
        raise ValueError(f"y must be 1-D (n_samples,) or 2-D (n_samples, n_targets), got shape {y.shape}")
    return y.reshape(len(y), -1), y.ndim == 1


class RateRegressorMixin(RegressorMixin):
    """What every ssmts regressor adds to sklearn's: R^2 of data at a given sample rate, and
    targets of several columns."""

    def score(self, X, y, sample_weight=None, sample_rate=None):
        """R^2 of predict(X, sample_rate) against y, formed in units of the power of two nearest each target
        column's magnitude (an exact scaling, which R^2 does not see): the squares of targets near 1e200
        would overflow to a NaN score."""
        predicted = self.predict(X, sample_rate=sample_rate)
        y = np.asarray(y, dtype=np.float64)
        unit = power_of_two_unit(np.abs(y).max(axis=0) if y.size else 0.0)
        return r2_score(y / unit, predicted / unit, sample_weight=sample_weight)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


@with_params_doc
class SSMRegressor(SSMEstimatorMixin, RateRegressorMixin, BaseEstimator):
    """Regress targets from time series with a deep MIMO diagonal SSM (pooled backbone + linear head).

    X as for SSMClassifier; y: (n_samples,) or (n_samples, n_targets). Targets are
    standardized for training and predictions are returned in the original units.
    """

    _param_defaults = REGRESSOR_DEFAULTS

    def fit(self, X, y):
        return self._fit(X, y, partial=False)

    def partial_fit(self, X, y):
        """One more epoch on (X, y)."""
        return self._fit(X, y, partial=True)

    @transactional
    def _fit(self, X, y, partial: bool):
        continuing = hasattr(self, "model_") and (partial or self.warm_start)
        self._start_fit(continuing)
        require_y(self, y)
        data = self._fit_input(X, continuing)
        y2, is_1d = check_targets(y)
        if continuing:
            self.target_mean_, self.target_scale_ = continued_target_statistics(
                y2, self.target_mean_, self.target_scale_
            )
        else:
            self.n_targets_ = y2.shape[1]
            self._y_is_1d = is_1d
            self.target_mean_, self.target_scale_ = target_statistics(y2)
        if len(y2) != len(data.x):
            raise ValueError(f"X has {len(data.x)} samples but y has {len(y2)}")
        target = standardized_targets(y2, self.target_mean_, self.target_scale_)
        self._fit_network(
            data,
            target,
            d_output=self.n_targets_,
            loss_fn=mse_loss,
            score_fn=negative_mse,
            epochs=1 if partial else None,
            continue_training=continuing,
        )
        return self

    _saved_attributes = SSMEstimatorMixin._saved_attributes + (
        "n_targets_",
        "_y_is_1d",
        "target_mean_",
        "target_scale_",
    )

    def _rebuild_network(self):
        return self._network(self._network_channels, self.n_targets_)

    def predict(self, X, sample_rate=None):
        """Predictions, (n_samples,) or (n_samples, n_targets), float64."""
        ratio = self._rate_ratio(sample_rate)
        data = self._prepare_predict_input(X, ratio)
        out = self._predict_outputs(data, ratio).double().numpy()
        out = out * self.target_scale_ + self.target_mean_
        return out[:, 0] if self._y_is_1d else out

    def _export_outputs(self):
        mean, scale = torch.as_tensor(self.target_mean_), torch.as_tensor(self.target_scale_)  # float64
        one_target = self._y_is_1d

        def outputs(network, x):
            out = network(x).double() * scale + mean
            return (out[:, 0] if one_target else out,)

        return ("predictions",), outputs, {}

    def stream(self, X_new, state=None, sample_rate=None):
        """Regress on streams as they arrive: X_new (n, k) or (n, channels, k), the next k steps;
        state: what the previous call returned (None to start). Returns (predictions (n, k) or
        (n, k, n_targets), state), where [:, t] equals predict on each prefix up to that step.
        Needs a causal model (bidirectional=False)."""
        out, state = self._stream_outputs(X_new, state, sample_rate)
        out = out.double().numpy() * self.target_scale_ + self.target_mean_
        return (out[..., 0] if self._y_is_1d else out), state
