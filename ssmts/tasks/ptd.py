"""The PTD paper's robustness experiments (ptd-robustifying-ssm-approximate-diagonalization,
sections 3.4, 5.2 and 5.3), as tasks of their own.

    ssmts tasks run ptd-sinusoids  --preset small --out runs/ptd-sinusoids/results.json
    ssmts tasks run ptd-robustness --preset small --out runs/ptd-robustness/results.json
    ssmts tasks run ptd-ablation   --preset small --out runs/ptd-ablation/results.json

``ptd-sinusoids`` (section 3.4, Figure 2)
    Sequences ``u_k = a sin(theta k + phi)`` (random phase); a network regresses the
    amplitude ``a`` and the frequency ``theta`` (radians per sample). It trains on a sampled
    sub-domain of amplitudes and is tested on a uniform (theta, a) grid: "interpolation" trains
    on the two outer amplitude bands and leaves out the middle one, "extrapolation" trains on
    the lower part and leaves out the top. ``init="legs"`` (S4D/S5 normal part) against
    ``init="ptd"`` and the dense HiPPO-LegS reference (``"hippo"``, ssmts.nn.DenseSSM, S4's
    system without its DPLR form); the results hold the absolute errors on the grid (heat maps).
``ptd-robustness`` (section 5.2, Figure 3(a,b))
    The three models learn a pixel-sequence classification task (the offline digits stand-in, or
    sCIFAR with ``data_dir``), then are tested on the clean test set and on copies with
    sinusoidal noise ``amplitude * sin(theta k + phi)`` (amplitude in units of the standardized
    input) at (a) the spike frequencies of the trained ``legs`` model, found with
    ``ssmts.nn.analysis.sensitive_frequencies`` and mapped to radians per sample with the
    layer's Delta, and (b) random frequencies from the same band (low frequencies carry most
    of a pixel sequence's content, so a control over all of (0, pi) would be easier noise).
``ptd-ablation`` (section 5.3, Figure 3(c))
    Test accuracy and cond(V) at initialization against the measured ``||E|| / ||A||`` of the
    PTD perturbation, swept through ``ptd_eps``, for each state size N.

Every network is a ``SequenceHead`` on an ``SSMBackbone`` built from ``BackboneParams`` and
trained by ``ssmts.training.fit_model`` (``"hippo"``: the same backbone with dense layers, one
learnable Delta per layer at the same initial value). The diagonal layers store all N modes
(``conj_sym=False``), one Delta per mode, as the paper's S4D/S5 layers do. Output: the results
JSON (the CLI adds PNG figures next to it with ``ssmts.tasks.ptd_figures.save_ptd_figures``).
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ssmts.nn import SequenceHead, SSMBackbone
from ssmts.nn.analysis import sensitive_frequencies
from ssmts.nn.init import hippo_legs, hippo_legs_normal, ptd_legs
from ssmts.training import BackboneParams, SequenceData, TrainerConfig, fit_model, predict_batches
from ssmts.training.objectives import accuracy_of_logits, mse_loss, weighted_cross_entropy

from .._version import __version__
from .data_utils import json_safe
from .paths import check_output_files
from .presets import PRESET_NAMES, ParameterGroups, validated_backbone
from .registry import PTD_EXPERIMENTS

# The experiments' names, descriptions and presets are declared in the task registry, which
# `ssmts tasks list` reads without importing this module (or torch).
DESCRIPTIONS = PTD_EXPERIMENTS
EXPERIMENTS = tuple(PTD_EXPERIMENTS)
PRESETS = PRESET_NAMES
HIPPO = "hippo"
"""The reference model: the same architecture on dense HiPPO-LegS layers (ssmts.nn.DenseSSM), the
system that ``legs`` keeps only the normal part of and ``ptd`` approximates."""
TOP_FREQUENCY = 0.8
"""Where the largest eigenfrequency of the HiPPO-LegS normal part sits, in radians per sample,
when a preset leaves ``dt`` unset: dt = TOP_FREQUENCY / max |Im lambda| (one Delta for every mode)."""


# What every PTD preset starts from: pre-norm layer normalization, one learnable Delta per mode at the
# top-frequency value (no dt_min/dt_max), the PTD perturbation's size and penalty of section 5.3;
# AdamW with a cosine schedule on the CPU.
PTD_BACKBONE = dict(n_layers=2, d_model=32, d_state=16, norm="layer", prenorm=True, ptd_eps=1e-4, ptd_gamma=1e3)
PTD_TRAINING = dict(
    optimizer="adamw", lr=3e-3, lr_ssm=1e-3, weight_decay=0.01, max_epochs=20, batch_size=32, scheduler="cosine"
)


@dataclass(frozen=True, kw_only=True)
class PTDPreset(ParameterGroups):
    """Settings of one PTD experiment.

    backbone: values of the architecture's declared parameters (PTD_BACKBONE and changes: n_layers,
    d_model (H), d_state (N), heads, norm, prenorm, ptd_eps, ptd_gamma; dt_min / dt_max for a
    log-uniform Delta; without them one Delta for every mode by the TOP_FREQUENCY rule). training:
    TrainerConfig's (PTD_TRAINING and changes: max_epochs, batch_size, lr, lr_ssm, weight_decay).
    seeds: one network per seed and init.
    Data: n_train (sinusoids per training set), length (samples per sequence), grid (test grid
    points per axis), phases (test phases per grid point), theta_range, amplitude_range,
    upsample (digits: repeat each pixel this many times), limit (cap per split).
    Noise test: noise_amplitudes, n_frequencies (spike and random frequencies each).
    Ablation: ablation_eps, ablation_states, ablation_gamma_eps (each point uses
    ptd_gamma = ablation_gamma_eps / ptd_eps, so that the measured ||E||/||A|| follows ptd_eps
    over the whole sweep; None keeps ptd_gamma, whose penalty then stops ||E||/||A|| near 1e-3).
    notes: sources and departures from the paper.
    """

    seeds: tuple[int, ...] = (0, 1, 2)
    inits: tuple[str, ...] = ("legs", "ptd", HIPPO)
    n_train: int = 1000
    length: int = 128
    grid: int = 16
    phases: int = 4
    theta_range: tuple[float, float] = (0.05, 1.0)
    amplitude_range: tuple[float, float] = (1.0, 3.0)
    data: str = "digits"
    upsample: int = 1
    limit: int | None = None
    noise_amplitudes: tuple[float, ...] = (0.1, 0.3, 1.0)
    n_frequencies: int = 3
    ablation_eps: tuple[float, ...] = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 3e-2)
    ablation_states: tuple[int, ...] = (16, 64)
    ablation_gamma_eps: float | None = 0.1
    notes: tuple[str, ...] = ()

    def backbone_params(self, **overrides) -> BackboneParams:
        """The architecture of one network (``overrides``: init, d_state, ptd_eps, ptd_gamma; None keeps
        the preset's), validated; Delta by the TOP_FREQUENCY rule of its N where the preset gives no
        dt_min / dt_max."""
        values = {**self.backbone, **{k: v for k, v in overrides.items() if v is not None}}
        if "dt_min" not in values and "dt_max" not in values:
            dt = top_frequency_dt(values.get("d_state", BackboneParams.__params__["d_state"].default))
            values.update(dt_min=dt, dt_max=dt)
        return validated_backbone(values)

    def network(self, init: str, d_input: int, d_output: int, **overrides) -> SequenceHead:
        """The model of one init: the diagonal backbone of `backbone_params` (``overrides``: d_state,
        ptd_eps, ptd_gamma) or, for init="hippo", the same architecture on dense HiPPO-LegS layers."""
        params = self.backbone_params(init="legs" if init == HIPPO else init, **overrides)
        if init != HIPPO:
            return build_network(params, d_input, d_output)
        kwargs = params.backbone_kwargs()
        backbone = SSMBackbone(
            d_input,
            kwargs["d_model"],
            kwargs["n_layers"],
            None,
            layer="dense",
            d_state=kwargs["d_state"],
            dt_min=kwargs["dt_min"],
            dt_max=kwargs["dt_max"],
            norm=kwargs["norm"],
            prenorm=kwargs["prenorm"],
            activation=kwargs["activation"],
            dropout=kwargs["dropout"],
        )
        return SequenceHead(backbone, d_output, "mean")

    def trainer_config(self, **overrides) -> TrainerConfig:
        """The Trainer settings (on the CPU), with `overrides` (validated)."""
        return super().trainer_config(**{"device": "cpu", **overrides})


def _ptd_preset(name: str, backbone: dict | None = None, training: dict | None = None, **fields) -> PTDPreset:
    """A PTD preset on PTD_BACKBONE and PTD_TRAINING."""
    return PTDPreset(
        name=name,
        backbone={**PTD_BACKBONE, **(backbone or {})},
        training={**PTD_TRAINING, **(training or {})},
        **fields,
    )


def _epochs(epochs: int | None) -> dict:
    """The run's --epochs as a Trainer override (None: the preset's max_epochs)."""
    return {} if epochs is None else {"max_epochs": epochs}


def top_frequency_dt(d_state: int) -> float:
    """One Delta putting the highest eigenfrequency of the normal part at TOP_FREQUENCY rad/sample."""
    top = float(np.abs(np.linalg.eigvals(hippo_legs_normal(d_state)).imag).max())
    return TOP_FREQUENCY / top


_PAPER_NOTE = (
    "the paper's numbers for this setting did not survive text extraction of our copy; these are the "
    "S4/S4D sCIFAR settings the paper says it adapts (Appendix J)"
)


def get_ptd_preset(experiment: str, preset: str) -> PTDPreset:
    """The preset of a PTD experiment: "tiny" (seconds, the test suite), "small" (minutes on a
    CPU core) or "paper" (the paper's Appendix J scale, for a GPU)."""
    if experiment not in EXPERIMENTS:
        raise ValueError(f"unknown PTD experiment {experiment!r}; choose one of {EXPERIMENTS}")
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {PRESETS}")
    if preset == "tiny":
        return _ptd_preset(
            "tiny",
            backbone=dict(n_layers=1, d_model=4, d_state=8),
            training=dict(max_epochs=1, batch_size=16),
            seeds=(0,),
            n_train=32,
            length=32,
            grid=3,
            phases=1,
            limit=48,
            noise_amplitudes=(0.5,),
            n_frequencies=1,
            ablation_eps=(1e-4, 1e-2),
            ablation_states=(8,),
            notes=("smoke test: one epoch of a 1-layer, H=4, N=8 model; numbers mean nothing",),
        )
    if preset == "small":
        base = _ptd_preset(
            "small",
            seeds=(0, 1, 2),
            notes=("minutes on one CPU core; a check of the effect at small size, not the paper's scale",),
        )
        if experiment == "ptd-sinusoids":
            return base.changed(training=dict(max_epochs=20), n_train=800, length=128, grid=16, phases=4)
        if experiment == "ptd-robustness":
            return base.changed(training=dict(max_epochs=30))
        return base.changed(backbone=dict(dt_min=1e-3, dt_max=1e-1), training=dict(max_epochs=15))
    paper = _ptd_preset(
        "paper",
        backbone=dict(
            n_layers=6, d_model=512, d_state=64, norm="batch", prenorm=False, dt_min=1e-3, dt_max=1e-1, ptd_eps=1e-2
        ),
        training=dict(max_epochs=100, batch_size=50, lr=1e-2, lr_ssm=1e-3, weight_decay=0.05),
        seeds=(0, 1, 2),
        data="scifar",
        notes=(_PAPER_NOTE,),
    )
    if experiment == "ptd-sinusoids":
        backbone = {k: v for k, v in paper.backbone.items() if k not in ("dt_min", "dt_max")}
        return replace(
            paper,
            backbone={**backbone, "n_layers": 4, "d_model": 128},
            training={**paper.training, "max_epochs": 100, "batch_size": 64},
            n_train=10000,
            length=512,
            grid=32,
            phases=8,
            data="synthetic",
            notes=("section 3.4 gives no model size in our copy; a 4-layer H=128, N=64 model",),
        )
    if experiment == "ptd-robustness":
        return replace(paper, noise_amplitudes=(0.05, 0.1, 0.2, 0.5, 1.0), n_frequencies=5)
    return replace(paper, seeds=(0,), ablation_eps=tuple(10.0 ** np.arange(-6.0, -1.4, 0.5)), ablation_states=(16, 64))


# ------------------------------------------------------------------------- models
def build_network(params: BackboneParams, d_input: int, d_output: int) -> SequenceHead:
    """SequenceHead on the backbone of `params`, every SSM storing all N modes (conj_sym=False)."""
    kwargs = params.backbone_kwargs()
    d_model, n_layers = kwargs.pop("d_model"), kwargs.pop("n_layers")
    backbone = SSMBackbone(d_input, d_model, n_layers, None, conj_sym=False, **kwargs)
    return SequenceHead(backbone, d_output, "mean")


def _standardize(x: np.ndarray, mean: float, std: float) -> torch.Tensor:
    return torch.from_numpy(((x - mean) / std).astype(np.float32))


# ------------------------------------------------------------------------- 3.4 sinusoids
def sinusoids(theta: np.ndarray, amplitude: np.ndarray, phase: np.ndarray, length: int) -> np.ndarray:
    """u_k = a sin(theta k + phi), k = 0..length-1: (n, 1, length) float32."""
    k = np.arange(length)
    return (amplitude[:, None] * np.sin(theta[:, None] * k[None, :] + phase[:, None]))[:, None, :].astype(np.float32)


def amplitude_domain(kind: str, amplitude_range: tuple[float, float]) -> list[tuple[float, float]]:
    """Training bands of the amplitude: interpolation leaves out the middle third, extrapolation the top third."""
    lo, hi = amplitude_range
    third = (hi - lo) / 3
    if kind == "interpolation":
        return [(lo, lo + third), (hi - third, hi)]
    if kind == "extrapolation":
        return [(lo, hi - third)]
    raise ValueError(f"unknown domain {kind!r}; choose 'interpolation' or 'extrapolation'")


def _sample_bands(rng: np.random.Generator, bands, n: int) -> np.ndarray:
    widths = np.array([b - a for a, b in bands])
    which = rng.choice(len(bands), size=n, p=widths / widths.sum())
    lows = np.array([a for a, _ in bands])[which]
    return lows + rng.random(n) * widths[which]


def run_sinusoids(preset: PTDPreset, epochs: int | None = None, verbose: int = 0) -> dict:
    lo_t, hi_t = preset.theta_range
    grid_theta = np.linspace(lo_t, hi_t, preset.grid)
    grid_amp = np.linspace(*preset.amplitude_range, preset.grid)
    T, A_ = np.meshgrid(grid_theta, grid_amp, indexing="ij")  # (theta, amplitude)
    test_theta = np.repeat(T.ravel(), preset.phases)
    test_amp = np.repeat(A_.ravel(), preset.phases)
    test_phase = np.tile(np.linspace(0, 2 * np.pi, preset.phases, endpoint=False), T.size)
    x_test = sinusoids(test_theta, test_amp, test_phase, preset.length)
    runs = []
    for domain in ("interpolation", "extrapolation"):
        bands = amplitude_domain(domain, preset.amplitude_range)
        for seed in preset.seeds:
            rng = np.random.default_rng(1000 + seed)
            amp = _sample_bands(rng, bands, preset.n_train)
            theta = lo_t + rng.random(preset.n_train) * (hi_t - lo_t)
            x = sinusoids(theta, amp, rng.uniform(0, 2 * np.pi, preset.n_train), preset.length)
            y = np.stack([amp, theta], 1)
            y_mean, y_std = y.mean(0), y.std(0) + 1e-8
            data = SequenceData(torch.from_numpy(x), torch.from_numpy(((y - y_mean) / y_std).astype(np.float32)))
            for init in preset.inits:
                start = time.perf_counter()
                result = fit_model(
                    lambda: preset.network(init, 1, 2),
                    data,
                    mse_loss,
                    preset.trainer_config(**_epochs(epochs)),
                    seed=seed,
                    description=f"{domain} {init} seed {seed}",
                )
                pred = predict_batches(result.model, SequenceData(torch.from_numpy(x_test)), 256, "cpu").numpy()
                pred = pred * y_std + y_mean
                amp_err = np.abs(pred[:, 0] - test_amp).reshape(preset.grid, preset.grid, preset.phases).mean(-1)
                theta_err = np.abs(pred[:, 1] - test_theta).reshape(preset.grid, preset.grid, preset.phases).mean(-1)
                seen = np.zeros_like(grid_amp, dtype=bool)
                for a, b in bands:
                    seen |= (grid_amp >= a) & (grid_amp <= b)
                # the dense reference has no diagonal modes to analyse (and no spikes by construction)
                spikes = None if init == HIPPO else sensitive_frequencies(result.model, 3, layers=[0])[0]
                runs.append(
                    {
                        "domain": domain,
                        "init": init,
                        "seed": seed,
                        "seconds": time.perf_counter() - start,
                        "train_loss": result.history[-1]["train_loss"],
                        "amplitude_abs_error": amp_err.tolist(),
                        "theta_abs_error": theta_err.tolist(),
                        "amplitude_mae_seen": float(amp_err[:, seen].mean()),
                        "amplitude_mae_unseen": float(amp_err[:, ~seen].mean()),
                        "theta_mae_seen": float(theta_err[:, seen].mean()),
                        "theta_mae_unseen": float(theta_err[:, ~seen].mean()),
                        "layer0_spikes": None if spikes is None else spikes.as_dict(),
                    }
                )
                if verbose:
                    print(
                        f"[ptd-sinusoids] {domain} {init} seed {seed}: amplitude MAE seen "
                        f"{runs[-1]['amplitude_mae_seen']:.3f} unseen {runs[-1]['amplitude_mae_unseen']:.3f}",
                        flush=True,
                    )
    body = {
        "grid_theta": grid_theta.tolist(),
        "grid_amplitude": grid_amp.tolist(),
        "runs": runs,
        "summary": _summarize(
            runs,
            ("domain", "init"),
            ("amplitude_mae_seen", "amplitude_mae_unseen", "theta_mae_seen", "theta_mae_unseen"),
        ),
    }
    body["spike_columns"] = spike_column_errors(body)
    return body


def spike_column_errors(results: dict, n_spikes: int = 3) -> list[dict]:
    """Amplitude error on the grid columns at the legs model's spike frequencies against the other columns.

    For each seed and domain, the theta columns nearest to the first `n_spikes` distinct spike
    frequencies of the trained legs model's first layer (``layer0_spikes``, radians per sample,
    within half a grid step) are the "spike" columns; every init of that seed and domain is
    scored on them and on the rest. Mean and spread over seeds per (domain, init).
    """
    grid = np.asarray(results["grid_theta"])
    step = grid[1] - grid[0] if len(grid) > 1 else np.inf
    records = []
    for run in results["runs"]:
        legs = [
            r
            for r in results["runs"]
            if r["init"] == "legs" and r["seed"] == run["seed"] and r["domain"] == run["domain"]
        ]
        if not legs:
            continue
        thetas = _distinct_thetas(_PeakThetas(legs[0]["layer0_spikes"]["peak_thetas"]), n_spikes)
        columns = sorted({int(np.argmin(np.abs(grid - t))) for t in thetas if np.abs(grid - t).min() <= step / 2})
        if not columns or len(columns) == len(grid):
            continue
        error = np.asarray(run["amplitude_abs_error"])
        others = [c for c in range(len(grid)) if c not in columns]
        records.append(
            {
                "domain": run["domain"],
                "init": run["init"],
                "seed": run["seed"],
                "spike_thetas": [float(grid[c]) for c in columns],
                "amplitude_mae_spike_columns": float(error[columns].mean()),
                "amplitude_mae_other_columns": float(error[others].mean()),
            }
        )
    return _summarize(records, ("domain", "init"), ("amplitude_mae_spike_columns", "amplitude_mae_other_columns"))


class _PeakThetas:
    def __init__(self, thetas):
        self.peak_thetas = np.asarray(thetas)


# ------------------------------------------------------------------------- 5.2 noise
def _load_pixels(preset: PTDPreset, data_dir: Path | None):
    """(train, val, test) as (X (n, C, L) float32, y) and the number of classes."""
    if preset.data == "digits":
        from ssmts.data.pixels import load_digits_sequential

        task = load_digits_sequential()
    elif preset.data == "scifar":
        if data_dir is None:
            raise ValueError(
                "the paper preset trains on sCIFAR: pass data_dir (--data-dir) with cifar-10-batches-py; "
                "or use --preset small (the offline digits stand-in)"
            )
        from .registry import get_task

        task = get_task("scifar").load(data_dir)
    else:
        raise ValueError(f"unknown data {preset.data!r} for a PTD classification experiment")
    splits = []
    for split in (task.train, task.val, task.test):
        X, y = split.X, split.y
        if preset.limit is not None:
            X, y = X[: preset.limit], y[: preset.limit]
        if preset.upsample > 1:
            X = np.repeat(X, preset.upsample, axis=-1)
        splits.append((np.asarray(X, dtype=np.float32), np.asarray(y, dtype=np.int64)))
    return splits, int(task.n_classes)


def add_sinusoid(x: np.ndarray, theta: float, amplitude: float, rng: np.random.Generator) -> np.ndarray:
    """x (n, C, L) + amplitude sin(theta k + phi_n), one random phase per sequence, every channel."""
    k = np.arange(x.shape[-1])
    phase = rng.uniform(0, 2 * np.pi, x.shape[0])
    return (x + amplitude * np.sin(theta * k[None, :] + phase[:, None])[:, None, :]).astype(np.float32)


def _distinct_thetas(modes, count: int, min_separation: float = 0.02) -> list[float]:
    """The first `count` spike frequencies (radians per sample) that differ by min_separation, in (0, pi]."""
    chosen: list[float] = []
    for theta in modes.peak_thetas:
        if theta > 1e-3 and all(abs(theta - c) > min_separation for c in chosen):
            chosen.append(float(theta))
        if len(chosen) == count:
            break
    return chosen


def run_robustness(
    preset: PTDPreset, data_dir: Path | None = None, epochs: int | None = None, verbose: int = 0
) -> dict:
    ((Xtr, ytr), (Xva, yva), (Xte, yte)), n_classes = _load_pixels(preset, data_dir)
    mean, std = float(Xtr.mean()), float(Xtr.std())
    train = SequenceData(_standardize(Xtr, mean, std), torch.from_numpy(ytr))
    val = SequenceData(_standardize(Xva, mean, std), torch.from_numpy(yva))
    x_test = (Xte - mean) / std  # noise amplitudes are in units of the standardized input
    runs, spikes_by_seed = [], {}
    for seed in preset.seeds:
        models = {}
        for init in preset.inits:
            start = time.perf_counter()
            result = fit_model(
                lambda: preset.network(init, Xtr.shape[1], n_classes),
                train,
                weighted_cross_entropy(),
                preset.trainer_config(**_epochs(epochs)),
                seed=seed,
                score_fn=accuracy_of_logits,
                validation=val,
                description=f"{init} seed {seed}",
            )
            models[init] = (result, time.perf_counter() - start)
        # (a) the legs model's sensitive frequencies (first layer; its Delta maps them to samples),
        # found with a grid fine enough for spikes of width ~ 2 |Re lambda| ~ 1 (40 points per unit).
        legs_layer = models["legs"][0].model.backbone.ssm_layers[0]
        top = float(np.abs(legs_layer.Lambda.detach().numpy()).max())
        grid = np.linspace(0.0, 1.2 * top + 5.0, int(40 * (1.2 * top + 5.0)) + 1)
        modes = sensitive_frequencies(legs_layer, 20, omegas=grid)[0]
        spike_thetas = _distinct_thetas(modes, preset.n_frequencies)
        # The control draws from the band the spikes lie in: low frequencies carry most of a pixel
        # sequence's content, so frequencies drawn from all of (0, pi) would mostly be easier noise.
        rng = np.random.default_rng(5000 + seed)
        band = (0.5 * min(spike_thetas), min(np.pi, 1.5 * max(spike_thetas)))
        random_thetas = rng.uniform(*band, preset.n_frequencies).tolist()
        spikes_by_seed[seed] = {
            "legs_layer0": modes.as_dict(),
            "spike_thetas": spike_thetas,
            "random_thetas": random_thetas,
            "random_band": list(band),
        }
        for init, (result, seconds) in models.items():

            def accuracy(x: np.ndarray) -> float:
                logits = predict_batches(result.model, SequenceData(torch.from_numpy(x.astype(np.float32))), 256, "cpu")
                return accuracy_of_logits(logits, torch.from_numpy(yte))

            record = {
                "init": init,
                "seed": seed,
                "seconds": seconds,
                "clean": accuracy(x_test.astype(np.float32)),
                "best_val": max((h.get("val_score", float("nan")) for h in result.history), default=None),
            }
            for label, thetas in (("spike", spike_thetas), ("random", random_thetas)):
                for amplitude in preset.noise_amplitudes:
                    noise_rng = np.random.default_rng(9000 + seed)
                    accs = [accuracy(add_sinusoid(x_test, th, amplitude, noise_rng)) for th in thetas]
                    record[f"{label}@{amplitude:g}"] = float(np.mean(accs))
                    record[f"{label}@{amplitude:g}/clean"] = float(np.mean(accs)) / record["clean"]
                    record[f"{label}@{amplitude:g}_per_frequency"] = accs
            runs.append(record)
            if verbose:
                print(
                    f"[ptd-robustness] {init} seed {seed}: clean {record['clean']:.3f} "
                    + " ".join(f"{k} {v:.3f}" for k, v in record.items() if "@" in k and "_" not in k and "/" not in k),
                    flush=True,
                )
    columns = ["clean"] + [f"{label}@{a:g}" for label in ("spike", "random") for a in preset.noise_amplitudes]
    retained = [f"{c}/clean" for c in columns[1:]]
    return {
        "noise_units": "standardized input (the training pixels' std)",
        "random_frequencies": "uniform in [spike min / 2, 1.5 spike max] (the spikes' band), per seed",
        "spikes": spikes_by_seed,
        "runs": runs,
        "columns": columns,
        "retained_columns": retained,
        "summary": _summarize(runs, ("init",), tuple(columns + retained)),
    }


# ------------------------------------------------------------------------- 5.3 ablation
def run_ablation(preset: PTDPreset, data_dir: Path | None = None, epochs: int | None = None, verbose: int = 0) -> dict:
    ((Xtr, ytr), (Xva, yva), (Xte, yte)), n_classes = _load_pixels(preset, data_dir)
    mean, std = float(Xtr.mean()), float(Xtr.std())
    train = SequenceData(_standardize(Xtr, mean, std), torch.from_numpy(ytr))
    val = SequenceData(_standardize(Xva, mean, std), torch.from_numpy(yva))
    test = SequenceData(_standardize(Xte, mean, std))
    runs = []
    for N in preset.ablation_states:
        norm_A = float(np.linalg.norm(hippo_legs(N)[0], 2))
        settings = [("legs", None)] + [("ptd", eps) for eps in preset.ablation_eps]
        for init, eps in settings:
            gamma = preset.ptd_gamma
            if init == "ptd" and preset.ablation_gamma_eps is not None:
                gamma = preset.ablation_gamma_eps / eps
            if init == "ptd":
                ptd = ptd_legs(N, eps=eps, gamma=gamma)
                relative, condition = ptd.relative_size, ptd.condition_number
                max_re = float(ptd.Lambda.real.max())
            else:
                relative, condition, max_re = 0.0, 1.0, -0.5  # the normal part: unitary V
            for seed in preset.seeds:
                start = time.perf_counter()
                result = fit_model(
                    lambda: preset.network(init, Xtr.shape[1], n_classes, d_state=N, ptd_eps=eps, ptd_gamma=gamma),
                    train,
                    weighted_cross_entropy(),
                    preset.trainer_config(**_epochs(epochs)),
                    seed=seed,
                    score_fn=accuracy_of_logits,
                    validation=val,
                    description=f"N={N} {init} {eps}",
                )
                acc = accuracy_of_logits(predict_batches(result.model, test, 256, "cpu"), torch.from_numpy(yte))
                runs.append(
                    {
                        "d_state": N,
                        "init": init,
                        "ptd_eps": eps,
                        "ptd_gamma": gamma,
                        "relative_size": relative,
                        "condition_number": condition,
                        "max_real_eigenvalue": max_re,
                        "norm_A": norm_A,
                        "seed": seed,
                        "test_accuracy": acc,
                        "seconds": time.perf_counter() - start,
                    }
                )
                if verbose:
                    print(
                        f"[ptd-ablation] N={N} {init} eps={eps} ||E||/||A||={relative:.2e} cond={condition:.3g} "
                        f"seed {seed}: accuracy {acc:.3f}",
                        flush=True,
                    )
    return {
        "runs": runs,
        "summary": _summarize(
            runs, ("d_state", "init", "ptd_eps"), ("test_accuracy", "relative_size", "condition_number")
        ),
    }


# ------------------------------------------------------------------------- shared
def _summarize(runs: list[dict], keys: tuple[str, ...], metrics: tuple[str, ...]) -> list[dict]:
    """Mean, standard deviation (ddof=1 when there are 2+ seeds), min and max over seeds."""
    groups: dict[tuple, list[dict]] = {}
    for run in runs:
        groups.setdefault(tuple(run[k] for k in keys), []).append(run)
    rows = []
    for key, members in groups.items():
        row: dict[str, Any] = dict(zip(keys, key))
        row["n_seeds"] = len(members)
        for metric in metrics:
            values = np.array([m[metric] for m in members], dtype=float)
            row[metric] = float(values.mean())
            row[f"{metric}_std"] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
            row[f"{metric}_min"], row[f"{metric}_max"] = float(values.min()), float(values.max())
        rows.append(row)
    return rows


def default_ptd_out(experiment: str, preset: str) -> Path:
    return Path("ssmts-runs") / f"{experiment}-{preset}" / "results.json"


def run_ptd(
    experiment: str,
    *,
    preset: str = "small",
    out: str | Path | None = None,
    data_dir: str | Path | None = None,
    epochs: int | None = None,
    seeds: tuple[int, ...] | None = None,
    verbose: int = 0,
) -> dict:
    """Run one PTD experiment and write its results JSON to `out`.

    experiment: one of EXPERIMENTS; preset: "tiny", "small" or "paper"; data_dir: sCIFAR for
    the paper preset of ptd-robustness / ptd-ablation; epochs, seeds: override the preset's.
    Runs on the CPU (``torch`` threads as set by the caller). Returns the results dict; its
    figures are ``ssmts.tasks.ptd_figures.save_ptd_figures(results, out)`` (the CLI writes them).
    """
    settings = get_ptd_preset(experiment, preset)
    if seeds is not None:
        settings = replace(settings, seeds=tuple(int(s) for s in seeds))
    if epochs is not None and epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    out = Path(out) if out is not None else default_ptd_out(experiment, preset)
    if out.suffix != ".json":
        raise ValueError(f"out must name a .json file, got {out}")
    check_output_files([out])  # before the training: it must not fail at its first write
    data_dir = None if data_dir is None else Path(data_dir).expanduser()
    start = time.perf_counter()
    if experiment == "ptd-sinusoids":
        body = run_sinusoids(settings, epochs, verbose)
    elif experiment == "ptd-robustness":
        body = run_robustness(settings, data_dir, epochs, verbose)
    else:
        body = run_ablation(settings, data_dir, epochs, verbose)
    results = {
        "experiment": experiment,
        "description": DESCRIPTIONS[experiment],
        "preset": preset,
        "settings": asdict(settings),
        "epochs": epochs or settings.max_epochs,
        "ssmts_version": __version__,
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "seconds": time.perf_counter() - start,
        **body,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(json_safe(results), indent=2))
    return results


def robustness_table(results: dict, retained: bool = False) -> str:
    """Markdown table of a ptd-robustness results dict: test accuracy, mean +- std over seeds, in %.

    retained=True: noisy accuracy as a share of the same model's clean accuracy instead.
    """
    columns = results["retained_columns"] if retained else results["columns"]
    lines = ["| init | seeds | " + " | ".join(columns) + " |", "|---|---|" + "---|" * len(columns)]
    for row in results["summary"]:
        cells = [f"{100 * row[c]:.1f} ± {100 * row[c + '_std']:.1f}" for c in columns]
        lines.append(f"| {row['init']} | {row['n_seeds']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sinusoid_table(results: dict) -> str:
    """Markdown table of a ptd-sinusoids results dict (mean +- std of the absolute errors over seeds)."""
    lines = [
        "| domain | init | seeds | amplitude MAE seen | amplitude MAE unseen | theta MAE seen | theta MAE unseen |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results["summary"]:
        cells = [
            f"{r[m]:.3f} ± {r[m + '_std']:.3f}"
            for m in ("amplitude_mae_seen", "amplitude_mae_unseen", "theta_mae_seen", "theta_mae_unseen")
        ]
        lines.append(f"| {r['domain']} | {r['init']} | {r['n_seeds']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def spike_column_table(results: dict) -> str:
    """Markdown table of ``spike_column_errors`` of a ptd-sinusoids results dict."""
    rows = results.get("spike_columns") or spike_column_errors(results)
    lines = [
        "| domain | init | seeds | amplitude MAE, spike columns | amplitude MAE, other columns |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['domain']} | {r['init']} | {r['n_seeds']} | {r['amplitude_mae_spike_columns']:.3f} ± "
            f"{r['amplitude_mae_spike_columns_std']:.3f} | {r['amplitude_mae_other_columns']:.3f} ± "
            f"{r['amplitude_mae_other_columns_std']:.3f} |"
        )
    return "\n".join(lines)


def ablation_table(results: dict) -> str:
    """Markdown table of a ptd-ablation results dict."""
    lines = ["| N | init | ptd_eps | ‖E‖/‖A‖ | cond(V) | test accuracy (%) | seeds |", "|---|---|---|---|---|---|---|"]
    for r in results["summary"]:
        eps = "—" if r["ptd_eps"] is None else f"{r['ptd_eps']:.0e}"
        lines.append(
            f"| {r['d_state']} | {r['init']} | {eps} | {r['relative_size']:.2e} | "
            f"{r['condition_number']:.3g} | {100 * r['test_accuracy']:.1f} ± {100 * r['test_accuracy_std']:.1f}"
            f" | {r['n_seeds']} |"
        )
    return "\n".join(lines)


__all__ = [
    "EXPERIMENTS",
    "PTDPreset",
    "get_ptd_preset",
    "run_ptd",
    "build_network",
    "sinusoids",
    "add_sinusoid",
    "amplitude_domain",
    "top_frequency_dt",
    "robustness_table",
    "sinusoid_table",
    "ablation_table",
    "spike_column_errors",
    "spike_column_table",
]
