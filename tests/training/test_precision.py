"""precision="bf16-mixed" / "16-mixed": the training forward runs the network's matrix products in
bfloat16 / float16 under torch.autocast (the SSM's kernels, FFTs and states stay float32), the loss
and the predictions are float32, float16's loss is scaled (GradScaler, whose state a continued fit
keeps), and the fit lands close to the float32 one. compile=True trains through torch.compile."""

import numpy as np
import pytest
import torch

from ssmts import SSMClassifier
from ssmts.training import Callback

TINY = dict(d_model=16, d_state=8, n_layers=1, max_epochs=6, min_steps=0, batch_size=8, device="cpu", random_state=0)
RNG = np.random.default_rng(0)
X = RNG.standard_normal((32, 2, 40)).astype(np.float32)
Y = (X[:, 0, :20].mean(1) > 0).astype(int)


class RecordPrecision(Callback):
    """What each SSM layer's training forward runs under: (autocast on, its dtype), and the dtype
    of the layer's own parameters."""

    def __init__(self):
        self.autocast, self.ssm = set(), set()

    def on_fit_start(self, trainer):
        from ssmts.nn import SSM

        def hook(module, inputs, output):
            if module.training:
                enabled = torch.is_autocast_enabled("cpu")
                self.autocast.add((enabled, torch.get_autocast_dtype("cpu") if enabled else None))
                self.ssm.add(module.log_dt.dtype)

        for module in trainer.model.modules():
            if isinstance(module, SSM):
                module.register_forward_hook(hook)


@pytest.mark.parametrize(
    "precision, expected",
    [("32", {(False, None)}), ("bf16-mixed", {(True, torch.bfloat16)}), ("16-mixed", {(True, torch.float16)})],
)
def test_the_training_forward_runs_in_the_chosen_precision(precision, expected):
    record = RecordPrecision()
    clf = SSMClassifier(**TINY, precision=precision, callbacks=[record]).fit(X, Y)
    assert record.autocast == expected
    assert record.ssm == {torch.float32}  # the SSM's own parameters stay float32
    proba = clf.predict_proba(X)  # predictions: float32 network, float64 probabilities
    assert proba.dtype == np.float64 and np.isfinite(proba).all()


@pytest.mark.parametrize("precision, measured", [("bf16-mixed", 2.5e-4), ("16-mixed", 3.2e-5)])
def test_mixed_precision_training_follows_float32(precision, measured):
    """Same seed, same data: the 8-bit (bfloat16) or 11-bit (float16) mantissa moves the training
    losses little (measured on this problem: at most `measured` relative over 6 epochs; the bound,
    30x that, leaves room for other platforms' kernels)."""
    runs = {p: SSMClassifier(**TINY, precision=p).fit(X, Y) for p in ("32", precision)}
    losses = {p: np.array([r["train_loss"] for r in clf.history_]) for p, clf in runs.items()}
    np.testing.assert_allclose(losses[precision], losses["32"], rtol=30 * measured)
    assert not np.array_equal(losses[precision], losses["32"])  # it did run in another precision
    agree = (runs["32"].predict(X) == runs[precision].predict(X)).mean()
    assert agree >= 0.9


def test_float16_scales_the_loss_and_a_continued_fit_keeps_the_scale():
    clf = SSMClassifier(**TINY, precision="16-mixed").fit(X, Y)
    scaler = clf.training_state_["grad_scaler"]
    # GradScaler starts at 2^16 and doubles every 2000 clean steps: 24 steps keep it there
    assert scaler["scale"] == 2.0**16 and scaler["_growth_tracker"] == 24
    clf.partial_fit(X, Y)
    assert clf.training_state_["grad_scaler"]["_growth_tracker"] == 28


def test_float16_overflow_is_blamed_on_the_precision_not_the_learning_rate():
    """Inputs kept at 1e6 (normalize="none") overflow float16's 65504 in the forward: the loss is not
    finite, and the message names the precision and the way out; float32 trains on the same data."""
    big = X * 1e6
    with pytest.raises(FloatingPointError, match=r"precision='16-mixed': float16 holds magnitudes up to 65504"):
        SSMClassifier(**TINY, normalize="none", precision="16-mixed").fit(big, Y)
    SSMClassifier(**TINY, normalize="none", precision="32").fit(big, Y)


def test_compile_trains_through_torch_compile(monkeypatch):
    """compile=True hands the training forward to torch.compile (here a recording stand-in: compiling
    costs tens of seconds, see test_compiled_training_follows_eager) and predicts eagerly."""
    compiled = []

    def fake_compile(model, **kwargs):
        compiled.append(model)

        def forward(*args):
            forward.calls += 1
            return model(*args)

        forward.calls = 0
        compiled.append(forward)
        return forward

    monkeypatch.setattr(torch, "compile", fake_compile)
    clf = SSMClassifier(**TINY, compile=True).fit(X, Y)
    model, forward = compiled
    assert model is clf.model_ and forward.calls == 24  # 6 epochs of 4 batches
    clf.predict(X)
    assert forward.calls == 24


@pytest.mark.slow
def test_compiled_training_follows_eager():
    """The inductor's fused kernels round differently from eager ones: the losses of 2 epochs agree to
    1e-6 relative (measured: 4e-8; the margin is for other CPUs' vector widths)."""
    tiny = {**TINY, "max_epochs": 2}
    runs = {c: SSMClassifier(**tiny, compile=c).fit(X, Y) for c in (False, True)}
    losses = {c: np.array([r["train_loss"] for r in clf.history_]) for c, clf in runs.items()}
    np.testing.assert_allclose(losses[True], losses[False], rtol=1e-6)


def test_unknown_precision_is_named():
    with pytest.raises(ValueError, match="unknown precision 'fp8'; choose one of '32', 'bf16-mixed', '16-mixed'"):
        SSMClassifier(**TINY, precision="fp8").fit(X, Y)
