"""The one training loop of ssmts, shared by the sklearn and sktime estimators and the task pipelines."""
from .trainer import OPTIMIZERS, SCHEDULERS, SequenceData, Trainer, resolve_device

__all__ = ["Trainer", "SequenceData", "resolve_device", "OPTIMIZERS", "SCHEDULERS"]
