"""A synthetic corpus of univariate time series for pretraining a global forecaster.

Three generators, mixed by ``synthetic_corpus``, and the real series that ship inside
installed packages (``package_series``):

``kernel_synth``
    KernelSynth (Ansari et al., "Chronos", 2024): each series is one draw of a zero-mean
    Gaussian process whose kernel is a random sum/product of 1 to ``max_kernels`` kernels
    from a bank (constant, white noise, linear, RBF, rational quadratic, periodic with
    calendar periods). Built on ``sklearn.gaussian_process.kernels``.
``component_series``
    Classical structure: level + trend (linear, damped, piecewise with a change point,
    exponential growth) + one or two seasonalities (harmonics, additive or multiplicative)
    + level shifts + ARMA noise; also random walks (with and without drift), geometric
    random walks and count series (Poisson or rounded positive levels, often intermittent).
``ets_series``
    Draws of exponential smoothing state-space models (local level, additive or damped trend,
    additive seasonality; a third exponentiated): integrated series whose latest level and slope
    carry on. Not in the default mix (``ets_share=0``).

Every function takes ``random_state`` (an int, None, or a ``np.random.Generator``, which
is then advanced); an int fixes every output exactly on a given platform. Only numpy,
scipy and scikit-learn are needed; ``package_series`` uses statsmodels, sktime and aeon
where they are installed and skips what is not.

The GP draws need an L x L Cholesky factor per series, so ``kernel_synth`` refuses series
longer than ``MAX_GP_LENGTH`` points; ``component_series`` has no such limit.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable

import numpy as np
from scipy.signal import lfilter
from sklearn.gaussian_process.kernels import (
    RBF,
    ConstantKernel,
    DotProduct,
    ExpSineSquared,
    Kernel,
    RationalQuadratic,
    WhiteKernel,
)

__all__ = [
    "MAX_GP_LENGTH",
    "arma_sample",
    "component_series",
    "ets_recursion",
    "ets_series",
    "kernel_bank",
    "kernel_synth",
    "package_series",
    "random_arma",
    "random_kernel",
    "sample_gp",
    "synthetic_corpus",
    "time_grid",
]

# Cholesky of an L x L matrix costs L^3/3 flops and sklearn's kernel evaluation L^2 memory
# per component: at 1024 points about 0.1 s per series, which is the most a corpus of
# thousands of series can afford.
MAX_GP_LENGTH = 1024

# Periods in steps of the calendars series are sampled on (quarterly 4, daily-in-week 7,
# monthly 12, hourly 24, weekly 52, daily 365) and their common multiples (fortnight 14,
# half-year of weeks 26, month of days 30, half-hourly 48, quarter-hourly 96, two years of
# weeks 104, hours in a week 168).
_CALENDAR_PERIODS = (4, 6, 7, 12, 14, 24, 26, 30, 48, 52, 60, 96, 104, 168, 365)
# Periods as fractions of the series length, so that long cycles occur whatever the length.
_RELATIVE_PERIODS = (1 / 2, 1 / 4)
# Seasonal periods of component_series (the classical quarterly, weekly, monthly, hourly,
# yearly-of-weeks cycles).
_SEASONAL_PERIODS = (4, 7, 12, 24, 52)

RandomState = int | np.random.Generator | None


def _rng(random_state: RandomState) -> np.random.Generator:
    # default_rng passes a Generator through unchanged, so a caller's Generator is advanced.
    return np.random.default_rng(random_state)


def _check_length(length: int | tuple[int, int], name: str = "length") -> tuple[int, int]:
    lo, hi = (length, length) if np.isscalar(length) else tuple(length)  # type: ignore[misc]
    lo, hi = int(lo), int(hi)
    if lo < 2 or hi < lo:
        raise ValueError(f"{name} must be an int >= 2 or a (min, max) pair with 2 <= min <= max, got {length!r}")
    return lo, hi


def _draw_length(lo: int, hi: int, rng: np.random.Generator) -> int:
    # Log-uniform: as many series in 10-30 as in 100-300, so short series are not swamped.
    if lo == hi:
        return lo
    return int(min(hi, math.floor(math.exp(rng.uniform(math.log(lo), math.log(hi + 1))))))


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


# --------------------------------------------------------------------------- KernelSynth


def time_grid(length: int) -> np.ndarray:
    """The GP inputs: ``(length, 1)`` points evenly spaced on [0, 1], one step = 1 / (length - 1)."""
    return (np.arange(length, dtype=np.float64) / max(length - 1, 1))[:, None]


def kernel_bank(length: int) -> list[Kernel]:
    """The kernels ``random_kernel`` composes for series of ``length`` points (on ``time_grid``).

    Constant; white noise (variances 0.1, 1); linear (DotProduct, offsets 0, 1, 10); RBF and
    rational quadratic (length scales relative to the series length); periodic
    (ExpSineSquared) with every calendar period of ``_CALENDAR_PERIODS`` steps that fits at
    least twice into the series, and the relative periods length/2 and length/4 (when at
    least 2 steps).
    """
    step = 1.0 / max(length - 1, 1)
    bank: list[Kernel] = [ConstantKernel(1.0)]
    bank += [WhiteKernel(noise_level=v) for v in (0.1, 1.0)]
    bank += [DotProduct(sigma_0=s) for s in (0.0, 1.0, 10.0)]
    # Length scales as fractions of the series: 0.03 wiggles within a few steps on long
    # series (and is nearly white on short ones), 1 is a smooth drift across the series.
    bank += [RBF(length_scale=s) for s in (0.03, 0.1, 0.3, 1.0)]
    bank += [RationalQuadratic(alpha=a, length_scale=s) for a in (0.1, 1.0, 10.0) for s in (0.1, 1.0)]
    periods = [float(p) for p in _CALENDAR_PERIODS if 2 * p <= length]
    periods += [f * length for f in _RELATIVE_PERIODS if f * length >= 2.0 and f * length not in periods]
    # sklearn's ExpSineSquared has the period in input units; one step is `step` on the grid.
    bank += [ExpSineSquared(length_scale=1.0, periodicity=p * step) for p in periods]
    return bank


def random_kernel(length: int, random_state: RandomState = None, max_kernels: int = 5) -> Kernel:
    """A KernelSynth kernel: j ~ U{1..max_kernels} bank kernels (with replacement) joined left
    to right by + or * chosen with equal odds, as in Chronos' KernelSynth."""
    if max_kernels < 1:
        raise ValueError(f"max_kernels must be >= 1, got {max_kernels}")
    rng = _rng(random_state)
    bank = kernel_bank(length)
    j = int(rng.integers(1, max_kernels + 1))
    picks = rng.integers(0, len(bank), size=j)
    kernel = bank[picks[0]]
    for i in picks[1:]:
        kernel = kernel + bank[i] if rng.random() < 0.5 else kernel * bank[i]
    return kernel


