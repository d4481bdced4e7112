"""Probes of bad input, faults and misuse: each must end in a clear error that names the
problem, or in a correct (finite, right-shaped) result. Never a silent wrong result.

Each probe is (area, name, action, expectation); `python -m pytest tests/hardening -q`
runs them, and PROBES is the table counted in the hardening notes.
"""

from __future__ import annotations

import io
import json
import os
import pickle
from contextlib import redirect_stderr
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from ssmts import SSMClassifier, SSMFeatureClassifier, SSMRegressor
from ssmts.data.base import DataNotFoundError
from ssmts.nn import SSM, SSMBackbone, scaled_delta
from ssmts.sktime import SSMForecaster
from ssmts.training import SequenceData, Trainer, TrainerConfig, read_checkpoint

TINY = dict(d_model=8, d_state=4, n_layers=1, max_epochs=2, min_steps=0, batch_size=8, device="cpu", random_state=0)
RNG = np.random.default_rng(0)
X = RNG.standard_normal((24, 12))
Y = (X[:, :6].mean(1) > 0).astype(int)


@pytest.fixture(scope="module")
def clf():
    return SSMClassifier(**TINY).fit(X, Y)


@pytest.fixture(scope="module")
def clf_rate():
    return SSMClassifier(**TINY, sample_rate=100.0).fit(X, Y)


@pytest.fixture(scope="module")
def forecaster():
    y = pd.Series(np.sin(np.arange(60) / 3.0), index=pd.RangeIndex(60))
    return SSMForecaster(**{**TINY, "context_length": 8}).fit(y.iloc[:50], fh=[1, 2])


def error(exc, fragment):
    return ("error", exc, fragment)


def finite_result(check=None):
    return ("result", check)


def _malicious_pickle(marker: Path) -> bytes:
    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    return pickle.dumps(Evil())


