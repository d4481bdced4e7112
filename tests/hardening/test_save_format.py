"""The save format's checksum covers the header as well as the weights: an edited class list,
scaling statistic or parameter is refused, and any flipped byte of a file gives a clear error
or, at worst, the same predictions."""

import json
import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import safe_open, save_file

from ssmts import SSMClassifier
from ssmts.estimators import _persistence

TINY = dict(d_model=4, d_state=4, n_layers=1, max_epochs=2, min_steps=0, batch_size=8, device="cpu", random_state=0)
_FEATURES = dict(n_scales=2, n_kernels=4, n_biases=2, device="cpu", random_state=0)
RNG = np.random.default_rng(0)
X = RNG.standard_normal((24, 10))
Y = np.array(["low", "mid", "high"] * 8)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    clf = SSMClassifier(**TINY).fit(X, Y)
    path = clf.save(tmp_path_factory.mktemp("save") / "clf.safetensors")
    return path, clf.predict_proba(X), clf.predict(X)


def _rewrite(path, out, edit):
    """Write `out` with the tensors of `path` and its ssmts header changed by `edit(header)`."""
    with safe_open(str(path), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
        header = json.loads(f.metadata()["ssmts"])
    edit(header)
    save_file(tensors, str(out), metadata={"ssmts": json.dumps(header)})
    return out


@pytest.mark.parametrize(
    "edit",
    [
        lambda h: h["fitted"]["classes_"]["__ndarray__"].reverse(),
        lambda h: h["fitted"]["input_mean_"]["__ndarray__"].__setitem__(0, 1.0),
        lambda h: h["fitted"].__setitem__("normalization_", "none"),
        lambda h: h["params"].__setitem__("pooling", "last"),
    ],
    ids=["classes reversed", "a scaling statistic", "normalization", "a parameter"],
)
def test_an_edited_header_is_refused(saved, tmp_path, edit):
    path, _, _ = saved
    with pytest.raises(ValueError, match="does not match its checksum"):
        SSMClassifier.load(_rewrite(path, tmp_path / "edited.safetensors", edit))


def test_format_1_files_load_only_when_the_caller_vouches_for_them(saved, tmp_path):
    """Files of format 1 (checksum of the tensors only) cannot show an edited header: they are refused
    with the way out, and with allow_format_1=True load as before, warning how to protect the header."""
    path, proba, _ = saved
    old = _rewrite(path, tmp_path / "v1.safetensors", _as_format_1(path))
    with pytest.raises(ValueError, match=r"format 1.*allow_format_1=True.*last version that reads format 1"):
        SSMClassifier.load(old)
    with pytest.warns(UserWarning, match="format 1") as record:
        loaded = SSMClassifier.load(old, allow_format_1=True)
    assert record[0].filename == __file__  # the caller's line, not ssmts'
    np.testing.assert_array_equal(loaded.predict_proba(X), proba)
    with pytest.raises(TypeError, match="allow_format_1 must be True or False"):
        SSMClassifier.load(old, allow_format_1="yes")


def _reverse_classes(header):
    header["fitted"]["classes_"]["__ndarray__"].reverse()


def test_reversed_classes_in_a_format_2_file_are_refused_even_with_a_recomputed_checksum(saved, tmp_path):
    """The attack format 1 allowed, reversed classes_ (every prediction's label swapped), in format 2:
    refused by the checksum, and, where the checksum was recomputed (anyone can: it is not a signature),
    because fit writes classes_ sorted, as LabelEncoder's search needs them."""
    path, _, _ = saved
    with safe_open(str(path), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    with pytest.raises(ValueError, match="does not match its checksum"):
        SSMClassifier.load(_rewrite(path, tmp_path / "edited.safetensors", _reverse_classes))

    def reversed_and_resigned(header):
        _reverse_classes(header)
        _with_valid_checksum(header, tensors)

    resigned = _rewrite(path, tmp_path / "resigned.safetensors", reversed_and_resigned)
    with pytest.raises(ValueError, match=r"classes_ \['mid' 'low' 'high'\] are not distinct labels in sorted order"):
        SSMClassifier.load(resigned)
    # The same rewrite without the reversal loads: the refusal is the order's.
    untouched = _rewrite(path, tmp_path / "untouched.safetensors", lambda h: _with_valid_checksum(h, tensors))
    assert SSMClassifier.load(untouched).classes_.tolist() == ["high", "low", "mid"]


@pytest.mark.parametrize("estimator", ["SSMFeatureClassifier", "SSMTransformer"])
def test_reversed_classes_are_refused_by_every_face_that_saves_classes(estimator, tmp_path):
    import ssmts

    cls = getattr(ssmts, estimator)
    kwargs = {"objective": "classification"} if estimator == "SSMTransformer" else {}
    fitted = cls(**{**TINY, **kwargs}).fit(X, Y) if estimator == "SSMTransformer" else cls(**_FEATURES).fit(X, Y)
    path = fitted.save(tmp_path / "fitted.safetensors")
    with safe_open(str(path), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    name = "_label_classes" if estimator == "SSMTransformer" else "classes_"

    def reversed_and_resigned(header):
        header["fitted"][name]["__ndarray__"].reverse()
        _with_valid_checksum(header, tensors)

    with pytest.raises(ValueError, match="not distinct labels in sorted order"):
        cls.load(_rewrite(path, tmp_path / "resigned.safetensors", reversed_and_resigned))
    cls.load(path)


def _as_format_1(path, edit=lambda header: None):
    """A header edit that makes the file format 1 (the checksum of its tensors only), then applies `edit`."""

    def as_format_1(header):
        with safe_open(str(path), framework="pt") as f:
            tensors = {k: f.get_tensor(k) for k in f.keys()}
        header["format_version"] = 1
        header["sha256"] = _persistence._checksum(tensors)
        edit(header)

    return as_format_1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(position=st.floats(0.0, 1.0, exclude_max=True), mask=st.integers(1, 255))
def test_any_flipped_byte_is_a_clear_error_or_changes_nothing(saved, tmp_path, position, mask):
    path, proba, labels = saved
    data = bytearray(path.read_bytes())
    index = int(position * len(data))
    data[index] ^= mask
    damaged = tmp_path / "damaged.safetensors"
    damaged.write_bytes(bytes(data))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = SSMClassifier.load(damaged)
    except (ValueError, TypeError) as error:  # the load's own messages, never a deep library error
        assert str(damaged) in str(error) or "ssmts" in str(error), (index, error)
        return
    # Only bytes that no reader looks at (JSON whitespace outside the checked fields) may change.
    np.testing.assert_array_equal(loaded.predict_proba(X), proba)
    np.testing.assert_array_equal(loaded.predict(X), labels)


def test_save_writes_the_parameters_of_the_fit_not_those_set_after_it(tmp_path):
    """fit, set_params(pooling=...) then save: the file describes the fitted network (with a warning
    naming what was left out), so the loaded estimator predicts as the fitted one."""
    clf = SSMClassifier(**TINY).fit(X, Y)
    expected = clf.predict_proba(X)
    clf.set_params(pooling="last", d_model=16)
    with pytest.warns(UserWarning, match=r"d_model=16, pooling='last' was set after the last fit") as record:
        path = clf.save(tmp_path / "clf.safetensors")
    assert record[0].filename == __file__
    loaded = SSMClassifier.load(path)
    assert loaded.get_params()["pooling"] == "mean" and loaded.get_params()["d_model"] == 4
    np.testing.assert_array_equal(loaded.predict_proba(X), expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # unchanged parameters: no warning
        SSMClassifier(**TINY).fit(X, Y).save(tmp_path / "plain.safetensors")


def test_settings_of_how_predict_runs_set_after_fit_are_saved_as_set_without_a_warning(tmp_path):
    """batch_size, device and verbose describe how the estimator runs, not the fitted model: save warned
    that batch_size set after fit 'does not describe the fitted model' and the loaded estimator had the
    fit's. Oracle: the predictions, which do not depend on them."""
    clf = SSMClassifier(**TINY).fit(X, Y)
    expected = clf.predict_proba(X)
    clf.set_params(batch_size=3, verbose=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        path = clf.save(tmp_path / "clf.safetensors")
    loaded = SSMClassifier.load(path)
    assert loaded.get_params()["batch_size"] == 3
    np.testing.assert_array_equal(loaded.predict_proba(X), expected)
    clf.set_params(d_model=16)  # with a parameter of the model: warned of that one alone, batch_size kept
    with pytest.warns(UserWarning, match=r"save: d_model=16 was set after the last fit"):
        assert SSMClassifier.load(clf.save(tmp_path / "other.safetensors")).get_params()["batch_size"] == 3


def test_save_leaves_out_callbacks_and_a_randomstate_with_a_warning_each(tmp_path):
    """Callbacks are code and a RandomState is a live object: neither goes into the file; the loaded
    estimator has callbacks=None and random_state=None, and both warnings name the caller's line."""
    from ssmts.training import Callback

    clf = SSMClassifier(**{**TINY, "random_state": np.random.RandomState(0)}, callbacks=[Callback()]).fit(X, Y)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        path = clf.save(tmp_path / "clf.safetensors")
    messages = [str(w.message) for w in record]
    assert messages == [
        "SSMClassifier.save does not store callbacks (they are code); the loaded estimator has callbacks=None",
        "SSMClassifier.save stores random_state=None in place of a numpy RandomState",
    ]
    assert [w.filename for w in record] == [__file__, __file__]
    loaded = SSMClassifier.load(path)
    assert loaded.get_params()["callbacks"] is None and loaded.get_params()["random_state"] is None
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))


def _with_valid_checksum(header, tensors):
    """A hostile file can recompute the checksum (it is not a signature): what load must still refuse."""
    header["sha256"] = _persistence._checksum(tensors, header)


def _edited_with_valid_checksum(path, out, edit):
    """`out`: the file at path with its header changed by edit(header) and the checksum computed again."""
    with safe_open(str(path), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}

    def edited(header):
        edit(header)
        _with_valid_checksum(header, tensors)

    return _rewrite(path, out, edited)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda h: h["params"].__setitem__("d_state", 10**6), "d_state=1000000 cannot describe"),
        (lambda h: h["params"].__setitem__("d_model", 10**7), "d_model=10000000 cannot describe"),
        (lambda h: h["fitted"]["classes_"].__setitem__("dtype", "<U100000000"), "strings of 100000000 characters"),
        (lambda h: h["fitted"]["classes_"].__setitem__("dtype", "|O"), "never writes"),
    ],
    ids=["huge d_state", "huge d_model", "huge string dtype", "object dtype"],
)
def test_a_hostile_header_with_a_valid_checksum_fails_fast_without_allocating(
    saved, tmp_path, edit, message, monkeypatch
):
    path, _, _ = saved
    damaged = _edited_with_valid_checksum(path, tmp_path / "hostile.safetensors", edit)
    import tracemalloc

    built = []
    monkeypatch.setattr(SSMClassifier, "_rebuild_network", lambda self: built.append(1))
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=re.escape(message)):
            SSMClassifier.load(damaged)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not built, "a network was built from a file that is then refused"
    assert peak < 50 * 2**20, f"{peak / 2**20:.0f} MB allocated before the refusal"  # numpy reports to tracemalloc


