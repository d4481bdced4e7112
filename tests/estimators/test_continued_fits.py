"""Continued fits (warm_start, partial_fit, a loaded model fitted on) and what the estimators report of a
fit: the parameters that built the network cannot change silently, best_epoch_ names the weights model_
holds whichever EarlyStopping kept them, the history's learning rate is the one trained at, a constant
target is predicted as that constant, seeds keep scikit-learn's range."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from ssmts import SSMClassifier, SSMRegressor, SSMTransformer
from ssmts.estimators import ExtrapolationWarning
from ssmts.training import Callback, EarlyStopping
from ssmts.training.config import InvalidParameterError

TINY = dict(d_model=8, d_state=4, n_layers=1, max_epochs=2, min_steps=0, batch_size=8, device="cpu", random_state=0)


def _regression(n=32, length=16, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 1, length))
    return X, X[:, 0].sum(1) + 0.1 * rng.normal(size=n)


def _classification(n=40, length=16, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 1, length))
    return X, (X[:, 0, :8].sum(1) > 0).astype(int)


@pytest.mark.parametrize(
    "change",
    [{"d_model": 16}, {"bidirectional": True}, {"pooling": "last"}, {"normalize": "series"}, {"dropout": 0.5},
     {"heads": 2, "n_layers": 2}, {"optimizer": "sgd"}, {"random_state": 1}, {"dt_max": 0.5}],
    ids=lambda change: ",".join(change),
)  # fmt: skip
@pytest.mark.parametrize("how", ["warm_start", "partial_fit"])
def test_a_continued_fit_refuses_a_parameter_that_built_the_network(change, how):
    """It trained the old network on and recorded the new value as fitted: save then wrote a file that
    loaded as another network (other predictions) or not at all."""
    X, y = _regression()
    reg = SSMRegressor(**TINY).fit(X, y)
    before = reg.predict(X)
    reg.set_params(**change)
    continue_fit = reg.set_params(warm_start=True).fit if how == "warm_start" else reg.partial_fit
    names = ", ".join(f"{k}={v!r}" for k, v in sorted(change.items()))
    with pytest.raises(ValueError, match="a continued fit .* trains the fitted network on as it was built") as info:
        continue_fit(X, y)
    assert names in str(info.value)
    np.testing.assert_array_equal(reg.predict(X), before)  # nothing trained


def test_a_continued_fit_takes_how_to_train_as_set_now_and_saves_what_it_was_built_with(tmp_path):
    X, y = _regression()
    reg = SSMRegressor(**TINY).fit(X, y)
    reg.set_params(warm_start=True, lr=1e-3, max_epochs=1, batch_size=4, early_stopping=True, verbose=0).fit(X, y)
    assert reg.n_iter_ == 3 and reg.history_[-1]["lr"] == pytest.approx(1e-3)
    loaded = SSMRegressor.load(reg.save(tmp_path / "r.safetensors"))
    np.testing.assert_array_equal(loaded.predict(X), reg.predict(X))


class _Weights(Callback):
    """The network's weights after every epoch, by epoch number."""

    def __init__(self):
        self.after = {}

    def on_epoch_end(self, trainer, record):
        self.after[record["epoch"]] = [p.detach().clone() for p in trainer.model.parameters()]


def test_best_epoch_follows_an_early_stopping_passed_as_a_callback():
    """It restored an earlier epoch's weights while best_epoch_ named the last epoch."""
    X, y = _classification()
    stopping, weights = EarlyStopping(patience=2), _Weights()
    clf = SSMClassifier(**{**TINY, "max_epochs": 12, "lr": 0.1, "callbacks": [weights, stopping]}).fit(X, y)
    assert stopping.best_epoch is not None and clf.best_epoch_ == stopping.best_epoch < clf.n_iter_
    held = [p.detach() for p in clf.model_.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(held, weights.after[clf.best_epoch_]))


