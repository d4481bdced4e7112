"""BIDMC vital-sign regression (respiratory rate, heart rate, SpO2) from the Monash TSR archive.

The data are the ``BIDMC32RR``, ``BIDMC32HR`` and ``BIDMC32SpO2`` problems of the
Monash, UEA & UCR Time Series Extrinsic Regression (TSR) archive: 32-second windows of
two signals, PPG and ECG, sampled at 125 Hz, i.e. ``X: (n, 2, 4000)``, each labelled
with one vital sign. LSSL and S4 report RMSE on these three problems. ``meta["channels"]``
names the channels ("ppg", "ecg") in the order the archive lists them; that order was
not checked against the raw recordings here.

Typical use::

    from ssmts.data.bidmc import load_bidmc
    data = load_bidmc("~/data/bidmc", target="rr")      # S4's split, standardized
    data.train.X.shape                                    # (n_train, 2, 4000) float32

Expected files (either directly in ``root`` or in ``root/RR``, ``root/HR``, ``root/SpO2``
as in the S4 code's layout, or in ``root/BIDMC32RR`` ...)::

    BIDMC32RR_TRAIN.ts   BIDMC32RR_TEST.ts
    BIDMC32HR_TRAIN.ts   BIDMC32HR_TEST.ts
    BIDMC32SpO2_TRAIN.ts BIDMC32SpO2_TEST.ts

Split protocols (``protocol=``):

``"s4"`` (default)
    What the S4 repository (state-spaces/s4) trains and reports on. Its
    ``src/dataloaders/prepare/bidmc/process_data.py`` concatenates the archive's TRAIN
    and TEST files (TRAIN first), takes a 30 % hold-out with
    ``sklearn.model_selection.train_test_split(test_size=0.3, random_state=0)``, and
    splits that hold-out in half with ``train_test_split(test_size=0.5, random_state=1)``
    into validation and test: 70 / 15 / 15 % of all windows, seeded, and the archive's
    own train/test separation is not kept. Its ``configs/dataset/bidmc.yaml`` selects
    this ("reshuffle: True"). ``src/dataloaders/ts.py`` (class ``BIDMC``) loads the
    saved arrays and feeds them to the model unchanged: no input normalization and no
    target scaling. Here ``seed`` plays the role of S4's ``seed`` (0 reproduces it);
    windows come out in S4's order, channels first ``(n, 2, 4000)`` where S4 stores
    ``(n, 4000, 2)``.
``"s4_original"``
    The S4 code's other branch ("reshuffle: False"): the archive's TEST file is the test
    set, and the last ``int(n_train_file / 7)`` windows of the TRAIN file (in file
    order, no shuffling, no seed) are the validation set.
``"tsr"``
    The archive's TRAIN/TEST split, with a seeded random ``val_fraction`` of the TRAIN
    file carved out as validation (the rest keeps file order).

Standardization (``standardize=True``, the default) subtracts each channel's mean and
divides by its standard deviation, both computed over all training windows and time
steps only; the statistics are recorded in ``meta``. The S4 code does not normalize;
pass ``standardize=False`` to get its inputs (as float32).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from ssmts.data.base import DataNotFoundError, Split, TaskData, require_files
from ssmts.data.layouts import BIDMC_PROBLEMS as PROBLEMS
from ssmts.data.layouts import bidmc_file_names
from ssmts.data.layouts import bidmc_target as _check_target
from ssmts.nn.functional import channel_statistics

SAMPLE_RATE_HZ = 125.0
CHANNELS = ("ppg", "ecg")  # as the archive lists them; see the module docstring
PROTOCOLS = ("s4", "s4_original", "tsr")
TARGET_UNITS = {"rr": "breaths/min", "hr": "beats/min", "spo2": "%"}

HOW_TO_GET = (
    "These files are the BIDMC32RR, BIDMC32HR and BIDMC32SpO2 problems of the Monash, UEA & UCR "
    "Time Series Extrinsic Regression (TSR) archive (Tan, Bergmeir, Petitjean & Webb); download "
    "them from the archive's Zenodo records (one per problem) or the archive's website and "
    "place <problem>_TRAIN.ts and <problem>_TEST.ts in the directory. The data cannot be "
    "downloaded at run time; for offline work use ssmts.data.vitals_synth."
)


def read_ts_regression(path: str | Path, expected_channels: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Read one equal-length regression ``.ts`` file (sktime format, ``@targetLabel true``).

    Returns ``X: (n, channels, length) float32`` and ``y: (n,) float64``. Parsing is done by
    ``sktime.datasets.load_from_tsfile``; the header is checked first so that a wrong file
    fails with a message naming the problem rather than a parser traceback.

    Raises DataNotFoundError when the file is missing, is not a regression file, has another
    number of channels than ``expected_channels``, has series of unequal length, or
    contains missing values.
    """
    from sktime.datasets import load_from_tsfile

    path = Path(path).expanduser()
    if not path.is_file():
        problem = "is a directory, not a .ts file" if path.is_dir() else "does not exist"
        raise DataNotFoundError(f"{path} {problem}. {HOW_TO_GET}")
    header = _read_header(path)

    if header.get("targetlabel", "").split()[:1] != ["true"]:
        raise DataNotFoundError(
            f"{path} has no '@targetLabel true' line in its header, so it is not a regression "
            f"file of the TSR archive (classification files carry @classLabel instead)."
        )
    declared = header.get("dimensions")
    if header.get("univariate", "").split()[:1] == ["true"]:
        declared = "1"
    declared_mismatch = declared is not None and declared.isdigit() and int(declared) != expected_channels
    if expected_channels is not None and declared_mismatch:
        raise DataNotFoundError(
            f"{path} declares {declared} channel(s) (@dimensions/@univariate) but {expected_channels} are expected."
        )

    try:
        # Targets as text, converted here: sktime's y_dtype="float" gives float32, which
        # would perturb targets such as 15.3 in the seventh digit.
        X, y_text = load_from_tsfile(str(path), return_data_type="numpy3d", y_dtype="str")
    except ValueError as err:
        # sktime stacks the series into one array; unequal lengths surface as a bare
        # "all input arrays must have the same shape", so find and name the culprit.
        problem = _describe_unequal_lengths(path)
        if problem is None:
            raise DataNotFoundError(f"could not read {path}: {err}") from err
        raise DataNotFoundError(f"{path}: {problem}; series of one problem must have equal length.") from err
    except OSError as err:  # sktime reports malformed lines as IOError
        raise DataNotFoundError(f"could not read {path}: {err}") from err

    X = np.asarray(X, dtype=np.float32)
    try:
        y = np.asarray(y_text, dtype=np.float64).reshape(-1)
    except ValueError as err:
        row, text = next((i, str(v)) for i, v in enumerate(np.ravel(y_text)) if not _is_number(v))
        shown = text if len(text) <= 40 else f"{text[:40]}... ({len(text)} characters)"
        raise DataNotFoundError(
            f"{path} has a non-numeric target in series {row}: {shown!r}. Each line must end with ':' and the "
            "series' numeric target (a line without one reads its last channel as the target)"
        ) from err
    if expected_channels is not None and X.shape[1] != expected_channels:
        raise DataNotFoundError(f"{path} has {X.shape[1]} channel(s) per series but {expected_channels} are expected.")
    declared_length = header.get("serieslength")
    if declared_length is not None and declared_length.isdigit() and int(declared_length) != X.shape[2]:
        raise DataNotFoundError(
            f"{path} declares @seriesLength {declared_length} but its series have {X.shape[2]} values."
        )
    n_missing = int(np.count_nonzero(~np.isfinite(X)))
    if n_missing:
        raise DataNotFoundError(f"{path} contains {n_missing} missing or non-finite values ('?' or NaN).")
    if not np.all(np.isfinite(y)):
        raise DataNotFoundError(f"{path} contains missing or non-finite target values.")
    return X, y


