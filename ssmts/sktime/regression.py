"""SSMPanelRegressor: sktime's BaseRegressor face of ssmts.SSMRegressor.

A thin adapter, like SSMPanelClassifier: fit/predict delegate to an SSMRegressor built
with the same parameters. Several targets are fitted jointly by one network.
"""

from __future__ import annotations

from sktime.regression.base import BaseRegressor

from ..estimators import SSMRegressor
from ..training import SequenceModelParams
from ..training.config import with_params_doc
from ..training.params import REGRESSOR_DEFAULTS
from ._panel import PanelRegressorAdapter


@with_params_doc
class SSMPanelRegressor(SequenceModelParams, PanelRegressorAdapter, BaseRegressor):
    """Time series regressor with a deep MIMO diagonal SSM (sktime interface).

    Delegates to ssmts.SSMRegressor with the same parameters (pooled backbone + linear
    head, MSE on standardized targets through the shared fit path). Multivariate and
    unequal-length panels, and several targets at once, are supported.
    Not exposed: warm_start and sample_rate (see SSMPanelClassifier).

    ``save("model.safetensors")`` / ``SSMPanelRegressor.load(...)``: the pickle-free format of the
    scikit-learn estimators (other paths keep sktime's pickled format).

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
    >>> reg = SSMPanelRegressor(d_model=8, n_layers=1, max_epochs=5, min_steps=0, random_state=0)
    >>> reg = reg.fit(X, y)
    >>> reg.predict(X[:3]).shape
    (3,)
    """

    _param_defaults = REGRESSOR_DEFAULTS

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
    _sklearn_class = SSMRegressor  # what save/load rebuild estimator_ as

    @classmethod
    def get_test_params(cls, parameter_set="default"):
        """Three tiny configurations (one SSM block; several heads and last-step pooling; a Walsh-Hadamard
        LinearCDE block)."""
        tiny = dict(
            d_model=8, d_state=4, n_layers=1, max_epochs=2, min_steps=0, batch_size=16, device="cpu", random_state=0
        )
        return [
            tiny,
            {**tiny, "d_state": 8, "heads": 2, "pooling": "last", "random_state": 1},
            {**tiny, "layer": "lncde", "lncde_structure": "walsh_hadamard", "pooling": "last", "random_state": 2},
        ]
