"""Pure-PyTorch core: discretization, initialization, the SSM layer, blocks and backbones."""
from .discretization import DISCRETIZATIONS, discretize
from .init import INITS, PTDResult, hippo_legs, hippo_legs_normal, ptd_perturbation
from .ssm import SSM

__all__ = ["SSM", "discretize", "DISCRETIZATIONS", "INITS", "hippo_legs", "hippo_legs_normal", "ptd_perturbation", "PTDResult"]
from .blocks import ACTIVATIONS, NORMS, SSMBlock
from .backbone import POOLINGS, SSMBackbone, parameter_groups

__all__ += ["SSMBlock", "SSMBackbone", "parameter_groups", "NORMS", "ACTIVATIONS", "POOLINGS"]