def test_a_header_nested_beyond_the_json_parser_is_a_clear_error(saved, tmp_path):
    """JSON nested deeper than Python's recursion limit raised RecursionError from inside json; every
    reader of a header (the save format, the pretrained weights, a task cache) names the problem."""
    from ssmts.sktime._pretrained import read_pretrained
    from ssmts.tasks.data_utils import load_task_arrays

    path, _, _ = saved
    deep = '{"a":' * 100_000 + "1" + "}" * 100_000
    with safe_open(str(path), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    save_file(tensors, str(tmp_path / "deep.safetensors"), metadata={"ssmts": deep, "ssmts_pretrained": deep})
    with pytest.raises(ValueError, match="nested too deeply"):
        SSMClassifier.load(tmp_path / "deep.safetensors")
    with pytest.raises(ValueError, match="nested too deeply"):
        read_pretrained(tmp_path / "deep.safetensors")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "header.json").write_text(deep)
    with pytest.raises(ValueError, match="nested too deeply"):
        load_task_arrays(tmp_path / "cache")


KEY = b"a secret shared by who saves and who loads"


def _scale_edit(header):
    """A deliberate edit that swaps no label but changes every prediction: a scaling statistic."""
    header["fitted"]["input_mean_"]["__ndarray__"][0] = 3.0


