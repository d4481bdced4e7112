"""Behaviour of the sklearn estimators: accuracy, zero-shot resampling, persistence, contracts."""

import pickle
import time
import warnings

import joblib
import numpy as np
import pandas as pd
import pytest
import sklearn
import torch
from scipy.signal import resample_poly
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV, cross_val_score, train_test_split
from sklearn.pipeline import make_pipeline

from ssmts import Resampler, SSMClassifier, SSMRegressor, SSMTransformer
from ssmts.estimators import ExtrapolationWarning

from .conftest import FAST, continuous_time_classes


# ---------------------------------------------------------------- evidence
@pytest.mark.slow  # a default-size fit on 1,347 digits: 98 s in the whole suite on 2 cores
def test_digits_as_sequences_reach_95_percent_with_defaults(record_property):
    """sklearn digits, each 8x8 image read as a 64-step univariate sequence, default hyperparameters."""
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    started = time.perf_counter()
    clf = SSMClassifier(random_state=0, device="cpu").fit(X_train, y_train)
    fit_seconds = time.perf_counter() - started
    accuracy = clf.score(X_test, y_test)
    record_property("digits_fit_seconds", fit_seconds)
    record_property("digits_test_accuracy", accuracy)
    print(f"digits: test accuracy {accuracy:.4f}, fit {fit_seconds:.1f} s on {torch.get_num_threads()} threads")
    assert accuracy >= 0.95


def test_zero_shot_rate_change_keeps_accuracy_and_ignoring_the_rate_does_not():
    """Trained at 64 Hz on continuous-time tones/chirps; evaluated at 32 Hz and 128 Hz."""
    X_train, y_train = continuous_time_classes(400, 64, seed=0)
    clf = SSMClassifier(
        d_model=32, n_layers=2, d_state=16, max_epochs=30, min_steps=0, sample_rate=64, random_state=0, device="cpu"
    ).fit(X_train, y_train)
    X_64, y_64 = continuous_time_classes(300, 64, seed=1)
    base = clf.score(X_64, y_64)
    assert base >= 0.9
    for rate in (32, 128):
        X_rate, y_rate = continuous_time_classes(300, rate, seed=1)
        rescaled = clf.score(X_rate, y_rate, sample_rate=rate)
        # Ignoring the rate: the same model and Delta on the new sequences (3D input has no length check).
        ignored = float(np.mean(clf.predict(X_rate[:, None, :], sample_rate=64) == y_rate))
        print(f"{rate} Hz: rescaled {rescaled:.3f}, rate ignored {ignored:.3f}, training rate {base:.3f}")
        assert rescaled >= base - 0.05
        assert rescaled >= ignored + 0.3