# (area, name, action(fixtures dict, tmp_path) -> value, expectation)
PROBES = [
    # ---------------------------------------------------------------- input
    (
        "input",
        "NaN in X at fit",
        lambda f, t: SSMClassifier(**TINY).fit(np.where(X > 2, np.nan, X), Y),
        error(ValueError, "X contains NaN"),
    ),
    (
        "input",
        "inf in X at predict",
        lambda f, t: f["clf"].predict(np.where(X > 2, np.inf, X)),
        error(ValueError, "X contains infinity"),
    ),
    (
        "input",
        "4-D X",
        lambda f, t: SSMClassifier(**TINY).fit(X.reshape(24, 1, 3, 4), Y),
        error(ValueError, "got a 4-D array"),
    ),
    ("input", "1-D X", lambda f, t: SSMClassifier(**TINY).fit(X[0], Y[:1]), error(ValueError, "2D array")),
    ("input", "empty list", lambda f, t: SSMClassifier(**TINY).fit([], []), error(ValueError, "X is empty")),
    ("input", "zero samples", lambda f, t: SSMClassifier(**TINY).fit(X[:0], Y[:0]), error(ValueError, "0 sample")),
    (
        "input",
        "equal-length lists mixing channel counts",
        lambda f, t: SSMClassifier(**TINY).fit([np.zeros((2, 5)), np.zeros((3, 5))], [0, 1]),
        error(ValueError, "same number of channels"),
    ),
    (
        "input",
        "ragged lists mixing channel counts",
        lambda f, t: SSMClassifier(**TINY).fit([np.zeros((2, 5)), np.zeros((3, 7))], [0, 1]),
        error(ValueError, "same number of channels"),
    ),
    (
        "input",
        "complex X",
        lambda f, t: SSMClassifier(**TINY).fit(X + 1j, Y),
        error(ValueError, "Complex data not supported"),
    ),
    (
        "input",
        "string X",
        lambda f, t: SSMClassifier(**TINY).fit(np.full((4, 3), "a"), [0, 1, 0, 1]),
        error(ValueError, "X must hold numbers, but it holds text"),
    ),
    (
        "input",
        "values beyond float32",
        lambda f, t: SSMClassifier(**TINY).fit(X * 1e39, Y),
        error(ValueError, "float32 range"),
    ),
    (
        "input",
        "X and y lengths differ",
        lambda f, t: SSMClassifier(**TINY).fit(X, Y[:-1]),
        error(ValueError, "X has 24 samples but y has 23"),
    ),
    (
        "input",
        "labels mixing numbers and strings",
        lambda f, t: SSMClassifier(**TINY).fit(X, np.array([1, "a"] * 12, dtype=object)),
        error(ValueError, "mixes labels of different kinds (number, text)"),
    ),
    (
        "input",
        "None labels",
        lambda f, t: SSMClassifier(**TINY).fit(X, np.array([None, 1] * 12, dtype=object)),
        error(ValueError, "no label (None or NaN) for 12 sample(s), e.g. index 0"),
    ),
    (
        "input",
        "NaN labels among strings (a pandas column with gaps)",
        lambda f, t: SSMClassifier(**TINY).fit(X, np.array(["a", np.nan] * 12, dtype=object)),
        error(ValueError, "no label (None or NaN) for 12 sample(s), e.g. index 1"),
    ),
    (
        "input",
        "NaN labels among numbers",
        lambda f, t: SSMClassifier(**TINY).fit(X, np.array([0.0, 1.0, np.nan] * 8)),
        error(ValueError, "no label (None or NaN) for 8 sample(s), e.g. index 2"),
    ),
    (
        "input",
        "pandas' NA labels",
        lambda f, t: SSMClassifier(**TINY).fit(X, pd.array(["a", None] * 12, dtype="string")),
        error(ValueError, "no label (None or NaN) for 12 sample(s), e.g. index 1"),
    ),
    (
        "input",
        "a single class",
        lambda f, t: SSMClassifier(**TINY).fit(X, np.zeros(24)),
        error(ValueError, "at least 2 classes"),
    ),
    (
        "input",
        "continuous labels to a classifier",
        lambda f, t: SSMClassifier(**TINY).fit(X, X[:, 0]),
        error(ValueError, "Unknown label type"),
    ),
    (
        "input",
        "predict with fewer timepoints",
        lambda f, t: f["clf"].predict(X[:, :8]),
        error(ValueError, "expecting 12 features"),
    ),
    (
        "input",
        "predict with other channel count",
        lambda f, t: f["clf"].predict(np.stack([X, X], 1)),
        error(ValueError, "X has 2 channels, but SSMClassifier was fitted with 1"),
    ),
    ("input", "predict before fit", lambda f, t: SSMClassifier(**TINY).predict(X), error(ValueError, "not fitted")),
    # Standardization makes the model scale-free: at 1e-13 or 1e13 it learns what it learns at 1.
    ("input", "data at 1e-13 scale (classifier)", lambda f, t: _scale_free(1e-13), finite_result(lambda ok: ok)),
    ("input", "data at 1e13 scale (classifier)", lambda f, t: _scale_free(1e13), finite_result(lambda ok: ok)),
    (
        "input",
        "targets at 1e-13 scale (regressor)",
        lambda f, t: _scale_free_regressor(1e-13),
        finite_result(lambda ok: ok),
    ),
    # Squares of targets near 1e200 overflow and those near 1e-200 underflow: statistics in exact units.
    (
        "input",
        "targets at 1e200 scale (regressor)",
        lambda f, t: _scale_free_regressor(1e200),
        finite_result(lambda ok: ok),
    ),
    (
        "input",
        "targets at 1e-200 scale (regressor)",
        lambda f, t: _scale_free_regressor(1e-200),
        finite_result(lambda ok: ok),
    ),
    (
        "input",
        "y at 1e200 scale (forecaster)",
        lambda f, t: _scale_free_forecaster(1e200),
        finite_result(lambda ok: ok),
    ),
    (
        "input",
        "y at 1e-200 scale (forecaster)",
        lambda f, t: _scale_free_forecaster(1e-200),
        finite_result(lambda ok: ok),
    ),
    # float32 turns X at 1e-150 into zeros: every prediction would be the same
    (
        "input",
        "values below float32's precision",
        lambda f, t: SSMClassifier(**TINY).fit(X * 1e-150, Y),
        error(ValueError, "X has no value above 9.86e-32 in magnitude (the largest is"),
    ),
    (
        "input",
        "a list of series below float32's precision",
        lambda f, t: SSMClassifier(**TINY).fit([row[: 6 + i % 6] * 1e-150 for i, row in enumerate(X)], Y),
        error(ValueError, "X has no value above 9.86e-32 in magnitude"),
    ),
    (
        "input",
        "a memory map below float32's precision",
        lambda f, t: SSMClassifier(**TINY).fit(_memmap(t, X * 1e-150), Y),
        error(ValueError, "X has no value above 9.86e-32 in magnitude"),
    ),
    (
        "input",
        "tiny values beside ordinary ones",
        lambda f, t: SSMClassifier(**TINY).fit(np.where(np.abs(X) < 0.5, X * 1e-150, X), Y).predict(X),
        finite_result(lambda labels: labels.shape == (24,) and set(labels) <= {0, 1}),
    ),
    # float32 keeps steps of 0.03 at a level of 3e5: the standardization is formed in float64 before the cast
    (
        "input",
        "a level of 3e5 beside unit variations (classifier)",
        lambda f, t: _offset_free(3e5),
        finite_result(bool),
    ),
    (
        "input",
        "a level of 1e5 beside variations of 0.01 (features)",
        lambda f, t: _offset_free(1e5, 0.01, features=True),
        finite_result(bool),
    ),
    (
        "input",
        "regressor y of rank 3",
        lambda f, t: SSMRegressor(**TINY).fit(X, np.zeros((24, 2, 2))),
        error(ValueError, "y must be 1-D"),
    ),
    # ---------------------------------------------------------------- parameters
    (
        "parameters",
        "d_state=8.7",
        lambda f, t: SSMClassifier(**{**TINY, "d_state": 8.7}).fit(X, Y),
        error(ValueError, "d_state must be an integer"),
    ),
    (
        "parameters",
        "prenorm='no'",
        lambda f, t: SSMClassifier(**TINY, prenorm="no").fit(X, Y),
        error(ValueError, "prenorm must be a bool"),
    ),
    (
        "parameters",
        "sample_rate=True",
        lambda f, t: SSMClassifier(**TINY, sample_rate=True).fit(X, Y),
        error(ValueError, "sample_rate must be > 0"),
    ),
    (
        "parameters",
        "sample_rate='16k'",
        lambda f, t: SSMClassifier(**TINY, sample_rate="16k").fit(X, Y),
        error(ValueError, "sample_rate must be > 0"),
    ),
    (
        "parameters",
        "n_iter_no_change=0",
        lambda f, t: SSMClassifier(**TINY, n_iter_no_change=0).fit(X, Y),
        error(ValueError, "n_iter_no_change must be an integer >= 1"),
    ),
    (
        "parameters",
        "tol<0",
        lambda f, t: SSMClassifier(**TINY, tol=-1.0).fit(X, Y),
        error(ValueError, "tol must be >= 0.0 and finite"),
    ),
    (
        "parameters",
        "d_model=-1",
        lambda f, t: SSMClassifier(**{**TINY, "d_model": -1}).fit(X, Y),
        error(ValueError, "d_model must be an integer >= 1"),
    ),
    (
        "parameters",
        "pooling='none'",
        lambda f, t: SSMClassifier(**TINY, pooling="none").fit(X, Y),
        error(ValueError, "unknown pooling"),
    ),
    (
        "parameters",
        "NaN weight decay",
        lambda f, t: SSMClassifier(**TINY, weight_decay=float("nan")).fit(X, Y),
        error(ValueError, "weight_decay must be >= 0.0 and finite"),
    ),
    (
        "parameters",
        "class weight <= 0",
        lambda f, t: SSMClassifier(**TINY, class_weight={0: 0.0}).fit(X, Y),
        error(ValueError, "class_weight must be None, 'balanced' or a dict of finite weights > 0"),
    ),
    ("parameters", "unknown keyword", lambda f, t: SSMClassifier(d_modle=3), error(TypeError, "unexpected parameter")),
    (
        "parameters",
        "set_params(sample_rate) after a fit without rate",
        lambda f, t: SSMClassifier(**TINY).fit(X, Y).set_params(sample_rate=50.0).predict(X),
        error(ValueError, "fitted without sample_rate"),
    ),
    (
        "parameters",
        "predict sample_rate=0",
        lambda f, t: f["clf_rate"].predict(X, sample_rate=0),
        error(ValueError, "sample_rate must be a positive number"),
    ),
    (
        "parameters",
        "predict sample_rate=1e-300",
        lambda f, t: f["clf_rate"].predict(X, sample_rate=1e-300),
        error(ValueError, "at sample_rate=1e-300 SSMClassifier expects about"),
    ),
    (
        "parameters",
        "device='tpu'",
        lambda f, t: SSMClassifier(**{**TINY, "device": "tpu"}).fit(X, Y),
        error(ValueError, "unknown device"),
    ),
    (
        "parameters",
        "dt_min > dt_max",
        lambda f, t: SSMClassifier(**TINY, dt_min=0.5, dt_max=0.1).fit(X, Y),
        error(ValueError, "dt_min=0.5 must not exceed dt_max=0.1"),
    ),
    # ---------------------------------------------------------------- training and persistence
    (
        "training",
        "a failed refit keeps the previous model",
        lambda f, t: _failed_refit_keeps_model(),
        finite_result(lambda ok: ok),
    ),
    (
        "training",
        "an interrupted partial_fit leaves the next one unchanged",
        lambda f, t: _interrupted_continuation(),
        finite_result(lambda diff: diff == 0.0),
    ),
    (
        "training",
        "diverging loss",
        lambda f, t: SSMRegressor(**{**TINY, "lr": 1e30, "lr_ssm": 1e30}).fit(X, X[:, 0]),
        error(FloatingPointError, "the model diverged (try a lower lr or lr_ssm"),
    ),
    (
        "persistence",
        "save onto a directory",
        lambda f, t: _save_onto_directory(f["clf"], t),
        error(IsADirectoryError, "it is a directory"),
    ),
    ("persistence", "round trip", lambda f, t: _round_trip(f["clf"], t), finite_result(lambda ok: ok)),
    (
        "persistence",
        "flipped bytes in the weights",
        lambda f, t: _flipped(f["clf"], t),
        error(ValueError, "does not match its checksum"),
    ),
    ("persistence", "truncated file", lambda f, t: _truncated(f["clf"], t), error(ValueError, "not a readable")),
    (
        "persistence",
        "a pickle posing as a model file runs nothing",
        lambda f, t: _pickle_posing(t),
        error(ValueError, "not a readable"),
    ),
    (
        "persistence",
        "wrong class",
        lambda f, t: SSMRegressor.load(f["clf"].save(t / "c.safetensors")),
        error(TypeError, "holds a SSMClassifier"),
    ),
    ("persistence", "other versions warn", lambda f, t: _other_version(f["clf"], t), finite_result(lambda ok: ok)),
    (
        "persistence",
        "labels the format cannot hold",
        lambda f, t: (
            SSMClassifier(**TINY)
            .fit(X, np.array(["2020-01-01", "2021-01-01"] * 12, dtype="datetime64[D]"))
            .save(t / "t.safetensors")
        ),
        error(TypeError, "format='joblib'"),
    ),
    ("files", "truncated checkpoint", lambda f, t: _truncated_checkpoint(t), error(ValueError, "damaged")),
    (
        "files",
        "a pickle posing as a checkpoint runs nothing",
        lambda f, t: _pickle_checkpoint(t),
        error(ValueError, "damaged"),
    ),
    (
        "files",
        "a crafted CIFAR batch runs nothing",
        lambda f, t: _crafted_cifar(t),
        error(DataNotFoundError, "refusing"),
    ),
    ("files", "an empty WAV clip", lambda f, t: _empty_wav(t), error(ValueError, "holds no samples")),
    ("files", "a corrupt run config", lambda f, t: _corrupt_config(t), error(SystemExit, "not valid JSON")),
    # ---------------------------------------------------------------- forecaster
    (
        "forecaster",
        "gap in an integer index",
        lambda f, t: SSMForecaster(**{**TINY, "context_length": 8}).fit(
            pd.Series(np.arange(40.0)).drop(index=[10, 11]), fh=[1]
        ),
        error(ValueError, "not evenly spaced"),
    ),
    (
        "forecaster",
        "duplicate time stamps",
        lambda f, t: SSMForecaster(**{**TINY, "context_length": 8}).fit(
            pd.Series(np.arange(40.0), index=[*range(39), 38]), fh=[1]
        ),
        error(ValueError, "repeated time stamps"),
    ),
    (
        "forecaster",
        "gap in a datetime index",
        lambda f, t: SSMForecaster(**{**TINY, "context_length": 8}).fit(
            pd.Series(np.arange(40.0), index=pd.date_range("2020", periods=40, freq="D")).drop(
                pd.Timestamp("2020-01-05")
            ),
            fh=[1],
        ),
        error(ValueError, "not evenly spaced"),
    ),
    (
        "forecaster",
        "update skipping periods",
        lambda f, t: _copy(f["forecaster"]).update(pd.Series([1.0, 2.0], index=[55, 56]), update_params=False),
        error(ValueError, "not evenly spaced"),
    ),
    (
        "forecaster",
        "update with past data",
        lambda f, t: _copy(f["forecaster"]).update(pd.Series([1.0, 2.0], index=[30, 31]), update_params=False),
        error(ValueError, "before the cutoff"),
    ),
    ("forecaster", "series near 4e-12", lambda f, t: _tiny_series_forecast(), finite_result(lambda ok: ok)),
    (
        "forecaster",
        "context longer than the series: padded, forecast near the trend",
        lambda f, t: SSMForecaster(**{**TINY, "context_length": 80}).fit(pd.Series(np.arange(40.0)), fh=[1]).predict(),
        finite_result(lambda pred: abs(float(pred.iloc[0]) - 40.0) < 2.0),  # the next value of 0, 1, ..., 39
    ),
    (
        "forecaster",
        "a single observation",
        lambda f, t: SSMForecaster(**{**TINY, "context_length": 4}).fit(pd.Series([1.0]), fh=[1]),
        error(ValueError, "no training window"),
    ),
    (
        "forecaster",
        "recursive and bidirectional",
        lambda f, t: SSMForecaster(**{**TINY, "context_length": 8}, strategy="recursive", bidirectional=True).fit(
            pd.Series(np.arange(40.0)), fh=[1]
        ),
        error(ValueError, "causal"),
    ),
    # ---------------------------------------------------------------- layer
    (
        "layer",
        "float64 input to a float32 layer",
        lambda f, t: SSM(2, 4)(torch.zeros(1, 2, 5, dtype=torch.float64)),
        error(TypeError, "cast the input"),
    ),
    (
        "layer",
        "integer input",
        lambda f, t: SSM(2, 4)(torch.zeros(1, 2, 5, dtype=torch.long)),
        error(TypeError, "floating point"),
    ),
    (
        "layer",
        "float64 layer and input",
        lambda f, t: _float64_layer(),
        finite_result(lambda ok: ok),
    ),
    (
        "layer",
        "dt_scale=0",
        lambda f, t: setattr(SSM(2, 4), "dt_scale", 0.0),
        error(ValueError, "dt_scale must be > 0 and finite"),
    ),
    (
        "layer",
        "dt_scale=inf",
        lambda f, t: setattr(SSM(2, 4), "dt_scale", float("inf")),
        error(ValueError, "dt_scale must be > 0 and finite"),
    ),
    (
        "layer",
        "scaled_delta(-1)",
        lambda f, t: scaled_delta(SSM(2, 4), -1.0).__enter__(),
        error(ValueError, "factor must be > 0 and finite"),
    ),
    (
        "layer",
        "step with an empty state list",
        lambda f, t: SSMBackbone(2, 4, 2, d_state=4).step(torch.zeros(1, 2), []),
        error(ValueError, "one tensor per block"),
    ),
    ("layer", "wrong channel count", lambda f, t: SSM(2, 4)(torch.zeros(1, 3, 5)), error(ValueError, "input channels")),
    # ---------------------------------------------------------------- CLI
    (
        "cli",
        "unknown task",
        lambda f, t: _cli("tasks", "run", "no-such-task", "--synthetic"),
        error(SystemExit, "unknown task 'no-such-task'; known tasks:"),
    ),
    (
        "cli",
        "--out under a file",
        lambda f, t: _cli(
            "tasks",
            "run",
            "bidmc-rr",
            "--synthetic",
            "--preset",
            "tiny",
            "--quiet",
            "--out",
            str(_a_file(t) / "results.json"),
        ),
        error(SystemExit, "74 ssmts: error: --out"),
    ),
    (
        "cli",
        "--data-dir in a symlink loop",
        lambda f, t: _cli(
            "tasks", "run", "bidmc-rr", "--preset", "tiny", "--quiet", "--data-dir", str(_symlink_loop(t))
        ),
        error(SystemExit, "74 ssmts: error: --data-dir"),
    ),
    ("cli", "resume with a truncated checkpoint", lambda f, t: _cli_resume_truncated(t), error(SystemExit, "damaged")),
]


