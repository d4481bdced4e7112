"""CoreShare: a CPU fit runs as many workers as the cores other processes leave idle, never more than
torch allows."""

import time

import pytest
import torch

from ssmts.training import threads


class FakeClock:
    """Wall time, this process's CPU time and the machine's busy CPU time, advanced by hand."""

    def __init__(self, monkeypatch):
        self.wall = self.own = self.busy = 0.0
        monkeypatch.setattr(threads.time, "perf_counter", lambda: self.wall)
        monkeypatch.setattr(threads.time, "process_time", lambda: self.own)
        monkeypatch.setattr(threads, "_system_busy_seconds", lambda: self.busy)
        monkeypatch.setattr(threads, "available_cores", lambda: 4)

    def run(self, seconds: float, own_cores: float, other_cores: float):
        self.wall += seconds
        self.own += seconds * own_cores
        self.busy += seconds * (own_cores + other_cores)


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_threads_follow_the_cores_that_other_processes_leave_idle(monkeypatch, restore_threads):
    clock = FakeClock(monkeypatch)
    share = threads.CoreShare(limit=4, interval=1.0, first=0.5)
    assert share.update() == 4  # nothing measured yet: the limit
    clock.run(0.6, own_cores=2.0, other_cores=1.0)  # one other process keeps a core busy
    assert share.update() == 3
    clock.run(0.5, own_cores=3.0, other_cores=3.0)  # not due yet (interval 1 s)
    assert share.update() == 3
    clock.run(0.6, own_cores=1.0, other_cores=3.0)  # over the last 1.1 s: (0.5*3 + 0.6*3) / 1.1 = 3 cores busy
    assert share.update() == 1
    clock.run(1.0, own_cores=1.0, other_cores=0.1)  # the others stopped: back to the limit
    assert share.update() == 4
    clock.run(1.0, own_cores=2.0, other_cores=3.9)  # never fewer than one thread
    assert share.update() == 1


def test_the_limit_is_never_exceeded(monkeypatch, restore_threads):
    clock = FakeClock(monkeypatch)
    torch.set_num_threads(2)
    share = threads.CoreShare(interval=1.0, first=0.0)  # limit: torch's current count
    assert share.limit == 2
    clock.run(1.0, own_cores=1.0, other_cores=0.0)  # 3 idle cores, but torch was allowed 2
    assert share.update() == 2
    clock.run(1.0, own_cores=1.0, other_cores=2.6)  # 1.4 idle cores round to 1
    assert share.update() == 1


def test_without_proc_stat_nothing_changes(monkeypatch, restore_threads):
    monkeypatch.setattr(threads, "_system_busy_seconds", lambda: None)
    torch.set_num_threads(2)
    share = threads.CoreShare(first=0.0)
    assert share.update() == 2


def test_system_busy_time_counts_this_process_work():
    """The /proc/stat reading is in CPU seconds: a busy loop of ~0.3 s adds about that much."""
    start = threads._system_busy_seconds()
    if start is None:
        pytest.skip("no /proc/stat on this system")
    own, began = time.process_time(), time.perf_counter()
    while time.perf_counter() - began < 0.3:
        pass
    spent = time.process_time() - own
    grown = threads._system_busy_seconds() - start
    assert grown >= 0.5 * spent  # other processes only add; clock ticks are 10 ms


def test_batched_prediction_runs_shards_on_the_idle_cores_and_gives_the_count_back(monkeypatch, restore_threads):
    """predict_batches, the one batched prediction (the feature estimators' featurization among its
    callers), runs every batch in shards on workers of one torch thread each, as a fit does: under a
    busy machine later batches run on fewer workers, with the same result."""
    import threading

    from torch import nn

    from ssmts.training import SequenceData, parallel, predict_batches

    monkeypatch.setattr(parallel, "SHARD_MIN_STEPS", 1)  # these tiny batches split into shards too
    clock = FakeClock(monkeypatch)
    torch.set_num_threads(4)
    seen = []  # (shard size, worker thread, torch threads) of every shard
    workers = []  # workers of each batch
    update = threads.CoreShare.update
    monkeypatch.setattr(threads.CoreShare, "update", lambda self: workers.append(update(self)) or workers[-1])

    class Busy(nn.Module):
        def forward(self, x, mask=None):
            seen.append((len(x), threading.get_ident(), torch.get_num_threads()))
            clock.run(0.6, own_cores=1.0, other_cores=3.0)  # three other processes keep cores busy
            return x.mean(-1)

    x = torch.randn(12, 2, 5)
    out = predict_batches(Busy(), SequenceData(x), 4, "cpu")
    torch.testing.assert_close(out, x.mean(-1), rtol=0, atol=0)
    assert [size for size, _, _ in seen] == [1] * 12  # 3 batches of 4 shards
    assert workers[0] == 4 and workers[-1] == 1  # the first batch before any measurement, then the idle core
    assert len({thread for _, thread, _ in seen}) > 1  # shards ran on worker threads
    assert {count for _, _, count in seen} == {1}  # of one torch thread each
    assert torch.get_num_threads() == 4


@pytest.mark.parametrize("bad", ["abc", 0, -1, 2.5, True])
def test_a_bad_limit_is_named(bad):
    with pytest.raises(
        ValueError, match=f"CoreShare's limit must be None or a whole number of threads >= 1, got {bad!r}"
    ):
        threads.CoreShare(limit=bad)
    with pytest.raises(ValueError, match="CoreShare's interval must be a number of seconds >= 0"):
        threads.CoreShare(interval=-1.0)
