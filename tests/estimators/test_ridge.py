"""TallRidgeCV and GramRidgeCV (the features' read-out for more and for fewer rows than features) against
scikit-learn's RidgeCV and RidgeClassifierCV, which find the same leave-one-out errors by another
decomposition; the penalty within some standard errors of the best (penalty_within) and the weight of a
block of columns against leave-one-out by refitting."""

import numpy as np
import pytest
from sklearn.linear_model import Ridge, RidgeClassifierCV, RidgeCV

from ssmts.estimators._ridge import GramRidgeCV, TallRidgeCV, penalty_within
from ssmts.estimators.features import RIDGE_ALPHAS


def refitted_leave_one_out(X, Y, alphas):
    """(n, A) squared errors (summed over the targets) of each row predicted by a ridge with intercept
    fitted on the other rows, under each penalty: the definition, one refit a row and penalty."""
    Y = Y.reshape(len(X), -1)
    errors = np.empty((len(X), len(alphas)))
    for a, alpha in enumerate(alphas):
        for i in range(len(X)):
            others = np.arange(len(X)) != i
            fit = Ridge(alpha=alpha, solver="svd").fit(X[others], Y[others])
            errors[i, a] = ((fit.predict(X[i : i + 1]) - Y[i]) ** 2).sum()
    return errors


def smoothest_by_hand(errors, alphas, standard_errors):
    """The penalty rule written out: the lowest mean error, its standard error, the largest penalty within."""
    mean = errors.mean(0)
    lowest = mean.min()
    spread = errors[:, list(mean).index(lowest)].std(ddof=1) / np.sqrt(len(errors))
    return max(alpha for alpha, m in zip(alphas, mean) if m <= lowest + standard_errors * spread)


def _tall_data(seed: int, n: int = 240, p: int = 30):
    """X (n, p) with unequal scales and a mean far from 0 (the intercept matters), targets (n, 2) with a signal."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) * rng.uniform(0.1, 5.0, p) + rng.uniform(-3.0, 3.0, p)
    Y = X @ rng.standard_normal((p, 2)) + 3.0 * rng.standard_normal((n, 2))
    return X, Y


def _agree(ours, theirs):
    assert ours.alpha_ == theirs.alpha_
    np.testing.assert_allclose(ours.best_score_, theirs.best_score_, rtol=1e-10)
    np.testing.assert_allclose(ours.coef_, np.atleast_2d(theirs.coef_), rtol=1e-8, atol=1e-11)
    np.testing.assert_allclose(ours.intercept_, np.atleast_1d(theirs.intercept_), rtol=1e-8, atol=1e-11)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("targets", [1, 2])
@pytest.mark.parametrize("rows_at_once", [None, 37])
def test_regression_matches_ridgecv(seed, targets, rows_at_once):
    X, Y = _tall_data(seed)
    y = Y[:, 0] if targets == 1 else Y
    ours = TallRidgeCV(RIDGE_ALPHAS, classifier=False, rows_at_once=rows_at_once).fit(X, y)
    _agree(ours, RidgeCV(alphas=RIDGE_ALPHAS).fit(X, y))


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("n_classes", [2, 4])
def test_classifier_matches_ridgeclassifiercv(seed, n_classes):
    X, Y = _tall_data(seed)
    labels = np.digitize(Y[:, 0], np.quantile(Y[:, 0], np.linspace(0, 1, n_classes + 1)[1:-1]))
    ours = TallRidgeCV(RIDGE_ALPHAS, classifier=True, rows_at_once=50).fit(X, labels)
    _agree(ours, RidgeClassifierCV(alphas=RIDGE_ALPHAS).fit(X, labels))


def test_penalty_moves_with_the_noise():
    """Not a constant choice: pure-noise targets take the largest penalty, a clean signal a small one."""
    X, _ = _tall_data(3)
    rng = np.random.default_rng(3)
    noise = TallRidgeCV(RIDGE_ALPHAS, classifier=False).fit(X, rng.standard_normal(len(X)))
    signal = TallRidgeCV(RIDGE_ALPHAS, classifier=False).fit(X, X @ rng.standard_normal(X.shape[1]))
    assert noise.alpha_ >= 1e4 and signal.alpha_ <= 1e-2


@pytest.mark.parametrize("where", ["X", "y"])
def test_refuses_values_that_are_not_finite(where):
    X, Y = _tall_data(0)
    (X if where == "X" else Y)[3, 0] = np.nan
    with pytest.raises(ValueError, match="must be finite"):
        TallRidgeCV(RIDGE_ALPHAS, classifier=False).fit(X, Y)


def test_refuses_wide_data():
    with pytest.raises(ValueError, match="more rows than features; X has 5 rows and 8 features"):
        TallRidgeCV(RIDGE_ALPHAS, classifier=False).fit(np.zeros((5, 8)), np.zeros(5))


def test_feature_classifier_uses_it_on_tall_data(monkeypatch):
    """SSMFeatureClassifier with more training series than features fits its read-out by TallRidgeCV, and
    its predictions are those of scikit-learn's ridge on the same features."""
    from ssmts import SSMFeatureClassifier
    from ssmts.estimators import features

    rng = np.random.default_rng(0)
    X = np.cumsum(rng.standard_normal((150, 24)), axis=1)
    y = (X[:, -1] > X[:, 0]).astype(int) + 2 * (X.std(1) > np.median(X.std(1)))
    params = dict(n_scales=2, n_kernels=3, d_state=4, n_biases=1, backward=False, random_state=0)
    used = []
    monkeypatch.setattr(features, "TallRidgeCV", lambda *a, **k: used.append(1) or TallRidgeCV(*a, **k))
    tall = SSMFeatureClassifier(**params).fit(X, y)
    assert used and tall.n_features_out_ < len(X)
    monkeypatch.setattr(features, "TallRidgeCV", lambda alphas, classifier, **_: RidgeClassifierCV(alphas=alphas))
    reference = SSMFeatureClassifier(**params).fit(X, y)
    assert tall.alpha_ == reference.alpha_
    np.testing.assert_allclose(tall.decision_function(X), reference.decision_function(X), rtol=1e-7, atol=1e-9)


