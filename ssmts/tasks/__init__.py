"""Benchmark task pipelines: the task registry, hyperparameter presets and the runner.

    from ssmts.tasks import get_task, run_task
    get_task("sc10").data_status("~/data")            # "present" / "can be synthesized" / "needs download"
    run_task("sc10", synthetic=True, preset="small", out="runs/sc10/results.json")

The command line is `ssmts tasks list` / `ssmts tasks run NAME ...` (ssmts.cli). The
state-tracking task has its own protocol (ssmts.tasks.state_tracking).
"""

from .presets import PRESET_NAMES, TABLE_10, Preset, get_preset
from .registry import (
    TASKS,
    SyntheticUnavailableError,
    Task,
    UnknownTaskError,
    default_cache_dir,
    get_task,
    list_tasks,
)
from .runner import PAPER_REPORTED, run_task
from .state_tracking import get_state_tracking_preset, run_state_tracking

__all__ = [
    "TASKS",
    "Task",
    "get_task",
    "list_tasks",
    "default_cache_dir",
    "SyntheticUnavailableError",
    "UnknownTaskError",
    "Preset",
    "PRESET_NAMES",
    "TABLE_10",
    "get_preset",
    "run_task",
    "PAPER_REPORTED",
    "run_state_tracking",
    "get_state_tracking_preset",
]
