"""Spoken commands synthesized with espeak-ng, written in the Speech Commands format.

An offline stand-in for Speech Commands: every word is spoken by a fixed set of
espeak-ng voices (English accents, voice variants, and a few non-English voices
reading the English word, i.e. foreign accents), with random pitch, speed,
loudness, position inside the 1 s window and white noise. Validation and test
clips come from voices never heard in training, like the speaker-disjoint
splits of the real data. The result loads with `ssmts.data.speech.load_speech_commands`.
For corpora of thousands of clips, from thousands of voices, see `ssmts.data.speech_corpus`.

Needs the espeak-ng program (Debian/Ubuntu: apt-get install espeak-ng). The audio
depends on the espeak-ng version, so record it with the data (the CLI does).
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np
import soundfile as sf

from ssmts.data.speech import CLIP_SAMPLES, SC10_WORDS, SC35_WORDS, SPEECH_COMMANDS_RATE, SPLIT_LISTS

ESPEAK_RATE = 22050
"""Sample rate (Hz) of espeak-ng's WAV output."""

DEFAULT_VOICES = (
    # American, New York, British (generic, Received Pronunciation, Scottish,
    # Lancaster, West Midlands) and Caribbean accents, each with several of
    # espeak-ng's male (+m), female (+f) and Klatt-synthesizer (+klatt) variants.
    "en-us",
    "en-us+f2",
    "en-us+m3",
    "en-us+klatt",
    "en-us-nyc+m4",
    "en-us-nyc+f4",
    "en-gb+m1",
    "en-gb+f3",
    "en-gb+m7",
    "en-gb-x-rp+m2",
    "en-gb-x-rp+f1",
    "en-gb-scotland",
    "en-gb-scotland+f5",
    "en-gb-x-gbclan+m5",
    "en-gb-x-gbclan+klatt3",
    "en-gb-x-gbcwmd+m6",
    "en-gb-x-gbcwmd+f2",
    "en-029",
    "en-029+klatt2",
    "en-029+f4",
    # German, Dutch, Spanish and Hindi voices reading the English words: the
    # pronunciation follows their own spelling rules, like a strong foreign accent.
    "de+m2",
    "nl+f1",
    "es+m8",
    "hi+klatt4",
)
"""24 espeak-ng voices ("language" or "language+variant"); all exist in espeak-ng 1.51."""

EXTRA_TEST_VOICES = (
    # The same eight English accents and the same kinds of variant (m1-m7, f1-f5, klatt-klatt4)
    # as DEFAULT_VOICES, in combinations DEFAULT_VOICES does not have: test voices only, so that
    # the shipped copy's test split is large enough to tell models apart (400 clips instead of 40).
    "en-us+m1",
    "en-us+m6",
    "en-us+f4",
    "en-us+f5",
    "en-us+klatt4",
    "en-us-nyc+m2",
    "en-us-nyc+m7",
    "en-us-nyc+f1",
    "en-us-nyc+klatt2",
    "en-gb+m4",
    "en-gb+f1",
    "en-gb+f5",
    "en-gb+klatt",
    "en-gb-x-rp+m3",
    "en-gb-x-rp+m6",
    "en-gb-x-rp+f2",
    "en-gb-x-rp+f4",
    "en-gb-x-rp+klatt2",
    "en-gb-scotland+m2",
    "en-gb-scotland+m5",
    "en-gb-scotland+f3",
    "en-gb-scotland+klatt3",
    "en-gb-x-gbclan+m1",
    "en-gb-x-gbclan+m7",
    "en-gb-x-gbclan+f2",
    "en-gb-x-gbclan+f4",
    "en-gb-x-gbclan+f5",
    "en-gb-x-gbcwmd+m3",
    "en-gb-x-gbcwmd+f1",
    "en-gb-x-gbcwmd+f5",
    "en-gb-x-gbcwmd+klatt",
    "en-029+m2",
    "en-029+m5",
    "en-029+m6",
    "en-029+f3",
    "en-029+klatt4",
)
"""36 English-accent espeak-ng voices, none in DEFAULT_VOICES: the shipped copy's test-only voices."""

MANIFEST_NAME = "synthesis_manifest.csv"
SETTINGS_NAME = "synthesis_settings.json"
"""The arguments a fixed-voice set was made with, the espeak-ng version, and the command that remakes it."""

NOISE_KINDS = ("white", "pink", "brown", "hum")
"""Background noises `background_noise` makes."""

HUM_HARMONICS = 8
_COLOURED_NOISE_LOW_HZ = 20.0

