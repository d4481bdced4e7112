"""What the scikit-learn estimators share: their parameters (declared once in
ssmts.training.params), input handling, the sample-rate logic of zero-shot resampling,
persistence, and the thin link to the one fit path (ssmts.training.fit_model)."""

from __future__ import annotations

import contextlib
import copy
import functools
import math
import numbers
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import joblib
import numpy as np
import torch
from sklearn.utils.validation import _check_feature_names, check_is_fitted
from tqdm.auto import tqdm

from .._warnings import caller_stacklevel
from ..nn import SSM, SequenceHead, scaled_delta
from ..nn.batch_invariant import channel_linear
from ..nn.functional import (
    channel_statistics,
    chunked_channel_statistics,
    series_statistics,
    series_summary,
)
from ..training import (
    ContinuationParams,
    EarlyStopping,
    LazyRows,
    SequenceData,
    SequenceModelParams,
    TrainerConfig,
    fit_model,
    on_device,
    predict_batches,
    resolve_device,
    seed_from,
)
from ..training.fit import pickle_state
from ._export import (
    SCALED_LIMIT,
    VALID_NAME,
    ServingModel,
    check_format,
    export_metadata,
    serving_network,
    write_serving_file,
)
from ._input import PreparedInput, prepare_input
from ._persistence import is_safetensors, load_estimator, same_param, save_estimator

# Normalizations that standardize every series by its own statistics (known only once it ends).
PER_SERIES_NORMALIZATIONS = ("series", "series+stats")

STREAM_STEP_MAX = 8
"""stream() rolls this many new steps or fewer with the layers' recurrent step, and reads longer
chunks with one FFT pass (forward_with_state)."""


EXTRAPOLATION_SPANS = 2.0
"""Predictions warn when X goes beyond the training values of a channel by more than this many times
their range (max - min)."""

STANDARDIZE_CHUNK_VALUES = 1 << 20
"""In-memory X is standardized this many values (8 MB in float64) at a time."""


class ExtrapolationWarning(UserWarning):
    """X lies far outside the values the estimator was trained on."""


def _channel_range(data: PreparedInput) -> np.ndarray:
    """(2, C) float64: the smallest and largest real value of every channel of data.x (n, C, L); a
    memory-mapped array's was taken as it was validated (prepare_input), without another pass."""
    if data.channel_range is not None:
        return data.channel_range
    x, mask = data.x, data.mask
    if mask is not None:
        real = mask[:, None, :].bool()
        low = x.masked_fill(~real, math.inf).amin(dim=(0, 2))
        high = x.masked_fill(~real, -math.inf).amax(dim=(0, 2))
    else:
        low, high = x.amin(dim=(0, 2)), x.amax(dim=(0, 2))
    return torch.stack([low, high]).double().numpy()


@dataclass
class StreamState:
    """Where a set of streams stands: the SSM state of every block, the running sum of the
    features (mean pooling), the number of steps seen and of streams, and the fit it belongs to
    (a state of another model, or of this one before a refit, is refused)."""

    blocks: list
    total: torch.Tensor | None
    count: int
    n_streams: int
    fit_id: str = ""


