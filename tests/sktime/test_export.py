"""SSMForecaster.export: the ONNX file run by onnxruntime (and the TorchScript file) gives predict
and predict_quantiles from the last context_length observations, for every normalize, with
missing values, a series shorter than the context, and the conformal widening of the intervals.

Tolerance: 1e-6 x the panel's spread. The statistics are float64 in both; the network is float32
in both but convolves directly in the file where predict uses FFTs, which rounds differently by a
few float32 ulps per operation (measured up to 4e-5 on values of a few hundred: 1e-7 relative).
"""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from ssmts.sktime import SSMForecaster

C, H = 12, 3
TINY = dict(
    context_length=C, d_model=8, d_state=8, n_layers=1, max_steps=20, batch_size=16, ensemble_size=2, device="cpu"
)


def _panel() -> pd.DataFrame:
    """Three monthly series of different levels; one has gaps in its last context, one is shorter than it."""
    rng = np.random.default_rng(0)
    frames = []
    for key, (level, n) in {"a": (500.0, 48), "b": (3.0, 40), "c": (80.0, 8)}.items():
        values = level * (1 + 0.1 * np.sin(np.arange(n) / 2) + 0.05 * rng.standard_normal(n))
        if key == "b":
            values[[-9, -4, -3]] = np.nan
        index = pd.MultiIndex.from_product([[key], pd.period_range("2000-01", periods=n, freq="M")])
        frames.append(pd.DataFrame({"sales": values}, index=index))
    return pd.concat(frames)


PANEL = _panel()


def _contexts(y: pd.DataFrame) -> np.ndarray:
    """(series, 1, C): each series' last C observations, NaN-padded at the front."""
    rows = []
    for _, part in y.groupby(level=0):
        values = part.to_numpy()[-C:, 0]
        rows.append(np.concatenate([np.full(C - len(values), np.nan), values]))
    return np.stack(rows)[:, None, :]


@pytest.fixture(scope="module")
def ort():
    pytest.importorskip("onnx", reason="onnx is not installed: pip install 'ssmts[export]'")
    pytest.importorskip("onnxscript", reason="onnxscript is not installed: pip install 'ssmts[export]'")
    return pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: pip install 'ssmts[export]'")


def _fit(**params) -> SSMForecaster:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SSMForecaster(**{**TINY, "random_state": 0, **params}).fit(PANEL, fh=range(1, H + 1))


def _expected(forecaster: SSMForecaster, levels) -> tuple[np.ndarray, np.ndarray]:
    """predict (series, H, 1) and predict_quantiles at the grid's levels (series, H, 1, Q)."""
    fh = range(1, H + 1)
    point = forecaster.predict(fh=fh).to_numpy().reshape(-1, H, 1)
    quantiles = forecaster.predict_quantiles(fh=fh, alpha=list(levels)).to_numpy()
    return point, quantiles.reshape(-1, H, 1, len(levels))


@pytest.mark.parametrize(
    "params",
    [
        dict(normalize="last"),
        dict(normalize="mean", early_stopping=True, validation_fraction=0.3, calibration="conformal"),
        dict(normalize="drift"),
        dict(normalize=False),
    ],
    ids=["last", "mean+conformal", "drift", "global"],
)
def test_onnx_gives_predict_and_predict_quantiles(ort, tmp_path, params):
    forecaster = _fit(**params)
    if "early_stopping" in params:  # the intervals are widened on the held-out windows
        assert forecaster.interval_widening_ is not None and np.abs(forecaster.interval_widening_).max() > 0
    path = forecaster.export(tmp_path / "forecaster.onnx")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    metadata = session.get_modelmeta().custom_metadata_map
    levels = json.loads(metadata["quantile_levels"])
    assert levels == forecaster.quantile_levels_.tolist()
    assert (metadata["context_length"], metadata["horizon"], json.loads(metadata["targets"])) == (
        str(C),
        str(H),
        ["sales"],
    )
    point, quantiles, valid = session.run(None, {"y": _contexts(PANEL)})
    assert valid.dtype == bool and valid.all()
    expected_point, expected_quantiles = _expected(forecaster, levels)
    atol = 1e-6 * np.nanstd(PANEL.to_numpy())
    np.testing.assert_allclose(point, expected_point, rtol=1e-6, atol=atol)
    np.testing.assert_allclose(quantiles, expected_quantiles, rtol=1e-6, atol=atol)


def test_torchscript_gives_the_same_outputs_and_empty_contexts_give_nan(tmp_path):
    forecaster = _fit()
    path = forecaster.export(tmp_path / "forecaster.pt", format="torchscript")
    metadata = {"ssmts.json": ""}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = torch.jit.load(str(path), _extra_files=metadata)
    assert json.loads(metadata["ssmts.json"])["horizon"] == str(H)
    contexts = _contexts(PANEL)
    point, quantiles, valid = (t.numpy() for t in module(torch.as_tensor(contexts)))
    assert valid.all()
    expected_point, expected_quantiles = _expected(forecaster, forecaster.quantile_levels_)
    np.testing.assert_allclose(point, expected_point, rtol=1e-6, atol=1e-6 * np.nanstd(PANEL.to_numpy()))
    assert quantiles.shape == expected_quantiles.shape
    # predict refuses a context without observations; the file cannot, so it answers NaN, not a number
    contexts[1] = np.nan
    point, quantiles, valid = (t.numpy() for t in module(torch.as_tensor(contexts)))
    assert np.isnan(point[1]).all() and np.isnan(quantiles[1]).all() and np.isfinite(point[[0, 2]]).all()
    assert valid.tolist() == [True, False, True]
    # a trace keeps no `if`: a shorter context, another dtype or another number of targets was answered
    tensor = torch.as_tensor(_contexts(PANEL))
    for bad, message in [
        (tensor[..., 1:], f"reads the last {tensor.shape[-1]} steps of y, got {tensor.shape[-1] - 1}"),
        (tensor.float(), "takes y as float64 values"),
        (tensor.expand(-1, 2, -1), "takes y with 1 targets, got 2"),
        (tensor[:, 0], "takes y of shape"),
    ]:
        with pytest.raises(Exception, match=re.escape(message)):
            module(bad)


@pytest.mark.parametrize("value", [np.inf, -np.inf, 1e300])
def test_a_context_predict_refuses_is_flagged_invalid_with_nan_forecasts(ort, tmp_path, value):
    """inf, or values whose window statistics overflow: predict raises; the file flags the series."""
    forecaster = _fit()
    session = ort.InferenceSession(str(forecaster.export(tmp_path / "f.onnx")), providers=["CPUExecutionProvider"])
    contexts = _contexts(PANEL)
    contexts[0, 0, -3] = value
    point, quantiles, valid = session.run(None, {"y": contexts})
    assert valid.tolist() == [False] + [True] * (len(contexts) - 1)
    assert np.isnan(point[0]).all() and np.isnan(quantiles[0]).all() and np.isfinite(point[1:]).all()


@pytest.mark.parametrize(
    "params, named",
    [
        (dict(strategy="recursive"), "strategy='recursive'"),
        (dict(layer="lncde"), "LinearCDE"),
    ],
)
def test_what_does_not_export_says_so(tmp_path, params, named):
    forecaster = _fit(**params)
    with pytest.raises(ValueError, match=f"cannot be exported: .*{named}"):
        forecaster.export(tmp_path / "f.onnx")
    with pytest.raises(ValueError, match="unknown format 'pickle'"):
        _fit().export(tmp_path / "f.pkl", format="pickle")
    with pytest.raises(ValueError, match="not fitted yet"):
        SSMForecaster().export(tmp_path / "f.onnx")


def test_exogenous_x_is_refused_by_name(tmp_path):
    y = PANEL.loc[["a"]].droplevel(0)
    X = pd.DataFrame({"promo": np.arange(len(y)) % 2 * 1.0}, index=y.index)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        forecaster = SSMForecaster(**TINY, random_state=0).fit(y.iloc[:-H], X=X.iloc[:-H], fh=range(1, H + 1))
    with pytest.raises(ValueError, match="cannot be exported: exogenous X"):
        forecaster.export(tmp_path / "f.onnx")
