"""`export` of the fitted estimators: the ONNX file run by onnxruntime (and the TorchScript file
run by torch.jit.load) gives the estimator's outputs, at every input length up to max_length.

Tolerance: outputs are compared to 1e-5 (probabilities and embeddings absolute, regression
predictions in units of the target's training spread). The exported network computes in float32
as predict does, but convolves directly where predict uses FFTs: the two round differently, by a
few float32 ulps (1.2e-7) per operation, about 1e-6 through these networks (measured up to 8e-7).
The convolution form itself is exact: tests/nn/test_export.py checks it in float64 to 1e-10.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from sklearn.exceptions import NotFittedError

from ssmts import SSMClassifier, SSMFeatureClassifier, SSMRegressor, SSMTransformer

TINY = dict(d_model=8, d_state=8, n_layers=2, max_epochs=1, min_steps=0, batch_size=8, device="cpu", random_state=0)
ATOL = 1e-5
LENGTH = 30
RNG = np.random.default_rng(0)
X = RNG.standard_normal((16, 2, LENGTH))
LABELS = np.array(["cat", "dog", "emu"])[np.arange(len(X)) % 3]
TARGET = 50.0 * X[:, 0].mean(1) + 1e3


@pytest.fixture(scope="module")
def ort():
    pytest.importorskip("onnx", reason="onnx is not installed: pip install 'ssmts[export]'")
    pytest.importorskip("onnxscript", reason="onnxscript is not installed: pip install 'ssmts[export]'")
    return pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: pip install 'ssmts[export]'")


def _session(ort, path):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    metadata = session.get_modelmeta().custom_metadata_map
    return session, metadata


def _inputs(length: int, n: int = 5) -> np.ndarray:
    return RNG.standard_normal((n, 2, length)).astype(np.float32)


@pytest.mark.parametrize("normalize", ["channel", "series+stats"])
def test_classifier_onnx_gives_predict_proba_at_every_length(ort, tmp_path, normalize):
    clf = SSMClassifier(normalize=normalize, **TINY).fit(X, LABELS)
    session, metadata = _session(ort, clf.export(tmp_path / "clf.onnx"))
    assert [i.name for i in session.get_inputs()] == ["X"]
    assert session.get_inputs()[0].shape == ["batch", 2, "length"]
    assert [o.name for o in session.get_outputs()] == ["probabilities", "label_index", "valid"]
    classes = np.array(json.loads(metadata["classes"]))
    assert classes.tolist() == clf.classes_.tolist() and metadata["max_length"] == str(LENGTH)
    for length in (1, 2, 11, LENGTH):
        Xt = _inputs(length)
        probabilities, label_index, valid = session.run(None, {"X": Xt})
        assert probabilities.dtype == np.float32 and label_index.dtype == np.int64 and valid.all()
        np.testing.assert_allclose(probabilities, clf.predict_proba(Xt), rtol=0, atol=ATOL)
        np.testing.assert_array_equal(classes[label_index], clf.predict(Xt))


def test_longer_input_is_refused_at_run_time(ort, tmp_path):
    clf = SSMClassifier(**TINY).fit(X, LABELS)
    session, _ = _session(ort, clf.export(tmp_path / "clf.onnx", max_length=12))
    session.run(None, {"X": _inputs(12)})
    # onnxruntime's message names the failing node: the node's name says what went wrong
    with pytest.raises(Exception, match="input_longer_than_max_length_12.*out of data bounds"):
        session.run(None, {"X": _inputs(13)})


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
def test_longer_input_is_refused_by_torchscript_naming_max_length(tmp_path):
    clf = SSMClassifier(**TINY).fit(X, LABELS)
    model = torch.jit.load(str(clf.export(tmp_path / "clf.pt", format="torchscript", max_length=12)))
    local = np.random.default_rng(1)  # not the module's RNG: the later tests' inputs stay as they were
    model(torch.from_numpy(local.standard_normal((2, 2, 12)).astype(np.float32)))
    with pytest.raises(Exception, match="up to max_length=12 steps, got 13"):
        model(torch.from_numpy(local.standard_normal((2, 2, 13)).astype(np.float32)))


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
def test_torchscript_refuses_input_of_another_shape_or_dtype_naming_it(tmp_path):
    """A trace keeps no `if`: one channel given to a two-channel file broadcast against the scaling's
    (1, 2, 1) statistics and was answered, valid, as that channel copied twice; three univariate series
    (3, length) were read as one series of three channels. Refused now, as predict and ONNX refuse them."""
    clf = SSMClassifier(**TINY).fit(X, LABELS)
    model = torch.jit.load(str(clf.export(tmp_path / "clf.pt", format="torchscript")))
    rows = torch.from_numpy(X[:4].astype(np.float32))
    np.testing.assert_allclose(model(rows)[0].numpy(), clf.predict_proba(X[:4]), rtol=0, atol=ATOL)
    with pytest.raises(ValueError, match="X has 1 channels"):
        clf.predict_proba(X[:4, :1])  # the estimator's own refusal, which the file must match
    for bad, message in [
        (rows[:, :1], "takes X with 2 channels, got 1"),
        (rows[:, :1].expand(-1, 3, -1), "takes X with 2 channels, got 3"),
        (rows[:, 0], r"takes X of shape \(batch, 2, length\), got 2 dimension\(s\)"),
        (rows.double(), r"takes X as float32 values \(convert it with .float\(\)\)"),
    ]:
        with pytest.raises(Exception, match=message):
            model(bad)


def test_a_ragged_list_is_served_one_series_at_a_time(ort, tmp_path):
    clf = SSMClassifier(**TINY).fit(X, LABELS)
    session, _ = _session(ort, clf.export(tmp_path / "clf.onnx"))
    series = [RNG.standard_normal((2, length)).astype(np.float32) for length in (7, 30, 19)]
    served = np.concatenate([session.run(None, {"X": s[None]})[0] for s in series])
    np.testing.assert_allclose(served, clf.predict_proba(series), rtol=0, atol=ATOL)


@pytest.mark.parametrize("multi_output", [False, True])
def test_regressor_onnx_gives_predict_in_target_units(ort, tmp_path, multi_output):
    y = np.stack([TARGET, -TARGET / 7], 1) if multi_output else TARGET
    reg = SSMRegressor(normalize="series", **TINY).fit(X, y)
    session, _ = _session(ort, reg.export(tmp_path / "reg.onnx"))
    assert [o.name for o in session.get_outputs()] == ["predictions", "valid"]
    for length in (3, LENGTH):
        Xt = _inputs(length)
        predictions, valid = session.run(None, {"X": Xt})
        expected = reg.predict(Xt)
        assert valid.dtype == bool and valid.all()
        assert predictions.dtype == np.float64 and predictions.shape == expected.shape
        np.testing.assert_allclose(predictions, expected, rtol=0, atol=ATOL * reg.target_scale_.max())


def test_bidirectional_heads_at_another_sample_rate(ort, tmp_path):
    # an LDNN layer of 4 heads trained at 100 Hz, served at 50 Hz: Delta x 2 baked into the kernels
    reg = SSMRegressor(bidirectional="ldnn", heads=4, sample_rate=100, **TINY).fit(X[:, :1], TARGET)
    session, metadata = _session(ort, reg.export(tmp_path / "reg.onnx", sample_rate=50))
    assert metadata["max_length"] == str(LENGTH // 2) and metadata["sample_rate"] == "50"
    # its own generator (the module's RNG gives this test another draw whenever a test before it draws
    # more); over 30 draws the rate moved the predictions by 700-1300x the export tolerance
    Xt = np.random.default_rng(11).standard_normal((4, 1, LENGTH // 2)).astype(np.float32)
    predictions, _ = session.run(None, {"X": Xt})
    np.testing.assert_allclose(predictions, reg.predict(Xt, sample_rate=50), rtol=0, atol=ATOL * reg.target_scale_[0])
    assert np.abs(reg.predict(Xt, sample_rate=50) - reg.predict(Xt)).max() > 100 * ATOL * reg.target_scale_[0]


def test_transformer_onnx_gives_transform(ort, tmp_path):
    transformer = SSMTransformer(pooling="last", **TINY).fit(X)
    session, _ = _session(ort, transformer.export(tmp_path / "embed.onnx"))
    Xt = _inputs(LENGTH)
    embeddings, _ = session.run(None, {"X": Xt})
    np.testing.assert_allclose(embeddings, transformer.transform(Xt), rtol=0, atol=ATOL)


def _hostile_rows(length=LENGTH):
    """5 rows: NaN, +inf, a value 1e30 (predict refuses each), then two ordinary rows."""
    Xt = _inputs(length)
    Xt[0, 1, 3], Xt[1, 0, -1], Xt[2] = np.nan, np.inf, Xt[2] * 1e30
    return Xt


def _answers(method, row) -> bool:
    """Whether the estimator's own method answers for this row (rather than raising)."""
    try:
        method(row[None])
    except (ValueError, FloatingPointError):
        return False
    return True


