"""SSMFeatureClassifier / SSMFeatureRegressor: the folded read-out is scikit-learn's scaler + ridge,
predictions survive save/load, unequal lengths, memory maps and a change of sample rate."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.linear_model import Ridge, RidgeClassifierCV, RidgeCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from ssmts import SSMFeatureClassifier, SSMFeatureRegressor
from ssmts.estimators import ExtrapolationWarning
from ssmts.estimators.features import ENVELOPE_WEIGHT, ENVELOPE_WEIGHTS, RIDGE_ALPHAS
from ssmts.nn import scaled_delta

from .test_ridge import refitted_leave_one_out, smoothest_by_hand

SMALL = dict(n_scales=3, n_kernels=8, normalize="channel", device="cpu", random_state=0)


def _waves(n: int, length: int, seed: int = 0):
    """Two classes of noisy sines, slow and fast, with a random phase; the regression target is the frequency."""
    rng = np.random.default_rng(seed)
    freq = np.where(rng.random(n) < 0.5, 0.05, 0.12) * (1 + 0.1 * rng.standard_normal(n))
    t = np.arange(length)
    X = np.sin(2 * np.pi * freq[:, None] * t + rng.uniform(0, 2 * np.pi, (n, 1))) + 0.3 * rng.standard_normal(
        (n, length)
    )
    return X, (freq > 0.085).astype(int), freq


def _training_features(estimator, X):
    """The features the fitted network computes for X (what the ridge was fitted on)."""
    x = torch.tensor(X, dtype=torch.float32)[:, None, :]
    x = (x - float(estimator.input_mean_[0])) / float(estimator.input_scale_[0])
    with torch.no_grad():
        return estimator.model_.features(x).double().numpy()


def _classifier_weights(channels: int = 1, envelope_weight: float = ENVELOPE_WEIGHT) -> np.ndarray:
    """SMALL's classifier features written out, bank by bank (series, difference, then both backward):
    3 scales x 8 kernels x (4 PPVs, mean, maximum) responses at weight 1, and for the two causal banks
    3 scales x channels x 8 modes (d_state 16) x 4 envelope statistics at envelope_weight / sqrt(channels)."""
    responses = np.ones(3 * 8 * 6)
    envelope = np.full(3 * channels * 8 * 4, envelope_weight / np.sqrt(channels))
    return np.concatenate([responses, envelope, responses, envelope, responses, responses])


def test_classifier_readout_is_sklearns_scaler_and_ridge_on_the_features():
    X, y, _ = _waves(40, 60)
    clf = SSMFeatureClassifier(**SMALL).fit(X, y)
    F = _training_features(clf, X)
    assert clf.envelope_weight_ in ENVELOPE_WEIGHTS
    weights = _classifier_weights(envelope_weight=clf.envelope_weight_)
    assert F.shape[1] == len(weights)
    scaler = make_pipeline(StandardScaler(), FunctionTransformer(lambda Z: Z * weights))
    reference = make_pipeline(scaler, RidgeClassifierCV(alphas=RIDGE_ALPHAS)).fit(F, y)
    np.testing.assert_allclose(clf.decision_function(X), reference.decision_function(F), rtol=1e-6, atol=1e-8)
    assert clf.alpha_ == reference[-1].alpha_
    assert (clf.predict(X) == reference.predict(F)).all()


def test_the_envelopes_of_many_channels_share_the_weight_of_one():
    """Three channels: the read-out is sklearn's scaler, each envelope feature times the chosen weight / sqrt(3),
    and ridge, on the features the network computes."""
    rng = np.random.default_rng(5)
    X, y = rng.standard_normal((36, 3, 50)), np.repeat([0, 1, 2], 12)
    X[y == 1, 1] *= 2.0
    clf = SSMFeatureClassifier(**SMALL).fit(X, y)
    x = (torch.tensor(X, dtype=torch.float32) - torch.tensor(clf.input_mean_).float()[:, None]) / torch.tensor(
        clf.input_scale_
    ).float()[:, None]
    with torch.no_grad():
        F = clf.model_.features(x).double().numpy()
    weights = _classifier_weights(channels=3, envelope_weight=clf.envelope_weight_)
    assert F.shape[1] == len(weights)
    scaler = make_pipeline(StandardScaler(), FunctionTransformer(lambda Z: Z * weights))
    reference = make_pipeline(scaler, RidgeClassifierCV(alphas=RIDGE_ALPHAS)).fit(F, y)
    np.testing.assert_allclose(clf.decision_function(X), reference.decision_function(F), rtol=1e-6, atol=1e-6)


def test_the_envelope_weight_of_many_rows_is_chosen_on_some_and_kept_by_the_tall_ridge(monkeypatch):
    """With more training series than ENVELOPE_CHOICE_ROWS the envelopes' weight is chosen on a random subset
    of that many (one GramRidgeCV over the weights), and with more series than features the read-out is then
    scikit-learn's scaler and ridge with the envelopes at that weight."""
    from ssmts.estimators import features

    monkeypatch.setattr(features, "ENVELOPE_CHOICE_ROWS", 60)
    original, choices = features.GramRidgeCV, []

    class Recording(original):
        def fit(self, X, y, classes=None):
            choices.append((len(X), self.block_weights))
            return super().fit(X, y, classes)

    monkeypatch.setattr(features, "GramRidgeCV", Recording)
    X, y, _ = _waves(150, 40, seed=3)
    params = dict(SMALL, n_scales=1, n_kernels=2, d_state=4, n_biases=1, backward=False)
    clf = SSMFeatureClassifier(**params).fit(X, y)
    assert clf.n_features_out_ < len(X)  # the tall ridge's case
    assert choices == [(60, tuple(w / ENVELOPE_WEIGHT for w in ENVELOPE_WEIGHTS))]
    assert clf.envelope_weight_ in ENVELOPE_WEIGHTS
    F = _training_features(clf, X)
    weights = np.where(clf.model_.envelope_columns().numpy(), clf.envelope_weight_, 1.0)
    scaler = make_pipeline(StandardScaler(), FunctionTransformer(lambda Z: Z * weights))
    reference = make_pipeline(scaler, RidgeClassifierCV(alphas=RIDGE_ALPHAS)).fit(F, y)
    np.testing.assert_allclose(clf.decision_function(X), reference.decision_function(F), rtol=1e-6, atol=1e-8)


