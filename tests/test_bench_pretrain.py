"""The pretraining script: reproducible weights that SSMForecaster(pretrained=...) reads."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ssmts.bench.pretrain import main
from ssmts.sktime import SSMForecaster
from ssmts.sktime._pretrained import read_pretrained
from ssmts.training.flat import FlatAdam


def _run(path, seed=0):
    argv = ["--series", "40", "--steps", "12", "--context", "12", "--horizon", "4", "--seed", str(seed)]
    assert main([*argv, "--threads", "1", "--out", str(path)]) == 0
    return read_pretrained(path)


def test_the_same_seed_gives_the_same_weights_and_another_seed_others(tmp_path):
    (meta_a, a), (meta_b, b), (_, c) = (_run(tmp_path / f"{k}.safetensors", s) for k, s in ("a0", "b0", "c1"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a)
    assert meta_a["training"]["command"] == meta_b["training"]["command"]
    assert meta_a["training"]["command"].endswith("--series 40 --steps 12 --context 12 --horizon 4 --seed 0")
    assert meta_a["context_length"] == 12 and meta_a["horizon"] == 4
    # the corpus keeps out the development sets and M1's yearly series
    packaged = meta_a["training"]["packaged_series"]
    assert packaged and not any(name.startswith("m1_yearly:") for name in packaged)


def test_a_run_of_another_corpus_mix_records_it_in_its_command(tmp_path):
    """The command in the metadata makes the same file again: a mix other than the default's is named
    (the default's is not, as the shipped runs' commands do not name it)."""
    argv = ["--series", "40", "--steps", "12", "--context", "12", "--horizon", "4", "--seed", "0"]
    mixed = [*argv, "--ets-share", "0.25"]
    assert main([*mixed, "--threads", "1", "--out", str(tmp_path / "m.safetensors")]) == 0
    metadata, mixed_state = read_pretrained(tmp_path / "m.safetensors")
    assert metadata["training"]["command"] == "python -m ssmts.bench pretrain " + " ".join(mixed)
    _, default_state = _run(tmp_path / "d.safetensors")
    assert any(not torch.equal(mixed_state[k], default_state[k]) for k in mixed_state)  # another corpus


def test_a_short_run_trains_and_the_file_records_it(tmp_path, monkeypatch):
    """Two epochs: the training loss goes down, every weight moves from its initial value, and the
    file holds the trained network with the command and what the run did."""
    import ssmts.sktime._pretrained as pretrained

    seen = {}
    build, write = SSMForecaster._build_network, pretrained.write_pretrained

    def build_and_keep(self, spec=None):  # the network before its first step
        network = build(self, spec)
        seen["initial"] = {k: v.detach().clone() for k, v in network.state_dict().items()}
        return network

    def write_and_keep(forecaster, path, training):
        seen["forecaster"] = forecaster
        return write(forecaster, path, training)

    def count_steps(step):  # the optimizer steps taken, counted where they are taken
        def counted(self, *args, **kwargs):
            seen["steps"] = seen.get("steps", 0) + 1
            return step(self, *args, **kwargs)

        return counted

    monkeypatch.setattr(SSMForecaster, "_build_network", build_and_keep)
    monkeypatch.setattr(FlatAdam, "step", count_steps(FlatAdam.step))  # the Trainer's optimizer on a CPU
    monkeypatch.setattr(pretrained, "write_pretrained", write_and_keep)
    argv = ["--series", "40", "--steps", "300", "--context", "12", "--horizon", "4", "--seed", "0", "--threads", "1"]
    assert main([*argv, "--out", str(tmp_path / "w.safetensors")]) == 0
    metadata, stored = read_pretrained(tmp_path / "w.safetensors")
    training, history = metadata["training"], seen["forecaster"].history_

    # measured: 2 epochs of 118 batches, train loss 0.851 -> 0.833
    assert len(history) == training["epochs"] >= 2
    assert history[-1]["train_loss"] < history[0]["train_loss"]
    assert training["final_loss"] == history[-1]["train_loss"]
    # --steps bounds the run in whole epochs: as many as fit within 300 steps
    steps, per_epoch = seen["steps"], seen["steps"] // training["epochs"]
    assert training["optimizer_steps"] == steps == training["epochs"] * per_epoch
    assert 300 - per_epoch < steps <= 300
    assert training["steps"] == 300 and training["threads"] == 1
    assert training["command"] == "python -m ssmts.bench pretrain " + " ".join(argv[:-2])
    assert metadata["context_length"] == 12 and metadata["horizon"] == 4

    initial = seen["initial"]
    assert initial.keys() == stored.keys()
    assert all(not torch.equal(initial[k], stored[k]) for k in stored)  # every tensor trained
    trained = seen["forecaster"].model_.state_dict()
    assert all(torch.equal(trained[k], stored[k]) for k in stored)  # the file holds the trained network
    y = pd.Series(np.linspace(1, 30, 30), index=pd.period_range("2000", periods=30, freq="Y"))
    f = SSMForecaster(pretrained=True, pretrained_weights=str(tmp_path / "w.safetensors")).fit(y, fh=[1, 2, 3, 4])
    assert f.n_iter_ == 0 and np.isfinite(f.predict().to_numpy()).all()


def test_the_shipped_file_stacks_three_default_runs_of_seeds_0_1_2(tmp_path):
    """The metadata a default run writes (built by the functions the run calls, on a forecaster
    fitted for a few steps: the fields do not depend on how long it trained) against the shipped
    file's, field by field, and each member's recorded command against the default run's of its seed."""
    import json

    from safetensors import safe_open

    import ssmts.bench.pretrain as pretrain
    from ssmts.sktime._pretrained import METADATA_KEY, default_weights, pretrained_metadata

    with safe_open(str(default_weights()), framework="pt") as f:
        shipped = json.loads(f.metadata()[METADATA_KEY])
    args = pretrain.parser().parse_args([])
    panel, packaged = pretrain.corpus_panel(4, args.seed)
    forecaster = SSMForecaster(
        context_length=12,
        max_epochs=1,
        max_steps=2,
        min_steps=0,
        random_state=0,
        **{**pretrain.NETWORK, "d_model": 8, "d_state": 4, "n_layers": 1},
    )
    forecaster.fit(panel, fh=list(range(1, 5)))
    training = pretrain.training_record(args, forecaster, packaged, seconds=1.0)
    written = pretrained_metadata(forecaster, training)

    assert set(written) == set(shipped) - {"sha256"}
    assert set(written["params"]) == set(shipped["params"])
    assert shipped["params"]["ensemble_size"] == 3
    stack = "python -m ssmts.bench pretrain --stack seed0.safetensors seed1.safetensors seed2.safetensors"
    assert shipped["training"]["command"] == stack
    members = shipped["training"]["members"]
    assert len(members) == 3
    for seed, member in enumerate(members):
        default_run = pretrain.training_record(
            pretrain.parser().parse_args(["--seed", str(seed)]), forecaster, packaged, 1.0
        )
        assert member["command"] == default_run["command"]  # the defaults are the shipped runs' settings
        assert member["packaged_series"] == packaged
        fields = set(written["training"]) | {"sha256"}
        assert set(member) == (fields - {"optimizer_steps"} if seed == 0 else fields)  # 0.1.0 lacked it
    assert "first member's was written\nby ssmts 0.1.0" in pretrain.__doc__