def load_bidmc(
    root: str | Path,
    target: str = "rr",
    protocol: str = "s4",
    standardize: bool = True,
    val_fraction: float = 0.15,
    seed: int = 0,
) -> TaskData:
    """Load one BIDMC problem of the TSR archive as train/val/test splits.

    root: directory with ``BIDMC32<T>_TRAIN.ts`` and ``BIDMC32<T>_TEST.ts`` (or a
        subdirectory ``RR``/``HR``/``SpO2`` or ``BIDMC32<T>`` holding them).
    target: "rr" (breaths/min), "hr" (beats/min) or "spo2" (%).
    protocol: "s4" (default), "s4_original" or "tsr"; see the module docstring.
    standardize: per-channel standardization with training statistics.
    val_fraction: validation share of the TRAIN file, used by protocol "tsr" only.
    seed: split seed for "s4" (0 reproduces the S4 code) and "tsr".

    Returns TaskData with ``X: (n, 2, 4000) float32`` (channels PPG, ECG), ``y: (n,) float64``,
    ``sample_rate=125.0``, ``n_classes=None``; ``meta`` records the protocol, the file
    sizes and the normalization statistics.
    """
    target = _check_target(target)
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if protocol == "tsr" and not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be strictly between 0 and 1, got {val_fraction}")

    train_name, test_name = bidmc_file_names(target)
    directory = _find_directory(Path(root).expanduser(), target, [train_name, test_name])
    X_train_file, y_train_file = read_ts_regression(directory / train_name, expected_channels=len(CHANNELS))
    X_test_file, y_test_file = read_ts_regression(directory / test_name, expected_channels=len(CHANNELS))
    if X_train_file.shape[2] != X_test_file.shape[2]:
        raise DataNotFoundError(
            f"{train_name} has series of length {X_train_file.shape[2]} but {test_name} has "
            f"{X_test_file.shape[2]}; both files of a problem must have the same length."
        )

    train, val, test, split_meta = _split(
        Split(X_train_file, y_train_file), Split(X_test_file, y_test_file), protocol, val_fraction, seed
    )
    meta: dict[str, Any] = {
        "problem": PROBLEMS[target],
        "target": target,
        "target_unit": TARGET_UNITS[target],
        "channels": list(CHANNELS),
        "protocol": protocol,
        "seed": seed,
        "n_train_file": len(y_train_file),
        "n_test_file": len(y_test_file),
        **split_meta,
        "standardize": standardize,
    }
    if standardize:
        train, val, test, stats = standardize_splits(train, val, test)
        meta.update(stats)
    return TaskData(
        train=train,
        val=val,
        test=test,
        n_classes=None,
        sample_rate=SAMPLE_RATE_HZ,
        source=str(directory),
        meta=meta,
    )


