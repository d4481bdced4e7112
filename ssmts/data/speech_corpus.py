"""Spoken-command corpora of any size, synthesized with espeak-ng in the Speech Commands layout.

`make_corpus` scales the shipped 600-clip copy (`ssmts.data.speech_synth`) up to thousands or
tens of thousands of clips: it asks for n clips per word in each split, and draws the voices
from every espeak-ng language that reads the words itself, combined with every voice variant
(about 6,000 voices for the SC10 words in espeak-ng 1.51). Validation and test voices are never
heard in training. Every voice of a split says every word equally often (the k-th clip of each
word has the same voice), so a voice carries no information about the word; a split with more
clips per word than voices cycles through its voices again, with new random settings.

Every clip's pitch, speed, loudness, position in the 1 s window, background noise (white, pink,
brown or mains hum) and SNR are drawn in advance from a generator of its own, seeded by `seed`, its
split, word and index, so the corpus does not depend on the number of worker processes, and the same
seed (and espeak-ng version) gives the same bytes. A larger request holds a smaller one: with the
same seed and validation and test sizes, the validation and test clips are the same, and the first n
training clips of each word are those of a request for n (while the training voices outnumber the
clips per word), so learning curves read one test set and nested training sets.

A directory is a cache: rerunning the same request skips the clips already written (checked
against the SHA-256 in the manifest); a different request into the same directory is refused.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
import math
import os
import re
from pathlib import Path
from typing import Sequence

import numpy as np
import soundfile as sf

from ssmts.data.speech import CLIP_SAMPLES, SC10_WORDS, SC35_WORDS, SPEECH_COMMANDS_RATE, SPLIT_LISTS
from ssmts.data.speech_synth import (
    MANIFEST_NAME,
    NOISE_KINDS,
    _check_words,
    _place_with_noise,
    _run_espeak,
    espeak_variants,
    espeak_version,
    synthesize_word,
)
from ssmts.nn.resampling import positive_int

WORD_SETS = {"sc10": SC10_WORDS, "sc35": SC35_WORDS}
"""Word lists `make_corpus` knows by name."""

SPLITS = ("train", "val", "test")
SETTINGS_NAME = "corpus_settings.json"
"""The request a corpus directory was made with; a different request into it is refused."""

CORPUS_FORMAT = 2  # 2: each clip's settings from its own seeded generator, training voices in a fixed order
"""Version of the recipe below; a change that alters the clips must increase it."""

_PARTIAL_MANIFEST_NAME = ".manifest_partial.jsonl"
_MAX_SPEED_WPM = 450  # espeak-ng's fastest
_MANIFEST_FIELDS = (
    "file",
    "word",
    "split",
    "voice",
    "pitch",
    "speed_wpm",
    "level_dbfs",
    "offset_samples",
    "speech_samples",
    "noise",
    "snr_db",
    "noise_seed",
    "espeak_ng",
    "sha256",
)


def espeak_languages() -> list[str]:
    """Language voices of espeak-ng ("en-us", "de", ...), sorted, from `espeak-ng --voices`."""
    lines = _run_espeak(["--voices"]).stdout.splitlines()[1:]  # the first line is the header
    return sorted({line.split()[1] for line in lines if line.strip()})


def reads_words_itself(language: str, words: Sequence[str]) -> bool:
    """Whether espeak-ng's `language` voice pronounces all `words` by its own rules.

    For words it cannot read (e.g. Latin letters in a Cyrillic or Chinese voice) espeak-ng
    switches to another language, marked "(en)" in its phoneme output (`-x`); such a voice
    would sound like the English voice, not like a voice of its own.
    """
    try:
        phonemes = _run_espeak(["-q", "-x", "-v", language, " ".join(words)]).stdout
    except RuntimeError:  # listed under a language code that -v does not accept (chr-US-Qaaa-x-west in 1.51)
        return False
    return "(" not in phonemes


@functools.lru_cache(maxsize=8)
def corpus_voice_pool(words: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Every espeak-ng voice that reads `words` itself, as "language" and "language+variant".

    Returns {"english": (...), "other": (...)}, each sorted: the English accents (languages
    "en-*") and the other languages, each once plain and once with every variant of
    `espeak-ng --voices=variant`. Depends only on `words` and the espeak-ng installation.
    """
    languages = [language for language in espeak_languages() if reads_words_itself(language, words)]
    variants = espeak_variants()
    pool: dict[str, list[str]] = {"english": [], "other": []}
    for language in languages:
        group = "english" if language == "en" or language.startswith("en-") else "other"
        pool[group].append(language)
        pool[group].extend(f"{language}+{variant}" for variant in variants)
    return {group: tuple(sorted(voices)) for group, voices in pool.items()}


