"""Every backbone and training parameter of ssmts, declared once (see ssmts.training.config).

Groups, and who takes them:

    BackboneParams       every estimator, task presets        (SSMBackbone architecture)
    SequenceParams       sequence-level estimators            (pooling, input scaling)
    OptimizerParams      every estimator, TrainerConfig       (optimizer, epochs, device, seed, precision)
    ScheduleParams       TrainerConfig, task presets          (warm-up, plateau, clipping)
    EarlyStoppingParams  every estimator                      (hold-out, patience, callbacks)
    SequenceModelParams  Backbone, Sequence, Optimizer and EarlyStopping params with the sequence-level
                         estimators' defaults
    HalfRateParams       TrainerConfig, ContinuationParams    (training batches read at half their rate)
    ContinuationParams   the scikit-learn estimators          (warm_start, sample_rate, half_rate_share)
    ClassifierParams     the classifiers                      (class weights, label smoothing)
    FeatureParams        the SSM-feature estimators           (time scales, read-outs, difference)
    FeatureBankParams    the bank's parameters of FeatureParams with the few of the groups above that apply
    FeaturePanelParams   FeatureBankParams and the training ones (the sktime feature estimators)
    FeatureModelParams   FeaturePanelParams and sample_rate (the scikit-learn feature estimators)
    FeatureTransformParams  FeatureBankParams and sample_rate (SSMFeatureTransformer)
"""

from __future__ import annotations

import numbers
from typing import Any, Literal

import numpy as np
import torch

from ..nn.backbone import SSMBackbone
from ..nn.blocks import ACTIVATIONS, LAYERS, NORMS
from ..nn.discretization import DISCRETIZATIONS
from ..nn.functional import POOLINGS
from ..nn.init import INITS
from ..nn.lncde import LNCDE_STRUCTURES
from .config import (
    AnyOf,
    Boolean,
    Configurable,
    Integer,
    InvalidParameterError,
    NoneOr,
    Options,
    Real,
    Satisfies,
    _is_int,
    _is_real,
    param,
    params_of,
)

OPTIMIZERS = ("adamw", "adam", "sgd")
SCHEDULERS = ("none", "cosine", "plateau")
NORMALIZATIONS = ("channel", "series", "series+stats", "none")
PRECISIONS = ("32", "bf16-mixed", "16-mixed")
POSITIVE = Real(0, None, closed="neither")


def _is_device(value) -> bool:
    if isinstance(value, torch.device):
        return True
    return isinstance(value, str) and (
        value in ("auto", "cpu", "cuda") or (value.startswith("cuda:") and value[5:].isdigit())
    )


def _is_seed(value) -> bool:
    return (
        value is None
        or isinstance(value, np.random.RandomState)
        # scikit-learn's range (check_random_state): larger ints would wrap onto seeds below 2**32
        or (isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)) and 0 <= value < 2**32)
    )


def _is_callback_list(value) -> bool:
    from .callbacks import Callback

    return value is None or (isinstance(value, (list, tuple)) and all(isinstance(c, Callback) for c in value))


def _is_class_weight(value) -> bool:
    if value is None or (isinstance(value, str) and value == "balanced"):
        return True
    return isinstance(value, dict) and all(
        isinstance(w, numbers.Real) and not isinstance(w, bool) and np.isfinite(w) and w > 0 for w in value.values()
    )


def resolve_device(device: str | torch.device) -> torch.device:
    """'auto' -> cuda when available, else cpu; 'cuda' without a GPU is an error."""
    if isinstance(device, torch.device):
        return device
    if not _is_device(device):
        raise InvalidParameterError(f"unknown device {device!r}; choose 'auto', 'cpu', 'cuda' or 'cuda:N'")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InvalidParameterError(
            f"device={device!r} was requested but no CUDA device is available (a model trained and saved on "
            "a GPU runs here after set_params(device='cpu'), or device='auto', which uses a GPU when there is one)"
        )
    return torch.device(device)


