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
the presets each task accepts (``task_presets``). Loaders, generators and runners are imported
when a task is loaded, synthesized or run, so `ssmts tasks list` and reading the registry
import neither numpy nor torch.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ssmts.data.layouts import (
    AAN_DIR,
    AAN_FILES,
    BIDMC_PROBLEMS,
    CIFAR10_DIR,
    CIFAR10_TEST_BATCH,
    CIFAR10_TRAIN_BATCHES,
    LISTOPS_DIR,
    LISTOPS_FILES,
    MNIST_FILES,
    PATHFINDER_DIFFICULTY,
    SC10_WORDS,
    SC35_WORDS,
    SPEECH_COMMANDS_RATE,
    SPLIT_LISTS,
    bidmc_file_names,
)

from .presets import PRESET_NAMES, STATE_TRACKING_PRESETS

if TYPE_CHECKING:
    from ssmts.data.base import TaskData


class SyntheticUnavailableError(ValueError):
    """The task has no honest synthetic stand-in."""


class UnknownTaskError(KeyError):
    """No task of that name is registered."""

    def __str__(self) -> str:  # KeyError would print the message with quotes around it
        return str(self.args[0])


def default_cache_dir() -> Path:
    """Where slow synthetic stand-ins are kept: $SSMTS_CACHE_DIR, else ~/.cache/ssmts."""
    return Path(os.environ.get("SSMTS_CACHE_DIR") or Path.home() / ".cache" / "ssmts").expanduser()


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


# ----------------------------------------------------------------------------- presence checks


def _first_dir_with(root: Path, candidates: list[str], names: list[str]) -> Path | None:
    for sub in candidates:
        directory = root / sub if sub else root
        if all((directory / name).exists() for name in names):
            return directory
    return None


def _listops_present(root: Path) -> bool:
    subdirs = [LISTOPS_DIR, f"lra_release/{LISTOPS_DIR}", ""]
    return _first_dir_with(root, subdirs, list(LISTOPS_FILES.values())) is not None


def _aan_present(root: Path) -> bool:
    return _first_dir_with(root, [AAN_DIR, f"lra_release/{AAN_DIR}", ""], list(AAN_FILES.values())) is not None


def _imdb_present(root: Path) -> bool:
    names = [f"{split}/{label}" for split in ("train", "test") for label in ("neg", "pos")]
    return _first_dir_with(root, ["aclImdb", ""], names) is not None


def _pathfinder_present(resolution: int) -> Callable[[Path], bool]:
    folder = f"pathfinder{resolution}"

    def present(root: Path) -> bool:
        subdirs = [
            f"{folder}/{PATHFINDER_DIFFICULTY}",
            f"lra_release/{folder}/{PATHFINDER_DIFFICULTY}",
            PATHFINDER_DIFFICULTY,
            "",
        ]
        return _first_dir_with(root, subdirs, ["metadata", "imgs"]) is not None

    return present


def _cifar_present(root: Path) -> bool:
    names = [*CIFAR10_TRAIN_BATCHES, CIFAR10_TEST_BATCH]
    return _first_dir_with(root, [CIFAR10_DIR, ""], names) is not None


def _mnist_present(root: Path) -> bool:
    for directory in (root, root / "MNIST" / "raw"):
        if all((directory / n).exists() or (directory / f"{n}.gz").exists() for n in MNIST_FILES.values()):
            return True
    return False


SPEECH_SUBDIRS = ["", "speech_commands_v0.02", "SpeechCommands/speech_commands_v0.02", "SpeechCommands"]
"""Where under --data-dir the extracted Speech Commands may lie (torchaudio's layout included)."""


def speech_commands_dir(root: Path, words=SC10_WORDS) -> Path:
    """The Speech Commands directory under `root` holding the split lists and `words`' folders.

    Falls back to `root` itself, so the loader reports what is missing there.
    """
    found = _first_dir_with(root, SPEECH_SUBDIRS, [*SPLIT_LISTS, *words])
    return found if found is not None else root


def _speech_present(words) -> Callable[[Path], bool]:
    return lambda root: _first_dir_with(root, SPEECH_SUBDIRS, [*SPLIT_LISTS, *words]) is not None


def _bidmc_present(target: str) -> Callable[[Path], bool]:
    names = list(bidmc_file_names(target))
    problem = BIDMC_PROBLEMS[target]
    return lambda root: _first_dir_with(root, ["", problem.removeprefix("BIDMC32"), problem], names) is not None


