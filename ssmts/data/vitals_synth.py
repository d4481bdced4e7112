"""Offline stand-ins for the BIDMC vital-sign tasks (no download needed).

Two sources, both returning ``TaskData`` at BIDMC's 125 Hz with a seeded train/val/test
split and (by default) per-channel standardization with training statistics:

``load_heartpy_ppg``
    Real finger/ear PPG recordings shipped inside the ``heartpy`` package, cut into
    non-overlapping windows and labelled with the heart rate heartpy measures in each
    window. One channel (PPG only; heartpy ships no ECG). Small: about 100 windows.

``make_synthetic_vitals``
    Simulated (PPG, ECG) windows from ``neurokit2`` with known heart rate and
    respiratory rate, with explicit respiratory modulation so that the respiratory rate
    can be recovered from the signals, as in BIDMC. Any size, seeded.

No SpO2 stand-in is offered: SpO2 is read from the ratio of red to infrared pulsatile
absorption, and neither source has two PPG wavelengths, so an SpO2 label attached to
these signals would not be recoverable from them.

Both need the optional dependencies ``heartpy`` and ``neurokit2``
(``pip install ssmts[vitals]``).
"""

from __future__ import annotations

import contextlib
import io
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from ssmts.data.base import Split, TaskData
from ssmts.data.bidmc import SAMPLE_RATE_HZ, standardize_splits

# heartpy's example recordings: file, the column holding the PPG, and how the sampling
# rate is known. data.csv has no time column; heartpy's documentation processes it at
# 100 Hz. The other two carry timestamps from which heartpy derives the rate.
_HEARTPY_RECORDINGS = (
    ("data.csv", 0),
    ("data2.csv", 1),
    ("data3.csv", 2),
)

# Ranges of the per-window respiratory modulation depths of make_synthetic_vitals, before
# scaling by `respiratory_modulation`. Illustrative depths of a few to 30 percent, strong
# enough to be visible in 8 s windows; not fitted to recordings.
_MODULATION_RANGES = {
    "ppg_amplitude": (0.10, 0.30),  # RIAV: pulse amplitude falls on inspiration
    "ppg_baseline": (0.10, 0.30),  # RIIV: baseline shift, as a fraction of pulse amplitude
    "heart_rate": (0.02, 0.06),  # RIFV / RSA: fractional heart-rate rise on inspiration
    "ecg_amplitude": (0.05, 0.20),  # QRS amplitude change from the electrical axis moving
    "ecg_baseline": (0.05, 0.20),  # ECG baseline wander, as a fraction of R amplitude
}
_PULSE_TRANSIT_RANGE_S = (0.15, 0.30)
# Internal rate of the constant-rate waveform templates; high so that the respiratory
# time warp (fractional sample positions) interpolates accurately.
_TEMPLATE_RATE_HZ = 1000.0