# Defaults of the sequence-level estimators where they differ from the groups' (SequenceModelParams).
SEQUENCE_MODEL_DEFAULTS = dict(n_layers=2, min_steps=500)
# The classifiers' network (SSMClassifier, SSMPanelClassifier): narrower and one block deeper, batch
# normalization after the residual sum, small batches and a high learning rate. Chosen on the
# development protocol (5-fold CV repeated twice on the training splits of the seven development
# sets: docs/results/classification.md#the-classifiers-defaults), where it is more accurate than
# the sequence defaults above and about 8x cheaper a fit on long series.
CLASSIFIER_DEFAULTS = dict(
    SEQUENCE_MODEL_DEFAULTS, d_model=32, d_state=32, n_layers=3, norm="batch", prenorm=False, batch_size=16, lr=1e-2
)
# The regressors' network (SSMRegressor, SSMPanelRegressor): the classifiers' at lr=3e-3. On the regression
# development sets (the same protocol: docs/results/classification.md#the-regressors-defaults) its mean
# relative RMSE is 0.852 against the sequence defaults' 0.901 (better on CardanoSentiment and Tecator, worse
# on Covid3Month; better on 20 of 30 paired folds, not significant), its fits 0.6x as long on Tecator's 100
# steps; the classifiers' lr=1e-2 was worse on Covid3Month (1.307, folds spread +-0.5).
REGRESSOR_DEFAULTS = dict(CLASSIFIER_DEFAULTS, lr=3e-3)

# Parameters that only one layer family reads. A value other than the default with the other
# family's layer is an error (it would be silently ignored otherwise).
SSM_ONLY_PARAMS = (
    "heads",
    "bidirectional",
    "init",
    "discretization",
    "dt_min",
    "dt_max",
    "ptd_eps",
    "ptd_gamma",
    "fixed_transition",
)
LNCDE_ONLY_PARAMS = ("lncde_structure", "lncde_block_size", "lncde_rank", "lncde_dt", "lncde_max_norm")