def test_data_below_every_rate_the_network_was_trained_at_is_warned_of():
    """Networks answered silently at any lower rate (a rate in kHz for Hz data: 1,000 times lower), where
    the SSM-feature estimators warned; now both warn below the lowest rate they were fitted at."""
    X, y = continuous_time_classes(60, 32, seed=0)
    clf = SSMClassifier(**{**FAST, "max_epochs": 1}, sample_rate=32).fit(X, y)
    X_16, _ = continuous_time_classes(10, 16, seed=1)
    below = r"sample_rate=16 lies below 32, .*training rate is 32\): .* \d+ of the 4 modes .*half_rate_share=0\.5"
    with pytest.warns(ExtrapolationWarning, match=below):
        clf.predict(X_16, sample_rate=16)
    with pytest.warns(ExtrapolationWarning, match="sample_rate=0.032 lies below 32"):
        clf.predict(X[:, None, :], sample_rate=0.032)  # the rate in kHz (a 2-D X of that length is refused)
    with pytest.warns(ExtrapolationWarning, match="sample_rate=16 lies below 32"):
        clf.stream(X_16[:, :5], sample_rate=16)
    X_64, _ = continuous_time_classes(10, 64, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf.predict(X, sample_rate=32)
        clf.predict(X_64, sample_rate=64)  # a higher rate samples the same kernels more finely
    halves = SSMClassifier(**{**FAST, "max_epochs": 1}, sample_rate=32, half_rate_share=0.5).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        halves.predict(X_16, sample_rate=16)  # trained on half-rate batches too
    X_8, _ = continuous_time_classes(10, 8, seed=1)
    with pytest.warns(ExtrapolationWarning, match=r"lies below 16, .*training rate is 32\)"):
        halves.predict(X_8, sample_rate=8)


def test_set_params_sample_rate_after_fit_rescales_like_the_predict_argument():
    X, y = continuous_time_classes(80, 32, seed=0)
    clf = SSMClassifier(**{**FAST, "max_epochs": 2}, sample_rate=32).fit(X, y)
    X_half, _ = continuous_time_classes(20, 16, seed=1)
    by_argument = clf.decision_function(X_half, sample_rate=16)
    clf.set_params(sample_rate=16)
    np.testing.assert_array_equal(clf.decision_function(X_half), by_argument)
    assert clf.train_sample_rate_ == 32


def test_metadata_routing_sends_sample_rate_through_a_pipeline():
    X, y = continuous_time_classes(80, 32, seed=0)
    X_half, _ = continuous_time_classes(20, 16, seed=1)
    with sklearn.config_context(enable_metadata_routing=True):
        clf = SSMClassifier(**FAST, sample_rate=32).set_predict_request(sample_rate=True)
        pipe = make_pipeline(clf).fit(X, y)
        routed = pipe.predict(X_half, sample_rate=16)
        direct = pipe[-1].predict(X_half, sample_rate=16)
    np.testing.assert_array_equal(routed, direct)


def test_resampler_matches_scipy_and_feeds_the_training_rate():
    """Resampler (torchaudio) vs scipy.signal.resample_poly on a band-limited signal, away from the edges."""
    t = np.arange(800) / 8000
    x = np.sin(2 * np.pi * 440 * t) + 0.3 * np.sin(2 * np.pi * 1000 * t)
    out = Resampler(target_rate=16000, sample_rate=8000).fit_transform(x[None, :])
    reference = resample_poly(x, 2, 1)
    assert out.shape == (1, 1600)
    assert np.abs(out[0, 100:-100] - reference[100:-100]).max() < 2e-2
    ragged = Resampler(target_rate=4000).fit([x, x[:400]]).transform([x, x[:400]], sample_rate=8000)
    assert [r.shape[-1] for r in ragged] == [400, 200]
    with pytest.raises(ValueError, match="needs the rate"):
        Resampler().fit(x[None]).transform(x[None])


# ---------------------------------------------------------------- contracts
def test_gridsearch_over_pipeline_with_two_jobs(toy_classification):
    X, y = toy_classification
    pipe = make_pipeline(SSMClassifier(**FAST))
    search = GridSearchCV(pipe, {"ssmclassifier__d_model": [8, 16], "ssmclassifier__heads": [1, 2]}, cv=2, n_jobs=2)
    search.fit(X, y)
    assert set(search.best_params_) == {"ssmclassifier__d_model", "ssmclassifier__heads"}
    assert search.predict(X).shape == (len(X),)
    scores = cross_val_score(SSMRegressor(**FAST), X, X[:, 0], cv=2, n_jobs=2)
    assert np.all(np.isfinite(scores))


def test_same_random_state_gives_identical_predictions(toy_classification):
    X, y = toy_classification
    a = SSMClassifier(**{**FAST, "dropout": 0.1}).fit(X, y).predict_proba(X)
    b = SSMClassifier(**{**FAST, "dropout": 0.1}).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    c = SSMClassifier(**{**FAST, "dropout": 0.1, "random_state": 1}).fit(X, y).predict_proba(X)
    assert not np.array_equal(a, c)


def test_clone_of_fitted_is_unfitted_and_params_roundtrip(toy_classification):
    X, y = toy_classification
    clf = SSMClassifier(**FAST).fit(X, y)
    fresh = clone(clf)
    assert not hasattr(fresh, "model_")
    assert fresh.get_params() == clf.get_params()
    assert {"d_model", "lr_ssm", "early_stopping", "sample_rate", "class_weight"} <= set(clf.get_params())
    with pytest.raises(TypeError, match="unexpected parameter"):
        SSMClassifier(not_a_parameter=1)


def test_pickle_joblib_and_save_load_roundtrip(tmp_path, toy_classification):
    X, y = toy_classification
    clf = SSMClassifier(**FAST).fit(X, y)
    expected = clf.predict_proba(X)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(clf)).predict_proba(X), expected)
    joblib.dump(clf, tmp_path / "model.joblib")
    np.testing.assert_array_equal(joblib.load(tmp_path / "model.joblib").predict_proba(X), expected)
    clf.save(tmp_path / "saved.joblib")
    np.testing.assert_array_equal(SSMClassifier.load(tmp_path / "saved.joblib").predict_proba(X), expected)
    with pytest.raises(TypeError, match="not a SSMRegressor"):
        SSMRegressor.load(tmp_path / "saved.joblib")
    # torch state: the backbone's state_dict reloads into a freshly built network
    state = clf.model_.state_dict()
    twin = SSMClassifier(**FAST).fit(X, y)
    twin.model_.load_state_dict(state)
    np.testing.assert_array_equal(twin.predict_proba(X), expected)