def test_readout_benchmark_prints_both_fits_and_their_ratio(capsys):
    from ssmts.bench.__main__ import main

    assert main(["readout", "--shape", "90x20", "--classes", "3"]) == 0
    out = capsys.readouterr().out
    assert "90 x 20 |" in out and "x faster | yes" in out and out.startswith("threads 1; load average")
    with pytest.raises(SystemExit):
        main(["readout", "--shape", "20x90"])  # refused: TallRidgeCV is for more rows than features


def test_verbose_fit_shows_the_features_and_the_readouts_progress(capsys):
    """Minutes at tens of thousands of series: with verbose, bars over the series featurized (at the rate
    and at half of it), over the read-out's rows and over the series predict reads; without, nothing."""
    from ssmts import SSMFeatureClassifier

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((120, 16)), np.arange(120) % 3
    params = dict(n_scales=2, n_kernels=2, d_state=4, n_biases=1, backward=False, random_state=0, sample_rate=100)
    SSMFeatureClassifier(**params).fit(X, y).predict(X)
    assert capsys.readouterr().err == ""
    loud = SSMFeatureClassifier(**params, verbose=1).fit(X, y)
    err = capsys.readouterr().err
    assert "SSMFeatureClassifier: features: 100%" in err and "120/120" in err
    assert "SSMFeatureClassifier: features at the half rate" not in err and "features at half the rate: 100%" in err
    assert "ridge read-out: 100%" in err and "720/720" in err  # 3 x 120 rows (the rate and two halves), two passes
    loud.predict(X)
    assert "SSMFeatureClassifier: predict: 100%" in capsys.readouterr().err


def test_penalty_within_by_hand():
    # Mean errors 3, 2, 2.1, 2.6; the best's rows 1 and 3: deviation sqrt(2), standard error 1.
    errors = np.array([[3.0, 1.0, 1.2, 2.2], [3.0, 3.0, 3.0, 3.0]])
    assert penalty_within(errors, 0.0) == 1
    assert penalty_within(errors, 0.05) == 1  # 2.1 > 2.05
    assert penalty_within(errors, 0.2) == 2  # 2.1 <= 2.2 < 2.6
    assert penalty_within(errors, 0.7) == 3  # 2.6 <= 2.7
    one_row = np.array([[1.0, 1.0, 2.0]])  # no spread: within means equal
    assert penalty_within(one_row, 0.0) == 0 and penalty_within(one_row, 0.5) == 1
    undefined = np.full((1, 3), np.nan)  # one series: no leave-one-out fit; the first, as scikit-learn's
    assert penalty_within(undefined, 0.0) == 0 and penalty_within(undefined, 0.25) == 0