_VOICE_PATTERN = re.compile(r"^[A-Za-z0-9-]+(\+[A-Za-z0-9-]+)?$")
_WORD_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9' -]*$")
# Speech starts/ends where the waveform first/last exceeds this fraction of its peak.
_TRIM_FRACTION = 0.01


class EspeakNotFoundError(FileNotFoundError):
    """The espeak-ng program is not installed."""


def espeak_available() -> bool:
    """Whether the espeak-ng program is on PATH."""
    return shutil.which("espeak-ng") is not None


def espeak_variants() -> list[str]:
    """Names usable after "+" in a voice ("m3", "f2", "klatt", ...), from `espeak-ng --voices=variant`."""
    listing = _run_espeak(["--voices=variant"]).stdout
    return sorted(set(re.findall(r"!v/(\S+)", listing)))


def synthesize_word(
    word: str, voice: str = "en-us", pitch: int = 50, speed: int = 175, amplitude: int = 100
) -> np.ndarray:
    """Speak `word` with espeak-ng. Returns (length,) float32 at 16 kHz, silence trimmed at both ends.

    voice: "language" or "language+variant" (see `espeak-ng --voices`, `espeak_variants()`).
    pitch: 0..99 (espeak default 50); speed: words per minute (80..450, default 175);
    amplitude: 0..200 (default 100).
    """
    import torch
    import torchaudio.functional as AF

    _check_range(pitch, 0, 99, "pitch")
    _check_range(speed, 80, 450, "speed")
    _check_range(amplitude, 0, 200, "amplitude")
    with tempfile.TemporaryDirectory() as tmp:
        wav_path = Path(tmp) / "word.wav"
        _run_espeak(
            [
                "-w",
                str(wav_path),
                "-v",
                voice,
                "-p",
                str(int(pitch)),
                "-s",
                str(int(speed)),
                "-a",
                str(int(amplitude)),
                "--",
                word,
            ]
        )
        samples, rate = sf.read(str(wav_path), dtype="float32")
    if rate != ESPEAK_RATE:  # espeak-ng always writes 22050 Hz; anything else is a surprise worth seeing
        raise RuntimeError(f"espeak-ng wrote {rate} Hz audio, expected {ESPEAK_RATE} Hz")
    samples = AF.resample(torch.from_numpy(samples), ESPEAK_RATE, SPEECH_COMMANDS_RATE).numpy()
    loud = np.flatnonzero(np.abs(samples) > _TRIM_FRACTION * np.abs(samples).max(initial=0.0))
    if len(loud) == 0:
        raise RuntimeError(f"espeak-ng produced silence for word {word!r} with voice {voice!r}")
    return np.ascontiguousarray(samples[loud[0] : loud[-1] + 1])


