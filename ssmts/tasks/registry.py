"""The benchmark tasks: names, data sources (real and synthetic stand-ins), kind and metric.

Task names are part of the public interface (CLI, results files):

    lra-listops lra-text lra-retrieval lra-image lra-pathfinder lra-pathx
    sc10 sc35 sc10-mfcc smnist psmnist scifar bidmc-rr bidmc-hr bidmc-spo2
    state-tracking

Every task loads real data from a directory (``Task.load``) and, where an honest
stand-in exists, builds one offline (``Task.synthesize``); bidmc-spo2 has none.
Slow stand-ins (espeak-ng speech, Pathfinder images) are cached under a cache
directory (``$SSMTS_CACHE_DIR`` or ``~/.cache/ssmts``).

The PTD paper's robustness experiments (``PTD_EXPERIMENTS``: ptd-sinusoids, ptd-robustness,
ptd-ablation; ssmts.tasks.ptd) run through the same command line without data.

Everything here is declarative: names, descriptions, file layouts (ssmts.data.layouts) and
the presets each task accepts (``task_presets``); the presence checks, loaders and stand-ins
each task names are in ssmts.tasks.sources, which imports the data modules, numpy and torch
only when a task is loaded, synthesized or run, so `ssmts tasks list` and reading the registry
import neither numpy nor torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ssmts.data.layouts import (
    AAN_DIR,
    BIDMC_PROBLEMS,
    CIFAR10_DIR,
    LISTOPS_DIR,
    PATHFINDER_DIFFICULTY,
    SC10_WORDS,
    SC35_WORDS,
    SPLIT_LISTS,
    bidmc_file_names,
)

from .presets import PRESET_NAMES, STATE_TRACKING_PRESETS
from .sources import (
    aan_present,
    bidmc_present,
    cifar_present,
    default_cache_dir,
    describe_state_tracking,
    imdb_present,
    listops_present,
    load_bidmc,
    load_image,
    load_listops,
    load_pathfinder,
    load_pixels,
    load_retrieval,
    load_speech,
    load_state_tracking,
    load_text,
    mnist_present,
    pathfinder_present,
    run_state_tracking_task,
    speech_present,
    synth_listops,
    synth_pathfinder,
    synth_pixels,
    synth_retrieval,
    synth_speech,
    synth_state_tracking,
    synth_text,
    synth_vitals,
)

if TYPE_CHECKING:
    from ssmts.data.base import TaskData


class SyntheticUnavailableError(ValueError):
    """The task has no honest synthetic stand-in."""


class UnknownTaskError(KeyError):
    """No task of that name is registered."""

    def __str__(self) -> str:  # KeyError would print the message with quotes around it
        return str(self.args[0])


@dataclass(frozen=True)
class Task:
    """One benchmark task.

    kind: "classification" or "regression"; metric: "accuracy" or "rmse".
    inputs: "tokens" (X (n, L) int64), "token_pairs" (X (n, 2, L) int64, two-tower model)
        or "signal" (X (n, C, L) float32).
    expected: the files the loader reads, relative to --data-dir; how_to_get: where from.
    synthetic: what --synthetic builds, or None with no_synthetic_reason.
    zero_shot: evaluate at half the sample rate too (raw speech).
    runner: a task with its own protocol (several problems, models and seeds; state-tracking)
        is run by this function instead of the one-model pipeline of ssmts.tasks.run_task; it
        still trains through ssmts.training.fit_model.
    presets: the presets `ssmts tasks run NAME --preset` accepts, which `ssmts tasks show NAME`
        lists. describe_preset: one preset in words, for a task with its own protocol (the
        pipeline tasks' presets are ssmts.tasks.get_preset's).
    """

    name: str
    description: str
    kind: str
    metric: str
    inputs: str
    expected: str
    how_to_get: str
    synthetic: str | None
    loader: Callable[[Path, dict], TaskData]
    present: Callable[[Path], bool]
    synthesizer: Callable[[dict, Path], TaskData] | None = None
    no_synthetic_reason: str = ""
    zero_shot: bool = False
    runner: Callable[..., dict] | None = None
    presets: tuple[str, ...] = PRESET_NAMES
    describe_preset: Callable[[str], str] | None = None

    @property
    def can_synthesize(self) -> bool:
        return self.synthesizer is not None

    def load(self, data_dir: str | Path, options: dict | None = None) -> TaskData:
        """Real data from `data_dir`; options: loader settings of a preset (Preset.data).

        Raises DataNotFoundError (which files, where, how to obtain them) when it is missing.
        """
        return self.loader(Path(data_dir).expanduser(), dict(options or {}))

    def synthesize(self, options: dict | None = None, cache_dir: str | Path | None = None) -> TaskData:
        """The offline stand-in; options: generator settings of a preset (Preset.synthetic)."""
        if self.synthesizer is None:
            raise SyntheticUnavailableError(f"task {self.name!r} has no synthetic stand-in: {self.no_synthetic_reason}")
        cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        return self.synthesizer(dict(options or {}), cache)

    def data_present(self, data_dir: str | Path) -> bool:
        """Whether the files the loader needs exist under `data_dir` (not whether they parse)."""
        root = Path(data_dir).expanduser()
        return root.is_dir() and self.present(root)

    def data_status(self, data_dir: str | Path | None = None) -> str:
        """ "present", "can be synthesized" or "needs download" (relative to `data_dir` if given)."""
        if data_dir is not None and self.data_present(data_dir):
            return "present"
        return "can be synthesized" if self.can_synthesize else "needs download"


# ----------------------------------------------------------------------------- the registry

_LRA_HOW = (
    "https://storage.googleapis.com/long-range-arena/lra_release.gz (about 7 GB); pass the extracted "
    "lra_release/ directory or its parent"
)
_SPEECH_HOW = (
    "http://download.tensorflow.org/data/speech_commands_v0.02.tar.gz; pass the extracted directory "
    "(or a parent holding speech_commands_v0.02/ or SpeechCommands/speech_commands_v0.02/)"
)
_MNIST_HOW = "the four MNIST idx files from https://ossci-datasets.s3.amazonaws.com/mnist/ (gzip or not)"
_CIFAR_HOW = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz, extracted"
_BIDMC_HOW = "the BIDMC32RR/HR/SpO2 problems of the Monash/UEA/UCR Time Series Extrinsic Regression archive"
_SPEECH_SYNTH = (
    "espeak-ng spoken commands in the Speech Commands layout, voice-disjoint splits: the shipped "
    "copy (ssmts/data/spoken_commands_mini, 600 clips) for 1 clip per voice, otherwise a larger set "
    "synthesized once into the cache directory"
)


def _bidmc_task(target: str, description: str) -> Task:
    train_name, test_name = bidmc_file_names(target)
    problem = BIDMC_PROBLEMS[target]
    synthesizer = synth_vitals(target) if target in ("rr", "hr") else None
    return Task(
        name=f"bidmc-{target}",
        description=description,
        kind="regression",
        metric="rmse",
        inputs="signal",
        expected=f"{train_name}, {test_name} (in DIR, DIR/{problem.removeprefix('BIDMC32')} or DIR/{problem})",
        how_to_get=_BIDMC_HOW,
        loader=load_bidmc(target),
        present=bidmc_present(target),
        synthetic=(
            "neurokit2-simulated PPG+ECG windows at 125 Hz with known heart and respiratory rate"
            if synthesizer
            else None
        ),
        synthesizer=synthesizer,
        no_synthetic_reason=(
            ""
            if synthesizer
            else "SpO2 is read from the ratio of red to infrared pulsatile absorption; no offline "
            "source has two PPG wavelengths, so an SpO2 label on simulated signals could not be "
            "recovered from them. Use the real BIDMC32SpO2 files with --data-dir."
        ),
    )


TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        Task(
            "lra-listops",
            "LRA ListOps: value (0-9) of nested MIN/MAX/MED/SUM_MOD expressions, tokens, L<=2000",
            "classification",
            "accuracy",
            "tokens",
            f"{LISTOPS_DIR}/basic_{{train,val,test}}.tsv",
            _LRA_HOW,
            "LRA's ListOps generator (ssmts.data.listops_synth), shorter expressions under the small preset",
            load_listops,
            listops_present,
            synth_listops,
        ),
        Task(
            "lra-text",
            "LRA Text: IMDB review sentiment from bytes, L=4096",
            "classification",
            "accuracy",
            "tokens",
            "aclImdb/{train,test}/{pos,neg}/*.txt",
            "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",
            "byte-level pseudo-word documents whose label is the majority of scattered sentiment cue words "
            "(plumbing stand-in; says nothing about IMDB)",
            load_text,
            imdb_present,
            synth_text,
        ),
        Task(
            "lra-retrieval",
            "LRA Retrieval: do two ACL papers cite each other? bytes, two towers, L=4000",
            "classification",
            "accuracy",
            "token_pairs",
            f"{AAN_DIR}/new_aan_pairs.{{train,eval,test}}.tsv",
            _LRA_HOW,
            "byte-level document pairs labelled by a shared topic (plumbing stand-in; says nothing about AAN)",
            load_retrieval,
            aan_present,
            synth_retrieval,
        ),
        Task(
            "lra-image",
            "LRA Image: grayscale CIFAR-10, one pixel per step, L=1024",
            "classification",
            "accuracy",
            "signal",
            f"{CIFAR10_DIR}/data_batch_1..5, test_batch",
            _CIFAR_HOW,
            "scikit-learn's 8x8 digits read pixel by pixel (L=64; far easier than CIFAR)",
            load_image,
            cifar_present,
            synth_pixels("lra-image"),
        ),
        Task(
            "lra-pathfinder",
            "LRA Pathfinder: are two circles joined by a dashed path? 32x32 pixels, L=1024",
            "classification",
            "accuracy",
            "signal",
            f"pathfinder32/{PATHFINDER_DIFFICULTY}/{{metadata,imgs}}",
            _LRA_HOW,
            "Pathfinder-style generator (ssmts.data.pathfinder_synth) at 32x32, cached",
            load_pathfinder(32),
            pathfinder_present(32),
            synth_pathfinder(32),
        ),
        Task(
            "lra-pathx",
            "LRA Path-X: Pathfinder at 128x128 pixels, L=16384",
            "classification",
            "accuracy",
            "signal",
            f"pathfinder128/{PATHFINDER_DIFFICULTY}/{{metadata,imgs}}",
            _LRA_HOW,
            "Pathfinder-style generator at 128x128, cached",
            load_pathfinder(128),
            pathfinder_present(128),
            synth_pathfinder(128),
        ),
        Task(
            "sc10",
            "Speech Commands, 10 words from raw 16 kHz audio (L=16000); zero-shot at half the rate",
            "classification",
            "accuracy",
            "signal",
            f"{{{','.join(SC10_WORDS)}}}/*.wav, {', '.join(SPLIT_LISTS)}",
            _SPEECH_HOW,
            _SPEECH_SYNTH,
            load_speech("sc10", False),
            speech_present(SC10_WORDS),
            synth_speech("sc10", False),
            zero_shot=True,
        ),
        Task(
            "sc35",
            "Speech Commands, all 35 words from raw 16 kHz audio; zero-shot at half the rate",
            "classification",
            "accuracy",
            "signal",
            f"the 35 word folders (*.wav), {', '.join(SPLIT_LISTS)}",
            _SPEECH_HOW,
            "espeak-ng spoken commands of the 35 words, synthesized once into the cache directory",
            load_speech("sc35", False),
            speech_present(SC35_WORDS),
            synth_speech("sc35", False),
            zero_shot=True,
        ),
        Task(
            "sc10-mfcc",
            "Speech Commands, 10 words from 20 MFCCs (161 frames)",
            "classification",
            "accuracy",
            "signal",
            f"{{{','.join(SC10_WORDS)}}}/*.wav, {', '.join(SPLIT_LISTS)}",
            _SPEECH_HOW,
            _SPEECH_SYNTH,
            load_speech("sc10", True),
            speech_present(SC10_WORDS),
            synth_speech("sc10", True),
        ),
        Task(
            "smnist",
            "Sequential MNIST: digits pixel by pixel, L=784",
            "classification",
            "accuracy",
            "signal",
            "train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte "
            "(or .gz; in DIR or DIR/MNIST/raw)",
            _MNIST_HOW,
            "scikit-learn's 8x8 digits pixel by pixel (L=64)",
            load_pixels("smnist"),
            mnist_present,
            synth_pixels("smnist"),
        ),
        Task(
            "psmnist",
            "Permuted sequential MNIST: sMNIST with a fixed pixel permutation, L=784",
            "classification",
            "accuracy",
            "signal",
            "the MNIST idx files, as for smnist",
            _MNIST_HOW,
            "scikit-learn's 8x8 digits with a fixed 64-step permutation",
            load_pixels("psmnist"),
            mnist_present,
            synth_pixels("psmnist"),
        ),
        Task(
            "scifar",
            "Sequential CIFAR-10: RGB pixels one per step, L=1024",
            "classification",
            "accuracy",
            "signal",
            f"{CIFAR10_DIR}/data_batch_1..5, test_batch",
            _CIFAR_HOW,
            "scikit-learn's 8x8 digits tinted with a random colour per image (3 channels, L=64)",
            load_pixels("scifar"),
            cifar_present,
            synth_pixels("scifar"),
        ),
        _bidmc_task("rr", "BIDMC respiratory rate from 32 s of PPG+ECG at 125 Hz (L=4000), RMSE"),
        _bidmc_task("hr", "BIDMC heart rate from 32 s of PPG+ECG at 125 Hz (L=4000), RMSE"),
        _bidmc_task("spo2", "BIDMC blood oxygen saturation from 32 s of PPG+ECG at 125 Hz (L=4000), RMSE"),
        Task(
            "state-tracking",
            "parity, mod-5 sum, cycle navigation, A5 word problem: accuracy beyond the training "
            "length for SSM and LNCDE (SLiCE) layers",
            "classification",
            "accuracy",
            "tokens",
            "nothing: generated offline",
            "no download: ssmts.data.state_tracking_synth generates the problems",
            "seeded generators of ssmts.data.state_tracking_synth (train length <= 40, test up to 320)",
            load_state_tracking,
            lambda root: False,
            synth_state_tracking,
            runner=run_state_tracking_task,
            presets=STATE_TRACKING_PRESETS,
            describe_preset=describe_state_tracking,
        ),
    )
}
"""Every registered task, by name."""


def get_task(name: str) -> Task:
    """The task called `name`; UnknownTaskError (with close matches) otherwise."""
    try:
        return TASKS[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(str(name), list(TASKS), n=3)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        raise UnknownTaskError(f"unknown task {name!r}{hint}; known tasks: {', '.join(TASKS)}") from None


def list_tasks() -> list[Task]:
    """Every task, in registry order."""
    return list(TASKS.values())


PTD_EXPERIMENTS: dict[str, str] = {
    "ptd-sinusoids": "PTD paper 3.4: regress amplitude and frequency of sinusoids; legs vs ptd on "
    "interpolation/extrapolation grids (heat maps)",
    "ptd-robustness": "PTD paper 5.2: legs vs ptd pixel-sequence classifiers under sinusoidal input noise at "
    "the legs model's sensitive frequencies and at random ones",
    "ptd-ablation": "PTD paper 5.3: accuracy and cond(V) against the PTD perturbation size ||E||/||A||",
}
"""The PTD paper's robustness experiments (ssmts.tasks.ptd), name -> description; they need no
data and take the presets PRESET_NAMES."""


def task_presets(name: str) -> tuple[str, ...]:
    """The presets `ssmts tasks run NAME --preset` accepts, in the order `ssmts tasks show NAME`
    lists them: a registered task's own, or PRESET_NAMES for a PTD experiment."""
    if name in PTD_EXPERIMENTS:
        return PRESET_NAMES
    return get_task(name).presets
