"""The shared training loop.

A model is any nn.Module called as model(x, mask) with
  x: (batch, channels, length) float or (batch, length) int64 tokens,
  mask: (batch, length) bool (True on real steps) or None,
and a loss is loss_fn(outputs, y, weight) -> scalar tensor.

Settings come from TrainerConfig (declared once in ssmts.training.params); what happens
at the end of an epoch (early stopping, checkpoints, progress, user code) are callbacks.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import torch
from torch import nn

from .._files import replacing
from .._warnings import caller_stacklevel
from ..nn.backbone import parameter_groups
from ..nn.resampling import half_rate, scaled_delta
from .callbacks import Callback, Checkpoint, ProgressBar
from .flat import FlatAdam
from .parallel import (
    ShardWorkers,
    concatenate,
    normalizes_by_batch,
    shard_bounds,
    shard_count,
    sharded_gradients,
    shards_of,
)
from .params import TrainerConfig, resolve_device


def seed_from(random_state) -> int:
    """An int seed from None / int / np.random.RandomState (scikit-learn's random_state forms)."""
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1)[0])
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return int(random_state) % (2**32)  # derived seeds (seed + k); the estimators refuse such a random_state
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    raise ValueError(f"random_state must be None, an int or a numpy RandomState, got {random_state!r}")


class LazyRows:
    """Rows of an array that stays on disk (a numpy memmap, e.g. np.load(path, mmap_mode="r")) until
    a batch is taken: indexing gives another LazyRows, `materialize` reads just those rows as a
    float32 tensor, or as float64 for `transform` (e.g. the training scaling, formed in float64) to
    apply to them.

    array: (n, ...) array-like; index: the rows in use (None: all); transform(tensor) -> tensor.
    """

    def __init__(self, array, index: np.ndarray | None = None, transform: Callable | None = None):
        self.array, self.index, self.transform = array, index, transform

    @property
    def shape(self) -> tuple:
        n = len(self.array) if self.index is None else len(self.index)
        return (n, *self.array.shape[1:])

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index) -> "LazyRows":
        rows = np.arange(len(self.array)) if self.index is None else self.index
        picked = rows[np.asarray(index.cpu() if isinstance(index, torch.Tensor) else index)]
        return LazyRows(self.array, np.atleast_1d(picked), self.transform)

    def materialize(self) -> torch.Tensor:
        rows = slice(None) if self.index is None else self.index
        order = None
        if self.index is not None and len(self.index) > 1 and np.any(np.diff(self.index) < 0):
            # read in file order (much faster on disk), then put back in the requested order
            order = np.argsort(self.index, kind="stable")
            rows = self.index[order]
        dtype = np.float32 if self.transform is None else np.float64
        x = torch.from_numpy(np.array(self.array[rows], dtype=dtype))  # a copy: the map may be read-only
        if order is not None:
            x = x[torch.from_numpy(np.argsort(order, kind="stable"))]
        return x if self.transform is None else self.transform(x)


@dataclass
class SequenceData:
    """Tensors of one data set. x: (n, C, L) float32 or (n, L) int64, or LazyRows of such an
    array on disk (read batch by batch); y: (n, ...) or None; mask: (n, L) bool or None;
    weight: (n,) float per-sample loss weights or None."""

    x: torch.Tensor
    y: torch.Tensor | None = None
    mask: torch.Tensor | None = None
    weight: torch.Tensor | None = None
    # Cut every batch at its last real step, and batch series of similar length together: for
    # models whose outputs do not depend on padding at the end (SSMs in both directions, causal
    # LinearCDEs) and targets per sample. Unequal lengths then cost what their real steps cost.
    crop_padding: bool = False

    def __len__(self) -> int:
        return self.x.shape[0]

    def take(self, index) -> "SequenceData":
        pick = lambda t: None if t is None else t[index]  # noqa: E731
        return SequenceData(self.x[index], pick(self.y), pick(self.mask), pick(self.weight), self.crop_padding)

    def lengths(self) -> torch.Tensor | None:
        """(n,) index of the last real step + 1 of every sample, or None without a mask."""
        if self.mask is None:
            return None
        steps = torch.arange(1, self.mask.shape[-1] + 1)
        return torch.where(self.mask, steps, torch.zeros_like(steps)).amax(-1)

    def cropped(self) -> "SequenceData":
        """This batch cut at the last real step of its longest sample (crop_padding)."""
        if not self.crop_padding or self.mask is None:
            return self
        end = max(1, int(self.lengths().max()))
        if end == self.mask.shape[-1]:
            return self
        return SequenceData(self.x[..., :end], self.y, self.mask[:, :end], self.weight, True)

    def to(self, device: torch.device | str) -> "SequenceData":
        """On `device`, with lazy rows read from disk."""
        to_gpu = torch.device(device).type == "cuda"

        def move(t):
            if isinstance(t, LazyRows):
                t = t.materialize()
            if t is None:
                return None
            if to_gpu and t.device.type == "cpu":
                # From page-locked memory the copy runs beside the host; from pageable memory the
                # driver may first wait for the device's queue to drain, a synchronization per batch.
                t = t.pin_memory()
            return t.to(device, non_blocking=True)

        return SequenceData(move(self.x), move(self.y), move(self.mask), move(self.weight), self.crop_padding)


