"""Zero-shot rate changes (ssmts.nn.resampling): the factor on Delta, its validation, and
`change_rate`, which changes the data instead (decimation or band-limited resampling)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from ssmts.nn import resampling
from ssmts.nn.resampling import change_rate, check_delta_factor, delta_factor, positive_int


def _exact(message: str) -> str:
    return "^" + re.escape(message) + "$"


# ---------------------------------------------------------------- the factor on Delta
@pytest.mark.parametrize(("train", "new", "factor"), [(16000, 8000, 2.0), (8000, 16000, 0.5), (44100.0, 22050, 2.0)])
def test_delta_factor_is_train_rate_over_new_rate(train, new, factor):
    out = delta_factor(train, new)
    assert isinstance(out, float) and out == factor


@pytest.mark.parametrize(("train", "new"), [(0, 8000), (16000, -1), (math.inf, 8000), (16000, math.nan), (True, 2)])
def test_delta_factor_rejects_rates_that_are_not_finite_positive_numbers(train, new):
    """The message names both rates, whichever is wrong."""
    with pytest.raises(
        ValueError, match=_exact(f"sample rates must be > 0 and finite, got train_rate={train!r}, new_rate={new!r}")
    ):
        delta_factor(train, new)


@pytest.mark.parametrize(("train", "new", "factor"), [(1e-300, 1e300, 0.0), (1e300, 1e-300, math.inf)])
def test_delta_factor_rejects_a_ratio_that_underflows_or_overflows(train, new, factor):
    """Valid rates whose ratio is 0.0 or inf in floating point give no usable factor."""
    with pytest.raises(
        ValueError, match=_exact(f"the rates {train} and {new} give the unusable factor {factor} on Delta")
    ):
        delta_factor(train, new)


def test_check_delta_factor_returns_a_float_and_names_the_argument_when_rejecting():
    assert check_delta_factor(2) == 2.0 and isinstance(check_delta_factor(2), float)
    assert check_delta_factor(np.float32(0.5), "dt_scale") == 0.5
    for bad in [0, -0.5, math.inf, math.nan, True, "2", None]:
        with pytest.raises(ValueError, match=_exact(f"dt_scale must be > 0 and finite, got {bad!r}")):
            check_delta_factor(bad, "dt_scale")
    with pytest.raises(ValueError, match=_exact("factor must be > 0 and finite, got 0")):
        check_delta_factor(0)


# ---------------------------------------------------------------- positive_int
@pytest.mark.parametrize("value", [1, 8000, 8000.0, np.int64(8000), np.float32(8000.0)])
def test_positive_int_accepts_integral_numbers(value):
    out = positive_int(value, "rate")
    assert type(out) is int and out == int(value)


@pytest.mark.parametrize("value", [0, -8000, 7999.5, math.inf, math.nan, True, np.bool_(True), "8000", None])
def test_positive_int_rejects_everything_else_naming_the_argument(value):
    with pytest.raises(ValueError, match=_exact(f"rate must be a positive integer, got {value!r}")):
        positive_int(value, "rate")


# ---------------------------------------------------------------- change_rate: validation
def test_change_rate_validates_its_arguments_with_messages_naming_them():
    X = np.zeros((2, 8))
    with pytest.raises(ValueError, match=_exact("method must be one of ('decimate', 'resample'), got 'nearest'")):
        change_rate(X, 4, 2, method="nearest")
    with pytest.raises(ValueError, match=_exact("orig_rate must be a positive integer, got 7.5")):
        change_rate(X, 7.5, 2)
    with pytest.raises(ValueError, match=_exact("new_rate must be a positive integer, got 0")):
        change_rate(X, 4, 0)
    with pytest.raises(ValueError, match=_exact("X must have at least one (time) axis")):
        change_rate(np.float64(1.0), 4, 2)


@pytest.mark.parametrize(("orig", "new"), [(16000, 6000), (8000, 16000)])
def test_decimation_needs_a_new_rate_that_divides_the_original(orig, new):
    message = (
        "method='decimate' keeps every k-th sample, so new_rate must divide orig_rate; "
        f"{orig} Hz -> {new} Hz is not possible. Use method='resample'."
    )
    with pytest.raises(ValueError, match=_exact(message)):
        change_rate(np.zeros((1, 32)), orig, new)


# ---------------------------------------------------------------- change_rate: decimate
@pytest.mark.parametrize("shape", [(17,), (2, 17), (2, 3, 17)])
def test_decimate_is_the_default_and_keeps_every_kth_sample(shape):
    """Oracle: numpy slicing x[..., ::orig // new] in float32; length ceil(17 / 3) = 6."""
    X = np.random.default_rng(0).standard_normal(shape)
    out = change_rate(X, 6, 2)
    assert out.dtype == np.float32 and out.shape == (*shape[:-1], 6)
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(out, X[..., ::3].astype(np.float32))


def test_decimate_by_an_integral_float_rate():
    X = np.arange(12.0).reshape(2, 6)
    np.testing.assert_array_equal(change_rate(X, 16000.0, 8000), X[:, ::2].astype(np.float32))


@pytest.mark.parametrize("method", ["decimate", "resample"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_same_rate_returns_a_float32_copy(method, dtype):
    X = np.random.default_rng(1).standard_normal((2, 9)).astype(dtype)
    out = change_rate(X, 100, 100, method=method)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, X.astype(np.float32))
    assert not np.shares_memory(out, X)
    out[...] = 0.0
    assert np.abs(X).max() > 0  # the input is untouched


# ---------------------------------------------------------------- change_rate: resample
def _sine(rate: int, length: int, hz: float = 2.0) -> np.ndarray:
    return np.sin(2 * np.pi * hz * np.arange(length) / rate)


def test_resample_of_a_slow_sine_is_the_sine_sampled_at_the_new_rate():
    """Closed form: a 2 Hz sine at 40 Hz resampled to 30 Hz (not a divisor) is sin(2 pi 2 t) on the
    30 Hz grid, up to the filter's edge effects (compared away from the ends); new length
    ceil(201 * 30 / 40) = 151; the leading axes are kept."""
    X = np.stack([np.stack([_sine(40, 201), -_sine(40, 201), 0.5 * _sine(40, 201)])] * 2)  # (2, 3, 201)
    out = change_rate(X, 40, 30, method="resample")
    assert out.shape == (2, 3, 151) and out.dtype == np.float32
    expected = _sine(30, 151)
    for scale, row in zip([1.0, -1.0, 0.5], out[0]):
        np.testing.assert_allclose(row[15:-15], scale * expected[15:-15], atol=2e-2)
    np.testing.assert_allclose(out[1], out[0], rtol=1e-6, atol=1e-7)


def test_resample_is_torchaudio_on_the_float32_signals():
    """Oracle: torchaudio.functional.resample on the (rows, length) float32 array, bit for bit."""
    AF = pytest.importorskip("torchaudio.functional")
    X = np.random.default_rng(2).standard_normal((3, 2, 45))
    out = change_rate(X, 9, 7, method="resample")
    expected = AF.resample(torch.from_numpy(X.reshape(6, 45).astype(np.float32)), 9, 7).numpy()
    assert out.shape == (3, 2, 35)  # ceil(45 * 7 / 9)
    np.testing.assert_array_equal(out, expected.reshape(3, 2, 35))


def test_resample_in_chunks_covers_every_signal(monkeypatch):
    """With chunks of 4 signals, 12 signals (3 chunks, more than ceil(length / 4)) all equal
    torchaudio on each signal alone."""
    AF = pytest.importorskip("torchaudio.functional")
    monkeypatch.setattr(resampling, "_CHUNK", 4)
    X = np.random.default_rng(3).standard_normal((12, 6)).astype(np.float32)
    out = change_rate(X, 40, 30, method="resample")
    assert out.shape == (12, 5)  # ceil(6 * 30 / 40)
    for i in range(12):
        expected = AF.resample(torch.from_numpy(X[i : i + 1]), 40, 30).numpy()[0]
        np.testing.assert_allclose(out[i], expected, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- modes above a lower rate's Nyquist frequency
@pytest.mark.parametrize("bidirectional", [False, "ldnn"])
@pytest.mark.parametrize("factor", [1.0, 2.0, 8.0, 40.0, 1000.0])
def test_an_ssm_counts_the_modes_a_lower_rate_puts_above_its_nyquist_frequency(factor, bidirectional):
    """Oracle: each mode's turn per step at the layer's own Delta, wrapped into [-pi, pi] by a naive loop,
    times the factor on Delta, beyond pi."""
    from ssmts.nn import SSM, scaled_delta

    torch.manual_seed(0)
    layer = SSM(d_model=4, d_state=32, heads=2, dt_min=0.01, dt_max=0.5, bidirectional=bidirectional)
    layer.dt_scale = 1.5  # a base factor kept with the model counts as the layer's own step
    own = (torch.exp(layer.log_dt) * 1.5).detach().double().numpy()
    names = ["Lambda", "Lambda_backward"] if bidirectional == "ldnn" else ["Lambda"]
    expected = 0
    for name in names:
        imag = layer._lambda(name).imag.detach().double().numpy()
        for turn in (imag * own).ravel():
            wrapped = turn - 2 * math.pi * round(turn / (2 * math.pi))
            expected += abs(wrapped) * factor > math.pi
    with scaled_delta(layer, factor):
        above, modes = layer.modes_above_nyquist()
    assert modes == len(names) * own.size and above == expected
    assert (above == 0) == (factor == 1.0 or expected == 0)
