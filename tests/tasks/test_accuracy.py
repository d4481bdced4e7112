"""The accuracy interval and noise floor of the demo's table, against statsmodels."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint, proportions_ztest

from ssmts.tasks.accuracy import noise_gap, wilson_interval


@pytest.mark.parametrize("n", [1, 7, 40, 400, 1000])
@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
def test_wilson_interval_matches_statsmodels(n, confidence):
    for correct in sorted({0, 1, n // 3, n // 2, n - 1, n}):
        expected = proportion_confint(correct, n, alpha=1 - confidence, method="wilson")
        np.testing.assert_allclose(wilson_interval(correct, n, confidence), expected, rtol=0, atol=1e-12)


def test_noise_gap_is_where_a_two_proportion_z_test_reaches_its_level():
    for n, confidence in ((40, 0.95), (400, 0.95), (400, 0.99)):
        gap = noise_gap(n, confidence)
        counts = np.array([0.5 + gap / 2, 0.5 - gap / 2]) * n  # pooled proportion 1/2: the worst case
        _, p_value = proportions_ztest(counts, [n, n])
        assert p_value == pytest.approx(1 - confidence, rel=1e-9)
    assert noise_gap(400) == pytest.approx(0.0693, abs=1e-4) and noise_gap(40) == pytest.approx(0.2191, abs=1e-4)


def test_bad_counts_are_refused_in_words():
    with pytest.raises(ValueError, match="between 0 and n = 40"):
        wilson_interval(41, 40)
    with pytest.raises(ValueError, match="positive integer"):
        wilson_interval(0, 0)
    with pytest.raises(ValueError, match="positive integer"):
        noise_gap(2.5)
    with pytest.raises(ValueError, match="confidence"):
        wilson_interval(3, 10, confidence=95)