# Shuffled batches with crop_padding are formed inside pools of this many batches sorted by
# length: batches of similar lengths, still a random order of samples and of batches.
BUCKET_POOL = 16


def batch_order(
    data: SequenceData, batch_size: int, shuffle_generator: torch.Generator | None, by_length: bool = True
) -> list[torch.Tensor]:
    """Sample indices of each mini-batch: in order, or shuffled with the generator. With
    crop_padding, a mask and `by_length`, samples of similar length share batches (sorted within
    pools of BUCKET_POOL batches when shuffled, sorted outright otherwise)."""
    n = len(data)
    lengths = data.lengths() if data.crop_padding and by_length else None
    if shuffle_generator is None:
        order = torch.arange(n) if lengths is None else torch.argsort(lengths, stable=True)
        return list(order.split(batch_size))
    order = torch.randperm(n, generator=shuffle_generator)
    if lengths is None:
        return list(order.split(batch_size))
    groups = []
    for pool in order.split(batch_size * BUCKET_POOL):
        pool = pool[torch.argsort(lengths[pool], stable=True)]
        groups.extend(pool.split(batch_size))
    return [groups[i] for i in torch.randperm(len(groups), generator=shuffle_generator).tolist()]


def _half_rate_batch(batch: SequenceData) -> SequenceData:
    """The batch at half its rate: x band-limited to ceil(L / 2) steps, the mask's every other step."""
    mask = None if batch.mask is None else batch.mask[:, ::2]
    return SequenceData(half_rate(batch.x), batch.y, mask, batch.weight, batch.crop_padding)


def batches(
    data: SequenceData,
    batch_size: int,
    *,
    shuffle_generator: torch.Generator | None = None,
    device: torch.device | None = None,
    order: list[torch.Tensor] | None = None,
):
    """Mini-batches of `data` (shuffled with the generator when one is given; cut at their last
    real step with crop_padding), moved to `device`. order: batch_order's result, if already made."""
    for index in order if order is not None else batch_order(data, batch_size, shuffle_generator):
        batch = data.take(index).cropped()
        yield batch if device is None else batch.to(device)


def on_device(model: nn.Module, device: torch.device) -> nn.Module:
    """model on `device`, moved only when it is elsewhere: Module.to walks every submodule, about a
    millisecond for a small network, which adds up over per-step or per-origin calls."""
    parameter = next(model.parameters(), None)
    return model if parameter is None or parameter.device == device else model.to(device)


def _float32(outputs):
    """Outputs of an autocast forward back in float32 for the loss (tuples element by element)."""
    if isinstance(outputs, torch.Tensor):
        return outputs.float() if outputs.is_floating_point() and outputs.dtype != torch.float32 else outputs
    if isinstance(outputs, (tuple, list)):
        return type(outputs)(_float32(o) for o in outputs)
    return outputs


@torch.no_grad()
def predict_batches(
    model: nn.Module,
    data: SequenceData,
    batch_size: int,
    device: torch.device | str,
    forward: Callable | None = None,
    *,
    workers: ShardWorkers | None = None,
    progress: Callable[[int], object] | None = None,
) -> torch.Tensor:
    """The one batched prediction: model outputs for all of `data`, in eval mode, concatenated on the CPU.

    forward(model, x, mask) overrides model(x, mask) (e.g. per-step features of a head); it must give
    a sample's output from that sample alone, and may run on several threads at once.
    workers: the ShardWorkers of a running fit (by default a CPU prediction opens its own).
    progress: called with each batch's number of samples once it is done (a progress bar's update).
    """
    if len(data) == 0:
        raise ValueError("no samples to predict")
    device = resolve_device(device)
    on_device(model, device).eval()
    call = forward or (lambda m, x, mask: m(x, mask))
    order = batch_order(data, int(batch_size), None)
    # Written into one preallocated tensor rather than concatenated from a list: a list of
    # per-batch outputs sprinkled over the heap between freed batch buffers keeps the heap from
    # shrinking, so memory would grow with the number of rows (a memory map is read for less).
    out, start = None, 0
    # On a CPU, every batch runs in shards on workers of one thread each that follow the cores other
    # processes leave idle, as in training (ssmts.training.parallel); a sample's output does not
    # depend on its batch, so neither shards nor workers change the result.
    own_workers = workers is None and device.type == "cpu"
    if own_workers:
        workers = ShardWorkers(shard_count(torch.get_num_threads()))

    def forward(part: SequenceData) -> torch.Tensor:
        with torch.no_grad():
            return call(model, part.x, part.mask)

    try:
        for batch in batches(data, int(batch_size), device=device, order=order):
            if workers is None:
                result = forward(batch)
            else:
                result = concatenate(workers.map(forward, _split(batch, workers.shards)))
            if out is None:
                out = torch.empty((len(data), *result.shape[1:]), dtype=result.dtype)
            elif result.shape[1:] != out.shape[1:]:
                raise RuntimeError(
                    f"batch outputs differ in shape: {tuple(result.shape[1:])} after {tuple(out.shape[1:])}"
                )
            out[start : start + len(result)] = result.cpu()
            start += len(result)
            if progress is not None:
                progress(len(result))
    finally:
        if own_workers:
            workers.close()
    if data.crop_padding and data.mask is not None:  # batched by length: back to the samples' order
        out = out[torch.argsort(torch.cat(order))]
    return out


