"""Predictions on values far outside the training range warn (ExtrapolationWarning) instead of
coming back without a word; per-series scaling, which removes levels and spreads, never warns."""

import warnings

import numpy as np
import pytest

from ssmts import SSMClassifier, SSMFeatureRegressor
from ssmts.estimators import ExtrapolationWarning

RNG = np.random.default_rng(0)
X = RNG.standard_normal((30, 20))
Y = X.mean(1)
FEATURES = dict(n_scales=3, n_kernels=8, device="cpu", random_state=0)
TINY = dict(d_model=4, d_state=4, n_layers=1, max_epochs=1, min_steps=0, device="cpu", random_state=0)


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
    assert not _warned(estimator, X) and not _warned(estimator, X[:5] * 2.0)  # within 2 spans: no warning
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
    np.testing.assert_array_equal(estimator.input_range_, make().fit(X[:, None, :], y).input_range_)
    assert not _warned(estimator, train)
    (warning,) = _warned(estimator, far)
    assert "times the training range beyond it (channel 0" in str(warning.message)
