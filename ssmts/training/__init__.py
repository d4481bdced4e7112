"""The one training path of ssmts, shared by the scikit-learn and sktime faces and the task pipelines.

params     every backbone and training parameter, declared once (config: the machinery)
trainer    the loop (Trainer), SequenceData, the one batched prediction (predict_batches)
callbacks  EarlyStopping, Checkpoint, ProgressBar and the Callback base class
loggers    MLflowLogger, TensorBoardLogger: each fit as an experiment run (optional libraries)
fit        fit_model: seed, build, hold out, train, resume
objectives losses and scores shared by the faces and the task runner
"""

from .callbacks import Callback, Checkpoint, EarlyStopping, ProgressBar
from .config import Configurable, InvalidParameterError, param
from .fit import FitResult, fit_model, holdout_indices, holdout_split, seed_from, start_process_group
from .loggers import MLflowLogger, TensorBoardLogger
from .params import (
    OPTIMIZERS,
    SCHEDULERS,
    BackboneParams,
    ClassifierParams,
    ContinuationParams,
    EarlyStoppingParams,
    OptimizerParams,
    ScheduleParams,
    SequenceModelParams,
    SequenceParams,
    TrainerConfig,
    resolve_device,
)
from .trainer import LazyRows, SequenceData, Trainer, on_device, predict_batches, read_checkpoint

__all__ = [
    "Trainer",
    "TrainerConfig",
    "SequenceData",
    "LazyRows",
    "predict_batches",
    "on_device",
    "read_checkpoint",
    "resolve_device",
    "fit_model",
    "FitResult",
    "holdout_indices",
    "holdout_split",
    "seed_from",
    "start_process_group",
    "Callback",
    "EarlyStopping",
    "Checkpoint",
    "ProgressBar",
    "MLflowLogger",
    "TensorBoardLogger",
    "Configurable",
    "param",
    "InvalidParameterError",
    "BackboneParams",
    "SequenceParams",
    "SequenceModelParams",
    "OptimizerParams",
    "ScheduleParams",
    "EarlyStoppingParams",
    "ContinuationParams",
    "ClassifierParams",
    "OPTIMIZERS",
    "SCHEDULERS",
]