def test_partial_fit_trains_on_all_it_is_given_with_early_stopping_on(toy_classification):
    """early_stopping is fit's: partial_fit's one epoch holds nothing out (a hold-out of each call could stop
    nothing and cost a tenth of the data), as scikit-learn's MLP does. Oracle: the same partial_fit with
    early_stopping off, bit for bit."""
    X, y = toy_classification
    on = SSMClassifier(**FAST, early_stopping=True).partial_fit(X, y, classes=[0, 1])
    off = SSMClassifier(**FAST).partial_fit(X, y, classes=[0, 1])
    assert "val_loss" not in on.history_[-1]
    np.testing.assert_array_equal(on.predict_proba(X), off.predict_proba(X))


@pytest.mark.parametrize("how", ["partial_fit", "warm_start"])
def test_a_loaded_estimator_continues_its_saved_history(tmp_path, toy_classification, how):
    """The file keeps history_ and n_iter_ but no optimizer state: a continued fit of the loaded estimator
    appends its epochs to the saved history, numbered on (it started a history of its own, n_iter_ 1)."""
    X, y = toy_classification
    clf = SSMClassifier(**FAST).fit(X, y)
    clf.save(tmp_path / "model.safetensors")
    loaded = SSMClassifier.load(tmp_path / "model.safetensors")
    saved = [dict(record) for record in loaded.history_]
    if how == "partial_fit":
        loaded.partial_fit(X, y)
        added = 1
    else:
        loaded.set_params(warm_start=True, max_epochs=2).fit(X, y)
        added = 2
    assert loaded.n_iter_ == len(saved) + added == len(loaded.history_)
    assert loaded.history_[: len(saved)] == saved
    assert [record["epoch"] for record in loaded.history_] == list(range(1, len(saved) + added + 1))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_trained_model_unpickles_with_cpu_tensors(toy_classification):
    X, y = toy_classification
    clf = SSMClassifier(**{**FAST, "device": "cuda"}).fit(X, y)
    restored = pickle.loads(pickle.dumps(clf))
    assert all(p.device.type == "cpu" for p in restored.model_.parameters())
    restored.set_params(device="cpu")
    np.testing.assert_allclose(restored.predict_proba(X), clf.predict_proba(X), atol=1e-4)


