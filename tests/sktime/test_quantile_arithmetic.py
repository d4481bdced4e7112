"""The forecaster's quantile arithmetic against direct computations: interpolation on the
normal-score scale (exact for a Gaussian) and the conformal widening (coverage and minimality)."""

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from ssmts.sktime._strategies import (
    conformal_rank,
    conformal_widening,
    fewest_points_to_calibrate,
    interpolate_quantiles,
    symmetric_pairs,
    uncalibrated_coverages,
    unpaired_levels,
    widen,
)

LEVELS = np.array([0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95])


def test_interpolation_is_exact_for_a_gaussian_grid():
    mu, sigma = 3.0, 2.0
    grid = norm.ppf(LEVELS, mu, sigma)
    alpha = np.array([0.01, 0.2, 0.5, 0.66, 0.99])  # inside and beyond the grid
    np.testing.assert_allclose(interpolate_quantiles(grid, LEVELS, alpha), norm.ppf(alpha, mu, sigma), rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(1, 60), shift=st.floats(-2, 2))
def test_conformal_widening_reaches_its_coverage_and_no_more_than_needed(seed, n, shift):
    rng = np.random.default_rng(seed)
    H, C = 3, 2
    grid = np.sort(rng.normal(size=(n, H, C, len(LEVELS))), axis=-1)
    target = rng.normal(shift, 1.5, size=(n, H, C))
    observed = rng.random((n, H, C)) > 0.2
    widening = conformal_widening(grid, target, observed, LEVELS)
    wide = widen(grid, widening, LEVELS)
    for low in range(3):
        high = len(LEVELS) - 1 - low
        for h in range(H):
            m = int(observed[:, h].sum())
            need = int(np.ceil((m + 1) * (1 - 2 * LEVELS[low])))
            if not m or need > m:
                assert widening[h, low] == 0.0
                continue
            seen = observed[:, h]
            t, lo, hi = target[:, h][seen], grid[:, h, :, low][seen], grid[:, h, :, high][seen]
            d = widening[h, low]
            tol = 1e-9  # the boundary target is at distance d up to rounding
            assert ((t >= lo - d - tol) & (t <= hi + d + tol)).sum() >= need  # covered
            assert ((t >= lo - d + tol) & (t <= hi + d - tol)).sum() < need  # and by the smallest such d
            assert widening[h, high] == d
    assert np.all(np.diff(wide, axis=-1) >= 0)  # still a sorted grid


def test_conformal_rank_is_ceil_m_plus_1_times_p_in_exact_arithmetic():
    for low in ("0.05", "0.1", "0.25", "0.35", "0.025", "0.15"):
        p = 1 - 2 * Fraction(low)
        for m in range(0, 120):
            exact = -(-(m + 1) * p.numerator // p.denominator)  # ceil((m + 1) p) in integers
            expected = exact if m and exact <= m else None
            assert conformal_rank(m, 1 - 2 * float(low)) == expected, (low, m)
    assert conformal_rank(9, 1 - 2 * 0.35) == 3  # 10 * 0.30000000000000004 in floats: not 4


def test_the_points_needed_and_the_pairs_left_uncalibrated():
    assert fewest_points_to_calibrate(0.9) == 9 and fewest_points_to_calibrate(0.8) == 4
    assert fewest_points_to_calibrate(0.5) == 1
    assert uncalibrated_coverages(3, LEVELS) == [0.9, 0.8]  # (0.25, 0.75) needs 1 point, (0.1, 0.9) 4
    assert uncalibrated_coverages(8, LEVELS) == [0.9]
    assert uncalibrated_coverages(9, LEVELS) == []
    assert uncalibrated_coverages(0, np.array([0.1, 0.5, 0.9])) == [0.8]


def test_pairs_are_found_by_value_so_a_level_without_a_partner_leaves_the_others_calibrated():
    """0.95 without 0.05: the pairs were read by position (first with last), so every pair was out of step
    and nothing was calibrated while the fit reported a calibration. Oracle: the widening of the same
    grid without the unpaired level."""
    extra = np.array([0.1, 0.3, 0.5, 0.7, 0.9, 0.95])
    assert symmetric_pairs(extra) == [(0, 4), (1, 3)] and unpaired_levels(extra) == [0.95]
    assert symmetric_pairs(LEVELS) == [(0, 6), (1, 5), (2, 4)] and unpaired_levels(LEVELS) == []
    assert uncalibrated_coverages(3, extra) == [0.8]  # (0.3, 0.7) needs 1 point, (0.1, 0.9) 4
    rng = np.random.default_rng(0)
    grid = np.sort(rng.normal(size=(40, 2, 1, len(extra))), axis=-1)
    target, observed = rng.normal(0.5, 2.0, size=(40, 2, 1)), np.ones((40, 2, 1), bool)
    widening = conformal_widening(grid, target, observed, extra)
    paired = [0, 1, 2, 3, 4]  # without 0.95
    np.testing.assert_array_equal(
        widening[:, paired], conformal_widening(grid[..., paired], target, observed, extra[paired])
    )
    assert (widening[:, 5] == 0).all() and (widening[:, [0, 1, 3, 4]] != 0).all()


def test_a_narrowing_stops_at_the_median_so_the_point_forecast_stays():
    """A negative widening larger than the interval's half-width would carry the low level above the
    median: it stops there (and the high one below it stops there too), so the median, the point
    forecast, is the network's."""
    levels = np.array([0.1, 0.25, 0.5, 0.75, 0.9])
    grid = np.array([1.0, 2.0, 3.0, 4.0, 5.0]).reshape(1, 1, 1, 5)
    widening = np.array([[-5.0, -0.5, 0.0, -0.5, -5.0]])  # the 80 % pair narrowed past the median
    wide = widen(grid, widening, levels)[0, 0, 0]
    np.testing.assert_allclose(wide, [2.5, 3.0, 3.0, 3.0, 3.5])
    assert wide[2] == grid[0, 0, 0, 2]
