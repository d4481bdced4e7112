import numpy as np
import pytest


def continuous_time_classes(n: int, rate: float, seed: int, duration: float = 1.0):
    """Four classes defined in continuous time, sampled at `rate` Hz: X (n, L), y (n,).

    0: low tone 2-4 Hz, 1: high tone 7-9 Hz, 2: up-chirp 2->9 Hz, 3: down-chirp 9->2 Hz;
    random phase and amplitude, white noise. At another rate the same continuous signals
    give sequences of another length, and ignoring the rate shifts every frequency.
    """
    rng = np.random.default_rng(seed)
    t = np.arange(int(round(duration * rate))) / rate
    y = rng.integers(0, 4, n)
    X = np.empty((n, len(t)))
    for i, c in enumerate(y):
        phase, amplitude = rng.uniform(0, 2 * np.pi), rng.uniform(0.5, 1.5)
        if c in (0, 1):
            f = rng.uniform(2, 4) if c == 0 else rng.uniform(7, 9)
            s = np.sin(2 * np.pi * f * t + phase)
        else:
            f0, f1 = (2.0, 9.0) if c == 2 else (9.0, 2.0)
            s = np.sin(2 * np.pi * (f0 * t + (f1 - f0) * t**2 / (2 * duration)) + phase)
        X[i] = amplitude * s + 0.1 * rng.standard_normal(len(t))
    return X, y


@pytest.fixture
def toy_classification():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 12))
    y = (X[:, :6].sum(1) > 0).astype(int)
    return X, y


FAST = dict(d_model=16, d_state=8, n_layers=1, max_epochs=3, min_steps=0, batch_size=16, device="cpu", random_state=0)