def test_the_envelope_weight_follows_the_data(tmp_path):
    """Tones told apart by their frequency band alone (random phase, loudness and timing) take the envelopes
    up from ENVELOPE_WEIGHT, and the weight is kept with the model."""
    rng = np.random.default_rng(0)
    n, length = 60, 400
    band = rng.integers(0, 2, n)
    t = np.arange(length)
    freq = np.where(band == 1, 0.21, 0.17)[:, None] * (1 + 0.01 * rng.standard_normal((n, 1)))
    onset = rng.integers(0, length // 2, (n, 1))
    burst = np.exp(-0.5 * ((t - onset - 60) / 30.0) ** 2)
    X = rng.uniform(0.2, 5.0, (n, 1)) * burst * np.sin(2 * np.pi * freq * t + rng.uniform(0, 6.3, (n, 1)))
    X += 0.05 * rng.standard_normal(X.shape)
    clf = SSMFeatureClassifier(**dict(SMALL, n_scales=4)).fit(X, band)
    assert clf.envelope_weight_ > ENVELOPE_WEIGHT
    assert SSMFeatureClassifier.load(clf.save(tmp_path / "tones.safetensors")).envelope_weight_ == clf.envelope_weight_


def test_regressor_penalty_reaches_past_minirockets_grid_when_the_targets_are_noise():
    # With hundreds of features and 40 series, the penalty for targets unrelated to the series lies a decade
    # or more beyond MiniRocket's grid (1e3), where the predictions shrink to the training mean.
    strongly_shrunk = 0
    for seed in range(3):
        rng = np.random.default_rng(seed)
        X, y, X_new = rng.standard_normal((40, 60)), rng.standard_normal(40), rng.standard_normal((40, 60))
        reg = SSMFeatureRegressor(**dict(SMALL, random_state=seed)).fit(X, y)
        if reg.alpha_ >= 1e4:
            strongly_shrunk += 1
            assert np.std(reg.predict(X_new)) < 0.1 * np.std(y)
    assert strongly_shrunk >= 1


@pytest.mark.parametrize("noise", [0.0, 0.5])
def test_regressor_readout_is_a_ridge_on_the_scaled_features_at_the_smoothest_penalty_within_the_rule(noise):
    """Each target's penalty from its own leave-one-out by refitting, then the rule (the largest within a
    quarter of a standard error of the lowest error); predictions those of sklearn's scaler + ridge at those
    penalties."""
    X, _, freq = _waves(40, 60, seed=1)
    Y = np.stack([freq, -2.0 * freq + 1.0], 1) + noise * np.random.default_rng(1).standard_normal((40, 2)) * freq.std()
    reg = SSMFeatureRegressor(**SMALL).fit(X, Y)
    F = _training_features(reg, X)
    scaled = StandardScaler().fit_transform(F)
    expected = [smoothest_by_hand(refitted_leave_one_out(scaled, y, RIDGE_ALPHAS), RIDGE_ALPHAS, 0.25) for y in Y.T]
    np.testing.assert_array_equal(reg.alpha_, expected)
    assert (expected > RidgeCV(alphas=RIDGE_ALPHAS, alpha_per_target=True).fit(scaled, Y).alpha_).all()  # the rule
    reference = make_pipeline(StandardScaler(), Ridge(alpha=np.array(expected))).fit(F, Y)
    np.testing.assert_allclose(reg.predict(X), reference.predict(F), rtol=1e-6, atol=1e-9)
    assert reg.predict(X).shape == (40, 2)
    assert SSMFeatureRegressor(**SMALL).fit(X, freq).predict(X[:3]).shape == (3,)


@pytest.mark.parametrize("scales", [(1e150, 1e-3), (1e-200, -3.0), (1e200, 1e200)])
def test_regressor_predictions_scale_and_shift_with_the_targets(scales):
    """Targets a * y + b give predictions a * predict(y) + b, column by column, without a numerical warning: the
    penalty is chosen on the targets standardized (squared errors of targets near 1e155 overflowed, and those of
    1e-200 underflowed, each choosing another penalty: other predictions, silently for the small ones)."""
    X, _, freq = _waves(40, 60, seed=2)
    Y = np.stack([freq, np.sin(40 * freq)], 1)
    reference = SSMFeatureRegressor(**SMALL).fit(X[:30], Y[:30])
    a = np.array(scales)
    b = a * np.array([10.0, -5.0])  # shifts of many spreads, in the units of each column
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaled = SSMFeatureRegressor(**SMALL).fit(X[:30], a * Y[:30] + b)
        predicted = (scaled.predict(X[30:]) - b) / a
    np.testing.assert_array_equal(scaled.alpha_, reference.alpha_)
    np.testing.assert_allclose(predicted, reference.predict(X[30:]), rtol=1e-6, atol=1e-9)
    one = SSMFeatureRegressor(**SMALL).fit(X[:30], freq[:30])  # 1-d targets
    one_scaled = SSMFeatureRegressor(**SMALL).fit(X[:30], a[0] * freq[:30])
    np.testing.assert_allclose(one_scaled.predict(X[30:]) / a[0], one.predict(X[30:]), rtol=1e-6, atol=1e-9)


def test_standardized_targets_give_back_the_targets():
    """targets = offset + spread * z, z of mean 0 and standard deviation 1 per column (a constant column: z = 0)."""
    from ssmts.estimators.features import _standardized_targets

    rng = np.random.default_rng(0)
    huge, tiny = rng.standard_normal(20) * 1e200, rng.standard_normal(20) * 1e-200 + 3e-200
    targets = np.stack([huge, tiny, np.full(20, -7.0)], 1)
    z, offset, spread = _standardized_targets(targets)
    np.testing.assert_allclose(offset + spread * z, targets, rtol=1e-12)
    np.testing.assert_allclose(z[:, :2].mean(0), 0.0, atol=1e-12)
    np.testing.assert_allclose(z[:, :2].std(0), 1.0, rtol=1e-12)
    assert np.all(z[:, 2] == 0) and offset[2] == -7.0
    units = np.array([1e200, 1e-200])  # np.std of the targets themselves over- and underflows
    np.testing.assert_allclose(spread[:2], (targets[:, :2] / units).std(0) * units, rtol=1e-12)
    flat, one_offset, one_spread = _standardized_targets(targets[:, 0])
    assert flat.shape == (20,) and one_offset.shape == one_spread.shape == (1,)


def test_a_regressor_fitted_on_one_sample_is_refused_by_name():
    """Leave-one-out of one sample is undefined (scikit-learn's divides 0 by 0 for every penalty)."""
    X, _, freq = _waves(3, 40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # refused before any numerical warning
        with pytest.raises(ValueError, match="needs at least 2 samples; got 1 sample"):
            SSMFeatureRegressor(**SMALL).fit(X[:1], freq[:1])
    assert SSMFeatureRegressor(**SMALL).fit(X[:2], freq[:2]).predict(X).shape == (3,)


@pytest.mark.parametrize("nuisance_level", [True, False])
def test_auto_normalization_keeps_the_scaling_with_the_better_leave_one_out_score(nuisance_level):
    """Target = frequency under random gains and offsets (levels are nuisance: "series" should win), or
    target = the level itself (z-normalizing would delete it: "channel" should win). "auto" fits both and
    keeps the ridge with the higher leave-one-out score: the same scores and the same predictions as the
    two fits made separately."""
    X, _, freq = _waves(60, 50, seed=2)
    rng = np.random.default_rng(3)
    level = rng.uniform(-50, 50, (60, 1))
    X = X * rng.uniform(0.1, 30.0, (60, 1)) + level
    y = freq if nuisance_level else level[:, 0]
    options = dict(SMALL, normalize="auto")
    auto = SSMFeatureRegressor(**options).fit(X, y)
    alone = {name: SSMFeatureRegressor(**dict(options, normalize=name)).fit(X, y) for name in ("channel", "series")}
    assert auto.normalize_scores_ == {name: alone[name].normalize_scores_[name] for name in alone}
    expected = "series" if nuisance_level else "channel"
    assert auto.normalization_ == expected == max(auto.normalize_scores_, key=auto.normalize_scores_.get)
    np.testing.assert_array_equal(auto.predict(X[:7]), alone[expected].predict(X[:7]))


def test_gunpoint_accuracy_beats_one_nearest_neighbour():
    """GunPoint (UCR, official split, shipped with sktime): 1-NN ED scores 0.913; the features score >= 0.95."""
    from sktime.datasets import load_UCR_UEA_dataset

    X, y = load_UCR_UEA_dataset("GunPoint", split="train", return_type="numpy3D")
    X_test, y_test = load_UCR_UEA_dataset("GunPoint", split="test", return_type="numpy3D")
    clf = SSMFeatureClassifier(random_state=0, device="cpu").fit(X, y)
    assert clf.score(X_test, y_test) >= 0.95
    # (series, difference) x (forward, backward) x scales x kernels x (4 PPV + mean + max), and the envelopes
    # of the causal banks: (series, difference) x scales x channel x 8 modes x (RMS, max, mean log, modulation)
    assert clf.n_features_out_ == 2 * 2 * 10 * 42 * 6 + 2 * 10 * 1 * 8 * 4


def test_save_load_reproducibility_and_unequal_lengths(tmp_path):
    X, y, _ = _waves(30, 50)
    series = [x[: 30 + (i % 4) * 5] for i, x in enumerate(X)]  # lengths 30..45
    clf = SSMFeatureClassifier(**SMALL).fit(series, y)
    again = SSMFeatureClassifier(**SMALL).fit(series, y)
    np.testing.assert_array_equal(clf.decision_function(series), again.decision_function(series))
    # A series in a padded batch of others scores as it does alone.
    alone = np.array([clf.decision_function([s])[0] for s in series[:6]])
    np.testing.assert_allclose(clf.decision_function(series[:6]), alone, rtol=1e-6, atol=1e-9)
    path = clf.save(tmp_path / "features.safetensors")
    loaded = SSMFeatureClassifier.load(path)
    np.testing.assert_array_equal(loaded.decision_function(series), clf.decision_function(series))
    assert loaded.classes_.tolist() == clf.classes_.tolist() and loaded.alpha_ == clf.alpha_
    backward = SSMFeatureClassifier(**dict(SMALL, backward=True)).fit(series, y)
    loaded = SSMFeatureClassifier.load(backward.save(tmp_path / "backward.safetensors"))
    assert loaded.model_.series_backward is not None
    np.testing.assert_array_equal(loaded.decision_function(series), backward.decision_function(series))


def test_memory_mapped_training_data_gives_the_same_model(tmp_path):
    X, y, _ = _waves(24, 40)
    path = tmp_path / "X.npy"
    np.save(path, X.astype(np.float32))
    mapped = np.load(path, mmap_mode="r")
    in_memory = SSMFeatureClassifier(**SMALL).fit(X.astype(np.float32), y)
    from_map = SSMFeatureClassifier(**SMALL).fit(mapped, y)
    np.testing.assert_allclose(from_map.decision_function(X), in_memory.decision_function(X), rtol=1e-5, atol=1e-7)


def test_zero_shot_sample_rate_reads_data_sampled_twice_as_densely():
    """Fitted at 20 Hz, the classifier labels the same signals sampled at 40 Hz through sample_rate=40
    (every Delta halved) as it labels them at 20 Hz."""
    rng = np.random.default_rng(0)
    n = 40
    freq = np.where(rng.random(n) < 0.5, 0.4, 1.1)
    phase = rng.uniform(0, 2 * np.pi, n)
    signals = lambda rate: np.sin(2 * np.pi * freq[:, None] * np.arange(10 * rate)[None] / rate + phase[:, None])  # noqa
    y = (freq > 0.7).astype(int)
    clf = SSMFeatureClassifier(sample_rate=20, **SMALL).fit(signals(20), y)
    at_train_rate = clf.predict(signals(20))
    assert (at_train_rate == y).mean() == 1.0
    assert (clf.predict(signals(40), sample_rate=40) == at_train_rate).mean() >= 0.95
    with pytest.raises(ValueError, match="fitted without sample_rate"):
        SSMFeatureClassifier(**SMALL).fit(signals(20), y).predict(signals(40), sample_rate=40)


def _features_at(estimator, X, factor: float = 1.0):
    """The features the fitted network computes for X (n, L) read with every Delta times `factor`."""
    with scaled_delta(estimator.model_, factor):
        return _training_features(estimator, X)


def test_readout_fitted_with_a_rate_reads_the_training_series_at_half_that_rate_too():
    """With sample_rate, the ridge is scikit-learn's scaler + ridge on the training series' features at
    that rate and, below them, at half of it (x[::2], then x[1::2], read with Delta doubled), which
    predict computes for those series at half the rate."""
    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((30, 64)), rng.integers(0, 3, 30)
    clf = SSMFeatureClassifier(sample_rate=100, **SMALL).fit(X, y)
    assert clf.readout_rates_ == (100.0, 50.0)
    F = np.concatenate(
        [_training_features(clf, X), _features_at(clf, X[:, ::2], 2.0), _features_at(clf, X[:, 1::2], 2.0)]
    )
    weights = _classifier_weights()
    scaler = make_pipeline(StandardScaler(), FunctionTransformer(lambda Z: Z * weights))
    reference = make_pipeline(scaler, RidgeClassifierCV(alphas=RIDGE_ALPHAS)).fit(F, np.tile(y, 3))
    assert clf.alpha_ == reference[-1].alpha_
    for rows, (x, rate) in enumerate([(X, 100), (X[:, ::2], 50), (X[:, 1::2], 50)]):
        expected = reference.decision_function(F[30 * rows : 30 * (rows + 1)])
        # float32 features: decisions of order 1 agree to a few float32 epsilons
        np.testing.assert_allclose(clf.decision_function(x, sample_rate=rate), expected, rtol=1e-6, atol=1e-6)
    assert SSMFeatureClassifier(**SMALL).fit(X, y).readout_rates_ == ()  # no rate: the training series only
    assert SSMFeatureClassifier(sample_rate=100, **SMALL).fit(X[:, :3], y).readout_rates_ == (100.0,)  # too short


def test_data_below_every_rate_of_the_readout_warns(tmp_path):
    """At half the training rate the read-out has seen the features; below it, predict says how many modes
    answer quasi-statically and that the read-out never saw the rate (also after save and load)."""
    X, y, _ = _waves(20, 64)
    clf = SSMFeatureClassifier(sample_rate=100, **SMALL).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExtrapolationWarning)
        clf.predict(X[:, ::2], sample_rate=50)
    loaded = SSMFeatureClassifier.load(clf.save(tmp_path / "rates.safetensors"))
    assert loaded.readout_rates_ == (100.0, 50.0)
    for model in (clf, loaded):
        with pytest.warns(
            ExtrapolationWarning,
            match=r"sample_rate=25 lies below 50, .* training rate 100 and half of it\): \d+ of the 96 modes",
        ):
            model.predict(X[:, ::4], sample_rate=25)


def test_bad_input_is_named():
    X, y, _ = _waves(10, 20)
    with pytest.raises(ValueError, match="shorter than 2; n_features = 1 as a 2D X.*at least 2 time points"):
        SSMFeatureClassifier(**SMALL).fit(X[:, :1], y)
    SSMFeatureClassifier(**SMALL, difference=False).fit(X[:, :1], y)  # one step is fine without differences
    with pytest.raises(ValueError, match="at least 2 classes"):
        SSMFeatureClassifier(**SMALL).fit(X, np.zeros(10))
    with pytest.raises(ValueError, match="n_kernels"):
        SSMFeatureClassifier(n_kernels=0).fit(X, y)
    fitted = SSMFeatureClassifier(**SMALL).fit(X, y)
    with pytest.raises(ValueError, match="2 channels, but SSMFeatureClassifier was fitted with 1"):
        fitted.predict(np.zeros((2, 2, 20)))
    with pytest.raises(ValueError, match="NaN"):
        fitted.predict(np.full((2, 20), np.nan))
    # A series too short for its first difference, among others: named by its place, not as divergence.
    with pytest.raises(ValueError, match=r"series 1 of X has 1 time point\(s\) \(1 series shorter than 2\): this"):
        fitted.predict([X[0], X[1, :1], X[2, :3]])  # a list: no word of n_features, which is 2-D X's
    with pytest.raises(ValueError, match="d_state=5 must be even"):  # it built 3 modes, not the 2.5 stated
        SSMFeatureClassifier(**SMALL, d_state=5).fit(X, y)
    SSMFeatureClassifier(**SMALL, difference=False).fit(X, y).predict([X[0], X[1, :1]])
    # Text targets for a regressor: named as y, with the way out.
    with pytest.raises(ValueError, match="y must hold numbers.*'a'.*classifier"):
        SSMFeatureRegressor(**SMALL).fit(X, np.array(["a", "b"] * 5))


def test_the_ridge_keeps_blas_to_torchs_thread_cap(monkeypatch):
    """The read-out's ridge runs BLAS on at most torch's threads (the estimators' one thread setting):
    BLAS threads beyond the idle cores of a busy machine wait for each other. Both ridges: GramRidgeCV
    (fewer rows than features) and TallRidgeCV (more)."""
    from threadpoolctl import threadpool_info

    from ssmts.estimators import features

    seen = []

    class Recording:
        def __init__(self, *args, **kwargs):
            pass

        def fit(self, X, y, classes=None):
            seen.append(max(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"))
            self.coef_, self.intercept_, self.block_weight_ = np.zeros(X.shape[1]), 0.0, 1.0
            return self

    monkeypatch.setattr(features, "GramRidgeCV", Recording)
    monkeypatch.setattr(features, "TallRidgeCV", Recording)
    threads = torch.get_num_threads()
    rng = np.random.default_rng(0)
    try:
        torch.set_num_threads(1)
        for shape in [(3, 5), (5, 3)]:
            X, y = rng.standard_normal(shape), np.arange(shape[0], dtype=float)
            features._fit_ridge("regression", X, y, np.ones(shape[1]))
    finally:
        torch.set_num_threads(threads)
    assert seen == [1, 1]


def test_regressor_gives_each_target_its_own_penalty(tmp_path):
    """A target the features predict, fitted beside one they cannot (noise 100 x its spread), is predicted as
    it is fitted alone: one shared penalty, chosen on the summed errors, went to the noise's and shrank the
    signal towards its mean (Tecator's relative RMSE 0.052 alone, 0.195 beside such a target)."""
    X, _, freq = _waves(40, 60, seed=3)
    noise = 100.0 * freq.std() * np.random.default_rng(3).standard_normal(len(freq))
    alone = SSMFeatureRegressor(**SMALL).fit(X, freq)
    both = SSMFeatureRegressor(**SMALL).fit(X, np.stack([freq, noise], 1))
    assert isinstance(alone.alpha_, float) and both.alpha_.shape == (2,)
    assert both.alpha_[0] == alone.alpha_ < both.alpha_[1]
    np.testing.assert_allclose(both.predict(X)[:, 0], alone.predict(X), rtol=1e-6, atol=1e-9 * freq.std())
    loaded = SSMFeatureRegressor.load(both.save(tmp_path / "two.safetensors"))
    np.testing.assert_array_equal(loaded.alpha_, both.alpha_)
    np.testing.assert_array_equal(loaded.predict(X), both.predict(X))


# ---------------------------------------------------------------- SSMFeatureTransformer
def test_transformer_gives_the_classifiers_features_and_its_ridge_is_the_classifiers():
    """transform(X) is the classifier's bank's features of X (same parameters and seed), and a ridge on them,
    scaled and weighted as the classifier's read-out, gives the classifier's decision values."""
    from ssmts import SSMFeatureTransformer

    X, y, _ = _waves(40, 60, seed=4)
    params = dict(SMALL, envelope=False)  # no envelope weight to choose: the ridge is RidgeClassifierCV's
    transformer = SSMFeatureTransformer(**params).fit(X)
    clf = SSMFeatureClassifier(**params).fit(X, y)
    F = transformer.transform(X)
    assert F.shape == (40, clf.n_features_out_) == (40, transformer.n_features_out_) and F.dtype == np.float64
    data = clf._prepare_predict_input(X, 1.0)
    with torch.no_grad():
        np.testing.assert_array_equal(F, clf.model_.features(clf._scaled(data), data.mask).double().numpy())
    reference = make_pipeline(StandardScaler(), RidgeClassifierCV(alphas=RIDGE_ALPHAS)).fit(F, y)
    # the ridge all but interpolates 40 series (decision values near +-1): float32 features' rounding shows at 1e-6
    np.testing.assert_allclose(clf.decision_function(X), reference.decision_function(F), atol=1e-5)
    assert SSMFeatureTransformer().get_params()["backward"] is SSMFeatureClassifier().get_params()["backward"] is True


def test_transformer_in_a_pipeline_with_names_saved_and_loaded(tmp_path):
    from sklearn.linear_model import LogisticRegression

    from ssmts import SSMFeatureTransformer

    X, y, _ = _waves(60, 50, seed=5)
    pipe = make_pipeline(SSMFeatureTransformer(**SMALL), StandardScaler(), LogisticRegression(max_iter=2000))
    assert pipe.fit(X[:40], y[:40]).score(X[40:], y[40:]) >= 0.9
    transformer = pipe[0]
    names = transformer.get_feature_names_out()
    assert len(names) == transformer.n_features_out_ and names[0] == "ssmfeaturetransformer0"
    frame = SSMFeatureTransformer(**SMALL).set_output(transform="pandas").fit(X).transform(X[:3])
    assert list(frame.columns) == list(names) and frame.shape == (3, len(names))
    loaded = SSMFeatureTransformer.load(transformer.save(tmp_path / "features.safetensors"))
    np.testing.assert_array_equal(loaded.transform(X), transformer.transform(X))


def test_transformer_refuses_what_needs_a_readout():
    """It takes the bank's parameters, not the read-out's training ones, and refuses normalize='auto'
    (which compares read-outs) by name."""
    from ssmts import SSMFeatureTransformer

    with pytest.raises(ValueError, match="normalize='auto' chooses a scaling by the ridge's leave-one-out score"):
        SSMFeatureTransformer(**{**SMALL, "normalize": "auto"}).fit(_waves(10, 30)[0])
    for training in ("training_steps", "lr", "validation_fraction", "n_iter_no_change"):
        assert training not in SSMFeatureTransformer().get_params()
        with pytest.raises(TypeError, match="unexpected parameter"):
            SSMFeatureTransformer(**{training: 1})


def test_transformer_reads_another_rate_with_delta_rescaled_and_warns_below_its_rate():
    """A band-limited series read at twice the rate (2-D X twice as long) gives nearly the features of the
    training rate; below the training rate the transformer warns, naming the modes above Nyquist."""
    from ssmts import SSMFeatureTransformer

    n, length = 20, 100
    rng = np.random.default_rng(6)
    freq, phase = rng.uniform(0.01, 0.05, (n, 1)), rng.uniform(0, 6.3, (n, 1))
    at = lambda steps, rate: np.sin(2 * np.pi * freq * np.arange(steps) / rate * 100 + phase)  # noqa: E731
    transformer = SSMFeatureTransformer(**SMALL, envelope=False, sample_rate=100).fit(at(length, 100))
    base, fine = transformer.transform(at(length, 100)), transformer.transform(at(2 * length, 200), sample_rate=200)
    moments = ~np.isin(np.arange(base.shape[1]) % (4 + 2), range(4))  # the means and maxima, not the PPV counts
    assert np.abs(fine - base)[:, moments].max() < 0.1 * np.abs(base[:, moments]).max()
    with pytest.warns(ExtrapolationWarning, match="lies below 100.*modes of its SSMs lie above the Nyquist"):
        transformer.transform(at(length // 2, 50), sample_rate=50)