def _scale_free(factor):
    base = SSMClassifier(**TINY).fit(X, Y)
    scaled = SSMClassifier(**TINY).fit(X * factor, Y)
    return np.allclose(scaled.predict_proba(X * factor), base.predict_proba(X), atol=1e-4)


def _scale_free_regressor(factor):
    """Targets scaled by `factor`: the same model, predictions scaled by it, and it learns (R^2 > 0)."""
    target = X[:, :6].mean(1)
    base = SSMRegressor(**{**TINY, "max_epochs": 30}).fit(X, target)
    scaled = SSMRegressor(**{**TINY, "max_epochs": 30}).fit(X, target * factor)
    same = np.allclose(scaled.predict(X) / factor, base.predict(X), rtol=1e-5, atol=1e-6)
    return same and scaled.score(X, target * factor) > 0.0


def _offset_free(level, gain=1.0, features=False):
    """X moved to `level` (and scaled by `gain`): the scores of the model fitted on X."""
    if features:
        make, scores = lambda: SSMFeatureClassifier(n_scales=3, n_kernels=8, random_state=0), "decision_function"
    else:
        make, scores = lambda: SSMClassifier(**TINY), "predict_proba"
    base = getattr(make().fit(X, Y), scores)(X)
    moved = getattr(make().fit(level + gain * X, Y), scores)(level + gain * X)
    return np.allclose(moved, base, atol=1e-4)