class BackboneParams(Configurable):
    _params_group = "Backbone"
    d_model: int = param(default=64, doc="Width H of every block.", constraint=Integer(1))
    d_state: int = param(
        default=64,
        doc="State size: N of each SSM head (N/2 complex modes); with layer='lncde' the "
        "hidden size d of each LinearCDE.",
        constraint=Integer(2),
    )
    n_layers: int = param(default=4, doc="Number of blocks.", constraint=Integer(1))
    layer: str = param(
        default="ssm",
        doc="Sequence layer of every block: 'ssm' (diagonal time-invariant SSM) or 'lncde' (SLiCE: a "
        "linear neural CDE with input-dependent structured transitions, ssmts.nn.LinearCDE; "
        "docs/concepts.md#input-dependent-transitions-slice).",
        constraint=Options(*LAYERS),
    )
    heads: int = param(
        default=1,
        doc="SSM only: block-diagonal heads (1 = one MIMO system, d_model = SISO; "
        "docs/concepts.md#heads-from-one-mimo-system-to-stacked-siso-systems).",
        constraint=Integer(1),
    )
    bidirectional: bool | str = param(
        default=False,
        doc="SSM only: causal (False) or non-causal: 'essm'/True (flipped kernel) or 'ldnn' (own backward Lambda; "
        "docs/concepts.md#bidirectional-layers).",
        constraint=Options(False, True, "essm", "ldnn"),
    )
    init: str = param(
        default="legs",
        doc="SSM only: initialization of Lambda, B, C (docs/concepts.md#initialization-hippo-its-normal-part-and-ptd).",
        constraint=Options(*INITS),
    )
    discretization: str = param(
        default="zoh",
        doc="SSM only: continuous-to-discrete map of each mode (docs/concepts.md#discretization-and-the-step-size).",
        constraint=Options(*DISCRETIZATIONS),
    )
    dropout: float = param(
        default=0.0, doc="Dropout after each block's activation.", constraint=Real(0.0, 1.0, closed="left")
    )
    norm: str = param(default="layer", doc="Normalization of each block.", constraint=Options(*NORMS))
    prenorm: bool = param(
        default=True, doc="Normalize before the layer (True) or after the residual sum.", constraint=Boolean()
    )
    activation: str = param(default="gated_gelu", doc="Activation after the layer.", constraint=Options(*ACTIVATIONS))
    dt_min: float = param(
        default=1e-3,
        doc="SSM only: lower end of the log-uniform initial Delta (docs/concepts.md#discretization-and-the-step-size).",
        constraint=POSITIVE,
    )
    dt_max: float = param(
        default=1e-1, doc="SSM only: upper end of the log-uniform initial Delta.", constraint=POSITIVE
    )
    lncde_structure: str = param(
        default="block_diagonal",
        doc="LNCDE only: structure of the transition matrices A^j ('diagonal' is not "
        "maximally expressive; the others are).",
        constraint=Options(*LNCDE_STRUCTURES),
    )
    lncde_block_size: int | None = param(
        default=None,
        doc="LNCDE only, lncde_structure='block_diagonal': size of the dense blocks, a divisor of d_state (None: 4).",
        constraint=NoneOr(Integer(1)),
    )
    lncde_rank: int | None = param(
        default=None,
        doc="LNCDE only, lncde_structure='dplr': rank of the low-rank part (None: 1).",
        constraint=NoneOr(Integer(1)),
    )
    lncde_dt: float = param(
        default=0.1,
        doc="LNCDE only: step of the driving path per sample (scaled by ssmts.nn.scaled_delta).",
        constraint=POSITIVE,
    )
    lncde_max_norm: float | None = param(
        default=1.0,
        doc="LNCDE only: bound on the spectral norm of every transition, in (0, 1]; None: no rescaling.",
        constraint=NoneOr(Real(0.0, 1.0, closed="right")),
    )
    ptd_eps: float = param(
        default=1e-4,
        doc="SSM only, init='ptd': size of the starting perturbation E of the HiPPO-LegS "
        "matrix (the measured ||E||/||A|| is what the optimization ends at; "
        "docs/concepts.md#how-ssmts-finds-the-perturbation).",
        constraint=POSITIVE,
    )
    ptd_gamma: float = param(
        default=1e3,
        doc="SSM only, init='ptd': weight of ||E||/||A|| against log cond(V) in the perturbation's objective.",
        constraint=POSITIVE,
    )
    fixed_transition: bool = param(
        default=False,
        doc="SSM only, LSSL-fixed: freeze Lambda and Delta at their initialization; "
        "B, C, D and the other weights learn.",
        constraint=Boolean(),
    )

    def build_backbone(self, d_input: int, *, vocab_size: int | None = None) -> SSMBackbone:
        """The SSMBackbone of these parameters, without a decoder (a head from ssmts.nn.heads goes on top)."""
        kwargs = self.backbone_kwargs()
        d_model, n_layers = kwargs.pop("d_model"), kwargs.pop("n_layers")
        return SSMBackbone(d_input, d_model, n_layers, None, vocab_size=vocab_size, **kwargs)

    def backbone_kwargs(self) -> dict[str, Any]:
        """SSMBackbone's keyword arguments of this group, checked across parameters: dt_min <= dt_max, the
        options of the other layer family at their defaults, the LinearCDE structure's needs."""
        values = self.param_values(BackboneParams)
        owner = type(self).__name__
        if _is_real(values["dt_min"]) and _is_real(values["dt_max"]) and values["dt_min"] > values["dt_max"]:
            raise InvalidParameterError(
                f"dt_min={values['dt_min']} must not exceed dt_max={values['dt_max']} ({owner})"
            )
        layer = values.pop("layer")
        other = LNCDE_ONLY_PARAMS if layer == "ssm" else SSM_ONLY_PARAMS
        for name in other:
            default = type(self).__params__[name].default
            if not _same(values[name], default):
                raise InvalidParameterError(
                    f"{name}={values[name]!r} only applies to layer={'lncde' if layer == 'ssm' else 'ssm'!r}; with "
                    f"layer={layer!r} leave it at its default {default!r} ({owner})"
                )
        lncde = {name: values.pop(name) for name in LNCDE_ONLY_PARAMS}
        if layer == "ssm":
            return values
        structure, block_size, rank = lncde["lncde_structure"], lncde["lncde_block_size"], lncde["lncde_rank"]
        d = values.pop("d_state")
        if block_size is not None and structure != "block_diagonal":
            raise InvalidParameterError(
                f"lncde_block_size={block_size} needs lncde_structure='block_diagonal', got {structure!r} ({owner})"
            )
        if rank is not None and structure != "dplr":
            raise InvalidParameterError(f"lncde_rank={rank} needs lncde_structure='dplr', got {structure!r} ({owner})")
        if structure == "block_diagonal" and _is_int(d) and _is_int(block_size or 4) and d % (block_size or 4):
            raise InvalidParameterError(
                f"lncde_block_size={block_size or 4}{' (the default)' if block_size is None else ''} must divide "
                f"d_state={d} ({owner})"
            )
        if structure == "walsh_hadamard" and _is_int(d) and d & (d - 1):
            raise InvalidParameterError(
                f"d_state={d} must be a power of two with lncde_structure='walsh_hadamard' ({owner})"
            )
        for name in SSM_ONLY_PARAMS:
            values.pop(name)
        return dict(
            values,
            layer="lncde",
            d_state=d,
            structure=structure,
            block_size=block_size,
            rank=rank,
            dt=lncde["lncde_dt"],
            max_norm=lncde["lncde_max_norm"],
        )