def test_a_continued_fit_with_early_stopping_ends_no_worse_than_it_started():
    """The continuation's stopper started from minus infinity, so it kept the best of the new epochs even
    when the weights it started from scored better: best_epoch_ named an epoch that beat nothing."""
    X, y = _regression(n=40)
    weights = _Weights()
    reg = SSMRegressor(
        **{**TINY, "max_epochs": 4, "lr": 0.05, "early_stopping": True, "n_iter_no_change": 4, "callbacks": [weights]}
    ).fit(X, y)
    first_kept, first_best = reg.best_epoch_, max(r["val_score"] for r in reg.history_)
    reg.set_params(warm_start=True, lr=0.5, max_epochs=3).fit(X, y)  # a rate that makes things worse
    scores = [r["val_score"] for r in reg.history_]
    if max(scores[4:]) <= first_best + reg.tol:
        assert reg.best_epoch_ == first_kept
    else:
        assert reg.best_epoch_ > 4 and scores[reg.best_epoch_ - 1] == max(scores[4:])
    held = [p.detach() for p in reg.model_.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(held, weights.after[reg.best_epoch_]))


def test_the_continuation_of_a_loaded_model_numbers_its_epochs_on_for_the_callbacks(tmp_path):
    X, y = _classification()
    seen = _Weights()
    clf = SSMClassifier(**{**TINY, "max_epochs": 3}).fit(X, y)
    loaded = SSMClassifier.load(clf.save(tmp_path / "c.safetensors"))
    loaded.set_params(warm_start=True, max_epochs=2, callbacks=[seen]).fit(X, y)
    assert sorted(seen.after) == [4, 5] and [r["epoch"] for r in loaded.history_] == [1, 2, 3, 4, 5]
    assert loaded.best_epoch_ == 5


def test_the_history_records_the_learning_rate_its_epoch_started_at():
    X, y = _regression(n=16)
    reg = SSMRegressor(**{**TINY, "batch_size": 8, "lr": 0.01, "max_epochs": 2}).fit(X, y)
    # the cosine schedule over 4 steps: 0.01 at the first step of epoch 1, 0.005 at that of epoch 2
    assert [r["lr"] for r in reg.history_] == pytest.approx([0.01, 0.005])


@pytest.mark.parametrize("value", [1e-6, 3.0, 1e6])
def test_a_constant_target_is_predicted_as_that_constant(value, tmp_path):
    """Its scale was 1 in the target's own units, so the network's untrained output was added to it
    (y = 1e-6 predicted as 0.5)."""
    X, _ = _regression()
    y = np.full(len(X), value)
    reg = SSMRegressor(**TINY).fit(X, y)
    np.testing.assert_array_equal(reg.predict(X), y)
    np.testing.assert_array_equal(SSMRegressor.load(reg.save(tmp_path / "r.safetensors")).predict(X[:3]), y[:3])
    two = SSMRegressor(**TINY).fit(X, np.c_[y, np.arange(len(X), dtype=float)])  # one constant column of two
    assert two.target_scale_[0] == 0 and two.target_scale_[1] > 0
    np.testing.assert_array_equal(two.predict(X)[:, 0], y)
    np.testing.assert_array_equal(SSMRegressor(**TINY).fit(X[:1], [value]).predict(X[:4]), np.full(4, value))


def test_seeds_beyond_scikit_learns_range_are_refused_not_wrapped():
    X, y = _classification()
    with pytest.raises(InvalidParameterError, match=r"an int in \[0, 2\*\*32 - 1\]"):
        SSMClassifier(**{**TINY, "random_state": 7 + 2**32}).fit(X, y)
    SSMClassifier(**{**TINY, "random_state": 2**32 - 1}).fit(X, y)


def test_partial_fit_refuses_other_classes_on_a_later_call():
    X, y = _classification()
    clf = SSMClassifier(**TINY).partial_fit(X, y, classes=[0, 1])
    clf.partial_fit(X, y, classes=[1, 0])  # the same classes
    refused = r"classes=\[0, 1, 2\] differs from the classes of the fitted model \(\[0, 1\]\)"
    with pytest.raises(ValueError, match=refused):
        clf.partial_fit(X, y, classes=[0, 1, 2])


def test_the_transformer_names_the_columns_of_its_fitted_width():
    X, y = _regression()
    transformer = SSMTransformer(**TINY).fit(X, y)
    transformer.set_params(d_model=16)
    assert len(transformer.get_feature_names_out()) == transformer.transform(X).shape[1] == 8