def _scale_free_forecaster(factor):
    """y scaled by `factor`: forecasts and intervals scaled by it (the windows' spread formed in exact units)."""
    y = pd.Series(10.0 + np.sin(np.arange(60) / 3.0) + 0.1 * RNG.standard_normal(60))
    params = {key: value for key, value in TINY.items() if key != "batch_size"}
    base = SSMForecaster(**params).fit(y, fh=[1, 2, 3])
    scaled = SSMForecaster(**params).fit(y * factor, fh=[1, 2, 3])
    same = np.allclose(scaled.predict().to_numpy() / factor, base.predict().to_numpy(), rtol=1e-6)
    intervals = scaled.predict_interval(coverage=0.8).to_numpy() / factor
    return same and np.allclose(intervals, base.predict_interval(coverage=0.8).to_numpy(), rtol=1e-6)


def _memmap(tmp, values):
    path = tmp / "x.dat"
    array = np.memmap(path, dtype=np.float64, mode="w+", shape=values.shape)
    array[:] = values
    array.flush()
    return np.memmap(path, dtype=np.float64, mode="r", shape=values.shape)


def _float64_layer():
    """A float64 layer computes in float64 what its float32 twin computes (to float32 rounding)."""
    torch.manual_seed(0)
    layer, u = SSM(2, 4), torch.randn(3, 2, 7)
    single = layer(u)
    double = layer.double()(u.double())
    return double.dtype == torch.float64 and torch.allclose(double, single.double(), rtol=1e-4, atol=1e-5)


