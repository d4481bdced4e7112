"""Spoken-command corpora of any size: background noises, voice pool, splits, determinism, cache, CLI."""

from __future__ import annotations

import csv
import hashlib
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from scipy.signal import welch

from ssmts.data import speech_corpus, speech_synth
from ssmts.data.make_spoken_commands import main as make_spoken_commands
from ssmts.data.speech import SC35_WORDS, load_speech_commands

RATE = 16000
needs_espeak = pytest.mark.skipif(not speech_synth.espeak_available(), reason="espeak-ng is not installed")
TINY = dict(words=["yes", "stop"], train_per_word=3, val_per_word=2, test_per_word=2, seed=5, progress=False)
_SETTINGS = dict(
    words="sc10",
    train_per_word=300,
    val_per_word=30,
    test_per_word=50,
    seed=0,
    english_fraction=0.75,
    pitch_range=(20, 80),
    speed_range=(130, 230),
    level_dbfs_range=(-24.0, -3.0),
    snr_db_range=(5.0, 30.0),
    noise_kinds=speech_synth.NOISE_KINDS,
)


def _manifest(directory: Path) -> list[dict]:
    with open(directory / speech_synth.MANIFEST_NAME, newline="") as handle:
        return list(csv.DictReader(handle))


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def _copy(corpus: Path, destination: Path) -> Path:
    for relative, data in _files(corpus).items():
        (destination / relative).parent.mkdir(parents=True, exist_ok=True)
        (destination / relative).write_bytes(data)
    return destination


def _record_synthesis(monkeypatch) -> list[dict]:
    """The clips make_corpus synthesizes from now on (they are still synthesized)."""
    synthesized, original = [], speech_corpus.synthesize_clip
    monkeypatch.setattr(
        speech_corpus, "synthesize_clip", lambda clip, out_dir: synthesized.append(clip) or original(clip, out_dir)
    )
    return synthesized


# ----------------------------------------------------------------------------- background noise (no espeak-ng)


@pytest.mark.parametrize("kind", speech_synth.NOISE_KINDS)
def test_background_noise_has_unit_expected_power(kind):
    rng = np.random.default_rng(0)
    powers = [np.mean(speech_synth.background_noise(kind, RATE, rng) ** 2) for _ in range(200)]
    # 200 draws of 16000 samples: the mean power of white noise is within ~0.1 % of 1; coloured
    # noise has fewer effective degrees of freedom (its power sits in the low bins), so 3 %.
    assert np.mean(powers) == pytest.approx(1.0, rel=0.03)
    if kind == "hum":  # a sum of whole periods of sines: the power is exact in every draw
        np.testing.assert_allclose(powers, 1.0, rtol=1e-9)


@pytest.mark.parametrize("kind, slope", [("white", 0.0), ("pink", -1.0), ("brown", -2.0)])
def test_coloured_noise_spectral_slope(kind, slope):
    rng = np.random.default_rng(1)
    noise = np.concatenate([speech_synth.background_noise(kind, RATE, rng) for _ in range(40)])
    frequencies, density = welch(noise, fs=RATE, nperseg=4096)
    band = (frequencies >= 100) & (frequencies <= 4000)
    fitted = np.polyfit(np.log(frequencies[band]), np.log(density[band]), 1)[0]
    assert fitted == pytest.approx(slope, abs=0.1)
    if kind != "white":  # nothing below 20 Hz: no sub-audible drift
        spectrum = np.abs(np.fft.rfft(speech_synth.background_noise(kind, RATE, rng)))
        assert spectrum[:20].max() < 1e-12 * spectrum.max() and spectrum[20:].min() > 0


def test_hum_is_mains_frequency_and_harmonics():
    for seed in range(6):
        hum = speech_synth.background_noise("hum", RATE, np.random.default_rng(seed))
        spectrum = np.abs(np.fft.rfft(hum))  # 1 Hz bins
        peaks = np.flatnonzero(spectrum > 1e-6 * spectrum.max())
        fundamental = peaks[0]
        assert fundamental in (50, 60)
        np.testing.assert_array_equal(peaks, fundamental * np.arange(1, speech_synth.HUM_HARMONICS + 1))


def test_background_noise_rejects_unknown_kind():
    with pytest.raises(ValueError, match="noise kind must be one of"):
        speech_synth.background_noise("purple", 10, np.random.default_rng(0))