def _same(value, default) -> bool:
    """Whether a value equals a parameter's default (numpy scalars included; True is not 1)."""
    if value is None or default is None:
        return value is default
    if isinstance(value, (bool, np.bool_)) or isinstance(default, (bool, np.bool_)):
        return (
            isinstance(value, (bool, np.bool_))
            and isinstance(default, (bool, np.bool_))
            and bool(value) == bool(default)
        )
    if isinstance(value, numbers.Real) and isinstance(default, numbers.Real):
        return value == default
    return type(value) is type(default) and value == default


class SequenceParams(Configurable):
    pooling: Literal["mean", "last"] = param(
        default="mean", doc="Sequence-to-vector pooling.", constraint=Options(*POOLINGS), group="Backbone"
    )
    normalize: str = param(
        default="channel",
        doc="Input scaling. 'channel': every channel standardized with its mean and standard "
        "deviation over the training data (levels keep their meaning); 'series': every series "
        "and channel standardized with its own (z-normalization: only shapes matter, as in the "
        "UCR archive); 'series+stats': 'series', with each series' level and log-spread (in units of "
        "the training channels) given to the network as two more constant channels, so that "
        "nothing is thrown away; 'none': values as they are.",
        constraint=Options(*NORMALIZATIONS),
        group="Training",
    )


