"""sktime estimators over the SSM backbone: a global probabilistic forecaster and
panel (time series) classification / regression adapters.

    SSMForecaster         sktime BaseForecaster (uni/multivariate, exogenous X, panels,
                          hierarchies, quantiles and intervals, cheap update,
                          historical_forecasts from many origins in one forward, stream())
    ForecastStream        one observation at a time, forecasts updated each step
    SSMPanelClassifier    sktime BaseClassifier delegating to ssmts.SSMClassifier
    SSMPanelRegressor     sktime BaseRegressor delegating to ssmts.SSMRegressor
    SSMFeaturePanelClassifier, SSMFeaturePanelRegressor, SSMFeaturePanelTransformer
                          the same for the training-free SSMFeatureClassifier / SSMFeatureRegressor /
                          SSMFeatureTransformer
"""

from ._streaming import ForecastStream
from .classification import SSMPanelClassifier
from .features import SSMFeaturePanelClassifier, SSMFeaturePanelRegressor, SSMFeaturePanelTransformer
from .forecasting import SSMForecaster
from .regression import SSMPanelRegressor

__all__ = [
    "ForecastStream",
    "SSMForecaster",
    "SSMPanelClassifier",
    "SSMPanelRegressor",
    "SSMFeaturePanelClassifier",
    "SSMFeaturePanelRegressor",
    "SSMFeaturePanelTransformer",
]
