"""Speech Commands (v0.02) loader, sample-rate changes and the shipped spoken-commands copy.

The directory format is the one of the public data set (Warden, 2018)::

    root/
      yes/0a7c2a8d_nohash_0.wav     16 kHz mono 16-bit PCM, at most 1 s
      no/...
      _background_noise_/...         ignored
      validation_list.txt            "word/file.wav", one per line
      testing_list.txt               same; every other clip is training data

Clips are zero-padded at the end to 1 s. The same format is written by
`ssmts.data.speech_synth`, and a compact synthesized copy is installed with the package
(`default_spoken_commands_dir()`), so everything here also runs offline.
"""

from __future__ import annotations

import os
import warnings
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np
import soundfile as sf

from ssmts.data.base import DataNotFoundError, Split, TaskData, require_files
from ssmts.data.layouts import SC10_WORDS, SC35_WORDS, SPEECH_COMMANDS_RATE, SPLIT_LISTS

# Signal resampling lives with the zero-shot machinery; re-exported here for the loaders.
from ssmts.nn.resampling import RESAMPLE_METHODS, change_rate
from ssmts.nn.resampling import positive_int as _positive_int

CLIP_SAMPLES = 16000
"""Clips are padded to 1 s at 16 kHz."""

# The MFCC setting of the S4 / eSSM SC10-MFCC experiments: 20 coefficients of
# 64 log-mels over 200-sample frames with torchaudio's default hop (n_fft // 2),
# i.e. (20, 161) features for a 1 s clip at 16 kHz.
MFCC_KWARGS = {"n_mfcc": 20, "log_mels": True, "melkwargs": {"n_fft": 200, "n_mels": 64}}

_HOW_TO_GET = (
    "Download Speech Commands v0.02 from "
    "http://download.tensorflow.org/data/speech_commands_v0.02.tar.gz and extract it "
    "into this directory, or synthesize an offline stand-in with "
    "`python -m ssmts.data.make_spoken_commands --out DIR --train-per-word 300` (needs espeak-ng), "
    "or use the shipped copy at ssmts.data.speech.default_spoken_commands_dir()."
)

# Work on this many clips at a time when changing rate or computing MFCCs, so that
# the temporary torch tensors stay small next to the output array.
_CHUNK = 2048


def default_spoken_commands_dir() -> Path:
    """Directory of the compact spoken-commands copy installed with the package.

    600 espeak-ng clips of the SC10 words in the Speech Commands format (splits by voice:
    160 training, 40 validation, 400 test clips),
    package data of `ssmts.data` (`spoken_commands_mini/`, its README says how it was made).
    """
    directory = resources.files("ssmts.data") / "spoken_commands_mini"
    # An installed package is a folder on disk; only an import from a zip archive is not.
    if not isinstance(directory, Path) or not (directory / SPLIT_LISTS[0]).is_file():
        raise DataNotFoundError(
            f"the spoken-commands copy installed with ssmts is missing ({directory}): reinstall the "
            "package, pass a Speech Commands directory explicitly, or synthesize a copy with "
            "ssmts.data.speech_synth.synthesize_spoken_commands (needs espeak-ng: apt-get install espeak-ng)."
        )
    return directory