def test_a_continued_transformer_refuses_another_number_of_targets():
    X, y = _regression()
    transformer = SSMTransformer(**{**TINY, "objective": "regression"}).fit(X, y)
    with pytest.raises(ValueError, match="y has 2 targets, but the model was fitted with 1"):
        transformer.set_params(warm_start=True).fit(X, np.c_[y, y])


def test_numpy_series_of_one_length_in_a_list_are_series_that_may_have_any_length_at_predict():
    """They were read as a 2-D array (rows of features), so a list of shorter series was refused while a
    list with one shorter series was taken."""
    X, y = _regression(length=20)
    series = list(X[:, 0])
    reg = SSMRegressor(**TINY).fit(series, y)
    np.testing.assert_array_equal(reg.predict(series), reg.predict(X))
    shorter = [s[:12] for s in series[:3]]
    np.testing.assert_array_equal(reg.predict(shorter), reg.predict(X[:3, :, :12]))
    assert SSMRegressor(**TINY).fit(X[:, 0].tolist(), y).predict(X[:2, 0].tolist()).shape == (2,)  # lists of lists: 2-D


def test_a_target_first_seen_constant_is_learned_once_it_varies():
    """Its scale 0 stayed for good: every later partial_fit or warm-started fit trained a network whose output
    was multiplied by 0, so the model kept answering the first constant."""
    X, y = _regression(n=40)
    reg = SSMRegressor(**{**TINY, "lr": 0.02})
    reg.partial_fit(X[:1], y[:1])
    np.testing.assert_array_equal(reg.predict(X[:3]), np.full(3, y[0]))
    for _ in range(20):
        reg.partial_fit(X, y)
    assert reg.target_scale_[0] > 0 and len(np.unique(reg.predict(X))) == len(X) and reg.score(X, y) > 0.2


@pytest.mark.parametrize("how", ["warm_start", "partial_fit"])
def test_data_at_a_rate_a_continued_fit_trained_at_is_not_warned_of(how):
    X, y = _classification(length=32)
    clf = SSMClassifier(**{**TINY, "sample_rate": 100}).fit(X, y)
    half = X[:, :, ::2]
    with pytest.warns(ExtrapolationWarning, match="lies below 100"):
        clf.predict(half, sample_rate=50)
    clf.set_params(sample_rate=50)
    (clf.set_params(warm_start=True).fit if how == "warm_start" else clf.partial_fit)(half, y)
    assert clf.lowest_trained_rate_ == 50
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf.predict(half, sample_rate=50)
    with pytest.warns(ExtrapolationWarning, match=r"sample_rate=25 lies below 50, .*\(the training rate is 100\)"):
        clf.predict(X[:, :, ::4], sample_rate=25)


def test_a_loaded_model_takes_another_optimizer_for_its_fresh_one(tmp_path):
    """A loaded model keeps no optimizer state, so a continuation builds the optimizer set now."""
    X, y = _regression()
    reg = SSMRegressor(**TINY).fit(X, y)
    loaded = SSMRegressor.load(reg.save(tmp_path / "r.safetensors"))
    loaded.set_params(optimizer="sgd", warm_start=True).fit(X, y)
    assert loaded.n_iter_ == 4
    refused = r"optimizer='adamw', but optimizer='sgd' was set since.*fit with warm_start=False"
    with pytest.raises(ValueError, match=refused):
        reg.set_params(optimizer="sgd").partial_fit(X, y)


def test_an_untrained_transformer_keeps_no_earlier_fits_lowest_rate():
    X, y = _regression(length=32)
    transformer = SSMTransformer(**{**TINY, "sample_rate": 100, "half_rate_share": 0.5, "objective": "regression"})
    assert transformer.fit(X, y).lowest_trained_rate_ == 50
    transformer.set_params(objective="none", half_rate_share=0.0).fit(X)
    assert transformer.lowest_trained_rate_ == 100
    with pytest.warns(ExtrapolationWarning, match="sample_rate=50 lies below 100"):
        transformer.transform(X[:, :, ::2], sample_rate=50)