def make_corpus(
    out_dir: str | Path,
    words: str | Sequence[str] = "sc10",
    train_per_word: int = 300,
    val_per_word: int = 30,
    test_per_word: int = 50,
    seed: int = 0,
    english_fraction: float = 0.75,
    pitch_range: tuple[int, int] = (20, 80),
    speed_range: tuple[int, int] = (130, 230),
    level_dbfs_range: tuple[float, float] = (-24.0, -3.0),
    snr_db_range: tuple[float, float] = (5.0, 30.0),
    noise_kinds: Sequence[str] = NOISE_KINDS,
    jobs: int | None = None,
    progress: bool = True,
) -> Path:
    """Synthesize (or finish) a Speech Commands-format corpus in `out_dir`; returns `out_dir`.

    words: "sc10", "sc35" or a sequence of words (folder names).
    train_per_word, val_per_word, test_per_word: clips of every word in each split.
    english_fraction: share of each split's voices that are English accents; the others
        are voices of other languages reading the English words (foreign accents).
    pitch_range (espeak 0..99), speed_range (words per minute, 80..450): inclusive integer
        ranges; a word too long for 1 s at the drawn speed is spoken faster (the manifest
        records the speed used).
    level_dbfs_range: peak level of the speech, dB relative to full scale.
    snr_db_range: speech-to-noise power ratio (dB) of the background noise, whose kind is
        drawn uniformly from `noise_kinds` (see `ssmts.data.speech_synth.background_noise`).
    jobs: worker processes (espeak-ng runs once per clip); default: the available cores.

    Voices per split: val_per_word and test_per_word voices, at most a quarter of the voice
    pool each; training gets min(train_per_word, the rest). Output: `<word>/<voice>_nohash_<r>.wav`
    (16 kHz mono 16-bit PCM, 16000 samples; r counts the voice's repeats of the word),
    `validation_list.txt`, `testing_list.txt`, `synthesis_manifest.csv` (every clip's
    settings, the espeak-ng version and the SHA-256 of its file) and `corpus_settings.json`.
    """
    jobs = _default_jobs() if jobs is None else positive_int(jobs, "jobs")
    settings = _settings(
        words,
        train_per_word,
        val_per_word,
        test_per_word,
        seed,
        english_fraction,
        pitch_range,
        speed_range,
        level_dbfs_range,
        snr_db_range,
        noise_kinds,
    )
    plan = _plan(settings, corpus_voice_pool(tuple(settings["words"])))
    out_dir = Path(out_dir)
    _claim_directory(out_dir, settings)
    done = _finished_rows(out_dir)
    todo = [clip for clip in plan if clip["file"] not in done]
    partial_path = out_dir / _PARTIAL_MANIFEST_NAME
    with open(partial_path, "a", encoding="utf-8") as partial, _progress_bar(len(todo), progress) as bar:
        for row in _synthesize_all(todo, out_dir, jobs):
            done[row["file"]] = row
            partial.write(json.dumps(row) + "\n")
            partial.flush()  # an interrupted run keeps what it finished
            bar.update(1)

    by_split = {split: [clip["file"] for clip in plan if clip["split"] == split] for split in SPLITS}
    for list_name, split in zip(SPLIT_LISTS, ("val", "test")):
        (out_dir / list_name).write_text("".join(f"{line}\n" for line in by_split[split]), encoding="utf-8")
    with open(out_dir / MANIFEST_NAME, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=_MANIFEST_FIELDS)
        writer.writeheader()
        writer.writerows(done[clip["file"]] for clip in plan)
    partial_path.unlink()
    return out_dir