def test_partial_fit_and_warm_start_continue_training(toy_classification):
    X, y = toy_classification
    clf = SSMClassifier(**FAST)
    clf.partial_fit(X, y, classes=[0, 1])
    first = {k: v.clone() for k, v in clf.model_.state_dict().items()}
    clf.partial_fit(X, y)
    assert clf.n_iter_ == 2 and len(clf.history_) == 2
    assert any(not torch.equal(first[k], v) for k, v in clf.model_.state_dict().items())
    warm = SSMClassifier(**{**FAST, "warm_start": True}).fit(X, y)
    losses = [h["train_loss"] for h in warm.history_]
    warm.fit(X, y)
    assert warm.n_iter_ == 2 * FAST["max_epochs"]
    assert warm.history_[-1]["train_loss"] < losses[0]
    with pytest.raises(ValueError, match="classes must be passed"):
        SSMClassifier(**FAST).partial_fit(X, y)


def test_string_labels_class_weight_and_probabilities(toy_classification):
    X, y = toy_classification
    labels = np.where(y == 1, "yes", "no")
    clf = SSMClassifier(**FAST, class_weight="balanced").fit(X, labels)
    assert list(clf.classes_) == ["no", "yes"]
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-12)
    # the labels are the classes of the larger probability, and the binary decision function is their log-odds side
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[proba.argmax(1)])
    np.testing.assert_array_equal(clf.decision_function(X) > 0, proba[:, 1] > 0.5)
    # a class weight pulls the probabilities towards its class (measured: mean P(yes) 0.52 -> 0.76)
    plain = SSMClassifier(**FAST).fit(X, labels).predict_proba(X)[:, 1].mean()
    weighted = SSMClassifier(**FAST, class_weight={"yes": 3.0}).fit(X, labels).predict_proba(X)[:, 1].mean()
    assert weighted > plain + 0.1
    with pytest.raises(ValueError, match="unknown classes"):
        SSMClassifier(**FAST, class_weight={"maybe": 1.0}).fit(X, labels)


def test_ragged_lists_are_padded_and_masked():
    """A series' prediction in a ragged batch equals its prediction alone (padding changes nothing)."""
    rng = np.random.default_rng(0)
    series = [rng.standard_normal(n) for n in (10, 14, 7, 14, 9, 12)]
    y = np.array([0, 1, 0, 1, 0, 1])
    for bidirectional in (False, True):
        clf = SSMClassifier(**FAST, bidirectional=bidirectional).fit(series, y)
        together = clf.decision_function(series)
        alone = np.array([clf.decision_function([s[None, :]])[0] for s in series])
        np.testing.assert_allclose(together, alone, rtol=1e-5, atol=1e-6)


def test_pandas_and_3d_multichannel_input():
    rng = np.random.default_rng(0)
    X3 = rng.standard_normal((30, 3, 16))
    y = (X3[:, 1].mean(1) > 0).astype(int)
    clf = SSMClassifier(**FAST).fit(X3, y)
    assert clf.n_channels_in_ == 3 and clf.predict(X3[:, :, :10]).shape == (30,)
    frame = pd.DataFrame(X3[:, 0, :])
    reg = SSMRegressor(**FAST).fit(frame, X3[:, 0, :2])
    assert reg.predict(frame).shape == (30, 2) and reg.predict(frame).dtype == np.float64
    # a DataFrame is read as its values: the same model and predictions as from the array
    from_array = SSMRegressor(**FAST).fit(X3[:, 0, :], X3[:, 0, :2])
    np.testing.assert_array_equal(reg.predict(frame), from_array.predict(X3[:, 0, :]))
    # each channel of 3D input reaches the model: changing one channel changes the predictions
    changed = X3.copy()
    changed[:, 2] = 0.0
    assert not np.array_equal(clf.predict_proba(changed), clf.predict_proba(X3))