class OptimizerParams(Configurable):
    _params_group = "Training"
    max_epochs: int = param(default=50, doc="Passes over the training data.", constraint=Integer(1))
    min_steps: int = param(
        default=0,
        doc="Least number of optimizer steps of a fit: on small data max_epochs is raised to reach it "
        "(epochs = max(max_epochs, ceil(min_steps / batches per epoch))). 0: exactly max_epochs.",
        constraint=Integer(0),
    )
    max_steps: int | None = param(
        default=None,
        doc="Most optimizer steps of a fit: on large data max_epochs is lowered to stay within it "
        "(at least one epoch); None: no bound.",
        constraint=NoneOr(Integer(1)),
    )
    batch_size: int = param(
        default=32, doc="Sequences per optimizer step (and per prediction batch).", constraint=Integer(1)
    )
    lr: float = param(default=3e-3, doc="Learning rate of all non-SSM parameters.", constraint=POSITIVE)
    lr_ssm: float | None = param(
        default=1e-3,
        doc="Learning rate of Lambda, Delta and B (no weight decay); None: lr.",
        constraint=NoneOr(POSITIVE),
    )
    weight_decay: float = param(
        default=0.01, doc="AdamW weight decay of the non-SSM weights.", constraint=Real(0.0, None)
    )
    optimizer: str = param(default="adamw", doc="Optimizer.", constraint=Options(*OPTIMIZERS))
    scheduler: str = param(
        default="cosine",
        doc="Learning-rate schedule (cosine over the run, or on plateau).",
        constraint=Options(*SCHEDULERS),
    )
    device: str = param(
        default="auto",
        doc="'auto' (a GPU when there is one), 'cpu', 'cuda' or 'cuda:N'.",
        constraint=Satisfies(_is_device, "'auto', 'cpu', 'cuda', 'cuda:N' or a torch.device", choice=True),
    )
    random_state: int | np.random.RandomState | None = param(
        default=None,
        doc="Fixes initialization, shuffling and dropout (int, RandomState or None).",
        constraint=Satisfies(_is_seed, "None, an int in [0, 2**32 - 1] or a numpy RandomState"),
    )
    distributed: bool = param(
        default=False,
        doc="Train with DistributedDataParallel in the torch.distributed process group (torchrun's, "
        "or yours): each process takes its share of every batch; results equal one process.",
        constraint=Boolean(),
    )
    verbose: int = param(
        default=0,
        doc="1 states what the fit will run (epochs, steps, data, device), then shows a progress bar with the "
        "time left and each epoch's loss and validation score; predict and transform show a bar over the samples.",
        constraint=AnyOf(Integer(0), Boolean()),
    )
    precision: str = param(
        default="32",
        doc="Training arithmetic: '32' float32; 'bf16-mixed' runs the network's matrix products under "
        "torch.autocast in bfloat16 while the SSM kernels, FFTs and states stay in float32 (for GPUs "
        "with bfloat16 units; on CPUs without them it is slower); '16-mixed' the same in float16, with "
        "the loss scaled against gradient underflow (torch.amp.GradScaler). The loss and predictions "
        "are float32.",
        constraint=Options(*PRECISIONS),
    )
    compile: bool = param(
        default=False,
        doc="Train through torch.compile(network): the first steps (and each new batch shape) compile "
        "for tens of seconds, later steps can be faster; results differ from eager by float rounding. "
        "Prediction stays eager.",
        constraint=Boolean(),
    )


class ScheduleParams(Configurable):
    _params_group = "Schedule"
    warmup_steps: int = param(default=0, doc="Linear warm-up steps of the cosine schedule.", constraint=Integer(0))
    total_steps: int | None = param(
        default=None, doc="Steps of the cosine schedule (None: the whole run).", constraint=NoneOr(Integer(1))
    )
    plateau_factor: float = param(
        default=0.5, doc="Factor of the plateau schedule.", constraint=Real(0.0, 1.0, closed="neither")
    )
    plateau_patience: int = param(default=5, doc="Patience (epochs) of the plateau schedule.", constraint=Integer(0))
    grad_clip: float | None = param(default=1.0, doc="Gradient-norm clipping (None: off).", constraint=NoneOr(POSITIVE))


class HalfRateParams(Configurable):
    _params_group = "Training"
    half_rate_share: float = param(
        default=0.0,
        doc="Share of the training batches read at half their rate (band-limited, every Delta doubled), "
        "so that predictions at sample rates down to half the training rate hold: the network learns "
        "not to lean on the band above the half rate's Nyquist frequency, which such data has lost. "
        "0: every batch at the training rate.",
        constraint=Real(0.0, 1.0, closed="left"),
    )


class ContinuationParams(HalfRateParams):
    _params_group = "Training"
    warm_start: bool = param(
        default=False, doc="Continue training the fitted model on the next fit.", constraint=Boolean()
    )
    sample_rate: float | None = param(
        default=None,
        doc="Rate (Hz) of the data passed in; the rate at fit is the training rate, data at another "
        "rate is handled zero-shot by Delta x training rate / new rate.",
        constraint=NoneOr(POSITIVE),
    )