def load_heartpy_ppg(
    window_seconds: float = 8.0,
    sample_rate: float = SAMPLE_RATE_HZ,
    bpm_range: tuple[float, float] = (40.0, 180.0),
    min_beat_coverage: float = 0.75,
    max_rejected_fraction: float = 0.2,
    max_interval_cv: float = 0.25,
    val_fraction: float = 0.15,
    test_fraction: float = 0.15,
    seed: int = 0,
    standardize: bool = True,
) -> TaskData:
    """Heart-rate regression on real PPG windows from heartpy's example recordings.

    Method: each of heartpy's three example recordings (data.csv at 100 Hz, data2.csv
    and data3.csv at the rates heartpy derives from their time columns, about 117 Hz and
    100.4 Hz) is linearly interpolated onto a uniform ``sample_rate`` grid (an upsampling,
    so no anti-aliasing filter is needed; data3's coarse timestamps are replaced by the
    mean rate, as heartpy does) and cut into non-overlapping ``window_seconds`` windows.
    ``heartpy.process`` runs on every window as the model sees it; the label is its
    ``bpm``. A window is dropped, and counted in ``meta["dropped"]`` by reason, when
    heartpy fails, its bpm is NaN or outside ``bpm_range``, more than
    ``max_rejected_fraction`` of its detected peaks were rejected, the accepted beats
    cover less than ``min_beat_coverage`` of what the bpm implies for the window (which
    catches windows where part of the signal has no pulse), or the beat intervals vary
    by more than ``max_interval_cv`` (standard deviation / mean; resting variability is
    far lower, so this flags dicrotic notches counted as beats, which inflate the bpm).

    Caveats: the label is heartpy's estimate, not a reference measurement, and the
    windows come from only three recordings (three people), each in every split, so the
    recording identity alone predicts much of the heart rate.

    Returns TaskData with ``X: (n, 1, window_seconds * sample_rate) float32`` (PPG),
    ``y: (n,) float64`` beats/min, ``sample_rate``, ``n_classes=None``.
    """
    import heartpy as hp

    if window_seconds <= 0:
        raise ValueError(f"window_seconds must be positive, got {window_seconds}")
    window = int(round(window_seconds * sample_rate))
    started = time.perf_counter()
    windows: list[np.ndarray] = []
    bpms: list[float] = []
    recording_of_window: list[str] = []
    dropped: Counter[str] = Counter()
    per_recording: dict[str, dict[str, Any]] = {}

    for file_name, example in _HEARTPY_RECORDINGS:
        signal, rate = _heartpy_example(hp, example)
        duration = len(signal) / rate
        grid = np.arange(int(duration * sample_rate)) / sample_rate
        resampled = np.interp(grid, np.arange(len(signal)) / rate, signal)
        n_windows = len(resampled) // window
        kept = 0
        for i in range(n_windows):
            segment = resampled[i * window : (i + 1) * window]
            bpm, reason = _heartpy_bpm(
                hp, segment, sample_rate, bpm_range, min_beat_coverage, max_rejected_fraction, max_interval_cv
            )
            if reason is not None:
                dropped[reason] += 1
                continue
            windows.append(segment)
            bpms.append(bpm)
            recording_of_window.append(file_name)
            kept += 1
        per_recording[file_name] = {"sample_rate": rate, "seconds": duration, "windows": n_windows, "kept": kept}

    if len(windows) < 3:
        raise RuntimeError(f"only {len(windows)} usable windows from heartpy's recordings (dropped: {dict(dropped)})")
    X = np.stack(windows)[:, None, :].astype(np.float32)
    y = np.asarray(bpms, dtype=np.float64)
    recordings = np.asarray(recording_of_window)
    train_idx, val_idx, test_idx = _split_indices(len(y), val_fraction, test_fraction, seed)
    pooled = Split(X, y)
    train, val, test = pooled.subset(train_idx), pooled.subset(val_idx), pooled.subset(test_idx)

    meta: dict[str, Any] = {
        "target": "hr",
        "target_unit": "beats/min",
        "channels": ["ppg"],
        "label_method": "heartpy.process(window, sample_rate)['bpm'] on the resampled window",
        "window_seconds": window_seconds,
        "recordings": per_recording,
        "dropped": dict(dropped),
        "recording_of_window": {
            "train": recordings[train_idx].tolist(),
            "val": recordings[val_idx].tolist(),
            "test": recordings[test_idx].tolist(),
        },
        "seed": seed,
        "standardize": standardize,
    }
    return _regression_task(
        train,
        val,
        test,
        meta,
        standardize,
        started,
        sample_rate,
        source="heartpy example recordings data.csv, data2.csv, data3.csv",
    )