def _mvn_factor(K: np.ndarray) -> np.ndarray:
    """F with F F^T = K (up to a relative jitter of 1e-6): Cholesky, else a clipped eigh."""
    n = K.shape[0]
    # Relative jitter: periodic and linear kernels are rank-deficient, and their scale spans
    # orders of magnitude (DotProduct(10) has variance 100), so an absolute jitter would be
    # either too small for some or a visible noise floor for others.
    scale = max(float(np.mean(np.diag(K))), 1e-12)
    for rel in (1e-6, 1e-4):
        try:
            return np.linalg.cholesky(K + (rel * scale) * np.eye(n))
        except np.linalg.LinAlgError:
            pass
    # Rounding can leave small negative eigenvalues beyond any sensible jitter: clip them.
    w, V = np.linalg.eigh((K + K.T) / 2)
    return V * np.sqrt(np.clip(w, 0.0, None))


def sample_gp(kernel: Kernel, length: int, n_draws: int = 1, random_state: RandomState = None) -> np.ndarray:
    """``(n_draws, length)`` draws of the zero-mean GP with ``kernel`` on ``time_grid(length)``."""
    if length > MAX_GP_LENGTH:
        raise ValueError(f"GP draws are limited to {MAX_GP_LENGTH} points (an L x L Cholesky each), got {length}")
    rng = _rng(random_state)
    F = _mvn_factor(kernel(time_grid(length)))
    return rng.standard_normal((n_draws, length)) @ F.T