# ----------------------------------------------------------------------------- arguments (checked before espeak-ng)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(words="sc11"), "words must be one of"),
        (dict(words="yes"), "words must be one of"),
        (dict(words=["yes", "yes"]), "duplicates"),
        (dict(train_per_word=0), "train_per_word must be a positive integer"),
        (dict(test_per_word=2.5), "test_per_word must be a positive integer"),
        (dict(seed=-1), "seed must be a non-negative integer"),
        (dict(english_fraction=1.5), r"english_fraction must be in \[0, 1\]"),
        (dict(noise_kinds=["purple"]), "noise_kinds must be distinct kinds"),
        (dict(noise_kinds="white"), "not the string"),
        (dict(pitch_range=(50, 40)), "pitch_range must satisfy"),
        (dict(speed_range=(100.5, 200)), "speed_range must hold integers"),
        (dict(level_dbfs_range=(-10, 3)), "level_dbfs_range must satisfy"),
        (dict(snr_db_range=10), r"snr_db_range must be a \(low, high\) pair"),
        (dict(jobs=0), "jobs must be a positive integer"),
    ],
)
def test_bad_arguments_are_named(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        speech_corpus.make_corpus(tmp_path / "out", **{**TINY, **change})
    assert not (tmp_path / "out").exists(), "nothing is written for a rejected request"


def test_missing_espeak_is_reported(monkeypatch, tmp_path):
    monkeypatch.setattr(speech_synth.shutil, "which", lambda name: None)
    with pytest.raises(speech_synth.EspeakNotFoundError, match="apt-get install espeak-ng"):
        speech_corpus.make_corpus(tmp_path / "out", **TINY)


# ----------------------------------------------------------------------------- with espeak-ng


@needs_espeak
def test_voice_pool_keeps_voices_that_read_the_words():
    assert speech_corpus.reads_words_itself("en-us", ["yes"])
    assert not speech_corpus.reads_words_itself("ru", ["yes"]), "Russian reads Latin letters by switching to English"
    pool = speech_corpus.corpus_voice_pool(tuple(SC35_WORDS))
    english, other = set(pool["english"]), set(pool["other"])
    assert not english & other and len(english) == len(pool["english"]) and len(other) == len(pool["other"])
    assert {voice.split("+")[0] for voice in english} >= {"en-us", "en-gb", "en-gb-scotland", "en-029"}
    assert all(not voice.startswith("en") for voice in other) and "ru" not in {v.split("+")[0] for v in other}
    variants = speech_synth.espeak_variants()
    assert "en-us" in english and {f"en-us+{variant}" for variant in variants} <= english
    assert pool == speech_corpus.corpus_voice_pool(tuple(SC35_WORDS)), "the pool is a function of the words"


@needs_espeak
@pytest.mark.parametrize("train_per_word", [1, 100, 1000, 10_000])
def test_training_voices_grow_with_the_corpus_and_stay_balanced(train_per_word):
    settings = speech_corpus._settings(**{**_SETTINGS, "train_per_word": train_per_word})
    pool = speech_corpus.corpus_voice_pool(tuple(settings["words"]))
    plan = speech_corpus._plan(settings, pool)  # draws the settings only: nothing is synthesized
    voices = {split: {clip["voice"] for clip in plan if clip["split"] == split} for split in speech_corpus.SPLITS}
    assert (len(voices["val"]), len(voices["test"])) == (30, 50)
    assert not voices["val"] & voices["test"] and not voices["train"] & (voices["val"] | voices["test"])
    n_pool = len(pool["english"]) + len(pool["other"])
    assert len(voices["train"]) == min(train_per_word, n_pool - 80)
    said = {(split, word): Counter() for split in speech_corpus.SPLITS for word in settings["words"]}
    for clip in plan:
        said[clip["split"], clip["word"]][clip["voice"]] += 1
    for (split, _), counts in said.items():  # every voice of a split says each word as often, give or take one
        assert set(counts) == voices[split] and sum(counts.values()) == settings[f"{split}_per_word"]
        assert max(counts.values()) - min(counts.values()) <= 1
    if 100 <= train_per_word <= 1000:  # beyond, the English voices run out and the others fill in
        assert np.mean([voice.startswith("en") for voice in voices["train"]]) == pytest.approx(0.75, abs=0.01)
    assert len({clip["file"] for clip in plan}) == len(plan), "file names are unique"


@needs_espeak
def test_a_larger_corpus_holds_a_smaller_one():
    # Learning curves read one test set and nested training sets: 100 clips a word inside 1,000.
    pool = speech_corpus.corpus_voice_pool(tuple(speech_corpus.WORD_SETS["sc10"]))
    plans = {
        n: speech_corpus._plan(speech_corpus._settings(**{**_SETTINGS, "train_per_word": n}), pool) for n in (100, 1000)
    }
    by_file = {n: {clip["file"]: clip for clip in plan} for n, plan in plans.items()}
    small, large = by_file[100], by_file[1000]
    assert all(large[name] == clip for name, clip in small.items()), "every clip of the smaller corpus, the same"
    for split in ("val", "test"):
        assert [c for c in plans[100] if c["split"] == split] == [c for c in plans[1000] if c["split"] == split]
    assert sum(clip["split"] == "train" for clip in large.values()) == 10 * sum(
        clip["split"] == "train" for clip in small.values()
    )
    other_seed = speech_corpus._plan(speech_corpus._settings(**{**_SETTINGS, "train_per_word": 100, "seed": 1}), pool)
    assert [c["pitch"] for c in other_seed] != [c["pitch"] for c in plans[100]]


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory) -> Path:
    return speech_corpus.make_corpus(tmp_path_factory.mktemp("corpus") / "tiny", jobs=1, **TINY)