def test_a_signed_file_loads_with_its_key_only(tmp_path):
    clf = SSMClassifier(**TINY).fit(X, Y)
    signed = clf.save(tmp_path / "signed.safetensors", key=KEY)
    np.testing.assert_array_equal(SSMClassifier.load(signed, key=KEY).predict_proba(X), clf.predict_proba(X))
    np.testing.assert_array_equal(SSMClassifier.load(signed, key=KEY.decode()).predict_proba(X), clf.predict_proba(X))
    with pytest.raises(ValueError, match="signed with a key .*load it with key="):
        SSMClassifier.load(signed)
    with pytest.raises(ValueError, match="the signature does not match the key"):
        SSMClassifier.load(signed, key=b"another key")
    unsigned = clf.save(tmp_path / "unsigned.safetensors")
    with pytest.raises(ValueError, match=r"carries no signature \(it was saved without a key\)"):
        SSMClassifier.load(unsigned, key=KEY)


def test_the_checksum_catches_corruption_and_the_signature_a_re_signed_edit(saved, tmp_path):
    """The plain checksum has no secret: an edit that recomputes it loads unseen without a key (the
    limit the docs state), and only the key's signature refuses it. A corrupted byte is refused by the
    checksum, key or not."""
    path, proba, _ = saved
    signed = SSMClassifier.load(path).save(tmp_path / "signed.safetensors", key=KEY)
    with safe_open(str(signed), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}

    def edited_and_resigned(header):
        _scale_edit(header)
        _with_valid_checksum(header, tensors)

    resigned = _rewrite(signed, tmp_path / "resigned.safetensors", edited_and_resigned)
    with pytest.raises(ValueError, match=r"signature does not match the key: the file was changed after it was signed"):
        SSMClassifier.load(resigned, key=KEY)

    def edited_unsigned(header):
        del header[_persistence.SIGNATURE]
        edited_and_resigned(header)

    stripped = _rewrite(signed, tmp_path / "stripped.safetensors", edited_unsigned)
    assert not np.array_equal(SSMClassifier.load(stripped).predict_proba(X), proba)  # the checksum's limit
    with pytest.raises(ValueError, match="carries no signature"):
        SSMClassifier.load(stripped, key=KEY)

    data = bytearray(signed.read_bytes())
    data[-5] ^= 0x10  # a byte of the last weight
    corrupted = tmp_path / "corrupted.safetensors"
    corrupted.write_bytes(bytes(data))
    for key in (KEY, None):
        with pytest.raises(ValueError, match="does not match its checksum"):
            SSMClassifier.load(corrupted, key=key)