def test_stacked_files_forecast_the_average_of_their_members_grids(tmp_path):
    """--stack: one file whose zero-shot quantiles are the mean of its members' own (each member
    read from its file as a forecaster on its own), with the members' training records kept."""
    (meta_a, _), (meta_b, _) = _run(tmp_path / "a.safetensors", 0), _run(tmp_path / "b.safetensors", 1)
    files = [str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors")]
    assert main(["--stack", *files, "--out", str(tmp_path / "ab.safetensors")]) == 0
    metadata, state = read_pretrained(tmp_path / "ab.safetensors")
    assert metadata["params"]["ensemble_size"] == 2
    assert [m["command"] for m in metadata["training"]["members"]] == [
        meta_a["training"]["command"],
        meta_b["training"]["command"],
    ]
    assert metadata["training"]["command"] == "python -m ssmts.bench pretrain --stack a.safetensors b.safetensors"
    assert {k.split(".")[1] for k in state} == {"0", "1"}

    rng = np.random.default_rng(0)
    y = pd.Series(np.cumsum(rng.normal(0.3, 1.0, 30)), index=pd.period_range("2000", periods=30, freq="Y"))
    levels = [0.05, 0.25, 0.5, 0.9]

    def quantiles(path):
        # the grids as the networks give them: a calibration would widen each forecaster on its own
        f = SSMForecaster(pretrained=True, pretrained_weights=path, calibration="none").fit(y, fh=[1, 2, 3, 4])
        return f.predict_quantiles(alpha=levels).to_numpy()

    members = np.mean([quantiles(path) for path in files], axis=0)
    np.testing.assert_allclose(quantiles(str(tmp_path / "ab.safetensors")), members, rtol=1e-5, atol=1e-5)
    assert not np.allclose(quantiles(files[0]), quantiles(files[1]), rtol=1e-3)  # the members differ


def test_stacking_refuses_files_of_other_inputs(tmp_path):
    import pytest

    from ssmts.sktime._pretrained import _save, stack_pretrained

    _run(tmp_path / "a.safetensors")
    argv = ["--series", "40", "--steps", "12", "--context", "8", "--horizon", "4", "--seed", "0", "--threads", "1"]
    assert main([*argv, "--out", str(tmp_path / "c8.safetensors")]) == 0
    with pytest.raises(ValueError, match=r"c8\.safetensors has context_length 8, but .*a\.safetensors has 12"):
        stack_pretrained([tmp_path / "a.safetensors", tmp_path / "c8.safetensors"], tmp_path / "x.safetensors", {})
    with pytest.raises(ValueError, match=r"^stacking takes at least two pretrained files, got 1$"):
        stack_pretrained([tmp_path / "a.safetensors"], tmp_path / "x.safetensors", {})
    # a (signed) file with a weight outside its members: stacking would drop it
    metadata, state = read_pretrained(tmp_path / "a.safetensors")
    metadata.pop("sha256")
    _save({**state, "extra.weight": torch.zeros(2)}, metadata, tmp_path / "extra.safetensors")
    with pytest.raises(ValueError, match=r"extra\.safetensors holds weights outside its 1 member\(s\)"):
        stack_pretrained([tmp_path / "a.safetensors", tmp_path / "extra.safetensors"], tmp_path / "x.safetensors", {})
