"""Hyperparameter presets of the benchmark tasks.

``paper``
    eSSM Table 10 (depth, heads, H, N, M, LR SSM, LR others, dropout, prenorm, batch,
    epochs) plus the task specifics of its Appendix E (activation, bidirectionality,
    learning-rate schedule, Path-X Delta range and scale). BIDMC is not in the eSSM paper;
    its paper preset is the S4 configuration (state-spaces/s4
    ``configs/experiment/bidmc/s4-bidmc.yaml``) for the data set LSSL reports on.
``small``
    A few minutes on a 2-core CPU: a small model and capped data sizes. It checks that a
    pipeline learns; its numbers are not comparable with the papers'.
``tiny``
    A smoke test (one optimizer step on 8 samples); used by the test suite.

Conventions shared by every preset, as eSSM Appendix E.1 states them: AdamW, batch
normalization after the SSM unless the preset says otherwise (``prenorm`` puts it
before), the gated GELU activation u' = GELU(y) * sigmoid(W GELU(y)), cross-entropy for
classification. ``d_state`` is N per head (N/2 conjugate-pair modes), ``heads`` the number
of diagonal blocks (eSSM eq. 14); M = H in every row of Table 10, so each block maps H to H.

The Trainer runs the paper's schedules (cosine with warm-up and total steps, plateau with its
factor and patience). Where it cannot do what the paper did (multistep, LR_other for B, data
augmentation ...), the preset records the
paper value in ``paper_schedule``/``notes`` and the results JSON lists the difference.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ssmts.training import BackboneParams, TrainerConfig

# This module is imported by the task registry, so `ssmts tasks list` reads it: it imports
# ssmts.training (and with it torch) only when a preset is built and checked.

PRESET_NAMES = ("paper", "small", "tiny")
"""The presets of the one-model pipeline tasks and of the PTD experiments, in the order
`ssmts tasks show` lists them."""

STATE_TRACKING_PRESETS = ("small", "tiny")
"""The presets of the state-tracking task (ssmts.tasks.state_tracking): its text states no
paper hyperparameters, so it has no "paper" preset."""


# Not stated in eSSM Table 10 or Appendix E; 0.05 is the value of the S4 configurations
# these tasks come from (state-spaces/s4 configs/experiment/lra/*.yaml).
PAPER_WEIGHT_DECAY = 0.05


# What every preset starts from unless it says otherwise (eSSM Appendix E.1): batch normalization
# after the SSM, the gated GELU, the flipped-kernel bidirectional layer; AdamW with a cosine schedule.
CONVENTIONS_BACKBONE = dict(norm="batch", activation="gated_gelu", bidirectional="essm")
CONVENTIONS_TRAINING = dict(optimizer="adamw", weight_decay=PAPER_WEIGHT_DECAY, scheduler="cosine")


def validated_backbone(values: dict) -> BackboneParams:
    """BackboneParams of `values` (SequenceParams' pooling, if there, is left out), validated."""
    from ssmts.training import BackboneParams

    params = BackboneParams(**{k: v for k, v in values.items() if k in BackboneParams.param_names()})
    params.validate_params()
    params.backbone_kwargs()
    return params


@dataclass(frozen=True, kw_only=True)
class ParameterGroups:
    """Settings that hold values of the declared parameter groups instead of copying them.

    backbone: values of the architecture's parameters (BackboneParams, and SequenceParams' pooling);
    training: values of TrainerConfig's parameters. Each is checked against its one declaration
    (ssmts.training.params), and every parameter of the groups reads as an attribute
    (``settings.d_model``, ``settings.max_epochs``): the value set here, else its declared default.
    """

    name: str
    backbone: dict = field(default_factory=dict)
    training: dict = field(default_factory=dict)

    def __post_init__(self):
        from ssmts.training import BackboneParams, TrainerConfig
        from ssmts.training.params import SequenceParams

        for what, values, groups in (
            ("backbone", self.backbone, (BackboneParams, SequenceParams)),
            ("training", self.training, (TrainerConfig,)),
        ):
            known = {name for group in groups for name in group.param_names()}
            unknown = sorted(set(values) - known)
            if unknown:
                raise ValueError(f"preset {self.name!r}: {unknown} are not {what} parameters ({sorted(known)})")
        # The values are checked against their one declaration (ssmts.training.params).
        self.backbone_params()
        self.trainer_config()

    def __getattr__(self, name: str):
        """A parameter of the groups: the preset's value, else its declared default."""
        if name.startswith("_") or name in ("backbone", "training"):
            raise AttributeError(name)
        from ssmts.training import BackboneParams, TrainerConfig
        from ssmts.training.params import SequenceParams

        for values, groups in ((self.backbone, (BackboneParams, SequenceParams)), (self.training, (TrainerConfig,))):
            if name in values:
                return values[name]
            for group in groups:
                if name in group.__params__:
                    return group.__params__[name].default
        raise AttributeError(f"{type(self).__name__} has no setting {name!r}")

    def changed(self, *, backbone: dict | None = None, training: dict | None = None, **fields):
        """A copy with some backbone or training values (merged into the groups) and fields replaced."""
        return replace(
            self,
            backbone={**self.backbone, **(backbone or {})},
            training={**self.training, **(training or {})},
            **fields,
        )

    def backbone_params(self, **overrides) -> BackboneParams:
        """The architecture as the estimators declare it, with `overrides` (validated)."""
        return validated_backbone({**self.backbone, **overrides})

    def trainer_config(self, **overrides) -> TrainerConfig:
        """The Trainer settings, with `overrides` (validated)."""
        from ssmts.training import TrainerConfig

        config = TrainerConfig(**{**self.training, **overrides})
        config.validate_params()
        return config


@dataclass(frozen=True, kw_only=True)
class Preset(ParameterGroups):
    """Model, optimization and data settings of one task under one preset.

    backbone: values of the parameters ssmts.training.params declares for the architecture
        (BackboneParams, and SequenceParams' pooling): n_layers, heads, d_model, d_state,
        dropout, prenorm, norm, activation, bidirectional, dt_min, dt_max, init, discretization,
        layer and the lncde_* options ...; the rest keep their declared defaults.
    training: values of TrainerConfig's parameters (max_epochs, batch_size, lr, lr_ssm for
        Lambda, Delta and B, weight_decay, scheduler: what the Trainer runs, "cosine", "plateau"
        or "none" ...); paper_schedule: what the paper specifies.
    dt_scale: a constant factor on Delta, part of the model (Path-X).
    standardize_input / standardize_target: scale signal channels / regression targets with
    training statistics. data: options of the real-data loader; synthetic: options of the stand-in;
    limit: at most this many samples per split (None: all). notes: where values come
    from and how they differ from the paper.

    Every parameter of the two groups reads as an attribute (``preset.d_model``,
    ``preset.max_epochs``), its declared default where the preset does not set it.
    """

    dt_scale: float = 1.0
    paper_schedule: dict = field(default_factory=dict)
    standardize_target: bool = False
    standardize_input: bool = False
    data: dict = field(default_factory=dict)
    synthetic: dict = field(default_factory=dict)
    limit: int | None = None
    notes: tuple[str, ...] = ()

    def __post_init__(self):
        from ssmts.nn.resampling import check_delta_factor

        super().__post_init__()
        check_delta_factor(self.dt_scale, "dt_scale")

    def trainer_config(self, **overrides) -> TrainerConfig:
        """The Trainer settings of the preset (its paper schedule included), validated."""
        return super().trainer_config(**{**trainer_schedule_kwargs(self), **overrides})

    def to_dict(self) -> dict[str, Any]:
        """Every setting, flat: the groups' effective values (declared defaults included) and the fields."""
        from ssmts.training import BackboneParams, TrainerConfig

        out = {name: getattr(self, name) for name in (*BackboneParams.param_names(), "pooling")}
        # the run's own settings (device, seed, progress) are the run's, not the preset's
        run_settings = ("device", "random_state", "distributed", "verbose")
        out.update({name: getattr(self, name) for name in TrainerConfig.param_names() if name not in run_settings})
        fields = asdict(self)
        del fields["backbone"], fields["training"]
        out.update(fields, notes=list(self.notes))
        return out


def _preset(name: str, backbone: dict, training: dict, **fields) -> Preset:
    """A preset on the conventions (CONVENTIONS_BACKBONE, CONVENTIONS_TRAINING)."""
    return Preset(
        name=name,
        backbone={**CONVENTIONS_BACKBONE, **backbone},
        training={**CONVENTIONS_TRAINING, **training},
        **fields,
    )


# ----------------------------------------------------------------------------- eSSM Table 10


@dataclass(frozen=True)
class Table10Row:
    batch: int
    epochs: int
    depth: int
    heads: int
    H: int
    N: int
    M: int
    lr_ssm: float
    lr_others: float
    dropout: float
    prenorm: bool


TABLE_10: dict[str, Table10Row] = {
    "lra-listops": Table10Row(100, 80, 6, 4, 256, 256, 256, 0.01, 0.01, 0.0, False),
    "lra-text": Table10Row(16, 80, 6, 256, 256, 256, 256, 0.001, 0.004, 0.1, True),
    "lra-retrieval": Table10Row(32, 20, 6, 64, 128, 128, 128, 0.001, 0.002, 0.0, True),
    "lra-image": Table10Row(50, 200, 6, 64, 256, 512, 256, 0.001, 0.005, 0.1, False),
    "lra-pathfinder": Table10Row(64, 300, 6, 8, 192, 256, 192, 0.001, 0.005, 0.05, True),
    "lra-pathx": Table10Row(8, 200, 6, 8, 192, 256, 192, 0.0005, 0.001, 0.0, True),
    "sc10-mfcc": Table10Row(16, 80, 4, 32, 128, 128, 128, 0.001, 0.006, 0.1, False),
    "sc10": Table10Row(16, 150, 6, 32, 128, 128, 128, 0.001, 0.006, 0.1, True),
    "sc35": Table10Row(16, 100, 6, 32, 128, 128, 128, 0.001, 0.008, 0.1, False),
    "smnist": Table10Row(50, 150, 4, 16, 128, 96, 128, 0.002, 0.008, 0.1, True),
    "psmnist": Table10Row(50, 200, 4, 8, 128, 128, 128, 0.001, 0.004, 0.15, True),
    "scifar": Table10Row(50, 200, 6, 64, 256, 512, 256, 0.001, 0.005, 0.1, True),
}
"""eSSM Table 10, keyed by task name."""

# Appendix E.2 learning-rate schedules. "cosine" = CosineAnnealingLR (with warm-up where
# given), "plateau" = ReduceLROnPlateau. Total/warm-up counts are optimizer steps.
PAPER_SCHEDULES: dict[str, dict] = {
    "lra-listops": {"name": "not specified (eSSM E.2.1)"},
    "lra-text": {"name": "plateau", "factor": 0.5, "patience": 5},
    "lra-retrieval": {"name": "cosine", "warmup_steps": 1000, "total_steps": 50_000},
    "lra-image": {"name": "plateau", "factor": 0.6, "patience": 5},
    "lra-pathfinder": {"name": "cosine", "warmup_steps": 5000, "total_steps": 40_000},
    "lra-pathx": {"name": "cosine", "warmup_steps": 10_000, "total_steps": 1_000_000},
    "sc10-mfcc": {"name": "plateau", "factor": 0.2, "patience": 5},
    "sc10": {"name": "plateau", "factor": 0.2, "patience": 10},
    "sc35": {"name": "cosine", "warmup_steps": 0, "total_steps": 270_000},
    "smnist": {"name": "plateau", "factor": 0.2, "patience": 10},
    "psmnist": {"name": "cosine", "warmup_steps": 1000, "total_steps": 81_000},
    "scifar": {"name": "plateau", "factor": 0.6, "patience": 5},
    # S4's s4-bidmc.yaml: MultiStepLR.
    "bidmc": {"name": "multistep", "milestones": [100, 200, 300, 400, 500], "gamma": 0.5},
}

# Appendix E.2: tasks whose LR_other also covers B (the Trainer's SSM group holds B).
_B_AT_LR_OTHERS = {"lra-image", "smnist", "scifar"}


def _schedule_notes(schedule: dict) -> tuple[str, list[str]]:
    """(Trainer scheduler to run, notes on how it differs from the paper's)."""
    name = schedule["name"]
    if name == "plateau":  # the Trainer runs the paper's factor and patience (trainer_schedule_kwargs)
        return "plateau", []
    if name == "cosine":  # the Trainer runs the paper's warm-up and total steps
        return "cosine", []
    if name == "multistep":
        return "cosine", [
            f"S4: MultiStepLR(milestones={schedule['milestones']}, gamma={schedule['gamma']}); the shared "
            "Trainer has no multistep schedule, cosine over the run is used"
        ]
    return "cosine", ["the paper names no schedule for this task; cosine over the run is used"]


def trainer_schedule_kwargs(preset: "Preset") -> dict:
    """Trainer keyword arguments that reproduce the preset's paper schedule (empty for others)."""
    schedule = preset.paper_schedule
    if preset.scheduler == "plateau" and schedule.get("name") == "plateau":
        return {"plateau_factor": schedule["factor"], "plateau_patience": schedule["patience"]}
    if preset.scheduler == "cosine" and schedule.get("name") == "cosine":
        return {"warmup_steps": schedule.get("warmup_steps", 0), "total_steps": schedule.get("total_steps")}
    return {}


def _paper_preset(task: str) -> Preset:
    row = TABLE_10[task]
    schedule = PAPER_SCHEDULES[task]
    scheduler, notes = _schedule_notes(schedule)
    notes = [
        "eSSM Table 10 row and Appendix E.2; batch norm (E.1 default), AdamW",
        f"weight decay {PAPER_WEIGHT_DECAY}: not stated in the eSSM paper; the S4 configurations' value",
        *notes,
    ]
    if task in _B_AT_LR_OTHERS:
        notes.append("paper: LR_other also for B (and C); the Trainer's parameter groups train B at LR SSM")
    backbone: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    if task == "lra-listops":
        backbone = dict(activation="leaky_relu", bidirectional=False)
        notes.append("ListOps (E.2.1): LeakyReLU, not bidirectional, C from HiPPO (init 'legs')")
    else:
        notes.append(
            "bidirectional (eSSM flipped kernel): E.2.1 turns it off for ListOps only, so it is taken "
            "to be on for the other tasks"
        )
    if task == "sc10-mfcc":
        # The 20 coefficients differ in scale by orders of magnitude (c0 is the log energy).
        extra = dict(standardize_input=True)
        notes.append("MFCC channels standardized with training statistics (no input scaling is stated in the paper)")
    if task == "lra-image":
        notes.append("paper: horizontal flips and random crops as augmentation; not applied here")
    if task == "lra-pathx":
        backbone, extra = dict(dt_min=1e-4, dt_max=0.1), dict(dt_scale=0.0625)
        notes += [
            "Path-X (E.2.6): Delta initialized in [1e-4, 0.1], scaled by 0.0625",
            "paper: only 50% of the training set before epoch 110; here the full set throughout",
        ]
    data: dict[str, Any] = {}
    if task in ("sc10", "sc35"):
        data = {"sample_rate": 16000}
    return _preset(
        "paper",
        dict(
            n_layers=row.depth,
            heads=row.heads,
            d_model=row.H,
            d_state=row.N,
            dropout=row.dropout,
            prenorm=row.prenorm,
            **backbone,
        ),
        dict(batch_size=row.batch, max_epochs=row.epochs, lr=row.lr_others, lr_ssm=row.lr_ssm, scheduler=scheduler),
        paper_schedule=dict(schedule),
        data=data,
        synthetic=_PAPER_SYNTHETIC.get(task, {}),
        notes=tuple(notes),
        **extra,
    )


def _bidmc_paper_preset() -> Preset:
    scheduler, notes = _schedule_notes(PAPER_SCHEDULES["bidmc"])
    return _preset(
        "paper",
        dict(
            n_layers=6,
            heads=1,
            d_model=128,
            d_state=256,
            dropout=0.0,
            prenorm=True,
            norm="layer",
            bidirectional=False,
            pooling="last",
        ),
        dict(batch_size=32, max_epochs=500, lr=0.01, lr_ssm=0.001, weight_decay=0.05, scheduler=scheduler),
        paper_schedule=dict(PAPER_SCHEDULES["bidmc"]),
        data={"protocol": "s4", "standardize": False},
        synthetic={"n_windows": 2000, "length": 4000},
        notes=(
            "BIDMC is not in the eSSM paper; LSSL reports it (RMSE RR 0.350, HR 0.432, SpO2 0.141) and "
            "this is the S4 configuration (state-spaces/s4 configs/experiment/bidmc/s4-bidmc.yaml): "
            "6 layers, H=128, N=256, prenorm layer norm, dropout 0, causal, lr 0.01, SSM lr 0.001, "
            "weight decay 0.05, batch 32, 500 epochs, MSE loss, last-step decoder (S4's regression pipeline)",
            "S4 runs one SISO system per channel (heads = H = 128); here one MIMO system (heads = 1, the "
            "eSSM/S5 form): this engine's FFT materializes the (batch, heads, N/2, 2L) state, about 34 GB per "
            "layer at heads = 128, N = 256, batch 32, L = 4000",
            "S4 split (TRAIN+TEST pooled, 70/15/15, seed 0) and S4 inputs: no input or target scaling",
            *notes,
        ),
    )


# Sizes of the synthetic stand-ins under the paper preset (the real sets are far larger;
# these are what a GPU run of the stand-in pipeline uses).
_PAPER_SYNTHETIC: dict[str, dict] = {
    "lra-listops": {"n_train": 20_000, "n_val": 2000, "n_test": 2000, "min_length": 500, "max_length": 2000},
    "lra-text": {"n_train": 10_000, "n_val": 1000, "n_test": 1000, "max_length": 4096},
    "lra-retrieval": {"n_train": 10_000, "n_val": 1000, "n_test": 1000, "max_length": 4000},
    "lra-pathfinder": {"n_samples": 20_000},
    "lra-pathx": {"n_samples": 4000},
    "sc10": {"clips_per_voice": 8},
    "sc10-mfcc": {"clips_per_voice": 8},
    "sc35": {"clips_per_voice": 4},
}


# ----------------------------------------------------------------------------- small / tiny


def _small_preset(task: str) -> Preset:
    """CPU-sized preset: 2-4 small layers, capped data, a handful of epochs."""
    notes = ("small CPU preset: not the paper's model size, data size or epochs",)
    backbone = dict(heads=4, d_model=64, d_state=32, dropout=0.0, prenorm=True)
    training = dict(batch_size=32, lr=4e-3, lr_ssm=1e-3, weight_decay=0.01, scheduler="cosine")

    def small(layers: int, epochs: int, backbone_changes=None, training_changes=None, **fields) -> Preset:
        return _preset(
            "small",
            {**backbone, "n_layers": layers, **(backbone_changes or {})},
            {**training, "max_epochs": epochs, **(training_changes or {})},
            **{"notes": notes, **fields},
        )

    if task == "lra-listops":
        return small(
            2,
            10,
            dict(activation="leaky_relu", bidirectional=False),
            data={"max_train": 5000, "max_eval": 1000},
            synthetic={
                "n_train": 2000,
                "n_val": 200,
                "n_test": 200,
                "min_length": 50,
                "max_length": 300,
                "max_depth": 6,
            },
        )
    if task == "lra-text":
        return small(
            2,
            8,
            data={"max_train": 2000, "max_eval": 500},
            synthetic={"n_train": 1000, "n_val": 200, "n_test": 200, "max_length": 1024},
        )
    if task == "lra-retrieval":
        return small(
            2,
            8,
            data={"max_samples": 2000, "max_eval": 500},
            synthetic={"n_train": 1000, "n_val": 200, "n_test": 200, "max_length": 512},
        )
    if task in ("lra-image", "smnist", "psmnist", "scifar"):
        return small(3, 15, data={"max_train": 5000, "max_eval": 1000}, synthetic={})
    if task == "lra-pathfinder":
        return small(3, 10, data={"max_samples": 3000}, synthetic={"n_samples": 1500})
    if task == "lra-pathx":
        return small(
            2,
            3,
            dict(dt_min=1e-4, dt_max=0.1),
            dict(batch_size=16),
            dt_scale=0.0625,
            data={"max_samples": 600},
            synthetic={"n_samples": 400},
        )
    if task in ("sc10", "sc35"):
        # The `ssmts demo` model (measured to learn the espeak-ng words on a CPU), causal. The
        # demo's lr 1e-2 over the 4x larger stand-in left batch-norm statistics unusable in
        # eval mode (validation at chance while the training loss fell); 4e-3 does not.
        return small(
            3,
            20,
            dict(d_model=32, d_state=32, heads=1, prenorm=False, bidirectional=False),
            dict(batch_size=16),
            standardize_input=True,
            data={"sample_rate": 4000, "max_per_class": 60 if task == "sc10" else 30},
            synthetic={"sample_rate": 4000, "clips_per_voice": 4 if task == "sc10" else 2},
            notes=(
                *notes,
                "trains at 4 kHz (band-limited resampling of the 16 kHz clips) to fit a CPU; zero-shot at 2 kHz",
                "waveforms standardized with training statistics",
            ),
        )
    if task == "sc10-mfcc":
        return small(
            3,
            20,
            training_changes=dict(batch_size=16),
            standardize_input=True,
            data={"max_per_class": 200},
            synthetic={"clips_per_voice": 4},
            notes=(*notes, "MFCC channels standardized with training statistics"),
        )
    if task.startswith("bidmc-"):
        return small(
            3,
            20,
            dict(norm="layer", bidirectional=False, pooling="last"),
            dict(lr=5e-3),
            standardize_target=True,
            data={"protocol": "s4", "standardize": True, "max_train": 1500},
            synthetic={"n_windows": 400, "length": 1000},
            notes=(*notes, "inputs and targets standardized with training statistics; RMSE in target units"),
        )
    raise KeyError(task)


def _tiny_preset(task: str) -> Preset:
    """One optimizer step on 8 samples with a one-layer, 8-channel model."""
    base = _small_preset(task)
    synthetic = {
        "lra-listops": {"n_train": 8, "n_val": 8, "n_test": 8, "min_length": 10, "max_length": 60, "max_depth": 4},
        "lra-text": {"n_train": 8, "n_val": 8, "n_test": 8, "max_length": 128},
        "lra-retrieval": {"n_train": 8, "n_val": 8, "n_test": 8, "max_length": 96},
        "lra-pathfinder": {"n_samples": 20},
        "lra-pathx": {"n_samples": 20},
        "sc10": {"sample_rate": 1000, "clips_per_voice": 1},
        "sc10-mfcc": {"clips_per_voice": 1},
        "sc35": {"sample_rate": 1000, "clips_per_voice": 1, "n_voices": 3},
        "bidmc-rr": {"n_windows": 30, "length": 250},
        "bidmc-hr": {"n_windows": 30, "length": 250},
    }.get(task, {})
    data = dict(base.data)
    if task in ("sc10", "sc35"):
        data.update(sample_rate=1000, max_per_class=1)
    return base.changed(
        name="tiny",
        backbone=dict(n_layers=1, heads=1, d_model=8, d_state=4),
        training=dict(batch_size=8, max_epochs=1),
        synthetic=synthetic,
        data=data,
        limit=8,
        notes=("smoke-test preset: one step on 8 samples",),
    )


TASK_NAMES_WITH_PRESETS = (
    *TABLE_10,
    "bidmc-rr",
    "bidmc-hr",
    "bidmc-spo2",
)


def get_preset(task: str, preset: str) -> Preset:
    """The Preset of `task` named `preset` ("paper", "small" or "tiny")."""
    if preset not in PRESET_NAMES:
        raise ValueError(f"unknown preset {preset!r}; choose one of {PRESET_NAMES}")
    if task not in TASK_NAMES_WITH_PRESETS:
        raise KeyError(f"no presets for task {task!r}")
    if preset == "paper":
        return _bidmc_paper_preset() if task.startswith("bidmc-") else _paper_preset(task)
    if preset == "small":
        return _small_preset(task)
    return _tiny_preset(task)
