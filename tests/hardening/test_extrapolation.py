"""Predictions on values far outside the training range warn (ExtrapolationWarning) instead of
coming back without a word; per-series scaling, which removes levels and spreads, never warns."""

import warnings

import numpy as np
import pytest

from ssmts import SSMClassifier, SSMFeatureClassifier, SSMFeatureRegressor
from ssmts.estimators import ExtrapolationWarning

RNG = np.random.default_rng(0)
X = RNG.standard_normal((30, 20))
Y = X.mean(1)
FEATURES = dict(n_scales=3, n_kernels=8, device="cpu", random_state=0)
TINY = dict(d_model=4, d_state=4, n_layers=1, max_epochs=1, min_steps=0, device="cpu", random_state=0)


def _expected_range(series) -> np.ndarray:
    """(2, 1): the smallest and largest training value, by numpy from the data (in float64, as fit
    reads X), not from what the model stored."""
    values = np.concatenate([np.asarray(s, dtype=np.float64).ravel() for s in series])
    return np.array([[values.min()], [values.max()]], dtype=np.float64)


def _warned(estimator, X):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimator.predict(X)
    return [w for w in caught if issubclass(w.category, ExtrapolationWarning)]


@pytest.mark.parametrize(
    "make",
    [lambda: SSMFeatureRegressor(**FEATURES, normalize="channel"), lambda: SSMClassifier(**TINY)],
    ids=["features", "network"],
)
def test_far_outside_the_training_values_warns_and_inside_does_not(make, tmp_path):
    estimator = make().fit(X, Y if isinstance(make(), SSMFeatureRegressor) else (Y > 0).astype(int))
    low, high = _expected_range(X)[:, 0]
    np.testing.assert_array_equal(estimator.input_range_, [[low], [high]])
    assert not _warned(estimator, X) and not _warned(estimator, X[:5] * 2.0)  # within 2 spans: no warning
    # Just beyond 2 spans above the training values warns, just within does not: the bound is the data's.
    # (the feature estimators' read-out check may warn there too: only the channel check is counted)
    channel = lambda X: [w for w in _warned(estimator, X) if "times the training range" in str(w.message)]  # noqa: E731
    assert not channel(np.full((2, 20), high + 1.99 * (high - low)))
    (warning,) = channel(np.full((2, 20), high + 2.01 * (high - low)))
    assert f"training values {low:.4g} to {high:.4g}" in str(warning.message), str(warning.message)
    (warning,) = _warned(estimator, X * 100.0)
    assert "times the training range beyond it (channel 0" in str(warning.message)
    assert warning.filename == __file__  # the line that called predict
    loaded = type(estimator).load(estimator.save(tmp_path / "m.safetensors"))
    assert len(_warned(loaded, X * 100.0)) == 1  # the range is saved with the model


def test_per_series_scaling_never_warns():
    regressor = SSMFeatureRegressor(**FEATURES, normalize="series").fit(X, Y)
    assert not _warned(regressor, X * 1e4 + 1e5)


def test_padding_of_unequal_series_is_not_part_of_the_range():
    """Series around 50 of different lengths: the zeros padding them in a batch are not values."""
    ragged = [50.0 + RNG.standard_normal(n) for n in (12, 20, 16) * 6]
    regressor = SSMFeatureRegressor(**FEATURES, normalize="channel").fit(ragged, np.arange(18.0))
    np.testing.assert_array_equal(regressor.input_range_, _expected_range(ragged))
    assert not _warned(regressor, ragged)
    assert _warned(regressor, [series - 50.0 for series in ragged])  # around 0: far below the training values


@pytest.mark.parametrize(
    "make",
    [lambda: SSMFeatureRegressor(**FEATURES, normalize="channel"), lambda: SSMClassifier(**TINY)],
    ids=["features", "network"],
)
def test_memory_mapped_x_is_checked_as_the_same_array_in_memory(make, tmp_path):
    """A memmap is fitted and predicted batch by batch; its range is read in chunks, so the check holds."""
    y = Y if isinstance(make(), SSMFeatureRegressor) else (Y > 0).astype(int)
    np.save(tmp_path / "train.npy", X[:, None, :])
    np.save(tmp_path / "far.npy", X[:, None, :] * 100.0)
    train, far = (np.load(tmp_path / f"{name}.npy", mmap_mode="r") for name in ("train", "far"))
    estimator = make().fit(train, y)
    np.testing.assert_array_equal(estimator.input_range_, _expected_range(X))
    assert not _warned(estimator, train)
    (warning,) = _warned(estimator, far)
    assert "times the training range beyond it (channel 0" in str(warning.message)


# ---------------------------------------------------------------- the feature estimators' read-out
# Shifts well within the channel check's 2 spans still move a linear read-out of pooled responses
# (means, maxima) far: the feature estimators check the features themselves.
LEVELS = RNG.uniform(-1.0, 1.0, 40)
SHIFTED = RNG.standard_normal((40, 30)) * 0.2 + LEVELS[:, None]  # series around their own level