class TrainerConfig(OptimizerParams, ScheduleParams, HalfRateParams):
    """Settings of one Trainer: the estimators' training parameters plus the schedule details."""

    def validate_params(self) -> None:
        super().validate_params()
        if self.max_steps is not None and self.max_steps < self.min_steps:
            raise InvalidParameterError(f"need min_steps <= max_steps, got {self.min_steps} and {self.max_steps}")
        if self.total_steps is not None and self.total_steps <= self.warmup_steps:
            raise InvalidParameterError(
                f"need 0 <= warmup_steps < total_steps, got {self.warmup_steps} and {self.total_steps}"
            )

    @classmethod
    def from_params(cls, owner: Configurable, **overrides) -> "TrainerConfig":
        """The settings of an estimator (or preset) holding OptimizerParams (and maybe ScheduleParams)."""
        values = {name: getattr(owner, name) for name in cls.param_names() if hasattr(owner, name)}
        values.update(overrides)
        return cls(**values)


class EarlyStoppingParams(Configurable):
    _params_group = "Training"
    early_stopping: bool = param(
        default=False,
        doc="Hold out validation_fraction, stop after n_iter_no_change epochs "
        "without an improvement of tol, restore the best weights (fit only: partial_fit trains one epoch on "
        "all it is given).",
        constraint=Boolean(),
    )
    validation_fraction: float = param(
        default=0.1,
        doc="Share of the training data held out for early stopping.",
        constraint=Real(0.0, 1.0, closed="neither"),
    )
    n_iter_no_change: int = param(default=10, doc="Patience of early stopping (epochs).", constraint=Integer(1))
    tol: float = param(default=1e-4, doc="Smallest improvement that resets the patience.", constraint=Real(0.0, None))
    callbacks: list | None = param(
        default=None,
        doc="ssmts.training.Callback objects called after every epoch.",
        constraint=Satisfies(_is_callback_list, "None or a list of ssmts.training.Callback"),
    )


class SequenceModelParams(BackboneParams, SequenceParams, OptimizerParams, EarlyStoppingParams):
    """The parameters of the sequence-level estimators (SSMClassifier, SSMRegressor, SSMTransformer
    and their sktime faces), with defaults chosen for them on the development protocol of
    `python -m ssmts.bench classify --cv` (cross-validation on training splits; docs/benchmarks.md):
    small networks trained for a number of optimizer steps rather than of epochs, since the
    data these estimators meet is often tens to hundreds of series."""

    _param_defaults = SEQUENCE_MODEL_DEFAULTS


class ClassifierParams(Configurable):
    _params_group = "Classifier"
    class_weight: dict | str | None = param(
        default=None,
        doc="None, 'balanced' or a dict {label: weight > 0}.",
        constraint=Satisfies(_is_class_weight, "None, 'balanced' or a dict of finite weights > 0"),
    )
    label_smoothing: float = param(
        default=0.1,
        doc="Training targets (1 - e) one-hot + e / n_classes: keeps small data from being memorized "
        "with certainty (predict_proba is then less confident); 0 for plain cross-entropy.",
        constraint=Real(0.0, 1.0, closed="left"),
    )