def _copy(obj):
    import copy

    return copy.deepcopy(obj)


def _failed_refit_keeps_model():
    clf = SSMClassifier(**TINY).fit(X, Y)
    model, history = clf.model_, list(clf.history_)
    try:
        clf.fit(X, np.zeros(24))  # fails: one class
    except ValueError:
        pass
    return clf.model_ is model and clf.history_ == history and clf.predict(X).shape == (24,)


def _interrupted_continuation():
    """Ctrl-C during a partial_fit, then partial_fit again: the same model as without the interruption
    (the stored optimizer moments are not stepped in place by the interrupted run)."""
    from ssmts.training.callbacks import Callback

    class Interrupt(Callback):
        armed = False

        def on_epoch_end(self, trainer, record):
            if self.armed:
                raise KeyboardInterrupt

    interrupt = Interrupt()
    interrupted = SSMClassifier(**TINY, callbacks=[interrupt]).partial_fit(X, Y, classes=[0, 1])
    plain = SSMClassifier(**TINY).partial_fit(X, Y, classes=[0, 1])
    interrupt.armed = True
    with pytest.raises(KeyboardInterrupt):
        interrupted.partial_fit(X, Y)
    interrupt.armed = False
    interrupted.partial_fit(X, Y)
    plain.partial_fit(X, Y)
    return float(np.abs(interrupted.predict_proba(X) - plain.predict_proba(X)).max())