def make_synthetic_vitals(
    n_windows: int = 200,
    length: int = 1000,
    target: str | Sequence[str] = "rr",
    hr_range: tuple[float, float] = (50.0, 120.0),
    rr_range: tuple[float, float] = (10.0, 30.0),
    respiratory_modulation: float = 1.0,
    noise_std: float = 0.05,
    sample_rate: float = SAMPLE_RATE_HZ,
    val_fraction: float = 0.15,
    test_fraction: float = 0.15,
    seed: int = 0,
    standardize: bool = True,
) -> TaskData:
    """Simulated two-channel (PPG, ECG) windows with known heart and respiratory rates.

    Per window, a heart rate and a respiratory rate are drawn uniformly from ``hr_range``
    (beats/min) and ``rr_range`` (breaths/min). neurokit2 supplies the waveforms:
    ``nk.rsp_simulate(method="sinusoidal")`` the respiration r(t) (scaled to [-1, 1],
    random phase; a sinusoid keeps the rate label exact, where breathmetrics' random
    breath lengths would not), ``nk.ecg_simulate(method="simple")`` and
    ``nk.ppg_simulate`` constant-rate beat trains (neurokit's own frequency modulation,
    drift and motion artefacts off: its modulation runs at a fixed 0.05 Hz, unrelated to
    the breathing). neurokit does not couple breathing into these signals, so the three
    classic respiratory modulations are applied here explicitly, with depths drawn
    uniformly per window and multiplied by ``respiratory_modulation`` (0 makes the
    respiratory rate unrecoverable; ranges recorded in ``meta["modulation_ranges"]``):

    - frequency (RSA): both beat trains are time-warped so that the instantaneous heart
      rate is ``hr * (1 + m * r(t))``, m in 2-6 %;
    - PPG amplitude and baseline: ``dc + ac * (1 - a * r) + b * pulse_amplitude * r``,
      a and b in 10-30 %;
    - ECG amplitude and baseline: ``ecg * (1 + a_e * r) + b_e * r_peak_amplitude * r``,
      a_e and b_e in 5-20 %.

    The PPG beats follow the ECG R peaks by a random 0.15-0.30 s (a crude pulse transit
    time), and white noise of ``noise_std`` times each channel's standard deviation is
    added. The "hr" label is the mean beat rate of the warped window,
    ``hr * (warped duration / duration)``; the "rr" label is the drawn rate.

    length: time steps per window; the default 1000 (8 s at 125 Hz) keeps CPU demos fast,
        4000 matches BIDMC's 32 s windows. Short windows hold few breaths (about 1.3 at
        10 breaths/min over 8 s), which limits how well any model can read the rate.
    target: "hr", "rr", or a sequence of both for ``y: (n, k)`` in that order.

    Returns TaskData with ``X: (n, 2, length) float32`` (channels PPG, ECG),
    ``y: (n,) float64`` (or ``(n, k)``), ``sample_rate``, ``n_classes=None``.
    """
    import neurokit2 as nk

    targets = [target] if isinstance(target, str) else list(target)
    for name in targets:
        if name not in ("hr", "rr"):
            raise ValueError(f"targets must be 'hr' or 'rr' (no SpO2 stand-in, see the module docstring), got {name!r}")
    if not targets:
        raise ValueError("target must name at least one of 'hr', 'rr'")
    if n_windows < 3:
        raise ValueError(f"n_windows must be at least 3 (one per split), got {n_windows}")
    if length < 2:
        raise ValueError(f"length must be at least 2 time steps, got {length}")
    _check_range("hr_range", hr_range, 20.0, 200.0)
    _check_range("rr_range", rr_range, 1.0, 60.0)
    if respiratory_modulation < 0 or noise_std < 0:
        raise ValueError("respiratory_modulation and noise_std must be non-negative")

    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    X = np.empty((n_windows, 2, length), dtype=np.float32)
    labels = {"hr": np.empty(n_windows), "rr": np.empty(n_windows)}
    for i in range(n_windows):
        heart_rate = rng.uniform(*hr_range)
        resp_rate = rng.uniform(*rr_range)
        X[i], labels["hr"][i] = _simulate_window(
            nk, rng, length, sample_rate, heart_rate, resp_rate, respiratory_modulation, noise_std
        )
        labels["rr"][i] = resp_rate

    y = labels[targets[0]] if len(targets) == 1 else np.stack([labels[t] for t in targets], axis=1)
    train_idx, val_idx, test_idx = _split_indices(n_windows, val_fraction, test_fraction, seed)
    pooled = Split(X, y)
    train, val, test = pooled.subset(train_idx), pooled.subset(val_idx), pooled.subset(test_idx)
    meta: dict[str, Any] = {
        "target": targets[0] if len(targets) == 1 else targets,
        "target_unit": {"hr": "beats/min", "rr": "breaths/min"},
        "channels": ["ppg", "ecg"],
        "hr_range": tuple(hr_range),
        "rr_range": tuple(rr_range),
        "respiratory_modulation": respiratory_modulation,
        "modulation_ranges": dict(_MODULATION_RANGES),
        "noise_std": noise_std,
        "seed": seed,
        "standardize": standardize,
    }
    return _regression_task(
        train,
        val,
        test,
        meta,
        standardize,
        started,
        sample_rate,
        source="synthetic: neurokit2 ppg/ecg/rsp_simulate with explicit respiratory modulation",
    )