@pytest.mark.parametrize(
    "key, error, message",
    [(b"", ValueError, "must not be empty"), (1234, TypeError, "key must be bytes or a str")],
)
def test_a_key_that_cannot_sign_is_refused_by_save_and_load(saved, tmp_path, key, error, message):
    path, _, _ = saved
    with pytest.raises(error, match=message):
        SSMClassifier.load(path).save(tmp_path / "x.safetensors", key=key)
    with pytest.raises(error, match=message):
        SSMClassifier.load(path, key=key)
    assert not (tmp_path / "x.safetensors").exists()


def test_a_key_with_the_joblib_format_is_refused(saved, tmp_path):
    path, _, _ = saved
    with pytest.raises(ValueError, match="key= signs the 'safetensors' format"):
        SSMClassifier.load(path).save(tmp_path / "x.joblib", format="joblib", key=KEY)
    with pytest.raises(ValueError, match="has none"):
        SSMClassifier.load(tmp_path / "x.joblib", format="joblib", key=KEY)


def test_a_feature_classifier_saved_before_the_envelope_existed_loads_as_it_was_fitted(tmp_path):
    """A file whose parameters lack `envelope` (saved before the parameter existed, when no bank pooled an
    envelope) loads with envelope=False, whatever today's default, and predicts as before."""
    from ssmts import SSMFeatureClassifier

    assert SSMFeatureClassifier().envelope  # today's default would build a larger network
    fitted = SSMFeatureClassifier(envelope=False, **_FEATURES).fit(X, Y)
    path = fitted.save(tmp_path / "features.safetensors")
    with safe_open(str(path), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}

    def as_saved_before(header):
        del header["params"]["envelope"]
        _with_valid_checksum(header, tensors)

    loaded = SSMFeatureClassifier.load(_rewrite(path, tmp_path / "before.safetensors", as_saved_before))
    assert loaded.envelope is False
    np.testing.assert_array_equal(loaded.decision_function(X), fitted.decision_function(X))


