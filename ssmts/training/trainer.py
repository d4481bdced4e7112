"""The shared training loop.

A model is any nn.Module called as model(x, mask) with
  x: (batch, channels, length) float or (batch, length) int64 tokens,
  mask: (batch, length) bool (True on real steps) or None,
and a loss is loss_fn(outputs, y, weight) -> scalar tensor.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch import nn

from ..nn.backbone import parameter_groups

OPTIMIZERS = ("adamw", "adam", "sgd")
SCHEDULERS = ("none", "cosine", "plateau")


def resolve_device(device: str | torch.device) -> torch.device:
    """'auto' -> cuda when available, else cpu; 'cuda' without a GPU is an error."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cpu", "cuda") and not str(device).startswith("cuda:"):
        raise ValueError(f"unknown device {device!r}; choose 'auto', 'cpu' or 'cuda'")
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but no CUDA device is available")
    return torch.device(device)


@dataclass
class SequenceData:
    """Tensors of one data set. x: (n, C, L) float32 or (n, L) int64; y: (n, ...) or None;
    mask: (n, L) bool or None; weight: (n,) float per-sample loss weights or None."""

    x: torch.Tensor
    y: torch.Tensor | None = None
    mask: torch.Tensor | None = None
    weight: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.x.shape[0]

    def take(self, index) -> "SequenceData":
        pick = lambda t: None if t is None else t[index]  # noqa: E731
        return SequenceData(self.x[index], pick(self.y), pick(self.mask), pick(self.weight))

    def to(self, device: torch.device) -> "SequenceData":
        move = lambda t: None if t is None else t.to(device, non_blocking=True)  # noqa: E731
        return SequenceData(move(self.x), move(self.y), move(self.mask), move(self.weight))