def _wide_noisy_data(seed, targets, n=30, p=80):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + rng.uniform(-2.0, 2.0, p)
    Y = 0.3 * X[:, :3] @ rng.standard_normal((3, targets)) + rng.standard_normal((n, targets))
    return X, (Y[:, 0] if targets == 1 else Y)


@pytest.mark.parametrize("standard_errors", [0.0, 0.25, 1.0])
@pytest.mark.parametrize("targets", [1, 2])
def test_gram_ridge_is_the_rule_on_refitted_leave_one_out(standard_errors, targets):
    X, y = _wide_noisy_data(targets, targets)
    errors = refitted_leave_one_out(X, y, RIDGE_ALPHAS)
    expected = smoothest_by_hand(errors, RIDGE_ALPHAS, standard_errors)
    ours = GramRidgeCV(RIDGE_ALPHAS, classifier=False, standard_errors=standard_errors).fit(X, y)
    assert ours.alpha_ == expected
    np.testing.assert_allclose(ours.best_score_, -errors.mean(0).min() / targets, rtol=1e-8)
    reference = Ridge(alpha=expected).fit(X, y)
    np.testing.assert_allclose(ours.coef_, reference.coef_, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(ours.intercept_, reference.intercept_, rtol=1e-7, atol=1e-10)


def test_the_rule_takes_a_smoother_fit_than_the_lowest_error():
    """On noisy targets the quarter of a standard error moves the choice to a larger penalty (so the tests
    above would fail on a rule that ignored it)."""
    moved = 0
    for seed in range(8):
        X, y = _wide_noisy_data(seed, 1)
        lowest = GramRidgeCV(RIDGE_ALPHAS, classifier=False, standard_errors=0.0).fit(X, y).alpha_
        smoother = GramRidgeCV(RIDGE_ALPHAS, classifier=False, standard_errors=0.25).fit(X, y).alpha_
        assert smoother >= lowest and lowest == RidgeCV(alphas=RIDGE_ALPHAS).fit(X, y).alpha_
        moved += smoother > lowest
    assert moved >= 3


@pytest.mark.parametrize("standard_errors", [0.25, 1.0])
def test_tall_ridge_applies_the_rule_to_its_leave_one_out(standard_errors):
    X, Y = _tall_data(4, n=80, p=10)
    Y = Y + 20.0 * np.random.default_rng(4).standard_normal(Y.shape)  # little signal: the rule matters
    errors = refitted_leave_one_out(X, Y, RIDGE_ALPHAS)
    expected = smoothest_by_hand(errors, RIDGE_ALPHAS, standard_errors)
    ours = TallRidgeCV(RIDGE_ALPHAS, classifier=False, standard_errors=standard_errors, rows_at_once=23).fit(X, Y)
    assert ours.alpha_ == expected and expected > RidgeCV(alphas=RIDGE_ALPHAS).fit(X, Y).alpha_
    np.testing.assert_allclose(ours.best_score_, -errors.mean(0).min() / 2, rtol=1e-8)
    np.testing.assert_allclose(ours.coef_, Ridge(alpha=expected).fit(X, Y).coef_, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("alphas", [[1.0, 0.1], [0.0, 1.0], []])
def test_penalties_must_increase(alphas):
    with pytest.raises(ValueError, match="increasing order"):
        GramRidgeCV(alphas, classifier=False, standard_errors=0.25)
    with pytest.raises(ValueError, match="increasing order"):
        TallRidgeCV(alphas, classifier=False)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("n_classes", [2, 4])
def test_gram_ridge_matches_ridgeclassifiercv(seed, n_classes):
    X, y = _wide_noisy_data(seed, 1, n=40, p=90)
    labels = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    _agree(
        GramRidgeCV(RIDGE_ALPHAS, classifier=True).fit(X, labels), RidgeClassifierCV(alphas=RIDGE_ALPHAS).fit(X, labels)
    )


@pytest.mark.parametrize("targets", [1, 2])
def test_gram_ridge_matches_ridgecv_on_tall_data_too(targets):
    """The Gram matrix of more rows than features is singular beyond p: the same fit all the same."""
    X, Y = _tall_data(5, n=60, p=12)
    y = Y[:, 0] if targets == 1 else Y
    ours, theirs = GramRidgeCV(RIDGE_ALPHAS, classifier=False).fit(X, y), RidgeCV(alphas=RIDGE_ALPHAS).fit(X, y)
    assert ours.alpha_ == theirs.alpha_ and np.shape(ours.coef_) == np.shape(theirs.coef_)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=1e-7, atol=1e-10)


def _blocked_data(seed, signal_in_block, n=36, p=70, block=10):
    """X (n, p) whose last `block` columns form the block; y from the block or from the rest, with noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + rng.uniform(-1.0, 1.0, p)
    columns = slice(p - block, p) if signal_in_block else slice(0, 3)
    y = X[:, columns] @ rng.standard_normal(X[:, columns].shape[1]) + 0.5 * rng.standard_normal(n)
    mask = np.zeros(p, dtype=bool)
    mask[p - block :] = True
    return X, y, mask


WEIGHTS = (0.5, 1.0, 2.0, 4.0)


@pytest.mark.parametrize("signal_in_block", [True, False])
@pytest.mark.parametrize("guard", [0.0, 1.0])
def test_block_weight_is_the_rule_on_refitted_leave_one_out(signal_in_block, guard):
    """Each weight's errors by refitting on X with the block scaled, at its penalty by the rule; the weight
    of the lowest mean error where it beats the default's rows by `guard` standard errors, else the
    default; the fit then Ridge's on the scaled X, its coefficients read back for X."""
    X, y, block = _blocked_data(0, signal_in_block)
    errors = {}
    for w in WEIGHTS:
        per_penalty = refitted_leave_one_out(np.where(block, X * w, X), y, RIDGE_ALPHAS)
        errors[w] = per_penalty[:, list(RIDGE_ALPHAS).index(smoothest_by_hand(per_penalty, RIDGE_ALPHAS, 0.25))]
    best = min(WEIGHTS, key=lambda w: errors[w].mean())
    difference = errors[best] - errors[1.0]
    expected = best if difference.mean() < -guard * difference.std(ddof=1) / np.sqrt(len(y)) else 1.0
    ours = GramRidgeCV(
        RIDGE_ALPHAS, classifier=False, standard_errors=0.25, block=block, block_weights=WEIGHTS, guard=guard
    ).fit(X, y)
    assert ours.block_weight_ == expected
    for w in WEIGHTS:
        np.testing.assert_allclose(ours.block_scores_[w], errors[w].mean(), rtol=1e-8)
    scaled = np.where(block, X * expected, X)
    reference = Ridge(alpha=ours.alpha_).fit(scaled, y)
    np.testing.assert_allclose(X @ ours.coef_ + ours.intercept_, reference.predict(scaled), rtol=1e-8, atol=1e-10)


def test_block_weight_follows_where_the_signal_is_and_otherwise_stays():
    """A block that carries the targets is weighed up, one that carries nothing not (the rule's guard keeps
    the default unless the evidence is clear), so the test above cannot pass on a constant choice."""
    up, stayed = 0, 0
    for seed in range(4):
        for signal_in_block in (True, False):
            X, y, block = _blocked_data(seed, signal_in_block)
            ridge = GramRidgeCV(RIDGE_ALPHAS, classifier=False, block=block, block_weights=WEIGHTS).fit(X, y)
            if signal_in_block:
                up += ridge.block_weight_ > 1.0
            else:
                stayed += ridge.block_weight_ <= 1.0
    assert up >= 3 and stayed == 4


def test_block_weights_must_hold_the_default():
    X, y, block = _blocked_data(0, True)
    with pytest.raises(ValueError, match="default_weight 3.0 must be among"):
        GramRidgeCV(RIDGE_ALPHAS, classifier=False, block=block, block_weights=WEIGHTS, default_weight=3.0).fit(X, y)


@pytest.mark.parametrize("signal_in_block", [True, False])
def test_block_weight_chosen_on_some_rows_is_theirs_and_fitted_on_all(signal_in_block):
    """choice_rows: the weight and its scores are those of the rows alone (their Gram matrix centred on their
    own mean), and the fit is the one at that weight on every row."""
    X, y, block = _blocked_data(1, signal_in_block, n=50)
    rows = np.sort(np.random.default_rng(0).choice(len(X), 30, replace=False))
    options = dict(classifier=False, standard_errors=0.25, block=block)
    ours = GramRidgeCV(RIDGE_ALPHAS, block_weights=WEIGHTS, choice_rows=rows, **options).fit(X, y)
    alone = GramRidgeCV(RIDGE_ALPHAS, block_weights=WEIGHTS, **options).fit(X[rows], y[rows])
    assert ours.block_weight_ == alone.block_weight_
    for w in WEIGHTS:
        np.testing.assert_allclose(ours.block_scores_[w], alone.block_scores_[w], rtol=1e-8)
    fixed = GramRidgeCV(
        RIDGE_ALPHAS, block_weights=(ours.block_weight_,), default_weight=ours.block_weight_, **options
    ).fit(X, y)
    assert ours.alpha_ == fixed.alpha_
    np.testing.assert_allclose(ours.coef_, fixed.coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours.best_score_, fixed.best_score_, rtol=1e-10)


def _signal_beside_noise(seed, n, p):
    """X (n, p) and targets (n, 2): a clean linear signal, and noise 50 times its spread (no signal)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + rng.uniform(-2.0, 2.0, p)
    signal = X[:, :4] @ rng.standard_normal(4) + 0.1 * rng.standard_normal(n)
    return X, np.stack([signal, 50.0 * signal.std() * rng.standard_normal(n)], 1)


@pytest.mark.parametrize("ridge", ["gram", "tall"])
def test_per_target_penalties_match_ridgecv_alpha_per_target(ridge):
    """Each target's penalty on its own errors, as scikit-learn's RidgeCV(alpha_per_target=True): the signal
    keeps a small penalty beside the noise's large one (one shared penalty would give both the same)."""
    X, Y = _signal_beside_noise(0, *((30, 80) if ridge == "gram" else (120, 12)))
    if ridge == "gram":
        ours = GramRidgeCV(RIDGE_ALPHAS, classifier=False, per_target=True).fit(X, Y)
    else:
        ours = TallRidgeCV(RIDGE_ALPHAS, classifier=False, per_target=True, rows_at_once=37).fit(X, Y)
    theirs = RidgeCV(alphas=RIDGE_ALPHAS, alpha_per_target=True).fit(X, Y)
    np.testing.assert_array_equal(ours.alpha_, theirs.alpha_)
    assert ours.alpha_[0] < ours.alpha_[1] and RidgeCV(alphas=RIDGE_ALPHAS).fit(X, Y).alpha_ > ours.alpha_[0]
    np.testing.assert_allclose(ours.best_score_, theirs.best_score_.mean(), rtol=1e-8)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("standard_errors", [0.0, 0.25])
@pytest.mark.parametrize("ridge", ["gram", "tall"])
def test_per_target_fit_is_one_fit_a_target(ridge, standard_errors):
    """Under the rule, each target's penalty and coefficients are those of a fit on that target alone."""
    X, Y = _signal_beside_noise(1, *((30, 80) if ridge == "gram" else (120, 12)))
    make = GramRidgeCV if ridge == "gram" else TallRidgeCV
    both = make(RIDGE_ALPHAS, classifier=False, standard_errors=standard_errors, per_target=True).fit(X, Y)
    for j in range(2):
        alone = make(RIDGE_ALPHAS, classifier=False, standard_errors=standard_errors, per_target=True).fit(X, Y[:, j])
        assert both.alpha_[j] == alone.alpha_ and isinstance(alone.alpha_, float)
        np.testing.assert_allclose(both.coef_[j], np.ravel(alone.coef_), rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(both.intercept_[j], np.ravel(alone.intercept_)[0], rtol=1e-8, atol=1e-10)


def test_per_target_is_refused_for_classes():
    for make in (GramRidgeCV, TallRidgeCV):
        with pytest.raises(ValueError, match="per_target=True is for regression"):
            make(RIDGE_ALPHAS, classifier=True, per_target=True)
