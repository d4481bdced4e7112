"""The one fit path of ssmts: every face (scikit-learn, sktime) and the task runner call `fit_model`.

    result = fit_model(lambda: SequenceHead(backbone, 10), data, loss, TrainerConfig(max_epochs=5), seed=0)
    result.model, result.history, result.state          # state: resume=result.state continues it

It seeds, builds the network (or reuses one), holds out a validation split when asked,
trains with the shared Trainer and its callbacks, and returns what is needed to continue
(optimizer, scheduler, shuffling RNG, history) as an explicit value. Nothing of the Trainer
leaks out.
"""

from __future__ import annotations

import copy
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import torch
from torch import nn

from ..nn.resampling import scaled_delta
from .callbacks import Callback, EarlyStopping
from .params import TrainerConfig
from .trainer import SequenceData, Trainer, seed_from


@dataclass
class FitResult:
    """model: the trained network (eval mode); history: one record per epoch of its whole life;
    state: Trainer.state_dict() without the model (CPU), to pass as `resume` to a later fit_model."""

    model: nn.Module
    history: list[dict]
    state: dict = field(repr=False)


def holdout_indices(n: int, fraction: float, seed: int, stratify=None) -> tuple[np.ndarray, np.ndarray]:
    """(kept, held out) indices of a seeded random hold-out of `fraction` of n samples, stratified
    by `stratify` where every class allows it."""
    from sklearn.model_selection import train_test_split  # only fits with a hold-out need scikit-learn

    index = np.arange(n)
    try:
        return tuple(train_test_split(index, test_size=fraction, random_state=seed, stratify=stratify))
    except ValueError:  # a class too small to stratify: split without it
        return tuple(train_test_split(index, test_size=fraction, random_state=seed))


def holdout_split(data: SequenceData, fraction: float, seed: int, stratify=None) -> tuple[SequenceData, SequenceData]:
    """A seeded random (stratified where every class allows it) hold-out of `fraction` of `data`."""
    train, val = holdout_indices(len(data), fraction, seed, stratify)
    return data.take(torch.from_numpy(train)), data.take(torch.from_numpy(val))


def fit_model(
    network: nn.Module | Callable[[], nn.Module],
    data: SequenceData,
    loss_fn: Callable,
    config: TrainerConfig,
    *,
    seed: int,
    score_fn: Callable | None = None,
    validation: SequenceData | float | None = None,
    stratify=None,
    early_stopping: EarlyStopping | None = None,
    callbacks: Iterable[Callback] = (),
    resume: dict | None = None,
    history: list[dict] | None = None,
    epochs: int | None = None,
    checkpoint: str | Path | None = None,
    resume_checkpoint: bool = False,
    delta_factor: float = 1.0,
    description: str = "training",
    run_params: dict | None = None,
) -> FitResult:
    """Train `network` (a module, or a factory called under the seed) on `data`.

    validation: held-out SequenceData, or a fraction of `data` to hold out (stratified by
    `stratify` when given), or None. early_stopping: an EarlyStopping callback (it needs
    no validation data: it then monitors the training loss). resume: the `state` of an
    earlier FitResult of the same network: the optimizer, shuffling RNG and history carry
    on, with a new schedule of `epochs` (a warm start). history: without `resume`, the epochs the
    network was trained for before (a loaded model, whose file keeps no optimizer state): the run's
    epochs are numbered on from them, for the callbacks as in the returned history. checkpoint /
    resume_checkpoint: write the run's checkpoint after every epoch / continue the run from it. delta_factor:
    every Delta is multiplied by it while training (data at another rate than the model's).
    run_params: what loggers record as the run's parameters (a face passes its get_params()).
    With config.distributed, every process of the group calls fit_model alike (same data,
    same arguments) and the Trainer runs DistributedDataParallel; rank 0's seed is used.
    Inside a Dask worker torch uses the worker's threads only.
    """
    if config.distributed:
        seed = _shared_seed(seed)
    with torch.random.fork_rng(devices=[]), torch_threads(worker_threads()):
        torch.manual_seed(seed)
        model = network if isinstance(network, nn.Module) else network()
        if isinstance(validation, float):
            train, val = holdout_split(data, validation, seed, stratify)
        else:
            train, val = data, validation
        extra = [early_stopping] if early_stopping is not None else []
        # The seed drawn by the face also orders the mini-batches.
        trainer = Trainer(
            model,
            loss_fn,
            config,
            score_fn=score_fn,
            callbacks=[*callbacks, *extra],
            description=description,
            random_state=int(seed),
            run_params=run_params,
        )
        if resume is not None:
            trainer.load_state_dict(resume, continue_run=False)
        elif history:
            trainer.history, trainer.epochs_done = [dict(r) for r in history], len(history)
        with scaled_delta(model, delta_factor):
            trainer.fit(train, val, epochs=epochs, checkpoint=checkpoint, resume=resume_checkpoint)
    model.eval()
    return FitResult(model, trainer.history, trainer.state_dict(model=False))


def pickle_state(obj) -> dict:
    """obj.__dict__ for pickling, with a fitted network (model_) copied to the CPU: an estimator
    trained on a GPU must unpickle on a CPU-only machine."""
    state = obj.__dict__.copy()
    if "model_" in state:
        state["model_"] = copy.deepcopy(state["model_"]).cpu()
    return state


def start_process_group() -> None:
    """Join the torch.distributed group torchrun describes in the environment (gloo on CPU,
    NCCL with GPUs), unless one is running already."""
    import torch.distributed as dist

    if dist.is_initialized():
        return
    if "WORLD_SIZE" not in os.environ:
        raise RuntimeError(
            "distributed=True needs a torch.distributed process group: launch with torchrun, or call "
            "torch.distributed.init_process_group before fit"
        )
    dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")


def _shared_seed(seed: int) -> int:
    """Rank 0's seed on every rank: the ranks must shuffle alike and start from the same weights."""
    import torch.distributed as dist

    start_process_group()
    box = [int(seed)]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def worker_threads() -> int | None:
    """The thread count of the Dask worker this runs in (None outside one), so that torch uses
    the worker's share of the machine instead of every core in every worker."""
    if "distributed" not in sys.modules:
        return None
    try:
        from distributed import get_worker

        return int(get_worker().state.nthreads)
    except (ImportError, ValueError, AttributeError):
        return None


@contextmanager
def torch_threads(n: int | None):
    """torch's intra-op threads set to n inside the block (unchanged when n is None)."""
    if n is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


__all__ = [
    "FitResult",
    "fit_model",
    "holdout_split",
    "pickle_state",
    "seed_from",
    "start_process_group",
    "worker_threads",
]