class Trainer:
    """Mini-batch training with AdamW and separate SSM learning rate, schedulers,
    early stopping on a validation set (restoring the best weights), gradient clipping,
    tqdm progress, checkpoints and resumption.

    score_fn(model_outputs, y) -> float is the validation score reported (and used for
    early stopping when given; otherwise the validation loss is used).

    Schedulers: "cosine" anneals over `total_steps` optimizer steps (default: the whole fit)
    after a linear warm-up of `warmup_steps`; "plateau" is ReduceLROnPlateau(plateau_factor,
    plateau_patience) on the validation metric (eSSM Appendix E lists both per task).
    """

    def __init__(
        self,
        model: nn.Module,
        loss_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor],
        *,
        optimizer: str = "adamw",
        lr: float = 3e-3,
        lr_ssm: float | None = 1e-3,
        weight_decay: float = 0.01,
        scheduler: str = "cosine",
        warmup_steps: int = 0,
        total_steps: int | None = None,
        plateau_factor: float = 0.5,
        plateau_patience: int = 5,
        max_epochs: int = 50,
        batch_size: int = 32,
        early_stopping: bool = False,
        n_iter_no_change: int = 10,
        tol: float = 1e-4,
        grad_clip: float | None = 1.0,
        device: str | torch.device = "auto",
        verbose: int = 0,
        random_state: int | None = None,
        score_fn: Callable[[torch.Tensor, torch.Tensor], float] | None = None,
        description: str = "training",
    ):
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {OPTIMIZERS}")
        if scheduler not in SCHEDULERS:
            raise ValueError(f"unknown scheduler {scheduler!r}; choose one of {SCHEDULERS}")
        for name, value in (("lr", lr), ("batch_size", batch_size), ("max_epochs", max_epochs)):
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        if lr_ssm is not None and not lr_ssm > 0:
            raise ValueError(f"lr_ssm must be > 0 or None, got {lr_ssm}")
        if weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
        if warmup_steps < 0 or (total_steps is not None and total_steps <= warmup_steps):
            raise ValueError(f"need 0 <= warmup_steps < total_steps, got {warmup_steps} and {total_steps}")
        if not 0.0 < plateau_factor < 1.0 or plateau_patience < 0:
            raise ValueError(f"need 0 < plateau_factor < 1 and plateau_patience >= 0, got {plateau_factor}, {plateau_patience}")
        self.warmup_steps, self.total_steps = int(warmup_steps), total_steps
        self.plateau_factor, self.plateau_patience = float(plateau_factor), int(plateau_patience)
        self._scheduler = None
        self._pending_scheduler_state = None
        self.device = resolve_device(device)
        self.model = model.to(self.device)
        self.loss_fn = loss_fn
        self.optimizer_name, self.lr, self.lr_ssm, self.weight_decay = optimizer, lr, lr_ssm, weight_decay
        self.scheduler_name, self.max_epochs, self.batch_size = scheduler, int(max_epochs), int(batch_size)
        self.early_stopping, self.n_iter_no_change, self.tol = bool(early_stopping), int(n_iter_no_change), float(tol)
        self.grad_clip, self.verbose, self.score_fn, self.description = grad_clip, verbose, score_fn, description
        seed = random_state if random_state is not None else int(np.random.SeedSequence().generate_state(1)[0])
        self.shuffle_generator = torch.Generator().manual_seed(int(seed))
        self.optimizer = self._make_optimizer()
        self.history: list[dict] = []
        self.epochs_done = 0

    # ------------------------------------------------------------ set-up
    def _make_optimizer(self) -> torch.optim.Optimizer:
        groups = parameter_groups(self.model, self.lr, self.lr_ssm, self.weight_decay)
        if self.optimizer_name == "adamw":
            return torch.optim.AdamW(groups, lr=self.lr)
        if self.optimizer_name == "adam":
            return torch.optim.Adam(groups, lr=self.lr)
        return torch.optim.SGD(groups, lr=self.lr, momentum=0.9)

    def _make_scheduler(self, epochs: int, steps_per_epoch: int):
        if self.scheduler_name == "cosine":
            total = self.total_steps or max(1, epochs * steps_per_epoch)
            warm = min(self.warmup_steps, total - 1)

            def factor(step: int) -> float:
                if step < warm:
                    return (step + 1) / warm
                progress = min(step - warm, total - warm) / max(1, total - warm)
                return 0.5 * (1.0 + math.cos(math.pi * progress))

            return torch.optim.lr_scheduler.LambdaLR(self.optimizer, factor)
        if self.scheduler_name == "plateau":
            return torch.optim.lr_scheduler.ReduceLROnPlateau(
                self.optimizer, factor=self.plateau_factor, patience=self.plateau_patience
            )
        return None

    # ------------------------------------------------------------ loop
    def fit(
        self,
        train: SequenceData,
        val: SequenceData | None = None,
        *,
        epochs: int | None = None,
        checkpoint: str | Path | None = None,
        resume: bool = False,
    ) -> list[dict]:
        """Train for `epochs` (default max_epochs) more epochs; returns the history (one dict per epoch)."""
        if len(train) == 0:
            raise ValueError("cannot train on an empty data set")
        if self.early_stopping and val is None:
            raise ValueError("early_stopping needs a validation set")
        epochs = self.max_epochs if epochs is None else int(epochs)
        start_epoch = 0
        if resume and checkpoint is not None and Path(checkpoint).exists():
            start_epoch = self.load_checkpoint(checkpoint)
        steps_per_epoch = math.ceil(len(train) / self.batch_size)
        restored_lrs = [group["lr"] for group in self.optimizer.param_groups]
        scheduler = self._make_scheduler(epochs, steps_per_epoch)
        if scheduler is not None and self._pending_scheduler_state is not None:
            scheduler.load_state_dict(self._pending_scheduler_state)  # resume where the schedule stood
            # A new LambdaLR sets every lr to its step-0 value; put back the checkpoint's.
            for group, lr in zip(self.optimizer.param_groups, restored_lrs):
                group["lr"] = lr
        self._scheduler, self._pending_scheduler_state = scheduler, None
        best_metric, best_state, stale = -math.inf, None, 0
        progress = self._progress(range(start_epoch, epochs))
        for epoch in progress:
            started = time.perf_counter()
            train_loss = self._train_epoch(train, scheduler if self.scheduler_name == "cosine" else None)
            record = {"epoch": self.epochs_done + 1, "train_loss": train_loss}
            if val is not None and len(val):
                val_loss, val_score = self.evaluate(val)
                record["val_loss"] = val_loss
                if val_score is not None:
                    record["val_score"] = val_score
                metric = val_score if val_score is not None else -val_loss
            else:
                metric = -train_loss
            if self.scheduler_name == "plateau":
                scheduler.step(-metric)
            record["lr"] = self.optimizer.param_groups[0]["lr"]
            record["seconds"] = time.perf_counter() - started
            self.history.append(record)
            self.epochs_done += 1
            if hasattr(progress, "set_postfix"):
                progress.set_postfix({k: f"{v:.4g}" for k, v in record.items() if k in ("train_loss", "val_loss", "val_score")})
            if checkpoint is not None:
                self.save_checkpoint(checkpoint, epoch + 1)
            if not math.isfinite(train_loss):
                raise FloatingPointError(f"training loss became {train_loss} at epoch {self.epochs_done}; lower lr")
            if metric > best_metric + self.tol:
                best_metric, stale = metric, 0
                if self.early_stopping:
                    best_state = copy.deepcopy(self.model.state_dict())
            else:
                stale += 1
                if self.early_stopping and stale >= self.n_iter_no_change:
                    break
        if self.early_stopping and best_state is not None:
            self.model.load_state_dict(best_state)
        return self.history

    def _progress(self, iterable):
        if not self.verbose:
            return iterable
        from tqdm.auto import tqdm

        return tqdm(iterable, desc=self.description, unit="epoch", leave=True)

    def _batches(self, data: SequenceData, shuffle: bool, batch_size: int | None = None):
        n = len(data)
        size = batch_size or self.batch_size
        order = torch.randperm(n, generator=self.shuffle_generator) if shuffle else torch.arange(n)
        for start in range(0, n, size):
            yield data.take(order[start : start + size]).to(self.device)

    def _train_epoch(self, data: SequenceData, scheduler) -> float:
        self.model.train()
        total, count = 0.0, 0
        for batch in self._batches(data, shuffle=True):
            outputs = self.model(batch.x, batch.mask)
            loss = self.loss_fn(outputs, batch.y, batch.weight)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if self.grad_clip:
                nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
            self.optimizer.step()
            if scheduler is not None:
                scheduler.step()
            total += float(loss.detach()) * len(batch)
            count += len(batch)
        return total / count

    @torch.no_grad()
    def evaluate(self, data: SequenceData) -> tuple[float, float | None]:
        """(mean loss, score or None) on `data`."""
        outputs = self.predict(data)
        y = data.y
        loss = float(self.loss_fn(outputs, y, data.weight))
        score = None if self.score_fn is None else float(self.score_fn(outputs, y))
        return loss, score

    @torch.no_grad()
    def predict(self, data: SequenceData, batch_size: int | None = None, forward: Callable | None = None) -> torch.Tensor:
        """Model outputs for all of `data`, concatenated on the CPU. forward(model, x, mask) overrides the call."""
        self.model.eval()
        call = forward or (lambda model, x, mask: model(x, mask))
        outs = [call(self.model, b.x, b.mask).cpu() for b in self._batches(data, False, batch_size or max(self.batch_size, 64))]
        return torch.cat(outs)

    # ------------------------------------------------------------ persistence
    def save_checkpoint(self, path: str | Path, epoch: int) -> None:
        """Model, optimizer, history and the epoch reached, written atomically."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        torch.save(
            {
                "epoch": epoch,
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "history": self.history,
                "epochs_done": self.epochs_done,
                "shuffle_generator": self.shuffle_generator.get_state(),
                "scheduler": None if self._scheduler is None else self._scheduler.state_dict(),
            },
            tmp,
        )
        tmp.replace(path)

    def load_checkpoint(self, path: str | Path) -> int:
        """Restore a checkpoint (onto this trainer's device); returns the epoch to continue from."""
        state = torch.load(path, map_location=self.device, weights_only=False)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.history = list(state["history"])
        self.epochs_done = int(state["epochs_done"])
        self.shuffle_generator.set_state(state["shuffle_generator"])
        self._pending_scheduler_state = state.get("scheduler")
        return int(state["epoch"])

    def optimizer_state_cpu(self) -> dict:
        """Optimizer state with tensors on the CPU, for pickling an estimator trained on a GPU."""
        return _to_cpu(self.optimizer.state_dict())


def _to_cpu(obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj
