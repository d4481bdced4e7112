"""How X reaches the network: levels far above the variations are scaled (not floored), float32 X is not
copied, the standardization runs in row chunks without changing a digit, and arrays numpy hands out in
unusual layouts (negative strides, read-only) are taken as they are."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from ssmts import SSMClassifier, SSMRegressor
from ssmts.estimators import _base
from ssmts.estimators._input import prepare_input

TINY = dict(d_model=8, d_state=4, n_layers=1, max_epochs=4, min_steps=0, device="cpu", random_state=0)


def _waves(n=48, L=40, seed=0):
    """Three classes of noisy sines (1, 2 and 3 cycles a series)."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    t = np.linspace(0.0, 1.0, L)
    X = np.stack([np.sin(2 * np.pi * (1 + k) * t) + 0.3 * rng.standard_normal(L) for k in y])
    return X, y


@pytest.mark.parametrize("normalize", ["channel", "series"])
def test_a_level_far_above_the_variations_is_scaled_like_the_variations_alone(normalize):
    """Pressures of 1e5 varying by 0.01 (a spread of 1e-7 of the level) are data, not rounding: the network
    sees the same standardized input as for the variations alone, and predicts the same probabilities.
    (A floor of 1e-6 of the level once left them unscaled: inputs of spread 0.008, accuracy at chance.)"""
    X, y = _waves()
    shifted = 1e5 + 0.01 * X
    plain = SSMClassifier(**TINY, normalize=normalize).fit(X, y)
    level = SSMClassifier(**TINY, normalize=normalize).fit(shifted, y)
    scaled = level._scaled(prepare_input(shifted))
    np.testing.assert_allclose(scaled.numpy(), plain._scaled(prepare_input(X)).numpy(), atol=1e-6)
    assert float(scaled.std()) == pytest.approx(1.0, abs=0.05)
    np.testing.assert_allclose(level.predict_proba(shifted), plain.predict_proba(X), atol=1e-4)


def test_regression_targets_at_a_large_level_are_scaled_by_their_spread():
    """Targets 1e6 + 0.001 y: the fitted target scale is 0.001 times y's, and the predictions are
    1e6 + 0.001 times those for y (an unscaled target, trained on spreads of 1e-3, gave R^2 of -25)."""
    X, labels = _waves(seed=1)
    y = labels + 0.1 * np.random.default_rng(2).standard_normal(len(labels))
    plain = SSMRegressor(**TINY).fit(X, y)
    level = SSMRegressor(**TINY).fit(X, 1e6 + 1e-3 * y)
    # float64 holds 1e6 + 1e-3 y to about 1e-7 of y's spread
    np.testing.assert_allclose(level.target_scale_, 1e-3 * plain.target_scale_, rtol=1e-6)
    np.testing.assert_allclose(level.predict(X) - 1e6, 1e-3 * plain.predict(X), atol=1e-3 * 1e-4 * np.ptp(y))


def test_float32_x_is_read_in_place_and_gives_the_digits_of_its_float64_copy():
    """No float64 copy of float32 X (the tensor is a view of the caller's array), and fitting on it is
    fitting on the same values in float64: the statistics and standardization are formed in float64
    either way, so the probabilities agree bit for bit."""
    X, y = _waves()
    X32 = X.astype(np.float32)
    data = prepare_input(X32)
    assert data.x.data_ptr() == X32.ctypes.data and str(data.x.dtype) == "torch.float32"
    p32 = SSMClassifier(**TINY).fit(X32, y).predict_proba(X32)
    p64 = SSMClassifier(**TINY).fit(X32.astype(np.float64), y).predict_proba(X32.astype(np.float64))
    np.testing.assert_array_equal(p32, p64)


@pytest.mark.parametrize("normalize", ["channel", "series", "series+stats"])
@pytest.mark.parametrize("ragged", [False, True], ids=["equal", "unequal-lengths"])
def test_standardizing_in_row_chunks_changes_no_digit(monkeypatch, normalize, ragged):
    """One row a chunk (the least) against the whole X in one chunk: the same float32 input, bit for bit,
    padded steps of unequal-length series zero either way."""
    X, y = _waves(n=12)
    rng = np.random.default_rng(3)
    data_X = [row[: int(length)] for row, length in zip(X, rng.integers(20, 41, len(X)))] if ragged else X
    model = SSMClassifier(**TINY, normalize=normalize).fit(data_X, y)
    data = prepare_input(data_X)
    whole = model._scaled(data)
    monkeypatch.setattr(_base, "STANDARDIZE_CHUNK_VALUES", 1)
    np.testing.assert_array_equal(model._scaled(data).numpy(), whole.numpy())
    if ragged:
        assert (whole.numpy()[~data.mask.numpy()[:, None, :].repeat(whole.shape[1], 1)] == 0).all()


def test_reversed_and_read_only_arrays_are_taken_as_they_are():
    """X[:, ::-1] (negative strides: scipy's decimate returns such arrays) fits and predicts as its
    contiguous copy does, and a read-only array (pandas' values under copy-on-write) raises no warning
    about writability: X is only read."""
    X, y = _waves()
    reversed_view = X[:, ::-1]
    model = SSMClassifier(**TINY).fit(reversed_view, y)
    copy = SSMClassifier(**TINY).fit(np.ascontiguousarray(reversed_view), y)
    np.testing.assert_array_equal(model.predict_proba(reversed_view), copy.predict_proba(reversed_view.copy()))
    read_only = X.copy()
    read_only.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        proba = model.predict_proba(read_only)
        model.predict_proba(pd.DataFrame(X))
    np.testing.assert_array_equal(proba, model.predict_proba(X))