def kernel_synth(
    n_series: int,
    length: int | tuple[int, int] = 256,
    random_state: RandomState = None,
    max_kernels: int = 5,
) -> list[np.ndarray]:
    """``n_series`` KernelSynth series: per series a length (``length`` or log-uniform in the
    ``(min, max)`` range, at most ``MAX_GP_LENGTH``), a ``random_kernel``, and one GP draw.

    Returns a list of ``(L_i,)`` float64 arrays (zero-mean GP scale, not rescaled).
    """
    lo, hi = _check_length(length)
    if hi > MAX_GP_LENGTH:
        raise ValueError(f"kernel_synth draws at most {MAX_GP_LENGTH} points per series, got length={length!r}")
    rng = _rng(random_state)
    out = []
    for _ in range(n_series):
        n = _draw_length(lo, hi, rng)
        out.append(sample_gp(random_kernel(n, rng, max_kernels), n, 1, rng)[0])
    return out


# --------------------------------------------------------------------------- ARMA


def _stable_polynomial(order: int, rng: np.random.Generator, max_reflection: float) -> np.ndarray:
    # Step-up (Levinson) recursion from reflection coefficients |r_k| < 1: the polynomial
    # 1 + a_1 x + ... + a_p x^p then has every root outside the unit circle (Schur-Cohn), so
    # every draw is stable by construction instead of by rejection.
    a = np.ones(1)
    for r in rng.uniform(-max_reflection, max_reflection, size=order):
        a = np.concatenate([a, [0.0]]) + r * np.concatenate([[0.0], a[::-1]])
    return a


def _roots_outside_unit_circle(poly: np.ndarray) -> bool:
    # np.roots wants the highest power first; poly is 1 + c_1 x + ... (lowest first).
    poly = np.trim_zeros(np.asarray(poly, dtype=np.float64), "b")
    return poly.size <= 1 or bool(np.all(np.abs(np.roots(poly[::-1])) > 1.0))


def random_arma(
    p: int, q: int, random_state: RandomState = None, max_reflection: float = 0.9
) -> tuple[np.ndarray, np.ndarray]:
    """Random stationary and invertible ARMA(p, q) lag polynomials ``(ar, ma)``.

    Both start with 1, in the convention of ``scipy.signal.lfilter(ma, ar, e)`` and
    statsmodels' ``ArmaProcess(ar, ma)``:
    ``x[t] = -ar[1] x[t-1] - ... + e[t] + ma[1] e[t-1] + ...``
    Shapes ``(p + 1,)`` and ``(q + 1,)``. ``max_reflection`` < 1 bounds the partial
    autocorrelations, keeping the roots away from the unit circle.
    """
    if not 0.0 <= max_reflection < 1.0:
        raise ValueError(f"max_reflection must be in [0, 1), got {max_reflection}")
    rng = _rng(random_state)
    ar = _stable_polynomial(p, rng, max_reflection)
    ma = _stable_polynomial(q, rng, max_reflection)
    # Guaranteed by the construction; checked because a silent non-stationary noise would
    # blow up long series.
    if not (_roots_outside_unit_circle(ar) and _roots_outside_unit_circle(ma)):  # pragma: no cover
        raise RuntimeError("ARMA polynomial with a root inside the unit circle")
    return ar, ma