def _manifest_rows(directory: str | Path) -> list[dict[str, str]]:
    """The manifest's rows, in the plan's order."""
    with open(Path(directory) / MANIFEST_NAME, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def training_clip_index(directory: str | Path) -> dict[str, int]:
    """{file: k}: each training clip's index within its word, from the manifest (the plan's order), so
    that the clips with k < n are the training clips of a request for n a word (format 2). Empty for a
    directory without a manifest."""
    if not (Path(directory) / MANIFEST_NAME).is_file():
        return {}
    index, seen = {}, {}
    for row in _manifest_rows(directory):
        if row["split"] == "train":
            index[row["file"]] = seen.get(row["word"], 0)
            seen[row["word"]] = index[row["file"]] + 1
    return index


def describe_corpus(directory: str | Path) -> dict[str, dict[str, int]]:
    """Clips and distinct voices of each split of a corpus, from its manifest: {split: {"clips", "voices"}}."""
    rows = _manifest_rows(directory)
    return {
        split: {
            "clips": sum(row["split"] == split for row in rows),
            "voices": len({row["voice"] for row in rows if row["split"] == split}),
        }
        for split in SPLITS
    }


# ----------------------------------------------------------------------------- the request


def _settings(
    words,
    train_per_word,
    val_per_word,
    test_per_word,
    seed,
    english_fraction,
    pitch_range,
    speed_range,
    level_dbfs_range,
    snr_db_range,
    noise_kinds,
) -> dict:
    """The request as plain JSON values, checked; two requests make the same corpus iff these are equal."""
    if isinstance(words, str):
        if words.lower() not in WORD_SETS:
            raise ValueError(f"words must be one of {sorted(WORD_SETS)} or a sequence of words, got {words!r}")
        words = WORD_SETS[words.lower()]
    words = _check_words(words)
    if isinstance(noise_kinds, str):
        raise ValueError(f"noise_kinds must be a sequence of noise kinds, not the string {noise_kinds!r}")
    noise_kinds = list(noise_kinds)
    unknown = [kind for kind in noise_kinds if kind not in NOISE_KINDS]
    if unknown or not noise_kinds or len(set(noise_kinds)) != len(noise_kinds):
        raise ValueError(f"noise_kinds must be distinct kinds among {NOISE_KINDS}, got {noise_kinds}")
    if isinstance(english_fraction, bool) or not 0.0 <= english_fraction <= 1.0:
        raise ValueError(f"english_fraction must be in [0, 1], got {english_fraction!r}")
    ranges = {}
    for name, value, lowest, highest, kind in (
        ("pitch_range", pitch_range, 0, 99, int),
        ("speed_range", speed_range, 80, _MAX_SPEED_WPM, int),
        ("level_dbfs_range", level_dbfs_range, -60.0, 0.0, float),
        ("snr_db_range", snr_db_range, -20.0, 120.0, float),
    ):
        low, high = _pair(value, name)
        if kind is int and (int(low) != low or int(high) != high):
            raise ValueError(f"{name} must hold integers, got ({low}, {high})")
        if not lowest <= low <= high <= highest:
            raise ValueError(f"{name} must satisfy {lowest} <= low <= high <= {highest}, got ({low}, {high})")
        ranges[name] = [kind(low), kind(high)]
    return {
        "format": CORPUS_FORMAT,
        "espeak_ng": _espeak_release(),
        "words": words,
        "train_per_word": positive_int(train_per_word, "train_per_word"),
        "val_per_word": positive_int(val_per_word, "val_per_word"),
        "test_per_word": positive_int(test_per_word, "test_per_word"),
        "seed": _nonnegative_int(seed, "seed"),
        "english_fraction": float(english_fraction),
        **ranges,
        "noise_kinds": noise_kinds,
    }


def _claim_directory(out_dir: Path, settings: dict) -> None:
    """Create `out_dir` for this request, accept it if it holds (part of) the same request, or record a
    larger train_per_word in it (the clips already there are the first ones asked for: format 2 nests them)."""
    settings_path = out_dir / SETTINGS_NAME
    if out_dir.exists() and not out_dir.is_dir():
        raise FileExistsError(f"{out_dir} exists and is not a directory")
    if settings_path.is_file():
        try:
            existing = json.loads(settings_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise FileExistsError(f"{settings_path} is not valid JSON ({error}); choose a new directory") from error
        if existing == settings:
            return
        if not _grows(existing, settings):
            differences = "; ".join(
                f"{key}: {existing.get(key)!r} there, {settings.get(key)!r} asked"
                for key in _differing(existing, settings)
            )
            hint = (
                f"; its first {settings['train_per_word']} training clips of every word are the ones asked for "
                "(ssmts.data.speech_corpus.training_clip_index numbers them): use it as it is"
                if _grows(settings, existing)
                else ""
            )
            raise FileExistsError(
                f"{out_dir} holds a corpus made with other settings ({differences}){hint}; choose a new directory, "
                "or repeat the request it was made with to finish it"
            )
    elif out_dir.exists() and any(out_dir.iterdir()):
        raise FileExistsError(
            f"{out_dir} is not empty and has no {SETTINGS_NAME}, so it is not a corpus of this generator; "
            "choose a new or empty directory"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    settings_path.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")


def _differing(existing: dict, settings: dict) -> list[str]:
    return [key for key in sorted(set(existing) | set(settings)) if existing.get(key) != settings.get(key)]


def _grows(existing: dict, settings: dict) -> bool:
    """True if `settings` asks for more training clips a word of the corpus `existing` describes, and
    nothing else: then the corpus is grown in place (format 2 only, whose smaller corpora are prefixes)."""
    return (
        _differing(existing, settings) == ["train_per_word"]
        and existing.get("format") == CORPUS_FORMAT
        and isinstance(existing["train_per_word"], int)
        and isinstance(settings["train_per_word"], int)
        and settings["train_per_word"] > existing["train_per_word"]
    )


# ----------------------------------------------------------------------------- the plan


def _split_voices(settings: dict, pool: dict[str, tuple[str, ...]], rng: np.random.Generator) -> dict[str, list]:
    """Disjoint voice lists, in the order the clips use them: test, then validation, then training. The
    training list is a prefix of one fixed order of the voices left (English ones at the positions that
    keep english_fraction of every prefix), so that a larger corpus's training voices extend a smaller one's."""
    remaining = {group: [voices[i] for i in rng.permutation(len(voices))] for group, voices in pool.items()}
    quarter = (len(pool["english"]) + len(pool["other"])) // 4
    if quarter < 1:
        raise ValueError(
            f"espeak-ng has too few voices that read {settings['words']} themselves to split them by voice"
        )
    sizes = {"test": min(settings["test_per_word"], quarter), "val": min(settings["val_per_word"], quarter)}
    available = len(pool["english"]) + len(pool["other"]) - sizes["test"] - sizes["val"]
    sizes["train"] = min(settings["train_per_word"], available)
    voices = {}
    for split in ("test", "val"):
        n_english = min(round(settings["english_fraction"] * sizes[split]), len(remaining["english"]))
        n_other = min(sizes[split] - n_english, len(remaining["other"]))
        n_english = sizes[split] - n_other  # when the other languages run out, English voices fill in
        chosen = remaining["english"][:n_english] + remaining["other"][:n_other]
        remaining["english"] = remaining["english"][n_english:]
        remaining["other"] = remaining["other"][n_other:]
        voices[split] = [chosen[i] for i in rng.permutation(len(chosen))]
    english, other = iter(remaining["english"]), iter(remaining["other"])
    fraction, order = settings["english_fraction"], []
    for i in range(sizes["train"]):
        wants_english = math.floor(fraction * (i + 1) + 0.5) > math.floor(fraction * i + 0.5)
        first, second = (english, other) if wants_english else (other, english)
        order.append(next(first, None) or next(second))  # when one group runs out, the other fills in
    voices["train"] = order
    return voices


def _plan(settings: dict, pool: dict[str, tuple[str, ...]]) -> list[dict]:
    """Every clip's file name and random settings: the voices from a generator seeded by `seed`, the k-th
    clip of a word in a split from its own generator (seed, split, word, k)."""
    voices = _split_voices(settings, pool, np.random.default_rng(settings["seed"]))
    pitch, speed = settings["pitch_range"], settings["speed_range"]
    plan = []
    for split_index, split in enumerate(SPLITS):
        for word_index, word in enumerate(settings["words"]):
            for k in range(settings[f"{split}_per_word"]):
                rng = np.random.default_rng([settings["seed"], split_index, word_index, k])
                voice = voices[split][k % len(voices[split])]
                plan.append(
                    {
                        "file": f"{word}/{voice}_nohash_{k // len(voices[split])}.wav",
                        "word": word,
                        "split": split,
                        "voice": voice,
                        "pitch": int(rng.integers(pitch[0], pitch[1] + 1)),
                        "speed_wpm": int(rng.integers(speed[0], speed[1] + 1)),
                        "level_dbfs": round(float(rng.uniform(*settings["level_dbfs_range"])), 2),
                        "offset_fraction": float(rng.uniform()),
                        "noise": settings["noise_kinds"][int(rng.integers(len(settings["noise_kinds"])))],
                        "snr_db": round(float(rng.uniform(*settings["snr_db_range"])), 2),
                        "noise_seed": int(rng.integers(2**63)),
                        "espeak_ng": settings["espeak_ng"],
                    }
                )
    return plan


# ----------------------------------------------------------------------------- synthesis


def synthesize_clip(clip: dict, out_dir: str | Path) -> dict:
    """Speak, place and noise one planned clip, write it to `out_dir / clip["file"]`; returns its manifest row."""
    speed = clip["speed_wpm"]
    speech = synthesize_word(clip["word"], clip["voice"], clip["pitch"], speed, amplitude=100)
    while len(speech) > CLIP_SAMPLES:
        # Too long for the window at this speed: speak faster rather than cut the word.
        speed = math.ceil(speed * len(speech) / CLIP_SAMPLES * 1.05)
        if speed > _MAX_SPEED_WPM:
            raise ValueError(f"{clip['word']!r} spoken by {clip['voice']!r} lasts longer than 1 s even at 450 wpm")
        speech = synthesize_word(clip["word"], clip["voice"], clip["pitch"], speed, amplitude=100)
    speech = speech.astype(np.float64) * (10.0 ** (clip["level_dbfs"] / 20.0) / np.abs(speech).max())
    offset = int(clip["offset_fraction"] * (CLIP_SAMPLES - len(speech) + 1))
    noise_rng = np.random.default_rng(clip["noise_seed"])
    samples = _place_with_noise(speech, offset, clip["snr_db"], noise_rng, noise=clip["noise"])

    buffer = io.BytesIO()
    sf.write(buffer, samples, SPEECH_COMMANDS_RATE, format="WAV", subtype="PCM_16")
    data = buffer.getvalue()
    path = Path(out_dir) / clip["file"]
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".partial")
    temporary.write_bytes(data)
    os.replace(temporary, path)  # a clip is either whole or absent, even if the run is killed
    row = {key: clip[key] for key in _MANIFEST_FIELDS if key in clip}
    row.update(speed_wpm=speed, offset_samples=offset, speech_samples=len(speech))
    row["sha256"] = hashlib.sha256(data).hexdigest()
    return {key: row[key] for key in _MANIFEST_FIELDS}


def _synthesize_all(todo: list[dict], out_dir: Path, jobs: int):
    """Yield the manifest row of every clip in `todo`, in the order they finish."""
    if jobs == 1 or len(todo) <= 1:
        for clip in todo:
            yield synthesize_clip(clip, out_dir)
        return
    import multiprocessing

    # "spawn": the parent has imported torch, whose thread pools do not survive a fork.
    context = multiprocessing.get_context("spawn")
    with context.Pool(min(jobs, len(todo)), initializer=_init_worker) as pool:
        work = functools.partial(synthesize_clip, out_dir=out_dir)
        yield from pool.imap_unordered(work, todo, chunksize=4)


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)  # one process per core already; more threads would only compete


def _finished_rows(out_dir: Path) -> dict[str, dict]:
    """Manifest rows of the clips already in `out_dir` whose file still has the recorded SHA-256."""
    rows: list[dict] = []
    manifest = out_dir / MANIFEST_NAME
    if manifest.is_file():
        with open(manifest, newline="", encoding="utf-8") as handle:
            rows.extend(csv.DictReader(handle))
    partial = out_dir / _PARTIAL_MANIFEST_NAME
    if partial.is_file():
        for line in partial.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # the last line of a run killed while writing it
    finished = {}
    for row in rows:
        path = out_dir / row["file"]
        if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == row["sha256"]:
            finished[row["file"]] = {key: row[key] for key in _MANIFEST_FIELDS}
    return finished


def _progress_bar(total: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="synthesizing clips", unit="clip", disable=not enabled or total == 0)


# ----------------------------------------------------------------------------- argument checks


def _default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _espeak_release() -> str:
    """espeak-ng's version number, e.g. "1.51" (raises EspeakNotFoundError, with the install hint, if it is missing)."""
    line = espeak_version()
    match = re.search(r"text-to-speech:\s*(\S+)", line)
    return match.group(1) if match else line


def _pair(value, name: str) -> tuple:
    try:
        low, high = value
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a (low, high) pair, got {value!r}") from None
    for bound in (low, high):
        if isinstance(bound, bool) or not isinstance(bound, (int, float, np.integer, np.floating)):
            raise ValueError(f"{name} must hold numbers, got {value!r}")
    return low, high


def _nonnegative_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)