def _feature_warnings(estimator, X):
    return [w for w in _warned(estimator, X) if "rest on features beyond the range" in str(w.message)]


@pytest.mark.parametrize("kind", ["regressor", "classifier"])
def test_a_shift_within_the_channel_bound_warns_when_the_read_out_extrapolates(kind, tmp_path):
    if kind == "regressor":
        estimator = SSMFeatureRegressor(**FEATURES, normalize="channel").fit(SHIFTED, LEVELS)
    else:
        estimator = SSMFeatureClassifier(**FEATURES).fit(SHIFTED, (LEVELS > 0).astype(int))
    assert not _warned(estimator, SHIFTED)  # the training series themselves
    span = SHIFTED.max() - SHIFTED.min()
    moved = SHIFTED + span  # one training range: the channel check (2 ranges) stays quiet
    (warning,) = _warned(estimator, moved)
    assert "rest on features beyond the range of the training series" in str(warning.message)
    assert warning.filename == __file__
    loaded = type(estimator).load(estimator.save(tmp_path / "m.safetensors"))
    assert len(_feature_warnings(loaded, moved)) == 1  # the range is saved with the model


def test_per_series_scaling_removes_the_shift_so_the_features_do_not_warn():
    regressor = SSMFeatureRegressor(**FEATURES, normalize="series").fit(SHIFTED, LEVELS)
    assert not _warned(regressor, SHIFTED + 0.5 * (SHIFTED.max() - SHIFTED.min()))


def test_forward_with_extrapolation_against_clipping_by_hand():
    """The last column is max_k |f.w_k - clip(f).w_k| / spread_k (float64, numpy as the oracle)."""
    import torch

    regressor = SSMFeatureRegressor(**FEATURES, normalize="channel").fit(SHIFTED, np.stack([LEVELS, -LEVELS], 1))
    network = regressor.model_
    u = torch.from_numpy(SHIFTED[:6, None, :] * 1.5 + 0.3).float()
    out = network.forward_with_extrapolation(u).detach().double().numpy()
    features = network.features(u).double().numpy()
    # The training range from the training series (standardized by their mean and standard deviation,
    # as normalize="channel" does), not from the bounds the network stored.
    mean, std = SHIFTED.mean(), SHIFTED.std()
    np.testing.assert_allclose([regressor.input_mean_[0], regressor.input_scale_[0]], [mean, std], rtol=1e-6)
    scaled = (SHIFTED[:, None, :] - mean) / std
    training_features = network.features(torch.from_numpy(scaled).float()).double().numpy()
    low, high = training_features.min(0), training_features.max(0)
    np.testing.assert_allclose(network.feature_low.double().numpy(), low, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(network.feature_high.double().numpy(), high, rtol=1e-5, atol=1e-6)
    weight, bias = network.readout.weight.detach().numpy(), network.readout.bias.detach().numpy()
    outputs, clipped = features @ weight.T + bias, np.clip(features, low, high) @ weight.T + bias
    spread = (training_features @ weight.T + bias).std(0)
    np.testing.assert_allclose(out[:, :2], outputs, rtol=1e-12)
    np.testing.assert_allclose(out[:, 2], (np.abs(outputs - clipped) / spread).max(1), rtol=1e-5, atol=1e-8)
    assert out[:, 2].max() > 0


def test_a_model_saved_before_the_training_range_loads_and_does_not_check():
    import torch

    regressor = SSMFeatureRegressor(**FEATURES, normalize="channel").fit(SHIFTED, LEVELS)
    state = {k: v for k, v in regressor.model_.state_dict().items() if not k.startswith(("feature_", "output_"))}
    network = regressor._rebuild_network()
    network.load_state_dict(state, strict=True)  # the keys older files lack are not required
    assert torch.isinf(network.feature_low).all() and torch.isinf(network.feature_high).all()
    u = torch.from_numpy(SHIFTED[:, None, :] + 10.0).float()
    assert (network.forward_with_extrapolation(u)[:, -1] == 0).all()


def test_a_channel_constant_in_training_is_measured_in_its_scale():
    """A channel that was 5.0 throughout training has no range: 5.0001 read as 1e8 training ranges beyond
    it ('training values 5 to 5'), warning that predictions moved by 3e-4 were not to be trusted. Such a
    channel is measured in its scale (what the network's input moves by): a tiny shift does not warn, a
    far one still does."""
    X2 = np.stack([X, np.full_like(X, 5.0)], axis=1)
    clf = SSMFeatureClassifier(**FEATURES).fit(X2, (Y > 0).astype(int))
    shifted = X2.copy()
    shifted[:, 1] = 5.0001
    assert not _warned(clf, shifted)
    shifted[:, 1] = 5.0 + 10.0 * clf.input_scale_[1]
    (warning,) = _warned(clf, shifted)
    assert "channel 1" in str(warning.message)
