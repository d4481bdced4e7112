"""Zero-shot change of sample rate (docs/concepts.md#zero-shot-resampling): the inputs and the results table.

A model trained at rate f0 classifies the same signals at f1 = f0 / 2 by scaling every
Delta by f0 / f1 (nothing is retrained). The half-rate signal is made two ways:
decimation x[::2] without an anti-aliasing filter (the S4 protocol, which eSSM follows)
and band-limited resampling. The table also shows the half-rate input without the
rescaling, which tells how much of the result the rescaling is responsible for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ssmts.nn.resampling import change_rate


@dataclass(frozen=True)
class Condition:
    """One row of the zero-shot table: the rate of the input, how it was made, and whether Delta is rescaled."""

    name: str
    rate: int
    input_method: str  # "as trained", "decimate" or "resample"
    rescale_delta: bool


def conditions(train_rate: int) -> list[Condition]:
    """The five rows: the training rate, then half the rate {rescaled, not} x {decimated, resampled}."""
    half = half_rate(train_rate)
    return [
        Condition("training rate", train_rate, "as trained", False),
        Condition("half rate, Delta rescaled, decimated x[::2]", half, "decimate", True),
        Condition("half rate, Delta rescaled, resampled", half, "resample", True),
        Condition("half rate, no rescaling, decimated x[::2]", half, "decimate", False),
        Condition("half rate, no rescaling, resampled", half, "resample", False),
    ]


def half_rate(train_rate: float) -> int:
    """train_rate / 2 as an int; decimation by 2 needs an even integer rate."""
    rate = int(round(train_rate))
    if rate != train_rate or rate % 2:
        raise ValueError(f"zero-shot at half the rate needs an even integer training rate, got {train_rate}")
    return rate // 2


def make_input(X: np.ndarray, train_rate: int, condition: Condition) -> np.ndarray:
    """X: (n, C, L) at train_rate -> the input of `condition`, (n, C, L') float32."""
    if condition.input_method == "as trained":
        return np.asarray(X, dtype=np.float32)
    return change_rate(X, train_rate, condition.rate, method=condition.input_method)


def evaluate(
    predict: Callable[[np.ndarray, float], np.ndarray],
    splits: dict[str, tuple[np.ndarray, np.ndarray]],
    train_rate: int,
) -> list[dict]:
    """Accuracy on every split under every condition: the zero-shot table of the demo and the tasks.

    predict(X, delta_factor) -> labels runs the model on X (n, C, L) with every Delta times
    delta_factor (train_rate / input rate when the condition rescales, else 1).
    splits: {name: (X at train_rate, labels)}; the row gets a "<name>_accuracy" per split.
    """
    rows = []
    for condition in conditions(train_rate):
        factor = train_rate / condition.rate if condition.rescale_delta else 1.0
        row = {
            "condition": condition.name,
            "rate_hz": condition.rate,
            "input": condition.input_method,
            "delta_scale": factor,
        }
        for name, (X, y) in splits.items():
            labels = predict(make_input(X, train_rate, condition), factor)
            row[f"{name}_accuracy"] = float(np.mean(np.asarray(labels) == np.asarray(y)))
        rows.append(row)
    return rows


def format_table(rows: list[dict], columns: list[str], chance: float | None = None) -> str:
    """Plain-text table of zero-shot rows (dicts with "condition", "rate_hz", "delta_scale" and `columns`)."""
    header = f"{'condition':<45} {'rate (Hz)':>9} {'Delta x':>7}" + "".join(f" {c:>14}" for c in columns)
    lines = [header, "-" * len(header)]
    for row in rows:
        cells = "".join(f" {_fmt(row.get(c)):>14}" for c in columns)
        lines.append(f"{row['condition']:<45} {row['rate_hz']:>9} {row['delta_scale']:>7g}{cells}")
    if chance is not None:
        lines.append(f"chance level: {chance:.1%}")
    return "\n".join(lines)


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.1%}"
