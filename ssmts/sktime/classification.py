"""SSMPanelClassifier: sktime's BaseClassifier face of ssmts.SSMClassifier.

A thin adapter: sktime converts the panel to numpy3D (equal length) or a list of
DataFrames (unequal length), and fit/predict delegate to an SSMClassifier built with
the same parameters, so training runs through the one shared engine and Trainer.
"""

from __future__ import annotations

import numpy as np
from sktime.classification.base import BaseClassifier

from ..estimators import SSMClassifier
from ..training import ClassifierParams, SequenceModelParams
from ..training.config import with_params_doc
from ..training.params import CLASSIFIER_DEFAULTS
from ._panel import PanelAdapter, panel_to_sklearn


@with_params_doc
class SSMPanelClassifier(SequenceModelParams, ClassifierParams, PanelAdapter, BaseClassifier):
    """Time series classifier with a deep MIMO diagonal SSM (sktime interface).

    Delegates to ssmts.SSMClassifier with the same parameters (pooled backbone +
    linear head, cross-entropy through the shared fit path). Multivariate and
    unequal-length panels are supported (shorter series are padded and masked).
    Not exposed: warm_start (sktime's fit always starts from a reset estimator) and
    sample_rate (sktime's predict cannot pass a rate); the sklearn estimator has both.

    ``save("model.safetensors")`` / ``SSMPanelClassifier.load(...)``: the pickle-free format of the
    scikit-learn estimators (other paths keep sktime's pickled format).

    Attributes
    ----------
    estimator_ : ssmts.SSMClassifier, the fitted sklearn estimator.
    classes_ : ndarray, the class labels.

    Examples
    --------
    >>> import numpy as np
    >>> from ssmts.sktime import SSMPanelClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20, 2, 30))
    >>> y = np.where(X[:, 0].mean(axis=1) > 0, "up", "down")
    >>> clf = SSMPanelClassifier(d_model=8, n_layers=1, max_epochs=5, min_steps=0, random_state=0)
    >>> clf = clf.fit(X, y)
    >>> clf.predict_proba(X[:3]).shape
    (3, 2)
    """

    _param_defaults = CLASSIFIER_DEFAULTS

    _tags = {
        "authors": ["ssmts developers"],
        "maintainers": ["ssmts developers"],
        "python_dependencies": "torch",
        # numpy3D stays numpy3D; every other panel mtype arrives as a list of DataFrames,
        # which also carries unequal lengths
        "X_inner_mtype": ["df-list", "numpy3D"],
        "y_inner_mtype": "numpy1D",
        "capability:multivariate": True,
        "capability:unequal_length": True,
        "capability:missing_values": False,
        "capability:multioutput": False,
        "capability:predict_proba": True,
        "capability:class_weight": True,
        "capability:random_state": True,
        "property:randomness": "derandomized",
    }
    _sklearn_class = SSMClassifier  # what save/load rebuild estimator_ as

    def _predict_proba(self, X) -> np.ndarray:
        return self.estimator_.predict_proba(panel_to_sklearn(X))

    @classmethod
    def get_test_params(cls, parameter_set="default"):
        """Three tiny configurations (one SSM block; several heads, last-step pooling, balanced weights;
        a block-diagonal LinearCDE block)."""
        tiny = dict(
            d_model=8, d_state=4, n_layers=1, max_epochs=2, min_steps=0, batch_size=16, device="cpu", random_state=0
        )
        return [
            tiny,
            {**tiny, "d_state": 8, "heads": 2, "pooling": "last", "class_weight": "balanced", "random_state": 1},
            {**tiny, "layer": "lncde", "lncde_structure": "block_diagonal", "lncde_block_size": 2, "random_state": 2},
        ]