def _fitted(name, value):
    return lambda header: header["fitted"].__setitem__(name, value)


def _array(name, values):
    return lambda header: header["fitted"].__setitem__(name, {"__ndarray__": values, "dtype": "<f8"})


@pytest.mark.parametrize(
    "edit, attribute",
    [
        (_array("input_mean_", [0.0, 0.0, 0.0]), "input_mean_"),  # 1 channel fitted
        (_fitted("input_mean_", "x"), "input_mean_"),
        (_array("input_scale_", [0.0]), "input_scale_"),
        (_array("input_scale_", [float("nan")]), "input_scale_"),
        (_array("input_range_", [1.0, 2.0]), "input_range_"),
        (_fitted("input_ndim_", 7), "input_ndim_"),
        (_fitted("n_timepoints_in_", -5), "n_timepoints_in_"),
        (_fitted("n_iter_", "x"), "n_iter_"),
        (_fitted("best_epoch_", 10**6), "best_epoch_"),  # beyond the epochs run
        (_fitted("best_epoch_", -1), "best_epoch_"),
        (_fitted("normalization_", "series"), "normalization_"),  # the file's normalize is 'channel'
        (_fitted("train_sample_rate_", -1.0), "train_sample_rate_"),
        (_fitted("history_", "x"), "history_"),
        (_fitted("_seed_", "x"), "_seed_"),
    ],
)
def test_fitted_attributes_edited_with_a_recomputed_checksum_are_refused_at_load(saved, tmp_path, edit, attribute):
    """Attributes X is read by, edited and the checksum computed again: refused at load, naming the file and
    the attribute (they loaded, then failed at predict with an IndexError, or predicted through another
    scaling: normalization_ 'series' under normalize 'channel')."""
    path, _, _ = saved
    out = _edited_with_valid_checksum(path, tmp_path / "edited.safetensors", edit)
    with pytest.raises(ValueError, match=rf"edited\.safetensors: the fitted attribute {attribute} is"):
        SSMClassifier.load(out)


def test_a_directory_or_a_safetensors_file_read_as_joblib_is_named_for_what_it_is(saved, tmp_path):
    """A directory is not 'no saved estimator'; a safetensors file read with format='joblib' says so and the
    way out (joblib's bare KeyError: 72 before)."""
    path, _, _ = saved
    with pytest.raises(IsADirectoryError, match="is a directory, not a saved estimator's file"):
        SSMClassifier.load(tmp_path)
    with pytest.raises(ValueError, match=r"as a joblib file \(it is a safetensors file: load it with the default"):
        SSMClassifier.load(path, format="joblib")
