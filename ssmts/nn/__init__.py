"""Pure-PyTorch core: discretization, initialization, the SSM layer, the structured linear
neural CDE layer (LinearCDE), blocks, backbones and heads, and training-free SSM features
(SSMFeatures, FeatureReadout).

Imports nothing from scikit-learn, pandas or sktime (tests/test_architecture.py checks it).
"""

from .dense import DenseSSM
from .discretization import DISCRETIZATIONS, discretize, discretize_dense
from .features import FeatureReadout, SSMFeatures, log_spaced_steps
from .init import INITS, PTDResult, hippo_legs, hippo_legs_normal, ptd_perturbation
from .lncde import LNCDE_STRUCTURES, LinearCDE
from .resampling import delta_factor, scaled_delta
from .ssm import SSM

__all__ = [
    "SSM",
    "discretize",
    "DISCRETIZATIONS",
    "INITS",
    "hippo_legs",
    "hippo_legs_normal",
    "ptd_perturbation",
    "PTDResult",
    "delta_factor",
    "scaled_delta",
    "LinearCDE",
    "LNCDE_STRUCTURES",
    "DenseSSM",
    "discretize_dense",
    "SSMFeatures",
    "FeatureReadout",
    "log_spaced_steps",
]
from .backbone import SSMBackbone, parameter_groups
from .blocks import ACTIVATIONS, NORMS, SSMBlock
from .functional import POOLINGS
from .heads import (
    DirectForecastHead,
    ForecastEnsemble,
    MaskedReconstruction,
    PerStepHead,
    RecursiveForecastHead,
    SequenceHead,
    TwoTowerRetrieval,
)

__all__ += [
    "SSMBlock",
    "SSMBackbone",
    "parameter_groups",
    "NORMS",
    "ACTIVATIONS",
    "POOLINGS",
    "SequenceHead",
    "PerStepHead",
    "MaskedReconstruction",
    "DirectForecastHead",
    "RecursiveForecastHead",
    "ForecastEnsemble",
    "TwoTowerRetrieval",
]