# ----------------------------------------------------------------------------- real-data loaders


def _limited(data: TaskData, opts: dict, train: bool = True) -> TaskData:
    """At most opts["max_train"] training (when `train`) and opts["max_eval"] validation/test samples,
    a seeded random subset. (The torch-backed helper is imported here: the registry itself loads
    without torch.)"""
    from .data_utils import limit_task_data

    return limit_task_data(data, opts.get("max_train") if train else None, opts.get("max_eval"))


def _load_listops(root: Path, opts: dict) -> TaskData:
    from ssmts.data.lra import load_lra_listops

    return _limited(load_lra_listops(root), opts)


def _load_text(root: Path, opts: dict) -> TaskData:
    from ssmts.data.lra import load_lra_text

    return _limited(load_lra_text(root), opts)


def _load_retrieval(root: Path, opts: dict) -> TaskData:
    from ssmts.data.lra import load_lra_retrieval

    # max_samples is applied while reading: the full train split is 9.4 GB as int64.
    data = load_lra_retrieval(root, max_samples=opts.get("max_samples"))
    return _limited(data, opts, train=False)


def _load_image(root: Path, opts: dict) -> TaskData:
    from ssmts.data.lra import load_lra_image

    return _limited(load_lra_image(root), opts)


def _load_pathfinder(resolution: int) -> Callable[[Path, dict], TaskData]:
    def load(root: Path, opts: dict) -> TaskData:
        from ssmts.data.lra import load_lra_pathfinder

        return load_lra_pathfinder(root, resolution=resolution, max_samples=opts.get("max_samples"))

    return load


def _load_speech(words: str, mfcc: bool) -> Callable[[Path, dict], TaskData]:
    word_list = SC10_WORDS if words == "sc10" else SC35_WORDS

    def load(root: Path, opts: dict) -> TaskData:
        from ssmts.data.speech import load_speech_commands

        rate = int(opts.get("sample_rate", SPEECH_COMMANDS_RATE))
        # A lower training rate is reached by band-limited resampling (no aliasing); the
        # S4 decimation x[::k] is kept for the zero-shot test, where it is the protocol.
        method = "resample" if rate != SPEECH_COMMANDS_RATE else "decimate"
        return load_speech_commands(
            speech_commands_dir(root, word_list),
            words=words,
            sample_rate=rate,
            resample_method=method,
            max_per_class=opts.get("max_per_class"),
            mfcc=mfcc,
        )

    return load


def _load_pixels(name: str) -> Callable[[Path, dict], TaskData]:
    def load(root: Path, opts: dict) -> TaskData:
        from ssmts.data import pixels

        loader = {"smnist": pixels.load_smnist, "psmnist": pixels.load_psmnist, "scifar": pixels.load_scifar}[name]
        return _limited(loader(root), opts)

    return load


def _load_bidmc(target: str) -> Callable[[Path, dict], TaskData]:
    def load(root: Path, opts: dict) -> TaskData:
        from ssmts.data.bidmc import load_bidmc

        data = load_bidmc(
            root, target=target, protocol=opts.get("protocol", "s4"), standardize=opts.get("standardize", False)
        )
        return _limited(data, opts)

    return load


# ----------------------------------------------------------------------------- synthetic stand-ins


def _synth_listops(opts: dict, cache: Path) -> TaskData:
    from ssmts.data.listops_synth import make_listops_task

    return make_listops_task(
        opts.get("n_train", 2000),
        opts.get("n_val", 200),
        opts.get("n_test", 200),
        min_length=opts.get("min_length", 50),
        max_length=opts.get("max_length", 300),
        max_depth=opts.get("max_depth", 6),
        random_state=opts.get("random_state", 0),
    )


def _synth_text(opts: dict, cache: Path) -> TaskData:
    from .synthetic_text import make_text_standin

    return make_text_standin(
        opts.get("n_train", 1000),
        opts.get("n_val", 200),
        opts.get("n_test", 200),
        max_length=opts.get("max_length", 1024),
        random_state=opts.get("random_state", 0),
    )


def _synth_retrieval(opts: dict, cache: Path) -> TaskData:
    from .synthetic_text import make_retrieval_standin

    return make_retrieval_standin(
        opts.get("n_train", 1000),
        opts.get("n_val", 200),
        opts.get("n_test", 200),
        max_length=opts.get("max_length", 512),
        random_state=opts.get("random_state", 0),
    )