def test_transformer_embeddings_and_objectives(toy_classification):
    X, y = toy_classification
    untrained = SSMTransformer(**FAST, objective="none").fit(X).transform(X)
    for objective, target in (("reconstruction", None), ("classification", y), ("regression", X[:, 0]), ("none", None)):
        tr = SSMTransformer(**FAST, objective=objective).fit(X, target)
        Z = tr.transform(X)
        assert Z.shape == (len(X), FAST["d_model"]) and Z.dtype == np.float64
        sequence = tr.transform_sequence(X)
        assert sequence.shape == (len(X), FAST["d_model"], X.shape[1])
        # the embedding is the per-step features pooled (mean pooling by default)
        np.testing.assert_allclose(Z, sequence.mean(-1), rtol=1e-5, atol=1e-5)
        # each training objective moves the backbone away from its random start ('none' keeps it)
        assert np.array_equal(Z, untrained) == (objective == "none"), objective
    assert list(tr.get_feature_names_out())[:2] == ["ssmtransformer0", "ssmtransformer1"]
    # Embeddings feed any sklearn model.
    from sklearn.linear_model import LogisticRegression

    pipe = make_pipeline(SSMTransformer(**FAST), LogisticRegression()).fit(X, y)
    assert pipe.score(X, y) > 0.5


def test_transformer_pools_as_fitted_after_set_params(tmp_path, toy_classification):
    """A pooling set after fit does not describe the fitted model: transform (and export) kept reading the
    new one while save stored the fitted one, so the loaded transformer answered otherwise. Oracle: the
    per-step features pooled by the fitted pooling (the mean)."""
    X, y = toy_classification
    tr = SSMTransformer(**FAST, objective="classification", pooling="mean").fit(X, y)
    before = tr.transform(X)
    np.testing.assert_allclose(before, tr.transform_sequence(X).mean(-1), rtol=1e-5, atol=1e-5)
    tr.set_params(pooling="last")
    np.testing.assert_array_equal(tr.transform(X), before)
    with pytest.warns(UserWarning, match="pooling='last' was set after the last fit"):
        tr.save(tmp_path / "tr.safetensors")
    np.testing.assert_array_equal(SSMTransformer.load(tmp_path / "tr.safetensors").transform(X), before)
    assert SSMTransformer(**FAST, objective="none").fit(X).best_epoch_ == 0


def test_transformer_checks_labels_as_the_classifier_does_and_continues_only_its_own_objective(toy_classification):
    """objective='classification' refuses a missing label, one class and continuous y, with the classifier's
    messages (they were encoded: NaN as a class of its own, 20 values as 20 classes, one class trained to a
    loss of 0); a warm-started fit whose y asks for another objective than the fitted head's is refused by
    name (it failed on a missing attribute), and one with the same objective continues."""
    X, y = toy_classification
    classify = SSMTransformer(**FAST, objective="classification")
    with pytest.raises(ValueError, match=r"y has no label \(None or NaN\) for 1 sample"):
        classify.fit(X, np.where(np.arange(len(y)) == 0, np.nan, y))
    with pytest.raises(ValueError, match="needs samples of at least 2 classes"):
        classify.fit(X, np.zeros(len(y), dtype=int))
    with pytest.raises(ValueError, match="Unknown label type"):
        classify.fit(X, np.linspace(0.0, 1.0, len(y)))
    warm = SSMTransformer(**FAST, warm_start=True).fit(X)  # reconstruction
    with pytest.raises(
        ValueError, match="head for objective 'reconstruction', but this fit's objective is 'classification'"
    ):
        warm.fit(X, y)
    assert warm.objective_ == "reconstruction"
    warm.set_params(warm_start=False).fit(X, y).set_params(warm_start=True)
    with pytest.raises(ValueError, match="objective 'classification', but this fit's objective is 'regression'"):
        warm.fit(X, X[:, 0])
    before = warm.transform(X)
    assert not np.array_equal(warm.fit(X, y).transform(X), before)  # the same objective: trained on