@needs_espeak
def test_tiny_corpus_layout_splits_and_manifest(tiny_corpus):
    assert speech_corpus.describe_corpus(tiny_corpus) == {
        "train": {"clips": 6, "voices": 3},
        "val": {"clips": 4, "voices": 2},
        "test": {"clips": 4, "voices": 2},
    }
    rows = _manifest(tiny_corpus)
    assert len(rows) == 14 and len({row["file"] for row in rows}) == 14
    voices = {split: {row["voice"] for row in rows if row["split"] == split} for split in speech_corpus.SPLITS}
    assert not voices["train"] & voices["val"] and not voices["train"] & voices["test"]
    assert not voices["val"] & voices["test"]
    for split, members in voices.items():  # every voice of a split says every word equally often
        for voice in members:
            assert sorted(row["word"] for row in rows if row["voice"] == voice) == ["stop", "yes"]

    settings = json.loads((tiny_corpus / speech_corpus.SETTINGS_NAME).read_text())
    assert settings["espeak_ng"] == speech_synth.espeak_version().split(":")[1].split()[0]
    assert settings["words"] == ["yes", "stop"] and settings["seed"] == 5
    for row in rows:
        path = tiny_corpus / row["file"]
        assert row["file"] == f"{row['word']}/{row['voice']}_nohash_0.wav" and row["espeak_ng"] == settings["espeak_ng"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == row["sha256"]
        info = sf.info(str(path))
        assert (info.samplerate, info.channels, info.frames, info.subtype) == (RATE, 1, RATE, "PCM_16")
        assert row["noise"] in speech_synth.NOISE_KINDS and 5.0 <= float(row["snr_db"]) <= 30.0
        assert 20 <= int(row["pitch"]) <= 80 and 130 <= int(row["speed_wpm"]) <= 230
        assert 0 <= int(row["offset_samples"]) <= RATE - int(row["speech_samples"])
        samples, _ = sf.read(str(path))
        assert 0.0 < np.abs(samples).max() <= 0.99 + 1 / 32768, "scaled down, never clipped"
    assert not (tiny_corpus / ".manifest_partial.jsonl").exists()

    data = load_speech_commands(tiny_corpus, words="all")
    assert data.classes == ["stop", "yes"] and (len(data.train), len(data.val), len(data.test)) == (6, 4, 4)
    for name, list_name in (("val", "validation_list.txt"), ("test", "testing_list.txt")):
        listed = (tiny_corpus / list_name).read_text().split()
        assert sorted(listed) == sorted(row["file"] for row in rows if row["split"] == name)


@needs_espeak
def test_same_seed_same_bytes_for_any_number_of_jobs(tiny_corpus, tmp_path):
    again = speech_corpus.make_corpus(tmp_path / "again", jobs=2, **TINY)
    assert _files(again) == _files(tiny_corpus)
    other = speech_corpus.make_corpus(tmp_path / "other", jobs=1, **{**TINY, "seed": 6})
    assert _files(other)[speech_synth.MANIFEST_NAME] != _files(tiny_corpus)[speech_synth.MANIFEST_NAME]


@needs_espeak
def test_rerun_skips_finished_clips_and_redoes_damaged_ones(tiny_corpus, tmp_path, monkeypatch):
    copy = _copy(tiny_corpus, tmp_path / "copy")
    rows = _manifest(copy)
    (copy / rows[0]["file"]).unlink()
    (copy / rows[7]["file"]).write_bytes(b"RIFF truncated")
    synthesized = _record_synthesis(monkeypatch)
    speech_corpus.make_corpus(copy, jobs=1, **TINY)
    assert sorted(clip["file"] for clip in synthesized) == sorted([rows[0]["file"], rows[7]["file"]])
    assert _files(copy) == _files(tiny_corpus)
    synthesized.clear()
    speech_corpus.make_corpus(copy, jobs=1, **TINY)
    assert synthesized == []


@needs_espeak
def test_interrupted_run_is_finished_by_the_same_command(tiny_corpus, tmp_path, monkeypatch):
    original = speech_corpus.synthesize_clip
    calls = []

    def fail_after_five(clip, out_dir):
        calls.append(clip["file"])
        if len(calls) > 5:
            raise KeyboardInterrupt
        return original(clip, out_dir)

    monkeypatch.setattr(speech_corpus, "synthesize_clip", fail_after_five)
    with pytest.raises(KeyboardInterrupt):
        speech_corpus.make_corpus(tmp_path / "c", jobs=1, **TINY)
    assert len(list((tmp_path / "c").rglob("*.wav"))) == 5
    monkeypatch.setattr(speech_corpus, "synthesize_clip", original)
    speech_corpus.make_corpus(tmp_path / "c", jobs=1, **TINY)
    assert _files(tmp_path / "c") == _files(tiny_corpus)


@needs_espeak
def test_a_different_request_into_the_same_directory_is_refused(tiny_corpus, tmp_path):
    before = _files(tiny_corpus)
    with pytest.raises(FileExistsError, match=r"other settings \(train_per_word: 3 there, 2 asked\); its first 2"):
        speech_corpus.make_corpus(tiny_corpus, **{**TINY, "train_per_word": 2})
    with pytest.raises(FileExistsError, match=r"train_per_word: 3 there, 4 asked; val_per_word: 2 there, 3 asked\)"):
        speech_corpus.make_corpus(tiny_corpus, **{**TINY, "train_per_word": 4, "val_per_word": 3})
    with pytest.raises(FileExistsError, match="seed: 5 there, 6 asked"):
        speech_corpus.make_corpus(tiny_corpus, **{**TINY, "seed": 6})
    assert _files(tiny_corpus) == before
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "notes.txt").write_text("x")
    with pytest.raises(FileExistsError, match="not empty and has no corpus_settings.json"):
        speech_corpus.make_corpus(tmp_path / "used", **TINY)