def load_speech_commands(
    root: str | Path,
    words: str | Sequence[str] = "sc10",
    sample_rate: int = SPEECH_COMMANDS_RATE,
    resample_method: str = "decimate",
    max_per_class: int | None = None,
    mfcc: bool = False,
    random_state: int = 0,
) -> TaskData:
    """Load a Speech Commands v0.02 directory as train/validation/test splits.

    root: the extracted data set (word folders plus validation_list.txt and testing_list.txt).
    words: "sc10" (SC10_WORDS, in that label order), "sc35" (all 35 v0.02 words, sorted),
        "all" (every word folder found, sorted; for synthesized sets with custom words),
        or a sequence of folder names (labels in the given order).
    sample_rate: rate of the returned signals; 16000 keeps the clips as recorded.
    resample_method: how to reach `sample_rate` (see `change_rate`): "decimate" is
        x[::factor] as in the S4 code, "resample" is band-limited resampling.
    max_per_class: keep at most this many clips per class in EACH split, a seeded random
        subset (`random_state`) of the sorted file list, so the subset is reproducible.
    mfcc: return 20 MFCCs of 64 log-mels (n_fft=200, hop 100) instead of the waveform.

    Returns TaskData whose splits hold
        X: (n, 1, sample_rate) float32 (PCM clips, as the data set ships them, in [-1, 1); a float WAV's
           samples as stored), or (n, 20, frames) float32 with mfcc=True
           (frames = 161 at 16 kHz, 81 at 8 kHz);
        y: (n,) int64 indices into `classes`;
        lengths: (n,) true lengths before zero-padding, in units of the last axis of X.
    """
    root = Path(root).expanduser()
    if resample_method not in RESAMPLE_METHODS:
        raise ValueError(f"resample_method must be one of {RESAMPLE_METHODS}, got {resample_method!r}")
    sample_rate = _positive_int(sample_rate, "sample_rate")
    if max_per_class is not None:
        max_per_class = _positive_int(max_per_class, "max_per_class")
    # Fail on an impossible rate change before reading thousands of files.
    change_rate(np.zeros((1, CLIP_SAMPLES), np.float32), SPEECH_COMMANDS_RATE, sample_rate, resample_method)

    require_files(root, list(SPLIT_LISTS), _HOW_TO_GET)
    classes = _resolve_words(root, words)
    require_files(root, [f"{word}/" for word in classes], _HOW_TO_GET)

    validation = _read_split_list(root / SPLIT_LISTS[0])
    testing = _read_split_list(root / SPLIT_LISTS[1])
    in_both = validation & testing
    if in_both:
        raise DataNotFoundError(
            f"{root} is malformed: {len(in_both)} clips are listed in both {SPLIT_LISTS[0]} and "
            f"{SPLIT_LISTS[1]}, e.g. {sorted(in_both)[0]}. {_HOW_TO_GET}"
        )

    listed_missing = sorted(
        r for r in validation | testing if r.split("/", 1)[0] in classes and not (root / r).is_file()
    )
    if listed_missing:
        raise DataNotFoundError(
            f"{root}: {len(listed_missing)} clip(s) named in {SPLIT_LISTS[0]} / {SPLIT_LISTS[1]} are missing, e.g. "
            f"{listed_missing[0]}; the copy is incomplete. {_HOW_TO_GET}"
        )

    files: dict[str, list[tuple[str, int]]] = {"train": [], "val": [], "test": []}
    rng = np.random.default_rng(random_state)
    for label, word in enumerate(classes):
        per_split: dict[str, list[str]] = {"train": [], "val": [], "test": []}
        # .wav in any case: a clip named .WAV is a clip (a list may name it too)
        for path in sorted(p for p in (root / word).iterdir() if p.suffix.lower() == ".wav" and p.is_file()):
            relative = f"{word}/{path.name}"
            split = "val" if relative in validation else "test" if relative in testing else "train"
            per_split[split].append(relative)
        if not any(per_split.values()):
            raise DataNotFoundError(f"{root / word} contains no .wav files. {_HOW_TO_GET}")
        for split, relatives in per_split.items():
            if max_per_class is not None and len(relatives) > max_per_class:
                keep = np.sort(rng.choice(len(relatives), size=max_per_class, replace=False))
                relatives = [relatives[i] for i in keep]
            files[split].extend((relative, label) for relative in relatives)

    splits = {name: _load_split(root, entries, sample_rate, resample_method, mfcc) for name, entries in files.items()}
    return TaskData(
        train=splits["train"],
        val=splits["val"],
        test=splits["test"],
        n_classes=len(classes),
        sample_rate=float(sample_rate),
        classes=list(classes),
        source=str(root),
        meta={
            "words": words if isinstance(words, str) else "custom",
            "original_sample_rate": SPEECH_COMMANDS_RATE,
            "resample_method": resample_method if sample_rate != SPEECH_COMMANDS_RATE else None,
            "mfcc": dict(MFCC_KWARGS) if mfcc else None,
            "max_per_class": max_per_class,
            "random_state": random_state,
            "split_protocol": "validation_list.txt / testing_list.txt; all other clips train",
            "files": {name: [relative for relative, _ in entries] for name, entries in files.items()},
        },
    )


def _resolve_words(root: Path, words: str | Sequence[str]) -> list[str]:
    if isinstance(words, str):
        key = words.lower()
        if key == "sc10":
            return list(SC10_WORDS)
        if key == "sc35":
            return list(SC35_WORDS)
        if key == "all":
            # "_background_noise_" (and hidden folders) are not words.
            found = sorted(
                p.name
                for p in root.iterdir()
                if p.is_dir() and not p.name.startswith(("_", ".")) and any(p.glob("*.wav"))
            )
            if not found:
                raise DataNotFoundError(f"{root} has no word folders with .wav files. {_HOW_TO_GET}")
            return found
        raise ValueError(f"words must be 'sc10', 'sc35', 'all' or a sequence of folder names, got {words!r}")
    chosen = list(words)
    if not chosen:
        raise ValueError("words is empty")
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"words has duplicates: {chosen}")
    bad = [w for w in chosen if not isinstance(w, str) or not w or "/" in w or w.startswith("_")]
    if bad:
        raise ValueError(f"not word folder names: {bad}")
    return chosen


def _read_split_list(path: Path) -> set[str]:
    """The clips a split list names, as word/file.wav. Lists written on Windows may use backslashes and
    some tools write ./word/file.wav; anything else (an absolute path, a prefix folder) would match no
    clip and leave the clip in training, so it is refused by its line."""
    entries = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        entry = line.strip().replace("\\", "/")
        while entry.startswith("./"):
            entry = entry[2:]
        if not entry:
            continue
        parts = entry.split("/")
        if len(parts) != 2 or not all(parts):
            raise DataNotFoundError(
                f"{path}:{number}: {line.strip()!r} is not a clip's path relative to the data set's folder, "
                f"word/file.wav (e.g. yes/0a7c2a8d_nohash_0.wav), as the released lists write them. {_HOW_TO_GET}"
            )
        entries.add(entry)
    return entries


