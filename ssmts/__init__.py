"""ssmts: deep MIMO diagonal state-space models for time series.

Estimators follow scikit-learn (SSMClassifier, SSMRegressor, SSMTransformer) and
sktime conventions; the PyTorch core lives in ssmts.nn.
"""
from .estimators import Resampler, SSMClassifier, SSMRegressor, SSMTransformer

__version__ = "0.1.0"
__all__ = ["SSMClassifier", "SSMRegressor", "SSMTransformer", "Resampler", "__version__"]
