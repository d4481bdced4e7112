"""The classification loss against a direct computation: -sum_k q_k log softmax(z)_k with q the
(smoothed) target, weighted by the class weight of each sample as scikit-learn weights samples."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from ssmts.training.objectives import weighted_cross_entropy


def _oracle(logits, y, weight, eps):
    z = logits - logits.max(1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(1, keepdims=True))
    K = logits.shape[1]
    w = np.ones(K) if weight is None else weight
    # PyTorch's smoothed cross-entropy with class weights: (1 - e) w_y (-log p_y) + e / K sum_k w_k (-log p_k),
    # averaged with the weights w_y of the samples' own classes.
    per_sample = (1 - eps) * w[y] * -log_p[np.arange(len(y)), y] + eps / K * (w[None] * -log_p).sum(1)
    return per_sample.sum() / w[y].sum()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), K=st.integers(2, 6), eps=st.sampled_from([0.0, 0.1, 0.3, 0.9]),
       weighted=st.booleans())
def test_loss_matches_the_direct_formula(seed, K, eps, weighted):
    rng = np.random.default_rng(seed)
    logits = rng.normal(scale=3.0, size=(7, K))
    y = rng.integers(0, K, size=7)
    weight = rng.uniform(0.2, 3.0, size=K) if weighted else None
    loss = weighted_cross_entropy(None if weight is None else torch.from_numpy(weight), eps)
    got = float(loss(torch.from_numpy(logits), torch.from_numpy(y)))
    assert got == pytest.approx(_oracle(logits, y, weight, eps), rel=1e-10)


def test_smoothing_moves_the_optimum_off_certainty():
    """With e > 0 the loss is smallest at p_y = 1 - e + e/K, not at p_y -> 1 (the unsmoothed optimum)."""
    K, eps = 4, 0.2
    loss = weighted_cross_entropy(None, eps)
    y = torch.tensor([0])
    gaps = torch.linspace(0.0, 12.0, 1201, dtype=torch.float64)
    values = torch.stack([loss(torch.tensor([[g, 0.0, 0.0, 0.0]], dtype=torch.float64), y) for g in gaps])
    best = gaps[values.argmin()]
    p_best = torch.softmax(torch.tensor([best, 0.0, 0.0, 0.0]), 0)[0]
    assert float(p_best) == pytest.approx(1 - eps + eps / K, abs=2e-3)
    plain = weighted_cross_entropy(None, 0.0)
    assert plain(torch.tensor([[12.0, 0, 0, 0]]), y) < plain(torch.tensor([[6.0, 0, 0, 0]]), y)