def synthesize_spoken_commands(
    out_dir: str | Path,
    words: Sequence[str] = SC10_WORDS,
    voices: Sequence[str] = DEFAULT_VOICES,
    clips_per_voice: int = 1,
    val_fraction: float = 0.15,
    test_fraction: float = 0.15,
    pitch_range: tuple[int, int] = (30, 70),
    speed_range: tuple[int, int] = (140, 200),
    amplitude_range: tuple[int, int] = (60, 110),
    snr_db_range: tuple[float, float] = (10.0, 30.0),
    random_state: int = 0,
    extra_test_voices: Sequence[str] = (),
) -> dict[str, list[str]]:
    """Write a Speech Commands-format data set of espeak-ng clips into the empty directory `out_dir`.

    Every word is spoken `clips_per_voice` times by every voice, each time with pitch,
    speed (wpm) and espeak amplitude drawn uniformly from the given inclusive ranges,
    placed at a uniform random offset inside the 1 s window, plus white noise at an
    SNR (dB, relative to the speech part) drawn from `snr_db_range`.

    Output: `<word>/<voice>_nohash_<k>.wav` (16 kHz mono 16-bit PCM, 16000 samples),
    `validation_list.txt` and `testing_list.txt` split BY VOICE (round(fraction * n_voices)
    voices each, at least one when the fraction is > 0), `synthesis_manifest.csv`
    with the parameters of every clip, and `synthesis_settings.json` with these arguments, the
    espeak-ng version and the `make_spoken_commands` command that remakes the set.
    Deterministic for a given `random_state` and espeak-ng version.

    extra_test_voices: voices (not in `voices`) that speak test clips only, on top of the
    test voices split off `voices`. Their settings come from a generator of their own (a
    child of `random_state`'s), so adding them leaves every clip of `voices` byte-identical:
    the shipped copy is DEFAULT_VOICES plus EXTRA_TEST_VOICES.

    Returns the voices of each split: {"train": [...], "val": [...], "test": [...]}; the
    extra test voices come last in "test".
    """
    if not espeak_available():
        raise EspeakNotFoundError(
            "espeak-ng is not installed (or not on PATH); install it with `apt-get install espeak-ng` "
            "(Debian/Ubuntu) or `brew install espeak-ng` (macOS)"
        )
    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise FileExistsError(f"{out_dir} exists and is not an empty directory; choose a new output directory")
    words = _check_words(words)
    if isinstance(extra_test_voices, str):
        raise ValueError(f"extra_test_voices must be a sequence of voice names, not the string {extra_test_voices!r}")
    extra_test_voices = list(extra_test_voices)
    both = _check_voices(list(voices) + extra_test_voices)  # names, variants, and no voice in both lists
    voices = both[: len(both) - len(extra_test_voices)]
    if int(clips_per_voice) != clips_per_voice or clips_per_voice < 1:
        raise ValueError(f"clips_per_voice must be a positive integer, got {clips_per_voice!r}")
    for name, (low, high), lowest, highest in (
        ("pitch_range", pitch_range, 0, 99),
        ("speed_range", speed_range, 80, 450),
        ("amplitude_range", amplitude_range, 0, 200),
        ("snr_db_range", snr_db_range, -20, 120),
    ):
        if not lowest <= low <= high <= highest:
            raise ValueError(f"{name} must satisfy {lowest} <= low <= high <= {highest}, got ({low}, {high})")

    seed = np.random.SeedSequence(random_state)
    rng = np.random.default_rng(seed)
    # A child of the seed, not draws from rng: rng draws exactly what it drew before extra voices existed.
    extra_rng = np.random.default_rng(seed.spawn(1)[0])
    voices_by_split = _split_voices(voices, val_fraction, test_fraction, rng)
    voices_by_split["test"] += extra_test_voices
    split_of_voice = {voice: split for split, members in voices_by_split.items() for voice in members}

    out_dir.mkdir(parents=True, exist_ok=True)
    split_lists: dict[str, list[str]] = {"val": [], "test": []}
    manifest = []
    for word in words:
        (out_dir / word).mkdir()
        speakers = [(voice, rng) for voice in voices] + [(voice, extra_rng) for voice in extra_test_voices]
        for voice, draw in speakers:
            for k in range(clips_per_voice):
                pitch = int(draw.integers(pitch_range[0], pitch_range[1] + 1))
                speed = int(draw.integers(speed_range[0], speed_range[1] + 1))
                amplitude = int(draw.integers(amplitude_range[0], amplitude_range[1] + 1))
                snr_db = float(draw.uniform(*snr_db_range))
                speech = synthesize_word(word, voice, pitch, speed, amplitude)
                if len(speech) > CLIP_SAMPLES:
                    raise ValueError(
                        f"{word!r} spoken by {voice!r} at {speed} wpm lasts "
                        f"{len(speech) / SPEECH_COMMANDS_RATE:.2f} s, "
                        "longer than the 1 s clip; raise speed_range"
                    )
                offset = int(draw.integers(0, CLIP_SAMPLES - len(speech) + 1))
                clip = _place_with_noise(speech, offset, snr_db, draw)

                relative = f"{word}/{voice}_nohash_{k}.wav"
                sf.write(str(out_dir / relative), clip, SPEECH_COMMANDS_RATE, subtype="PCM_16")
                split = split_of_voice[voice]
                if split in split_lists:
                    split_lists[split].append(relative)
                manifest.append(
                    {
                        "file": relative,
                        "word": word,
                        "voice": voice,
                        "split": split,
                        "pitch": pitch,
                        "speed_wpm": speed,
                        "amplitude": amplitude,
                        "offset_samples": offset,
                        "speech_samples": len(speech),
                        "snr_db": round(snr_db, 2),
                    }
                )

    for list_name, split in zip(SPLIT_LISTS, ("val", "test")):
        (out_dir / list_name).write_text("".join(f"{line}\n" for line in split_lists[split]), encoding="utf-8")
    with open(out_dir / MANIFEST_NAME, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(manifest[0]))
        writer.writeheader()
        writer.writerows(manifest)
    settings = {
        "function": "ssmts.data.speech_synth.synthesize_spoken_commands",
        "words": words,
        "voices": voices,
        "extra_test_voices": extra_test_voices,
        "clips_per_voice": int(clips_per_voice),
        "val_fraction": val_fraction,
        "test_fraction": test_fraction,
        "pitch_range": list(pitch_range),
        "speed_range": list(speed_range),
        "amplitude_range": list(amplitude_range),
        "snr_db_range": list(snr_db_range),
        "random_state": random_state,
        "espeak_ng": _espeak_version_number(),
        "splits": voices_by_split,
    }
    settings = {"command": _equivalent_command(settings), **settings}
    (out_dir / SETTINGS_NAME).write_text(json.dumps(settings, indent=1) + "\n", encoding="utf-8")
    return voices_by_split


