"""The fit loop reads no tensor's value back to the host inside an epoch: on a GPU each such read
(float(loss), .item(), a data-dependent branch) makes the host wait for the device to finish the step
before it can queue the next one. What it reads, it reads once an epoch, whatever the epoch's length."""

from __future__ import annotations

import traceback
import warnings

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ssmts import SSMClassifier, SSMRegressor
from ssmts.training import Trainer

TINY = dict(d_model=8, d_state=4, n_layers=2, batch_size=8, min_steps=0, max_epochs=2, random_state=0)


def _on_the_host(frame: traceback.FrameSummary) -> bool:
    """Reads of tensors that stay on the host on every device: torch's optimizers' step counters (and
    FlatAdam's, which steps them the same way), the coin drawn for a half-rate batch from the host
    generator that orders the batches, the step a padded batch is cut at (read from its mask before the
    batch leaves the host), and the output length torchaudio's resampling makes a tensor of from Python
    numbers."""
    return (
        "torch/optim" in frame.filename
        or frame.filename.endswith("ssmts/training/flat.py")
        or frame.name in ("_at_half_rate", "cropped", "_apply_sinc_resample_kernel")
    )


class ValueReads(TorchDispatchMode):
    """Counts the reads of a tensor's value into Python (aten._local_scalar_dense: .item(), float(t),
    bool(t)) but those of tensors that stay on the host (_on_the_host)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            frames = traceback.extract_stack()
            if not any(_on_the_host(frame) for frame in frames):
                self.count += 1
        return func(*args, **(kwargs or {}))


def _data(n: int, classify: bool, ragged: bool = False):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 2, 24)).astype(np.float32)
    y = (X[:, 0].mean(1) > 0).astype(int) if classify else X[:, 0].mean(1)
    if ragged:  # series of 12 to 24 steps: padded, and masked in the batch statistics
        return [x[:, : 12 + i % 13] for i, x in enumerate(X)], y
    return X, y


def _reads(estimator, n: int, ragged: bool = False) -> int:
    X, y = _data(n, isinstance(estimator, SSMClassifier), ragged)
    with ValueReads() as reads:
        estimator.fit(X, y)
    return reads.count


@pytest.mark.parametrize("make", [SSMClassifier, SSMRegressor], ids=["classifier", "regressor"])
@pytest.mark.parametrize(
    "extra, ragged",
    [({}, False), (dict(half_rate_share=0.5, sample_rate=100.0), False), ({}, True)],
    ids=["plain", "half-rate", "ragged"],
)
def test_the_values_read_do_not_grow_with_the_steps_of_an_epoch(make, extra, ragged):
    """Two epochs of 3 batches and two of 13 (20 and 100 training series) read as many values: none is
    read per step."""
    few = _reads(make(**TINY, **extra, device="cpu"), 20, ragged)
    many = _reads(make(**TINY, **extra, device="cpu"), 100, ragged)
    assert few == many, f"{many - few} more value reads for 10 more steps an epoch"


def test_the_epoch_loss_is_the_mean_of_the_step_losses_weighted_by_batch_size(monkeypatch):
    """The loss read once an epoch is what the steps' losses give, each weighted by its batch's size."""
    steps = []

    def recording(step):
        def recorded(self, batch):
            loss = step(self, batch)
            steps.append((float(loss.detach()), len(batch)))
            return loss

        return recorded

    for name in ("_loss", "_sharded_step"):  # a batch in one piece, or in shards on several threads
        monkeypatch.setattr(Trainer, name, recording(getattr(Trainer, name)))
    X, y = _data(21, classify=True)
    clf = SSMClassifier(**TINY, device="cpu").fit(X, y)
    first_epoch = steps[: len(steps) // 2]
    sizes = [size for _, size in first_epoch]
    assert len(set(sizes)) > 1, sizes  # a short last batch, so that the weights matter
    expected = sum(value * size for value, size in first_epoch) / sum(sizes)
    assert clf.history_[0]["train_loss"] == pytest.approx(expected, rel=1e-12)
    assert clf.history_[0]["train_loss"] != pytest.approx(np.mean([value for value, _ in first_epoch]), rel=1e-9)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_no_host_device_synchronization_per_training_step_on_a_gpu():
    """torch's synchronization debug mode warns on every synchronizing call: as many over 13 steps an
    epoch as over 3."""

    def synchronizations(n: int) -> int:
        X, y = _data(n, classify=True)
        clf = SSMClassifier(**TINY, device="cuda")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                clf.fit(X, y)
            finally:
                torch.cuda.set_sync_debug_mode("default")
        return sum("synchroniz" in str(w.message) for w in caught)

    assert synchronizations(20) == synchronizations(100)