def standardize_splits(train: Split, val: Split, test: Split) -> tuple[Split, Split, Split, dict[str, list[float]]]:
    """Standardize every channel of ``X: (n, channels, length)`` with training statistics only.

    Mean and standard deviation are taken over all training windows and time steps of a
    channel, so validation and test never inform the scaling. A constant training
    channel keeps scale 1 (it carries no information, and dividing by 0 would make NaNs);
    the estimators and the task runner scale with the same function (channel_statistics).
    Returns the three new splits and ``{"channel_mean": [...], "channel_std": [...]}``.
    """
    if train.X.ndim != 3:
        raise ValueError(f"expected X of shape (n, channels, length), got {train.X.shape}")
    mean, std = (t.numpy() for t in channel_statistics(torch.from_numpy(np.asarray(train.X))))

    def apply(split: Split) -> Split:
        X = ((split.X - mean[None, :, None]) / std[None, :, None]).astype(np.float32)
        return Split(X, split.y, split.lengths)

    stats = {"channel_mean": mean.tolist(), "channel_std": std.tolist()}
    return apply(train), apply(val), apply(test), stats


# --------------------------------------------------------------------------- helpers


def _find_directory(root: Path, target: str, names: list[str]) -> Path:
    problem = PROBLEMS[target]
    s4_folder = problem.removeprefix("BIDMC32")  # the S4 code keeps files in data/RR, data/HR, data/SpO2
    candidates = [root, root / s4_folder, root / problem]
    for candidate in candidates:
        if all((candidate / name).is_file() for name in names):
            return candidate
    elsewhere = ", ".join(str(c) for c in candidates[1:])
    require_files(root, names, f"(Also looked in {elsewhere}.) {HOW_TO_GET}")
    # require_files passed, so the names exist in root but are not regular files.
    raise DataNotFoundError(f"{', '.join(names)} in {root} must be regular files. {HOW_TO_GET}")


