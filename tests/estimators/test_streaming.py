"""Streaming on the scikit-learn estimators: `stream` continues a state chunk by chunk, and its
output after every step equals predict on each stream's prefix up to that step."""

from __future__ import annotations

import time

import numpy as np
import pytest

from ssmts import SSMClassifier, SSMRegressor

TINY = dict(d_model=8, d_state=4, n_layers=2, max_epochs=2, min_steps=0, batch_size=8, device="cpu", random_state=0)
RNG = np.random.default_rng(0)
X = RNG.standard_normal((12, 2, 30))
Y = (X[:, 0, :15].mean(1) > 0).astype(int)
CHUNKS = [(0, 4), (4, 5), (5, 17), (17, 30)]  # uneven chunks, one of a single step


def _streamed(estimator, X, **kwargs):
    state, outs = None, []
    for start, stop in CHUNKS:
        out, state = estimator.stream(X[..., start:stop], state, **kwargs)
        outs.append(out)
    return np.concatenate(outs, axis=1), state


@pytest.mark.parametrize("pooling,layer", [("mean", "ssm"), ("last", "ssm"), ("mean", "lncde")])
def test_classifier_stream_equals_predict_on_every_prefix(pooling, layer):
    # chunks of up to 8 steps roll with the layers' step, longer ones with one FFT (or scan) pass
    clf = SSMClassifier(**TINY, pooling=pooling, layer=layer).fit(X, Y)
    streamed, state = _streamed(clf, X)
    prefixes = np.stack([clf.predict_proba(X[..., :t]) for t in range(1, 31)], axis=1)
    np.testing.assert_allclose(streamed, prefixes, rtol=0, atol=1e-5)
    assert state.count == 30 and state.n_streams == 12


def test_regressor_stream_with_several_targets_and_a_new_rate():
    targets = np.stack([X[:, 0].mean(1), X[:, 1].std(1)], axis=1)
    reg = SSMRegressor(**TINY, sample_rate=100.0).fit(X, targets)
    X_half = X[..., ::2]  # the same streams at 50 Hz: Delta doubled inside stream and predict
    state, outs = None, []
    for start, stop in [(0, 3), (3, 15)]:
        out, state = reg.stream(X_half[..., start:stop], state, sample_rate=50.0)
        outs.append(out)
    streamed = np.concatenate(outs, axis=1)
    prefixes = np.stack([reg.predict(X_half[..., :t], sample_rate=50.0) for t in range(1, 16)], axis=1)
    assert streamed.shape == (12, 15, 2)
    np.testing.assert_allclose(streamed, prefixes, rtol=1e-5, atol=1e-5)


def test_streaming_refuses_what_it_cannot_do():
    clf = SSMClassifier(**TINY, bidirectional=True).fit(X, Y)
    with pytest.raises(ValueError, match="causal model"):
        clf.stream(X[..., :3])
    causal = SSMClassifier(**TINY).fit(X, Y)
    _, state = causal.stream(X[..., :3])
    with pytest.raises(ValueError, match="holds 12 streams"):
        causal.stream(X[:5, :, 3:4], state)
    with pytest.raises(ValueError, match="channels"):
        causal.stream(X[:, :1, :3])


@pytest.mark.filterwarnings("ignore::ssmts.estimators.ExtrapolationWarning")  # the refused calls warn first
def test_a_stream_warns_and_refuses_as_predict_does():
    """stream answered confident probabilities for steps predict refuses (beyond 1e18 after the training
    scaling) and gave no ExtrapolationWarning where predict gives one. Oracle: predict_proba on the
    same steps, its warning and its refusal."""
    from ssmts.estimators import ExtrapolationWarning

    clf = SSMClassifier(**TINY).fit(X, Y)
    with pytest.warns(ExtrapolationWarning):
        clf.predict_proba(100.0 * X[:3, :, :5])
    with pytest.warns(ExtrapolationWarning):
        clf.stream(100.0 * X[:3, :, :5])
    with pytest.raises(ValueError, match="after the training scaling, beyond 1e"):
        clf.predict_proba(1e25 * X[:3, :, :5])
    _, state = clf.stream(X[:3, :, :5])
    with pytest.raises(ValueError, match="after the training scaling, beyond 1e"):
        clf.stream(1e25 * X[:3, :, 5:7], state)


def test_a_state_is_continued_only_by_the_fit_that_made_it():
    """A state from another model, from a regressor, or from this model before a refit is refused."""
    clf = SSMClassifier(**TINY).fit(X, Y)
    _, state = clf.stream(X[..., :3])
    clf.stream(X[..., 3:5], state)  # its own state: fine
    other = SSMClassifier(**{**TINY, "random_state": 1}).fit(X, Y)
    regressor = SSMRegressor(**TINY).fit(X, X[:, 0].mean(1))
    _, regressor_state = regressor.stream(X[..., :3])
    for model, foreign in ((other, state), (clf, regressor_state)):
        with pytest.raises(ValueError, match="not returned by this"):
            model.stream(X[..., 3:5], foreign)
    clf.fit(X, Y)  # a refit: the old state no longer describes the model
    with pytest.raises(ValueError, match="since its last fit"):
        clf.stream(X[..., 3:5], state)


def test_stream_reads_memory_mapped_chunks_and_refuses_non_finite_outputs(tmp_path):
    clf = SSMClassifier(**TINY).fit(X, Y)
    np.save(tmp_path / "chunk.npy", X[..., :6])
    mapped = np.load(tmp_path / "chunk.npy", mmap_mode="r")
    np.testing.assert_array_equal(clf.stream(mapped)[0], clf.stream(X[..., :6])[0])
    import torch

    with torch.no_grad():
        clf.model_.decoder.weight[0, 0] = float("nan")  # as a diverged model would have it
    with pytest.raises(FloatingPointError, match="non-finite outputs"):
        clf.stream(X[..., :3])


def test_stream_throughput_is_reported():
    """Steps per second of one step at a time (printed; not a timed assertion)."""
    clf = SSMClassifier(**TINY).fit(X, Y)
    for batch in (1, 64):
        streams = np.random.default_rng(1).standard_normal((batch, 2, 200))
        state = None
        started = time.perf_counter()
        for t in range(200):
            _, state = clf.stream(streams[..., t : t + 1], state)
        per_second = 200 / (time.perf_counter() - started)
        print(f"stream: {per_second:.0f} steps/s at batch {batch} ({per_second * batch:.0f} samples/s)")
        assert per_second > 0
