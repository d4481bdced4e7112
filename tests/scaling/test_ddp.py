"""DistributedDataParallel through the one fit path: 2 gloo processes on 127.0.0.1 train to
the weights of one process with the same global batch and seed, and a run killed after
epoch k resumes from its checkpoint to the same result."""

from __future__ import annotations

import json
import os
import socket

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ssmts.nn import SequenceHead, SSMBackbone
from ssmts.training import Callback, SequenceData, TrainerConfig, fit_model

# slow: torchrun-style process groups
pytestmark = pytest.mark.slow

EPOCHS = 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _data() -> SequenceData:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(30, 3, 16, generator=g)  # 30 samples, batch 8: the last batch (6) splits 3 + 3
    return SequenceData(x, x[:, 0, :8].mean(-1, keepdim=True) - x[:, 1, 8:].mean(-1, keepdim=True))


def _network():
    return SequenceHead(SSMBackbone(3, 8, 2, None, d_state=4), 1)


def _mse(out, y, weight=None):
    return ((out - y) ** 2).mean()


def _config(distributed: bool) -> TrainerConfig:
    return TrainerConfig(
        max_epochs=EPOCHS, batch_size=8, lr=0.02, lr_ssm=0.01, device="cpu", random_state=0, distributed=distributed
    )


class _Killed(Exception):
    pass


class _KillAfter(Callback):
    def __init__(self, epoch: int):
        self.epoch = epoch

    def on_epoch_end(self, trainer, record):
        if record["epoch"] == self.epoch:
            raise _Killed(f"killed after epoch {self.epoch}")


def _worker(rank: int, world: int, port: int, out_dir: str, kill_after: int | None, resume: bool) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    try:
        callbacks = [_KillAfter(kill_after)] if kill_after else []
        result = fit_model(
            _network,
            _data(),
            _mse,
            _config(True),
            seed=0,
            callbacks=callbacks,
            checkpoint=os.path.join(out_dir, "run.pt"),
            resume_checkpoint=resume,
        )
        if rank == 0:
            torch.save(result.model.state_dict(), os.path.join(out_dir, "weights.pt"))
            with open(os.path.join(out_dir, "history.json"), "w") as f:
                json.dump(result.history, f)
        # Both ranks meet before the teardown here too: rank 1, done first, closed the group under rank 0
        # while it wrote the weights, and a full test run saw that abort with SIGABRT (2026-12-01).
        dist.barrier()
    except _Killed:
        # Every rank is killed after the same epoch; meeting here first keeps one rank from tearing the
        # group down under the other (under load the other then aborted, and spawn reported that abort).
        dist.barrier()
        raise
    finally:
        dist.destroy_process_group()


def _spawn(tmp_path, kill_after=None, resume=False):
    mp.spawn(_worker, args=(2, _free_port(), str(tmp_path), kill_after, resume), nprocs=2, join=True)


@pytest.fixture(scope="module")
def single():
    torch.set_num_threads(1)
    return fit_model(_network, _data(), _mse, _config(False), seed=0)


def test_two_processes_train_to_the_weights_of_one(tmp_path, single):
    _spawn(tmp_path)
    weights = torch.load(tmp_path / "weights.pt", weights_only=True)
    for name, value in single.model.state_dict().items():
        torch.testing.assert_close(weights[name], value, rtol=1e-5, atol=1e-6)
    history = json.loads((tmp_path / "history.json").read_text())
    assert [round(r["train_loss"], 5) for r in history] == [round(r["train_loss"], 5) for r in single.history]


def test_a_killed_run_resumes_from_its_checkpoint(tmp_path, single):
    with pytest.raises(Exception, match="killed after epoch 2"):
        _spawn(tmp_path, kill_after=2)
    assert (tmp_path / "run.pt").exists() and not (tmp_path / "weights.pt").exists()
    _spawn(tmp_path, resume=True)
    weights = torch.load(tmp_path / "weights.pt", weights_only=True)
    for name, value in single.model.state_dict().items():
        torch.testing.assert_close(weights[name], value, rtol=1e-5, atol=1e-6)


def test_distributed_without_a_process_group_says_how_to_start_one():
    with pytest.raises(RuntimeError, match="torchrun"):
        fit_model(_network, _data(), _mse, _config(True), seed=0)


NAN_ROW = 13


def _nan_worker(rank: int, world: int, port: int, out_dir: str, memmap: bool) -> None:
    """Trains on data whose row NAN_ROW holds NaN and writes the error each rank raised."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    try:
        data = _data()
        x = data.x.clone()
        x[NAN_ROW, 1, 5] = float("nan")
        if memmap:
            from ssmts.training import LazyRows

            x = LazyRows(np.load(os.path.join(out_dir, "X.npy"), mmap_mode="r"))
        try:
            fit_model(_network, SequenceData(x, data.y), _mse, _config(True), seed=0)
            message = "no error"
        except FloatingPointError as error:
            message = str(error)
        with open(os.path.join(out_dir, f"rank{rank}.txt"), "w") as f:
            f.write(message)
        # As in _worker: every rank has raised after the same epoch; meeting before the teardown keeps
        # one rank from closing the group under the other (which then aborted with SIGABRT under load).
        dist.barrier()
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("memmap", [False, True], ids=["tensors", "memory-mapped X"])
def test_nan_inputs_are_named_by_their_rows_of_the_data_on_every_rank(memmap, tmp_path):
    """Each rank trains on its half of the batch, and only one holds the NaN row: every rank names
    that row of the user's data (not a count of series in a batch, nor a diverged model)."""
    if memmap:
        x = _data().x.numpy().copy()
        x[NAN_ROW, 1, 5] = np.nan
        np.save(tmp_path / "X.npy", x)
    mp.spawn(_nan_worker, args=(2, _free_port(), str(tmp_path), memmap), nprocs=2, join=True)
    of = "of X (the memory-mapped file" if memmap else "of the training data"
    for rank in range(2):
        message = (tmp_path / f"rank{rank}.txt").read_text()
        assert "input data hold NaN or infinity" in message and f"row {NAN_ROW} {of}" in message, message
