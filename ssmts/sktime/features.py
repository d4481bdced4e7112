"""SSMFeaturePanelClassifier / SSMFeaturePanelRegressor / SSMFeaturePanelTransformer: sktime's faces of
the training-free ssmts.SSMFeatureClassifier, ssmts.SSMFeatureRegressor and ssmts.SSMFeatureTransformer.

Thin adapters, as SSMPanelClassifier: sktime converts the panel to numpy3D (equal length) or a
list of DataFrames (unequal length), and fit/predict delegate to the scikit-learn estimator built
with the same parameters (fixed SSMs at many time scales, pooled, a ridge read-out). No network is
trained unless training_steps > 0.
"""

from __future__ import annotations

from sktime.classification.base import BaseClassifier
from sktime.regression.base import BaseRegressor
from sktime.transformations.base import BaseTransformer

from ..estimators import SSMFeatureClassifier, SSMFeatureRegressor, SSMFeatureTransformer
from ..training.config import with_params_doc
from ..training.params import FeatureBankParams, FeaturePanelParams
from ._panel import PanelAdapter, PanelRegressorAdapter, panel_to_sklearn


def _defaults_of(estimator: type, params: type = FeaturePanelParams) -> dict:
    """The scikit-learn feature estimator's defaults of the parameters the sktime face takes (`params`)."""
    return {name: p.default for name, p in estimator.__params__.items() if name in params.__params__}


_TAGS = {
    "authors": ["ssmts developers"],
    "maintainers": ["ssmts developers"],
    "python_dependencies": "torch",
    "X_inner_mtype": ["df-list", "numpy3D"],  # as SSMPanelClassifier's
    "capability:multivariate": True,
    "capability:unequal_length": True,
    "capability:missing_values": False,
    "capability:random_state": True,
    "property:randomness": "derandomized",
}

# tiny banks: one or two time scales, a few kernels and modes
_TEST_BANK = dict(n_scales=2, n_kernels=4, d_state=4, n_biases=2, device="cpu", random_state=0)


@with_params_doc
class SSMFeaturePanelClassifier(FeaturePanelParams, PanelAdapter, BaseClassifier):
    """Time series classifier on the responses of fixed diagonal SSMs at many time scales, pooled, with a
    ridge classifier on top (sktime interface; nothing is trained by default).

    Delegates to ssmts.SSMFeatureClassifier with the same parameters and defaults. Multivariate and
    unequal-length panels are supported (each series featurized at its own length). predict_proba is
    sktime's one-hot of predict: a ridge gives scores, not probabilities (as sktime's RocketClassifier).
    Not exposed: sample_rate (sktime's predict cannot pass a rate); the scikit-learn estimator has it.

    ``save("model.safetensors")`` / ``SSMFeaturePanelClassifier.load(...)``: the pickle-free format of the
    scikit-learn estimators (other paths keep sktime's pickled format).

    Attributes
    ----------
    estimator_ : ssmts.SSMFeatureClassifier, the fitted scikit-learn estimator.
    classes_ : ndarray, the class labels.

    Examples
    --------
    >>> import numpy as np
    >>> from ssmts.sktime import SSMFeaturePanelClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20, 2, 30))
    >>> y = np.where(X[:, 0].mean(axis=1) > 0, "up", "down")
    >>> clf = SSMFeaturePanelClassifier(random_state=0).fit(X, y)
    >>> clf.predict(X[:3]).shape
    (3,)
    """

    _param_defaults = _defaults_of(SSMFeatureClassifier)
    _tags = {
        **_TAGS,
        "y_inner_mtype": "numpy1D",
        "capability:multioutput": False,
        "capability:predict_proba": False,  # sktime's one-hot of predict
        "capability:class_weight": False,
    }
    _sklearn_class = SSMFeatureClassifier  # what save/load rebuild estimator_ as

    @classmethod
    def get_test_params(cls, parameter_set="default"):
        """Two tiny banks (causal with the envelopes; without them, series scaling, no difference)."""
        return [
            {**_TEST_BANK, "backward": False},
            {**_TEST_BANK, "envelope": False, "normalize": "series", "difference": False, "random_state": 1},
        ]


