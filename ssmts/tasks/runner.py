"""Run one benchmark task end to end through the one fit path (ssmts.training.fit_model).

    results = run_task("sc10", synthetic=True, preset="small", out="runs/sc10/results.json")

Writes, next to `out`:
    results.json           task, preset, data source, hyperparameters, epochs, best validation,
                           test metric, timings, zero-shot table (raw speech), differences from the paper
    results_history.csv    one row per epoch (train loss, validation loss/metric, lr, seconds)
    results_checkpoint.pt  the Trainer checkpoint, rewritten after every epoch (resume=True continues it)
    results_config.json    the run's settings, checked on resume so a checkpoint is never continued
                           under other settings

The model evaluated on validation and test is the one of the best validation epoch
(accuracy, or loss for regression) among the epochs trained by this call.
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from ssmts.data.base import TaskData
from ssmts.data.bidmc import standardize_splits
from ssmts.nn import scaled_delta
from ssmts.nn.functional import channel_statistics
from ssmts.training import (
    EarlyStopping,
    SequenceData,
    fit_model,
    predict_batches,
    read_checkpoint,
    resolve_device,
)
from ssmts.training.objectives import accuracy_of_logits, mse_loss, weighted_cross_entropy

from .._version import __version__
from . import zero_shot
from .data_utils import json_safe, limit_task_data, to_sequence_data
from .models import build_model
from .paths import check_output_files
from .presets import Preset, get_preset
from .registry import SyntheticUnavailableError, Task, get_task

# What the papers report for each task (test accuracy in %, or RMSE), for the results file.
PAPER_REPORTED: dict[str, dict] = {
    "lra-listops": {"model": "eSSM", "source": "eSSM Table 2", "test_accuracy": 62.20},
    "lra-text": {"model": "eSSM", "source": "eSSM Table 2", "test_accuracy": 88.25},
    "lra-retrieval": {"model": "eSSM", "source": "eSSM Table 2", "test_accuracy": 90.15},
    "lra-image": {"model": "eSSM", "source": "eSSM Table 2", "test_accuracy": 87.25},
    "lra-pathfinder": {"model": "eSSM", "source": "eSSM Table 2", "test_accuracy": 93.87},
    "lra-pathx": {"model": "eSSM", "source": "eSSM Table 2", "test_accuracy": 92.76},
    "sc10": {"model": "eSSM", "source": "eSSM Table 3", "test_accuracy": 97.59, "zero_shot_8khz_accuracy": 94.23},
    "sc35": {"model": "eSSM", "source": "eSSM Table 8", "test_accuracy": 96.08, "zero_shot_8khz_accuracy": 88.83},
    "sc10-mfcc": {"model": "eSSM", "source": "eSSM Table 3", "test_accuracy": 94.46},
    "smnist": {"model": "eSSM", "source": "eSSM Table 9", "test_accuracy": 99.54},
    "psmnist": {"model": "eSSM", "source": "eSSM Table 9", "test_accuracy": 98.45},
    "scifar": {"model": "eSSM", "source": "eSSM Table 9", "test_accuracy": 88.12},
    "bidmc-rr": {"model": "LSSL", "source": "LSSL Table 2", "test_rmse": 0.350},
    "bidmc-hr": {"model": "LSSL", "source": "LSSL Table 2", "test_rmse": 0.432},
    "bidmc-spo2": {"model": "LSSL", "source": "LSSL Table 2", "test_rmse": 0.141},
}


def output_paths(out: str | Path) -> dict[str, Path]:
    """results JSON -> {"results", "history", "checkpoint", "config"} paths next to it."""
    out = Path(out)
    if out.suffix != ".json":
        raise ValueError(f"--out must name a .json file, got {out}")
    stem = out.stem
    return {
        "results": out,
        "history": out.with_name(f"{stem}_history.csv"),
        "checkpoint": out.with_name(f"{stem}_checkpoint.pt"),
        "config": out.with_name(f"{stem}_config.json"),
    }


def default_out(task: str, preset: str, synthetic: bool) -> Path:
    return Path("ssmts-runs") / f"{task}-{preset}{'-synthetic' if synthetic else ''}" / "results.json"


def run_task(
    name: str,
    *,
    data_dir: str | Path | None = None,
    synthetic: bool = False,
    preset: str = "small",
    epochs: int | None = None,
    device: str = "auto",
    out: str | Path | None = None,
    resume: bool = False,
    seed: int = 0,
    limit: int | None = None,
    cache_dir: str | Path | None = None,
    verbose: int = 1,
    echo: Callable[[str], None] = print,
) -> dict:
    """Train and evaluate task `name`; returns the results dict (also written to `out`).

    Exactly one of data_dir (real data) and synthetic=True (offline stand-in) is needed.
    epochs: total epochs (default: the preset's); with resume=True training continues from
    the checkpoint next to `out` up to that total. limit: at most this many samples per
    split (default: the preset's). Raises DataNotFoundError for missing data,
    SyntheticUnavailableError for --synthetic on a task without a stand-in, ValueError
    for bad settings.
    """
    started = time.perf_counter()
    # Under torchrun every process runs this function; they train one model with DDP and
    # only rank 0 writes files and prints.
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    main_process = int(os.environ.get("RANK", "0")) == 0
    if not main_process:
        echo = lambda line: None  # noqa: E731
    task = get_task(name)
    if task.runner is not None:  # a task with its own protocol (state-tracking)
        return task.runner(
            data_dir=data_dir,
            synthetic=synthetic,
            preset=preset,
            epochs=epochs,
            device=device,
            out=out,
            resume=resume,
            seed=seed,
            limit=limit,
            cache_dir=cache_dir,
            verbose=verbose,
            echo=echo,
        )
    if (data_dir is None) == (not synthetic):
        raise ValueError("pass exactly one of data_dir (real data) and synthetic=True")
    config = get_preset(name, preset)
    epochs = config.max_epochs if epochs is None else int(epochs)
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    limit = config.limit if limit is None else int(limit)
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    torch_device = resolve_device(device)
    paths = output_paths(out if out is not None else default_out(name, preset, synthetic))
    if main_process:  # before the data are loaded: a long run must not fail at its first write
        check_output_files(list(paths.values()))
    if synthetic and not task.can_synthesize:
        raise SyntheticUnavailableError(f"task {name!r} has no synthetic stand-in: {task.no_synthetic_reason}")

    run_settings = {
        "task": name,
        "preset": preset,
        "synthetic": bool(synthetic),
        "data_dir": None if data_dir is None else str(Path(data_dir).expanduser().resolve()),
        "limit": limit,
        "seed": seed,
        "hyperparameters": json_safe(config.to_dict()),
    }
    start_epoch = _check_resume(paths, run_settings, resume, echo)

    # ---------------------------------------------------------------- data
    t0 = time.perf_counter()
    if synthetic:
        echo(f"[{name}] building the synthetic stand-in: {task.synthetic}")
        data = task.synthesize(config.synthetic, cache_dir)
    else:
        echo(f"[{name}] loading {data_dir}")
        data = task.load(data_dir, config.data)
    if limit is not None:
        data = limit_task_data(data, limit, limit, seed=0)
    _check_data(task, data)
    data_seconds = time.perf_counter() - t0
    # Written only once the data loaded, so a failed start leaves no stray run directory.
    paths["results"].parent.mkdir(parents=True, exist_ok=True)
    if main_process:
        paths["config"].write_text(json.dumps(run_settings, indent=2) + "\n")
    echo(
        f"[{name}] data: {len(data.train)} train / {len(data.val)} val / {len(data.test)} test, "
        f"input {tuple(data.train.X.shape[1:])}, source {data.source} ({data_seconds:.1f} s)"
    )

    input_stats = None
    if config.standardize_input and task.inputs == "signal":
        data.train, data.val, data.test, input_stats = standardize_splits(data.train, data.val, data.test)

    target_mean, target_scale = 0.0, 1.0
    if task.kind == "regression" and config.standardize_target:
        # the estimators' statistics (one function): a floor relative to the targets' magnitude
        mean, scale = channel_statistics(torch.from_numpy(np.asarray(data.train.y, dtype=np.float64))[:, None, None])
        target_mean, target_scale = float(mean[0]), float(scale[0])
    tensors = {
        split: to_sequence_data(getattr(data, split), task.inputs, task.kind, target_mean, target_scale)
        for split in ("train", "val", "test")
    }

    # ---------------------------------------------------------------- model and training
    loss_fn, score_fn = _objective(task.kind)
    trainer_config = config.trainer_config(
        max_epochs=epochs,
        device=torch_device,
        verbose=verbose if main_process else 0,
        random_state=seed,
        distributed=distributed,
    )
    description = f"{name} ({preset})"
    t0 = time.perf_counter()
    n_parameters = None

    def network():
        nonlocal n_parameters
        model = build_model(task.inputs, task.kind, data, config)
        n_parameters = sum(p.numel() for p in model.parameters())
        echo(
            f"[{name}] {preset} preset: {config.n_layers} layers, H={config.d_model}, N={config.d_state}, "
            f"heads={config.heads}, {n_parameters:,} parameters, {epochs} epochs of batch {config.batch_size} "
            f"on {torch_device}" + (f", resuming after epoch {start_epoch}" if start_epoch else "")
        )
        return model

    # Evaluate the weights of the best validation epoch: early stopping that never stops
    # (patience None) but restores the best state at the end (of the whole run: a checkpoint keeps it).
    keep_best = EarlyStopping(patience=None, tol=0.0)
    result = fit_model(
        network,
        tensors["train"],
        loss_fn,
        trainer_config,
        seed=seed,
        score_fn=score_fn,
        validation=tensors["val"],
        early_stopping=keep_best,
        epochs=epochs,
        checkpoint=paths["checkpoint"],
        resume_checkpoint=resume,
        description=description,
    )
    model = result.model
    train_seconds = time.perf_counter() - t0

    # ---------------------------------------------------------------- evaluation
    t0 = time.perf_counter()

    def outputs(split: SequenceData) -> torch.Tensor:
        return predict_batches(model, split, config.batch_size, torch_device)

    metric = _metric_fn(task.kind, target_scale)
    val_metric = metric(outputs(tensors["val"]), tensors["val"].y)
    test_metric = metric(outputs(tensors["test"]), tensors["test"].y)
    eval_seconds = time.perf_counter() - t0
    history = _history_rows(result.history, task.kind, target_scale)
    # the epoch whose weights were evaluated: the one restored, else (nothing restored: a checkpoint of an
    # earlier version that had finished) the last
    selected = keep_best.best_epoch if keep_best.best_epoch is not None else history[-1]["epoch"] if history else None

    zero_shot_rows, zero_shot_seconds = None, 0.0
    if task.zero_shot:
        t0 = time.perf_counter()
        zero_shot_rows = zero_shot_evaluation(model, data, config, torch_device)
        zero_shot_seconds = time.perf_counter() - t0

    metric_name = "accuracy" if task.kind == "classification" else "rmse"
    results = {
        "task": name,
        "description": task.description,
        "kind": task.kind,
        "metric": metric_name,
        "preset": preset,
        "data": {
            "source": data.source,
            "synthetic": bool(synthetic),
            "synthetic_recipe": task.synthetic if synthetic else None,
            "n_train": len(data.train),
            "n_val": len(data.val),
            "n_test": len(data.test),
            "input_shape": list(data.train.X.shape[1:]),
            "sample_rate": data.sample_rate,
            "n_classes": data.n_classes,
            "limit_per_split": limit,
            "input_standardization": input_stats,
            "target_standardization": (
                {"mean": target_mean, "std": target_scale}
                if task.kind == "regression" and config.standardize_target
                else None
            ),
            "meta": json_safe(data.meta),
        },
        "hyperparameters": json_safe(config.to_dict()),
        "differences_from_paper": list(config.notes),
        "epochs": {"requested": epochs, "completed": len(history), "resumed_from": start_epoch or None},
        "best_val": _best_val(history, task.kind),
        "evaluated_epoch": selected,
        "val_metric": val_metric,
        "test_metric": test_metric,
        "zero_shot": zero_shot_rows,
        "paper_reported": PAPER_REPORTED.get(name),
        "n_parameters": n_parameters,
        "seed": seed,
        "device": str(torch_device),
        "timings": {
            "data_seconds": data_seconds,
            "train_seconds": train_seconds,
            "eval_seconds": eval_seconds,
            "zero_shot_seconds": zero_shot_seconds,
            "seconds_per_epoch": (
                float(np.mean([h["seconds"] for h in history[start_epoch:]])) if history[start_epoch:] else None
            ),
            "total_seconds": time.perf_counter() - started,
        },
        "files": {key: str(path) for key, path in paths.items()},
        "versions": {"ssmts": __version__, "torch": torch.__version__, "python": platform.python_version()},
    }
    if main_process:
        _write_history(paths["history"], history)
        paths["results"].write_text(json.dumps(json_safe(results), indent=2) + "\n")
        echo(summary(results))
    return results


# ----------------------------------------------------------------------------- helpers


def _check_resume(paths: dict[str, Path], settings: dict, resume: bool, echo) -> int:
    """Epoch the checkpoint reached (0 when starting fresh); refuses a checkpoint of other settings."""
    checkpoint = paths["checkpoint"]
    if not checkpoint.exists():
        if resume:
            echo(f"no checkpoint at {checkpoint}; starting from epoch 0")
        return 0
    if not resume:
        echo(f"starting from scratch: {checkpoint} will be overwritten (pass --resume to continue it)")
        return 0
    if not paths["config"].is_file():
        raise ValueError(
            f"{checkpoint} has no {paths['config'].name} next to it; cannot check what it was "
            "trained with. Remove the checkpoint or choose another --out."
        )
    try:
        previous = json.loads(paths["config"].read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as error:
        raise ValueError(
            f"cannot resume: {paths['config']} is not valid JSON ({error}); remove the run directory "
            "or choose another --out"
        ) from None
    differing = sorted(k for k in set(previous) | set(settings) if previous.get(k) != settings.get(k))
    if differing:
        raise ValueError(
            f"cannot resume {checkpoint}: it was trained with other settings ({', '.join(differing)} "
            "differ). Run with the same task/preset/data/limit/seed or choose another --out."
        )
    return int(read_checkpoint(checkpoint)["run_epoch"])


def _check_data(task: Task, data: TaskData) -> None:
    for split in ("train", "val", "test"):
        if len(getattr(data, split)) == 0:
            # where the data came from, and which file or rule should have filled the split
            protocol = data.meta.get("split_protocol")
            known = [f"data from {data.source}"] * bool(data.source) + [f"splits by {protocol}"] * bool(protocol)
            where = f" ({'; '.join(known)})" if known else ""
            raise ValueError(f"task {task.name}: the {split} split is empty{where}")
    if task.kind == "classification" and not data.n_classes:
        raise ValueError(f"task {task.name}: the data set names no classes")


def _objective(kind: str):
    """(loss_fn(outputs, y, weight), score_fn or None) of a task kind: the estimators' objectives."""
    if kind == "classification":
        return weighted_cross_entropy(None), accuracy_of_logits
    # No score: early stopping then selects on the validation loss (MSE), monotone in RMSE.
    return mse_loss, None


def _metric_fn(kind: str, target_scale: float):
    """metric(outputs, y) -> accuracy, or RMSE in target units."""
    if kind == "classification":
        return accuracy_of_logits
    return lambda outputs, y: math.sqrt(float(mse_loss(outputs, y))) * target_scale


def _history_rows(history: list[dict], kind: str, target_scale: float) -> list[dict]:
    rows = []
    for record in history:
        # The Trainer's generic "val_score" is the accuracy here; keep the column order.
        row = {
            ("val_accuracy" if key == "val_score" and kind == "classification" else key): value
            for key, value in record.items()
        }
        if kind == "regression" and "val_loss" in row:
            row["val_rmse"] = math.sqrt(row["val_loss"]) * target_scale
        rows.append(row)
    return rows


def _best_val(history: list[dict], kind: str) -> dict | None:
    key = "val_accuracy" if kind == "classification" else "val_rmse"
    scored = [row for row in history if key in row]
    if not scored:
        return None
    best = max(scored, key=lambda r: r[key]) if kind == "classification" else min(scored, key=lambda r: r[key])
    return {"epoch": best["epoch"], key.removeprefix("val_"): best[key]}


def _write_history(path: Path, history: list[dict]) -> None:
    columns: list[str] = []
    for row in history:
        columns += [key for key in row if key not in columns]
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(history)


def zero_shot_evaluation(
    model: torch.nn.Module, data: TaskData, config: Preset, device: torch.device | str = "cpu"
) -> list[dict]:
    """Accuracy on val and test under every zero-shot condition (see ssmts.tasks.zero_shot)."""
    if not data.sample_rate:
        raise ValueError("zero-shot evaluation needs the data's sample rate")
    train_rate = int(round(data.sample_rate))

    def predict(X: np.ndarray, factor: float) -> np.ndarray:
        with scaled_delta(model, factor):  # composes with the preset's base dt_scale
            logits = predict_batches(model, SequenceData(torch.from_numpy(X)), config.batch_size, device)
        return logits.argmax(-1).numpy()

    splits = {name: (getattr(data, name).X, getattr(data, name).y) for name in ("val", "test")}
    return zero_shot.evaluate(predict, splits, train_rate)


def summary(results: dict) -> str:
    """Human-readable lines of a results dict."""
    metric = results["metric"]
    fmt = (lambda v: f"{v:.2%}") if metric == "accuracy" else (lambda v: f"{v:.4g}")
    best = results["best_val"]
    lines = [
        f"[{results['task']}] {results['preset']} preset, data: {results['data']['source']}",
        f"  epochs: {results['epochs']['completed']} of {results['epochs']['requested']}"
        f"; evaluated weights of epoch {results['evaluated_epoch']}",
    ]
    if best:
        lines.append(f"  best validation {metric}: {fmt(best[metric])} (epoch {best['epoch']})")
    lines.append(f"  validation {metric}: {fmt(results['val_metric'])}   test {metric}: {fmt(results['test_metric'])}")
    if metric == "accuracy" and results["data"]["n_classes"]:
        lines.append(f"  chance level: {1 / results['data']['n_classes']:.1%}")
    t = results["timings"]
    lines.append(
        f"  time: data {t['data_seconds']:.1f} s, training {t['train_seconds']:.1f} s, "
        f"evaluation {t['eval_seconds'] + t['zero_shot_seconds']:.1f} s, total {t['total_seconds']:.1f} s"
    )
    if results.get("zero_shot"):
        lines.append("  zero-shot change of sample rate (accuracy; no retraining):")
        table = zero_shot.format_table(results["zero_shot"], ["val_accuracy", "test_accuracy"])
        lines += ["    " + line for line in table.splitlines()]
    lines.append(f"  results: {results['files']['results']}")
    return "\n".join(lines)
