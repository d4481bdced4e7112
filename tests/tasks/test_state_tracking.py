"""State-tracking generators (against brute force) and the registered task's runner (tiny preset)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from ssmts.cli import main
from ssmts.data.state_tracking_synth import (
    PROBLEM_INFO,
    PROBLEMS,
    a5_elements,
    a5_multiplication_table,
    generate_state_tracking,
    make_state_tracking_task,
)
from ssmts.tasks import get_task, run_task
from ssmts.tasks.state_tracking import (
    MODELS,
    StateTrackingPreset,
    format_tables,
    get_state_tracking_preset,
    summarize,
    train_and_evaluate,
)

pytestmark = pytest.mark.usefixtures("one_thread")


# ---------------------------------------------------------------- generators
def test_a5_is_the_fixed_enumeration_of_the_60_even_permutations():
    elements = a5_elements()
    assert elements.shape == (60, 5) and elements[0].tolist() == [0, 1, 2, 3, 4]
    assert [tuple(p) for p in elements] == sorted(tuple(p) for p in elements)  # lexicographic
    even = [
        p
        for p in itertools.permutations(range(5))
        if sum(p[i] > p[j] for i in range(5) for j in range(i + 1, 5)) % 2 == 0
    ]
    assert [tuple(p) for p in elements] == even
    table = a5_multiplication_table()
    assert (np.sort(table, axis=1) == np.arange(60)).all()  # a Latin square: a group table
    assert (table[0] == np.arange(60)).all() and (table[:, 0] == np.arange(60)).all()
    assert (table != table.T).any()  # not abelian


@pytest.mark.parametrize("problem", PROBLEMS)
def test_states_equal_a_brute_force_fold(problem):
    tokens, states = generate_state_tracking(problem, 5, 30, random_state=3)
    info = PROBLEM_INFO[problem]
    assert tokens.min() >= 1 and tokens.max() <= info.n_symbols and states.max() < info.n_states
    elements = a5_elements()
    for row_tokens, row_states in zip(tokens, states):
        if problem == "a5":
            product = np.arange(5)
            for t, token in enumerate(row_tokens):
                product = product[elements[token - 1]]  # (P g)(k) = P(g(k))
                assert tuple(elements[row_states[t]]) == tuple(product)
            continue
        value = 0
        for t, token in enumerate(row_tokens):
            symbol = token - 1
            if problem == "parity":
                value = (value + symbol) % 2
            elif problem == "mod5":
                value = (value + symbol) % 5
            else:
                value = (value + (0, 1, -1)[symbol]) % 5
            assert row_states[t] == value


def test_generators_are_seeded_and_checked():
    a = generate_state_tracking("mod5", 4, 10, random_state=1)
    b = generate_state_tracking("mod5", 4, 10, random_state=1)
    c = generate_state_tracking("mod5", 4, 10, random_state=2)
    assert all((x == y).all() for x, y in zip(a, b)) and not (a[0] == c[0]).all()
    with pytest.raises(ValueError, match="unknown state-tracking problem 's5'"):
        generate_state_tracking("s5", 1, 1)
    data = make_state_tracking_task("a5", 6, 2, 3, train_length=5, test_length=9)
    assert data.train.X.shape == (6, 5) and data.test.y.shape == (3, 9)
    assert data.n_classes == 60 and data.vocab_size == 61


# ---------------------------------------------------------------- runner
def test_tiny_run_through_the_cli_writes_results_and_prints_the_table(tmp_path, capsys):
    out = tmp_path / "st" / "results.json"
    assert (
        main(
            [
                "tasks",
                "run",
                "state-tracking",
                "--synthetic",
                "--preset",
                "tiny",
                "--out",
                str(out),
                "--device",
                "cpu",
                "--quiet",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "| LNCDE block-diagonal |" in printed and "a5: word problem" in printed
    results = json.loads(out.read_text())
    preset = get_state_tracking_preset("tiny")
    assert results["bins"] == ["1-8", "9-16", "17-32"]
    assert len(results["runs"]) == len(preset.problems) * len(preset.models) * len(preset.seeds)
    assert all(0.0 <= v <= 1.0 for run in results["runs"] for v in run["accuracy"].values())
    assert {(r["problem"], r["model"]) for r in results["summary"]} == set(
        itertools.product(preset.problems, preset.models)
    )


def test_state_tracking_task_is_registered_and_refuses_what_does_not_apply(tmp_path, capsys):
    task = get_task("state-tracking")
    assert task.inputs == "tokens" and task.can_synthesize and task.runner is not None
    assert task.synthesize({"problem": "cycle", "n_train": 4, "n_val": 2, "n_test": 2}).n_classes == 5
    for kwargs, match in (
        (dict(data_dir=tmp_path), "--synthetic"),
        (dict(synthetic=True, epochs=3), "--epochs"),
        (dict(synthetic=True, limit=3), "--limit"),
        (dict(synthetic=True, resume=True), "--resume"),
        (dict(synthetic=True, preset="paper"), "no 'paper' preset"),
    ):
        with pytest.raises(ValueError, match=match):
            run_task("state-tracking", out=tmp_path / "r.json", echo=lambda line: None, **kwargs)
    assert main(["tasks", "show", "state-tracking"]) == 0
    assert "preset small:" in capsys.readouterr().out


def test_a_run_learns_parity_with_a_block_diagonal_lncde():
    """Evidence that the runner trains (not only that it runs): a short run on parity reaches
    >= 95% within the training length with the block-diagonal LNCDE (chance 50%)."""
    preset = get_state_tracking_preset("small").changed(
        name="test",
        backbone=dict(d_model=16, d_state=8, n_layers=2),
        problems=("parity",),
        models=("block_diagonal",),
        seeds=(0,),
        steps=200,
        n_train=512,
        n_test=64,
        train_length=16,
        bins=((16, 32),),
    )
    run = train_and_evaluate(preset, "parity", "block_diagonal", 0)
    assert run["accuracy"]["1-16"] >= 0.95, run


def test_rows_take_the_linear_cde_options_their_structure_has():
    """One backbone group for every row: the SSM row leaves the lncde_* options out, each LNCDE row
    takes the time step, the norm cap and the option of its own structure (block size, rank)."""
    preset = get_state_tracking_preset("tiny").changed(backbone=dict(lncde_block_size=2, lncde_rank=3))
    assert preset.backbone_params("ssm").layer == "ssm"
    assert preset.backbone_params("ssm").lncde_block_size is None
    block = preset.backbone_params("block_diagonal")
    assert (block.layer, block.lncde_block_size, block.lncde_rank, block.lncde_dt) == ("lncde", 2, None, 1.0)
    dplr = preset.backbone_params("dplr")
    assert (dplr.lncde_structure, dplr.lncde_block_size, dplr.lncde_rank) == ("dplr", None, 3)
    assert preset.trainer_config(5, "cpu").random_state == 5
    assert preset.trainer_config(5, "cpu").max_epochs == preset.epochs
    with pytest.raises(ValueError, match=r"\['lncde_blocksize'\] are not backbone parameters"):
        preset.changed(backbone=dict(lncde_blocksize=2))


def test_summary_and_table():
    runs = [
        {"problem": "parity", "model": m, "seed": s, "accuracy": {"1-40": a, "41-80": b}}
        for m, s, a, b in (("ssm", 0, 0.5, 0.4), ("ssm", 1, 0.7, 0.6), ("dense", 0, 1.0, 1.0))
    ]
    rows = summarize(runs)
    ssm = next(r for r in rows if r["model"] == "ssm" and r["bin"] == "1-40")
    assert ssm["mean"] == pytest.approx(0.6) and ssm["std"] == pytest.approx(0.1) and ssm["n_seeds"] == 2
    table = format_tables(rows)
    assert "| SSM (LTI, diagonal) | 60.0 ± 10.0 | 50.0 ± 10.0 |" in table
    assert "| LNCDE dense | 100.0 ± 0.0 | 100.0 ± 0.0 |" in table
    with pytest.raises(ValueError, match="unknown state-tracking model"):
        StateTrackingPreset(
            name="x",
            backbone=dict(d_model=8, d_state=8, n_layers=1),
            problems=("parity",),
            models=("mamba",),
            seeds=(0,),
            steps=1,
            n_train=4,
            n_test=4,
        )
    assert set(MODELS) == {"ssm", "diagonal", "block_diagonal", "dplr", "walsh_hadamard", "dense"}