def test_verbose_shows_a_progress_bar(capfd, toy_classification):
    X, y = toy_classification
    loud = SSMClassifier(**{**FAST, "verbose": 1}).fit(X, y)
    err = capfd.readouterr().err
    assert "SSMClassifier" in err and "epoch" in err and "train_loss" in err
    loud.predict(X)
    err = capfd.readouterr().err
    assert "SSMClassifier: predict: 100%" in err and f"{len(X)}/{len(X)}" in err
    quiet = SSMClassifier(**FAST).fit(X, y)
    quiet.predict(X)
    assert capfd.readouterr().err == ""


def test_early_stopping_restores_best_and_stops(toy_classification):
    """Training stops n_iter_no_change epochs after the best validation score, and the fitted model is
    that epoch's (the weights of every epoch are recorded by a callback and compared)."""
    import copy

    from ssmts.training import Callback

    class Weights(Callback):
        def __init__(self):
            self.by_epoch = {}

        def on_epoch_end(self, trainer, record):
            self.by_epoch[record["epoch"]] = copy.deepcopy(trainer.model.state_dict())

    X, y = toy_classification
    weights = Weights()
    clf = SSMClassifier(
        **{**FAST, "max_epochs": 60, "early_stopping": True, "n_iter_no_change": 3, "lr": 0.05}, callbacks=[weights]
    ).fit(X, y)
    assert clf.n_iter_ < 60
    assert all("val_score" in h for h in clf.history_)
    best, best_epoch = -np.inf, None
    for record in clf.history_:  # the first epoch that improved on all before it by more than tol
        if record["val_score"] > best + clf.tol:
            best, best_epoch = record["val_score"], record["epoch"]
    assert clf.history_[-1]["epoch"] == best_epoch + 3  # stopped after 3 epochs without improvement
    fitted = clf.model_.state_dict()
    assert all(torch.equal(weights.by_epoch[best_epoch][k], v) for k, v in fitted.items())
    assert not all(torch.equal(weights.by_epoch[clf.history_[-1]["epoch"]][k], v) for k, v in fitted.items())
    assert clf.best_epoch_ == best_epoch  # says which epoch it kept

    # a warm-started fit numbers its epochs on, and best_epoch_ with them: the epoch whose weights it holds,
    # the first run's kept one unless an epoch of the continuation beat the weights it started from
    first_run, kept_before = clf.n_iter_, clf.best_epoch_
    clf.set_params(warm_start=True).fit(X, y)
    assert first_run < clf.n_iter_ == clf.history_[-1]["epoch"]
    assert clf.best_epoch_ == kept_before or first_run < clf.best_epoch_ <= clf.n_iter_
    fitted = clf.model_.state_dict()
    assert all(torch.equal(weights.by_epoch[clf.best_epoch_][k], v) for k, v in fitted.items())


def test_best_epoch_is_the_last_without_early_stopping_and_is_saved(tmp_path, toy_classification):
    X, y = toy_classification
    clf = SSMClassifier(**FAST).fit(X, y)
    assert clf.best_epoch_ == clf.n_iter_ == FAST["max_epochs"]
    clf.save(tmp_path / "model.safetensors")
    loaded = SSMClassifier.load(tmp_path / "model.safetensors")
    assert loaded.best_epoch_ == clf.best_epoch_
    loaded.partial_fit(X, y)  # a loaded model continues its history (numbered on), and best_epoch_ with it
    assert loaded.best_epoch_ == loaded.n_iter_ == FAST["max_epochs"] + 1


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "params, message",
    [
        (dict(init="foo"), "unknown init 'foo'"),
        (dict(discretization="rk4"), "unknown discretization"),
        (dict(d_model=10, heads=3), "divisible by heads"),
        (dict(d_state=7), "must be even"),
        (dict(dt_min=0.0), "dt_min"),
        (dict(optimizer="lbfgs"), "unknown optimizer"),
        (dict(sample_rate=-8000), "sample_rate must be > 0"),
        (dict(device="tpu"), "unknown device"),
        (dict(max_epochs=0), "max_epochs"),
    ],
)
def test_bad_options_raise_at_fit(params, message, toy_classification):
    X, y = toy_classification
    with pytest.raises(ValueError, match=message):
        SSMClassifier(**{**FAST, **params}).fit(X, y)