def _split(batch: SequenceData, shards: int) -> list[SequenceData]:
    """A batch in up to `shards` contiguous parts, as many as its size allows (parallel.shards_of)."""
    bounds = shard_bounds(len(batch), shards_of(len(batch), batch.x.shape[-1], shards))
    return [batch.take(torch.arange(start, stop)) for start, stop in bounds]


def steps_per_epoch(n_train: int, batch_size: int) -> int:
    """Optimizer steps of one pass over n_train samples (the last batch may be short)."""
    return math.ceil(n_train / batch_size)


def planned_epochs(n_train: int, config: TrainerConfig) -> int:
    """Epochs of a run on n_train samples: max_epochs, raised so that the run takes at least
    min_steps optimizer steps (small data sets otherwise get a handful of steps) and lowered so
    that it takes at most max_steps (large ones too many), but never below one epoch."""
    per_epoch = steps_per_epoch(n_train, config.batch_size)
    epochs = max(config.max_epochs, math.ceil(config.min_steps / per_epoch))
    if config.max_steps is not None:
        epochs = min(epochs, max(1, config.max_steps // per_epoch))
    return epochs


class Trainer:
    """Mini-batch training with AdamW and a separate SSM learning rate, schedulers, gradient
    clipping and callbacks (early stopping, checkpoints, progress, your own).

    Trainer(model, loss_fn, config=None, *, score_fn=None, callbacks=(), description="training", **settings)

    settings (or config) are TrainerConfig's parameters: OptimizerParams and ScheduleParams of
    ssmts.training.params, where each is declared with its default and doc.
    score_fn(outputs, y) -> float is the validation score reported in each record (and what
    EarlyStopping monitors; otherwise the validation loss).

    Schedulers: "cosine" anneals over `total_steps` optimizer steps (default: the whole run)
    after a linear warm-up of `warmup_steps`; "plateau" is ReduceLROnPlateau(plateau_factor,
    plateau_patience) on the validation metric (eSSM Appendix E lists both per task).

    State: `state_dict()` / `load_state_dict()` carry model, optimizer, scheduler, shuffling
    RNG and history; `fit(resume=True, checkpoint=path)` continues a run from its checkpoint.
    """

    def __init__(
        self,
        model: nn.Module,
        loss_fn: Callable,
        config: TrainerConfig | None = None,
        *,
        score_fn: Callable[[torch.Tensor, torch.Tensor], float] | None = None,
        callbacks: Iterable[Callback] = (),
        description: str = "training",
        run_params: dict | None = None,
        **settings,
    ):
        if config is None:
            config = TrainerConfig(**settings)
        elif settings:
            config = TrainerConfig(**{**config.param_values(), **settings})
        config.validate_params()
        self.config = config
        self.rank, self.world_size = _process_group(config.distributed)
        self.device = resolve_device(config.device)
        if self.world_size > 1 and self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", self.rank)) % torch.cuda.device_count())
        self.model = model.to(self.device)
        self._forward_model = self.model
        if config.distributed:
            from torch.nn.parallel import DistributedDataParallel

            # Broadcasts rank 0's weights, then averages the gradients of every step over the ranks.
            self._forward_model = DistributedDataParallel(
                self.model, device_ids=None if self.device.type == "cpu" else [self.device]
            )
        if config.compile:
            self._forward_model = torch.compile(self._forward_model)
        # float16 gradients underflow: the loss is scaled up, and steps with inf/NaN gradients are skipped
        self._scaler = torch.amp.GradScaler(self.device.type) if config.precision == "16-mixed" else None
        self.loss_fn, self.score_fn, self.description = loss_fn, score_fn, description
        # What the run is, for loggers: the face's parameters when it passes them, else the training settings.
        self.run_params = dict(run_params) if run_params is not None else config.param_values()
        self.callbacks = list(callbacks)
        if config.verbose and self.is_main:
            self.callbacks.append(ProgressBar(description))
        self.shuffle_generator = torch.Generator().manual_seed(seed_from(config.random_state))
        self.optimizer = self._make_optimizer()
        self.history: list[dict] = []
        self.epochs_done = 0  # over the model's whole life (warm starts included)
        self.run_epoch = 0  # within the current run (its schedule); > 0 after resuming a checkpoint
        self.epochs_planned = 0
        self._scheduler = None
        self._scheduler_state = None
        self._workers: ShardWorkers | None = None  # during a CPU fit: shards of every batch (training.parallel)
        self._train_shards = 1
        self.plan = ""  # the current run, in words (fit sets it)
        self.validation: SequenceData | None = None  # the current run's validation data (fit sets it)
        self.error: BaseException | None = None  # what stopped the current run, if it raised (fit sets it)
        self._nonfinite_inputs: str | None = None  # an epoch's non-finite loss traced to its inputs (_train_epoch)
        self._callback_states: dict | None = None  # of the checkpoint a run resumes from, until fit restores them

    @property
    def is_main(self) -> bool:
        """Rank 0 (or the only process): the one that writes checkpoints and shows progress."""
        return self.rank == 0

    # ------------------------------------------------------------ set-up
    def _make_optimizer(self) -> torch.optim.Optimizer:
        c = self.config
        groups = parameter_groups(self.model, c.lr, c.lr_ssm, c.weight_decay)
        if c.optimizer in ("adam", "adamw") and self.device.type == "cpu":
            # the same steps, bit for bit, one buffer a group (a forecaster's fit: about 0.88x the time)
            decoupled = c.optimizer == "adamw"
            return FlatAdam(groups, lr=c.lr, weight_decay=1e-2 if decoupled else 0.0, decoupled_weight_decay=decoupled)
        if c.optimizer == "adamw":
            return torch.optim.AdamW(groups, lr=c.lr)
        if c.optimizer == "adam":
            return torch.optim.Adam(groups, lr=c.lr)
        return torch.optim.SGD(groups, lr=c.lr, momentum=0.9)

    def _make_scheduler(self, epochs: int, steps_per_epoch: int):
        c = self.config
        if c.scheduler == "cosine":
            total = c.total_steps or max(1, epochs * steps_per_epoch)
            warm = min(c.warmup_steps, total - 1)

            def factor(step: int) -> float:
                if step < warm:
                    return (step + 1) / warm
                progress = min(step - warm, total - warm) / max(1, total - warm)
                return 0.5 * (1.0 + math.cos(math.pi * progress))

            return torch.optim.lr_scheduler.LambdaLR(self.optimizer, factor)
        if c.scheduler == "plateau":
            return torch.optim.lr_scheduler.ReduceLROnPlateau(
                self.optimizer, factor=c.plateau_factor, patience=c.plateau_patience
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
        """Run a training run of `epochs` epochs (default: planned_epochs, from max_epochs and
        min_steps); returns the history.

        A fresh run starts at epoch 0 of its schedule. resume=True with a `checkpoint` that
        exists continues that run where it stopped (the rest of its `epochs`). With a
        checkpoint path, the checkpoint is rewritten after every epoch.
        """
        if len(train) == 0:
            raise ValueError("cannot train on an empty data set")
        epochs = self.planned_epochs(len(train)) if epochs is None else int(epochs)
        if epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {epochs}")
        if resume and checkpoint is not None and Path(checkpoint).exists():
            self.load_checkpoint(checkpoint)
        callbacks = list(self.callbacks) + ([Checkpoint(checkpoint)] if checkpoint is not None else [])
        restored_lrs = [group["lr"] for group in self.optimizer.param_groups]
        scheduler = self._make_scheduler(epochs, steps_per_epoch(len(train), self.config.batch_size))
        if scheduler is not None and self._scheduler_state is not None:
            scheduler.load_state_dict(self._scheduler_state)  # continue the run's schedule
            # A new LambdaLR sets every lr to its step-0 value; put back the checkpoint's.
            for group, lr in zip(self.optimizer.param_groups, restored_lrs):
                group["lr"] = lr
        self._scheduler, self._scheduler_state = scheduler, None
        self.epochs_planned = self.epochs_done + max(0, epochs - self.run_epoch)
        self.plan = self._describe_plan(train, epochs - self.run_epoch, val is not None and len(val) > 0)
        self.validation = val if val is not None and len(val) else None  # what callbacks may score
        self.error = None
        for callback in callbacks:
            callback.on_fit_start(self)
        self._restore_callbacks()
        self._workers = self._shard_workers()
        try:
            while self.run_epoch < epochs and not any(callback.finished() for callback in callbacks):
                record = self._run_epoch(train, val, scheduler)
                if any([bool(callback.on_epoch_end(self, record)) for callback in callbacks]):
                    break
        except BaseException as error:  # an interrupt too: the callbacks below must know the run failed
            self.error = error
            raise
        finally:
            if self._workers is not None:
                self._workers.close()
                self._workers = None
            for callback in callbacks:
                callback.on_fit_end(self)
        return self.history

    def _runs_in_shards(self) -> bool:
        """Whether this run splits its batches into shards on workers (ssmts.training.parallel): a CPU run
        that is not distributed, compiled or float16 (those keep torch's own parallelism)."""
        c = self.config
        return self.device.type == "cpu" and self.world_size == 1 and not c.compile and self._scaler is None

    def _shard_workers(self) -> ShardWorkers | None:
        """The workers of a CPU fit: every batch in up to shard_count shards, each on one thread, so that
        the result does not depend on how many threads run (ssmts.training.parallel)."""
        if not self._runs_in_shards():
            return None
        self._train_shards = shard_count(torch.get_num_threads(), self.model)
        return ShardWorkers(shard_count(torch.get_num_threads()))  # predictions (validation) always run in shards

    def _describe_plan(self, train: SequenceData, epochs: int, validated: bool) -> str:
        """What the run will do, in the units its cost grows with (shown by the progress bar)."""
        per_epoch = steps_per_epoch(len(train), self.config.batch_size)
        where = f"{self.device}"
        if self._runs_in_shards():
            shards = shard_count(torch.get_num_threads(), self.model)
            where += f", every batch in {shards} shards on up to {shards} threads" if shards > 1 else ", 1 thread"
        return (
            f"{epochs} epochs x {per_epoch} batches of up to {self.config.batch_size} = {epochs * per_epoch} steps "
            f"on {len(train)} series of {train.x.shape[-1]} steps"
            + (" (validated each epoch; early stopping may end it sooner)" if validated else "")
            + f", on {where}"
        )

    def planned_epochs(self, n_train: int) -> int:
        """Epochs of a run on n_train samples (see planned_epochs)."""
        return planned_epochs(n_train, self.config)

    def _run_epoch(self, train: SequenceData, val: SequenceData | None, scheduler) -> dict:
        started = time.perf_counter()
        lr = self.optimizer.param_groups[0]["lr"]  # the epoch's first step's: a cosine schedule moves it every step
        train_loss = self._train_epoch(train, scheduler if self.config.scheduler == "cosine" else None)
        record = {"epoch": self.epochs_done + 1, "train_loss": train_loss}
        metric = -train_loss
        if val is not None and len(val):
            val_loss, val_score = self.evaluate(val)
            record["val_loss"] = val_loss
            if val_score is not None:
                record["val_score"] = val_score
            metric = val_score if val_score is not None else -val_loss
        if self.config.scheduler == "plateau":
            scheduler.step(-metric)
        record["lr"] = lr
        record["seconds"] = time.perf_counter() - started
        self.history.append(record)
        self.epochs_done += 1
        self.run_epoch += 1
        if not math.isfinite(train_loss):
            if self._nonfinite_inputs:
                raise FloatingPointError(
                    f"the training loss became {train_loss} at epoch {self.epochs_done} because the input data "
                    f"hold NaN or infinity: {self._nonfinite_inputs}. The model did not diverge (a lower "
                    "learning rate will not help): replace or drop those rows and fit again"
                )
            if self.config.precision == "16-mixed":
                raise FloatingPointError(
                    f"the training loss became {train_loss} at epoch {self.epochs_done} under precision='16-mixed': "
                    "float16 holds magnitudes up to 65504 only, and inputs or activations beyond overflow; use "
                    "precision='bf16-mixed' (float32's range) or '32', or scale the inputs (normalize)"
                )
            raise FloatingPointError(
                f"the training loss became {train_loss} at epoch {self.epochs_done}: the model diverged "
                "(try a lower lr or lr_ssm, or check the inputs for extreme values)"
            )
        return record

    def _train_epoch(self, data: SequenceData, scheduler) -> float:
        self.model.train()
        # Batches of similar lengths would give batch normalization statistics that depend on the
        # length, which the running statistics used at prediction average away: a model that
        # normalizes by the batch trains on batches of random lengths (each still cropped).
        by_length = not any(normalizes_by_batch(m) for m in self.model.modules())
        order = batch_order(data, self.config.batch_size, self.shuffle_generator, by_length)
        # Each step's loss stays on the device until the epoch ends: reading it every step (float(loss))
        # would make the host wait for the GPU to finish the step before it could queue the next one.
        losses = torch.empty(len(order), dtype=torch.float64, device=self.device)
        for number, batch in enumerate(batches(data, self.config.batch_size, order=order)):
            if self.world_size > 1:
                batch, weight, _ = _shard(batch, self.rank, self.world_size)
            batch = batch.to(self.device)
            at_half_rate = self._at_half_rate()
            if at_half_rate:
                batch = _half_rate_batch(batch)
            self.optimizer.zero_grad(set_to_none=True)
            scale = (lambda value: value) if self._scaler is None else self._scaler.scale
            with scaled_delta(self.model, 2.0) if at_half_rate else contextlib.nullcontext():
                if self._workers is not None:
                    loss = self._sharded_step(batch)
                elif self.world_size > 1:
                    # DDP averages gradients over the ranks; weighting each rank's mean loss by its
                    # share of the global batch makes that the gradient of the global batch's mean.
                    loss = self._loss(batch)
                    scale(loss * weight * self.world_size).backward()
                    loss = _all_reduce_sum(loss.detach() * weight)
                else:
                    loss = self._loss(batch)
                    scale(loss).backward()
            if self._scaler is not None:
                self._scaler.unscale_(self.optimizer)  # clipping reads the true gradients
            if self.config.grad_clip:
                nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
            if self._scaler is None:
                self.optimizer.step()
            else:
                self._scaler.step(self.optimizer)
                self._scaler.update()
            if scheduler is not None:
                scheduler.step()
            losses[number] = loss.detach()
        values = losses.tolist()  # the epoch's one read of its losses
        self._nonfinite_inputs = self._nonfinite_inputs_of(data, order, values)
        total = 0.0
        for value, index in zip(values, order):
            total += value * len(index)
        return total / len(data)

    def _nonfinite_inputs_of(self, data: SequenceData, order: list[torch.Tensor], losses: list[float]) -> str | None:
        """Where the first batch of the epoch whose loss is not finite holds NaN or infinity in its
        inputs, read again from `data` (a memory-mapped file written during the fit): then the data are
        at fault, not a diverged model. None when every loss is finite or those inputs are."""
        first = next((number for number, value in enumerate(losses) if not math.isfinite(value)), None)
        if first is None:
            return None
        index = order[first]
        batch = next(batches(data, self.config.batch_size, order=[index]))  # as the step took it
        if self.world_size > 1:
            batch, _, positions = _shard(batch, self.rank, self.world_size)
            index = index[positions]  # the shard's rows of the training data
        found = _nonfinite_input_rows(batch.x, index)
        if self.world_size > 1:
            # The all-reduced losses are the same on every rank, so all of them meet here; the rows
            # are gathered so that each names those of the whole batch.
            found = _gather_nonfinite(found, self.world_size)
        return _describe_nonfinite_rows(found, first + 1)

    def _at_half_rate(self) -> bool:
        """Whether the next batch is read at half its rate (config.half_rate_share of them), drawn from the
        generator that orders the batches (the same on every rank; nothing drawn when the share is 0)."""
        share = self.config.half_rate_share
        return bool(share) and float(torch.rand((), generator=self.shuffle_generator)) < share

    def _loss(self, batch: SequenceData) -> torch.Tensor:
        """The loss of one batch, its forward pass recorded for the backward."""
        with self._autocast():
            outputs = self._forward_model(batch.x, batch.mask)
        return self.loss_fn(_float32(outputs), batch.y, batch.weight)

    def _sharded_step(self, batch: SequenceData) -> torch.Tensor:
        """The loss of one batch run in fixed shards on the workers (ssmts.training.parallel), with the
        gradients written to the parameters: the loss is that of the whole batch (weights, class
        weights and label smoothing as without shards), only the passes through the network are split."""
        parts = _split(batch, self._train_shards)

        def forward(part: SequenceData):
            with self._autocast():
                return self._forward_model(part.x, part.mask)

        parameters = [p for p in self.model.parameters() if p.requires_grad]
        return sharded_gradients(
            self._workers,
            forward,
            lambda outputs: self.loss_fn(_float32(outputs), batch.y, batch.weight),
            parts,
            parameters,
        )

    def _autocast(self):
        """The mixed-precision context of a training step ("bf16-mixed", "16-mixed"), else none."""
        dtype = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(self.config.precision)
        return contextlib.nullcontext() if dtype is None else torch.autocast(self.device.type, dtype=dtype)

    @torch.no_grad()
    def evaluate(self, data: SequenceData) -> tuple[float, float | None]:
        """(mean loss, score or None) on `data`."""
        outputs = self.predict(data)
        loss = float(self.loss_fn(outputs, data.y, data.weight))
        score = None if self.score_fn is None else float(self.score_fn(outputs, data.y))
        return loss, score

    def predict(
        self, data: SequenceData, batch_size: int | None = None, forward: Callable | None = None
    ) -> torch.Tensor:
        """Model outputs for all of `data` (predict_batches with this trainer's model and device)."""
        return predict_batches(
            self.model, data, batch_size or self.config.batch_size, self.device, forward, workers=self._workers
        )

    # ------------------------------------------------------------ state
    def state_dict(self, *, model: bool = True) -> dict:
        """Everything a run needs to continue, tensors on the CPU: model (optional), optimizer,
        scheduler, shuffling RNG, torch's global RNGs (dropout draws from them), history, epochs done (in
        all and in this run)."""
        state = {
            "optimizer": _to_cpu(self.optimizer.state_dict()),
            "scheduler": None if self._scheduler is None else self._scheduler.state_dict(),
            "shuffle_generator": self.shuffle_generator.get_state(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None,
            "history": [dict(r) for r in self.history],
            "epochs_done": self.epochs_done,
            "run_epoch": self.run_epoch,
        }
        if self._scaler is not None:
            state["grad_scaler"] = self._scaler.state_dict()
        if model:
            state["model"] = _to_cpu(self.model.state_dict())
        return state

    def load_state_dict(self, state: dict, *, continue_run: bool = True) -> None:
        """Restore a state_dict (its model too, if it has one). continue_run=False keeps the
        optimizer, RNG and history but starts a new run (a fresh schedule): a warm start."""
        if "model" in state:
            self.model.load_state_dict(state["model"])
        # torch's load_state_dict puts back the saved groups' settings with their moments: a resumed run
        # goes on with them, a warm start takes the moments only and this trainer's lr, lr_ssm and weight
        # decay (the saved ones, a cosine schedule's final lr of 0 among them, trained nothing)
        settings = [{k: v for k, v in group.items() if k != "params"} for group in self.optimizer.param_groups]
        self.optimizer.load_state_dict(state["optimizer"])
        if not continue_run:
            for group, fresh in zip(self.optimizer.param_groups, settings):
                group.pop("initial_lr", None)  # a scheduler's record of the old run's starting lr
                group.update(fresh)
        self.shuffle_generator.set_state(state["shuffle_generator"])
        self.history = [dict(r) for r in state["history"]]
        self.epochs_done = int(state["epochs_done"])
        if self._scaler is not None and state.get("grad_scaler"):
            self._scaler.load_state_dict(state["grad_scaler"])
        if continue_run:
            self.run_epoch = int(state["run_epoch"])
            self._scheduler_state = state.get("scheduler")
        else:
            self.run_epoch, self._scheduler_state = 0, None

    def save_checkpoint(self, path: str | Path) -> None:
        """state_dict() and the callbacks' states (early stopping's best epoch and weights) written
        atomically (loadable with torch.load(weights_only=True)); in a distributed run by rank 0 only,
        the others wait until it is written."""
        if not self.is_main:
            _barrier(self.world_size)
            return
        state = self.state_dict()
        state["callbacks"] = {
            _callback_key(i, callback): saved
            for i, callback in enumerate(self.callbacks)
            if (saved := callback.state_dict()) is not None
        }
        with replacing(path, "the checkpoint") as tmp:
            torch.save(state, tmp)
        _barrier(self.world_size)

    def load_checkpoint(self, path: str | Path) -> int:
        """Restore a checkpoint (no code runs: weights_only); returns the epoch of the run it reached.
        The callbacks' states are restored when fit starts (after their on_fit_start)."""
        state = read_checkpoint(path)
        self.load_state_dict(state)
        # torch's global RNGs as the interrupted run left them: the resumed epochs draw the dropout masks
        # the uninterrupted run drew (fit_model seeded them for epoch 1; a checkpoint of an earlier
        # version holds none)
        if state.get("torch_rng") is not None:
            torch.set_rng_state(state["torch_rng"])
        cuda_rng = state.get("cuda_rng")
        if cuda_rng and torch.cuda.is_available() and len(cuda_rng) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda_rng)
        self._callback_states = state.get("callbacks")
        if self._callback_states is None and self.run_epoch > 0:
            self._callback_states = {}  # an older checkpoint: _restore_callbacks says what is missing
        return self.run_epoch

    def _restore_callbacks(self) -> None:
        """Give each callback its state from the checkpoint this run resumes from, so that the resumed
        run goes on as the uninterrupted one (early stopping keeps its best epoch and patience)."""
        saved, self._callback_states = self._callback_states, None
        if saved is None:
            return
        for i, callback in enumerate(self.callbacks):
            state = saved.get(_callback_key(i, callback))
            if state is not None:
                callback.load_state_dict(state)
            elif callback.state_dict() is not None:
                warnings.warn(
                    f"the checkpoint holds no state of {type(callback).__name__} (written by an earlier version "
                    "or with other callbacks): it starts afresh, so the resumed run may end otherwise than the "
                    "uninterrupted one (early stopping: its best epoch is chosen among the epochs after the resume)",
                    UserWarning,
                    stacklevel=caller_stacklevel(),
                )


def _nonfinite_input_rows(x: torch.Tensor | LazyRows, index: torch.Tensor | None) -> tuple[list[int], str | None]:
    """The rows of a batch whose inputs x hold NaN or infinity, in the rows the user knows: (rows, of),
    with of "X" for a memory-mapped X and "the training data" for tensors; of is None when only the
    batch's positions are known. ([], None) when x is finite.

    x: the batch's inputs (LazyRows know their rows and file); index: the batch's rows of the training
    data (None when not known).
    """
    values = x.materialize() if isinstance(x, LazyRows) else x
    if not values.is_floating_point():
        return [], None
    bad = torch.nonzero((~torch.isfinite(values)).flatten(1).any(1)).flatten().cpu().numpy()
    if not bad.size:
        return [], None
    if isinstance(x, LazyRows) and x.index is not None:
        of = "X"
        filename = getattr(x.array, "filename", None)
        if filename:
            of += f" (the memory-mapped file {filename}: was it written to while the fit read it?)"
        return [int(r) for r in x.index[bad]], of
    if index is not None:
        return [int(r) for r in index.cpu().numpy()[bad]], "the training data"
    return [int(r) for r in bad], None


def _gather_nonfinite(found: tuple[list[int], str | None], world_size: int) -> tuple[list[int], str | None]:
    """The non-finite rows every rank found in its shard of the batch, joined (a rank left without
    samples holds a copy of the batch's first row, hence the set)."""
    import torch.distributed as dist

    every: list = [None] * world_size
    dist.all_gather_object(every, found)
    held = [(rows, of) for rows, of in every if rows]
    if not held:
        return [], None
    if any(of is None for _, of in held):
        return [row for rows, _ in held for row in rows], None
    return sorted({row for rows, _ in held for row in rows}), held[0][1]


def _describe_nonfinite_rows(found: tuple[list[int], str | None], number: int) -> str | None:
    """Words for _nonfinite_input_rows' answer about batch `number`; None when no row was found."""
    rows, of = found
    if not rows:
        return None
    if of is None:
        return f"{len(rows)} series of batch {number} of the epoch"
    rows = sorted(rows)
    shown = ", ".join(str(r) for r in rows[:5]) + (f" and {len(rows) - 5} more" if len(rows) > 5 else "")
    return f"row{'s' if len(rows) > 1 else ''} {shown} of {of}, in batch {number} of the epoch"


def _process_group(distributed: bool) -> tuple[int, int]:
    """(rank, world size) of the process group a distributed Trainer runs in; (0, 1) otherwise."""
    if not distributed:
        return 0, 1
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError(
            "distributed=True needs a torch.distributed process group: launch with torchrun (ssmts "
            "starts the group from its environment) or call torch.distributed.init_process_group"
        )
    return dist.get_rank(), dist.get_world_size()


def _shard(batch: SequenceData, rank: int, world_size: int) -> tuple[SequenceData, float, torch.Tensor]:
    """This rank's contiguous part of a global batch, its share of the batch, and its positions in
    the batch. A rank left without samples (a batch smaller than the group) takes one with weight 0,
    since every rank must run the backward pass for the gradient average."""
    n = len(batch)
    start, stop = shard_bounds(n, world_size)[rank]
    positions = torch.arange(start, stop) if stop > start else torch.arange(0, 1)
    return batch.take(positions), (stop - start) / n, positions


def _all_reduce_sum(value: torch.Tensor) -> torch.Tensor:
    import torch.distributed as dist

    value = value.clone()
    dist.all_reduce(value)
    return value


def _barrier(world_size: int) -> None:
    if world_size > 1:
        import torch.distributed as dist

        dist.barrier()


def _callback_key(index: int, callback: Callback) -> str:
    return f"{index}:{type(callback).__name__}"


def read_checkpoint(path: str | Path) -> dict:
    """A checkpoint's state dict, read without executing code from the file; a clear error if it is damaged."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as error:  # noqa: BLE001 - torch raises many kinds for a damaged file
        raise ValueError(
            f"cannot read the checkpoint {path}: the file is damaged, truncated or not a "
            f"ssmts checkpoint ({type(error).__name__}: {error})"
        ) from error
    missing = {"optimizer", "history", "epochs_done", "run_epoch", "shuffle_generator"} - set(state)
    if missing:
        raise ValueError(f"{path} is not a ssmts checkpoint (it lacks {sorted(missing)})")
    return state


def _to_cpu(obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj
