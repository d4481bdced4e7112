"""Benchmark task pipelines: the task registry, hyperparameter presets and the runner.

    from ssmts.tasks import get_task, run_task
    get_task("sc10").data_status("~/data")            # "present" / "can be synthesized" / "needs download"
    run_task("sc10", synthetic=True, preset="small", out="runs/sc10/results.json")

The command line is `ssmts tasks list` / `ssmts tasks run NAME ...` (ssmts.cli). The
state-tracking task has its own protocol (ssmts.tasks.state_tracking).

The registry (ssmts.tasks.registry) is declarative: names, descriptions, data layouts and
presets, with loaders and runners imported when a task is loaded or run. The names below are
imported on first use, so listing the tasks loads neither torch nor the data modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# name -> submodule that defines it
_EXPORTS = {
    "TASKS": "registry",
    "Task": "registry",
    "get_task": "registry",
    "list_tasks": "registry",
    "task_presets": "registry",
    "default_cache_dir": "sources",
    "SyntheticUnavailableError": "registry",
    "UnknownTaskError": "registry",
    "Preset": "presets",
    "PRESET_NAMES": "presets",
    "TABLE_10": "presets",
    "get_preset": "presets",
    "run_task": "runner",
    "PAPER_REPORTED": "runner",
    "run_state_tracking": "state_tracking",
    "get_state_tracking_preset": "state_tracking",
}

if TYPE_CHECKING:  # what IDEs and type checkers see
    from .presets import PRESET_NAMES, TABLE_10, Preset, get_preset
    from .registry import (
        TASKS,
        SyntheticUnavailableError,
        Task,
        UnknownTaskError,
        get_task,
        list_tasks,
        task_presets,
    )
    from .runner import PAPER_REPORTED, run_task
    from .sources import default_cache_dir
    from .state_tracking import get_state_tracking_preset, run_state_tracking

__all__ = [
    "TASKS",
    "Task",
    "get_task",
    "list_tasks",
    "task_presets",
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


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)
