"""How far an accuracy measured on n test examples can be trusted: its 95 % interval and the noise floor.

An accuracy is a binomial proportion: k of n examples right. `wilson_interval` is the Wilson
score interval (Wilson, 1927), which keeps its coverage near the nominal level for small n
and for proportions near 0 or 1, where the normal approximation p ± z sqrt(p(1-p)/n) does not.
`noise_gap` is the smallest difference between two accuracies on n examples each that a
two-sided z test at the same level calls real, in the worst case p = 1/2.
"""

from __future__ import annotations

import math

from scipy.stats import norm


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    return float(norm.ppf(0.5 + confidence / 2))


def wilson_interval(correct: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of the proportion correct / n: (low, high), both in [0, 1].

    p = k/n, z the two-sided normal quantile of `confidence`:
    centre (p + z^2/2n) / (1 + z^2/n), half-width z / (1 + z^2/n) * sqrt(p(1-p)/n + z^2/4n^2).
    """
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer (the number of test examples), got {n!r}")
    if int(correct) != correct or not 0 <= correct <= n:
        raise ValueError(f"correct must be an integer between 0 and n = {n}, got {correct!r}")
    z = _z(confidence)
    p = correct / n
    scale = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / scale
    half = z / scale * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def noise_gap(n: int, confidence: float = 0.95) -> float:
    """Difference of two accuracies, each on n examples, beyond which it is more than noise.

    z * sqrt(2 p (1 - p) / n) at p = 1/2, i.e. z / sqrt(2n): a two-sided two-proportion z test
    at `confidence` for independent samples, in the worst case. Models scored on the same
    examples make paired errors, and a paired test (McNemar's) can resolve smaller gaps.
    """
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer (the number of test examples), got {n!r}")
    return _z(confidence) / math.sqrt(2 * n)


__all__ = ["noise_gap", "wilson_interval"]
