"""torch and torchaudio load together and torchaudio's resampler agrees with scipy's polyphase one."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.signal
import torch
import torchaudio
import torchaudio.functional

EDGE = 100  # both resamplers are zero-phase FIR filters; their edge transients span < 100 output samples


def _major_minor(version: str) -> tuple[int, int]:
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def test_torch_and_torchaudio_versions_share_major_minor():
    """torchaudio's binary loads only with the torch it was built for (pyproject pins both)."""
    assert _major_minor(torch.__version__) == _major_minor(torchaudio.__version__)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_resample_16k_to_8k_matches_scipy_resample_poly_and_the_analytic_sine(dtype):
    """Oracles: scipy.signal.resample_poly(x, 1, 2) and the band-limited signal evaluated at 8 kHz.

    Measured (interior): torchaudio vs analytic 3.7e-4, scipy vs analytic 1.1e-3, torchaudio vs scipy 1.3e-3.
    """
    t = np.arange(16000) / 16000.0
    signal = lambda tt: np.sin(2 * np.pi * 440 * tt) + 0.3 * np.sin(2 * np.pi * 1000 * tt + 0.4)  # noqa: E731
    x = signal(t)
    y_ta = torchaudio.functional.resample(torch.from_numpy(x).to(dtype), 16000, 8000)
    assert y_ta.dtype == dtype and y_ta.shape == (8000,)
    y_ta = y_ta.double().numpy()
    y_sp = scipy.signal.resample_poly(x, 1, 2)
    reference = signal(np.arange(8000) / 8000.0)
    inner = slice(EDGE, -EDGE)
    assert np.abs(y_ta - reference)[inner].max() < 2e-3
    assert np.abs(y_sp - reference)[inner].max() < 3e-3
    assert np.abs(y_ta - y_sp)[inner].max() < 4e-3


def test_resample_removes_content_above_the_new_nyquist():
    """A 5 kHz tone cannot exist at 8 kHz: both resamplers' anti-aliasing filters suppress it
    (measured 5.4e-3, 1.3e-3)."""
    x = np.sin(2 * np.pi * 5000 * np.arange(16000) / 16000.0)
    y_ta = torchaudio.functional.resample(torch.from_numpy(x), 16000, 8000).numpy()
    y_sp = scipy.signal.resample_poly(x, 1, 2)
    inner = slice(EDGE, -EDGE)
    assert np.abs(y_ta[inner]).max() < 0.02
    assert np.abs(y_sp[inner]).max() < 0.02
