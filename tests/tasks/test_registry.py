"""Task registry, presets, stand-ins and the runner: every task trains one step end to end."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from ssmts.data.base import DataNotFoundError, Split, TaskData
from ssmts.data.speech_synth import espeak_available
from ssmts.nn import SSMBackbone, TwoTowerRetrieval
from ssmts.tasks import (
    TABLE_10,
    TASKS,
    SyntheticUnavailableError,
    UnknownTaskError,
    get_preset,
    get_task,
    run_task,
    zero_shot,
)
from ssmts.tasks.data_utils import limit_task_data, load_task_arrays, save_task_arrays
from ssmts.tasks.models import build_model
from ssmts.tasks.presets import PRESET_NAMES, trainer_schedule_kwargs
from ssmts.tasks.ptd import get_ptd_preset
from ssmts.tasks.registry import PTD_EXPERIMENTS, task_presets
from ssmts.tasks.synthetic_text import NEGATIVE_CUES, POSITIVE_CUES, make_retrieval_standin, make_text_standin

from .task_names import TASK_NAMES

# The tasks of the one-model pipeline (state-tracking has its own protocol: tests/tasks/test_state_tracking.py).
PIPELINE_TASKS = [name for name in TASK_NAMES if name != "state-tracking"]
RESULT_KEYS = {
    "task",
    "description",
    "kind",
    "metric",
    "preset",
    "data",
    "hyperparameters",
    "differences_from_paper",
    "epochs",
    "best_val",
    "evaluated_epoch",
    "val_metric",
    "test_metric",
    "zero_shot",
    "paper_reported",
    "n_parameters",
    "seed",
    "device",
    "timings",
    "files",
    "versions",
}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """One cache for the module: the sc35 stand-in is synthesized once."""
    return tmp_path_factory.mktemp("ssmts_cache")


# ----------------------------------------------------------------------------- registry


def test_registry_holds_exactly_the_interface_names():
    assert list(TASKS) == TASK_NAMES


@pytest.mark.parametrize("name", PIPELINE_TASKS)
def test_task_descriptors(name):
    task = get_task(name)
    assert task.name == name
    assert task.description and "\n" not in task.description
    assert (task.kind, task.metric) in {("classification", "accuracy"), ("regression", "rmse")}
    assert task.inputs in ("tokens", "token_pairs", "signal")
    assert task.expected and task.how_to_get
    assert task.can_synthesize == (name != "bidmc-spo2")
    assert task.zero_shot == (name in ("sc10", "sc35"))
    assert task.presets == task_presets(name) == ("paper", "small", "tiny")
    for preset in task.presets:
        assert get_preset(name, preset).name == preset


def test_every_declared_preset_builds_and_no_other_does():
    """task_presets is the one list of presets per task: each builds with the task's own getter, others fail."""
    state_tracking = get_task("state-tracking")
    assert state_tracking.presets == task_presets("state-tracking") == ("small", "tiny")
    for preset in PRESET_NAMES:
        if preset in state_tracking.presets:
            assert state_tracking.describe_preset(preset).startswith(f"preset {preset}:")
        else:
            with pytest.raises(ValueError, match=f"no {preset!r} preset"):
                state_tracking.describe_preset(preset)
    for name in PTD_EXPERIMENTS:
        assert task_presets(name) == PRESET_NAMES
        for preset in task_presets(name):
            assert get_ptd_preset(name, preset).name == preset
    with pytest.raises(UnknownTaskError, match=r"^unknown task 'ptd-nothing'; known tasks: lra-listops"):
        task_presets("ptd-nothing")


def test_the_registry_is_declarative():
    """Reading the registry, its presets and checking a data directory import neither torch nor numpy:
    loaders, generators and runners are imported when a task is loaded or run."""
    code = (
        "import sys, tempfile; import ssmts.tasks as tasks; from ssmts.tasks.registry import PTD_EXPERIMENTS; "
        "names = [*tasks.TASKS, *PTD_EXPERIMENTS]; presets = [tasks.task_presets(n) for n in names]; "
        "d = tempfile.mkdtemp(); "
        "status = [(t.data_status(), t.data_present(d), t.expected) for t in tasks.list_tasks()]; "
        "print(len(names), sorted(m for m in ('torch', 'numpy', 'sklearn', 'soundfile') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{len(TASK_NAMES) + len(PTD_EXPERIMENTS)} []"


def test_unknown_task_names_close_matches():
    with pytest.raises(UnknownTaskError, match=r"unknown task 'sc01'.*did you mean sc10"):
        get_task("sc01")


def test_spo2_has_no_synthetic_stand_in(tmp_path):
    task = get_task("bidmc-spo2")
    assert task.data_status() == "needs download"
    with pytest.raises(SyntheticUnavailableError, match="red to infrared"):
        task.synthesize({}, tmp_path)


def test_data_present_and_status(tmp_path):
    listops, mnist, bidmc = get_task("lra-listops"), get_task("smnist"), get_task("bidmc-hr")
    assert not listops.data_present(tmp_path) and not listops.data_present(tmp_path / "absent")
    assert listops.data_status(tmp_path) == "can be synthesized"
    (tmp_path / "lra_release" / "listops-1000").mkdir(parents=True)
    for split in ("train", "val", "test"):
        (tmp_path / "lra_release" / "listops-1000" / f"basic_{split}.tsv").write_text("Source\tTarget\n")
    assert listops.data_present(tmp_path) and listops.data_status(tmp_path) == "present"
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte"):
        (raw / f"{name}.gz").write_bytes(b"")
    assert not mnist.data_present(tmp_path)  # one file still missing
    (raw / "t10k-labels-idx1-ubyte").write_bytes(b"")
    assert mnist.data_present(tmp_path)
    (tmp_path / "HR").mkdir()
    (tmp_path / "HR" / "BIDMC32HR_TRAIN.ts").write_text("")
    (tmp_path / "HR" / "BIDMC32HR_TEST.ts").write_text("")
    assert bidmc.data_present(tmp_path) and not get_task("bidmc-rr").data_present(tmp_path)


def test_the_reviews_count_as_present_wherever_the_text_loader_finds_them(tmp_path):
    text = get_task("lra-text")
    reviews = tmp_path / "lra_release" / "aclImdb"  # the LRA release's layout, which load_lra_text reads
    for split in ("train", "test"):
        for label in ("neg", "pos"):
            (reviews / split / label).mkdir(parents=True)
    assert text.data_present(tmp_path) and text.data_status(tmp_path) == "present"


def test_missing_real_data_raises_data_not_found(tmp_path):
    with pytest.raises(DataNotFoundError, match="basic_train.tsv"):
        get_task("lra-listops").load(tmp_path)
    with pytest.raises(DataNotFoundError, match="speech_commands_v0.02.tar.gz"):
        get_task("sc10").load(tmp_path / "absent")


# ----------------------------------------------------------------------------- presets


def test_paper_presets_follow_essm_table_10():
    # Rows typed from the paper here, independently of presets.TABLE_10:
    # batch, epochs, depth, heads, H, N, lr SSM, lr others, dropout, prenorm.
    expected = {
        "lra-listops": (100, 80, 6, 4, 256, 256, 0.01, 0.01, 0.0, False),
        "lra-text": (16, 80, 6, 256, 256, 256, 0.001, 0.004, 0.1, True),
        "lra-pathx": (8, 200, 6, 8, 192, 256, 0.0005, 0.001, 0.0, True),
        "sc10": (16, 150, 6, 32, 128, 128, 0.001, 0.006, 0.1, True),
        "smnist": (50, 150, 4, 16, 128, 96, 0.002, 0.008, 0.1, True),
        "scifar": (50, 200, 6, 64, 256, 512, 0.001, 0.005, 0.1, True),
    }
    for task, row in expected.items():
        p = get_preset(task, "paper")
        assert (
            p.batch_size,
            p.max_epochs,
            p.n_layers,
            p.heads,
            p.d_model,
            p.d_state,
            p.lr_ssm,
            p.lr,
            p.dropout,
            p.prenorm,
        ) == row, task
    assert len(TABLE_10) == 12


def test_paper_preset_task_specifics():
    listops = get_preset("lra-listops", "paper")
    assert listops.activation == "leaky_relu" and listops.bidirectional is False
    assert get_preset("lra-text", "paper").bidirectional == "essm"
    pathx = get_preset("lra-pathx", "paper")
    assert (pathx.dt_min, pathx.dt_max, pathx.dt_scale) == (1e-4, 0.1, 0.0625)
    # The Trainer runs each paper schedule: plateau factor/patience and cosine warm-up/total steps.
    text, sc10 = get_preset("lra-text", "paper"), get_preset("sc10", "paper")
    assert text.scheduler == "plateau" and not any("ReduceLROnPlateau" in n for n in text.notes)
    assert sc10.paper_schedule == {"name": "plateau", "factor": 0.2, "patience": 10}
    assert trainer_schedule_kwargs(sc10) == {"plateau_factor": 0.2, "plateau_patience": 10}
    retrieval = get_preset("lra-retrieval", "paper")
    assert retrieval.paper_schedule["warmup_steps"] == 1000
    assert trainer_schedule_kwargs(retrieval) == {"warmup_steps": 1000, "total_steps": 50_000}
    bidmc = get_preset("bidmc-rr", "paper")
    assert (bidmc.n_layers, bidmc.d_model, bidmc.d_state, bidmc.lr, bidmc.max_epochs) == (6, 128, 256, 0.01, 500)
    assert bidmc.paper_schedule["name"] == "multistep"
    with pytest.raises(ValueError, match="unknown preset"):
        get_preset("sc10", "huge")


# ----------------------------------------------------------------------------- models


def test_retrieval_two_tower_shapes_and_padding_invariance():
    torch.manual_seed(0)
    encoder = SSMBackbone(1, 16, 2, None, vocab_size=257, d_state=8, heads=2, norm="batch", bidirectional="essm")
    model = TwoTowerRetrieval(encoder).eval()
    lengths = torch.tensor([[5, 9], [12, 3]])
    x = torch.zeros(2, 2, 12, dtype=torch.long)
    for i in range(2):
        for j in range(2):
            x[i, j, : lengths[i, j]] = torch.randint(1, 257, (int(lengths[i, j]),))
    mask = torch.arange(12) < lengths[..., None]
    logits = model(x, mask)
    assert logits.shape == (2, 2)
    # More padding must not change anything: pooling and the SSM see only real bytes.
    x_long = torch.cat([x, torch.zeros(2, 2, 20, dtype=torch.long)], dim=-1)
    mask_long = torch.arange(32) < lengths[..., None]
    torch.testing.assert_close(model(x_long, mask_long), logits, atol=1e-5, rtol=1e-5)
    # The pair is compared: swapping one document changes the output.
    assert not torch.allclose(model(x[:, [1, 0]], mask[:, [1, 0]]), logits)
    with pytest.raises(ValueError, match="no decoder"):
        TwoTowerRetrieval(SSMBackbone(1, 8, 1, 2, vocab_size=257, d_state=4))


def test_pathx_model_keeps_delta_scale():
    data = TaskData(
        Split(np.zeros((2, 1, 16), np.float32), np.array([0, 1])),
        Split(np.zeros((1, 1, 16), np.float32), np.array([0])),
        Split(np.zeros((1, 1, 16), np.float32), np.array([1])),
        n_classes=2,
    )
    model = build_model("signal", "classification", data, get_preset("lra-pathx", "tiny"))
    assert model.backbone.dt_scale == 0.0625


# ----------------------------------------------------------------------------- stand-ins


def test_text_stand_in_label_is_the_majority_of_cues():
    data = make_text_standin(40, 5, 5, max_length=300, random_state=1)
    assert data.train.X.shape == (40, 300) and data.vocab_size == 257
    assert 15 <= data.train.y.sum() <= 25
    for row, label, length in zip(data.train.X, data.train.y, data.train.lengths):
        assert np.all(row[length:] == 0) and np.all(row[:length] > 0)
        words = bytes((row[:length] - 1).astype(np.uint8)).decode("ascii").split()
        positive = sum(w in POSITIVE_CUES for w in words)
        negative = sum(w in NEGATIVE_CUES for w in words)
        assert (positive > negative) == bool(label)


def test_retrieval_stand_in_shapes_and_determinism():
    a = make_retrieval_standin(20, 4, 4, max_length=200, random_state=3)
    b = make_retrieval_standin(20, 4, 4, max_length=200, random_state=3)
    assert a.train.X.shape == (20, 2, 200) and a.train.lengths.shape == (20, 2)
    np.testing.assert_array_equal(a.train.X, b.train.X)
    assert set(np.unique(a.train.y)) == {0, 1}


def test_limit_and_array_cache_round_trip(tmp_path):
    data = make_text_standin(30, 10, 10, max_length=128)
    limited = limit_task_data(data, 8, 4, seed=0)
    assert (len(limited.train), len(limited.val), len(limited.test)) == (8, 4, 4)
    assert limited.meta["subset"]["from_sizes"] == {"train": 30, "val": 10, "test": 10}
    save_task_arrays(limited, tmp_path / "x")
    again = load_task_arrays(tmp_path / "x")
    assert isinstance(again.train.X, np.memmap)  # read from disk batch by batch
    np.testing.assert_array_equal(again.train.X, limited.train.X)
    np.testing.assert_array_equal(again.test.lengths, limited.test.lengths)
    assert again.vocab_size == 257 and again.classes == ["neg", "pos"]


def test_a_limited_split_lists_the_files_of_the_samples_it_kept():
    data = make_text_standin(30, 10, 10, max_length=128)

    def named(split):  # a loader's file list (the speech loader's form): each sample's file named by its values
        return [hashlib.sha1(np.ascontiguousarray(x).tobytes()).hexdigest() + ".wav" for x in split.X]

    data.meta["files"] = {name: named(getattr(data, name)) for name in ("train", "val", "test")}
    limited = limit_task_data(data, 8, 4, seed=0)
    for name in ("train", "val", "test"):
        split = getattr(limited, name)
        assert limited.meta["files"][name] == named(split)
        assert len(limited.meta["files"][name]) == len(split)


def test_zero_shot_conditions_and_inputs():
    rows = zero_shot.conditions(4000)
    assert [(c.rate, c.input_method, c.rescale_delta) for c in rows] == [
        (4000, "as trained", False),
        (2000, "decimate", True),
        (2000, "resample", True),
        (2000, "decimate", False),
        (2000, "resample", False),
    ]
    X = np.arange(2 * 1 * 10, dtype=np.float32).reshape(2, 1, 10)
    np.testing.assert_array_equal(zero_shot.make_input(X, 4000, rows[1]), X[..., ::2])
    assert zero_shot.make_input(X, 4000, rows[2]).shape == (2, 1, 5)
    with pytest.raises(ValueError, match="even integer"):
        zero_shot.half_rate(4001)


# ----------------------------------------------------------------------------- one step per task


@pytest.mark.parametrize("name", [n for n in PIPELINE_TASKS if n != "bidmc-spo2"])
def test_every_task_trains_one_step_on_its_stand_in(name, tmp_path, cache_dir):
    if name == "sc35" and not espeak_available():
        pytest.skip("the sc35 stand-in needs espeak-ng")
    torch.set_num_threads(1)
    out = tmp_path / "results.json"
    results = run_task(
        name, synthetic=True, preset="tiny", out=out, cache_dir=cache_dir, verbose=0, echo=lambda line: None
    )
    assert RESULT_KEYS <= set(results)
    assert results["data"]["synthetic"] and results["data"]["n_train"] == 8
    assert results["epochs"] == {"requested": 1, "completed": 1, "resumed_from": None}
    assert results["evaluated_epoch"] == 1
    metric = results["test_metric"]
    if results["kind"] == "classification":
        assert 0.0 <= metric <= 1.0
    else:
        assert math.isfinite(metric) and metric > 0
    if name in ("sc10", "sc35"):
        assert [row["rate_hz"] for row in results["zero_shot"]] == [1000, 500, 500, 500, 500]
        assert all(0.0 <= row["test_accuracy"] <= 1.0 for row in results["zero_shot"])
    else:
        assert results["zero_shot"] is None
    assert json.loads(out.read_text())["task"] == name
    with open(tmp_path / "results_history.csv", newline="") as handle:
        history = list(csv.DictReader(handle))
    assert len(history) == 1 and history[0]["epoch"] == "1"
    assert ("val_accuracy" if results["kind"] == "classification" else "val_rmse") in history[0]
    assert (tmp_path / "results_checkpoint.pt").is_file()


def test_resume_continues_the_epoch_count(tmp_path):
    torch.set_num_threads(1)
    out = tmp_path / "run" / "results.json"
    kwargs = dict(synthetic=True, preset="tiny", out=out, verbose=0, echo=lambda line: None)
    first = run_task("smnist", epochs=1, **kwargs)
    assert first["epochs"]["completed"] == 1
    second = run_task("smnist", epochs=3, resume=True, **kwargs)
    assert second["epochs"] == {"requested": 3, "completed": 3, "resumed_from": 1}
    assert second["evaluated_epoch"] in (2, 3)
    with open(tmp_path / "run" / "results_history.csv", newline="") as handle:
        assert [row["epoch"] for row in csv.DictReader(handle)] == ["1", "2", "3"]
    # The checkpoint reached epoch 3: continuing to 3 trains nothing more.
    third = run_task("smnist", epochs=3, resume=True, **kwargs)
    assert third["epochs"]["completed"] == 3 and third["evaluated_epoch"] == 3
    with pytest.raises(ValueError, match="other settings.*seed"):
        run_task("smnist", epochs=4, resume=True, seed=1, **kwargs)


def test_run_task_rejects_bad_settings(tmp_path):
    with pytest.raises(ValueError, match="exactly one"):
        run_task("smnist", out=tmp_path / "r.json")
    with pytest.raises(ValueError, match="epochs"):
        run_task("smnist", synthetic=True, epochs=0, out=tmp_path / "r.json")
    with pytest.raises(ValueError, match=r"\.json"):
        run_task("smnist", synthetic=True, out=tmp_path / "r.txt")
    with pytest.raises(SyntheticUnavailableError, match=r"^task 'bidmc-spo2' has no synthetic stand-in: SpO2"):
        run_task("bidmc-spo2", synthetic=True, out=tmp_path / "r.json")
    assert not (tmp_path / "r_config.json").exists()