def arma_sample(
    ar: np.ndarray, ma: np.ndarray, n: int, random_state: RandomState = None, burn_in: int | None = None
) -> np.ndarray:
    """``(n,)`` draw of the ARMA process ``lfilter(ma, ar, e)`` with standard normal e.

    The first ``burn_in`` outputs are discarded so that the draw starts near stationarity;
    by default enough steps for the slowest AR mode to decay to 1e-6 (at most 5000).
    """
    ar, ma = np.asarray(ar, dtype=np.float64), np.asarray(ma, dtype=np.float64)
    rng = _rng(random_state)
    if burn_in is None:
        burn_in = len(ma) - 1
        ar_trim = np.trim_zeros(ar, "b")
        if ar_trim.size > 1:
            rho = float(np.max(1.0 / np.abs(np.roots(ar_trim[::-1]))))  # slowest pole modulus
            if rho > 0:
                burn_in = max(burn_in, min(5000, math.ceil(math.log(1e-6) / math.log(min(rho, 1 - 1e-9)))))
    e = rng.standard_normal(n + burn_in)
    return lfilter(ma, ar, e)[burn_in:]


def _arma_noise(n: int, rng: np.random.Generator) -> np.ndarray:
    # Unit-variance ARMA(p, q) noise with random orders; white noise when p = q = 0.
    p, q = int(rng.integers(0, 4)), int(rng.integers(0, 3))
    ar, ma = random_arma(p, q, rng)
    x = arma_sample(ar, ma, n, rng)
    sd = float(np.std(x))
    return x / sd if sd > 0 else x


# --------------------------------------------------------------------------- components


