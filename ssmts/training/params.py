"""Every backbone and training parameter of ssmts, declared once (see ssmts.training.config).

Groups, and who takes them:

    BackboneParams       every estimator, task presets        (SSMBackbone architecture)
    SequenceParams       sequence-level estimators            (pooling, input scaling)
    OptimizerParams      every estimator, TrainerConfig       (optimizer, epochs, device, seed)
    ScheduleParams       TrainerConfig, task presets          (warm-up, plateau, clipping)
    EarlyStoppingParams  every estimator                      (hold-out, patience, callbacks)
    ContinuationParams   the scikit-learn estimators          (warm_start, sample_rate)
    ClassWeightParams    the classifiers
"""
from __future__ import annotations

import numbers
from typing import Any, Literal

import numpy as np
import torch

from ..nn.backbone import SSMBackbone
from ..nn.blocks import ACTIVATIONS, NORMS
from ..nn.discretization import DISCRETIZATIONS
from ..nn.init import INITS
from .config import (
    AnyOf, Boolean, Configurable, Integer, InvalidParameterError, NoneOr, Options, Real, Satisfies, param,
)

OPTIMIZERS = ("adamw", "adam", "sgd")
SCHEDULERS = ("none", "cosine", "plateau")
POOLINGS = ("mean", "last")
POSITIVE = Real(0, None, closed="neither")


def _is_device(value) -> bool:
    if isinstance(value, torch.device):
        return True
    return isinstance(value, str) and (value in ("auto", "cpu", "cuda") or
                                       (value.startswith("cuda:") and value[5:].isdigit()))


def _is_seed(value) -> bool:
    return value is None or isinstance(value, np.random.RandomState) or (
        isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)) and value >= 0)


def _is_callback_list(value) -> bool:
    from .callbacks import Callback

    return value is None or (isinstance(value, (list, tuple)) and all(isinstance(c, Callback) for c in value))


def _is_class_weight(value) -> bool:
    if value is None or (isinstance(value, str) and value == "balanced"):
        return True
    return isinstance(value, dict) and all(
        isinstance(w, numbers.Real) and not isinstance(w, bool) and np.isfinite(w) and w > 0 for w in value.values())


def resolve_device(device: str | torch.device) -> torch.device:
    """'auto' -> cuda when available, else cpu; 'cuda' without a GPU is an error."""
    if isinstance(device, torch.device):
        return device
    if not _is_device(device):
        raise InvalidParameterError(f"unknown device {device!r}; choose 'auto', 'cpu', 'cuda' or 'cuda:N'")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InvalidParameterError(f"device={device!r} was requested but no CUDA device is available")
    return torch.device(device)


class BackboneParams(Configurable):
    _params_group = "Backbone"
    d_model: int = param(default=64, doc="Width H of every block.", constraint=Integer(1))
    d_state: int = param(default=64, doc="State size N of each head (N/2 complex modes).", constraint=Integer(2))
    n_layers: int = param(default=4, doc="Number of SSM blocks.", constraint=Integer(1))
    heads: int = param(default=1, doc="Block-diagonal heads (1 = one MIMO system, d_model = SISO).", constraint=Integer(1))
    bidirectional: bool | str = param(
        default=False, doc="Causal (False) or non-causal: 'essm'/True (flipped kernel) or 'ldnn' (own backward Lambda).",
        constraint=Options(False, True, "essm", "ldnn"))
    init: str = param(default="legs", doc="Initialization of Lambda, B, C (ssm-math.md section 6).", constraint=Options(*INITS))
    discretization: str = param(default="zoh", doc="Continuous-to-discrete map of each mode.", constraint=Options(*DISCRETIZATIONS))
    dropout: float = param(default=0.0, doc="Dropout after each block's activation.", constraint=Real(0.0, 1.0, closed="left"))
    norm: str = param(default="layer", doc="Normalization of each block.", constraint=Options(*NORMS))
    prenorm: bool = param(default=True, doc="Normalize before the SSM (True) or after the residual sum.", constraint=Boolean())
    activation: str = param(default="gated_gelu", doc="Activation after the SSM.", constraint=Options(*ACTIVATIONS))
    dt_min: float = param(default=1e-3, doc="Lower end of the log-uniform initial Delta.", constraint=POSITIVE)
    dt_max: float = param(default=1e-1, doc="Upper end of the log-uniform initial Delta.", constraint=POSITIVE)
    ptd_eps: float = param(default=1e-4, doc="init='ptd': size of the starting perturbation E of the HiPPO-LegS "
                           "matrix (the measured ||E||/||A|| is what the optimization ends at).", constraint=POSITIVE)
    ptd_gamma: float = param(default=1e3, doc="init='ptd': weight of ||E||/||A|| against log cond(V) in the "
                             "perturbation's objective.", constraint=POSITIVE)
    fixed_transition: bool = param(default=False, doc="LSSL-fixed: freeze Lambda and Delta at their initialization; "
                                   "B, C, D and the other weights learn.", constraint=Boolean())

    def build_backbone(self, d_input: int, *, vocab_size: int | None = None) -> SSMBackbone:
        """The SSMBackbone of these parameters, without a decoder (a head from ssmts.nn.heads goes on top)."""
        kwargs = self.backbone_kwargs()
        d_model, n_layers = kwargs.pop("d_model"), kwargs.pop("n_layers")
        return SSMBackbone(d_input, d_model, n_layers, None, vocab_size=vocab_size, **kwargs)

    def backbone_kwargs(self) -> dict[str, Any]:
        """The values of this group, checked across parameters (dt_min <= dt_max)."""
        values = self.param_values(BackboneParams)
        if _is_real(values["dt_min"]) and _is_real(values["dt_max"]) and values["dt_min"] > values["dt_max"]:
            raise InvalidParameterError(
                f"dt_min={values['dt_min']} must not exceed dt_max={values['dt_max']} ({type(self).__name__})")
        return values


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class SequenceParams(Configurable):
    pooling: Literal["mean", "last"] = param(default="mean", doc="Sequence-to-vector pooling.", constraint=Options(*POOLINGS),
                                             group="Backbone")
    scale_input: bool = param(default=True, doc="Standardize each channel with training statistics.", constraint=Boolean(),
                              group="Training")