def _equivalent_command(settings: dict) -> str:
    """The `python -m ssmts.data.make_spoken_commands` line that remakes a set (output directory OUT).

    settings: synthesize_spoken_commands's arguments; those at the command's defaults are left out.
    """
    parts = ["python -m ssmts.data.make_spoken_commands --out OUT", f"--seed {settings['random_state']}"]
    words = settings["words"]
    if words != list(SC10_WORDS):
        parts.append("--words " + ("sc35" if words == list(SC35_WORDS) else ",".join(words)))
    default_set = settings["voices"] == list(DEFAULT_VOICES)
    if not default_set:
        parts.append("--voices " + ",".join(settings["voices"]))
    if settings["extra_test_voices"] != (list(EXTRA_TEST_VOICES) if default_set else []):
        parts.append("--extra-test-voices " + (",".join(settings["extra_test_voices"]) or "none"))
    defaults = {
        "clips_per_voice": 1,
        "val_fraction": 0.15,
        "test_fraction": 0.15,
        "pitch_range": [30, 70],
        "speed_range": [140, 200],
        "amplitude_range": [60, 110],
        "snr_db_range": [10.0, 30.0],
    }
    for name, default in defaults.items():
        value = settings[name]
        if value != default:
            option = "--" + name.removesuffix("_range").replace("_", "-")
            parts.append(f"{option} {' '.join(map(str, value)) if isinstance(value, list) else value}")
    return " ".join(parts)


def _espeak_version_number() -> str:
    """ "1.51" from `espeak-ng --version` (the rest of the line names a local data path)."""
    match = re.search(r"text-to-speech:\s*(\S+)", espeak_version())
    return match.group(1) if match else espeak_version()


def espeak_version() -> str:
    """The first line of `espeak-ng --version`, e.g. "eSpeak NG text-to-speech: 1.51 ..."."""
    return _run_espeak(["--version"]).stdout.strip().splitlines()[0]


