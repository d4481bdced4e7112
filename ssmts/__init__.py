"""ssmts: deep MIMO diagonal state-space models for time series.

Estimators follow scikit-learn (SSMClassifier, SSMRegressor, SSMTransformer, and the
training-free SSMFeatureClassifier / SSMFeatureRegressor) and sktime
(ssmts.sktime) conventions; the PyTorch core lives in ssmts.nn. The estimators are imported
on first use, so `import ssmts.nn` loads neither scikit-learn nor pandas.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._version import __version__

_ESTIMATORS = (
    "SSMClassifier",
    "SSMRegressor",
    "SSMTransformer",
    "SSMFeatureClassifier",
    "SSMFeatureRegressor",
    "SSMFeatureTransformer",
    "Resampler",
)
__all__ = [*_ESTIMATORS, "__version__"]

if TYPE_CHECKING:  # what IDEs and type checkers see
    from .estimators import (
        Resampler as Resampler,
    )
    from .estimators import (
        SSMClassifier as SSMClassifier,
    )
    from .estimators import (
        SSMFeatureClassifier as SSMFeatureClassifier,
    )
    from .estimators import (
        SSMFeatureRegressor as SSMFeatureRegressor,
    )
    from .estimators import (
        SSMFeatureTransformer as SSMFeatureTransformer,
    )
    from .estimators import (
        SSMRegressor as SSMRegressor,
    )
    from .estimators import (
        SSMTransformer as SSMTransformer,
    )


def __getattr__(name: str):
    if name in _ESTIMATORS:
        return getattr(importlib.import_module(".estimators", __name__), name)
    raise AttributeError(f"module 'ssmts' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
