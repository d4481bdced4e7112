"""Experiment logging as callbacks: every fit becomes one run of MLflow or TensorBoard, with the
face's parameters and, after every epoch, the epoch's record (training loss, validation loss and
score, learning rate, seconds).

Both libraries are optional (`pip install ssmts[logging]`); the callbacks import them when a fit
starts. A grid search clones the callback with the estimator, so each candidate and fold is a run
of its own (under the active MLflow run, if there is one: nested runs).
"""

from __future__ import annotations

import itertools
import math
import os
import time
from pathlib import Path

from .callbacks import Callback

_RUN_NUMBERS = itertools.count()


def _loggable(params: dict) -> dict[str, str | float | int | bool]:
    """The run's parameters as scalars: numbers and strings as they are, anything else as its repr."""
    return {
        name: "None" if value is None else value if isinstance(value, (str, bool, int, float)) else repr(value)
        for name, value in params.items()
    }


def _metrics(record: dict) -> dict[str, float]:
    """The numeric, finite entries of an epoch's record but the epoch itself, which is the step (a
    diverged loss is reported by the fit itself)."""
    return {
        key: float(value)
        for key, value in record.items()
        if key != "epoch" and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    }


class MLflowLogger(Callback):
    """Log each fit as an MLflow run: the parameters at the start, the epoch records as metrics
    (step = epoch), the run ended when the fit ends.

    run_name: the run's name (default: the estimator's class). With an active run (e.g. inside
    `with mlflow.start_run():`), each fit is a nested run under it. The tracking URI and the
    experiment are MLflow's own settings (mlflow.set_tracking_uri, MLFLOW_TRACKING_URI; by
    default MLflow 3 writes to ./mlflow.db, which needs SQLAlchemy and Alembic: `pip install
    "ssmts[logging]"` brings them). A fit that raises ends its run as FAILED (KILLED when
    interrupted), the exception propagating as before.
    """

    def __init__(self, run_name: str | None = None):
        if run_name is not None and not isinstance(run_name, str):
            raise TypeError(f"MLflowLogger: run_name must be a string or None, got {type(run_name).__name__}")
        self.run_name = run_name
        self._run = None

    def on_fit_start(self, trainer) -> None:
        import mlflow

        self._run = mlflow.start_run(
            run_name=self.run_name or trainer.description, nested=mlflow.active_run() is not None
        )
        mlflow.log_params(_loggable(trainer.run_params))

    def on_epoch_end(self, trainer, record: dict) -> None:
        import mlflow

        mlflow.log_metrics(_metrics(record), step=trainer.epochs_done, run_id=self._run.info.run_id)

    def on_fit_end(self, trainer) -> None:
        import mlflow

        if self._run is not None:
            error = trainer.error
            status = "FINISHED" if error is None else "KILLED" if isinstance(error, KeyboardInterrupt) else "FAILED"
            mlflow.end_run(status=status)
            self._run = None

    def __getstate__(self):
        return {**self.__dict__, "_run": None}  # a live run does not travel with a pickled estimator


class TensorBoardLogger(Callback):
    """Write each fit as a TensorBoard run under `log_dir`: scalars per epoch (step = epoch) and
    the parameters as text. Every fit gets a subdirectory of its own, named by the estimator,
    the time and a counter, so the runs of a grid search sit side by side in TensorBoard."""

    def __init__(self, log_dir: str | os.PathLike = "runs"):
        if not isinstance(log_dir, (str, os.PathLike)) or not str(log_dir):
            raise TypeError(f"TensorBoardLogger: log_dir must be a non-empty path, got {log_dir!r:.80}")
        if Path(log_dir).exists() and not Path(log_dir).is_dir():
            raise ValueError(f"TensorBoardLogger: log_dir {str(log_dir)!r} exists and is not a directory")
        self.log_dir = log_dir
        self._writer = None
        self.run_dir: Path | None = None

    def on_fit_start(self, trainer) -> None:
        from torch.utils.tensorboard import SummaryWriter

        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.run_dir = Path(self.log_dir) / f"{trainer.description}-{stamp}-{os.getpid()}-{next(_RUN_NUMBERS)}"
        self._writer = SummaryWriter(log_dir=str(self.run_dir))
        table = "\n".join(f"| {name} | {value} |" for name, value in _loggable(trainer.run_params).items())
        self._writer.add_text("parameters", "| parameter | value |\n|---|---|\n" + table, global_step=0)

    def on_epoch_end(self, trainer, record: dict) -> None:
        for name, value in _metrics(record).items():
            self._writer.add_scalar(name, value, global_step=trainer.epochs_done)

    def on_fit_end(self, trainer) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __getstate__(self):
        return {**self.__dict__, "_writer": None}


__all__ = ["MLflowLogger", "TensorBoardLogger"]