def _a_file(tmp):
    path = tmp / "a_file"
    path.write_text("not a directory")
    return path


def _symlink_loop(tmp):
    (tmp / "loop_a").symlink_to(tmp / "loop_b")
    (tmp / "loop_b").symlink_to(tmp / "loop_a")
    return tmp / "loop_a"


def _round_trip(clf, tmp):
    back = SSMClassifier.load(clf.save(tmp / "m.safetensors"))
    return np.array_equal(back.predict_proba(X), clf.predict_proba(X))


def _save_onto_directory(clf, tmp):
    target = tmp / "models"
    target.mkdir()
    try:
        return clf.save(target)
    finally:
        assert not list(tmp.glob("*.tmp")), "a failed save left its temporary file behind"


def _flipped(clf, tmp):
    path = clf.save(tmp / "m.safetensors")
    data = bytearray(path.read_bytes())
    data[-20] ^= 0xFF  # inside the last tensor's bytes
    path.write_bytes(bytes(data))
    return SSMClassifier.load(path)


def _truncated(clf, tmp):
    path = clf.save(tmp / "m.safetensors")
    path.write_bytes(path.read_bytes()[:200])
    return SSMClassifier.load(path)


def _loads_crafted_pickle(tmp, name: str, load):
    """load(path) on a pickle that would create a marker file if it ran: it must not run."""
    marker = tmp / "executed"
    (tmp / name).write_bytes(_malicious_pickle(marker))
    try:
        return load(tmp / name)
    finally:
        assert not marker.exists(), "loading ran code from the file"


