"""ssmts.data.forecast_corpus: reproducibility, shapes, and the generators checked against
oracles written independently here (kernel formulas in numpy, statsmodels' ARMA theory)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import (
    RBF,
    ConstantKernel,
    DotProduct,
    ExpSineSquared,
    Product,
    RationalQuadratic,
    Sum,
    WhiteKernel,
)

from ssmts.data import forecast_corpus as fc

# ----------------------------------------------------------------------------- corpus


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize(
    "make",
    [
        lambda seed: fc.synthetic_corpus(40, (10, 80), random_state=seed),
        lambda seed: fc.kernel_synth(20, (10, 80), random_state=seed),
        lambda seed: fc.component_series(40, (10, 80), random_state=seed),
        lambda seed: fc.ets_series(40, (10, 80), random_state=seed),
        lambda seed: fc.synthetic_corpus(40, (10, 80), random_state=seed, kernel_share=0.25, ets_share=0.5),
    ],
    ids=["synthetic_corpus", "kernel_synth", "component_series", "ets_series", "synthetic_corpus_with_ets"],
)
def test_same_seed_same_series_other_seed_other_series(make):
    assert _same(make(0), make(0))
    assert _same(make(0), make(np.random.default_rng(0)))  # an int and its Generator agree
    assert not _same(make(0), make(1))


def test_lengths_in_range_finite_float64_and_short_series_well_represented():
    corpus = fc.synthetic_corpus(400, (10, 300), random_state=0)
    lengths = np.array([x.size for x in corpus])
    assert all(x.ndim == 1 and x.dtype == np.float64 and np.all(np.isfinite(x)) for x in corpus)
    assert lengths.min() >= 10 and lengths.max() <= 300
    # Log-uniform lengths: P(L <= 50) = ln(51/10) / ln(301/10) = 0.48; 400 draws have a
    # standard error of 0.025, so 0.38 is 4 standard errors below.
    assert np.mean(lengths <= 50) > 0.38
    assert lengths.min() <= 12 and lengths.max() >= 250  # both ends of the range are reached

    fixed = fc.synthetic_corpus(30, 37, random_state=1)
    assert {x.size for x in fixed} == {37}


def test_corpus_spans_orders_of_magnitude():
    corpus = fc.synthetic_corpus(300, (20, 60), random_state=0)
    magnitude = np.log10([np.mean(np.abs(x)) + 1e-300 for x in corpus if np.any(x != 0)])
    # Scales are log-uniform over 1e-2..1e4: six decades; the middle 90 % spans about five.
    assert np.percentile(magnitude, 95) - np.percentile(magnitude, 5) > 4
    # The edge shares work (one generator only); shares outside [0, 1] are refused.
    assert _same(
        fc.synthetic_corpus(5, 30, random_state=2, kernel_share=1.0),
        fc.synthetic_corpus(5, 30, random_state=2, kernel_share=1.0),
    )
    with pytest.raises(ValueError, match=r"^kernel_share must be in \[0, 1\], got 1\.5$"):
        fc.synthetic_corpus(5, 30, kernel_share=1.5)
    with pytest.raises(ValueError, match=r"^ets_share must be in \[0, 1\], got -0\.1$"):
        fc.synthetic_corpus(5, 30, ets_share=-0.1)
    with pytest.raises(ValueError, match=r"^kernel_share \+ ets_share must be at most 1, got 0\.5 \+ 0\.6$"):
        fc.synthetic_corpus(5, 30, ets_share=0.6)


def test_length_validation():
    with pytest.raises(ValueError, match=r"at most 1024 points per series, got length=1025$"):
        fc.kernel_synth(2, fc.MAX_GP_LENGTH + 1)
    with pytest.raises(ValueError, match=r"2 <= min <= max, got \(50, 10\)$"):
        fc.component_series(2, (50, 10))
    with pytest.raises(ValueError, match=r"length must be an int >= 2 .*, got 1$"):
        fc.component_series(2, 1)


# ----------------------------------------------------------------------------- exponential smoothing


@pytest.mark.parametrize(
    "trend, damped, period",
    [(None, False, 0), ("add", False, 0), ("add", True, 0), (None, False, 4), ("add", True, 12)],
)
def test_ets_recursion_is_statsmodels_ets_simulated_on_the_same_innovations(trend, damped, period):
    """The oracle: statsmodels' ETSModel (Hyndman et al.'s state-space form) simulated from the same
    parameters, initial states and innovations."""
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    rng = np.random.default_rng(period + 2 * damped + (trend is not None))
    n = 60
    errors = rng.standard_normal(n)
    alpha, beta, gamma, phi = 0.4, 0.1, 0.3, 0.9 if damped else 1.0
    level, slope = 3.0, 0.5 if trend else 0.0
    season = rng.standard_normal(period) if period else None
    model = ETSModel(
        1.0 + rng.random(3 * max(period, 4)),  # only its settings matter here
        error="add",
        trend=trend,
        damped_trend=damped,
        seasonal="add" if period else None,
        seasonal_periods=period or None,
    )
    params = [alpha]
    params += [beta] if trend else []
    params += [gamma] if period else []
    params += [phi] if damped else []
    params += [level] + ([slope] if trend else [])
    params += list(season[::-1]) if period else []  # statsmodels lists the initial season newest first
    expected = model.smooth(np.array(params)).simulate(n, anchor="start", random_errors=errors[:, None])
    got = fc.ets_recursion(
        errors,
        alpha,
        beta if trend else 0.0,
        phi,
        gamma if period else 0.0,
        level,
        slope,
        season,
    )
    np.testing.assert_allclose(got, np.asarray(expected).ravel(), rtol=1e-12, atol=1e-12)


def test_ets_series_are_finite_in_range_and_trending_ones_carry_their_slope():
    series = fc.ets_series(300, (10, 200), random_state=0)
    lengths = np.array([x.size for x in series])
    assert lengths.min() >= 10 and lengths.max() <= 200
    assert all(x.dtype == np.float64 and np.all(np.isfinite(x)) for x in series)
    # about a third multiplicative (positive); additive paths start near 0 and also go negative
    positive = np.mean([np.all(x > 0) for x in series])
    assert 0.2 < positive < 0.6
    # Integrated processes: the second half's mean is far from the first's for many series, unlike
    # stationary noise (a random walk's halves differ by about its spread).
    long = [x for x in series if x.size >= 60]
    shift = np.array([abs(x[x.size // 2 :].mean() - x[: x.size // 2].mean()) / x.std() for x in long])
    assert np.mean(shift > 1.0) > 0.25


# ----------------------------------------------------------------------------- kernels


def _leaves(kernel) -> list:
    if isinstance(kernel, (Sum, Product)):
        return _leaves(kernel.k1) + _leaves(kernel.k2)
    return [kernel]


def test_random_kernel_is_a_sum_product_of_1_to_max_bank_kernels():
    length = 60
    bank = [repr(k) for k in fc.kernel_bank(length)]
    counts = []
    for seed in range(200):
        kernel = fc.random_kernel(length, seed, max_kernels=5)
        leaves = _leaves(kernel)
        assert all(repr(leaf) in bank for leaf in leaves)
        counts.append(len(leaves))
    assert set(counts) == {1, 2, 3, 4, 5}  # j ~ U{1..5}: 200 draws reach every count
    ops = [type(fc.random_kernel(length, s, 5)) for s in range(200)]
    assert Sum in ops and Product in ops


def test_bank_periods_are_calendar_and_relative_periods_that_fit_twice():
    length = 100
    periodic = [k for k in fc.kernel_bank(length) if isinstance(k, ExpSineSquared)]
    periods = sorted(k.periodicity * (length - 1) for k in periodic)  # grid step is 1/(length-1)
    assert np.allclose(periods, [4, 6, 7, 12, 14, 24, 25, 26, 30, 48, 50])
    assert all(2 <= p <= length / 2 for p in periods)
    kinds = {type(k) for k in fc.kernel_bank(length)}
    assert kinds == {ConstantKernel, WhiteKernel, DotProduct, RBF, RationalQuadratic, ExpSineSquared}
    assert not any(isinstance(k, ExpSineSquared) for k in fc.kernel_bank(3))  # no period fits twice


def _periodic_kernel(length: int, period: float):
    step = 1.0 / (length - 1)
    return next(
        k for k in fc.kernel_bank(length) if isinstance(k, ExpSineSquared) and np.isclose(k.periodicity, period * step)
    )


def test_periodic_kernel_matrix_and_draws_repeat_every_period():
    length, period = 100, 7
    kernel = _periodic_kernel(length, period)
    # Oracle: the ExpSineSquared formula in steps, exp(-2 sin^2(pi |i - j| / p) / l^2), l = 1.
    lag = np.abs(np.subtract.outer(np.arange(length), np.arange(length)))
    oracle = np.exp(-2 * np.sin(np.pi * lag / period) ** 2)
    np.testing.assert_allclose(kernel(fc.time_grid(length)), oracle, atol=1e-12)

    draws = fc.sample_gp(kernel, length, n_draws=20, random_state=0)

    def corr(lag_):
        return np.mean([np.corrcoef(y[:-lag_], y[lag_:])[0, 1] for y in draws])

    # A purely periodic GP repeats exactly (up to the 1e-6 relative jitter).
    assert corr(period) > 0.99
    assert corr(3) < 0.8  # and is not merely smooth: half a period away it decorrelates


@pytest.mark.parametrize("noise", [0.1, 1.0])
def test_white_noise_kernel_gives_sigma2_identity(noise):
    length, n = 20, 2000
    kernel = next(k for k in fc.kernel_bank(length) if isinstance(k, WhiteKernel) and k.noise_level == noise)
    x = fc.sample_gp(kernel, length, n_draws=n, random_state=0)
    cov = x.T @ x / n
    # Entries of a sample covariance of iid N(0, s2) have sd s2*sqrt(2/n) (diagonal) and
    # s2/sqrt(n) (off): 5 sd bounds below, with 20 + 190 entries.
    assert np.max(np.abs(np.diag(cov) - noise)) < 5 * noise * np.sqrt(2 / n)
    assert np.max(np.abs(cov - np.diag(np.diag(cov)))) < 5 * noise / np.sqrt(n)


def test_empirical_covariance_of_a_composed_kernel_matches_the_kernel_matrix():
    length, n, period = 20, 2000, 5
    step = 1.0 / (length - 1)
    kernel = RBF(0.3) * ExpSineSquared(1.0, period * step) + DotProduct(1.0) + WhiteKernel(0.1)
    # Oracle in numpy, on the grid t_i = i / (length - 1).
    t = np.arange(length) * step
    d = np.abs(np.subtract.outer(t, t))
    K = (
        np.exp(-(d**2) / (2 * 0.3**2)) * np.exp(-2 * np.sin(np.pi * d / (period * step)) ** 2)
        + (1.0 + np.outer(t, t))
        + 0.1 * np.eye(length)
    )
    np.testing.assert_allclose(kernel(fc.time_grid(length)), K, atol=1e-12)

    x = fc.sample_gp(kernel, length, n_draws=n, random_state=0)
    S = x.T @ x / n  # the mean is known to be zero
    rel = np.linalg.norm(S - K) / np.linalg.norm(K)
    # For zero-mean Gaussian draws, E||S - K||_F^2 = (tr(K)^2 + ||K||_F^2) / n, so the expected
    # relative error is sqrt((tr(K)^2 / ||K||_F^2 + 1) / n) <= sqrt((length + 1) / n) = 0.10
    # (tr(K)^2 / ||K||_F^2 <= rank <= length). 0.15 leaves 1.5 times the worst case for the
    # fluctuation of one sample; a wrong kernel or factor gives errors of order 1.
    expected = np.sqrt((np.trace(K) ** 2 / np.linalg.norm(K) ** 2 + 1) / n)
    assert expected <= np.sqrt((length + 1) / n)
    assert rel < 0.15
    assert rel < 2 * expected


def test_indefinite_matrix_falls_back_to_clipped_eigendecomposition():
    rng = np.random.default_rng(0)
    V, _ = np.linalg.qr(rng.standard_normal((12, 12)))
    w = np.r_[np.linspace(1.0, 3.0, 10), 0.0, -1e-2]  # beyond any jitter: Cholesky fails
    F = fc._mvn_factor(V @ np.diag(w) @ V.T)
    np.testing.assert_allclose(F @ F.T, V @ np.diag(np.clip(w, 0, None)) @ V.T, atol=1e-10)


# ----------------------------------------------------------------------------- ARMA


def test_random_arma_is_stationary_and_invertible():
    for seed in range(60):
        p, q = seed % 5, seed % 4
        ar, ma = fc.random_arma(p, q, random_state=seed)
        assert ar.shape == (p + 1,) and ma.shape == (q + 1,) and ar[0] == ma[0] == 1
        # Oracle: roots of 1 + c_1 z + ... + c_k z^k (np.roots takes the highest power first).
        for poly in (ar, ma):
            if poly.size > 1:
                assert np.all(np.abs(np.roots(poly[::-1])) > 1.0)


def test_random_arma_agrees_with_statsmodels_and_lag1_acf_matches_theory():
    sm_process = pytest.importorskip("statsmodels.tsa.arima_process")
    n = 20_000
    for seed, (p, q) in enumerate([(1, 0), (0, 1), (2, 1), (3, 2), (1, 1)]):
        ar, ma = fc.random_arma(p, q, random_state=seed)
        process = sm_process.ArmaProcess(ar, ma)
        assert process.isstationary and process.isinvertible
        x = fc.arma_sample(ar, ma, n, random_state=seed)
        x = x - x.mean()
        r1 = float(x[:-1] @ x[1:] / (x @ x))
        rho = sm_process.arma_acf(ar, ma, lags=400)
        # Bartlett's variance of the lag-1 sample autocorrelation:
        # (1/n) sum_k (rho_{k+1} + rho_{k-1} - 2 rho_1 rho_k)^2, k >= 1 (rho_{-k} = rho_k).
        k = np.arange(1, 399)
        se = np.sqrt(np.sum((rho[k + 1] + rho[k - 1] - 2 * rho[1] * rho[k]) ** 2) / n)
        assert abs(r1 - rho[1]) < 4 * se + 1e-3, (p, q, r1, rho[1], se)


# ----------------------------------------------------------------------------- package series


@pytest.fixture(scope="module")
def packaged():
    return fc.package_series()


def _development_vectors() -> dict[str, np.ndarray]:
    sm = pytest.importorskip("statsmodels.api")
    sk = pytest.importorskip("sktime.datasets")
    out = {}
    for name, loader in [
        ("airline", sk.load_airline),
        ("lynx", sk.load_lynx),
        ("shampoo", sk.load_shampoo_sales),
    ]:
        out[name] = np.asarray(loader(), dtype=np.float64)
    y, X = sk.load_uschange()
    out["uschange:Consumption"] = y.to_numpy(dtype=np.float64)
    for c in X.columns:
        out[f"uschange:{c}"] = X[c].to_numpy(dtype=np.float64)
    for c, v in sk.load_macroeconomic().items():
        out[f"macroeconomic:{c}"] = v.to_numpy(dtype=np.float64)
    macro = sm.datasets.macrodata.load_pandas().data.drop(columns=["year", "quarter"])
    for c in macro.columns:
        out[f"macrodata:{c}"] = macro[c].to_numpy(dtype=np.float64)
    fert = sm.datasets.fertility.load_pandas().data
    for _, row in fert.iterrows():
        v = row.iloc[4:].to_numpy(dtype=np.float64)
        out[f"fertility:{row['Country Code']}"] = v[np.isfinite(v)]
    return {k: v for k, v in out.items() if v.size >= 8}  # shorter rows would match by chance


def _contains(haystack: np.ndarray, needle: np.ndarray) -> bool:
    if needle.size > haystack.size:
        return False
    starts = np.flatnonzero(np.isclose(haystack[: haystack.size - needle.size + 1], needle[0]))
    return any(np.allclose(haystack[s : s + needle.size], needle) for s in starts)


def test_package_series_are_finite_1d_and_exclude_the_development_sets(packaged):
    assert packaged, "statsmodels or sktime is installed in the test environment"
    for name, x in packaged.items():
        assert isinstance(name, str) and x.ndim == 1 and x.dtype == np.float64 and x.size >= 2
        assert np.all(np.isfinite(x)), name
    dev = _development_vectors()
    for name, x in packaged.items():
        for dev_name, d in dev.items():
            # Neither equal to, nor holding a stretch of, nor a stretch of a development series.
            assert not _contains(x, d), (name, dev_name)
            assert x.size < 8 or not _contains(d, x), (name, dev_name)
    lowered = " ".join(packaged).lower()
    assert not any(s in lowered for s in ("airline", "lynx", "shampoo", "uschange", "fertility", "macro"))


def test_package_series_known_sets(packaged):
    pytest.importorskip("statsmodels")
    assert packaged["co2"].size == 2284  # weekly 1958-2001, the missing weeks interpolated
    assert packaged["sunspots"].size == 309 and packaged["nile"].size == 100
    # elnino: 61 years of 12 months, flattened year by year (Jan 1950, Feb 1950, ...).
    elnino = packaged["elnino"]
    assert elnino.size == 61 * 12
    np.testing.assert_allclose(elnino[[0, 1, 12]], [23.11, 24.20, 24.19])