# --------------------------------------------------------------------------- helpers


def _heartpy_example(hp: Any, example: int) -> tuple[np.ndarray, float]:
    """One of heartpy's example recordings and its sampling rate in Hz."""
    signal, timer = hp.load_exampledata(example)
    if example == 0:
        rate = 100.0
    elif example == 1:
        rate = float(hp.get_samplerate_mstimer(timer))
    else:
        rate = float(hp.get_samplerate_datetime(timer, timeformat="%Y-%m-%d %H:%M:%S.%f"))
    return np.asarray(signal, dtype=np.float64), rate


def _heartpy_bpm(
    hp: Any,
    segment: np.ndarray,
    sample_rate: float,
    bpm_range: tuple[float, float],
    min_beat_coverage: float,
    max_rejected_fraction: float,
    max_interval_cv: float,
) -> tuple[float, str | None]:
    """heartpy's bpm for one window, or (nan, reason) when the window is unusable."""
    # heartpy prints diagnostics and warns on poor windows; a window's failure is
    # recorded as a drop reason instead. Any exception type counts: heartpy raises
    # several (BadSignalWarning, ValueError, IndexError ...) on degenerate input.
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            working, measures = hp.process(segment, sample_rate)
    except Exception as err:  # noqa: BLE001 - see comment above
        return float("nan"), f"heartpy failed ({type(err).__name__})"
    bpm = float(measures.get("bpm", float("nan")))
    if not np.isfinite(bpm):
        return bpm, "heartpy bpm is NaN"
    if not bpm_range[0] <= bpm <= bpm_range[1]:
        return bpm, "bpm outside bpm_range"
    peaks = np.asarray(working["peaklist"])
    accepted = peaks[np.asarray(working["binary_peaklist"]) == 1]
    if len(peaks) == 0 or len(working["removed_beats"]) / len(peaks) > max_rejected_fraction:
        return bpm, "too many rejected peaks"
    expected_beats = bpm / 60.0 * len(segment) / sample_rate
    if len(accepted) < min_beat_coverage * expected_beats:
        return bpm, "accepted beats cover too little of the window"
    intervals = np.asarray(working["RR_list_cor"], dtype=np.float64)
    if len(intervals) < 2 or intervals.std() / intervals.mean() > max_interval_cv:
        return bpm, "beat intervals too irregular"
    return bpm, None


