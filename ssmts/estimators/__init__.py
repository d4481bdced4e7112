"""scikit-learn estimators over the SSM backbone."""

from ._base import ExtrapolationWarning
from .classification import SSMClassifier
from .features import SSMFeatureClassifier, SSMFeatureRegressor, SSMFeatureTransformer
from .regression import SSMRegressor
from .resampling import Resampler
from .transformation import SSMTransformer

__all__ = [
    "SSMClassifier",
    "SSMRegressor",
    "SSMTransformer",
    "SSMFeatureClassifier",
    "SSMFeatureRegressor",
    "SSMFeatureTransformer",
    "Resampler",
    "ExtrapolationWarning",
]
