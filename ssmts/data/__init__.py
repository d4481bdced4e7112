"""Data loaders for the real on-disk formats, and offline generators that stand in for them.

Every loader returns a TaskData (train/val/test Splits of numpy arrays); a missing or
malformed directory raises DataNotFoundError saying which files were expected and how to
obtain them. Heavy optional dependencies (torchaudio, neurokit2, heartpy, sktime) are only
imported by the loaders that need them, and the names below are imported on first use, so
`import ssmts.data.layouts` (the file layouts the task registry checks) loads neither numpy nor
torch.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# name -> submodule that defines it; `from ssmts.data import load_bidmc` imports ssmts.data.bidmc then.
_EXPORTS = {
    "DataNotFoundError": "base",
    "Split": "base",
    "TaskData": "base",
    "load_bidmc": "bidmc",
    "component_series": "forecast_corpus",
    "ets_series": "forecast_corpus",
    "kernel_synth": "forecast_corpus",
    "package_series": "forecast_corpus",
    "synthetic_corpus": "forecast_corpus",
    "generate_listops": "listops_synth",
    "make_listops_task": "listops_synth",
    "load_lra_image": "lra",
    "load_lra_listops": "lra",
    "load_lra_pathfinder": "lra",
    "load_lra_pathx": "lra",
    "load_lra_retrieval": "lra",
    "load_lra_text": "lra",
    "generate_pathfinder": "pathfinder_synth",
    "make_pathfinder_task": "pathfinder_synth",
    "load_digits_permuted": "pixels",
    "load_digits_sequential": "pixels",
    "load_psmnist": "pixels",
    "load_scifar": "pixels",
    "load_smnist": "pixels",
    "change_rate": "speech",
    "default_spoken_commands_dir": "speech",
    "load_speech_commands": "speech",
    "make_corpus": "speech_corpus",
    "synthesize_spoken_commands": "speech_synth",
    "load_heartpy_ppg": "vitals_synth",
    "make_synthetic_vitals": "vitals_synth",
}

if TYPE_CHECKING:  # what IDEs and type checkers see
    from .base import DataNotFoundError, Split, TaskData
    from .bidmc import load_bidmc
    from .forecast_corpus import component_series, ets_series, kernel_synth, package_series, synthetic_corpus
    from .listops_synth import generate_listops, make_listops_task
    from .lra import (
        load_lra_image,
        load_lra_listops,
        load_lra_pathfinder,
        load_lra_pathx,
        load_lra_retrieval,
        load_lra_text,
    )
    from .pathfinder_synth import generate_pathfinder, make_pathfinder_task
    from .pixels import load_digits_permuted, load_digits_sequential, load_psmnist, load_scifar, load_smnist
    from .speech import change_rate, default_spoken_commands_dir, load_speech_commands
    from .speech_corpus import make_corpus
    from .speech_synth import synthesize_spoken_commands
    from .vitals_synth import load_heartpy_ppg, make_synthetic_vitals

__all__ = [
    "DataNotFoundError",
    "component_series",
    "ets_series",
    "kernel_synth",
    "package_series",
    "synthetic_corpus",
    "Split",
    "TaskData",
    "load_lra_listops",
    "load_lra_text",
    "load_lra_retrieval",
    "load_lra_image",
    "load_lra_pathfinder",
    "load_lra_pathx",
    "generate_listops",
    "make_listops_task",
    "generate_pathfinder",
    "make_pathfinder_task",
    "load_smnist",
    "load_psmnist",
    "load_scifar",
    "load_digits_sequential",
    "load_digits_permuted",
    "load_speech_commands",
    "change_rate",
    "default_spoken_commands_dir",
    "make_corpus",
    "synthesize_spoken_commands",
    "load_bidmc",
    "make_synthetic_vitals",
    "load_heartpy_ppg",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)
