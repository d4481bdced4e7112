"""Pure-PyTorch core: discretization, initialization, the SSM layer, blocks and backbones,
and the structured linear neural CDE layer (LinearCDE)."""
from .discretization import DISCRETIZATIONS, discretize
from .init import INITS, PTDResult, hippo_legs, hippo_legs_normal, ptd_perturbation
from .lncde import LNCDE_STRUCTURES, LinearCDE
from .ssm import SSM

__all__ = ["SSM", "discretize", "DISCRETIZATIONS", "INITS", "hippo_legs", "hippo_legs_normal", "ptd_perturbation", "PTDResult"]
__all__ += ["LinearCDE", "LNCDE_STRUCTURES"]
from .blocks import ACTIVATIONS, NORMS, SSMBlock
from .backbone import POOLINGS, SSMBackbone, parameter_groups

__all__ += ["SSMBlock", "SSMBackbone", "parameter_groups", "NORMS", "ACTIVATIONS", "POOLINGS"]