def test_bad_input_raises_clear_errors(toy_classification):
    X, y = toy_classification
    clf = SSMClassifier(**FAST).fit(X, y)
    bad = X.copy()
    bad[0, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        SSMClassifier(**FAST).fit(bad, y)
    with pytest.raises(ValueError, match="infinity"):
        clf.predict(np.where(bad == bad, bad, np.inf))
    with pytest.raises(ValueError, match="expecting 12 features"):
        clf.predict(X[:, :8])
    with pytest.raises(ValueError, match="channels"):
        clf.predict(np.stack([X, X], axis=1))
    with pytest.raises(ValueError, match="0 sample"):
        SSMClassifier(**FAST).fit(X[:0], y[:0])
    with pytest.raises(ValueError, match="sample_rate must be a positive number"):
        SSMClassifier(**FAST, sample_rate=100).fit(X, y).predict(X, sample_rate=0)
    rated = SSMClassifier(**FAST, sample_rate=100).fit(X, y)
    with pytest.raises(ValueError, match="sample_rate=5e-324 is too far from the training rate 100"):
        rated.predict(X, sample_rate=5e-324)  # the rate ratio underflows to 0
    with pytest.raises(ValueError, match=r"expects about 1\.2e\+307 \(12 at the training rate 100\)"):
        rated.predict(X, sample_rate=1e308)
    with pytest.raises(ValueError, match="fitted without sample_rate"):
        clf.predict(X, sample_rate=50)
    with pytest.raises(ValueError, match="at least 2 classes"):
        SSMClassifier(**FAST).fit(X, np.zeros(len(X)))
    with pytest.raises(ValueError, match="timepoints"):
        SSMClassifier(**FAST, sample_rate=100).fit(X, y).predict(X[:, :3], sample_rate=50)


def test_label_smoothing_reaches_the_classifier():
    """On separable data a long fit drives plain cross-entropy towards certainty; with label_smoothing=e the
    probabilities settle near 1 - e + e/K instead (and the sktime face takes the same parameter)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 16))
    y = (X[:, :8].mean(1) > 0).astype(int)
    X = X + 2.0 * (2 * y[:, None] - 1)  # well separated
    settings = dict(FAST, max_epochs=60)
    plain = SSMClassifier(**settings, label_smoothing=0.0).fit(X, y).predict_proba(X).max(1)
    smoothed = SSMClassifier(**settings, label_smoothing=0.4).fit(X, y).predict_proba(X).max(1)
    assert plain.min() > 0.95
    assert np.all(smoothed < 0.9) and np.median(smoothed) > 0.7  # the optimum is 1 - 0.4 + 0.4 / 2 = 0.8
    with pytest.raises(ValueError, match="label_smoothing"):
        SSMClassifier(**FAST, label_smoothing=1.0).fit(X, y)


@pytest.mark.parametrize(
    "item, named",
    [
        (3.0, r"X\[1\] is a scalar \(float\), not a series"),
        (None, r"X\[1\] is None, not a series"),
        (np.zeros((2, 2, 5)), r"X\[1\] is a 3-D array of shape \(2, 2, 5\), not a series"),
        ([[1.0, 2.0], [3.0]], r"X\[1\] is not a rectangular array \(nested lists of unequal lengths\), not a series"),
    ],
)
def test_a_list_item_that_is_no_series_is_named_by_its_place(item, named):
    """numpy alone says 'inhomogeneous shape'; the list's own item is named, at fit and at predict."""
    X = [np.zeros(6), item, np.ones(4)]
    with pytest.raises(ValueError, match=named + r": a list X holds one series per item"):
        SSMClassifier(**FAST).fit(X, [0, 1, 0])
    fitted = SSMClassifier(**FAST).fit([np.zeros(6), np.ones(5)], [0, 1])
    with pytest.raises(ValueError, match=named):
        fitted.predict(X)