@needs_espeak
def test_a_larger_request_grows_the_corpus_in_place(tiny_corpus, tmp_path, monkeypatch):
    grown = _copy(tiny_corpus, tmp_path / "grown")
    synthesized = _record_synthesis(monkeypatch)
    speech_corpus.make_corpus(grown, jobs=1, **{**TINY, "train_per_word": 5})
    assert len(synthesized) == 4 and {clip["split"] for clip in synthesized} == {"train"}, "only the new clips"
    monkeypatch.undo()
    fresh = speech_corpus.make_corpus(tmp_path / "fresh", jobs=1, **{**TINY, "train_per_word": 5})
    assert _files(grown) == _files(fresh)
    assert speech_corpus.describe_corpus(grown)["train"] == {"clips": 10, "voices": 5}


@needs_espeak
def test_a_word_too_long_for_the_window_is_spoken_faster(tmp_path):
    clip = dict(
        file="long/en-us_nohash_0.wav",
        word="forward and backward and forward",
        split="train",
        voice="en-us",
        pitch=50,
        speed_wpm=80,
        level_dbfs=-6.0,
        offset_fraction=0.5,
        noise="pink",
        snr_db=20.0,
        noise_seed=1,
        espeak_ng="1.51",
    )
    row = speech_corpus.synthesize_clip(clip, tmp_path)
    assert row["speed_wpm"] > 80 and row["speech_samples"] <= RATE
    assert sf.info(str(tmp_path / clip["file"])).frames == RATE


@needs_espeak
def test_command_line(tmp_path, capsys):
    arguments = ["--out", str(tmp_path / "c"), "--words", "yes,stop", "--train-per-word", "3"]
    arguments += ["--val-per-word", "2", "--test-per-word", "2", "--seed", "5", "--jobs", "1", "--quiet"]
    assert make_spoken_commands(arguments) == 0
    output = capsys.readouterr().out
    assert "train: 6 clips, 3 voices" in output and "test: 4 clips, 2 voices" in output
    settings = json.loads((tmp_path / "c" / speech_corpus.SETTINGS_NAME).read_text())
    assert settings["snr_db_range"] == [5.0, 30.0] and settings["noise_kinds"] == list(speech_synth.NOISE_KINDS)

    for bad, message in (
        (["--voices", "en-us,en-gb"], "--voices cannot be used with --train-per-word"),
        (["--extra-test-voices", "en-us+m1"], "--extra-test-voices cannot be used with --train-per-word"),
        (["--seed", "6"], "other settings"),
        (["--jobs", "0"], "jobs must be a positive integer"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            make_spoken_commands(arguments + bad)
        assert exit_info.value.code == 2 and message in capsys.readouterr().err
    with pytest.raises(SystemExit):
        make_spoken_commands(["--out", str(tmp_path / "d"), "--jobs", "2"])
    assert "--jobs cannot be used without --train-per-word" in capsys.readouterr().err


def test_word_sets():
    assert speech_corpus.WORD_SETS["sc35"] == SC35_WORDS and len(SC35_WORDS) == 35
