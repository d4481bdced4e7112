"""The forecaster's quantile arithmetic against direct computations: interpolation on the
normal-score scale (exact for a Gaussian) and the conformal widening (coverage and minimality)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from ssmts.sktime._strategies import conformal_widening, interpolate_quantiles, widen

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
