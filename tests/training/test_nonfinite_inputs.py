"""A non-finite training loss whose batch holds NaN or infinity in its inputs (a memory-mapped file
written to during the fit) is reported as bad input data, not as a diverged model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ssmts import SSMClassifier
from ssmts.training import SequenceData, Trainer
from ssmts.training.callbacks import Callback


class Linear(torch.nn.Module):
    """model(x, mask) -> (n, 2) logits of the flattened series."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(12, 2)

    def forward(self, x, mask=None):
        return self.linear(x.flatten(1))


TINY = dict(d_model=8, d_state=4, n_layers=1, min_steps=0, batch_size=8, device="cpu", random_state=0)


def _memmap(tmp_path):
    X = np.lib.format.open_memmap(tmp_path / "X.npy", mode="w+", dtype=np.float32, shape=(40, 12))
    X[:] = np.random.default_rng(0).standard_normal((40, 12))
    X.flush()
    return np.load(tmp_path / "X.npy", mmap_mode="r")


class WriteIntoTheFile(Callback):
    """After the first epoch, another program writes `value` into row 7 of the training file."""

    def __init__(self, path, value):
        self.path, self.value = path, value

    def on_epoch_end(self, trainer, record):
        written = np.load(self.path, mmap_mode="r+")
        written[7, 3] = self.value
        written.flush()


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_nan_written_into_a_memmap_during_fit_is_named_as_input_data(value, tmp_path):
    X = _memmap(tmp_path)
    y = (np.asarray(X[:, :6]).mean(1) > 0).astype(int)
    clf = SSMClassifier(**TINY, max_epochs=3, callbacks=[WriteIntoTheFile(tmp_path / "X.npy", value)])
    with pytest.raises(FloatingPointError) as raised:
        clf.fit(X, y)
    message = str(raised.value)
    assert "input data hold NaN or infinity" in message and "row 7 of X" in message, message
    assert "at epoch 2" in message and "lower lr" not in message


def test_a_diverged_model_on_finite_inputs_still_says_lower_the_learning_rate():
    torch.manual_seed(0)
    model = Linear()
    data = SequenceData(torch.randn(16, 1, 12), torch.randint(0, 2, (16,)))

    def exploding(outputs, y, weight):
        return outputs.sum() * float("inf")

    trainer = Trainer(model, exploding, max_epochs=1, batch_size=8, device="cpu", verbose=0)
    with pytest.raises(FloatingPointError, match="the model diverged.*lower lr"):
        trainer.fit(data)


def test_non_finite_tensor_inputs_name_their_rows():
    """Tensors given straight to the Trainer (not validated by an estimator) name the training rows."""
    model = Linear()
    x = torch.randn(16, 1, 12)
    x[10, 0, 4] = float("nan")
    data = SequenceData(x, torch.randint(0, 2, (16,)))
    trainer = Trainer(
        model,
        lambda o, y, w: torch.nn.functional.cross_entropy(o, y),
        max_epochs=1,
        batch_size=8,
        device="cpu",
        verbose=0,
    )
    with pytest.raises(FloatingPointError, match=r"row 10 of the training data"):
        trainer.fit(data)
