"""Speech Commands loader, rate changes, espeak-ng synthesizer and the shipped mini copy."""

from __future__ import annotations

import csv
import json
import shlex
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from scipy.signal import resample_poly

from ssmts.data import make_spoken_commands, speech_synth
from ssmts.data.base import DataNotFoundError
from ssmts.data.speech import (
    SC10_WORDS,
    SC35_WORDS,
    change_rate,
    default_spoken_commands_dir,
    load_speech_commands,
)

RATE = 16000
WORDS = ("yes", "no", "up")
SPEAKERS = ("aaaa0001", "bbbb0002", "cccc0003", "dddd0004")
VALIDATION_SPEAKER, TESTING_SPEAKER = "bbbb0002", "cccc0003"
SHORT_CLIP = "no/dddd0004_nohash_0.wav"  # 0.5 s, to be zero-padded
SINE_CLIP = "up/aaaa0001_nohash_0.wav"  # a pure 440 Hz tone, for the resampling oracle
SINE_HZ = 440.0


def _clip(relative: str, rng: np.random.Generator) -> np.ndarray:
    """int16 samples of one fixture clip."""
    if relative == SINE_CLIP:
        t = np.arange(RATE) / RATE
        return np.round(0.5 * 32767 * np.sin(2 * np.pi * SINE_HZ * t)).astype(np.int16)
    length = RATE // 2 if relative == SHORT_CLIP else RATE
    return rng.integers(-20000, 20000, size=length).astype(np.int16)


@pytest.fixture(scope="module")
def speech_dir(tmp_path_factory) -> tuple[Path, dict[str, list[tuple[np.ndarray, int]]]]:
    """A tiny Speech Commands v0.02 directory, and the (int16 clip, label) each split must hold in loader order."""
    root = tmp_path_factory.mktemp("speech_commands")
    rng = np.random.default_rng(0)
    expected: dict[str, list[tuple[np.ndarray, int]]] = {"train": [], "val": [], "test": []}
    validation, testing = [], []
    for label, word in enumerate(WORDS):
        (root / word).mkdir()
        for speaker in SPEAKERS:  # sorted, as the loader reads them
            relative = f"{word}/{speaker}_nohash_0.wav"
            samples = _clip(relative, rng)
            sf.write(str(root / relative), samples, RATE, subtype="PCM_16")
            split = {VALIDATION_SPEAKER: "val", TESTING_SPEAKER: "test"}.get(speaker, "train")
            expected[split].append((samples, label))
            {"val": validation, "test": testing, "train": []}[split].append(relative)
    (root / "validation_list.txt").write_text("\n".join(validation) + "\n")
    (root / "testing_list.txt").write_text("\n".join(testing) + "\n")
    # Real background-noise files are long; reading one as a clip would raise "longer than 1 s".
    (root / "_background_noise_").mkdir()
    sf.write(str(root / "_background_noise_" / "white_noise.wav"), np.zeros(3 * RATE, np.int16), RATE, subtype="PCM_16")
    return root, expected


def test_loads_splits_with_labels_padding_and_lengths(speech_dir):
    root, expected = speech_dir
    data = load_speech_commands(root, words=WORDS)
    assert data.classes == list(WORDS) and data.n_classes == 3 and data.sample_rate == RATE
    for name in ("train", "val", "test"):
        split = getattr(data, name)
        clips = [samples for samples, _ in expected[name]]
        assert split.X.shape == (len(clips), 1, RATE) and split.X.dtype == np.float32
        np.testing.assert_array_equal(split.y, [label for _, label in expected[name]])
        assert split.y.dtype == np.int64
        for row, lengths, samples in zip(split.X, split.lengths, clips):
            np.testing.assert_allclose(row[0, : len(samples)], samples / 32768.0, atol=1e-7)
            assert not row[0, len(samples) :].any(), "padding must be zeros"
            assert lengths == len(samples)
    assert (len(data.train), len(data.val), len(data.test)) == (6, 3, 3)
    assert np.abs(data.train.X).max() <= 1.0
    assert sorted(data.train.lengths.tolist()) == [8000] + [RATE] * 5  # the short "no" clip is a training clip


