"""ListOps generator following the LRA one (google-research/long-range-arena,
lra_benchmarks/data/listops.py), with a seeded, order-preserving deduplication.

The process, as in LRA:

* a node at depth < max_depth (the root has depth 1) is an operator with probability
  0.25 and otherwise a digit 0..9; at depth == max_depth it is always a digit. (LRA
  calls 0.25 ``VALUE_P`` but draws a digit when ``random() > VALUE_P``, so digits are
  the 75% case.)
* an operator, drawn uniformly from MIN, MAX, MED (int of the median: for an even count
  the mean of the two middle values, truncated, so MED 2 9 is 5) and SM (sum mod 10), takes a uniform
  2..max_args arguments, each a subtree one level deeper;
* the length is counted in tokens without parentheses: 1 per digit, operator and
  closing bracket; a tree is kept when min_length < length < max_length;
* duplicates are dropped; the label is the value of the expression.

Serialization is LRA's left-nested pairs: ``[MAX 2 9]`` is written
``( ( ( [MAX 2 ) 9 ) ] )``. Files are ``basic_{train,val,test}.tsv`` with the header
``Source<TAB>Target``, as in the release, so `ssmts.data.lra.load_lra_listops` reads them.

Unlike LRA (which iterates a Python set, so its split order depends on string hashing)
the examples keep generation order: the first n_train unique trees are train, the next
n_val val, the rest test.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path
from typing import Union

from ssmts.data.base import TaskData
from ssmts.data.lra import LISTOPS_FILES, LISTOPS_MAX_LENGTH, listops_task

MIN, MAX, MED, SUM_MOD = "[MIN", "[MAX", "[MED", "[SM"
OPERATORS = (MIN, MAX, MED, SUM_MOD)
END = "]"
OPERATOR_PROBABILITY = 0.25
"""Probability that a node above the maximum depth is an operator rather than a digit."""

Tree = Union[int, tuple[str, list["Tree"]]]
"""A digit, or (operator, arguments)."""


def generate_tree(rng: random.Random, depth: int, max_depth: int, max_args: int) -> tuple[Tree, int]:
    """One random expression tree and its length in tokens (parentheses not counted)."""
    if depth >= max_depth or rng.random() > OPERATOR_PROBABILITY:
        return rng.randrange(10), 1
    n_args = rng.randint(2, max_args)
    arguments, length = [], 2  # the operator and its closing bracket
    for _ in range(n_args):
        argument, argument_length = generate_tree(rng, depth + 1, max_depth, max_args)
        arguments.append(argument)
        length += argument_length
    return (rng.choice(OPERATORS), arguments), length


def evaluate_tree(tree: Tree) -> int:
    """Value 0..9 of an expression tree."""
    if isinstance(tree, int):
        return tree
    operator, arguments = tree
    values = sorted(evaluate_tree(argument) for argument in arguments)
    if operator == MIN:
        return values[0]
    if operator == MAX:
        return values[-1]
    if operator == MED:
        middle = len(values) // 2
        # int(np.median(...)) in LRA: the mean of the two middle values, truncated.
        return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) // 2
    if operator == SUM_MOD:
        return sum(values) % 10
    raise ValueError(f"unknown ListOps operator {operator!r}")


def tree_to_string(tree: Tree) -> str:
    """LRA serialization: (op a1 ... ak) as k + 1 left-nested pairs closed by ``]``.

    ``("[MAX", [2, 9])`` -> ``"( ( ( [MAX 2 ) 9 ) ] )"``.
    """
    if isinstance(tree, int):
        return str(tree)
    operator, arguments = tree
    text = f"( {operator} {tree_to_string(arguments[0])} )"
    for argument in arguments[1:]:
        text = f"( {text} {tree_to_string(argument)} )"
    return f"( {text} {END} )"


def generate_listops(
    n_train: int,
    n_val: int,
    n_test: int,
    *,
    min_length: int = 500,
    max_length: int = LISTOPS_MAX_LENGTH,
    max_depth: int = 10,
    max_args: int = 10,
    random_state: int = 0,
    max_tries: int | None = None,
) -> dict[str, list[tuple[str, int]]]:
    """Unique ListOps examples with min_length < token length < max_length.

    Returns {"train" | "val" | "test": [(expression, value)]}.
    max_tries: give up (RuntimeError) after this many trees; default 2000 per example
    asked for. Narrow length ranges far from the natural sizes (most trees are a single
    digit) are slow or impossible.
    """
    if min(n_train, n_val, n_test) < 0:
        raise ValueError("example counts must be non-negative")
    if not 0 <= min_length < max_length - 1:
        raise ValueError(f"need 0 <= min_length < max_length - 1, got {min_length} and {max_length}")
    if max_args < 2 or max_depth < 1:
        raise ValueError(f"need max_args >= 2 and max_depth >= 1, got {max_args} and {max_depth}")
    n_total = n_train + n_val + n_test
    max_tries = 2000 * max(n_total, 1) if max_tries is None else max_tries
    rng = random.Random(random_state)
    examples: dict[str, int] = {}  # insertion-ordered: dedupe without losing the order
    tries = 0
    while len(examples) < n_total:
        if tries >= max_tries:
            raise RuntimeError(
                f"only {len(examples)} of {n_total} unique ListOps trees with "
                f"{min_length} < length < {max_length} after {tries} tries; widen the range"
            )
        tries += 1
        tree, length = generate_tree(rng, 1, max_depth, max_args)
        if min_length < length < max_length:
            text = tree_to_string(tree)
            if text not in examples:
                examples[text] = evaluate_tree(tree)
    rows = list(examples.items())
    return {"train": rows[:n_train], "val": rows[n_train : n_train + n_val], "test": rows[n_train + n_val :]}


def write_listops(splits: dict[str, list[tuple[str, int]]], out_dir: str | Path) -> list[Path]:
    """Write `generate_listops` output as basic_{train,val,test}.tsv (header Source, Target)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, filename in LISTOPS_FILES.items():
        path = out_dir / filename
        with open(path, "w", encoding="utf-8", newline="") as f:
            # lineterminator "\n": csv's default "\r\n" differs from the released files.
            writer = csv.writer(f, delimiter="\t", lineterminator="\n")
            writer.writerow(["Source", "Target"])
            writer.writerows(splits[name])
        paths.append(path)
    return paths


def make_listops_task(
    n_train: int = 1000,
    n_val: int = 100,
    n_test: int = 100,
    *,
    min_length: int = 500,
    max_length: int = LISTOPS_MAX_LENGTH,
    max_depth: int = 10,
    max_args: int = 10,
    pad_to: int | None = None,
    random_state: int = 0,
) -> TaskData:
    """Generate ListOps and tokenize it exactly as `load_lra_listops` does.

    X: (n, pad_to) int64 (pad_to defaults to max_length); y: (n,) int64; lengths: (n,).
    """
    splits = generate_listops(
        n_train,
        n_val,
        n_test,
        min_length=min_length,
        max_length=max_length,
        max_depth=max_depth,
        max_args=max_args,
        random_state=random_state,
    )
    columns = {name: ([s for s, _ in rows], [v for _, v in rows]) for name, rows in splits.items()}
    return listops_task(
        columns,
        pad_to or max_length,
        source="synthetic: ssmts.data.listops_synth",
        meta={
            "split_protocol": "generation order",
            "min_length": min_length,
            "generator_max_length": max_length,
            "max_depth": max_depth,
            "max_args": max_args,
            "random_state": random_state,
        },
    )