def target_statistics(y2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and scale of each target column of y2 (n, n_targets), as for input channels, except that a
    constant column (one sample, or every value the same up to rounding) has scale 0: its predictions
    are that constant, whatever the network outputs (scale 1 would add the network's output, untrained
    for that column, in the target's own units)."""
    y = torch.from_numpy(np.asarray(y2, dtype=np.float64))[:, :, None]
    mean, scale = channel_statistics(y, flat_scale=0.0)
    return mean.numpy(), scale.numpy()


def continued_target_statistics(y2: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A continued fit's target statistics: the fitted mean and scale of as many targets as y2 (n, n_targets)
    holds, except that a column every earlier fit saw constant (scale 0: predicted as that constant) takes
    its spread from y2 once y2 varies there; without it the network's output for that column would stay
    multiplied by 0, whatever it learns."""
    if y2.shape[1] != len(scale):
        raise ValueError(f"y has {y2.shape[1]} targets, but the model was fitted with {len(scale)}")
    unseen = scale == 0
    return mean, (np.where(unseen, target_statistics(y2)[1], scale) if unseen.any() else scale)


def standardized_targets(y2: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> torch.Tensor:
    """(y2 - mean) / scale as float32 training targets; a constant column (scale 0) trains on zeros."""
    return torch.from_numpy(((y2 - mean) / np.where(scale > 0, scale, 1.0)).astype(np.float32))


def transactional(fit):
    """Wrap a fit method so that the estimator changes only when it succeeds: on any exception,
    KeyboardInterrupt included, every attribute is put back as it was before the call (the
    previous fitted model, or none). Continued fits train a copy of model_, so it is intact.
    A successful fit records its parameters in `_fitted_params_`."""

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        saved = dict(self.__dict__)
        try:
            result = fit(self, *args, **kwargs)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise
        # What the fitted model was built and trained with: `save` writes these, not parameters
        # set afterwards (set_params(d_model=...) after a fit describes no fitted network).
        self._fitted_params_ = self.get_params(deep=False)
        self._fit_id_ = uuid.uuid4().hex  # stream states name the fit they continue
        return result

    return wrapper


def require_y(estimator, y) -> None:
    if y is None:
        raise ValueError(f"{type(estimator).__name__} requires y to be passed, but the target y is None")


class SequenceEstimatorMixin:
    """What every estimator holding a network `model_` over series shares: input checks and
    scaling (the `normalize` parameter), the sample-rate logic of zero-shot resampling, batched
    prediction and persistence. The estimator declares normalize, sample_rate, batch_size and
    device among its parameters."""

    # ------------------------------------------------------------ input
    def _prepare_fit_input(self, X) -> PreparedInput:
        data = prepare_input(X)
        # A DataFrame's column names (its timepoints): predict then refuses other or reordered columns,
        # which would be read as other times (scikit-learn's own check and messages)
        _check_feature_names(self, X if data.ndim == 2 and not data.ragged else None, reset=True)
        self.n_features_in_ = data.n_features
        self.n_channels_in_ = data.x.shape[1]
        self.n_timepoints_in_ = int(data.lengths.max())
        self.input_ndim_ = data.ndim
        self.normalization_ = self.normalize
        # series+stats gives levels in these units; "auto" (the feature estimators) may choose "channel".
        if self.normalize in ("channel", "series+stats", "auto"):
            # read in chunks of rows, in float64: no full-size float64 copies of a large X (a ragged list's
            # padding needs the mask)
            if isinstance(data.x, LazyRows):
                mean, scale = chunked_channel_statistics(data.x.array)
            elif data.mask is None:
                mean, scale = chunked_channel_statistics(data.x.numpy())
            else:
                mean, scale = channel_statistics(data.x, data.mask)
            self.input_mean_, self.input_scale_ = mean.numpy(), scale.numpy()
        else:  # "series" standardizes each series at every call; "none" leaves the values
            self.input_mean_ = np.zeros(self.n_channels_in_)
            self.input_scale_ = np.ones(self.n_channels_in_)
        # Where the training values lie, per channel (2, C): predictions far outside warn.
        self.input_range_ = _channel_range(data) if len(data.x) else None
        return data

    def _far_outside_training(self, data: PreparedInput) -> str | None:
        """What to warn of when X goes far beyond the training values: a model whose inputs keep their
        levels (normalize 'channel', 'none', 'series+stats') reads them by extrapolation (per-series
        scaling removes levels and spreads, so it never warns). None when X is within bounds."""
        fitted = getattr(self, "input_range_", None)
        if fitted is None or self.normalization_ == "series" or not len(data.x):
            return None
        low, high = np.asarray(fitted)
        # in training ranges; a channel constant in training has none, and is measured in its scale (what
        # the network's input moves by): 5.0001 against a constant 5 read as 1e8 ranges beyond
        scale = np.maximum(np.asarray(self.input_scale_, dtype=np.float64), 1e-12)
        span = np.where(high > low, high - low, scale)
        now_low, now_high = _channel_range(data)
        beyond = np.maximum((low - now_low) / span, (now_high - high) / span)  # in training spans
        if not (beyond > EXTRAPOLATION_SPANS).any():
            return None
        channel = int(np.argmax(beyond))
        return (
            f"{type(self).__name__}: X reaches {beyond[channel]:.3g} times the training range beyond it (channel "
            f"{channel}: training values {low[channel]:.4g} to {high[channel]:.4g}, X {now_low[channel]:.4g} to "
            f"{now_high[channel]:.4g}); the model extrapolates there and its predictions are not to be trusted. "
            "normalize='series' compares shapes only, if levels are nuisance"
        )

    def _warn_if_far_outside_training(self, data: PreparedInput) -> None:
        message = self._far_outside_training(data)
        if message is not None:
            warnings.warn(message, ExtrapolationWarning, stacklevel=caller_stacklevel())

    def _fit_input(self, X, continuing: bool) -> PreparedInput:
        """X of a fit: a first fit takes its statistics; a continued one (warm_start, partial_fit) checks X
        as predict does, at the rate now set (sample_rate set after the first fit: 2-D X has timepoints in
        proportion to it)."""
        return self._prepare_predict_input(X, self._rate_ratio(None)) if continuing else self._prepare_fit_input(X)

    def _prepare_predict_input(self, X, rate_ratio: float) -> PreparedInput:
        check_is_fitted(self, "model_")
        if getattr(X, "ndim", None) == 2 and rate_ratio == 1.0:  # at another rate: other timepoints
            _check_feature_names(self, X, reset=False)  # before the values: columns that are not the fit's
        data = prepare_input(X)
        name = type(self).__name__
        if data.x.shape[1] != self.n_channels_in_:
            raise ValueError(
                f"X has {data.x.shape[1]} channels, but {name} was fitted with {self.n_channels_in_} channels"
            )
        self._warn_if_far_outside_training(data)
        if data.ndim == 2 and self.input_ndim_ == 2 and not data.ragged:
            # A 2D row's columns are sklearn "features" (timepoints); at the training rate their
            # number is fixed, at another rate it scales with the rate.
            expected = self.n_features_in_ * rate_ratio
            if rate_ratio == 1.0 and data.n_features != self.n_features_in_:
                raise ValueError(
                    f"X has {data.n_features} features, but {name} is expecting {self.n_features_in_} features as input"
                )
            if rate_ratio != 1.0 and abs(data.n_features - expected) > max(1.0, 0.01 * expected):
                rate = rate_ratio * float(self.train_sample_rate_)
                about = f"{expected:.0f}" if 1 <= expected < 1e9 else f"{expected:.3g}"
                raise ValueError(
                    f"X has {data.n_features} timepoints, but at sample_rate={rate:.6g} {name} expects about "
                    f"{about} ({self.n_features_in_} at the training rate {self.train_sample_rate_}): a series "
                    "of the training duration has timepoints in proportion to the rate; check that sample_rate "
                    "is the rate of this X"
                )
        return data

    @property
    def _network_channels(self) -> int:
        """Input channels of the network: with normalize="series+stats" every channel also brings
        its series' level and log-spread as two constant channels."""
        return self.n_channels_in_ * (3 if self.normalization_ == "series+stats" else 1)

    def _scaled(self, data: PreparedInput) -> torch.Tensor | LazyRows:
        """The network's input (n, network channels, L): data standardized as fitted (normalization_)."""
        standardize = self._standardizer()
        if isinstance(data.x, LazyRows):  # scaled batch by batch as the rows are read
            return LazyRows(data.x.array, data.x.index, standardize)
        # rows a chunk at a time into the float32 result: the float64 intermediates of a large X are a
        # chunk's, not four times X's size
        n, (C, L) = len(data.x), data.x.shape[1:]
        rows = max(1, STANDARDIZE_CHUNK_VALUES // max(1, C * L))
        scaled = None
        for start in range(0, n, rows):
            mask = None if data.mask is None else data.mask[start : start + rows]
            part = standardize(data.x[start : start + rows].double(), mask)
            if mask is not None:
                part = part * mask[:, None, :]
            if scaled is None:
                scaled = torch.empty((n, *part.shape[1:]), dtype=part.dtype)
            scaled[start : start + rows] = part
        return scaled

    def _standardizer(self) -> Callable[..., torch.Tensor]:
        """standardize(x (n, C, L) float64, or float32 (an exported model's input), mask (n, L) or None)
        -> the network's input, float32, scaled as fitted (normalization_): predict's first step, and an
        exported model's. Formed in float64 for float64 x: in float32, a level of 1e8 leaves steps of 8."""
        mean = torch.as_tensor(self.input_mean_, dtype=torch.float32)[None, :, None]
        scale = torch.as_tensor(self.input_scale_, dtype=torch.float32)[None, :, None]
        per_series = self.normalization_ in PER_SERIES_NORMALIZATIONS
        with_stats = self.normalization_ == "series+stats"
        channel_mean, channel_scale = torch.as_tensor(self.input_mean_), torch.as_tensor(self.input_scale_)  # float64

        def standardize(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
            if not per_series:
                if x.dtype == torch.float64:
                    return ((x - channel_mean[None, :, None]) / channel_scale[None, :, None]).float()
                return (x - mean) / scale
            series_mean, series_scale = series_statistics(x, mask)
            shapes = ((x.double() - series_mean[..., None]) / series_scale[..., None]).float()
            if not with_stats:
                return shapes
            summary = series_summary(x, mask, channel_mean, channel_scale).float()
            return torch.cat([shapes, summary[..., None].expand(-1, -1, x.shape[-1])], dim=1)

        return standardize

    # ------------------------------------------------------------ sample rate
    def _rate_ratio(self, sample_rate) -> float:
        """new rate / training rate for data at `sample_rate` (default: the estimator's sample_rate).

        Setting sample_rate on a fitted estimator (set_params) declares the rate of the data
        passed from then on: predictions rescale Delta by training rate / sample_rate, and a
        warm-started fit trains at that rate with the same rescaling.
        """
        check_is_fitted(self, "model_")
        rate = self.sample_rate if sample_rate is None else sample_rate
        train = getattr(self, "train_sample_rate_", None)
        if rate is None:
            return 1.0
        if isinstance(rate, bool) or not (isinstance(rate, numbers.Real) and np.isfinite(rate) and rate > 0):
            raise ValueError(f"sample_rate must be a positive number, got {rate!r}")
        if train is None:
            raise ValueError(
                f"{type(self).__name__} was fitted without sample_rate, so data at sample_rate={rate} cannot be "
                "rescaled; set sample_rate before fit"
            )
        ratio = float(rate) / float(train)
        if not (np.isfinite(ratio) and ratio > 0 and np.isfinite(1.0 / ratio)):
            raise ValueError(
                f"sample_rate={rate!r} is too far from the training rate {train} for Delta to be rescaled "
                f"(their ratio {ratio!r} is outside float64's range)"
            )
        return ratio

    def _predict_outputs(
        self, data: PreparedInput, rate_ratio: float, forward=None, per_step: bool = False
    ) -> torch.Tensor:
        """Network outputs for `data` (CPU), batch by batch, with Delta rescaled by training / new rate.
        per_step: outputs per step (otherwise batches of similar lengths, cut at their last real step)."""
        inputs = SequenceData(self._scaled(data), mask=data.mask, crop_padding=not per_step)
        self._refuse_beyond_limit(inputs.x)
        self._warn_if_below_fitted_rates(rate_ratio)
        # minutes at tens of thousands of series: with verbose, a bar over the samples
        with scaled_delta(self.model_, 1.0 / rate_ratio), self._progress(len(inputs), "predict") as update:
            out = predict_batches(
                self.model_, inputs, self.batch_size, resolve_device(self.device), forward, progress=update
            )
        bad = ~torch.isfinite(out.reshape(len(out), -1)).all(dim=1)
        if bad.any():
            largest = float(inputs.x.abs().amax()) if isinstance(inputs.x, torch.Tensor) and len(inputs.x) else math.nan
            raise FloatingPointError(
                f"{type(self).__name__} computed non-finite outputs for {int(bad.sum())} of {len(out)} samples. "
                f"Likely causes: inputs far outside the training data (largest |x| after the training scaling: "
                f"{largest:.3g}), a sample rate far from the training rate (every Delta x {1.0 / rate_ratio:.3g}), "
                "or a model whose training diverged"
            )
        return out

    def _below_fitted_rates(self, ratio: float) -> bool:
        """Whether data at `ratio` x the training rate lies below every rate the model was fitted at (the
        faces' `_lowest_fitted_rate`); a model fitted without sample_rate has ratio 1, never below."""
        return ratio < 1.0 and ratio * float(self.train_sample_rate_) < self._lowest_fitted_rate() * (1 - 1e-9)

    def _warn_if_below_fitted_rates(self, ratio: float) -> None:
        """An ExtrapolationWarning for data below every rate the model was fitted at, with the modes of its
        SSMs above that rate's Nyquist frequency (`_modes_above_nyquist` under the rescaled Delta) and what
        the face says it costs (`_below_fitted_rates_consequence`)."""
        if not self._below_fitted_rates(ratio):
            return
        lowest, rate = self._lowest_fitted_rate(), ratio * float(self.train_sample_rate_)
        with scaled_delta(self.model_, 1.0 / ratio):
            above, modes = self._modes_above_nyquist()
        warnings.warn(
            f"{type(self).__name__}: X at sample_rate={rate:.6g} lies below {lowest:.6g}, "
            + self._below_fitted_rates_consequence(lowest, above, modes),
            ExtrapolationWarning,
            stacklevel=caller_stacklevel(),
        )

    @contextlib.contextmanager
    def _progress(self, total: int, what: str):
        """With verbose, a progress bar over `total` series on stderr ("<estimator>: <what>"), yielding its
        update; without, no bar (tqdm starts a monitor thread even for a disabled one) and None."""
        if not getattr(self, "verbose", 0):
            yield None
            return
        with tqdm(total=total, desc=f"{type(self).__name__}: {what}", unit="series") as bar:
            yield bar.update

    def _refuse_beyond_limit(self, x) -> None:
        """Refuse rows with values beyond SCALED_LIMIT after the training scaling, where a network's float32
        arithmetic overflows or, with batch normalization (no per-step normalization), answers from
        saturated units: predict and an exported file refuse the same rows. x: (n, channels, length)."""
        if not len(x):
            return

        # in blocks of rows, keeping only their maxima: a memory map (LazyRows) is read as predict reads it,
        # and a large X in memory gets no |x| copy of its size
        def block(start: int) -> torch.Tensor:
            stop = min(start + 256, len(x))
            return x[np.arange(start, stop)].materialize() if isinstance(x, LazyRows) else x[start:stop]

        largest = torch.cat([_row_maxima(block(start)) for start in range(0, len(x), 256)])
        rows = torch.nonzero(largest > SCALED_LIMIT).flatten().tolist()
        if rows:
            raise ValueError(
                f"{type(self).__name__}: rows {rows[:10]}{' ...' if len(rows) > 10 else ''} of X reach "
                f"{float(largest.max()):.3g} after the training scaling, beyond {SCALED_LIMIT:.0e}: far outside "
                "the training data, where the network answers nothing meaningful; rescale the data "
                "(normalize='series' compares shapes only)"
            )

    def _fitted_param(self, name: str):
        """A parameter as the model was fitted with it (set_params after fit describes no fitted model),
        or as set now for an estimator that does not record it (a pickle from before it did)."""
        return getattr(self, "_fitted_params_", {}).get(name, getattr(self, name))

    # ------------------------------------------------------------ persistence
    def __getstate__(self):
        return pickle_state(self)  # model_ on the CPU

    # Fitted attributes written by `save` (besides the weights); subclasses add theirs.
    _saved_attributes = (
        "n_features_in_",
        "n_channels_in_",
        "n_timepoints_in_",
        "input_ndim_",
        "normalization_",
        "input_range_",
        "input_mean_",
        "input_scale_",
        "train_sample_rate_",
        "history_",
        "n_iter_",
        "best_epoch_",
        "lowest_trained_rate_",
        "_seed_",
        "feature_names_in_",
    )

    def save(self, path: str | Path, *, format: str = "safetensors", key: bytes | str | None = None) -> Path:
        """Save the fitted estimator.

        format="safetensors" (default): one file holding the weights (safetensors) and a JSON
        of parameters, fitted attributes, versions and a checksum; `load` runs no code from it.
        The checksum detects a damaged file or an accidental edit, not someone who edits the file
        and computes it again; key (bytes or a str, a secret) adds an HMAC-SHA256 signature, and
        `load(path, key=...)` refuses the file unless it matches.
        format="joblib": a pickle, as joblib.dump writes it. Loading a pickle RUNS CODE from the
        file: load only pickles you made or trust. Both load on CPU-only machines.
        """
        if format == "safetensors":
            return save_estimator(self, path, key)
        if key is not None:
            raise ValueError(f"key= signs the 'safetensors' format; format={format!r} cannot be signed")
        if format == "joblib":
            path = Path(path)
            joblib.dump(self, path)
            return path
        raise ValueError(f"unknown format {format!r}; choose 'safetensors' or 'joblib'")

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        format: str = "safetensors",
        allow_format_1: bool = False,
        key: bytes | str | None = None,
    ):
        """Load an estimator written by `save`, checking that it is an instance of this class.

        format="safetensors" executes no code from the file, refuses a damaged or accidentally
        edited file (checksum) and warns when it was written by other ssmts/torch versions. With
        key, the key `save` signed with, it also refuses a file edited on purpose (its checksum
        recomputed) or signed with another key; a signed file needs its key. Files of the first
        save format, whose checksum does not cover the header, load only with allow_format_1=True.
        format="joblib" unpickles, which RUNS CODE from the file: only for files you trust.
        """
        if format == "safetensors":
            return load_estimator(cls, path, allow_format_1, key)
        if key is not None:
            raise ValueError(f"key= checks the signature of the 'safetensors' format; format={format!r} has none")
        if format != "joblib":
            raise ValueError(f"unknown format {format!r}; choose 'safetensors' or 'joblib'")
        try:
            obj = joblib.load(path)
        except (FileNotFoundError, IsADirectoryError):
            raise
        except Exception as error:  # noqa: BLE001 - joblib raises whatever the unpickled bytes make of it
            hint = " (it is a safetensors file: load it with the default format)" if is_safetensors(path) else ""
            raise ValueError(f"cannot read {path} as a joblib file{hint}: {type(error).__name__}: {error}") from error
        if not isinstance(obj, cls):
            raise TypeError(f"{path} holds a {type(obj).__name__}, not a {cls.__name__}")
        return obj

    # ------------------------------------------------------------ export
    def export(
        self, path: str | Path, format: str = "onnx", *, max_length: int | None = None, sample_rate=None
    ) -> Path:
        """Write the fitted estimator as one file that serves without ssmts: an ONNX graph (run it
        with onnxruntime, from any language) or a TorchScript module (``torch.jit.load``).

        Input ``X``: float32 (batch, channels, length), the layout of predict's 3-D X (a univariate
        2-D X is X[:, None, :]), every series of a batch of one length, 1 <= length <= max_length
        (longer input is refused at run time). Series of different lengths: one call per length
        (or per series); each gives what predict gives on a ragged list.
        Outputs: SSMClassifier ``probabilities`` (= predict_proba, float32) and ``label_index``
        (int64, the index in ``classes_``; the labels are in the metadata ``classes``, a JSON list);
        SSMRegressor ``predictions`` (= predict, float64, in the units of y); SSMTransformer
        ``embeddings`` (= transform, float32); last, for every face, ``valid`` (bool, per row): False
        where predict would refuse the row (NaN or inf in it, values beyond 1e18 after the training
        scaling, or outputs that are not finite), whose outputs are then NaN and label_index -1.
        The ONNX metadata_props (TorchScript: the extra file
        ``ssmts.json``) also record the estimator, max_length, the sample rate and the input layout.

        The file holds the fitted input scaling (normalize, any of its forms), the network with every
        SSM layer as a direct convolution whose kernel is computed once for max_length steps
        (ssmts.nn.export), and the outputs' post-processing (softmax, target units). Its outputs equal
        the estimator's to float32 rounding (the FFT and the direct convolution round differently).

        max_length: the longest input the file takes (default: the longest training series, times the
            rate ratio at another sample_rate). Storage and compute of every layer grow with it:
            d_model^2 / heads taps per step of max_length (twice bidirectional).
        sample_rate: the rate of the data the file will read (default: the estimator's sample_rate);
            a rate other than the training rate is baked into the kernels (Delta x training rate /
            sample_rate), as predict(X, sample_rate=...) does.
        format: "onnx" (opset 18; needs the onnx and onnxscript packages: pip install 'ssmts[export]')
            or "torchscript" (torch.jit.trace, which PyTorch 2.11 marks deprecated: prefer ONNX).

        Not exported: layer="lncde" (input-dependent transitions, no fixed kernel), the feature
        estimators (their pooled counts of steps above thresholds would flip with rounding), and the
        streaming mode (`stream`): the graph reads whole series; its SSM state is complex and a
        step-by-step graph would need its own recurrence. Checks of predict that are not part of the
        graph: ExtrapolationWarning (values beyond the training range that predict still answers), the
        2-D training length.
        """
        check_is_fitted(self, "model_")
        name = type(self).__name__
        check_format(format)
        output_names, outputs, extra = self._export_outputs()
        output_names = (*output_names, VALID_NAME)
        ratio = self._rate_ratio(sample_rate)
        if max_length is None:
            max_length = max(1, math.ceil(self.n_timepoints_in_ * ratio - 1e-9))
        elif isinstance(max_length, bool) or not isinstance(max_length, numbers.Integral) or max_length < 1:
            raise ValueError(f"max_length must be a positive integer, got {max_length!r}")
        max_length = int(max_length)
        network = serving_network(self.model_, max_length, name, delta_factor=1.0 / ratio)
        model = ServingModel(self._standardizer(), network, outputs, max_length, self.n_channels_in_)
        rate = self.sample_rate if sample_rate is None else sample_rate
        metadata = export_metadata(self, output_names, max_length, rate, extra)
        path = Path(path)
        write_serving_file(model, path, format, self.n_channels_in_, output_names, metadata)
        return path

    def _export_outputs(self) -> tuple[tuple[str, ...], Callable, dict[str, str]]:
        """(output names, outputs(network, x) -> tuple of tensors, extra metadata) of an exported model."""
        raise NotImplementedError(f"{type(self).__name__} has no export")

    def _restore_after_load(self) -> None:
        """Derived state that `load` rebuilds from the saved attributes (subclasses)."""

    def _rebuild_network(self) -> torch.nn.Module:
        """An untrained network of the fitted shape, for `load` to fill with the saved weights."""
        raise NotImplementedError

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        tags.input_tags.allow_nan = False
        tags.input_tags.three_d_array = True
        return tags


CONTINUED_FIT_PARAMS = frozenset(
    {
        "batch_size", "callbacks", "class_weight", "compile", "device", "distributed", "early_stopping",
        "half_rate_share", "label_smoothing", "lr", "lr_ssm", "max_epochs", "max_steps", "min_steps",
        "n_iter_no_change", "objective", "precision", "sample_rate", "scheduler", "tol", "validation_fraction",
        "verbose", "warm_start", "weight_decay",
    }
)  # fmt: skip
"""The parameters a continued fit (warm_start, partial_fit) takes as they are set now: how to train and
run, not what was built. Every other one made the fitted network (its architecture, initialization,
optimizer, seed) or its input scaling, which a continued fit keeps; `objective` has its own check."""


class NetworkFitMixin:
    """The fit set-up of every face that trains a network (the estimators and the forecaster):
    parameter checks, the seed, and the one call of fit_model whose result becomes the fitted
    attributes model_, history_, training_state_, n_iter_ and best_epoch_ (only when training
    succeeds). best_epoch_ is the epoch of history_ whose weights model_ holds: the one early
    stopping kept (its validation score the best by more than tol), else the last."""

    def _start_fit(self, continue_training: bool = False) -> None:
        self.validate_params()
        self.backbone_kwargs()  # cross-parameter checks
        resolve_device(self.device)
        if continue_training:
            self._refuse_changes_to_the_fitted_network()
        if not continue_training or not hasattr(self, "_seed_"):
            self._seed_ = seed_from(self.random_state)

    def _refuse_changes_to_the_fitted_network(self) -> None:
        """A continued fit trains model_ on as it was built: a parameter that built it (or the scaling)
        set to another value since would be ignored, and recorded as fitted."""
        fitted = getattr(self, "_fitted_params_", {})
        # the optimizer and the seed go on from the fit's state; a loaded model has neither and takes them anew
        carried = {"optimizer": "training_state_", "random_state": "_seed_"}
        changed = [
            name
            for name, value in fitted.items()
            if name not in CONTINUED_FIT_PARAMS
            and not (name in carried and getattr(self, carried[name], None) is None)
            and not same_param(getattr(self, name, value), value)
        ]
        if changed:
            built = ", ".join(f"{k}={fitted[k]!r}" for k in changed)
            now = ", ".join(f"{k}={getattr(self, k)!r}" for k in changed)
            were, them = ("was", "it") if len(changed) == 1 else ("were", "them")
            raise ValueError(
                f"{type(self).__name__}: a continued fit (warm_start=True, partial_fit) trains the fitted network on "
                f"as it was built, with {built}, but {now} {were} set since. Set {them} back, or fit a new "
                "network (fit with warm_start=False)"
            )

    def _train_network(
        self,
        network: Callable | torch.nn.Module,
        train: SequenceData,
        loss_fn,
        *,
        validation: SequenceData | float | None = None,
        score_fn=None,
        stratify=None,
        epochs: int | None = None,
        continue_training: bool = False,
        seed: int | None = None,
        delta_factor: float = 1.0,
        settings: dict | None = None,
    ) -> None:
        """network: a factory called under the seed (or a module); validation: held-out data, a
        fraction to hold out, or None. continue_training: go on from model_ and the stored
        optimizer state, with a schedule of `epochs` (seed: that run's, default the fit's).
        settings: training parameters to use instead of the estimator's own."""
        state = getattr(self, "training_state_", None) if continue_training else None
        before = list(getattr(self, "history_", None) or []) if continue_training else []
        if continue_training:
            network = copy.deepcopy(self.model_)  # a failed or interrupted fit leaves model_ as it was
        monitored = self.early_stopping and validation is not None
        # a continued run competes with the weights it starts from: it can only end at or above them
        stopping = EarlyStopping(self.n_iter_no_change, self.tol, from_start=continue_training) if monitored else None
        callbacks = list(self.callbacks or ())
        result = fit_model(
            network,
            train,
            loss_fn,
            TrainerConfig.from_params(self, **(settings or {})),
            seed=self._seed_ if seed is None else seed,
            score_fn=score_fn,
            validation=validation,
            stratify=stratify,
            early_stopping=stopping,
            callbacks=callbacks,
            # A copy: the optimizer steps its moments in place, and an interrupted continuation must
            # leave the stored state as it was (the next continuation starts from it again).
            resume=copy.deepcopy(state),
            # a loaded model (save keeps no optimizer state): its epochs are numbered on from the file's
            history=before if continue_training and state is None else None,
            epochs=epochs,
            delta_factor=delta_factor,
            description=type(self).__name__,
            run_params={"estimator": type(self).__name__, **self.get_params(deep=False)},
        )
        self.model_, self.history_, self.training_state_ = result.model, result.history, result.state
        self.n_iter_ = len(result.history)
        self.best_epoch_ = _kept_epoch([*callbacks, stopping], len(before), getattr(self, "best_epoch_", None))
        if self.best_epoch_ is None:
            self.best_epoch_ = self.n_iter_


def _kept_epoch(callbacks: list, start: int, start_kept: int | None) -> int | None:
    """The epoch whose weights a run ends on, as its EarlyStopping callbacks restored them (the last to
    restore wins: they restore in the order they are called); None when none restored (the last
    epoch). A run that kept the weights it started from (epoch `start`) holds what they held:
    `start_kept`, the epoch the previous run kept."""
    restoring = [c for c in callbacks if isinstance(c, EarlyStopping) and c.restore_best and c.best_epoch is not None]
    if not restoring:
        return None
    kept = int(restoring[-1].best_epoch)
    if kept == start > 0:  # the start's weights
        return start if start_kept is None else start_kept
    return kept


def _row_maxima(x: torch.Tensor) -> torch.Tensor:
    """The largest |value| of each row: x (n, ...) -> (n,)."""
    return x.abs().flatten(1).amax(1)


class SSMEstimatorMixin(NetworkFitMixin, SequenceEstimatorMixin, SequenceModelParams, ContinuationParams):
    """Fitting and streaming of the estimators whose `model_` is a head of ssmts.nn.heads over a
    trained SSMBackbone (`model_.backbone`), through the one fit path."""

    # ------------------------------------------------------------ rates below the training rate
    def _lowest_fitted_rate(self) -> float:
        """The lowest rate the network was trained at (lowest_trained_rate_; files saved before it: the
        training rate, or half of it with half-rate batches)."""
        lowest = getattr(self, "lowest_trained_rate_", None)
        if lowest is not None:
            return float(lowest)
        train = float(self.train_sample_rate_)
        return train / 2 if self._fitted_param("half_rate_share") > 0 else train

    def _modes_above_nyquist(self) -> tuple[int, int]:
        counts = [layer.modes_above_nyquist() for layer in self.model_.modules() if isinstance(layer, SSM)]
        return sum(above for above, _ in counts), sum(modes for _, modes in counts)

    def _below_fitted_rates_consequence(self, lowest: float, above: int, modes: int) -> str:
        train = float(self.train_sample_rate_)
        beyond = f", and {above} of the {modes} modes of its SSMs lie above this rate's Nyquist frequency"
        return (
            f"the lowest rate its network was trained at (the training rate is {train:.6g}): the data has lost "
            "the band above half of this rate, which the training data held"
            + (beyond if modes else "")  # a LinearCDE network has no modes
            + ". Expect a lower accuracy than at the training rate: measure it on labelled data at this rate"
            + ("" if lowest < train else ", or fit with half_rate_share=0.5 to hold it down to half the training rate")
        )

    # ------------------------------------------------------------ network
    def _network(self, d_input: int, d_output: int | None, pooling: str | None = None) -> SequenceHead:
        return SequenceHead(self.build_backbone(d_input), d_output, pooling or self.pooling)

    # ------------------------------------------------------------ fitting
    def _fit_network(
        self,
        data: PreparedInput,
        y: torch.Tensor,
        *,
        d_output: int | None,
        loss_fn,
        score_fn=None,
        weight: torch.Tensor | None = None,
        stratify=None,
        epochs: int | None = None,
        continue_training: bool = False,
        network: Callable | None = None,
        per_step: bool = False,
    ) -> None:
        """Train through fit_model; the fitted attributes change only when training succeeds.
        per_step: outputs and targets per step (otherwise batches are cut at their last real step)."""
        ratio = self._rate_ratio(None) if continue_training else 1.0
        self._train_network(
            network or (lambda: self._network(self._network_channels, d_output)),
            SequenceData(self._scaled(data), y, data.mask, weight, crop_padding=not per_step),
            loss_fn,
            score_fn=score_fn,
            # partial_fit (one epoch, epochs=1) trains on all it is given: a hold-out of every call could stop
            # nothing and would cost it a tenth of its data (scikit-learn's MLP does the same)
            validation=self.validation_fraction if self.early_stopping and epochs is None else None,
            stratify=stratify,
            epochs=epochs,
            continue_training=continue_training,
            delta_factor=1.0 / ratio,
        )
        if not continue_training:
            self.train_sample_rate_ = self.sample_rate
        self._record_trained_rate(ratio, continue_training)

    def _record_trained_rate(self, ratio: float, continued: bool) -> None:
        """lowest_trained_rate_: the lowest rate the network has been trained at over its fits, this one's
        at `ratio` x the training rate (half of it with half-rate batches); None without sample_rate."""
        if self.train_sample_rate_ is None:
            self.lowest_trained_rate_ = None
            return
        rate = float(self.train_sample_rate_) * ratio * (0.5 if self.half_rate_share > 0 else 1.0)
        self.lowest_trained_rate_ = min(self._lowest_fitted_rate(), rate) if continued else rate

    # ------------------------------------------------------------ streaming
    @torch.no_grad()
    def _stream_outputs(self, X_new, state: StreamState | None, sample_rate) -> tuple[torch.Tensor, StreamState]:
        """Per-step network outputs (n, k, d_output) for k new steps of n streams, continuing `state`.

        The pooled output after each step is what predict gives on the prefix up to that step:
        the block states carry the recurrence, and for mean pooling the running sum carries the mean.
        """
        check_is_fitted(self, "model_")
        backbone = self.model_.backbone
        if any(getattr(block.ssm, "bidirectional", False) for block in backbone.blocks):  # LinearCDE: causal
            raise ValueError(
                f"streaming needs a causal model, but this {type(self).__name__} was fitted with "
                f"bidirectional={self._fitted_param('bidirectional')!r}"
            )
        if self.normalization_ in PER_SERIES_NORMALIZATIONS:
            raise ValueError(
                f"streaming cannot standardize a series by statistics of steps not seen yet: this "
                f"{type(self).__name__} was fitted with normalize={self.normalization_!r}; fit with "
                "normalize='channel' or 'none' to stream"
            )
        ratio = self._rate_ratio(sample_rate)
        data = prepare_input(X_new)
        if data.ndim == 2 and not data.ragged:  # (n, k): k new steps of n univariate streams
            data = prepare_input(np.asarray(X_new, dtype=np.float64)[:, None, :])
        if data.mask is not None:
            raise ValueError("stream takes the same number of new steps for every stream (no ragged lists)")
        if data.x.shape[1] != self.n_channels_in_:
            raise ValueError(
                f"X has {data.x.shape[1]} channels, but {type(self).__name__} was fitted with "
                f"{self.n_channels_in_} channels"
            )
        if state is not None and (not isinstance(state, StreamState) or state.fit_id != self._stream_fit_id):
            raise ValueError(
                f"this state was not returned by this {type(self).__name__}'s stream() since its last "
                "fit (another model, or this one before a refit or load); start again with state=None"
            )
        if state is not None and state.n_streams != len(data.x):
            raise ValueError(f"the state holds {state.n_streams} streams, but X has {len(data.x)}")
        # predict's guards, on the new steps: what it warns of or refuses, a stream does too
        self._warn_if_far_outside_training(data)
        x = self._scaled(data)
        x = x.materialize() if isinstance(x, LazyRows) else x
        self._refuse_beyond_limit(x)
        self._warn_if_below_fitted_rates(ratio)
        device = resolve_device(self.device)
        on_device(self.model_, device).eval()
        x = x.to(device)
        k = x.shape[-1]
        with scaled_delta(self.model_, 1.0 / ratio):
            if k <= STREAM_STEP_MAX:
                # A few new steps: the recurrent step (its discretization cached) costs less than an FFT pass.
                blocks = backbone.initial_state(len(x)) if state is None else state.blocks
                steps = []
                for t in range(k):
                    step_features, blocks = backbone.step(x[..., t], blocks)
                    steps.append(step_features)
                features = torch.stack(steps, -1)
            else:
                features, blocks = backbone.forward_with_state(x, None if state is None else state.blocks)
        if self.model_.pooling == "last":
            pooled, total, count = features, None, (0 if state is None else state.count) + k
        else:
            previous = 0.0 if state is None else state.total[..., None]
            start = 0 if state is None else state.count
            running = features.cumsum(-1) + previous
            pooled = running / torch.arange(start + 1, start + k + 1, device=device, dtype=features.dtype)
            total, count = running[..., -1], start + k
        outputs = channel_linear(self.model_.decoder, pooled).transpose(1, 2).cpu()
        bad = ~torch.isfinite(outputs.reshape(len(outputs), -1)).all(dim=1)
        if bad.any():
            raise FloatingPointError(
                f"{type(self).__name__}.stream computed non-finite outputs for {int(bad.sum())} of {len(outputs)} "
                "streams: inputs far outside the training data, or a sample rate far from the training rate"
            )
        return outputs, StreamState(blocks, total, count, len(data.x), self._stream_fit_id)

    @property
    def _stream_fit_id(self) -> str:
        """The fit a stream state belongs to (a loaded estimator gets its own on first use)."""
        if not getattr(self, "_fit_id_", ""):
            self._fit_id_ = uuid.uuid4().hex
        return self._fit_id_