def test_word_selection(speech_dir):
    root, _ = speech_dir
    data = load_speech_commands(root, words=["up", "yes"])  # custom order is the label order
    assert data.classes == ["up", "yes"] and set(data.train.y.tolist()) == {0, 1}
    assert load_speech_commands(root, words="all").classes == sorted(WORDS)
    with pytest.raises(DataNotFoundError, match="down/"):
        load_speech_commands(root, words="sc10")
    assert len(SC35_WORDS) == 35 and list(SC35_WORDS) == sorted(SC35_WORDS) and set(SC10_WORDS) <= set(SC35_WORDS)


def test_max_per_class_is_a_reproducible_subset(speech_dir):
    root, _ = speech_dir
    full = load_speech_commands(root, words=WORDS)
    first = load_speech_commands(root, words=WORDS, max_per_class=1, random_state=3)
    again = load_speech_commands(root, words=WORDS, max_per_class=1, random_state=3)
    assert np.bincount(first.train.y).tolist() == [1, 1, 1]
    np.testing.assert_array_equal(first.train.X, again.train.X)
    full_rows = {row.tobytes() for row in full.train.X}
    assert all(row.tobytes() in full_rows for row in first.train.X)
    assert len(first.val) == len(full.val) == 3  # a split already within the cap is kept whole


