"""How many workers a CPU fit runs: the cores other processes leave idle, re-measured as it runs.

Threads that work on one task meet at barriers. When another process keeps a core busy, one of
them waits for that core at every barrier, and a fit with as many threads as cores ran several
times slower than with one thread fewer (measured with torch's threads: GunPoint, 2 cores, one
busy process beside: 11.9 s with 2 threads, 6.1 s with 1; alone 3.6 s and 5.5 s). So a fit runs
at most as many workers as the threads torch is allowed (OMP_NUM_THREADS, torch.set_num_threads,
threadpoolctl.threadpool_limits, a Dask worker's share) and, while it runs, only as many as there
are cores that other processes leave idle. The workers run fixed shards of every batch on one
torch thread each (ssmts.training.parallel), so their number changes the time, not the result.
"""

from __future__ import annotations

import math
import numbers
import os
import time

import torch

_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user, nice, system, irq, softirq, steal of /proc/stat's cpu line


def _system_busy_seconds() -> float | None:
    """CPU seconds all processes have spent busy since boot (None where /proc/stat is missing)."""
    try:
        with open("/proc/stat", "rb") as stat:
            fields = stat.readline().split()[1:]
        return sum(int(fields[i]) for i in _BUSY_FIELDS) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class CoreShare:
    """The cores that other processes leave idle, at most `limit` (default: torch's thread count).

    `update()` is cheap and called often (every optimizer step); it re-measures once `interval`
    seconds have passed, from the CPU time the whole machine spent busy minus this process's
    own. Where /proc/stat is missing it always answers `limit`.
    """

    def __init__(self, limit: int | None = None, interval: float = 1.0, first: float = 0.5):
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, numbers.Integral) or limit < 1):
            raise ValueError(f"CoreShare's limit must be None or a whole number of threads >= 1, got {limit!r}")
        for name, value in (("interval", interval), ("first", first)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < math.inf:
                raise ValueError(f"CoreShare's {name} must be a number of seconds >= 0, got {value!r}")
        self.limit = max(1, int(limit or torch.get_num_threads()))
        self.cores = available_cores()
        self.interval, self.threads = float(interval), self.limit
        self._next = time.perf_counter() + float(first)
        self._sample = self._measure()

    @staticmethod
    def _measure() -> tuple[float, float, float] | None:
        busy = _system_busy_seconds()
        return None if busy is None else (time.perf_counter(), busy, time.process_time())

    def update(self) -> int:
        """The idle cores, at most `limit` and at least 1 (re-measured when a measurement is due)."""
        if self._sample is None or self.limit == 1 or time.perf_counter() < self._next:
            return self.threads
        now = self._measure()
        wall, busy, own = (b - a for a, b in zip(self._sample, now))
        if wall > 0:
            others = max(0.0, (busy - own) / wall)  # cores busy with other processes' work
            self.threads = max(1, min(self.limit, int(self.cores - others + 0.5)))
        self._sample, self._next = now, now[0] + self.interval
        return self.threads


__all__ = ["CoreShare", "available_cores"]
