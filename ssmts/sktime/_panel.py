"""What the panel adapters share: sktime's panel as the scikit-learn estimators read it, and fit and
predict delegated to the scikit-learn estimator `_sklearn_class`, built with the same parameters, so
that training runs through the one shared engine."""

from __future__ import annotations

import numpy as np

from ..estimators._base import transactional
from ._persistence import PanelPersistenceMixin


def panel_to_sklearn(X):
    """sktime inner panel -> what the sklearn estimators take.

    numpy3D (n, C, L) passes through; a df-list (one (L_i, C) DataFrame per instance)
    becomes a (n, C, L) array when the lengths agree, else a ragged list of (C, L_i)
    arrays, which the sklearn estimators pad and mask.
    """
    if isinstance(X, np.ndarray):
        return X.astype(np.float64, copy=False)
    series = [np.asarray(frame, dtype=np.float64).T for frame in X]
    if len({s.shape[1] for s in series}) == 1:
        return np.stack(series)
    return series


class PanelAdapter(PanelPersistenceMixin):
    """fit and predict of an sktime classifier or regressor by `_sklearn_class` (`estimator_`), which
    PanelPersistenceMixin saves and rebuilds."""

    @transactional  # sktime's fit resets the estimator first: a failed refit would leave it unfitted
    def fit(self, X, y=None):
        """Fit to the panel X and its labels or targets y; on any failure or interruption the estimator is
        left as it was (the previous fit, or none)."""
        return super().fit(X, y)

    def _sklearn_y(self, y):
        """y as the scikit-learn estimator takes it."""
        return y

    def _fit(self, X, y):
        estimator = self._sklearn_class(**self.get_params(deep=False))
        self.estimator_ = estimator.fit(panel_to_sklearn(X), self._sklearn_y(y))
        return self

    def _predict(self, X) -> np.ndarray:
        return self.estimator_.predict(panel_to_sklearn(X))


class PanelRegressorAdapter(PanelAdapter):
    """A regressor's: sktime hands y as numpy2D, one column a target."""

    def _sklearn_y(self, y):
        y = np.asarray(y, dtype=np.float64)
        return y[:, 0] if y.shape[1] == 1 else y  # one target: 1D predictions, as sktime returns them