class FeatureParams(Configurable):
    _params_group = "Features"
    n_scales: int = param(
        default=10,
        doc="Time scales: steps Delta log-spaced so that the memory of the modes runs from a few steps to "
        "the length of the longest training series.",
        constraint=Integer(1),
    )
    n_kernels: int = param(
        default=84,
        doc="Fixed SSMs (random read-outs C of one LegS head) per time scale; each gives n_biases + 2 features.",
        constraint=Integer(1),
    )
    n_biases: int = param(
        default=4,
        doc="Biases per SSM output: the proportion of steps above each (PPV) is a "
        "feature, beside the output's mean and maximum.",
        constraint=Integer(1),
    )
    difference: bool = param(
        default=True,
        doc="Also featurize the first difference of every series (its own SSMs and biases): doubles the features.",
        constraint=Boolean(),
    )
    backward: bool = param(
        default=False,
        doc="Also run every SSM backward in time (anti-causal: each step sees the steps after it, as the "
        "centred kernels of MiniRocket do), with read-outs and biases of its own: doubles the features.",
        constraint=Boolean(),
    )
    envelope: bool = param(
        default=False,
        doc="Also pool the envelope |x[t]| of every mode of the causal SSMs (its RMS, maximum and mean "
        "logarithm relative to the series' RMS, so loudness drops out, and how much it is modulated): how much "
        "of each band a series holds, whatever its phase, as a spectrogram would say; d_state / 2 x 4 features "
        "per time scale and channel.",
        constraint=Boolean(),
    )
    training_steps: int = param(
        default=0,
        doc="Optimizer steps that train the whole network (Lambda, Delta, C and the read-out) from the "
        "features' ridge solution, on the training data less validation_fraction, keeping the checkpoint "
        "with the best validation score, the untrained start included; the read-out is then refitted on "
        "all the data. 0: no training (the features as drawn, the ridge on all the data).",
        constraint=Integer(0),
    )


class FeatureBankParams(
    params_of(FeatureParams, "n_scales", "n_kernels", "n_biases", "difference", "backward", "envelope"),
    params_of(BackboneParams, "d_state"),
    params_of(OptimizerParams, "batch_size", "device", "random_state", "verbose"),
):
    """The parameters of the features' bank itself and of reading series through it (the transformers,
    SSMFeatureTransformer and its sktime face, take these, and in scikit-learn sample_rate)."""

    _params_group = "Features"
    normalize: str = param(
        default="channel",
        doc="Input scaling, as for the networks ('channel', 'series', 'series+stats', 'none'), or "
        "'auto': 'channel' or 'series', whichever read-out has the lower leave-one-out error on the "
        "training data (a ridge's leave-one-out error costs nothing more than its fit; not for a "
        "transformer, which fits no read-out).",
        constraint=Options("auto", *NORMALIZATIONS),
    )

    _param_defaults = dict(d_state=16)
    # Parameters added after files were first saved, with the value a file saved before them was fitted with
    # (whatever the default is now): load reads such a file as it was.
    _params_added = dict(envelope=False)


class FeaturePanelParams(
    FeatureBankParams,
    params_of(FeatureParams, "training_steps"),
    params_of(OptimizerParams, "lr"),
    params_of(EarlyStoppingParams, "validation_fraction", "n_iter_no_change"),
):
    """The parameters of the SSM-feature estimators but the sample rate: a ridge read-out in closed form,
    and with training_steps > 0 the whole network trained from there (the sktime faces take these: sktime's
    predict cannot pass a rate)."""

    # lr: training moves a solution already fitted in closed form, in small steps (training_steps > 0).
    _param_defaults = dict(lr=1e-4, validation_fraction=0.2)


class FeatureModelParams(FeaturePanelParams, params_of(ContinuationParams, "sample_rate")):
    """The parameters of the SSM-feature estimators (SSMFeatureClassifier, SSMFeatureRegressor)."""


class FeatureTransformParams(FeatureBankParams, params_of(ContinuationParams, "sample_rate")):
    """The parameters of SSMFeatureTransformer."""


__all__ = [
    "BackboneParams",
    "SSM_ONLY_PARAMS",
    "LNCDE_ONLY_PARAMS",
    "SequenceParams",
    "CLASSIFIER_DEFAULTS",
    "REGRESSOR_DEFAULTS",
    "OptimizerParams",
    "ScheduleParams",
    "TrainerConfig",
    "EarlyStoppingParams",
    "SequenceModelParams",
    "SEQUENCE_MODEL_DEFAULTS",
    "FeatureParams",
    "FeatureModelParams",
    "FeaturePanelParams",
    "FeatureBankParams",
    "FeatureTransformParams",
    "HalfRateParams",
    "ContinuationParams",
    "ClassifierParams",
    "OPTIMIZERS",
    "SCHEDULERS",
    "POOLINGS",
    "NORMALIZATIONS",
    "PRECISIONS",
    "resolve_device",
]
