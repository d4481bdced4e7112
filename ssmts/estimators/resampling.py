"""Resampler: bring series to the model's training rate (the alternative to rescaling Delta)."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ..nn.resampling import RESAMPLE_METHODS, change_rate
from ._input import prepare_input


def _prepare(X):
    """The estimators' input handling, with a memmap read whole: resampling returns the whole array anyway."""
    return prepare_input(np.asarray(X) if isinstance(X, np.memmap) else X)


class Resampler(TransformerMixin, BaseEstimator):
    """Resample time series from `sample_rate` to `target_rate` (torchaudio band-limited resampling).

    Zero-shot resampling in ssmts rescales the model's step sizes instead of the data; this
    transformer does the opposite — it changes the data — so that both can be compared, e.g.
    ``make_pipeline(Resampler(target_rate=16000), SSMClassifier(sample_rate=16000))``.

    X: (n_samples, n_timepoints) or (n_samples, n_channels, n_timepoints), or a list of
    series of different lengths; the output has the same form with ceil(L * target / source)
    timepoints. Rates are integers in Hz (torchaudio resamples by their ratio).
    method: "resample" (band-limited, default) or "decimate" (keep every k-th sample, no filter).
    sample_rate: rate of the data passed in; can also be given per call to transform (and is
    routed there in a Pipeline with metadata routing enabled).
    """

    def __init__(self, target_rate=16000, sample_rate=None, method="resample"):
        self.target_rate = target_rate
        self.sample_rate = sample_rate
        self.method = method

    def fit(self, X, y=None):
        self._check_params()
        data = _prepare(X)
        self.n_features_in_ = data.n_features
        self.input_ndim_ = data.ndim
        self.fit_sample_rate_ = self.sample_rate
        return self

    def _check_params(self) -> None:
        if not (isinstance(self.target_rate, numbers.Integral) and self.target_rate > 0):
            raise ValueError(f"target_rate must be a positive integer (Hz), got {self.target_rate!r}")
        if self.sample_rate is not None and not (
            isinstance(self.sample_rate, numbers.Integral) and self.sample_rate > 0
        ):
            raise ValueError(f"sample_rate must be a positive integer (Hz) or None, got {self.sample_rate!r}")
        if self.method not in RESAMPLE_METHODS:
            raise ValueError(f"unknown method {self.method!r}; choose one of {RESAMPLE_METHODS}")

    def transform(self, X, sample_rate=None):
        """Resampled series, same form as X."""
        check_is_fitted(self, "n_features_in_")
        rate = self.sample_rate if sample_rate is None else sample_rate
        if rate is None:
            raise ValueError("Resampler needs the rate of X: set sample_rate or pass transform(X, sample_rate=...)")
        if not (isinstance(rate, numbers.Integral) and rate > 0):
            raise ValueError(f"sample_rate must be a positive integer (Hz), got {rate!r}")
        data = _prepare(X)
        if (
            data.ndim == 2
            and self.input_ndim_ == 2
            and rate == self.fit_sample_rate_
            and data.n_features != self.n_features_in_
        ):
            # At the rate seen in fit, a 2D row's timepoints are its sklearn features; at another rate
            # the length changes legitimately.
            raise ValueError(
                f"X has {data.n_features} features, but Resampler is expecting {self.n_features_in_} features as input"
            )
        if data.ragged:
            return [
                change_rate(data.x[i, :, : data.lengths[i]].numpy(), rate, self.target_rate, self.method)
                for i in range(len(data.x))
            ]
        out = change_rate(data.x.numpy(), rate, self.target_rate, self.method).astype(np.float64)
        return out[:, 0, :] if data.ndim == 2 else out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags
