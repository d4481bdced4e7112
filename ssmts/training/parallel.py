"""Data parallelism inside one process, with results that do not depend on how many threads run.

A CPU training step splits its batch into a fixed number of contiguous shards, and worker threads
run them, each with one torch thread: the forward pass of every shard, the loss on the whole batch,
then every shard's backward pass, and the shards' gradients summed in shard order. Why not torch's
own threads, which split every operation:

- Reproducibility. How torch splits a sum between its threads depends on how many there are, and a
  thread count that follows the machine's load (below) would make two fits with the same seed differ
  in the last bits. Here each shard runs on one thread, in a fixed order of operations, and the
  number of shards is fixed when the run starts (`shard_count`): how many workers run them, one or
  all, changes the time a step takes, never its result.
- Speed. Every operation of a torch thread team ends at a barrier where the threads wait for the
  slowest; a worker runs its shard from start to end without waiting. Measured (forward + backward
  of a 2-layer H=64, N=64 network on 32 series, 2 cores): at 4,000 steps 0.61 s a step with two
  shards against 0.79 s on torch's two threads on a quiet machine, and 2.9 s against 13.8 s (3.5 s
  on one thread) beside other busy processes; at 1,460 steps the two are even when quiet (0.36 s
  and 0.35 s).

The workers follow the cores other processes leave idle (`CoreShare`), as torch's threads did
before: on a busy machine one worker runs every shard in turn.

A model can run in shards when its output for a sample depends on that sample only and its forward
pass draws no random numbers (ssmts's blocks are batch-invariant, ssmts.nn.batch_invariant). The
blocks' batch normalization (ssmts.nn.blocks.MaskedBatchNorm) normalizes each shard with the
shard's own statistics in training (as data-parallel training on several devices does) and its
running statistics take the shards' updates in shard order. Other batch statistics (torch's
BatchNorm) and dropout, whose random draws two threads would interleave, keep the batch whole, on
one thread, which is just as reproducible.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

import torch
from torch import nn

from ..nn.blocks import MaskedBatchNorm, apply_running_statistics, recorded_running_statistics
from .threads import CoreShare

# Least work of a shard, in sample-steps (series x steps): a batch of short series splits into fewer
# shards, since each shard pays a fixed cost of dispatching its operations (ItalyPowerDemand, 24
# steps: a fit took 10.2-10.8 s in two shards against 6.9-8.9 s on torch's threads). A function of
# the batch's shape only, so the result still does not depend on the load.
SHARD_MIN_STEPS = 8192


def shards_of(n: int, length: int, shards: int) -> int:
    """Shards of a batch of n series of `length` steps: at most `shards`, each SHARD_MIN_STEPS or more."""
    return max(1, min(n, shards, (n * length) // SHARD_MIN_STEPS))


def shard_bounds(n: int, shards: int) -> list[tuple[int, int]]:
    """(start, stop) of each of `shards` contiguous parts of n samples, as equal as can be (none empty
    when shards <= n)."""
    edges = [n * k // shards for k in range(shards + 1)]
    return list(zip(edges[:-1], edges[1:]))


def normalizes_by_batch(module: nn.Module) -> bool:
    """Whether `module` normalizes with statistics of its training batch (any batch normalization)."""
    return isinstance(module, nn.modules.batchnorm._BatchNorm) or hasattr(module, "running_mean")


def _has_batch_statistics(module: nn.Module) -> bool:
    """Statistics over the batch that a shard cannot compute alone (MaskedBatchNorm records its updates)."""
    return normalizes_by_batch(module) and not isinstance(module, MaskedBatchNorm)


def _draws_random_numbers(module: nn.Module) -> bool:
    return isinstance(module, nn.modules.dropout._DropoutNd) and module.p > 0


def runs_in_shards(model: nn.Module) -> bool:
    """Whether a training step of `model` may be split into shards (see the module's docstring)."""
    return not any(_has_batch_statistics(m) or _draws_random_numbers(m) for m in model.modules())


def shard_count(threads: int, model: nn.Module | None = None) -> int:
    """Shards of a run: the threads torch is allowed when it starts (torch.set_num_threads,
    OMP_NUM_THREADS, a Dask worker's share); 1 for a model that cannot be split."""
    if model is not None and not runs_in_shards(model):
        return 1
    return max(1, int(threads))


class ShardWorkers:
    """Runs functions over shards on worker threads of one torch thread each, results in shard order.

    shards: the most items `map` is given (the pool's size). While it is open, torch's thread count
    is 1 in this process (restored by `close`); the workers are as many as the cores that other
    processes leave idle, at most `shards` (re-measured as it runs).
    """

    def __init__(self, shards: int):
        self.shards = max(1, int(shards))
        self._threads_before = torch.get_num_threads()
        self._cores = CoreShare(limit=self.shards)
        torch.set_num_threads(1)
        self._pool = ThreadPoolExecutor(self.shards - 1, thread_name_prefix="ssmts-shard") if self.shards > 1 else None

    def map(self, function: Callable, items: Sequence) -> list:
        """[function(item) for item in items], items spread over the workers; the calling thread is one
        of them. Thread-local torch state (grad mode, autocast) is the function's to set."""
        workers = min(len(items), self._cores.update()) if self._pool is not None else 1
        if workers <= 1:
            return [function(item) for item in items]
        results: list = [None] * len(items)

        def lane(first: int) -> None:
            torch.set_num_threads(1)  # a new thread starts with the process default, not our count
            for k in range(first, len(items), workers):
                results[k] = function(items[k])

        futures = [self._pool.submit(lane, first) for first in range(1, workers)]
        lane(0)
        for future in futures:
            future.result()  # re-raises a worker's error
        return results

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        torch.set_num_threads(self._threads_before)

    def __enter__(self) -> "ShardWorkers":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _tensors(outputs) -> list[torch.Tensor]:
    if isinstance(outputs, torch.Tensor):
        return [outputs]
    if isinstance(outputs, (tuple, list)):
        return [t for o in outputs for t in _tensors(o)]
    raise TypeError(f"a model's outputs must be a tensor or a tuple of tensors, got {type(outputs).__name__}")


def concatenate(outputs: list):
    """The shards' outputs joined along the batch: tensors, or tuples / lists of them element by element."""
    first = outputs[0]
    if isinstance(first, torch.Tensor):
        return first if len(outputs) == 1 else torch.cat(outputs)
    return type(first)(concatenate([o[i] for o in outputs]) for i in range(len(first)))


def sharded_gradients(
    workers: ShardWorkers,
    forward: Callable,
    loss_of: Callable,
    parts: list,
    parameters: list[nn.Parameter],
) -> torch.Tensor:
    """One training step's loss, with the gradients of `parameters` written to their .grad.

    forward(part) -> outputs of one shard (run on a worker, with grad enabled); loss_of(outputs of the
    whole batch) -> the scalar loss (on this thread). Each shard's backward pass runs on a worker, and
    the gradients are summed in shard order, so the result does not depend on the workers.
    """

    def forward_with_grad(part):
        with torch.enable_grad(), recorded_running_statistics() as updates:
            return forward(part), updates

    results = workers.map(forward_with_grad, parts)
    outputs = [output for output, _ in results]
    for _, updates in results:  # shard order, whichever thread ran first
        apply_running_statistics(updates)
    loss = loss_of(concatenate(outputs))
    leaves = [[t for t in _tensors(o) if t.requires_grad] for o in outputs]
    output_grads = torch.autograd.grad(loss, [t for shard in leaves for t in shard], allow_unused=True)
    starts = [0]
    for shard in leaves:
        starts.append(starts[-1] + len(shard))

    def backward(k: int):
        tensors = leaves[k]
        grads = output_grads[starts[k] : starts[k + 1]]
        pairs = [(t, g) for t, g in zip(tensors, grads) if g is not None]
        if not pairs:
            return [None] * len(parameters)
        with torch.enable_grad():
            return torch.autograd.grad(
                [t for t, _ in pairs], parameters, grad_outputs=[g for _, g in pairs], allow_unused=True
            )

    per_shard = workers.map(backward, list(range(len(parts))))
    for k, parameter in enumerate(parameters):
        total = None
        for grads in per_shard:  # shard order: a fixed summation order
            g = grads[k]
            if g is not None:
                total = g if total is None else total + g
        parameter.grad = total
    return loss.detach()


__all__ = [
    "SHARD_MIN_STEPS",
    "ShardWorkers",
    "concatenate",
    "normalizes_by_batch",
    "runs_in_shards",
    "shard_bounds",
    "shard_count",
    "sharded_gradients",
    "shards_of",
]