def _pickle_posing(tmp):
    return _loads_crafted_pickle(tmp, "evil.safetensors", SSMClassifier.load)


def _other_version(clf, tmp):
    from safetensors.torch import safe_open, save_file

    from ssmts.estimators import _persistence

    path = clf.save(tmp / "m.safetensors")
    with safe_open(str(path), framework="pt") as f:
        meta, tensors = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    header = json.loads(meta["ssmts"])
    header["versions"]["ssmts"] = "0.0.1"
    header["sha256"] = _persistence._checksum(tensors, header)  # as that version would have written it
    save_file(tensors, str(path), metadata={"ssmts": json.dumps(header)})
    with pytest.warns(UserWarning, match="other versions") as record:
        back = SSMClassifier.load(path)
    return record[0].filename == __file__ and np.array_equal(back.predict(X), clf.predict(X))


def _truncated_checkpoint(tmp):
    class Last(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(5, 1)

        def forward(self, x, mask=None):
            return self.linear(x[..., -1])[:, 0]

    trainer = Trainer(Last(), lambda o, y, w=None: ((o - y) ** 2).mean(), TrainerConfig(max_epochs=1, device="cpu"))
    trainer.fit(SequenceData(torch.randn(8, 5, 3), torch.randn(8)), checkpoint=tmp / "c.pt")
    (tmp / "c.pt").write_bytes((tmp / "c.pt").read_bytes()[:300])
    return read_checkpoint(tmp / "c.pt")


def _pickle_checkpoint(tmp):
    return _loads_crafted_pickle(tmp, "c.pt", read_checkpoint)


def _crafted_cifar(tmp):
    from ssmts.data.pixels import _read_cifar_batch

    return _loads_crafted_pickle(tmp, "data_batch_1", _read_cifar_batch)


def _empty_wav(tmp):
    import soundfile as sf

    from ssmts.data.speech import read_clip

    sf.write(str(tmp / "empty.wav"), np.zeros(0, dtype=np.float32), 16000)
    return read_clip(tmp / "empty.wav")


def _corrupt_config(tmp):
    return _resume_after_damage(tmp, "results_config.json", lambda path: path.write_text("{not json"))


def _tiny_series_forecast():
    """A series near 4e-12 is forecast as the same series near 4 is, scaled by 1e-12 (no absolute floor)."""
    t = np.arange(80)

    def forecast(scale):
        y = pd.Series(scale * (4.0 + 0.1 * np.sin(t / 2.0)))
        return SSMForecaster(**{**TINY, "context_length": 8, "max_epochs": 20}).fit(y.iloc[:70], fh=[1, 2]).predict()

    pred = forecast(1e-12)
    return bool(
        np.all(np.isfinite(pred))
        and np.all(np.abs(pred - 4e-12) < 5e-13)
        and np.allclose(pred.to_numpy() / 1e-12, forecast(1.0).to_numpy(), rtol=1e-4)
    )


def _cli(*args):
    """ssmts.cli.main; a failure raises SystemExit whose message holds what the CLI printed to stderr."""
    from ssmts.cli import main

    stderr = io.StringIO()
    try:
        with redirect_stderr(stderr):
            code = main(list(args))
    except SystemExit as exit:
        raise SystemExit(f"{exit.code} {stderr.getvalue()}") from None
    if code:
        raise SystemExit(f"{code} {stderr.getvalue()}")
    return code


def _resume_after_damage(tmp, name: str, damage):
    """Run a tiny task, damage one of its files, resume: SystemExit carrying what the CLI printed."""
    out = tmp / "run" / "results.json"
    base = ["tasks", "run", "bidmc-rr", "--synthetic", "--preset", "tiny", "--out", str(out), "--quiet"]
    _cli(*base)
    damage(out.with_name(name))
    _cli(*base, "--resume")


def _cli_resume_truncated(tmp):
    return _resume_after_damage(tmp, "results_checkpoint.pt", lambda path: path.write_bytes(path.read_bytes()[:300]))


@pytest.mark.parametrize("area, name, action, expectation", PROBES, ids=[f"{p[0]}: {p[1]}" for p in PROBES])
def test_probe(area, name, action, expectation, clf, clf_rate, forecaster, tmp_path):
    fixtures = {"clf": clf, "clf_rate": clf_rate, "forecaster": forecaster}
    if expectation[0] == "error":
        _, exc, fragment = expectation
        with pytest.raises(exc) as info:
            action(fixtures, tmp_path)
        message = str(info.value)
        assert fragment in message, f"{name}: the message {message!r} does not say {fragment!r}"
        assert not any(noise in message for noise in ("Traceback", "dim <= 2", "inhomogeneous", "Errno 22")), message
    else:
        value = action(fixtures, tmp_path)
        if isinstance(value, torch.Tensor):
            assert torch.isfinite(value).all()
        check = expectation[1]
        assert check is None or check(value), f"{name}: unexpected result {value!r}"


def test_every_probe_checks_what_it_promises():
    """An error probe names a fragment of the message (an empty one would check only the exception
    type: "" is in every message), and a result probe has a check of its value."""
    for area, name, _, expectation in PROBES:
        if expectation[0] == "error":
            fragment = expectation[2]
            assert isinstance(fragment, str) and len(fragment.strip()) >= 3, f"{area}: {name}: fragment {fragment!r}"
        else:
            assert expectation[0] == "result" and callable(expectation[1]), f"{area}: {name}: no check of the result"
    names = [(area, name) for area, name, _, _ in PROBES]
    assert len(names) == len(set(names)), "two probes share a name"