def _simulate_window(
    nk: Any,
    rng: np.random.Generator,
    length: int,
    sample_rate: float,
    heart_rate: float,
    resp_rate: float,
    respiratory_modulation: float,
    noise_std: float,
) -> tuple[np.ndarray, float]:
    """One (2, length) window (PPG, ECG) and its mean heart rate in beats/min."""
    depth = {k: respiratory_modulation * rng.uniform(*r) for k, r in _MODULATION_RANGES.items()}
    pulse_transit = rng.uniform(*_PULSE_TRANSIT_RANGE_S)
    duration = length / sample_rate
    period = 60.0 / heart_rate

    # Respiration in [-1, 1] with a random phase: simulate one extra breath and start at a
    # random offset into it.
    breath = 60.0 / resp_rate
    rsp = np.asarray(
        nk.rsp_simulate(
            duration=duration + breath,
            sampling_rate=sample_rate,
            respiratory_rate=resp_rate,
            method="sinusoidal",
            noise=0,
        )
    )
    start = int(rng.integers(0, max(1, int(breath * sample_rate))))
    r = rsp[start : start + length]
    r = r / np.max(np.abs(r))

    # Warped time: d(tau)/dt = 1 + m r(t), so beats come faster on inspiration (RSA).
    speed = 1.0 + depth["heart_rate"] * r
    tau = np.concatenate([[0.0], np.cumsum(speed[:-1])]) / sample_rate
    mean_heart_rate = heart_rate * speed.sum() / sample_rate / duration

    # Constant-rate templates long enough for the warped window plus phase offsets.
    cover = duration * (1.0 + depth["heart_rate"]) + 4.0 * period + 1.0
    n_beats = int(np.ceil(cover / period))
    # ecg "simple" tiles int(duration * hr / 60) beats and resamples them to `length`
    # samples; asking for n_beats + 0.5 beats' duration and n_beats periods' length gives
    # exactly n_beats beats at the requested rate.
    ecg_template = np.asarray(
        nk.ecg_simulate(
            duration=(n_beats + 0.5) * period,
            length=int(round(n_beats * period * _TEMPLATE_RATE_HZ)),
            sampling_rate=_TEMPLATE_RATE_HZ,
            heart_rate=heart_rate,
            method="simple",
            noise=0,
        )
    )
    # ppg_simulate fills the time after its last whole beat with a constant, so simulate
    # two beats more than needed and never read that tail.
    ppg_template = np.asarray(
        nk.ppg_simulate(
            duration=cover + 2.0 * period,
            sampling_rate=_TEMPLATE_RATE_HZ,
            heart_rate=heart_rate,
            frequency_modulation=0.0,
            ibi_randomness=0.0,
            drift=0.0,
            motion_amplitude=0.0,
            powerline_amplitude=0.0,
            burst_number=0,
            burst_amplitude=0.0,
            random_state=int(rng.integers(2**31 - 1)),
        )
    )
    r_peak_offset = np.argmax(ecg_template[: int(round(period * _TEMPLATE_RATE_HZ))]) / _TEMPLATE_RATE_HZ

    # ECG starts at a random cardiac phase; a PPG pulse onset follows each R peak by the
    # pulse transit time (PPG onsets sit at whole periods of its template).
    ecg_start = period + rng.uniform(0.0, period)
    ppg_start = ecg_start - r_peak_offset - pulse_transit + 2.0 * period
    ecg = np.interp(ecg_start + tau, np.arange(len(ecg_template)) / _TEMPLATE_RATE_HZ, ecg_template)
    ppg = np.interp(ppg_start + tau, np.arange(len(ppg_template)) / _TEMPLATE_RATE_HZ, ppg_template)

    ppg_dc = ppg.mean()
    pulse_amplitude = np.ptp(ppg)
    ppg = ppg_dc + (ppg - ppg_dc) * (1.0 - depth["ppg_amplitude"] * r) + depth["ppg_baseline"] * pulse_amplitude * r
    ecg = ecg * (1.0 + depth["ecg_amplitude"] * r) + depth["ecg_baseline"] * np.max(ecg_template) * r

    window = np.stack([ppg, ecg])
    if noise_std > 0:
        window = window + noise_std * window.std(axis=1, keepdims=True) * rng.standard_normal(window.shape)
    return window, mean_heart_rate


def _regression_task(
    train, val, test, meta: dict, standardize: bool, started: float, sample_rate: float, source: str
) -> TaskData:
    """Standardize with training statistics (optional), time the build, and wrap the splits."""
    if standardize:
        train, val, test, stats = standardize_splits(train, val, test)
        meta.update(stats)
    meta["seconds_to_build"] = time.perf_counter() - started
    return TaskData(
        train=train, val=val, test=test, n_classes=None, sample_rate=float(sample_rate), source=source, meta=meta
    )


def _split_indices(n: int, val_fraction: float, test_fraction: float, seed: int) -> tuple[np.ndarray, ...]:
    """Seeded random (train, val, test) index arrays, each sorted and non-empty."""
    if not (0 < val_fraction < 1 and 0 < test_fraction < 1 and val_fraction + test_fraction < 1):
        raise ValueError(
            f"val_fraction ({val_fraction}) and test_fraction ({test_fraction}) must be in (0, 1) with a sum below 1"
        )
    n_val = max(1, int(round(val_fraction * n)))
    n_test = max(1, int(round(test_fraction * n)))
    if n - n_val - n_test < 1:
        raise ValueError(f"{n} windows are too few for val_fraction={val_fraction}, test_fraction={test_fraction}")
    permutation = np.random.default_rng(seed).permutation(n)
    return (
        np.sort(permutation[n_val + n_test :]),
        np.sort(permutation[:n_val]),
        np.sort(permutation[n_val : n_val + n_test]),
    )


def _check_range(name: str, value: tuple[float, float], low: float, high: float) -> None:
    lo, hi = value
    if not low <= lo <= hi <= high:
        raise ValueError(f"{name} must satisfy {low} <= low <= high <= {high}, got {value}")