def _seasonal(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Zero-mean seasonality of one or two periods, sum of harmonics; unit-ish amplitude (or 0)."""
    n = t.size
    n_periods = int(rng.choice([0, 1, 2], p=[0.25, 0.5, 0.25]))
    s = np.zeros(n)
    for _ in range(n_periods):
        fitting = [p for p in _SEASONAL_PERIODS if 2 * p <= n]
        if fitting and rng.random() < 0.7:
            period = float(rng.choice(fitting))
        elif n >= 6:
            period = float(rng.uniform(2.5, n / 2))  # any period that shows at least twice
        else:
            continue
        n_harm = int(rng.integers(1, max(1, min(4, int(period // 2))) + 1))  # below Nyquist
        amp = _log_uniform(rng, 0.1, 2.0)
        for k in range(1, n_harm + 1):
            a = amp * rng.uniform(0.2, 1.0) / k  # decaying harmonics, like a smooth profile
            s += a * np.sin(2 * np.pi * k * t / period + rng.uniform(0, 2 * np.pi))
    return s


def _trend(t: np.ndarray, rng: np.random.Generator, total: float) -> np.ndarray:
    """A trend whose change over the series is of order ``total``: none, linear, damped or piecewise."""
    n = t.size
    kind = rng.choice(["none", "linear", "damped", "piecewise"], p=[0.2, 0.35, 0.2, 0.25])
    if kind == "linear":
        return rng.normal(0, total) * t / n
    if kind == "damped":
        # Holt's damped trend: slope b multiplied by phi each step, total change b*phi/(1-phi).
        # The slope's decay time is 10-100 % of the series; a fixed phi would saturate within
        # a few steps of long series and look like a start-up transient.
        phi = math.exp(-1.0 / (rng.uniform(0.1, 1.0) * n))
        b = rng.normal(0, total) * (1 - phi) / phi
        return b * phi * (1 - phi**t) / (1 - phi)
    if kind == "piecewise":
        tau = rng.uniform(0.2, 0.8) * n
        s1, s2 = rng.normal(0, total, size=2) / n
        return s1 * t + (s2 - s1) * np.maximum(t - tau, 0.0)
    return np.zeros(n)


def _level_shifts(n: int, rng: np.random.Generator, size: float) -> np.ndarray:
    # A Poisson number of permanent steps at uniform times (most series get none or one).
    out = np.zeros(n)
    for _ in range(int(rng.poisson(rng.uniform(0.0, 1.5)))):
        out[int(rng.integers(1, n)) :] += rng.normal(0, size)
    return out


def _structure(n: int, rng: np.random.Generator, log_scale: bool) -> np.ndarray:
    """Level + trend + seasonality + level shifts + ARMA noise (additive, or the log of a
    multiplicative series when ``log_scale``: exponential growth, proportional seasonality)."""
    t = np.arange(n, dtype=np.float64)
    # In log units the same structure is smaller: a total log-change of 1 is growth by e.
    k = 0.25 if log_scale else 1.0
    signal = _trend(t, rng, 2.0 * k) + k * _seasonal(t, rng) + _level_shifts(n, rng, _log_uniform(rng, 0.2, 2.0) * k)
    sd = float(np.std(signal))
    # Noise relative to the signal: from barely visible to dominating it.
    noise_sd = (sd if sd > 1e-3 * k else k) * _log_uniform(rng, 0.02, 1.5)
    return signal + noise_sd * _arma_noise(n, rng)


def _one_component_series(n: int, rng: np.random.Generator) -> np.ndarray:
    u = rng.random()
    if u < 0.4:  # additive structure around a level
        return rng.normal(0, 3) + _structure(n, rng, log_scale=False)
    if u < 0.6:  # multiplicative: positive, exponential growth, seasonality proportional to level
        return np.exp(np.clip(_structure(n, rng, log_scale=True), -30, 30))
    if u < 0.75:  # random walk, half with drift, increments iid or ARMA
        inc = _arma_noise(n, rng) if rng.random() < 0.5 else rng.standard_normal(n)
        drift = rng.normal(0, 0.3) if rng.random() < 0.5 else 0.0
        return rng.normal(0, 3) + np.cumsum(drift + inc)
    if u < 0.85:  # geometric random walk (prices): exp of a random walk with drift
        sigma = _log_uniform(rng, 0.005, 0.1)
        steps = rng.normal(rng.normal(0, sigma / 3), sigma, size=n)
        return np.exp(np.clip(np.cumsum(steps), -30, 30))
    # counts: a positive multiplicative intensity around a base level of 0.2..50 per step;
    # low bases give intermittent series with many zeros (demand-like); lower ones give
    # mostly all-zero series, which teach nothing.
    base = _log_uniform(rng, 0.2, 50.0)
    intensity = np.minimum(base * np.exp(np.clip(_structure(n, rng, log_scale=True), -30, 30)), 1e6)
    if rng.random() < 0.7:
        return rng.poisson(intensity).astype(np.float64)
    return np.round(intensity)


def component_series(
    n_series: int, length: int | tuple[int, int] = (10, 300), random_state: RandomState = None
) -> list[np.ndarray]:
    """``n_series`` series of classical structure; lengths fixed or log-uniform in ``(min, max)``.

    Kinds (shares): additive level + trend + seasonality + level shifts + ARMA noise (40 %);
    the same in logs, exponentiated, for exponential growth and multiplicative seasonality
    (20 %); random walks with and without drift (15 %); geometric random walks (10 %);
    counts, Poisson or rounded, from a positive multiplicative intensity (15 %).

    Returns a list of ``(L_i,)`` float64 arrays, unit-ish scale (not rescaled).
    """
    lo, hi = _check_length(length)
    rng = _rng(random_state)
    return [
        np.asarray(_one_component_series(_draw_length(lo, hi, rng), rng), dtype=np.float64) for _ in range(n_series)
    ]


# --------------------------------------------------------------------------- exponential smoothing


def ets_recursion(
    errors: np.ndarray,
    alpha: float,
    beta: float = 0.0,
    phi: float = 1.0,
    gamma: float = 0.0,
    level: float = 0.0,
    slope: float = 0.0,
    season: np.ndarray | None = None,
) -> np.ndarray:
    """The additive-error ETS model (Hyndman et al., "Forecasting with exponential smoothing",
    2008) run on given innovations: errors (n,) -> y (n,), from the initial ``level``, ``slope``
    and ``season`` (m,) (oldest first; None: no seasonality).

    y_t = l_{t-1} + phi b_{t-1} + s_{t-m} + e_t;  l_t = l_{t-1} + phi b_{t-1} + alpha e_t;
    b_t = phi b_{t-1} + beta e_t;  s_t = s_{t-m} + gamma e_t.
    """
    seasonal = [] if season is None else [float(v) for v in season]
    period = len(seasonal)
    y = np.empty(len(errors))
    for t, e in enumerate(np.asarray(errors, dtype=np.float64)):
        s = seasonal[t] if period else 0.0  # s_{t-m}: the list grows by one a step
        y[t] = level + phi * slope + s + e
        level = level + phi * slope + alpha * e
        slope = phi * slope + beta * e
        if period:
            seasonal.append(s + gamma * e)
    return y


def _ets_path(n: int, rng: np.random.Generator) -> np.ndarray:
    """One draw of an additive-error ETS model with random components and smoothing parameters
    inside the usual admissible region (0 < beta <= alpha, gamma <= 1 - alpha), unit innovations."""
    alpha = _log_uniform(rng, 0.02, 1.0)
    trend = rng.choice(["none", "additive", "damped"], p=[0.2, 0.4, 0.4])
    phi = 1.0 if trend == "additive" else float(rng.uniform(0.8, 0.98))
    beta = 0.0 if trend == "none" else alpha * _log_uniform(rng, 0.01, 1.0)
    # The starting slope, in innovations per step: from lost in the noise to a smooth ramp.
    slope = 0.0 if trend == "none" else float(rng.choice([-1.0, 1.0])) * _log_uniform(rng, 0.01, 3.0)
    fitting = [m for m in _SEASONAL_PERIODS if 2 * m <= n]
    period = int(rng.choice(fitting)) if fitting and rng.random() < 0.3 else 0
    gamma = (1.0 - alpha) * _log_uniform(rng, 0.01, 1.0) if period else 0.0
    season = _seasonal(np.arange(period, dtype=np.float64), rng) * _log_uniform(rng, 1.0, 10.0) if period else None
    return ets_recursion(rng.standard_normal(n), alpha, beta, phi, gamma, 0.0, slope, season)


def ets_series(
    n_series: int, length: int | tuple[int, int] = (10, 300), random_state: RandomState = None
) -> list[np.ndarray]:
    """``n_series`` draws of exponential smoothing state-space models: local level, local linear
    trend (additive or damped) and optional additive seasonality with random smoothing parameters;
    a third of them exponentiated (multiplicative errors, growth in proportion to the level).

    Unlike the stationary GP draws of ``kernel_synth``, whose best forecast reverts to the mean
    beyond a length scale, these are integrated processes whose latest level and slope carry on:
    the behaviour of yearly and trending series. Lengths fixed or log-uniform in ``(min, max)``.

    Returns a list of ``(L_i,)`` float64 arrays, unit-ish scale (not rescaled).
    """
    lo, hi = _check_length(length)
    rng = _rng(random_state)
    out = []
    for _ in range(n_series):
        n = _draw_length(lo, hi, rng)
        path = _ets_path(n, rng)
        if rng.random() < 1 / 3:
            # in logs, innovations of 0.5-10 %: positive series with multiplicative errors, their
            # growth over the series held within a factor e^5 (a steep ramp would overflow)
            sigma = min(_log_uniform(rng, 0.005, 0.1), 5.0 / max(float(np.ptp(path)), 1e-12))
            path = np.exp(path * sigma)
        out.append(path)
    return out


# --------------------------------------------------------------------------- the corpus


def _rescale(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    scale = _log_uniform(rng, 1e-2, 1e4)
    if np.all(x >= 0):
        # Non-negative series (counts, prices, multiplicative) keep their zeros and ratios:
        # scaled, not shifted.
        m = float(np.mean(x))
        return x * (scale / m) if m > 0 else x
    mu, sd = float(np.mean(x)), float(np.std(x))
    z = (x - mu) / sd if sd > 0 else x - mu
    # The offset, in units of the scale, sets how far the series sits from zero relative to
    # its spread (a coefficient of variation from about 1/10 to anything).
    return scale * (z + rng.normal(0, 5))


def synthetic_corpus(
    n_series: int,
    length: int | tuple[int, int] = (10, 300),
    random_state: RandomState = None,
    kernel_share: float = 0.5,
    ets_share: float = 0.0,
) -> list[np.ndarray]:
    """``round(kernel_share * n_series)`` ``kernel_synth`` series, ``round(ets_share * n_series)``
    ``ets_series`` and the rest ``component_series``, shuffled, each rescaled by a log-uniform
    scale in 1e-2..1e4 and a random offset (non-negative series are only scaled).

    Returns a list of ``(L_i,)`` finite float64 arrays.
    """
    for name, share in (("kernel_share", kernel_share), ("ets_share", ets_share)):
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {share}")
    if kernel_share + ets_share > 1.0:
        raise ValueError(f"kernel_share + ets_share must be at most 1, got {kernel_share} + {ets_share}")
    rng = _rng(random_state)
    n_kernel = int(round(kernel_share * n_series))
    n_ets = min(int(round(ets_share * n_series)), n_series - n_kernel)
    series = kernel_synth(n_kernel, length, rng) + component_series(n_series - n_kernel - n_ets, length, rng)
    if n_ets:  # drawn last: a corpus without them is the same as before they existed
        series += ets_series(n_ets, length, rng)
    out = [_rescale(series[i], rng) for i in rng.permutation(n_series)]
    bad = [i for i, x in enumerate(out) if not np.all(np.isfinite(x))]
    if bad:  # pragma: no cover - the generators are built to stay finite
        raise RuntimeError(f"non-finite synthetic series at positions {bad[:10]}")
    return out


# --------------------------------------------------------------------------- packaged real series

# Not loaded here, because the project develops and evaluates on them: sktime/aeon airline,
# lynx, shampoo sales, uschange and macroeconomic (= statsmodels macrodata); statsmodels
# fertility and macrodata. Seaborn's flights (= airline) and load_solar (which first calls a
# web API) are left out as well; every loader below reads files inside the package only.


def _statsmodels_sets() -> dict[str, np.ndarray]:
    import statsmodels.api as sm

    ds = sm.datasets
    out: dict[str, np.ndarray] = {}
    co2 = ds.co2.load_pandas().data["co2"].to_numpy(dtype=np.float64)
    ok = np.isfinite(co2)
    idx = np.arange(co2.size)
    out["co2"] = np.interp(idx, idx[ok], co2[ok])  # weekly, 59 missing weeks filled linearly
    out["sunspots"] = ds.sunspots.load_pandas().data["SUNACTIVITY"].to_numpy(dtype=np.float64)
    out["nile"] = ds.nile.load_pandas().data["volume"].to_numpy(dtype=np.float64)
    months = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
    elnino = ds.elnino.load_pandas().data.sort_values("YEAR")
    out["elnino"] = elnino[months].to_numpy(dtype=np.float64).ravel()  # rows are years: C order is time order
    for col in ("duration", "iprod"):
        out[f"strikes:{col}"] = ds.strikes.load_pandas().data[col].to_numpy(dtype=np.float64)
    danish = ds.danish_data.load_pandas().data
    for col in danish.columns:
        out[f"danish_data:{col}"] = danish[col].to_numpy(dtype=np.float64)
    infl = ds.interest_inflation.load_pandas().data
    for col in ("Dp", "R"):
        out[f"interest_inflation:{col}"] = infl[col].to_numpy(dtype=np.float64)
    copper = ds.copper.load_pandas().data.sort_values("TIME")
    for col in copper.columns.drop("TIME"):
        out[f"copper:{col}"] = copper[col].to_numpy(dtype=np.float64)
    grunfeld = ds.grunfeld.load_pandas().data.sort_values(["firm", "year"])
    for firm, g in grunfeld.groupby("firm", sort=True):
        for col in ("invest", "value", "capital"):
            out[f"grunfeld:{firm}:{col}"] = g[col].to_numpy(dtype=np.float64)
    return out


def _longley() -> dict[str, np.ndarray]:
    try:
        from sktime.datasets import load_longley

        y, X = load_longley()
        frame = X.assign(TOTEMP=y)
    except ImportError:
        import statsmodels.api as sm

        frame = sm.datasets.longley.load_pandas().data.drop(columns="YEAR")
    return {f"longley:{c}": frame[c].to_numpy(dtype=np.float64) for c in sorted(frame.columns)}


def _pbs() -> dict[str, np.ndarray]:
    try:
        from sktime.datasets import load_PBS_dataset
    except ImportError:
        from aeon.datasets import load_PBS_dataset
    return {"PBS": np.asarray(load_PBS_dataset(), dtype=np.float64).ravel()}


def _package_csv(relative: str, column: str) -> np.ndarray:
    """A column of a CSV inside sktime's (else aeon's) dataset folder, read without their loaders."""
    import pandas as pd

    for package in ("sktime.datasets", "aeon.datasets"):
        try:
            module = __import__(package, fromlist=["_"])
        except ImportError:
            continue
        path = os.path.join(os.path.dirname(module.__file__), "data", relative)
        if os.path.exists(path):
            return pd.read_csv(path)[column].to_numpy(dtype=np.float64)
    raise FileNotFoundError(relative)


def _seatbelts() -> dict[str, np.ndarray]:
    # UK drivers killed or seriously injured, monthly 1969-1984 (R's Seatbelts).
    return {"seatbelts:KSI": _package_csv("seatbelts/seatbelts.csv", "KSI")}


def _solar() -> dict[str, np.ndarray]:
    # The sample load_solar falls back to (GB solar generation, half-hourly); read directly
    # because load_solar tries the Sheffield PV_Live API first.
    return {"solar": _package_csv("solar/solar.csv", "solar_gen")}


def _m1_yearly() -> dict[str, np.ndarray]:
    import aeon.datasets

    path = os.path.join(os.path.dirname(aeon.datasets.__file__), "data", "m1_yearly_dataset", "m1_yearly_dataset.tsf")
    frame, _ = aeon.datasets.load_from_tsf_file(path)
    return {
        f"m1_yearly:{name}": np.asarray(values, dtype=np.float64)
        for name, values in zip(frame["series_name"], frame["series_value"])
    }


_PACKAGE_LOADERS: tuple[Callable[[], dict[str, np.ndarray]], ...] = (
    _statsmodels_sets,
    _longley,
    _pbs,
    _seatbelts,
    _solar,
    _m1_yearly,
)


def package_series() -> dict[str, np.ndarray]:
    """Real series shipped inside installed packages, none of the project's development sets.

    statsmodels: co2 (weekly), sunspots, nile, elnino (monthly, flattened), strikes, danish_data,
    interest_inflation, copper, grunfeld (per firm); sktime (or aeon): longley, PBS, seatbelts,
    solar; aeon: the M1 yearly series. A set whose package is missing is skipped; nothing is
    downloaded. Multi-column sets give one series per column, named ``"set:column"``.

    Returns name -> ``(L,)`` finite float64 array.
    """
    out: dict[str, np.ndarray] = {}
    for loader in _PACKAGE_LOADERS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                found = loader()
        # Optional packages, and loaders whose files or columns move between their
        # versions: whatever fails to load is skipped, the others still count.
        except Exception:  # noqa: BLE001
            continue
        for name, values in found.items():
            x = np.asarray(values, dtype=np.float64).ravel()
            if x.size >= 2 and np.all(np.isfinite(x)):
                out[name] = x
    return out