def _synth_pathfinder(resolution: int) -> Callable[[dict, Path], TaskData]:
    def synthesize(opts: dict, cache: Path) -> TaskData:
        from ssmts.data.pathfinder_synth import make_pathfinder_task

        n, seed = int(opts.get("n_samples", 1000)), int(opts.get("random_state", 0))
        # About 45 ms an image on one core: cache anything that takes noticeable time.
        key = f"pathfinder{resolution}_n{n}_seed{seed}"
        return cached_task(
            cache, key, lambda: make_pathfinder_task(n, resolution=resolution, random_state=seed), use_cache=n >= 100
        )

    return synthesize


def _synth_speech(words: str, mfcc: bool) -> Callable[[dict, Path], TaskData]:
    def synthesize(opts: dict, cache: Path) -> TaskData:
        from ssmts.data.speech import load_speech_commands

        directory = spoken_commands_standin(words, int(opts.get("clips_per_voice", 1)), opts.get("n_voices"), cache)
        rate = int(opts.get("sample_rate", SPEECH_COMMANDS_RATE))
        method = "resample" if rate != SPEECH_COMMANDS_RATE else "decimate"
        data = load_speech_commands(directory, words=words, sample_rate=rate, resample_method=method, mfcc=mfcc)
        data.source = f"synthetic: espeak-ng spoken commands at {directory}"
        data.meta["stand_in_for"] = "Speech Commands v0.02"
        return data

    return synthesize


def _synth_pixels(name: str) -> Callable[[dict, Path], TaskData]:
    def synthesize(opts: dict, cache: Path) -> TaskData:
        from ssmts.data import pixels

        if name == "scifar":
            return pixels.load_digits_rgb()
        if name == "psmnist":
            return pixels.load_digits_permuted()
        data = pixels.load_digits_sequential()
        if name == "lra-image":
            data.meta["stand_in_for"] = "lra-image (grayscale CIFAR-10)"
        return data

    return synthesize


def _synth_vitals(target: str) -> Callable[[dict, Path], TaskData]:
    def synthesize(opts: dict, cache: Path) -> TaskData:
        from ssmts.data.vitals_synth import make_synthetic_vitals

        return make_synthetic_vitals(
            n_windows=int(opts.get("n_windows", 400)),
            length=int(opts.get("length", 1000)),
            target=target,
            seed=int(opts.get("random_state", 0)),
            standardize=bool(opts.get("standardize", True)),
        )

    return synthesize


def spoken_commands_standin(words: str, clips_per_voice: int, n_voices: int | None, cache: Path) -> Path:
    """Directory of an espeak-ng spoken-commands set in the Speech Commands layout.

    SC10 with one clip per voice and all 24 default voices is exactly the recipe of the
    shipped copy (`default_spoken_commands_dir()`), which is returned; any other set is
    synthesized once into `cache` (written to a temporary directory, then renamed, so an
    interrupted synthesis is never mistaken for a finished one).
    """
    from ssmts.data.speech import default_spoken_commands_dir
    from ssmts.data.speech_synth import DEFAULT_VOICES, synthesize_spoken_commands

    if words == "sc10" and clips_per_voice == 1 and n_voices is None:
        return default_spoken_commands_dir()
    voices = list(DEFAULT_VOICES if n_voices is None else DEFAULT_VOICES[: int(n_voices)])
    word_list = SC10_WORDS if words == "sc10" else SC35_WORDS
    target = cache / f"spoken_commands_{words}_{clips_per_voice}x{len(voices)}voices_seed0"
    if (target / SPLIT_LISTS[1]).is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=cache))
    try:
        synthesize_spoken_commands(
            staging / "data", words=word_list, voices=voices, clips_per_voice=clips_per_voice, random_state=0
        )
        try:
            (staging / "data").rename(target)
        except OSError:
            if not (target / SPLIT_LISTS[1]).is_file():  # not another process finishing first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _load_state_tracking(root: Path, opts: dict) -> TaskData:
    raise ValueError("state-tracking has no real data set: its problems are generated offline; run it with --synthetic")


