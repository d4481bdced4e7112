"""Where each benchmark task's data comes from: whether its files are present, the loaders of
the real data (ssmts.data), the offline stand-ins (generators and the espeak-ng speech set) and
the cache that keeps slow stand-ins. The registry (ssmts.tasks.registry) names these per task.

Loaders and generators import numpy, torch and the data modules when they are called, so that
reading the registry imports neither.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ssmts._warnings import caller_stacklevel
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

if TYPE_CHECKING:
    from ssmts.data.base import TaskData


def default_cache_dir() -> Path:
    """Where slow synthetic stand-ins are kept: $SSMTS_CACHE_DIR, else ~/.cache/ssmts."""
    return Path(os.environ.get("SSMTS_CACHE_DIR") or Path.home() / ".cache" / "ssmts").expanduser()


# ----------------------------------------------------------------------------- presence checks


def _first_dir_with(root: Path, candidates: list[str], names: list[str]) -> Path | None:
    for sub in candidates:
        directory = root / sub if sub else root
        if all((directory / name).exists() for name in names):
            return directory
    return None


def listops_present(root: Path) -> bool:
    subdirs = [LISTOPS_DIR, f"lra_release/{LISTOPS_DIR}", ""]
    return _first_dir_with(root, subdirs, list(LISTOPS_FILES.values())) is not None


def aan_present(root: Path) -> bool:
    return _first_dir_with(root, [AAN_DIR, f"lra_release/{AAN_DIR}", ""], list(AAN_FILES.values())) is not None


def imdb_present(root: Path) -> bool:
    names = [f"{split}/{label}" for split in ("train", "test") for label in ("neg", "pos")]
    return _first_dir_with(root, ["aclImdb", "lra_release/aclImdb", ""], names) is not None  # as load_lra_text looks


def pathfinder_present(resolution: int) -> Callable[[Path], bool]:
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


def cifar_present(root: Path) -> bool:
    names = [*CIFAR10_TRAIN_BATCHES, CIFAR10_TEST_BATCH]
    return _first_dir_with(root, [CIFAR10_DIR, ""], names) is not None


def mnist_present(root: Path) -> bool:
    for directory in (root, root / "MNIST" / "raw"):
        if all((directory / n).exists() or (directory / f"{n}.gz").exists() for n in MNIST_FILES.values()):
            return True
    return False


SPEECH_SUBDIRS = ["", "speech_commands_v0.02", "SpeechCommands/speech_commands_v0.02", "SpeechCommands"]
"""Where under --data-dir the extracted Speech Commands may lie (torchaudio's layout included)."""


def speech_commands_dir(root: Path, words=SC10_WORDS) -> Path:
    """The Speech Commands directory under `root` holding the split lists and `words`' folders.

    Falls back to the first one holding the split lists (a copy that lacks some of the words), else to
    `root` itself, so that the loader reports what is missing where it is missing.
    """
    found = _first_dir_with(root, SPEECH_SUBDIRS, [*SPLIT_LISTS, *words])
    if found is None:
        found = _first_dir_with(root, SPEECH_SUBDIRS, list(SPLIT_LISTS))
    return found if found is not None else root


def speech_present(words) -> Callable[[Path], bool]:
    return lambda root: _first_dir_with(root, SPEECH_SUBDIRS, [*SPLIT_LISTS, *words]) is not None


def bidmc_present(target: str) -> Callable[[Path], bool]:
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


def load_listops(root: Path, opts: dict) -> TaskData:
    from ssmts.data.lra import load_lra_listops

    return _limited(load_lra_listops(root), opts)


def load_text(root: Path, opts: dict) -> TaskData:
    from ssmts.data.lra import load_lra_text

    return _limited(load_lra_text(root), opts)


def load_retrieval(root: Path, opts: dict) -> TaskData:
    from ssmts.data.lra import load_lra_retrieval

    # max_samples is applied while reading: the full train split is 9.4 GB as int64.
    data = load_lra_retrieval(root, max_samples=opts.get("max_samples"))
    return _limited(data, opts, train=False)


def load_image(root: Path, opts: dict) -> TaskData:
    from ssmts.data.lra import load_lra_image

    return _limited(load_lra_image(root), opts)


def load_pathfinder(resolution: int) -> Callable[[Path, dict], TaskData]:
    def load(root: Path, opts: dict) -> TaskData:
        from ssmts.data.lra import load_lra_pathfinder

        return load_lra_pathfinder(root, resolution=resolution, max_samples=opts.get("max_samples"))

    return load


def load_speech(words: str, mfcc: bool) -> Callable[[Path, dict], TaskData]:
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


def load_pixels(name: str) -> Callable[[Path, dict], TaskData]:
    def load(root: Path, opts: dict) -> TaskData:
        from ssmts.data import pixels

        loader = {"smnist": pixels.load_smnist, "psmnist": pixels.load_psmnist, "scifar": pixels.load_scifar}[name]
        return _limited(loader(root), opts)

    return load


def load_bidmc(target: str) -> Callable[[Path, dict], TaskData]:
    def load(root: Path, opts: dict) -> TaskData:
        from ssmts.data.bidmc import load_bidmc

        data = load_bidmc(
            root, target=target, protocol=opts.get("protocol", "s4"), standardize=opts.get("standardize", False)
        )
        return _limited(data, opts)

    return load


# ----------------------------------------------------------------------------- synthetic stand-ins


def synth_listops(opts: dict, cache: Path) -> TaskData:
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


def synth_text(opts: dict, cache: Path) -> TaskData:
    from .synthetic_text import make_text_standin

    return make_text_standin(
        opts.get("n_train", 1000),
        opts.get("n_val", 200),
        opts.get("n_test", 200),
        max_length=opts.get("max_length", 1024),
        random_state=opts.get("random_state", 0),
    )


def synth_retrieval(opts: dict, cache: Path) -> TaskData:
    from .synthetic_text import make_retrieval_standin

    return make_retrieval_standin(
        opts.get("n_train", 1000),
        opts.get("n_val", 200),
        opts.get("n_test", 200),
        max_length=opts.get("max_length", 512),
        random_state=opts.get("random_state", 0),
    )


def synth_pathfinder(resolution: int) -> Callable[[dict, Path], TaskData]:
    def synthesize(opts: dict, cache: Path) -> TaskData:
        from ssmts.data.pathfinder_synth import make_pathfinder_task

        n, seed = int(opts.get("n_samples", 1000)), int(opts.get("random_state", 0))
        # About 45 ms an image on one core: cache anything that takes noticeable time.
        key = f"pathfinder{resolution}_n{n}_seed{seed}"
        return cached_task(
            cache, key, lambda: make_pathfinder_task(n, resolution=resolution, random_state=seed), use_cache=n >= 100
        )

    return synthesize


def synth_speech(words: str, mfcc: bool) -> Callable[[dict, Path], TaskData]:
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


def synth_pixels(name: str) -> Callable[[dict, Path], TaskData]:
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


def synth_vitals(target: str) -> Callable[[dict, Path], TaskData]:
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

    SC10 with one clip per voice and all 24 default voices is the recipe of the shipped copy
    (`default_spoken_commands_dir()`, whose 36 test-only voices add 360 test clips), which is
    returned; any other set is
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


def load_state_tracking(root: Path, opts: dict) -> TaskData:
    raise ValueError("state-tracking has no real data set: its problems are generated offline; run it with --synthetic")


def synth_state_tracking(opts: dict, cache: Path) -> TaskData:
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


def run_state_tracking_task(
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


def describe_state_tracking(preset: str) -> str:
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
        except (OSError, ValueError, KeyError) as error:
            # Unreadable or refused (an interrupted write, a damaged header): the stand-in is rebuilt,
            # and the user told why, as a slow stand-in takes a while.
            warnings.warn(
                f"building the task cache {path} again, as it cannot be used: {error}", stacklevel=caller_stacklevel()
            )
            shutil.rmtree(path, ignore_errors=True)
    data = build()
    cache.mkdir(parents=True, exist_ok=True)
    save_task_arrays(data, path)
    return load_task_arrays(path)
