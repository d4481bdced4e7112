"""The pickle-free save format of the sktime faces (save/load, as the scikit-learn estimators'):
a loaded forecaster or panel estimator gives bit-identical predictions, continues with update,
and a damaged, altered or hostile file gives one clear ValueError before any network is built,
without running code from it. Tiny networks (d_model 8), two epochs."""

from __future__ import annotations

import copy
import json
import pickle
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import safe_open, save_file
from sktime.base import load as sktime_load
from sktime.forecasting.base import ForecastingHorizon

from ssmts import SSMClassifier
from ssmts.estimators import _persistence
from ssmts.sktime import (
    SSMFeaturePanelClassifier,
    SSMFeaturePanelRegressor,
    SSMFeaturePanelTransformer,
    SSMForecaster,
    SSMPanelClassifier,
    SSMPanelRegressor,
)

TINY = dict(
    d_model=8,
    d_state=4,
    n_layers=1,
    max_epochs=2,
    batch_size=16,
    context_length=12,
    device="cpu",
    random_state=0,
    quantiles=(0.1, 0.25, 0.5, 0.75, 0.9),
    update_epochs=1,
    n_sample_paths=16,
)
PANEL_TINY = dict(d_model=8, d_state=4, n_layers=1, max_epochs=2, min_steps=0, batch_size=8, device="cpu")


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


def _series(n=60, level=10.0, seed=0, index=None, name="sales"):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    values = level + 0.05 * t + np.sin(2 * np.pi * t / 12) + 0.1 * rng.normal(size=n)
    index = pd.period_range("2000-01", periods=n, freq="M") if index is None else index
    return pd.Series(values, index=index, name=name)


def _uneven(n=70, seed=0):
    """A sinusoid at Poisson times, on an integer index."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(np.maximum(rng.exponential(1.0, n), 0.05))
    index = pd.Index(np.round(t * 1000).astype(np.int64))
    return pd.Series(np.sin(2 * np.pi * t / 9.0) + 0.05 * rng.standard_normal(n), index=index, name="y")


def _split(frame, k):
    """(all but the last k rows of each series, the last k rows)."""
    if not isinstance(frame.index, pd.MultiIndex):
        return frame.iloc[:-k], frame.iloc[-k:]
    position = frame.groupby(level=list(range(frame.index.nlevels - 1)), sort=False).cumcount(ascending=False)
    return frame[position.to_numpy() >= k], frame[position.to_numpy() < k]


def _panel_with_covariates(n_series=2, n=40):
    """A panel with string keys and X of an ordinary, a past-only and a static covariate."""
    ys, xs = [], []
    for i in range(n_series):
        months = pd.period_range("2001-01", periods=n + 3 * i, freq="M")
        index = pd.MultiIndex.from_arrays([[f"s{i}"] * len(months), months], names=["store", "month"])
        y = _series(len(months), level=10.0 * (i + 1), seed=i, index=index).to_frame("sales")
        rng = np.random.default_rng(10 + i)
        x = pd.DataFrame(
            {"promo": np.cos(np.arange(len(months))), "sensor": rng.normal(size=len(months)), "size": float(i + 1)},
            index=index,
        )
        ys.append(y)
        xs.append(x)
    return pd.concat(ys), pd.concat(xs)


def _future_x(y, steps, columns=("promo",)):
    """Rows of X after each series' end (the ordinary covariates only)."""
    rows = []
    for key in y.index.droplevel(-1).unique():
        end = y.loc[key].index[-1]
        idx = pd.MultiIndex.from_product([[key], [end + k for k in range(1, steps + 1)]], names=y.index.names)
        rows.append(pd.DataFrame({c: np.linspace(0.0, 1.0, steps) for c in columns}, index=idx))
    return pd.concat(rows)


def _scenario(name):
    """(fitted forecaster, predict kwargs, update (y, X), predict kwargs after the update)."""
    if name == "series-direct":
        y_fit, y_new = _split(_series(), 3)
        return SSMForecaster(**TINY).fit(y_fit, fh=[1, 2, 3]), {}, (y_new, None), {}
    if name == "series-recursive-ensemble":
        y_fit, y_new = _split(_series(), 3)
        f = SSMForecaster(**TINY, strategy="recursive", ensemble_size=2, normalize=False)
        return f.fit(y_fit, fh=[1, 2, 4]), {}, (y_new, None), {}
    if name == "panel-covariates-direct":
        y, X = _panel_with_covariates()
        (y_fit, y_new), (x_fit, x_new) = _split(y, 2), _split(X, 2)
        f = SSMForecaster(**TINY, past_covariates=["sensor"], static_covariates=["size"], normalize="drift")
        f.fit(y_fit, X=x_fit, fh=[1, 2])
        return f, {"X": _future_x(y_fit, 2)}, (y_new, x_new), {"X": _future_x(y, 2)}
    if name == "multivariate-datetime-recursive-X":
        index = pd.date_range("2020-01-01", periods=50, freq="D")
        y = pd.DataFrame({"a": _series(50, index=index).to_numpy(), "b": _series(50, 3.0, 1, index).to_numpy()}, index)
        X = pd.DataFrame({"temp": np.sin(np.arange(52) / 4.0)}, index=pd.date_range("2020-01-01", periods=52, freq="D"))
        f = SSMForecaster(**TINY, strategy="recursive").fit(y.iloc[:-3], X=X.iloc[:-5], fh=[1, 2])
        return f, {"X": X.iloc[-5:-3]}, (y.iloc[-3:], X.iloc[-5:-2]), {"X": X.iloc[-2:]}
    if name == "hierarchical-conformal":
        frames = []
        for i, (region, store) in enumerate([(1, "a"), (1, "b"), (2, "a"), (2, "c")]):
            months = pd.period_range("2000-01", periods=45, freq="M")
            index = pd.MultiIndex.from_arrays([[region] * 45, [store] * 45, months], names=["region", "store", "month"])
            frames.append(_series(45, level=5.0 * (i + 1), seed=i, index=index).to_frame("sales"))
        y_fit, y_new = _split(pd.concat(frames), 2)
        f = SSMForecaster(**TINY, calibration="conformal", early_stopping=True, validation_fraction=0.3)
        f.fit(y_fit, fh=[1, 2])
        assert f.interval_widening_ is not None and f.calibration_ == "conformal"
        return f, {}, (y_new, None), {}
    if name == "numpy":
        values = _series(50).to_numpy()[:, None]
        return SSMForecaster(**TINY).fit(values[:-3], fh=[1, 2]), {}, (values, None), {}
    if name == "timedelta-fh":
        y = _series(60, index=pd.date_range("2020-01-01", periods=60, freq="min"))
        y_fit, y_new = _split(y, 3)
        fh = ForecastingHorizon(pd.to_timedelta([1, 3], unit="min"), is_relative=True)
        return SSMForecaster(**TINY).fit(y_fit, fh=fh), {}, (y_new, None), {}
    if name == "irregular-integer-index":
        y_fit, y_new = _split(_uneven(), 4)
        f = SSMForecaster(**TINY, strategy="recursive", irregular="time_deltas")
        return f.fit(y_fit, fh=[400, 1500]), {}, (y_new, None), {}
    if name == "irregular-datetime-tz":
        y = _uneven()
        index = pd.Timestamp("2024-03-30", tz="Europe/Berlin") + pd.to_timedelta(y.index.to_numpy() * 3600, unit="ms")
        y.index = index.as_unit("s")
        X = pd.DataFrame({"x": np.cos(np.arange(len(y)) / 5.0)}, index=y.index)
        first = y.index[59] + pd.to_timedelta([0.5, 2.0], unit="h")
        later = pd.DatetimeIndex(y.index[-1] + pd.to_timedelta([0.25, 1.0, 4.0], unit="h"))
        f = SSMForecaster(**TINY, strategy="recursive", irregular="time_deltas", time_unit=pd.Timedelta("1h"))
        f.fit(y.iloc[:60], X.iloc[:60], fh=ForecastingHorizon(first, is_relative=False, freq="min"))
        x_first = pd.DataFrame({"x": [0.1, 0.2]}, index=first)
        x_later = pd.DataFrame({"x": [0.1, 0.2, 0.3]}, index=later)
        return f, {"X": x_first}, (y.iloc[60:], X.iloc[60:]), {"fh": later, "X": x_later}
    raise KeyError(name)


SCENARIOS = [
    "series-direct",
    "series-recursive-ensemble",
    "panel-covariates-direct",
    "multivariate-datetime-recursive-X",
    "hierarchical-conformal",
    "numpy",
    "timedelta-fh",
    "irregular-integer-index",
    "irregular-datetime-tz",
]


def _predictions(f, kwargs) -> dict:
    return {
        "predict": f.predict(**kwargs),
        "interval": f.predict_interval(coverage=[0.5, 0.8], **kwargs),
        "quantiles": f.predict_quantiles(alpha=[0.05, 0.3, 0.5, 0.95], **kwargs),
    }


def _assert_identical(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _assert_identical(x, y)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _assert_identical(a[key], b[key])
    elif isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    elif isinstance(a, pd.Series):
        pd.testing.assert_series_equal(a, b, check_exact=True)
    else:
        assert type(a) is type(b)
        np.testing.assert_array_equal(a, b)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """name -> (forecaster, predict kwargs, update data, predict kwargs after update, its saved file)."""
    cache = {}

    def get(name):
        if name not in cache:
            f, kwargs, new, after = _scenario(name)
            path = f.save(tmp_path_factory.mktemp("save") / f"{name}.safetensors")
            cache[name] = f, kwargs, new, after, path
        return cache[name]

    return get


def test_the_scenarios_are_what_they_say(fitted):
    f = fitted("irregular-datetime-tz")[0]
    assert str(f.cutoff.tz) == "Europe/Berlin" and f.cutoff.unit == "s" and f.time_unit == pd.Timedelta("1h")
    f = fitted("hierarchical-conformal")[0]
    assert all(isinstance(k[0], (int, np.integer)) for k in f._store) and len(f._store) == 4  # integer keys


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_loaded_forecaster_predicts_bit_identically_and_continues(fitted, name):
    f, kwargs, (y_new, x_new), after, path = fitted(name)
    loaded = SSMForecaster.load(path)
    assert loaded.get_params() == f.get_params() and loaded.calibration_ == f.calibration_
    assert loaded.cutoff.equals(f.cutoff) and loaded.context_length_ == f.context_length_
    _assert_identical(_predictions(loaded, kwargs), _predictions(f, kwargs))
    # update without fine-tuning: the same weights read the same new contexts
    original = copy.deepcopy(f)  # f stays as fitted for the other tests
    original.update(y_new, X=x_new, update_params=False)
    loaded.update(y_new, X=x_new, update_params=False)
    assert loaded.cutoff.equals(original.cutoff)
    _assert_identical(_predictions(loaded, after), _predictions(original, after))
    # update with fine-tuning continues training (with a fresh optimizer, as the sklearn estimators)
    tuned = SSMForecaster.load(path).update(y_new, X=x_new, update_params=True)
    point = tuned.predict(**after)
    assert np.isfinite(np.asarray(point, dtype=float)).all()
    if isinstance(point, (pd.Series, pd.DataFrame)):
        pd.testing.assert_index_equal(point.index, loaded.predict(**after).index)


def test_the_loaded_state_equals_the_fitted_one(fitted):
    f, _, _, _, path = fitted("panel-covariates-direct")
    loaded = SSMForecaster.load(path)
    assert list(loaded._store) == list(f._store)
    for key, (tail, x_part) in f._store.items():
        pd.testing.assert_frame_equal(loaded._store[key][0], tail, check_exact=True, check_freq=True)
        pd.testing.assert_frame_equal(loaded._store[key][1], x_part, check_exact=True, check_freq=True)
        np.testing.assert_array_equal(loaded._statics[key], f._statics[key])
    for attr in ("y_mean_", "y_scale_", "scale_floor_", "x_mean_", "x_scale_", "quantile_levels_", "_x_past"):
        np.testing.assert_array_equal(getattr(loaded, attr), getattr(f, attr))
    pd.testing.assert_index_equal(loaded._x_columns, f._x_columns)
    assert 1 <= loaded.best_epoch_ == f.best_epoch_ <= f.n_iter_
    assert np.array_equal(loaded.fh.to_pandas(), f.fh.to_pandas()) and loaded.fh.is_relative == f.fh.is_relative
    assert loaded._y_metadata == f._y_metadata
    weights = f.model_.state_dict()
    assert all(torch.equal(weights[k], v) for k, v in loaded.model_.state_dict().items())


def test_historical_forecasts_and_streams_of_a_loaded_forecaster(fitted):
    f, _, (y_new, _), _, path = fitted("series-direct")
    loaded = SSMForecaster.load(path)
    y = pd.concat([f._store[()][0]["sales"], y_new])
    _assert_identical(loaded.historical_forecasts(y, alpha=[0.1, 0.9]), f.historical_forecasts(y, alpha=[0.1, 0.9]))
    a, b = f.stream(), loaded.stream()
    for value in y_new:
        _assert_identical(b.step(value, alpha=[0.1, 0.9]), a.step(value, alpha=[0.1, 0.9]))


def test_a_panel_of_many_series_is_a_few_tensors_and_one_layout(tmp_path):
    """The series are concatenated into a few tensors, and their time index layout is listed once:
    the file's headers grow by a key and two counts per series, not by a tensor entry each."""
    months = pd.period_range("2010-01", periods=16, freq="M")
    index = pd.MultiIndex.from_product([[f"item{i}" for i in range(300)], months], names=["item", "month"])
    y = pd.DataFrame({"v": np.random.default_rng(0).normal(size=len(index)).cumsum()}, index=index)
    f = SSMForecaster(**{**TINY, "context_length": 4, "max_epochs": 1, "batch_size": 256}).fit(y, fh=[1])
    path = f.save(tmp_path / "many.safetensors")
    header, tensors = _parts(path)
    assert sorted(k for k in tensors if k.startswith("data:")) == ["data:y", "data:y_time"]
    assert tensors["data:y"].shape == (300 * 5, 1)
    assert len(header["fitted"]["series"]["time_layouts"]) == 1
    assert len(json.dumps(header)) < 300 * 60 + 20_000
    _assert_identical(SSMForecaster.load(path).predict(), f.predict())


@pytest.mark.parametrize("mode", ["zero-shot", "fine-tune"])
def test_a_forecaster_started_from_pretrained_weights_loads_without_them(tmp_path, mode):
    """The network of pretrained weights has their sizes, not the parameters' (d_model 8 here, the
    default 32): the file describes it, and loading needs neither the weights file nor training."""
    pretrained = pytest.importorskip("ssmts.sktime._pretrained")
    source = SSMForecaster(context_length=16, d_model=8, d_state=8, max_epochs=2, random_state=0)
    source.fit(_series(80, seed=3), fh=[1, 2, 3, 4])
    weights = pretrained.write_pretrained(source, tmp_path / "tiny.safetensors", {"corpus": "one series"})
    f = SSMForecaster(pretrained=mode, pretrained_weights=str(weights), max_epochs=1, random_state=0)
    f.fit(_series(60, seed=4), fh=[1, 2, 3])
    path = f.save(tmp_path / "f.safetensors")
    weights.unlink()
    loaded = SSMForecaster.load(path)
    _assert_identical(_predictions(loaded, {}), _predictions(f, {}))
    assert loaded.model_.members[0].backbone.d_model == 8 and loaded.pretrained_params_ == f.pretrained_params_


# ---------------------------------------------------------------- the panel estimators
def _unequal_panel(n=12, seed=0):
    rng = np.random.default_rng(seed)
    frames = []
    for i in range(n):
        index = pd.MultiIndex.from_product([[f"case{i}"], range(20 + i)], names=["instance", "time"])
        frames.append(pd.DataFrame(rng.normal(size=(20 + i, 2)) + (i % 2), index=index, columns=["a", "b"]))
    return pd.concat(frames), np.array(["up" if i % 2 else "down" for i in range(n)])


@pytest.mark.parametrize("params", SSMPanelClassifier.get_test_params(), ids=["default", "heads-last", "lncde"])
def test_a_loaded_panel_classifier_predicts_bit_identically(tmp_path, params):
    X, y = _unequal_panel()
    clf = SSMPanelClassifier(**params).fit(X, y)
    loaded = SSMPanelClassifier.load(clf.save(tmp_path / "clf.safetensors"))
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    np.testing.assert_array_equal(loaded.predict(X), clf.predict(X))
    np.testing.assert_array_equal(loaded.classes_, clf.classes_)
    assert loaded.get_params() == clf.get_params() and isinstance(loaded.estimator_, SSMClassifier)
    numpy3d = np.random.default_rng(1).normal(size=(5, 2, 25))
    np.testing.assert_array_equal(loaded.predict_proba(numpy3d), clf.predict_proba(numpy3d))


@pytest.mark.parametrize("multioutput", [False, True])
def test_a_loaded_panel_regressor_predicts_bit_identically(tmp_path, multioutput):
    X = np.random.default_rng(0).normal(size=(16, 2, 24))
    y = X[:, 0].mean(1)
    if multioutput:
        y = pd.DataFrame({"mean0": y, "mean1": X[:, 1].mean(1)})
    reg = SSMPanelRegressor(**PANEL_TINY, random_state=0).fit(X, y)
    loaded = SSMPanelRegressor.load(reg.save(tmp_path / "reg.safetensors"))
    _assert_identical(loaded.predict(X), reg.predict(X))


@pytest.mark.parametrize("face", [SSMFeaturePanelClassifier, SSMFeaturePanelRegressor, SSMFeaturePanelTransformer])
def test_a_loaded_feature_face_predicts_bit_identically(tmp_path, face):
    X, labels = _unequal_panel()
    y = labels if face is SSMFeaturePanelClassifier else np.array([len(X.loc[i]) for i in X.index.unique(0)], float)
    for params in face.get_test_params():
        fitted = face(**params).fit(X, y)
        loaded = face.load(fitted.save(tmp_path / "features.safetensors"))
        if face is SSMFeaturePanelTransformer:
            _assert_identical(loaded.transform(X), fitted.transform(X))
        else:
            np.testing.assert_array_equal(loaded.predict(X), fitted.predict(X))
        assert loaded.get_params() == fitted.get_params() and isinstance(loaded.estimator_, face._sklearn_class)


# ---------------------------------------------------------------- formats and errors
@pytest.mark.parametrize(
    "estimator", [SSMForecaster(**TINY), SSMPanelClassifier(**PANEL_TINY), SSMPanelRegressor(**PANEL_TINY)]
)
def test_saving_an_unfitted_estimator_is_a_clear_error(tmp_path, estimator):
    with pytest.raises(ValueError, match=f"this {type(estimator).__name__} is not fitted yet; fit it before save"):
        estimator.save(tmp_path / "model.safetensors")
    assert not list(tmp_path.iterdir())


def test_sktimes_own_save_stays_and_the_format_is_chosen_by_suffix_or_name(fitted, tmp_path):
    f, kwargs, _, _, _ = fitted("series-direct")
    expected = f.predict(**kwargs)
    _assert_identical(sktime_load(f.save()).predict(), expected)  # in memory, pickled (sktime's tests use it)
    f.save(tmp_path / "zipped")  # sktime's zip of pickles
    assert (tmp_path / "zipped.zip").is_file()
    _assert_identical(SSMForecaster.load(tmp_path / "zipped.zip", format="sktime").predict(), expected)
    # a path with a suffix: sktime writes model.pkl.zip but returns a ZipFile of model.zip (FileNotFoundError)
    archive = f.save(tmp_path / "model.pkl")
    assert Path(archive.filename) == tmp_path / "model.pkl.zip" and not (tmp_path / "model.zip").exists()
    _assert_identical(SSMForecaster.load(Path(archive.filename), format="sktime").predict(), expected)
    plain = f.save(tmp_path / "model.bin", format="safetensors")
    assert plain == tmp_path / "model.bin"
    _assert_identical(SSMForecaster.load(plain).predict(), expected)
    with pytest.raises(ValueError, match="unknown format"):
        f.save(tmp_path / "m.safetensors", format="joblib")
    with pytest.raises(ValueError, match="give its path"):
        f.save(format="safetensors")
    with pytest.raises(TypeError, match="holds a SSMForecaster, not a SSMPanelClassifier"):
        SSMPanelClassifier.load(plain)
    with pytest.raises(ValueError, match="not a readable ssmts save file"):
        SSMForecaster.load(tmp_path / "zipped.zip")  # a pickle is never read as the safetensors format
    # the path given to save, or the ZipFile save returned: the way to read it is named, nothing is unpickled
    for given in (tmp_path / "zipped", f.save(tmp_path / "zipped")):
        with pytest.raises(ValueError, match=r"zipped.zip is in sktime's format, .* format='sktime'"):
            SSMForecaster.load(given)


def test_a_signed_forecaster_loads_with_its_key_and_refuses_a_re_signed_edit(fitted, tmp_path):
    """save(path, key=...) signs the sktime faces' files as the scikit-learn estimators' (one
    implementation): the right key loads them bit-identically, an edit whose checksum was recomputed
    is refused, and sktime's pickled format, which cannot be signed, refuses a key."""
    f, kwargs, _, _, _ = fitted("series-direct")
    key = b"forecasts we vouch for"
    signed = f.save(tmp_path / "signed.safetensors", key=key)
    _assert_identical(_predictions(SSMForecaster.load(signed, key=key), kwargs), _predictions(f, kwargs))
    with pytest.raises(ValueError, match="signed with a key"):
        SSMForecaster.load(signed)

    def edit(header, tensors):
        header["fitted"]["y_mean_"]["__ndarray__"][0] += 1.0

    resigned = _rewrite(signed, tmp_path / "resigned.safetensors", edit)
    with pytest.raises(ValueError, match="the signature does not match the key"):
        SSMForecaster.load(resigned, key=key)
    with pytest.raises(ValueError, match="sktime's format cannot be signed"):
        f.save(tmp_path / "zipped", key=key)
    with pytest.raises(ValueError, match="sktime's format has none"):
        SSMForecaster.load(tmp_path / "zipped.zip", format="sktime", key=key)


def test_sktime_conformance_of_save_and_load():
    """sktime's own persistence checks (its save() in memory and to a zip) pass with save overridden."""
    from sktime.utils.estimator_checks import check_estimator

    tests = ["test_persistence_via_pickle", "test_save_estimators_to_file"]
    for estimator in (SSMForecaster, SSMPanelClassifier):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results = check_estimator(estimator, tests_to_run=tests, raise_exceptions=False, verbose=False)
        failures = {k: v for k, v in results.items() if v != "PASSED"}
        assert results and not failures, failures


def test_load_runs_no_pickle(fitted, monkeypatch):
    path = fitted("panel-covariates-direct")[-1]

    def refuse(*args, **kwargs):
        raise AssertionError("load unpickled something")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)
    assert SSMForecaster.load(path).is_fitted


def _parts(path):
    with safe_open(str(path), framework="pt") as f:
        return json.loads(f.metadata()["ssmts"]), {k: f.get_tensor(k) for k in f.keys()}


def _rewrite(path, out, edit, checksum=True):
    """`path` with its header (and tensors) changed by edit(header, tensors); with checksum, a valid
    checksum recomputed (it is not a signature: a hostile file can do that)."""
    header, tensors = _parts(path)
    edit(header, tensors)
    if checksum:
        header["sha256"] = _persistence._checksum(tensors, header)
    save_file(tensors, str(out), metadata={"ssmts": json.dumps(header)})
    return out


def _flip(path, out, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    out.write_bytes(bytes(data))
    return out


def _find(path, fragment: str) -> int:
    """Where the end of `fragment` of the ssmts header lies in the file (the header is a JSON string
    inside safetensors' JSON, so its quotes are escaped)."""
    escaped = json.dumps(fragment)[1:-1].encode()
    return path.read_bytes().index(escaped) + len(escaped)


def _tensor_offset(path, name):
    """Where the bytes of tensor `name` start in a safetensors file."""
    data = path.read_bytes()
    length = int.from_bytes(data[:8], "little")
    layout = json.loads(data[8 : 8 + length])
    return 8 + length + layout[name]["data_offsets"][0]


def test_a_flipped_byte_in_the_header_the_weights_or_the_series_is_refused(fitted, tmp_path):
    path = fitted("panel-covariates-direct")[-1]
    data = path.read_bytes()
    # digits changed into other digits: the JSON stays valid, only the checksum can tell
    places = {
        "header: a scaling statistic": data.index(b".", _find(path, '"y_mean_": {"__ndarray__": [')) + 1,
        "header: the cutoff": data.index(b"]", _find(path, '"freq": "M", "values": [')) - 1,
        "header: a parameter": _find(path, '"d_model": 8') - 1,
        "header: a series key": _find(path, '"keys": [{"__tuple__": ["s'),
        "header: a number of rows": _find(path, '"y_rows": [') + 1,
        "weights": _tensor_offset(path, "members.0.head.weight") + 3,
        "a stored series": _tensor_offset(path, "data:y") + 7,
        "a time stamp": _tensor_offset(path, "data:y_time") + 1,
        "stored X": _tensor_offset(path, "data:x") + 7,
        "static covariates": _tensor_offset(path, "data:statics") + 7,
    }
    for where, offset in places.items():
        damaged = _flip(path, tmp_path / "damaged.safetensors", offset)
        with pytest.raises(ValueError, match="does not match its checksum") as error:
            SSMForecaster.load(damaged)
        assert str(damaged) in str(error.value), where


def test_any_flipped_byte_is_one_clear_error_or_changes_nothing(fitted, tmp_path):
    f, kwargs, _, _, path = fitted("panel-covariates-direct")
    expected = f.predict(**kwargs)
    size = path.stat().st_size
    offsets = sorted(set(np.random.default_rng(0).integers(0, size, 40).tolist()) | {0, 7, 8, 100, size - 1})
    for offset in offsets:
        damaged = _flip(path, tmp_path / "damaged.safetensors", offset)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                loaded = SSMForecaster.load(damaged)
        except ValueError as error:
            assert str(damaged) in str(error), (offset, error)
            continue
        _assert_identical(loaded.predict(**kwargs), expected)  # only bytes no reader looks at


def _set(*keys, value):
    def edit(header, tensors):
        node = header
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value

    return edit


def _huge_horizon(header, tensors):
    # an uncalibrated file: with its widening, the widening's shape would be refused first
    header["fitted"]["horizon_"] = 10**9
    header["fitted"].pop("interval_widening_", None)
    header["fitted"]["calibration_"] = "none"


def _layout_field(field, value):
    def edit(header, tensors):
        header["fitted"]["series"]["time_layouts"][0][field] = value

    return edit


def _one_row_less(header, tensors):
    header["fitted"]["series"]["y_rows"][0] -= 1


def _add_tensor(header, tensors):
    tensors["data:payload"] = torch.zeros(3, dtype=torch.float64)


def _time_reversed(header, tensors):
    tensors["data:y_time"] = tensors["data:y_time"].flip(0).contiguous()


def _time_overflowing(header, tensors):
    header["fitted"]["series"]["time_layouts"][0] = {"name": None, "kind": "numeric", "dtype": "<i2"}
    tensors["data:y_time"] = tensors["data:y_time"] * 10**6


HOSTILE = {
    "huge horizon": (_huge_horizon, "need more weights than the"),
    "huge horizon and its widening": (
        _set("fitted", "horizon_", value=10**9),
        "not a float array of shape (1000000000, 5)",
    ),
    "huge d_model": (_set("params", "d_model", value=10**8), "d_model=100000000 cannot describe"),
    "huge ensemble": (_set("params", "ensemble_size", value=10**8), "ensemble_size=100000000 cannot describe"),
    "unknown attribute": (_set("fitted", "payload_", value=1), "unexpected attributes ['payload_']"),
    "unknown parameter": (_set("params", "payload", value=1), "does not have: ['payload']"),
    "wrong type": (_set("fitted", "y_mean_", value="1e9"), "y_mean_ is a str, not a float array of shape (1,)"),
    "wrong shape": (
        _set("fitted", "y_scale_", value={"__ndarray__": [1.0, 2.0], "dtype": "<f8"}),
        "y_scale_ is a float64 array of shape (2,)",
    ),
    "rows that do not add up": (_one_row_less, "the tensor data:y is torch.float64 (28, 1), not torch.float64 (27, 1)"),
    "a series longer than kept": (_set("fitted", "series", "y_rows", 0, value=10**6), "not an integer in 1..14"),
    "an extra tensor": (_add_tensor, "unexpected data tensors ['data:payload']"),
    "an unknown index kind": (_layout_field("kind", "python"), "unknown layout"),
    "an unknown frequency": (_layout_field("freq", "fortnightly"), "cannot be rebuilt"),
    "time stamps out of order": (_time_reversed, "is not an increasing time index"),
    "time stamps beyond their dtype": (_time_overflowing, "do not fit the dtype int16"),
    "cutoff stamps that are not integers": (
        _set("fitted", "sktime", "cutoff", "__index__", "values", value=["__import__('os')"]),
        "not a list of integers",
    ),
    # the cutoff is the series' last time (an edited one loaded, and predict forecast from the old end)
    "a cutoff the series do not reach": (
        _set("fitted", "sktime", "cutoff", "__index__", "values", value=[10**6]),
        "is not the last time of its series",
    ),
    "a key of the wrong length": (
        _set("fitted", "series", "keys", 0, value={"__tuple__": ["s0", "extra"]}),
        "the key of series 0 is not a tuple of 1 labels",
    ),
    "two series with one key": (
        _set("fitted", "series", "keys", 1, value={"__tuple__": ["s0"]}),
        "two of its series have the key ('s0',)",
    ),
    "an unknown mtype": (_set("fitted", "sktime", "y_mtype_last_seen", value="os.system"), "not an sktime mtype"),
    "a broken fh": (_set("fitted", "sktime", "fh", "is_relative", value="yes"), "fh is not an object"),
    "a roles mismatch": (
        _set("fitted", "_x_static", value={"__ndarray__": [True, False, False], "dtype": "|b1"}),
        "_x_static contradicts the parameters",
    ),
    "a parameter out of range": (_set("params", "n_layers", value=-1), "n_layers"),
    "a widening said to be none": (
        _set("fitted", "calibration_", value="none"),
        "calibration_='none' contradicts interval_widening_",
    ),
    "an object dtype": (_set("fitted", "quantile_levels_", "dtype", value="|O"), "never writes"),
    "a kept epoch beyond the run": (_set("fitted", "best_epoch_", value=10**6), "best_epoch_ is 1000000, not an epoch"),
}


@pytest.mark.parametrize("edit, message", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_header_with_a_valid_checksum_is_one_clear_error_before_any_network(
    fitted, tmp_path, edit, message, monkeypatch
):
    path = fitted("panel-covariates-direct")[-1]
    hostile = _rewrite(path, tmp_path / "hostile.safetensors", edit)
    built = []
    monkeypatch.setattr(SSMForecaster, "_build_network", lambda self: built.append(1))
    with pytest.raises(ValueError, match=re.escape(message)) as error:
        SSMForecaster.load(hostile)
    assert not built, "a network was built from a file that is then refused"
    assert str(hostile) in str(error.value) or "n_layers" in str(error.value)


def test_weights_that_do_not_fit_are_a_clear_error(fitted, tmp_path):
    path = fitted("series-direct")[-1]

    def transpose(header, tensors):
        tensors["members.0.head.weight"] = tensors["members.0.head.weight"].T.contiguous()

    with pytest.raises(ValueError, match="the weights do not fit the network"):
        SSMForecaster.load(_rewrite(path, tmp_path / "hostile.safetensors", transpose))


@pytest.fixture(scope="module")
def classifier_file(tmp_path_factory):
    X, y = _unequal_panel()
    clf = SSMPanelClassifier(**PANEL_TINY, random_state=0).fit(X, y)
    return clf.save(tmp_path_factory.mktemp("clf") / "clf.safetensors"), clf.predict_proba(X), X


def test_a_flipped_byte_of_a_classifier_file_is_refused(classifier_file, tmp_path):
    path, _, _ = classifier_file
    size = path.stat().st_size
    for offset in (_find(path, '"classes_": {"__ndarray__": ["') + 1, _find(path, '"_X_metadata": {') + 3, size - 2):
        with pytest.raises(ValueError, match="does not match its checksum|not a readable"):
            SSMPanelClassifier.load(_flip(path, tmp_path / "damaged.safetensors", offset))


@pytest.mark.parametrize(
    "edit, message",
    [
        (_set("fitted", "sktime", "classes_", "__ndarray__", value=["up", "down"]), "classes_ are not those"),
        (_set("fitted", "sktime", "payload", value=1), "unexpected attributes ['payload']"),
        (_set("fitted", "sktime", "_y_inner_mtype", value="pickle"), "not an sktime mtype"),
        (_set("fitted", "estimator", "payload_", value=1), "unexpected attribute 'payload_'"),
        (_set("fitted", "estimator", "n_channels_in_", value=10**9), "n_channels_in_=1000000000 cannot describe"),
        (_add_tensor, "holds data tensors"),
    ],
    ids=["classes", "sktime attribute", "mtype", "estimator attribute", "huge channels", "data tensor"],
)
def test_a_hostile_classifier_file_is_one_clear_error(classifier_file, tmp_path, edit, message):
    path, _, _ = classifier_file
    with pytest.raises(ValueError, match=re.escape(message)):
        SSMPanelClassifier.load(_rewrite(path, tmp_path / "hostile.safetensors", edit))


# ---------------------------------------------------------------- pandas indexes in the header
INDEXES = {
    "range": pd.RangeIndex(3, 30, 3, name="t"),
    "int64": pd.Index([1, 5, 9], dtype=np.int64),
    "float": pd.Index([0.1, 0.25, 1e-300, 3.5e12], name="seconds"),
    "uint8": pd.Index([1, 2, 255], dtype=np.uint8),
    "period monthly": pd.period_range("1999-11", periods=4, freq="M", name="month"),
    "period weekly": pd.period_range("2020-01-05", periods=3, freq="W-SUN"),
    "period quarterly": pd.period_range("2020Q1", periods=3, freq="Q-DEC"),
    "datetime ns with freq": pd.date_range("2021-03-01", periods=5, freq="15min", name="when"),
    "datetime s, tz, no freq": pd.DatetimeIndex(["2024-03-31 01:00", "2024-03-31 03:30"], tz="Europe/Berlin").as_unit(
        "s"
    ),
    "datetime business days": pd.bdate_range("2024-01-01", periods=6),
    "datetime month start, us": pd.date_range("2024-01-01", periods=3, freq="MS", unit="us", tz="UTC"),
    "timedelta s, no freq": pd.to_timedelta([60, 180, 86400], unit="s").as_unit("s"),
    "timedelta with freq": pd.timedelta_range("1h", periods=4, freq="30min", name="ahead"),
    "labels": pd.Index(["a", 3, 2.5, None, True, ("x", 1)], dtype=object, name=("level", 0)),
    "strings": pd.Index(["sales", "price"]),  # pandas' string dtype from pandas 3 on, object before
    "strings as objects": pd.Index(["sales", "price"], dtype=object),
    "strings with a missing one": pd.Index(["sales", None, "price"], name="column"),
}


@pytest.mark.parametrize("index", INDEXES.values(), ids=INDEXES.keys())
def test_indexes_survive_the_header_exactly(index):
    spec = json.loads(json.dumps(_persistence._to_json(index, "an index")))
    back = _persistence._from_json(spec)
    assert _persistence.same_index(back, index)
    pd.testing.assert_index_equal(back, index, exact=True)
    assert getattr(back, "freq", None) == getattr(index, "freq", None)


def test_a_string_index_of_the_header_holds_only_strings():
    spec = {"kind": "labels", "name": None, "values": ["a", 3], "dtype": "str"}
    with pytest.raises(ValueError, match="^an index of strings in the header holds labels that are not strings$"):
        _persistence._from_json({"__index__": spec})
    with pytest.raises(ValueError, match=r"unknown layout \(fields \['dtype', 'kind', 'name', 'values'\]\)"):
        _persistence._index_from_json({**spec, "values": ["a"], "dtype": "category"})


@pytest.mark.parametrize(
    "index",
    [
        pd.CategoricalIndex(["a", "b"]),
        pd.MultiIndex.from_arrays([[1, 2], ["a", "b"]]),
        pd.Index([pd.Timestamp("2020-01-01"), "a"], dtype=object),
        pd.interval_range(0, 3),
    ],
    ids=["categorical", "multi", "timestamp label", "interval"],
)
def test_indexes_the_format_cannot_hold_are_refused_at_save(index):
    with pytest.raises(TypeError, match="cannot save the index"):
        _persistence._to_json(index, "the index")


def test_a_series_key_the_format_cannot_hold_is_refused_at_save(tmp_path):
    y = _series(30)
    days = pd.to_datetime(["2020-01-01", "2020-06-01"])
    y = pd.concat(
        [y.to_frame("v").set_index(pd.MultiIndex.from_product([[day], y.index], names=["day", "t"])) for day in days]
    )
    f = SSMForecaster(**{**TINY, "context_length": 4}).fit(y, fh=[1])
    with pytest.raises(TypeError, match="its key holds a Timestamp"):
        f.save(tmp_path / "f.safetensors")


@pytest.mark.parametrize(
    "name, applied",
    [
        ("hierarchical-conformal", "conformal"),
        ("panel-covariates-direct", "holdout"),
        ("series-recursive-ensemble", "none"),
    ],
)
def test_a_file_from_before_calibration_was_saved_says_what_its_widening_came_from(fitted, tmp_path, name, applied):
    path = fitted(name)[-1]
    older = _rewrite(path, tmp_path / "older.safetensors", lambda header, tensors: header["fitted"].pop("calibration_"))
    assert SSMForecaster.load(older).calibration_ == applied
    without = _rewrite(
        path, tmp_path / "without.safetensors", lambda header, tensors: header["fitted"].pop("best_epoch_")
    )
    assert not hasattr(SSMForecaster.load(without), "best_epoch_")  # files before it had none: not made up
