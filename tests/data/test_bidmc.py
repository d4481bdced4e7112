"""BIDMC loader on tiny .ts fixtures in the TSR archive's format, and the offline stand-ins."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.signal import periodogram
from sklearn.model_selection import train_test_split

from ssmts.data.base import DataNotFoundError
from ssmts.data.bidmc import load_bidmc, read_ts_regression
from ssmts.data.vitals_synth import load_heartpy_ppg, make_synthetic_vitals

LENGTH = 50
N_TRAIN_FILE, N_TEST_FILE = 14, 6
TEST_OFFSET = 100.0  # added to the TEST file's PPG so that leaked test statistics would show


def _write_ts(
    path: Path,
    X: np.ndarray,
    y: np.ndarray,
    problem: str = "BIDMC32RR",
    dimensions: int | None = None,
    label_line: str = "@targetLabel true",
    lowercase_tags: bool = False,
) -> None:
    """Write X: (n, channels, length) and y: (n,) as the TSR archive lays out its BIDMC files."""
    channels = X.shape[1] if dimensions is None else dimensions
    tags = [
        f"@problemName {problem}",
        "@timeStamps false",
        "@missing false",
        "@univariate false",
        f"@dimensions {channels}",
        "@equalLength true",
        f"@seriesLength {X.shape[2]}",
        label_line,
        "@data",
    ]
    if lowercase_tags:  # the archive's Covid3Month files use this spelling
        tags = [tag.split(" ")[0].lower() + tag[len(tag.split(" ")[0]) :] for tag in tags]
    lines = [
        "# Dataset Information",
        f"# {problem}: a test fixture with the layout of the Monash TSR archive files.",
        *tags,
    ]
    for series, target in zip(X, y):
        lines.append(":".join(",".join(f"{v:.5f}" for v in channel) for channel in series) + f":{target:.1f}")
    path.write_text("\n".join(lines) + "\n")


def _fixture_arrays(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X_train = np.round(rng.normal(size=(N_TRAIN_FILE, 2, LENGTH)), 5)
    X_test = np.round(rng.normal(size=(N_TEST_FILE, 2, LENGTH)), 5)
    X_test[:, 0] += TEST_OFFSET
    y_train = np.round(rng.uniform(5, 30, N_TRAIN_FILE), 1)
    y_test = np.round(rng.uniform(5, 30, N_TEST_FILE), 1)
    return X_train, y_train, X_test, y_test


@pytest.fixture(scope="module")
def bidmc_dir(tmp_path_factory) -> tuple[Path, tuple[np.ndarray, ...]]:
    root = tmp_path_factory.mktemp("bidmc")
    arrays = _fixture_arrays()
    X_train, y_train, X_test, y_test = arrays
    _write_ts(root / "BIDMC32RR_TRAIN.ts", X_train, y_train)
    _write_ts(root / "BIDMC32RR_TEST.ts", X_test, y_test)
    return root, arrays


def test_reader_returns_float32_windows_and_exact_targets(bidmc_dir):
    root, (X_train, y_train, _, _) = bidmc_dir
    X, y = read_ts_regression(root / "BIDMC32RR_TRAIN.ts", expected_channels=2)
    assert X.shape == (N_TRAIN_FILE, 2, LENGTH) and X.dtype == np.float32
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, y_train)  # read as text, so 12.3 stays 12.3
    np.testing.assert_allclose(X, X_train, atol=1e-6)


def test_tsr_protocol_keeps_test_file_and_carves_validation_from_train(bidmc_dir):
    root, (X_train, y_train, X_test, y_test) = bidmc_dir
    data = load_bidmc(root, target="rr", protocol="tsr", standardize=False, val_fraction=0.25, seed=3)
    assert data.sample_rate == 125.0 and data.n_classes is None
    assert data.meta["protocol"] == "tsr" and data.meta["target"] == "rr"
    assert len(data.val) == round(0.25 * N_TRAIN_FILE) and len(data.train) == N_TRAIN_FILE - len(data.val)
    for split in (data.train, data.val, data.test):
        assert split.X.shape[1:] == (2, LENGTH) and split.X.dtype == np.float32
    np.testing.assert_allclose(data.test.X, X_test, atol=1e-6)
    np.testing.assert_array_equal(data.test.y, y_test)
    # train and val partition the TRAIN file: every window once, and their targets match it
    pooled_X = np.concatenate([data.train.X, data.val.X])
    pooled_y = np.concatenate([data.train.y, data.val.y])
    order = np.argsort(pooled_X[:, 1, 0])
    reference = np.argsort(X_train[:, 1, 0])
    np.testing.assert_allclose(pooled_X[order], X_train[reference], atol=1e-6)
    np.testing.assert_array_equal(pooled_y[order], y_train[reference])
    # the carve-out is deterministic for a seed and moves with it
    again = load_bidmc(root, protocol="tsr", standardize=False, val_fraction=0.25, seed=3)
    other = load_bidmc(root, protocol="tsr", standardize=False, val_fraction=0.25, seed=4)
    np.testing.assert_array_equal(again.val.y, data.val.y)
    assert not np.array_equal(other.val.y, data.val.y)


def test_s4_protocol_matches_the_s4_code_split(bidmc_dir):
    root, (X_train, y_train, X_test, y_test) = bidmc_dir
    data = load_bidmc(root, protocol="s4", standardize=False)
    # What state-spaces/s4 process_data.py does with the pooled files (seed=0).
    X_all, y_all = np.concatenate([X_train, X_test]), np.concatenate([y_train, y_test])
    X_tr, X_ev, y_tr, y_ev = train_test_split(X_all, y_all, test_size=0.3, random_state=0)
    X_va, X_te, y_va, y_te = train_test_split(X_ev, y_ev, test_size=0.5, random_state=1)
    for split, X_expected, y_expected in ((data.train, X_tr, y_tr), (data.val, X_va, y_va), (data.test, X_te, y_te)):
        np.testing.assert_allclose(split.X, X_expected, atol=1e-6)
        np.testing.assert_array_equal(split.y, y_expected)
    assert (len(data.train), len(data.val), len(data.test)) == (14, 3, 3)


def test_s4_original_protocol_uses_last_seventh_of_train_file_as_validation(bidmc_dir):
    root, (X_train, y_train, X_test, y_test) = bidmc_dir
    data = load_bidmc(root, protocol="s4_original", standardize=False)
    n_val = N_TRAIN_FILE // 7
    np.testing.assert_array_equal(data.val.y, y_train[-n_val:])
    np.testing.assert_array_equal(data.train.y, y_train[:-n_val])
    np.testing.assert_array_equal(data.test.y, y_test)


def test_standardization_uses_training_statistics_only(bidmc_dir):
    root, _ = bidmc_dir
    raw = load_bidmc(root, protocol="tsr", standardize=False)
    scaled = load_bidmc(root, protocol="tsr", standardize=True)
    mean = raw.train.X.astype(np.float64).mean(axis=(0, 2))
    std = raw.train.X.astype(np.float64).std(axis=(0, 2))
    np.testing.assert_allclose(scaled.meta["channel_mean"], mean, rtol=1e-6)
    np.testing.assert_allclose(scaled.meta["channel_std"], std, rtol=1e-6)
    np.testing.assert_allclose(scaled.train.X.mean(axis=(0, 2)), 0.0, atol=1e-5)
    np.testing.assert_allclose(scaled.train.X.std(axis=(0, 2)), 1.0, atol=1e-5)
    expected_test = (raw.test.X - mean[None, :, None]) / std[None, :, None]
    np.testing.assert_allclose(scaled.test.X, expected_test, rtol=1e-5, atol=1e-5)
    # the offset TEST PPG stays far off zero: its own statistics were not used
    assert scaled.test.X[:, 0].mean() > 50
    np.testing.assert_array_equal(scaled.test.y, raw.test.y)


def test_finds_files_in_the_s4_folder_layout(tmp_path):
    X_train, y_train, X_test, y_test = _fixture_arrays(1)
    (tmp_path / "HR").mkdir()
    _write_ts(tmp_path / "HR" / "BIDMC32HR_TRAIN.ts", X_train, y_train, problem="BIDMC32HR", lowercase_tags=True)
    _write_ts(tmp_path / "HR" / "BIDMC32HR_TEST.ts", X_test, y_test, problem="BIDMC32HR", lowercase_tags=True)
    data = load_bidmc(tmp_path, target="HR", protocol="tsr", standardize=False)
    assert data.meta["problem"] == "BIDMC32HR" and data.source == str(tmp_path / "HR")
    np.testing.assert_array_equal(data.test.y, y_test)


def test_missing_files_are_named_with_the_archive(tmp_path):
    X_train, y_train, _, _ = _fixture_arrays()
    _write_ts(tmp_path / "BIDMC32SpO2_TRAIN.ts", X_train, y_train, problem="BIDMC32SpO2")
    with pytest.raises(DataNotFoundError) as info:
        load_bidmc(tmp_path, target="spo2")
    message = str(info.value)
    assert "is missing BIDMC32SpO2_TEST.ts." in message  # only the absent file is listed
    assert "Time Series Extrinsic Regression" in message and "Monash" in message
    with pytest.raises(DataNotFoundError, match="does not exist"):
        load_bidmc(tmp_path / "nowhere", target="rr")


def test_wrong_channel_count_is_reported(tmp_path):
    rng = np.random.default_rng(0)
    X3 = np.round(rng.normal(size=(4, 3, LENGTH)), 5)
    _write_ts(tmp_path / "BIDMC32RR_TRAIN.ts", X3, np.arange(4.0))
    _write_ts(tmp_path / "BIDMC32RR_TEST.ts", X3, np.arange(4.0))
    with pytest.raises(DataNotFoundError, match=r"declares 3 channel\(s\).*2 are expected"):
        load_bidmc(tmp_path)
    # a header that claims 2 channels while the data lines carry 3
    _write_ts(tmp_path / "BIDMC32RR_TRAIN.ts", X3, np.arange(4.0), dimensions=2)
    with pytest.raises(DataNotFoundError, match="BIDMC32RR_TRAIN.ts"):
        load_bidmc(tmp_path)


def test_unequal_lengths_name_the_series(tmp_path):
    path = tmp_path / "ragged.ts"
    X, y = np.round(np.random.default_rng(0).normal(size=(4, 2, LENGTH)), 5), np.arange(4.0)
    _write_ts(path, X, y)
    lines = path.read_text().splitlines()
    data_start = lines.index("@data") + 1
    ppg, ecg, target = lines[data_start + 2].split(":")
    lines[data_start + 2] = ":".join([ppg.rsplit(",", 1)[0], ecg, target])  # series 2 loses one PPG value
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataNotFoundError, match=r"series 2 .*\[49, 50\].*equal length"):
        read_ts_regression(path, expected_channels=2)


def test_train_and_test_files_of_different_lengths_are_rejected(tmp_path):
    X_train, y_train, X_test, y_test = _fixture_arrays()
    _write_ts(tmp_path / "BIDMC32RR_TRAIN.ts", X_train, y_train)
    _write_ts(tmp_path / "BIDMC32RR_TEST.ts", X_test[:, :, :40], y_test)
    with pytest.raises(DataNotFoundError, match="length 50 .* 40"):
        load_bidmc(tmp_path)


def test_classification_file_and_missing_values_are_rejected(tmp_path):
    X, y = np.round(np.random.default_rng(0).normal(size=(3, 2, LENGTH)), 5), np.array([1.0, 2.0, 1.0])
    _write_ts(tmp_path / "cls.ts", X, y, label_line="@classLabel true 1.0 2.0")
    with pytest.raises(DataNotFoundError, match="@targetLabel true"):
        read_ts_regression(tmp_path / "cls.ts")
    _write_ts(tmp_path / "gaps.ts", X, y)
    text = (tmp_path / "gaps.ts").read_text().replace(f"{X[1, 0, 5]:.5f},", "?,", 1)
    (tmp_path / "gaps.ts").write_text(text)
    with pytest.raises(DataNotFoundError, match="missing or non-finite"):
        read_ts_regression(tmp_path / "gaps.ts")


def test_lines_without_a_target_are_named_in_a_short_message(tmp_path):
    X, y = np.round(np.random.default_rng(0).normal(size=(3, 2, LENGTH)), 5), np.array([1.0, 2.0, 1.0])
    _write_ts(tmp_path / "no_target.ts", X, y)
    lines = (tmp_path / "no_target.ts").read_text().splitlines()
    start = lines.index("@data") + 1
    lines[start:] = [line.rsplit(":", 1)[0] for line in lines[start:]]  # sktime then reads the ECG as the target
    (tmp_path / "no_target.ts").write_text("\n".join(lines) + "\n")
    shortened = r"non-numeric target in series 0: '.{40}\.\.\. \(\d+ characters\)'"
    with pytest.raises(DataNotFoundError, match=shortened) as info:
        read_ts_regression(tmp_path / "no_target.ts")
    assert len(str(info.value)) < 400 and "must end with ':'" in str(info.value)


def test_bad_arguments(bidmc_dir):
    root, _ = bidmc_dir
    with pytest.raises(ValueError, match="target must be one of"):
        load_bidmc(root, target="bp")
    with pytest.raises(ValueError, match="protocol must be one of"):
        load_bidmc(root, protocol="random")
    with pytest.raises(ValueError, match="val_fraction"):
        load_bidmc(root, protocol="tsr", val_fraction=1.5)


# ----------------------------------------------------------------- offline stand-ins


def _dominant_rate_per_minute(x: np.ndarray, sample_rate: float, low: float, high: float) -> float:
    """Frequency (per minute) of the largest periodogram peak between low and high per minute."""
    freqs, power = periodogram(x - x.mean(), sample_rate, nfft=16384)
    band = (freqs >= low / 60) & (freqs <= high / 60)
    return 60.0 * freqs[band][np.argmax(power[band])]


@pytest.fixture(scope="module")
def heartpy_data():
    return load_heartpy_ppg(standardize=False)


def test_heartpy_windows_shapes_and_labels(heartpy_data):
    data = heartpy_data
    assert data.sample_rate == 125.0 and data.n_classes is None
    for split in (data.train, data.val, data.test):
        assert split.X.shape[1:] == (1, 1000) and split.X.dtype == np.float32 and len(split) > 0
        assert np.all((split.y >= 40) & (split.y <= 180))
    kept = sum(r["kept"] for r in data.meta["recordings"].values())
    total = sum(r["windows"] for r in data.meta["recordings"].values())
    assert kept == len(data.train) + len(data.val) + len(data.test)
    assert kept + sum(data.meta["dropped"].values()) == total
    assert kept >= 60  # heartpy ships about 14 minutes of PPG


def test_heartpy_label_is_heartpy_bpm_of_the_window(heartpy_data):
    import heartpy as hp

    window = heartpy_data.test.X[0, 0].astype(np.float64)
    _, measures = hp.process(window, 125.0)
    assert measures["bpm"] == pytest.approx(heartpy_data.test.y[0], rel=1e-4)


def test_heartpy_split_is_seeded(heartpy_data):
    again = load_heartpy_ppg(standardize=False, seed=0)
    other = load_heartpy_ppg(standardize=False, seed=1)
    np.testing.assert_array_equal(again.test.X, heartpy_data.test.X)
    np.testing.assert_array_equal(again.test.y, heartpy_data.test.y)
    assert not np.array_equal(other.test.y, heartpy_data.test.y)


@pytest.fixture(scope="module")
def synthetic_vitals():
    return make_synthetic_vitals(n_windows=60, target=("hr", "rr"), seed=1, standardize=False)


def test_synthetic_vitals_shapes_and_ranges(synthetic_vitals):
    data = synthetic_vitals
    assert data.sample_rate == 125.0 and data.n_classes is None
    assert (len(data.train), len(data.val), len(data.test)) == (42, 9, 9)
    for split in (data.train, data.val, data.test):
        assert split.X.shape[1:] == (2, 1000) and split.X.dtype == np.float32 and split.y.shape[1] == 2
        assert np.all(np.isfinite(split.X))
        hr, rr = split.y[:, 0], split.y[:, 1]
        assert np.all((rr >= 10) & (rr <= 30))
        assert np.all((hr >= 50 * 0.94) & (hr <= 120 * 1.06))  # +-6 % at most from the RSA warp


def test_synthetic_vitals_are_deterministic_per_seed():
    a = make_synthetic_vitals(n_windows=12, length=300, seed=5)
    b = make_synthetic_vitals(n_windows=12, length=300, seed=5)
    c = make_synthetic_vitals(n_windows=12, length=300, seed=6)
    np.testing.assert_array_equal(a.train.X, b.train.X)
    np.testing.assert_array_equal(a.test.y, b.test.y)
    assert a.train.y.shape == (8,)  # a single target gives y: (n,)
    assert not np.allclose(a.train.y, c.train.y)


def test_synthetic_heart_rate_is_the_ppg_pulse_rate(synthetic_vitals):
    data = synthetic_vitals
    X = np.concatenate([data.train.X, data.val.X, data.test.X])
    hr = np.concatenate([data.train.y, data.val.y, data.test.y])[:, 0]
    estimate = np.array([_dominant_rate_per_minute(x[0], 125.0, 40, 180) for x in X])
    assert np.max(np.abs(estimate - hr)) < 3.0


def test_synthetic_respiratory_rate_is_recoverable_only_through_the_modulation(synthetic_vitals):
    data = synthetic_vitals
    X = np.concatenate([data.train.X, data.val.X, data.test.X])
    rr = np.concatenate([data.train.y, data.val.y, data.test.y])[:, 1]
    estimate = np.array([_dominant_rate_per_minute(x[0], 125.0, 6, 40) for x in X])
    assert np.mean(np.abs(estimate - rr) < 2.5) >= 0.9
    flat = make_synthetic_vitals(n_windows=60, target=("hr", "rr"), seed=1, standardize=False, respiratory_modulation=0)
    X0 = np.concatenate([flat.train.X, flat.val.X, flat.test.X])
    rr0 = np.concatenate([flat.train.y, flat.val.y, flat.test.y])[:, 1]
    estimate0 = np.array([_dominant_rate_per_minute(x[0], 125.0, 6, 40) for x in X0])
    assert np.median(np.abs(estimate0 - rr0)) > 3.0


def test_synthetic_vitals_reject_spo2_and_bad_sizes():
    with pytest.raises(ValueError, match="SpO2"):
        make_synthetic_vitals(n_windows=10, target="spo2")
    with pytest.raises(ValueError, match="n_windows"):
        make_synthetic_vitals(n_windows=2)
    with pytest.raises(ValueError, match="hr_range"):
        make_synthetic_vitals(n_windows=10, hr_range=(120, 50))