def background_noise(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` samples at 16 kHz of background noise of expected power 1. Returns (n,) float64.

    kind: "white" (flat spectrum); "pink" (power spectral density ~ 1/f) and "brown"
    (~ 1/f^2), both between 20 Hz and the Nyquist frequency so that the power is
    audible rather than a sub-audible drift; "hum" (mains hum: a 50 or 60 Hz
    fundamental and its first HUM_HARMONICS harmonics, amplitudes ~ 1/h times a
    random factor in [0.5, 1], random phases).
    """
    if kind not in NOISE_KINDS:
        raise ValueError(f"noise kind must be one of {NOISE_KINDS}, got {kind!r}")
    if kind == "white":
        return rng.standard_normal(n)
    if kind == "hum":
        fundamental = float(rng.choice((50.0, 60.0)))
        harmonics = np.arange(1, HUM_HARMONICS + 1)
        amplitudes = rng.uniform(0.5, 1.0, HUM_HARMONICS) / harmonics
        phases = rng.uniform(0.0, 2 * np.pi, HUM_HARMONICS)
        t = np.arange(n) / SPEECH_COMMANDS_RATE
        hum = (amplitudes[:, None] * np.sin(2 * np.pi * fundamental * harmonics[:, None] * t + phases[:, None])).sum(0)
        # A sine of amplitude a has power a^2 / 2 (over whole periods: 1 s holds 50 or 60 of them).
        return hum / np.sqrt(np.sum(amplitudes**2) / 2)
    # Coloured noise: shape the spectrum of white noise with the amplitude response
    # f^(-exponent / 2). The n-point DFT of unit white noise has E|X_k|^2 = n, so the
    # shaped signal has expected power mean_k |H_k|^2 over all n bins (both halves).
    exponent = {"pink": 1.0, "brown": 2.0}[kind]
    frequencies = np.fft.rfftfreq(n, d=1.0 / SPEECH_COMMANDS_RATE)
    response = np.zeros_like(frequencies)
    audible = frequencies >= _COLOURED_NOISE_LOW_HZ
    response[audible] = frequencies[audible] ** (-exponent / 2)
    # Bins other than DC and (for even n) Nyquist stand for two bins of the full spectrum.
    weights = np.full(len(frequencies), 2.0)
    weights[0] = 1.0
    if n % 2 == 0:
        weights[-1] = 1.0
    response /= np.sqrt(np.sum(weights * response**2) / n)
    return np.fft.irfft(response * np.fft.rfft(rng.standard_normal(n)), n)


def _place_with_noise(
    speech: np.ndarray, offset: int, snr_db: float, rng: np.random.Generator, noise: str = "white"
) -> np.ndarray:
    """Put `speech` at `offset` in a 1 s window and add `noise` at `snr_db`. Returns (16000,) float32."""
    clip = np.zeros(CLIP_SAMPLES, dtype=np.float64)
    clip[offset : offset + len(speech)] = speech
    # SNR against the power of the speech itself, not of the mostly silent window,
    # so the same SNR sounds alike for short and long words.
    speech_power = float(np.mean(np.square(speech, dtype=np.float64)))
    noise_std = np.sqrt(speech_power / 10.0 ** (snr_db / 10.0))
    clip += noise_std * background_noise(noise, CLIP_SAMPLES, rng)
    peak = np.abs(clip).max()
    if peak > 0.99:  # scale down rather than clip: clipping would add distortion the SNR does not describe
        clip *= 0.99 / peak
    return clip.astype(np.float32)


def _split_voices(
    voices: list[str], val_fraction: float, test_fraction: float, rng: np.random.Generator
) -> dict[str, list[str]]:
    for name, fraction in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
        if not 0.0 <= fraction < 1.0:
            raise ValueError(f"{name} must be in [0, 1), got {fraction}")
    n = len(voices)
    n_test = max(1, round(test_fraction * n)) if test_fraction > 0 else 0
    n_val = max(1, round(val_fraction * n)) if val_fraction > 0 else 0
    if n - n_test - n_val < 1:
        raise ValueError(
            f"{n} voices cannot give {n_val} validation and {n_test} test voices and still leave a "
            "training voice; add voices or lower val_fraction / test_fraction"
        )
    order = [voices[i] for i in rng.permutation(n)]
    return {
        "train": sorted(order[n_test + n_val :]),
        "val": sorted(order[n_test : n_test + n_val]),
        "test": sorted(order[:n_test]),
    }


def _check_words(words: Sequence[str]) -> list[str]:
    if isinstance(words, str):
        raise ValueError(f"words must be a sequence of words, not the string {words!r}")
    words = list(words)
    if not words:
        raise ValueError("words is empty")
    if len(set(words)) != len(words):
        raise ValueError(f"words has duplicates: {words}")
    bad = [w for w in words if not isinstance(w, str) or not _WORD_PATTERN.match(w)]
    if bad:
        raise ValueError(f"words must be letters, digits, spaces, hyphens or apostrophes (they name folders): {bad}")
    return words


def _check_voices(voices: Sequence[str]) -> list[str]:
    if isinstance(voices, str):
        raise ValueError(f"voices must be a sequence of voice names, not the string {voices!r}")
    voices = list(voices)
    if len(set(voices)) != len(voices):
        raise ValueError(f"voices has duplicates: {voices}")
    malformed = [v for v in voices if not isinstance(v, str) or not _VOICE_PATTERN.match(v)]
    if malformed:
        raise ValueError(f"voices must look like 'en-us' or 'en-us+f2': {malformed}")
    if len(voices) < 2:
        raise ValueError("need at least 2 voices: validation and test voices are held out from training")
    # espeak-ng falls back silently to the plain voice for an unknown variant, so check
    # variants here; an unknown language makes espeak-ng fail, reported by _run_espeak.
    known = set(espeak_variants())
    unknown = sorted({v.split("+")[1] for v in voices if "+" in v} - known)
    if unknown:
        raise ValueError(f"espeak-ng has no voice variants {unknown}; available: {', '.join(sorted(known))}")
    for language in sorted({v.split("+")[0] for v in voices}):
        try:
            _run_espeak(["-q", "-v", language, "x"])
        except RuntimeError as error:
            raise ValueError(f"espeak-ng has no voice {language!r} (see `espeak-ng --voices`): {error}") from error
    return voices


def _run_espeak(arguments: list[str]) -> subprocess.CompletedProcess:
    executable = shutil.which("espeak-ng")
    if executable is None:
        raise EspeakNotFoundError(
            "espeak-ng is not installed (or not on PATH); install it with `apt-get install espeak-ng` "
            "(Debian/Ubuntu) or `brew install espeak-ng` (macOS)"
        )
    result = subprocess.run([executable, *arguments], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(
            f"espeak-ng {' '.join(arguments)} failed (exit {result.returncode}): {result.stderr.strip()}"
        )
    return result


def _check_range(value: int, low: int, high: int, name: str) -> None:
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value}")