def _load_split(
    root: Path, entries: list[tuple[str, int]], sample_rate: int, resample_method: str, mfcc: bool
) -> Split:
    n = len(entries)
    waves = np.zeros((n, CLIP_SAMPLES), dtype=np.float32)
    lengths = np.zeros(n, dtype=np.int64)
    for i, (relative, _) in enumerate(entries):
        clip = read_clip(root / relative)
        waves[i, : len(clip)] = clip
        lengths[i] = len(clip)
    labels = np.array([label for _, label in entries], dtype=np.int64)

    waves = change_rate(waves, SPEECH_COMMANDS_RATE, sample_rate, resample_method)
    if resample_method == "decimate":
        lengths = -(-lengths // (SPEECH_COMMANDS_RATE // sample_rate))
    else:
        lengths = np.ceil(lengths * sample_rate / SPEECH_COMMANDS_RATE).astype(np.int64)
    if not mfcc:
        return Split(waves[:, None, :], labels, lengths)

    features = _mfcc(waves, sample_rate)
    hop = MFCC_KWARGS["melkwargs"]["n_fft"] // 2
    # With centred frames, frame t is centred on sample t * hop: the frames that
    # start before the end of the true clip.
    frame_lengths = np.minimum(lengths // hop + 1, features.shape[-1])
    return Split(features, labels, frame_lengths)


def read_clip(path: str | Path) -> np.ndarray:
    """Read one Speech Commands clip. Returns (length,) float32 in [-1, 1], length <= 16000.

    Raises ValueError for a clip that is not 16 kHz, not mono, or longer than 1 s.
    """
    path = Path(path)
    try:
        samples, rate = sf.read(str(path), dtype="float32", always_2d=True)
    except RuntimeError as error:  # soundfile's LibsndfileError
        raise ValueError(f"cannot read {path} as a WAV file: {error}") from error
    cut = _cut_data_chunk(path)
    if cut is not None:  # libsndfile reads the samples that are there, as if the clip were shorter
        raise ValueError(
            f"{path} is truncated: its header declares {cut[0]} bytes of samples, the file holds {cut[1]} "
            "(an interrupted copy or extraction?)"
        )
    if rate != SPEECH_COMMANDS_RATE:
        raise ValueError(f"{path} has sample rate {rate} Hz; Speech Commands clips must be {SPEECH_COMMANDS_RATE} Hz")
    if samples.shape[1] != 1:
        raise ValueError(f"{path} has {samples.shape[1]} channels; Speech Commands clips must be mono")
    if len(samples) == 0:
        raise ValueError(f"{path} holds no samples: the file is empty or truncated")
    if len(samples) > CLIP_SAMPLES:
        raise ValueError(
            f"{path} has {len(samples)} samples ({len(samples) / rate:.3f} s); Speech Commands clips "
            f"are at most 1 s ({CLIP_SAMPLES} samples)"
        )
    return samples[:, 0]


def _cut_data_chunk(path: Path) -> tuple[int, int] | None:
    """(bytes of samples a RIFF/WAVE file's data chunk declares, bytes the file holds of it) when it
    holds fewer; None otherwise, or for a file that is not RIFF/WAVE or declares no size (streamed)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(12)
        if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
            return None
        position = 12
        while position + 8 <= size:
            f.seek(position)
            chunk, declared = f.read(4), int.from_bytes(f.read(4), "little")
            if chunk == b"data":
                held = size - position - 8
                return (declared, held) if 0 < declared < 0xFFFFFFFF and held < declared else None
            position += 8 + declared + (declared & 1)  # chunks are padded to even sizes
    return None


def _mfcc(waves: np.ndarray, sample_rate: int) -> np.ndarray:
    """waves: (n, length) float32 -> (n, 20, frames) float32."""
    import torch
    import torchaudio

    with warnings.catch_warnings():
        # 64 mels over the 101 frequency bins of a 200-point FFT leave some mel filters
        # empty; that is the published setting, so torchaudio's warning carries no news.
        warnings.filterwarnings("ignore", message="At least one mel filterbank has all zero values")
        transform = torchaudio.transforms.MFCC(sample_rate=sample_rate, **MFCC_KWARGS)
    hop = MFCC_KWARGS["melkwargs"]["n_fft"] // 2  # torchaudio's default hop
    frames = waves.shape[-1] // hop + 1  # centred frames
    out = np.empty((len(waves), MFCC_KWARGS["n_mfcc"], frames), dtype=np.float32)
    with torch.no_grad():
        for start in range(0, len(waves), _CHUNK):
            out[start : start + _CHUNK] = transform(torch.from_numpy(waves[start : start + _CHUNK])).numpy()
    return out
