"""training_steps > 0: the feature network trained from its ridge solution. The untrained start
competes on the hold-out, so a run that never beats it gives exactly the untrained estimator;
a run that does keeps its trained bank and refits the ridge on all the data."""

import numpy as np
import torch
from sklearn.preprocessing import StandardScaler

from ssmts import SSMFeatureClassifier, SSMFeatureRegressor
from ssmts.estimators._ridge import GramRidgeCV
from ssmts.estimators.features import REGRESSION_PENALTY_STANDARD_ERRORS, RIDGE_ALPHAS

from .test_features import SMALL, _training_features, _waves


def test_a_run_that_never_beats_the_start_is_the_untrained_classifier():
    X, y, _ = _waves(40, 60)
    untrained = SSMFeatureClassifier(**SMALL).fit(X, y)
    # A step too small to change a prediction: no epoch scores above the start on the hold-out.
    trained = SSMFeatureClassifier(**SMALL, training_steps=6, batch_size=8, lr=1e-12).fit(X, y)
    assert trained.best_epoch_ == 0 and trained.n_iter_ >= 1 and len(trained.history_) == trained.n_iter_
    np.testing.assert_array_equal(trained.decision_function(X), untrained.decision_function(X))
    for name, value in untrained.model_.state_dict().items():
        assert torch.equal(trained.model_.state_dict()[name], value), name
    assert untrained.best_epoch_ == 0 and untrained.n_iter_ == 0 and untrained.history_ == []


def test_a_run_that_beats_the_start_keeps_its_bank_and_refits_the_ridge_on_all_the_data(tmp_path):
    X, _, freq = _waves(60, 50, seed=1)
    few = dict(SMALL, n_scales=1, n_kernels=4)  # a bank too small to read the frequency well as drawn
    untrained = SSMFeatureRegressor(**few).fit(X, freq)
    trained = SSMFeatureRegressor(**few, training_steps=60, batch_size=8, lr=1e-3).fit(X, freq)
    scores = [record["val_score"] for record in trained.history_]
    assert trained.best_epoch_ >= 1, scores
    # The kept epoch is the best on the hold-out (later epochs may be worse: they were not kept).
    assert scores[trained.best_epoch_ - 1] == max(scores)
    assert not torch.equal(trained.model_.series.steps, untrained.model_.series.steps)
    assert not torch.equal(trained.model_.series.readout_pairs, untrained.model_.series.readout_pairs)
    assert not any(p.requires_grad for p in trained.model_.series.parameters())
    F = _training_features(trained, X)
    scaled = StandardScaler().fit_transform(F)  # the regressors' read-out: the rule's penalty on the scaled features
    ridge = GramRidgeCV(RIDGE_ALPHAS, classifier=False, standard_errors=REGRESSION_PENALTY_STANDARD_ERRORS)
    ridge.fit(scaled, freq)
    np.testing.assert_allclose(trained.predict(X), scaled @ ridge.coef_ + ridge.intercept_, rtol=1e-6, atol=1e-9)
    loaded = SSMFeatureRegressor.load(trained.save(tmp_path / "trained.safetensors"))
    np.testing.assert_array_equal(loaded.predict(X), trained.predict(X))
    assert loaded.best_epoch_ == trained.best_epoch_


def test_training_is_reproducible_and_shows_progress_when_verbose(capsys):
    X, y, _ = _waves(30, 40, seed=5)
    options = dict(SMALL, training_steps=8, batch_size=8, lr=1e-3)
    first = SSMFeatureClassifier(**options).fit(X, y)
    second = SSMFeatureClassifier(**options).fit(X, y)
    np.testing.assert_array_equal(first.decision_function(X), second.decision_function(X))
    assert [r["val_loss"] for r in first.history_] == [r["val_loss"] for r in second.history_]
    SSMFeatureClassifier(**options, verbose=1).fit(X, y)
    assert "SSMFeatureClassifier" in capsys.readouterr().err


def test_with_auto_normalization_training_starts_from_the_chosen_scalings_features():
    """normalize="auto" keeping "channel" (the target is each series' level, which per-series scaling
    deletes): training runs exactly as with normalize="channel" (the same start, hold-out scores and
    model), not from the features of the scaling tried last."""
    X, _, _ = _waves(60, 50, seed=2)
    rng = np.random.default_rng(3)
    level = rng.uniform(-50, 50, (60, 1))
    X = X * rng.uniform(0.1, 30.0, (60, 1)) + level
    options = dict(SMALL, training_steps=16, batch_size=8, lr=1e-3)
    auto = SSMFeatureRegressor(**dict(options, normalize="auto")).fit(X, level[:, 0])
    channel = SSMFeatureRegressor(**dict(options, normalize="channel")).fit(X, level[:, 0])
    assert auto.normalization_ == "channel"
    assert [r["val_loss"] for r in auto.history_] == [r["val_loss"] for r in channel.history_]
    assert auto.best_epoch_ == channel.best_epoch_
    np.testing.assert_array_equal(auto.predict(X[:7]), channel.predict(X[:7]))


def test_a_class_whose_only_sample_is_held_out_keeps_its_output():
    """Class 2 has one sample, and the hold-out (seed 5) takes it: the start's ridge, fitted on the rest,
    still has an output for every class (a column of -1 for class 2: never its largest score), so the
    network trains (it failed with 'Target 2 is out of bounds'); and one sample a class, whatever the
    hold-out takes. Oracle: the ridge's one-vs-rest coding with the absent class given its own column."""
    X, y, _ = _waves(30, 40)
    y = np.r_[np.arange(29) % 2, 2]
    model = SSMFeatureClassifier(**SMALL, training_steps=4, batch_size=8).set_params(random_state=5).fit(X, y)
    assert list(model.classes_) == [0, 1, 2] and model.decision_function(X).shape == (30, 3)
    SSMFeatureClassifier(**SMALL, training_steps=4).fit(X[:4], [0, 1, 2, 3])
    from ssmts.estimators._ridge import _targets

    coded = _targets(np.array([0, 1, 0]), True, classes=np.arange(3))
    np.testing.assert_array_equal(coded, [[1, -1, -1], [-1, 1, -1], [1, -1, -1]])


def test_the_regressors_validation_score_is_in_units_of_the_targets_spread():
    """val_score is the standardized -MSE, as plot_history labels it and as the loss is (it was in the
    targets' own units: y times 1000, the score about a million times the loss). Oracle: the validation
    loss, the same mean squared error in units of each target's spread."""
    X, _, freq = _waves(40, 50, seed=1)
    few = dict(SMALL, n_scales=1, n_kernels=4, training_steps=8, batch_size=8, lr=1e-3)
    for y in (1000.0 * freq, np.stack([freq, 1e-3 * freq**2], 1)):
        history = SSMFeatureRegressor(**few).fit(X, y).history_
        np.testing.assert_allclose([r["val_score"] for r in history], [-r["val_loss"] for r in history], rtol=1e-5)