def _read_header(path: Path) -> dict[str, str]:
    """Header tags of a .ts file, lower-cased names -> value text (``"@dimensions 2"`` -> ``"2"``)."""
    header: dict[str, str] = {}
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if not line.startswith("@"):
                break
            name, _, value = line[1:].partition(" ")
            name = name.lower()
            if name == "data":
                return header
            header[name] = value.strip().lower()
    raise DataNotFoundError(f"{path} has no '@data' line; it is not a .ts file of the TSR archive.")


def _describe_unequal_lengths(path: Path) -> str | None:
    """Name the first series whose channel lengths differ from the first series', if any."""
    reference: list[int] | None = None
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.strip().lower() == "@data":
                break
        case = 0
        for line in handle:
            line = line.strip()
            if not line:
                continue
            channels = line.split(":")[:-1]  # the last field is the target
            lengths = [channel.count(",") + 1 for channel in channels]
            if reference is None:
                reference = lengths
            elif lengths != reference:
                return (
                    f"series {case} (0-based, data line {case + 1}) has channel lengths {lengths} "
                    f"but series 0 has {reference}"
                )
            case += 1
    return None


def _split(
    train_file: Split, test_file: Split, protocol: str, val_fraction: float, seed: int
) -> tuple[Split, Split, Split, dict[str, Any]]:
    if protocol == "s4":
        from sklearn.model_selection import train_test_split

        X_all = np.concatenate([train_file.X, test_file.X])
        y_all = np.concatenate([train_file.y, test_file.y])
        # Splitting indices draws the same permutation as S4's split of the data frames:
        # ShuffleSplit depends only on the number of rows and the seed.
        idx_train, idx_eval = train_test_split(np.arange(len(y_all)), test_size=0.3, random_state=seed)
        idx_val, idx_test = train_test_split(idx_eval, test_size=0.5, random_state=seed + 1)
        pooled = Split(X_all, y_all)
        return (
            pooled.subset(idx_train),
            pooled.subset(idx_val),
            pooled.subset(idx_test),
            {"split": "TRAIN+TEST pooled; 70/15/15 via train_test_split(random_state=seed, then seed+1)"},
        )
    if protocol == "s4_original":
        n = len(train_file)
        n_val = int(n / 7.0)  # S4: ".6 / .1 / .3 split"
        if n_val == 0:
            raise ValueError(f"protocol 's4_original' needs at least 7 training windows, the TRAIN file has {n}")
        return (
            train_file.subset(slice(0, n - n_val)),
            train_file.subset(slice(n - n_val, n)),
            test_file,
            {"split": "TRAIN minus its last int(n/7) windows / those windows / TEST"},
        )
    n = len(train_file)
    n_val = int(round(val_fraction * n))
    if not 0 < n_val < n:
        raise ValueError(f"val_fraction={val_fraction} of {n} TRAIN windows leaves an empty train or validation set")
    permutation = np.random.default_rng(seed).permutation(n)
    idx_val, idx_train = np.sort(permutation[:n_val]), np.sort(permutation[n_val:])
    return (
        train_file.subset(idx_train),
        train_file.subset(idx_val),
        test_file,
        {
            "split": f"TRAIN minus a seeded random {val_fraction:g} validation share / that share / TEST",
            "val_fraction": val_fraction,
        },
    )


def _is_number(text) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
