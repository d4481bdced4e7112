"""Property-based checks of the estimators' input validation (hypothesis): for any input of
any shape, dtype or magnitude, with NaN/inf or ragged lists, the result is either a clear
ValueError/TypeError naming the problem or a finite result of the right shape."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ssmts import SSMClassifier, SSMRegressor

TINY = dict(d_model=8, d_state=4, n_layers=1, max_epochs=1, min_steps=0, batch_size=8, device="cpu", random_state=0)
RNG = np.random.default_rng(0)
X_FIT = RNG.standard_normal((16, 6))
Y_FIT = np.tile([0, 1], 8)
# Words that tie a message to the user's data, not to torch or numpy internals.
NAMES_THE_PROBLEM = (
    "X",
    "y",
    "sample",
    "series",
    "feature",
    "channel",
    "timepoint",
    "float32",
    "complex",
    "NaN",
    "infinity",
    "label",
    "class",
    "dtype",
    "empty",
    "2D",
    "1-D",
    "2-D",
    "convert",
    "string",
)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def fitted():
    return SSMClassifier(**TINY).fit(X_FIT, Y_FIT)


def _elements(dtype):
    if dtype.kind == "f":
        return st.floats(allow_nan=True, allow_infinity=True, width=min(64, 8 * dtype.itemsize))
    if dtype.kind == "c":
        return st.complex_numbers(allow_nan=False, allow_infinity=False, max_magnitude=1e6)
    if dtype.kind == "b":
        return st.booleans()
    return st.integers(-(10**6), 10**6)


@st.composite
def arrays(draw):
    dtype = np.dtype(draw(st.sampled_from(["float64", "float32", "float16", "int64", "bool", "complex128"])))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=7))
    return draw(hnp.arrays(dtype, shape, elements=_elements(dtype)))


@st.composite
def magnitudes(draw):
    """Unit-scale data and a scale from 1e-30 to 1e30 (the scale-free claim of the estimators)."""
    exponent = draw(st.integers(-30, 30))
    n = draw(st.integers(4, 10))
    length = draw(st.integers(1, 8))
    base = np.random.default_rng(draw(st.integers(0, 2**16))).standard_normal((n, length))
    return base, 10.0**exponent


@st.composite
def ragged(draw):
    lengths = draw(st.lists(st.integers(0, 8), min_size=1, max_size=6))
    channels = draw(st.sampled_from([None, 1, 2]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    return [rng.standard_normal(n) if channels is None else rng.standard_normal((channels, n)) for n in lengths]


def _clear(error: Exception) -> bool:
    text = str(error).lower()
    if isinstance(error, FloatingPointError):  # the refusal to return NaN, naming its likely causes
        return "non-finite outputs" in text and "inputs far outside the training data" in text
    return isinstance(error, (ValueError, TypeError)) and any(word.lower() in text for word in NAMES_THE_PROBLEM)


@SETTINGS
@given(X=arrays())
def test_predict_on_any_array_is_a_clear_error_or_a_finite_result(fitted, X):
    try:
        proba = fitted.predict_proba(X)
    except Exception as error:  # noqa: BLE001 - the property is about which errors
        assert _clear(error), f"unclear {type(error).__name__} for X of shape {X.shape} {X.dtype}: {error}"
        return
    assert proba.shape == (len(X), 2) and np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-9)


@SETTINGS
@given(X=ragged())
def test_ragged_lists_are_padded_or_refused_clearly(fitted, X):
    try:
        proba = fitted.predict_proba(X)
    except Exception as error:  # noqa: BLE001
        assert _clear(error), f"unclear {type(error).__name__} for a ragged list: {error}"
        return
    assert proba.shape == (len(X), 2) and np.isfinite(proba).all()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=magnitudes())
def test_fit_at_any_magnitude_learns_what_it_learns_at_unit_scale(data):
    """Finite predictions at any scale, and the same ones as at scale 1 (the regressor's scaled with the
    targets): standardization, not an absolute floor, sets the scale. The inputs' rounding after scaling
    (float32) grows through training; measured: 1.1e-5 at most in the classifier's probabilities at its
    defaults (lr=1e-2, batch norm), 1e-6 with the earlier ones."""
    base, scale = data
    X = base * scale
    y = (X[:, 0] > np.median(X[:, 0])).astype(int)
    if len(np.unique(y)) < 2:
        y[0] = 1 - y[0]
    proba = SSMClassifier(**TINY).fit(X, y).predict_proba(X)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba, SSMClassifier(**TINY).fit(base, y).predict_proba(base), atol=5e-5)
    prediction = SSMRegressor(**TINY).fit(X, X[:, 0]).predict(X)
    assert np.isfinite(prediction).all()
    unit = SSMRegressor(**TINY).fit(base, base[:, 0]).predict(base)
    np.testing.assert_allclose(prediction / scale, unit, rtol=1e-4, atol=1e-4 * np.abs(unit).max())


@settings(max_examples=30, deadline=None)
@given(X=arrays(), y=st.lists(st.one_of(st.none(), st.integers(0, 2), st.text(max_size=2)), min_size=0, max_size=8))
def test_fit_on_any_input_is_a_clear_error_or_a_fitted_model(X, y):
    try:
        clf = SSMClassifier(**TINY).fit(X, y)
    except Exception as error:  # noqa: BLE001
        assert _clear(error), f"unclear {type(error).__name__} for X {X.shape} {X.dtype}, y {y!r}: {error}"
        return
    assert np.isfinite(clf.predict_proba(X)).all()
