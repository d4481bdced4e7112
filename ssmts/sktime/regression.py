"""SSMPanelRegressor: sktime's BaseRegressor face of ssmts.SSMRegressor.

A thin adapter, like SSMPanelClassifier: fit/predict delegate to an SSMRegressor built
with the same parameters. Several targets are fitted jointly by one network.
"""
from __future__ import annotations

import numpy as np
from sktime.regression.base import BaseRegressor

from ..estimators import SSMRegressor
from ..estimators._params import PARAMETER_DOCS, make_init
from .classification import ADAPTER_NOTE, adapter_defaults, panel_to_sklearn

_store_params = make_init(adapter_defaults())


class SSMPanelRegressor(BaseRegressor):
    __doc__ = (
        "Time series regressor with a deep MIMO diagonal SSM (sktime interface).\n\n"
        "Delegates to ssmts.SSMRegressor with the same parameters (pooled backbone + linear\n"
        "head, MSE on standardized targets through the shared Trainer). Multivariate and\n"
        "unequal-length panels, and several targets at once, are supported.\n\n"
        "Parameters\n" + PARAMETER_DOCS + ADAPTER_NOTE
        + """
    Attributes
    ----------
    estimator_ : ssmts.SSMRegressor, the fitted sklearn estimator.

    Examples
    --------
    >>> import numpy as np
    >>> from ssmts.sktime import SSMPanelRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20, 2, 30))
    >>> y = X[:, 0].mean(axis=1)
    >>> reg = SSMPanelRegressor(d_model=8, n_layers=1, max_epochs=5, random_state=0)
    >>> reg = reg.fit(X, y)
    >>> reg.predict(X[:3]).shape
    (3,)
    """
    )

    _tags = {
        "authors": ["ssmts developers"],
        "maintainers": ["ssmts developers"],
        "python_dependencies": "torch",
        "X_inner_mtype": ["df-list", "numpy3D"],
        # 2D always (one column per target); a list with numpy1D first would flatten
        # several targets into one vector
        "y_inner_mtype": "numpy2D",
        "capability:multivariate": True,
        "capability:unequal_length": True,
        "capability:missing_values": False,
        "capability:multioutput": True,
        "capability:random_state": True,
        "property:randomness": "derandomized",
    }

    def __init__(self, **params):
        _store_params(self, **params)
        super().__init__()

    __init__.__signature__ = _store_params.__signature__

    def _fit(self, X, y):
        y = np.asarray(y, dtype=np.float64)
        target = y[:, 0] if y.shape[1] == 1 else y  # one target: 1D predictions, as sktime returns them
        self.estimator_ = SSMRegressor(**self.get_params(deep=False)).fit(panel_to_sklearn(X), target)
        return self

    def _predict(self, X) -> np.ndarray:
        return self.estimator_.predict(panel_to_sklearn(X))

    @classmethod
    def get_test_params(cls, parameter_set="default"):
        """Two tiny configurations (one SSM block; several heads and last-step pooling)."""
        tiny = dict(d_model=8, d_state=4, n_layers=1, max_epochs=2, batch_size=16, device="cpu", random_state=0)
        return [tiny, {**tiny, "d_state": 8, "heads": 2, "pooling": "last", "random_state": 1}]