def test_decimate_and_resample_to_8khz(speech_dir):
    root, _ = speech_dir
    full = load_speech_commands(root, words=WORDS)
    decimated = load_speech_commands(root, words=WORDS, sample_rate=8000, resample_method="decimate")
    assert decimated.sample_rate == 8000 and decimated.train.X.shape == (6, 1, 8000)
    np.testing.assert_array_equal(decimated.train.X, full.train.X[..., ::2])
    np.testing.assert_array_equal(decimated.train.lengths, (full.train.lengths + 1) // 2)

    resampled = load_speech_commands(root, words=WORDS, sample_rate=8000, resample_method="resample")
    assert resampled.train.X.shape == (6, 1, 8000)
    sine_row = int(np.flatnonzero(full.train.y == WORDS.index("up"))[0])  # speaker aaaa0001 comes first
    oracle = resample_poly(full.train.X[sine_row, 0].astype(np.float64), 1, 2)
    # Both are windowed-sinc low-pass filters of different design; on a 440 Hz tone far
    # below the new Nyquist frequency they agree to ~1e-3 away from the clip edges.
    np.testing.assert_allclose(resampled.train.X[sine_row, 0, 200:-200], oracle[200:-200], atol=5e-3)
    assert not np.allclose(resampled.train.X, decimated.train.X, atol=1e-3), "noise clips must differ: aliasing"


def test_change_rate_shapes_and_errors():
    X = np.random.default_rng(0).standard_normal((2, 3, 16000)).astype(np.float32)
    assert change_rate(X, 16000, 4000).shape == (2, 3, 4000)
    assert change_rate(X, 16000, 11025, method="resample").shape == (2, 3, 11025)
    assert change_rate(X[..., :15999], 16000, 8000).shape == (2, 3, 8000)  # ceil(15999 / 2)
    np.testing.assert_array_equal(change_rate(X, 16000, 16000), X)
    with pytest.raises(ValueError, match="divide"):
        change_rate(X, 16000, 6000, method="decimate")
    with pytest.raises(ValueError, match="divide"):
        change_rate(X, 8000, 16000, method="decimate")
    with pytest.raises(ValueError, match="method"):
        change_rate(X, 16000, 8000, method="nearest")


def test_mfcc_features(speech_dir):
    root, _ = speech_dir
    data = load_speech_commands(root, words=WORDS, mfcc=True)
    assert data.train.X.shape == (6, 20, 161) and data.train.X.dtype == np.float32
    assert np.isfinite(data.train.X).all()
    assert sorted(data.train.lengths.tolist()) == [81] + [161] * 5  # 8000 samples / hop 100 + 1
    assert load_speech_commands(root, words=WORDS, mfcc=True, sample_rate=8000).test.X.shape == (3, 20, 81)


def test_wrong_rate_and_too_long_clips_are_rejected(tmp_path):
    for word in WORDS:
        (tmp_path / word).mkdir()
    (tmp_path / "validation_list.txt").write_text("")
    (tmp_path / "testing_list.txt").write_text("")
    bad = tmp_path / "yes" / "eeee_nohash_0.wav"
    sf.write(str(bad), np.zeros(8000, np.int16), 8000, subtype="PCM_16")
    for word in ("no", "up"):
        sf.write(str(tmp_path / word / "ffff_nohash_0.wav"), np.zeros(RATE, np.int16), RATE, subtype="PCM_16")
    with pytest.raises(ValueError, match=r"eeee_nohash_0\.wav has sample rate 8000 Hz"):
        load_speech_commands(tmp_path, words=WORDS)
    sf.write(str(bad), np.zeros(RATE + 1, np.int16), RATE, subtype="PCM_16")
    with pytest.raises(ValueError, match="at most 1 s"):
        load_speech_commands(tmp_path, words=WORDS)


def test_a_truncated_clip_is_refused_not_read_as_a_short_one(tmp_path):
    _two_word_copy(tmp_path)
    (tmp_path / "validation_list.txt").write_text("yes/b2_nohash_0.wav\nno/b2_nohash_0.wav\n")
    clip = tmp_path / "yes" / "a1_nohash_0.wav"
    whole = clip.read_bytes()
    clip.write_bytes(whole[:1000])  # the header still declares every sample: an interrupted copy
    refused = r"a1_nohash_0\.wav is truncated: its header declares \d+ bytes of samples, the file holds 956"
    with pytest.raises(ValueError, match=refused):
        load_speech_commands(tmp_path, words=["yes", "no"])
    clip.write_bytes(whole)
    assert len(load_speech_commands(tmp_path, words=["yes", "no"]).train) == 2


def test_a_copy_under_the_home_directory_is_found_by_its_tilde_path(tmp_path, monkeypatch):
    (tmp_path / "sc").mkdir()
    _two_word_copy(tmp_path / "sc")
    (tmp_path / "sc" / "validation_list.txt").write_text("yes/b2_nohash_0.wav\nno/b2_nohash_0.wav\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert len(load_speech_commands("~/sc", words=["yes", "no"]).train) == 2


def _two_word_copy(root: Path, suffix: str = ".wav") -> None:
    """yes/ and no/ with clips a1, b2, c3 (b2 for validation, c3 for testing)."""
    for word in ("yes", "no"):
        (root / word).mkdir()
        for speaker in ("a1", "b2", "c3"):
            sf.write(str(root / word / f"{speaker}_nohash_0{suffix}"), np.zeros(RATE, np.int16), RATE, format="WAV")
    (root / "testing_list.txt").write_text(f"yes/c3_nohash_0{suffix}\nno/c3_nohash_0{suffix}\n")


@pytest.mark.parametrize("entry", ["./{w}/b2_nohash_0.wav", "{w}\\b2_nohash_0.wav", "{w}/b2_nohash_0.wav"])
def test_split_lists_written_with_a_dot_or_backslashes_assign_their_clips(tmp_path, entry):
    """./yes/b2_nohash_0.wav and yes\\b2_nohash_0.wav name the clip yes/b2_nohash_0.wav: validation holds both
    b2 clips, training neither (a list entry that matched no clip left its clip in training, silently)."""
    _two_word_copy(tmp_path)
    (tmp_path / "validation_list.txt").write_text("".join(entry.format(w=w) + "\n" for w in ("yes", "no")))
    data = load_speech_commands(tmp_path, words=["yes", "no"])
    assert sorted(data.meta["files"]["val"]) == ["no/b2_nohash_0.wav", "yes/b2_nohash_0.wav"]
    assert sorted(data.meta["files"]["train"]) == ["no/a1_nohash_0.wav", "yes/a1_nohash_0.wav"]


@pytest.mark.parametrize("entry", ["speech_commands_v0.02/{w}/b2_nohash_0.wav", "{root}/{w}/b2_nohash_0.wav"])
def test_a_split_list_entry_that_names_no_clip_of_the_copy_is_refused_by_its_line(tmp_path, entry):
    """A prefix folder or an absolute path would match no clip and leave the clip in training: refused,
    naming the list, the line and the form the released lists use."""
    _two_word_copy(tmp_path)
    (tmp_path / "validation_list.txt").write_text(
        "".join(entry.format(w=w, root=tmp_path) + "\n" for w in ("yes", "no"))
    )
    with pytest.raises(DataNotFoundError, match=r"validation_list\.txt:1: .* is not a clip's path relative"):
        load_speech_commands(tmp_path, words=["yes", "no"])


def test_clips_named_in_upper_case_are_clips(tmp_path):
    """yes/a1_nohash_0.WAV is read (the glob skipped it), and a list that names it assigns it."""
    _two_word_copy(tmp_path, suffix=".WAV")
    (tmp_path / "validation_list.txt").write_text("yes/b2_nohash_0.WAV\nno/b2_nohash_0.WAV\n")
    data = load_speech_commands(tmp_path, words=["yes", "no"])
    assert (len(data.train), len(data.val), len(data.test)) == (2, 2, 2)
    assert "yes/b2_nohash_0.WAV" in data.meta["files"]["val"]


def test_missing_directory_says_what_to_do(tmp_path):
    with pytest.raises(DataNotFoundError) as error:
        load_speech_commands(tmp_path / "nowhere")
    message = str(error.value)
    assert str(tmp_path / "nowhere") in message and "validation_list.txt" in message
    assert "speech_commands_v0.02" in message and "python -m ssmts.data.make_spoken_commands" in message


def test_shipped_mini_copy_loads():
    root = default_spoken_commands_dir()
    data = load_speech_commands(root)  # SC10 words; nothing is synthesized here
    assert data.classes == list(SC10_WORDS)
    assert (len(data.train), len(data.val), len(data.test)) == (160, 40, 400)
    for split in (data.train, data.val, data.test):
        assert split.X.shape[1:] == (1, RATE) and np.bincount(split.y, minlength=10).min() == len(split) // 10
        assert (split.lengths == RATE).all()
    voices = {
        name: {line.split("/")[1].split("_nohash_")[0] for line in (root / name).read_text().split()}
        for name in ("validation_list.txt", "testing_list.txt")
    }
    all_voices = {p.name.split("_nohash_")[0] for p in (root / "yes").glob("*.wav")}
    assert all_voices == set(speech_synth.DEFAULT_VOICES) | set(speech_synth.EXTRA_TEST_VOICES)
    assert len(voices["validation_list.txt"]) == 4 and len(voices["testing_list.txt"]) == 4 + 36
    assert set(speech_synth.EXTRA_TEST_VOICES) <= voices["testing_list.txt"]
    assert not voices["validation_list.txt"] & voices["testing_list.txt"]
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    assert size < 20e6, f"the shipped copy grew to {size / 1e6:.1f} MB"
    command = "python -m ssmts.data.make_spoken_commands --out OUT --seed 0"
    assert json.loads((root / speech_synth.SETTINGS_NAME).read_text())["command"] == command
    assert command.replace("OUT", "ssmts/data/spoken_commands_mini") in (root / "README.md").read_text()


def test_synthesizer_reports_missing_espeak(monkeypatch, tmp_path):
    monkeypatch.setattr(speech_synth.shutil, "which", lambda name: None)
    with pytest.raises(speech_synth.EspeakNotFoundError, match="apt-get install espeak-ng"):
        speech_synth.synthesize_spoken_commands(tmp_path / "out", words=["yes"], voices=["en-us", "en-gb"])


needs_espeak = pytest.mark.skipif(not speech_synth.espeak_available(), reason="espeak-ng is not installed")


@needs_espeak
def test_synthesizer_writes_a_loadable_voice_disjoint_set(tmp_path):
    voices = ["en-us", "en-gb+f3", "en-029+klatt"]
    kwargs = dict(words=["yes", "stop"], voices=voices, clips_per_voice=1, random_state=7)
    by_split = speech_synth.synthesize_spoken_commands(tmp_path / "a", **kwargs)
    assert sorted(v for members in by_split.values() for v in members) == sorted(voices)
    assert all(len(members) == 1 for members in by_split.values())

    wavs = sorted((tmp_path / "a").rglob("*.wav"))
    assert len(wavs) == 6
    for wav in wavs:
        info = sf.info(str(wav))
        assert (info.samplerate, info.channels, info.frames, info.subtype) == (RATE, 1, RATE, "PCM_16")

    data = load_speech_commands(tmp_path / "a", words="all")
    assert data.classes == ["stop", "yes"] and (len(data.train), len(data.val), len(data.test)) == (2, 2, 2)
    assert np.abs(data.train.X).max() > 0.05, "clips must contain speech"
    for list_name, split in (("validation_list.txt", "val"), ("testing_list.txt", "test")):
        listed_voices = {
            line.split("/")[1].split("_nohash_")[0] for line in (tmp_path / "a" / list_name).read_text().split()
        }
        assert listed_voices == set(by_split[split])

    speech_synth.synthesize_spoken_commands(tmp_path / "b", **kwargs)
    for wav in wavs:  # same seed, same bytes
        assert wav.read_bytes() == (tmp_path / "b" / wav.relative_to(tmp_path / "a")).read_bytes()


@needs_espeak
def test_extra_test_voices_leave_the_other_clips_byte_identical(tmp_path):
    kwargs = dict(words=["yes", "stop"], voices=["en-us", "en-gb+f3", "en-029+klatt"], random_state=3)
    plain = speech_synth.synthesize_spoken_commands(tmp_path / "plain", **kwargs)
    extra = ["en-gb-x-rp+m3", "en-us-nyc+f1"]
    grown = speech_synth.synthesize_spoken_commands(tmp_path / "grown", extra_test_voices=extra, **kwargs)
    assert grown == {**plain, "test": plain["test"] + extra}
    for wav in (tmp_path / "plain").rglob("*.wav"):
        assert wav.read_bytes() == (tmp_path / "grown" / wav.relative_to(tmp_path / "plain")).read_bytes()
    assert (tmp_path / "plain" / "validation_list.txt").read_bytes() == (
        tmp_path / "grown" / "validation_list.txt"
    ).read_bytes()
    tests = (tmp_path / "grown" / "testing_list.txt").read_text().split()
    assert sorted(tests) == sorted(
        (tmp_path / "plain" / "testing_list.txt").read_text().split()
        + [f"{word}/{voice}_nohash_0.wav" for word in ("yes", "stop") for voice in extra]
    )
    data = load_speech_commands(tmp_path / "grown", words="all")
    assert (len(data.train), len(data.val), len(data.test)) == (2, 2, 6)
    # The extra voices' settings differ from each other: they are drawn, not copied.
    with open(tmp_path / "grown" / speech_synth.MANIFEST_NAME, newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row["voice"] in extra]
    assert len(rows) == 4 and len({(row["pitch"], row["speed_wpm"], row["snr_db"]) for row in rows}) == 4
    with pytest.raises(ValueError, match="duplicates"):
        speech_synth.synthesize_spoken_commands(tmp_path / "dup", extra_test_voices=["en-us"], **kwargs)

    # The recorded command remakes the set byte for byte, its own settings file included.
    settings = json.loads((tmp_path / "grown" / speech_synth.SETTINGS_NAME).read_text())
    assert settings["extra_test_voices"] == extra and settings["espeak_ng"][0].isdigit()
    command = shlex.split(settings["command"].replace("--out OUT", f"--out {tmp_path / 'again'}"))
    assert command[:3] == ["python", "-m", "ssmts.data.make_spoken_commands"]
    assert make_spoken_commands.main(command[3:]) == 0
    grown = sorted(path.relative_to(tmp_path / "grown") for path in (tmp_path / "grown").rglob("*") if path.is_file())
    again = sorted(path.relative_to(tmp_path / "again") for path in (tmp_path / "again").rglob("*") if path.is_file())
    assert grown == again
    for relative in grown:
        assert (tmp_path / "grown" / relative).read_bytes() == (tmp_path / "again" / relative).read_bytes()


@needs_espeak
def test_synthesizer_rejects_bad_requests(tmp_path):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError, match="exists and is not an empty directory"):
        speech_synth.synthesize_spoken_commands(tmp_path / "used", words=["yes"], voices=["en-us", "en-gb"])
    with pytest.raises(ValueError, match="no voice variants"):
        speech_synth.synthesize_spoken_commands(tmp_path / "x", words=["yes"], voices=["en-us", "en-us+nosuchvariant"])
    with pytest.raises(ValueError, match="no voice 'xx-nosuch'"):
        speech_synth.synthesize_spoken_commands(tmp_path / "x", words=["yes"], voices=["en-us", "xx-nosuch"])
    with pytest.raises(ValueError, match="training voice"):
        speech_synth.synthesize_spoken_commands(tmp_path / "x", words=["yes"], voices=["en-us", "en-gb"])
    assert not (tmp_path / "x").exists(), "nothing is written for a rejected request"
