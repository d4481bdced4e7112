"""Callbacks of the Trainer: each sees every epoch's record and can stop the run.

    class PrintLoss(Callback):
        def on_epoch_end(self, trainer, record):
            print(record["epoch"], record["train_loss"])

    Trainer(model, loss, callbacks=[PrintLoss(), EarlyStopping(patience=5)])

A record is the dict appended to ``trainer.history``: epoch, train_loss, val_loss and
val_score (with validation data), lr, seconds. ``on_epoch_end`` returning True (or raising
an exception) stops the run after that epoch. Early stopping, checkpointing and the
progress bar are callbacks of the same kind. A callback must be picklable (estimators
holding it are pickled and cloned) and reset what it tracks in ``on_fit_start``.
"""

from __future__ import annotations

import copy
import math
import sys
from pathlib import Path


class Callback:
    """Hooks called by Trainer.fit; override the ones you need."""

    def on_fit_start(self, trainer) -> None:
        """Before the first epoch of a fit (also of a resumed one)."""

    def on_epoch_end(self, trainer, record: dict) -> bool | None:
        """After each epoch, with its record. Return True to stop training."""
        return None

    def on_fit_end(self, trainer) -> None:
        """After the last epoch, also when a callback stopped the run or the run raised (then
        `trainer.error` holds the exception, which propagates after the callbacks)."""

    def state_dict(self) -> dict | None:
        """What a checkpoint keeps of this callback, for a resumed run to go on as the uninterrupted
        one would (tensors, numbers, strings, None, lists and dicts of them); None: nothing."""
        return None

    def load_state_dict(self, state: dict) -> None:
        """Restore state_dict() in a resumed run, after on_fit_start."""

    def finished(self) -> bool:
        """Whether this callback had already stopped the run it watches (a resumed run then trains no
        further epoch)."""
        return False


class EarlyStopping(Callback):
    """Stop after `patience` epochs without an improvement of more than `tol` in the monitored
    metric, and (restore_best) put back the weights of the best epoch at the end.

    The metric is the validation score when there is one, else minus the validation loss,
    else minus the training loss (larger is better). patience=None never stops early but
    still restores the best epoch's weights (the task runner's "evaluate the best epoch").
    from_start: the weights the run starts from compete too (scored on the validation data
    before the first epoch, best_epoch then the run's first epoch minus one): for a network
    that starts from a solution worth keeping, the run can only end at or above it.
    """

    def __init__(
        self, patience: int | None = 10, tol: float = 1e-4, restore_best: bool = True, from_start: bool = False
    ):
        if patience is not None and (isinstance(patience, bool) or not isinstance(patience, int) or patience < 1):
            raise ValueError(f"patience must be an int >= 1 or None, got {patience!r}")
        if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol >= 0):
            raise ValueError(f"tol must be a finite number >= 0, got {tol!r}")
        self.patience, self.tol, self.restore_best = patience, float(tol), bool(restore_best)
        self.from_start = bool(from_start)

    @staticmethod
    def metric(record: dict) -> float:
        if "val_score" in record:
            return record["val_score"]
        if "val_loss" in record:
            return -record["val_loss"]
        return -record["train_loss"]

    def on_fit_start(self, trainer) -> None:
        self.best, self.best_epoch, self.best_state, self.stale = -math.inf, None, None, 0
        if self.from_start:
            if trainer.validation is None:
                raise ValueError(
                    "EarlyStopping(from_start=True) scores the start on validation data, but the run has none"
                )
            val_loss, val_score = trainer.evaluate(trainer.validation)
            start = {"val_loss": val_loss} if val_score is None else {"val_loss": val_loss, "val_score": val_score}
            self.best, self.best_epoch = self.metric(start), trainer.epochs_done
            if self.restore_best:
                self.best_state = copy.deepcopy(trainer.model.state_dict())

    def on_epoch_end(self, trainer, record: dict) -> bool:
        value = self.metric(record)
        if value > self.best + self.tol:
            self.best, self.best_epoch, self.stale = value, record["epoch"], 0
            if self.restore_best:
                self.best_state = copy.deepcopy(trainer.model.state_dict())
            return False
        self.stale += 1
        return self.patience is not None and self.stale >= self.patience

    def on_fit_end(self, trainer) -> None:
        if self.restore_best and self.best_state is not None:
            trainer.model.load_state_dict(self.best_state)
        self.best_state = None  # do not keep a copy of the weights in a fitted estimator

    def state_dict(self) -> dict:
        # the best weights so far too: a resumed run must be able to end on an epoch before the resume
        best_state = None if self.best_state is None else {k: v.detach().cpu() for k, v in self.best_state.items()}
        return {"best": self.best, "best_epoch": self.best_epoch, "stale": self.stale, "best_state": best_state}

    def load_state_dict(self, state: dict) -> None:
        self.best, self.best_epoch, self.stale = float(state["best"]), state["best_epoch"], int(state["stale"])
        self.best_state = state["best_state"] if self.restore_best else None

    def finished(self) -> bool:
        return self.patience is not None and self.stale >= self.patience


class Checkpoint(Callback):
    """Write the trainer's checkpoint (model, optimizer, scheduler, RNG, history) after every
    epoch, atomically; Trainer.fit(resume=True) continues from it."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def on_epoch_end(self, trainer, record: dict) -> None:
        trainer.save_checkpoint(self.path)


class ProgressBar(Callback):
    """A tqdm bar over the epochs with the latest losses and validation score, its time per epoch and
    the time left; first a line with the run's plan (epochs, batches, steps, data, device)."""

    def __init__(self, description: str = "training"):
        self.description = description
        self._bar = None

    def on_fit_start(self, trainer) -> None:
        from tqdm.auto import tqdm

        if trainer.plan:
            tqdm.write(f"{self.description}: {trainer.plan}", file=sys.stderr)
        self._bar = tqdm(
            total=trainer.epochs_planned, initial=trainer.epochs_done, desc=self.description, unit="epoch", leave=True
        )

    def on_epoch_end(self, trainer, record: dict) -> None:
        self._bar.update(1)
        self._bar.set_postfix(
            {k: f"{v:.4g}" for k, v in record.items() if k in ("train_loss", "val_loss", "val_score")}
        )

    def on_fit_end(self, trainer) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __getstate__(self):
        return {**self.__dict__, "_bar": None}  # a live bar does not pickle


__all__ = ["Callback", "EarlyStopping", "Checkpoint", "ProgressBar"]