@with_params_doc
class SSMFeaturePanelRegressor(FeaturePanelParams, PanelRegressorAdapter, BaseRegressor):
    """Time series regressor on the responses of fixed diagonal SSMs at many time scales, pooled, with ridge
    regression on top (sktime interface; nothing is trained by default).

    Delegates to ssmts.SSMFeatureRegressor with the same parameters and defaults. Multivariate and
    unequal-length panels, and several targets at once (a ridge penalty each), are supported.
    Not exposed: sample_rate (see SSMFeaturePanelClassifier).

    ``save("model.safetensors")`` / ``SSMFeaturePanelRegressor.load(...)``: the pickle-free format of the
    scikit-learn estimators (other paths keep sktime's pickled format).

    Attributes
    ----------
    estimator_ : ssmts.SSMFeatureRegressor, the fitted scikit-learn estimator.

    Examples
    --------
    >>> import numpy as np
    >>> from ssmts.sktime import SSMFeaturePanelRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20, 2, 30))
    >>> y = X[:, 0].std(axis=1)
    >>> reg = SSMFeaturePanelRegressor(random_state=0).fit(X, y)
    >>> reg.predict(X[:3]).shape
    (3,)
    """

    _param_defaults = _defaults_of(SSMFeatureRegressor)
    _tags = {
        **_TAGS,
        # 2D always (one column per target), as SSMPanelRegressor's
        "y_inner_mtype": "numpy2D",
        "capability:multioutput": True,
    }
    _sklearn_class = SSMFeatureRegressor  # what save/load rebuild estimator_ as

    @classmethod
    def get_test_params(cls, parameter_set="default"):
        """Two tiny banks (the defaults' backward SSMs; channel scaling with the envelopes)."""
        return [
            dict(_TEST_BANK),
            {**_TEST_BANK, "normalize": "channel", "envelope": True, "backward": False, "random_state": 1},
        ]


@with_params_doc
class SSMFeaturePanelTransformer(FeatureBankParams, PanelAdapter, BaseTransformer):
    """The features of SSMFeaturePanelClassifier as an sktime transformer (panel in, one row of features a
    series out), for another model to read, as sktime's MiniRocket transformer: fixed diagonal SSMs at many
    time scales, their responses pooled (biases set on the training series at fit; nothing trained).

    Delegates to ssmts.SSMFeatureTransformer with the same parameters and defaults (the classifier's).
    Multivariate and unequal-length panels are supported. normalize="auto" needs a read-out and is refused;
    sample_rate is not exposed (sktime's transform cannot pass a rate).

    Attributes
    ----------
    estimator_ : ssmts.SSMFeatureTransformer, the fitted scikit-learn transformer.

    Examples
    --------
    >>> import numpy as np
    >>> from ssmts.sktime import SSMFeaturePanelTransformer
    >>> X = np.random.default_rng(0).normal(size=(20, 2, 30))
    >>> SSMFeaturePanelTransformer(n_scales=2, n_kernels=4, random_state=0).fit_transform(X).shape
    (20, 448)
    """

    _param_defaults = _defaults_of(SSMFeatureTransformer, FeatureBankParams)
    _tags = {
        **_TAGS,
        "y_inner_mtype": "None",
        "scitype:transform-input": "Series",
        "scitype:transform-output": "Primitives",
        "scitype:instancewise": False,  # the biases are set on all the training series
        "fit_is_empty": False,
        "requires_y": False,
    }
    _sklearn_class = SSMFeatureTransformer  # what save/load rebuild estimator_ as

    def _transform(self, X, y=None):
        import pandas as pd

        features = self.estimator_.transform(panel_to_sklearn(X))
        return pd.DataFrame(features, columns=self.estimator_.get_feature_names_out())

    @classmethod
    def get_test_params(cls, parameter_set="default"):
        """Two tiny banks (the defaults' backward SSMs and envelopes; causal, series scaling, no difference)."""
        return [
            dict(_TEST_BANK),
            {**_TEST_BANK, "backward": False, "normalize": "series", "difference": False, "random_state": 1},
        ]
