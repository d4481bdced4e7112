"""scikit-learn estimators over the SSM backbone."""
from .classification import SSMClassifier
from .regression import SSMRegressor
from .resampling import Resampler
from .transformation import SSMTransformer

__all__ = ["SSMClassifier", "SSMRegressor", "SSMTransformer", "Resampler"]