class OptimizerParams(Configurable):
    _params_group = "Training"
    max_epochs: int = param(default=50, doc="Passes over the training data.", constraint=Integer(1))
    batch_size: int = param(default=32, doc="Sequences per optimizer step (and per prediction batch).", constraint=Integer(1))
    lr: float = param(default=3e-3, doc="Learning rate of all non-SSM parameters.", constraint=POSITIVE)
    lr_ssm: float | None = param(default=1e-3, doc="Learning rate of Lambda, Delta and B (no weight decay); None: lr.",
                                 constraint=NoneOr(POSITIVE))
    weight_decay: float = param(default=0.01, doc="AdamW weight decay of the non-SSM weights.", constraint=Real(0.0, None))
    optimizer: str = param(default="adamw", doc="Optimizer.", constraint=Options(*OPTIMIZERS))
    scheduler: str = param(default="cosine", doc="Learning-rate schedule (cosine over the run, or on plateau).",
                           constraint=Options(*SCHEDULERS))
    device: str = param(default="auto", doc="'auto' (a GPU when there is one), 'cpu', 'cuda' or 'cuda:N'.",
                        constraint=Satisfies(_is_device, "'auto', 'cpu', 'cuda', 'cuda:N' or a torch.device", choice=True))
    random_state: int | np.random.RandomState | None = param(default=None, doc="Fixes initialization, shuffling and dropout (int, RandomState or None).",
                                     constraint=Satisfies(_is_seed, "None, an int >= 0 or a numpy RandomState"))
    verbose: int = param(default=0, doc="1 shows a progress bar with the loss and validation score per epoch.",
                         constraint=AnyOf(Integer(0), Boolean()))


class ScheduleParams(Configurable):
    _params_group = "Schedule"
    warmup_steps: int = param(default=0, doc="Linear warm-up steps of the cosine schedule.", constraint=Integer(0))
    total_steps: int | None = param(default=None, doc="Steps of the cosine schedule (None: the whole run).",
                                    constraint=NoneOr(Integer(1)))
    plateau_factor: float = param(default=0.5, doc="Factor of the plateau schedule.", constraint=Real(0.0, 1.0, closed="neither"))
    plateau_patience: int = param(default=5, doc="Patience (epochs) of the plateau schedule.", constraint=Integer(0))
    grad_clip: float | None = param(default=1.0, doc="Gradient-norm clipping (None: off).", constraint=NoneOr(POSITIVE))


class TrainerConfig(OptimizerParams, ScheduleParams):
    """Settings of one Trainer: the estimators' training parameters plus the schedule details."""

    def validate_params(self) -> None:
        super().validate_params()
        if self.total_steps is not None and self.total_steps <= self.warmup_steps:
            raise InvalidParameterError(
                f"need 0 <= warmup_steps < total_steps, got {self.warmup_steps} and {self.total_steps}")

    @classmethod
    def from_params(cls, owner: Configurable, **overrides) -> "TrainerConfig":
        """The settings of an estimator (or preset) holding OptimizerParams (and maybe ScheduleParams)."""
        values = {name: getattr(owner, name) for name in cls.param_names() if hasattr(owner, name)}
        values.update(overrides)
        return cls(**values)


class EarlyStoppingParams(Configurable):
    _params_group = "Training"
    early_stopping: bool = param(default=False, doc="Hold out validation_fraction, stop after n_iter_no_change epochs "
                                        "without an improvement of tol, restore the best weights.", constraint=Boolean())
    validation_fraction: float = param(default=0.1, doc="Share of the training data held out for early stopping.",
                                       constraint=Real(0.0, 1.0, closed="neither"))
    n_iter_no_change: int = param(default=10, doc="Patience of early stopping (epochs).", constraint=Integer(1))
    tol: float = param(default=1e-4, doc="Smallest improvement that resets the patience.", constraint=Real(0.0, None))
    callbacks: list | None = param(default=None, doc="ssmts.training.Callback objects called after every epoch.",
                                   constraint=Satisfies(_is_callback_list, "None or a list of ssmts.training.Callback"))


class ContinuationParams(Configurable):
    _params_group = "Training"
    warm_start: bool = param(default=False, doc="Continue training the fitted model on the next fit.", constraint=Boolean())
    sample_rate: float | None = param(
        default=None, doc="Rate (Hz) of the data passed in; the rate at fit is the training rate, data at another "
              "rate is handled zero-shot by Delta x training rate / new rate.", constraint=NoneOr(POSITIVE))


class ClassWeightParams(Configurable):
    _params_group = "Classifier"
    class_weight: dict | str | None = param(default=None, doc="None, 'balanced' or a dict {label: weight > 0}.",
                                            constraint=Satisfies(_is_class_weight, "None, 'balanced' or a dict of finite "
                                                                        "weights > 0"))


__all__ = [
    "BackboneParams", "SequenceParams", "OptimizerParams", "ScheduleParams", "TrainerConfig", "EarlyStoppingParams",
    "ContinuationParams", "ClassWeightParams", "OPTIMIZERS", "SCHEDULERS", "POOLINGS", "resolve_device",
]
