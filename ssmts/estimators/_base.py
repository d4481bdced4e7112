"""Shared machinery of the scikit-learn estimators: parameters, input handling, the
sample-rate logic of zero-shot resampling, persistence, and fitting through the one Trainer."""
from __future__ import annotations

import copy
import numbers
import warnings
from pathlib import Path

import joblib
import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.model_selection import train_test_split
from sklearn.utils.validation import check_is_fitted

from ..nn import SSMBackbone
from ..training import SequenceData, Trainer, resolve_device
from ._input import PreparedInput, prepare_input

# Constructor parameters shared by every ssmts estimator (sklearn and sktime faces),
# with their defaults. One place, so the faces cannot drift apart.
BACKBONE_DEFAULTS = dict(
    d_model=64,
    d_state=64,
    n_layers=4,
    heads=1,
    bidirectional=False,
    init="legs",
    discretization="zoh",
    dropout=0.0,
    norm="layer",
    prenorm=True,
    activation="gated_gelu",
    pooling="mean",
    dt_min=1e-3,
    dt_max=1e-1,
)
TRAINING_DEFAULTS = dict(
    max_epochs=50,
    batch_size=32,
    lr=3e-3,
    lr_ssm=1e-3,
    weight_decay=0.01,
    optimizer="adamw",
    scheduler="cosine",
    early_stopping=False,
    validation_fraction=0.1,
    n_iter_no_change=10,
    tol=1e-4,
    warm_start=False,
    scale_input=True,
    device="auto",
    random_state=None,
    verbose=0,
    sample_rate=None,
)


def _backbone_of(model: torch.nn.Module) -> SSMBackbone:
    """The SSMBackbone inside an estimator's network (the network itself, or its .backbone)."""
    return model if isinstance(model, SSMBackbone) else model.backbone


def require_y(estimator, y) -> None:
    if y is None:
        raise ValueError(f"{type(estimator).__name__} requires y to be passed, but the target y is None")


def make_trainer(estimator, model: torch.nn.Module, loss_fn, *, max_epochs: int | None = None,
                 score_fn=None) -> Trainer:
    """The shared Trainer, configured from an estimator's training parameters (TRAINING_DEFAULTS)
    and its seed `_seed_`; max_epochs overrides the estimator's (e.g. for fine-tuning)."""
    return Trainer(
        model,
        loss_fn,
        optimizer=estimator.optimizer,
        lr=estimator.lr,
        lr_ssm=estimator.lr_ssm,
        weight_decay=estimator.weight_decay,
        scheduler=estimator.scheduler,
        max_epochs=estimator.max_epochs if max_epochs is None else max_epochs,
        batch_size=estimator.batch_size,
        early_stopping=estimator.early_stopping,
        n_iter_no_change=estimator.n_iter_no_change,
        tol=estimator.tol,
        device=estimator.device,
        verbose=estimator.verbose,
        random_state=estimator._seed_,
        score_fn=score_fn,
        description=type(estimator).__name__,
    )


def seed_from(random_state) -> int:
    """An int seed from None / int / np.random.RandomState (sklearn's random_state forms)."""
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1)[0])
    if isinstance(random_state, numbers.Integral):
        return int(random_state) % (2**32)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    raise ValueError(f"random_state must be None, an int or a numpy RandomState, got {random_state!r}")