@pytest.mark.parametrize("normalize", ["channel", "series"])
def test_rows_that_predict_refuses_are_flagged_invalid_never_labelled(ort, tmp_path, normalize):
    """valid is False exactly where predict (transform) refuses the row; a series scaling makes the
    1e30 row an ordinary one (its own mean and spread), a channel scaling does not."""
    Xt = _hostile_rows()
    for estimator, method in [
        (SSMClassifier(normalize=normalize, **TINY).fit(X, LABELS), "predict"),
        (SSMRegressor(normalize=normalize, **TINY).fit(X, TARGET), "predict"),
        (SSMTransformer(normalize=normalize, **TINY).fit(X), "transform"),
    ]:
        expected = [_answers(getattr(estimator, method), row) for row in Xt]
        assert expected[:2] == [False, False] and expected[2] == (normalize == "series") and all(expected[3:])
        session, _ = _session(ort, estimator.export(tmp_path / "model.onnx"))
        *outputs, valid = session.run(None, {"X": Xt})
        assert valid.tolist() == expected, type(estimator).__name__
        for out in outputs:
            if out.dtype.kind == "f":
                assert np.isnan(out[~valid]).all() and np.isfinite(out[valid]).all()
            else:
                assert (out[~valid] == -1).all() and (out[valid] >= 0).all()
        answered = getattr(
            estimator, "predict_proba" if method == "predict" and hasattr(estimator, "classes_") else method
        )
        scale = getattr(estimator, "target_scale_", np.ones(1)).max()
        np.testing.assert_allclose(outputs[0][valid], answered(Xt[valid]), rtol=0, atol=ATOL * scale)


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
def test_torchscript_flags_invalid_rows_too(tmp_path):
    clf = SSMClassifier(**TINY).fit(X, LABELS)
    model = torch.jit.load(str(clf.export(tmp_path / "clf.pt", format="torchscript")))
    probabilities, label_index, valid = model(torch.from_numpy(_hostile_rows()))
    assert valid.tolist() == [False, False, False, True, True]
    assert torch.isnan(probabilities[:3]).all() and (label_index[:3] == -1).all()


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
def test_torchscript_gives_the_same_outputs(tmp_path):
    clf = SSMClassifier(heads=8, **TINY).fit(X, LABELS)
    extra = {"ssmts.json": ""}
    model = torch.jit.load(str(clf.export(tmp_path / "clf.pt", format="torchscript")), _extra_files=extra)
    metadata = json.loads(extra["ssmts.json"])
    assert json.loads(metadata["classes"]) == clf.classes_.tolist()
    for length in (1, 17, LENGTH):
        Xt = _inputs(length)
        probabilities, label_index, _ = model(torch.from_numpy(Xt))
        np.testing.assert_allclose(probabilities.numpy(), clf.predict_proba(Xt), rtol=0, atol=ATOL)
        np.testing.assert_array_equal(clf.classes_[label_index.numpy()], clf.predict(Xt))
    with pytest.raises(Exception, match="out of (range|bounds)"):
        model(torch.from_numpy(_inputs(LENGTH + 1)))


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("format", ["onnx", "torchscript"])
def test_export_replaces_a_link_at_the_destination_and_names_a_directory(ort, tmp_path, format):
    """As save does: a symbolic link at the path is replaced by the file, its target left as it was."""
    clf = SSMClassifier(**TINY).fit(X, LABELS)
    target = tmp_path / "precious.bin"
    target.write_bytes(b"keep me")
    link = tmp_path / "model.file"
    link.symlink_to(target)
    clf.export(link, format=format)
    assert target.read_bytes() == b"keep me" and not link.is_symlink() and link.stat().st_size > 1000
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    with pytest.raises(IsADirectoryError, match=rf"cannot write the exported model to {tmp_path}: it is a directory"):
        clf.export(tmp_path, format=format)


def test_what_does_not_export_says_so(tmp_path):
    with pytest.raises(NotFittedError):
        SSMClassifier().export(tmp_path / "m.onnx")
    clf = SSMClassifier(**TINY).fit(X, LABELS)
    with pytest.raises(ValueError, match="unknown format"):
        clf.export(tmp_path / "m.onnx", format="tflite")
    with pytest.raises(ValueError, match="max_length"):
        clf.export(tmp_path / "m.onnx", max_length=0)
    with pytest.raises(ValueError, match="fitted without sample_rate"):
        clf.export(tmp_path / "m.onnx", sample_rate=8000)
    lncde = SSMClassifier(layer="lncde", **{**TINY, "d_state": 4}).fit(X, LABELS)
    with pytest.raises(ValueError, match="cannot be exported.*LinearCDE"):
        lncde.export(tmp_path / "m.pt", format="torchscript")
    features = SSMFeatureClassifier(n_scales=2, n_kernels=4, random_state=0).fit(X, LABELS)
    with pytest.raises(NotImplementedError, match="does not export"):
        features.export(tmp_path / "m.onnx")
    assert not list(tmp_path.iterdir())  # nothing written by a refused export