def _synth_state_tracking(opts: dict, cache: Path) -> TaskData:
    from ssmts.data.state_tracking_synth import make_state_tracking_task

    return make_state_tracking_task(
        opts.get("problem", "parity"),
        opts.get("n_train", 2000),
        opts.get("n_val", 200),
        opts.get("n_test", 200),
        train_length=opts.get("train_length", 40),
        test_length=opts.get("test_length", 80),
        random_state=opts.get("random_state", 0),
    )


def _run_state_tracking(
    *,
    data_dir=None,
    synthetic: bool = False,
    preset: str = "small",
    epochs=None,
    device: str = "auto",
    out=None,
    resume: bool = False,
    seed: int = 0,
    limit=None,
    cache_dir=None,
    verbose: int = 1,
    echo=print,
) -> dict:
    """run_task's interface for state-tracking; settings it has no use for are refused by name."""
    from .state_tracking import run_state_tracking

    if data_dir is not None or not synthetic:
        raise ValueError(
            "state-tracking has no real data set: its problems are generated offline; run it with --synthetic"
        )
    for name, value in (("epochs", epochs), ("limit", limit)):
        if value is not None:
            raise ValueError(
                f"state-tracking does not take --{name}: its preset fixes the optimizer steps and the "
                "data sizes (see `ssmts tasks show state-tracking`)"
            )
    if resume:
        raise ValueError("state-tracking runs many short trainings and keeps no checkpoint: --resume does not apply")
    return run_state_tracking(preset=preset, out=out, device=device, seed=seed, echo=echo)


def _describe_state_tracking(preset: str) -> str:
    from .state_tracking import get_state_tracking_preset

    return get_state_tracking_preset(preset).describe()


def cached_task(cache: Path, key: str, build: Callable[[], TaskData], use_cache: bool = True) -> TaskData:
    """build() once and keep its splits in `cache`/key/ (.npy files); later calls read them memory-mapped."""
    from .data_utils import load_task_arrays, save_task_arrays

    if not use_cache:
        return build()
    path = cache / key
    if (path / "header.json").is_file():
        try:
            return load_task_arrays(path)
        except (OSError, ValueError, KeyError):
            shutil.rmtree(path, ignore_errors=True)  # unreadable (interrupted write): build it again
    data = build()
    cache.mkdir(parents=True, exist_ok=True)
    save_task_arrays(data, path)
    return load_task_arrays(path)


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
    "copy (datasets/spoken_commands_mini, 240 clips) for 1 clip per voice, otherwise a larger set "
    "synthesized once into the cache directory"
)


def _bidmc_task(target: str, description: str) -> Task:
    train_name, test_name = bidmc_file_names(target)
    problem = BIDMC_PROBLEMS[target]
    synthesizer = _synth_vitals(target) if target in ("rr", "hr") else None
    return Task(
        name=f"bidmc-{target}",
        description=description,
        kind="regression",
        metric="rmse",
        inputs="signal",
        expected=f"{train_name}, {test_name} (in DIR, DIR/{problem.removeprefix('BIDMC32')} or DIR/{problem})",
        how_to_get=_BIDMC_HOW,
        loader=_load_bidmc(target),
        present=_bidmc_present(target),
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
            _load_listops,
            _listops_present,
            _synth_listops,
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
            _load_text,
            _imdb_present,
            _synth_text,
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
            _load_retrieval,
            _aan_present,
            _synth_retrieval,
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
            _load_image,
            _cifar_present,
            _synth_pixels("lra-image"),
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
            _load_pathfinder(32),
            _pathfinder_present(32),
            _synth_pathfinder(32),
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
            _load_pathfinder(128),
            _pathfinder_present(128),
            _synth_pathfinder(128),
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
            _load_speech("sc10", False),
            _speech_present(SC10_WORDS),
            _synth_speech("sc10", False),
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
            _load_speech("sc35", False),
            _speech_present(SC35_WORDS),
            _synth_speech("sc35", False),
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
            _load_speech("sc10", True),
            _speech_present(SC10_WORDS),
            _synth_speech("sc10", True),
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
            _load_pixels("smnist"),
            _mnist_present,
            _synth_pixels("smnist"),
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
            _load_pixels("psmnist"),
            _mnist_present,
            _synth_pixels("psmnist"),
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
            _load_pixels("scifar"),
            _cifar_present,
            _synth_pixels("scifar"),
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
            _load_state_tracking,
            lambda root: False,
            _synth_state_tracking,
            runner=_run_state_tracking,
            presets=STATE_TRACKING_PRESETS,
            describe_preset=_describe_state_tracking,
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