class SSMEstimatorMixin:
    """Fitting, prediction plumbing and persistence for estimators holding `model_`."""

    _estimator_kind = "estimator"

    # ------------------------------------------------------------ parameters
    def _backbone_kwargs(self) -> dict:
        return {name: getattr(self, name) for name in BACKBONE_DEFAULTS}

    def _check_training_params(self) -> None:
        if not (isinstance(self.max_epochs, numbers.Integral) and self.max_epochs >= 1):
            raise ValueError(f"max_epochs must be an integer >= 1, got {self.max_epochs!r}")
        if not (isinstance(self.batch_size, numbers.Integral) and self.batch_size >= 1):
            raise ValueError(f"batch_size must be an integer >= 1, got {self.batch_size!r}")
        if not 0.0 < self.validation_fraction < 1.0:
            raise ValueError(f"validation_fraction must lie in (0, 1), got {self.validation_fraction}")
        if self.sample_rate is not None and not self.sample_rate > 0:
            raise ValueError(f"sample_rate must be > 0 or None, got {self.sample_rate}")
        resolve_device(self.device)

    def _build_backbone(self, d_input: int, d_output: int | None, *, pooling: str | None = None, vocab_size=None) -> SSMBackbone:
        kwargs = self._backbone_kwargs()
        if pooling is not None:
            kwargs["pooling"] = pooling
        d_model, n_layers = kwargs.pop("d_model"), kwargs.pop("n_layers")
        return SSMBackbone(d_input, d_model, n_layers, d_output, vocab_size=vocab_size, **kwargs)

    def _make_trainer(self, model: torch.nn.Module, loss_fn, score_fn=None) -> Trainer:
        return make_trainer(self, model, loss_fn, score_fn=score_fn)

    # ------------------------------------------------------------ input
    def _prepare_fit_input(self, X) -> PreparedInput:
        data = prepare_input(X)
        self.n_features_in_ = data.n_features
        self.n_channels_in_ = data.x.shape[1]
        self.n_timepoints_in_ = int(data.lengths.max())
        self.input_ndim_ = data.ndim
        if self.scale_input:
            x = data.x.double()
            if data.mask is None:
                mean, std = x.mean(dim=(0, 2)), x.std(dim=(0, 2), unbiased=False)
            else:
                m = data.mask[:, None, :].double()
                count = m.sum()
                mean = (x * m).sum(dim=(0, 2)) / count
                std = torch.sqrt((((x - mean[None, :, None]) ** 2) * m).sum(dim=(0, 2)) / count)
            std = torch.where(std > 1e-12, std, torch.ones_like(std))
            self.input_mean_, self.input_scale_ = mean.numpy(), std.numpy()
        else:
            self.input_mean_ = np.zeros(self.n_channels_in_)
            self.input_scale_ = np.ones(self.n_channels_in_)
        return data

    def _prepare_predict_input(self, X, rate_ratio: float) -> PreparedInput:
        check_is_fitted(self, "model_")
        data = prepare_input(X)
        name = type(self).__name__
        if data.x.shape[1] != self.n_channels_in_:
            raise ValueError(
                f"X has {data.x.shape[1]} channels, but {name} was fitted with {self.n_channels_in_} channels"
            )
        if data.ndim == 2 and self.input_ndim_ == 2 and not data.ragged:
            # A 2D row's columns are sklearn "features" (timepoints); at the training rate their
            # number is fixed, at another rate it scales with the rate.
            expected = self.n_features_in_ * rate_ratio
            if rate_ratio == 1.0 and data.n_features != self.n_features_in_:
                raise ValueError(
                    f"X has {data.n_features} features, but {name} is expecting {self.n_features_in_} features as input"
                )
            if rate_ratio != 1.0 and abs(data.n_features - expected) > max(1.0, 0.01 * expected):
                raise ValueError(
                    f"X has {data.n_features} timepoints, but at this sample rate {name} expects about "
                    f"{expected:.0f} ({self.n_features_in_} at the training rate {self.train_sample_rate_})"
                )
        return data

    def _scaled(self, data: PreparedInput) -> torch.Tensor:
        mean = torch.as_tensor(self.input_mean_, dtype=torch.float32)[None, :, None]
        scale = torch.as_tensor(self.input_scale_, dtype=torch.float32)[None, :, None]
        x = (data.x - mean) / scale
        if data.mask is not None:
            x = x * data.mask[:, None, :]
        return x

    # ------------------------------------------------------------ sample rate
    def _rate_ratio(self, sample_rate) -> float:
        """new rate / training rate for data passed at `sample_rate` (or the current `sample_rate`)."""
        check_is_fitted(self, "model_")
        rate = self.sample_rate if sample_rate is None else sample_rate
        train = getattr(self, "train_sample_rate_", None)
        if rate is None or (train is None and sample_rate is None):
            return 1.0
        if not (isinstance(rate, numbers.Real) and rate > 0):
            raise ValueError(f"sample_rate must be a positive number, got {rate!r}")
        if train is None:
            raise ValueError(
                f"{type(self).__name__} was fitted without sample_rate, so data at sample_rate={rate} cannot be "
                "rescaled; set sample_rate before fit"
            )
        return float(rate) / float(train)

    # ------------------------------------------------------------ fitting
    def _fit_network(self, data: PreparedInput, y: torch.Tensor, *, d_output: int, loss_fn, score_fn=None,
                     weight: torch.Tensor | None = None, stratify=None, epochs: int | None = None,
                     continue_training: bool = False, network_factory=None):
        """Build (or reuse) the network and train it. Returns the trainer."""
        self._check_training_params()
        torch_seed = self._seed_
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(torch_seed)
            if not continue_training:
                factory = network_factory or (lambda: self._build_backbone(self.n_channels_in_, d_output))
                self.model_ = factory()
                self.train_sample_rate_ = self.sample_rate
            x = self._scaled(data)
            full = SequenceData(x, y, data.mask, weight)
            train, val = full, None
            if self.early_stopping:
                index = np.arange(len(full))
                try:
                    tr, va = train_test_split(index, test_size=self.validation_fraction, random_state=torch_seed,
                                              stratify=stratify)
                except ValueError:
                    tr, va = train_test_split(index, test_size=self.validation_fraction, random_state=torch_seed)
                train, val = full.take(torch.from_numpy(tr)), full.take(torch.from_numpy(va))
            trainer = self._make_trainer(self.model_, loss_fn, score_fn)
            if continue_training and getattr(self, "optimizer_state_", None) is not None:
                try:
                    trainer.optimizer.load_state_dict(self.optimizer_state_)
                except (ValueError, KeyError):
                    warnings.warn("could not restore the optimizer state; continuing with a fresh optimizer")
            trainer.epochs_done = len(getattr(self, "history_", [])) if continue_training else 0
            trainer.history = list(getattr(self, "history_", [])) if continue_training else []
            # The model's dt_scale must be the training one while training.
            _backbone_of(self.model_).dt_scale = 1.0
            trainer.fit(train, val, epochs=epochs)
        self.model_.eval()
        self.history_ = trainer.history
        self.n_iter_ = len(trainer.history)
        self.optimizer_state_ = trainer.optimizer_state_cpu()
        return trainer

    def _start_fit(self, continue_training: bool) -> None:
        if not continue_training or not hasattr(self, "_seed_"):
            self._seed_ = seed_from(self.random_state)

    @torch.no_grad()
    def _run(self, data: PreparedInput, rate_ratio: float, forward) -> torch.Tensor:
        """forward(model, x, mask) over batches with Delta rescaled by train/new rate; CPU output."""
        device = resolve_device(self.device)
        model = self.model_.to(device)
        model.eval()
        backbone = _backbone_of(model)
        previous = backbone.dt_scale
        backbone.dt_scale = 1.0 / rate_ratio
        try:
            x = self._scaled(data)
            outs = []
            size = max(int(self.batch_size), 64)
            for start in range(0, len(x), size):
                xb = x[start : start + size].to(device)
                mb = None if data.mask is None else data.mask[start : start + size].to(device)
                outs.append(forward(model, xb, mb).cpu())
            return torch.cat(outs)
        finally:
            backbone.dt_scale = previous

    # ------------------------------------------------------------ persistence
    def __getstate__(self):
        state = self.__dict__.copy()
        if "model_" in state:
            # A model trained on a GPU must unpickle on a CPU-only machine.
            state["model_"] = copy.deepcopy(state["model_"]).cpu()
        return state

    def save(self, path: str | Path) -> Path:
        """Save the fitted estimator with joblib (loadable on CPU-only machines)."""
        path = Path(path)
        joblib.dump(self, path)
        return path

    @classmethod
    def load(cls, path: str | Path):
        """Load an estimator saved with `save`; checks that it is an instance of this class."""
        obj = joblib.load(path)
        if not isinstance(obj, cls):
            raise TypeError(f"{path} holds a {type(obj).__name__}, not a {cls.__name__}")
        return obj

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        tags.input_tags.allow_nan = False
        tags.input_tags.three_d_array = True
        return tags
