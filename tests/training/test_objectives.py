"""Every loss of ssmts.training.objectives against an independent computation (numpy, float64, a
loop where the definition is a loop), and the defining property of scikit-learn's sample
weighting: an integer weight counts a sample that many times."""

import numpy as np
import pytest
import torch
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from ssmts.training.objectives import (
    accuracy_of_logits,
    accuracy_of_step_logits,
    masked_reconstruction_loss,
    mse_loss,
    negative_mse,
    pinball_loss,
    weighted_cross_entropy,
)


def _oracle(logits, y, class_weight, eps, sample_weight=None):
    """scikit-learn's rule: each sample's smoothed cross-entropy, weighted by class_weight[y_i] x
    sample_weight_i, averaged with those weights."""
    z = logits - logits.max(1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(1, keepdims=True))
    K = logits.shape[1]
    target = np.full(log_p.shape, eps / K)
    target[np.arange(len(y)), y] += 1 - eps
    per_sample = -(target * log_p).sum(1)
    w = np.ones(len(y)) if class_weight is None else class_weight[y]
    w = w * (1.0 if sample_weight is None else sample_weight)
    return (w * per_sample).sum() / w.sum()


# No shrinking: a failing example is small already (a seed and a few flags), and a broken loss
# then fails at once instead of after minutes of shrinking (mutation runs time out otherwise).
@settings(max_examples=30, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(
    seed=st.integers(0, 10_000),
    K=st.integers(2, 6),
    eps=st.sampled_from([0.0, 0.1, 0.3, 0.9]),
    weighted=st.booleans(),
    sample_weighted=st.booleans(),
)
def test_loss_matches_the_direct_formula(seed, K, eps, weighted, sample_weighted):
    rng = np.random.default_rng(seed)
    logits = rng.normal(scale=3.0, size=(7, K))
    y = rng.integers(0, K, size=7)
    weight = rng.uniform(0.2, 3.0, size=K) if weighted else None
    sample_weight = rng.uniform(0.0, 2.0, size=7) if sample_weighted else None
    loss = weighted_cross_entropy(None if weight is None else torch.from_numpy(weight), eps)
    got = float(
        loss(
            torch.from_numpy(logits),
            torch.from_numpy(y),
            None if sample_weight is None else torch.from_numpy(sample_weight),
        )
    )
    assert got == pytest.approx(_oracle(logits, y, weight, eps, sample_weight), rel=1e-10)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_a_class_weight_of_two_counts_each_sample_of_that_class_twice(eps):
    """scikit-learn's meaning of class_weight, whatever the smoothing: weight 2 on class 1 is the
    loss of the batch in which every class-1 sample appears twice."""
    rng = np.random.default_rng(0)
    logits, y = torch.from_numpy(rng.normal(size=(6, 3))), torch.tensor([0, 1, 2, 1, 0, 2])
    weighted = weighted_cross_entropy(torch.tensor([1.0, 2.0, 1.0], dtype=torch.float64), eps)(logits, y)
    twice = torch.cat([torch.arange(6), torch.tensor([1, 3])])
    plain = weighted_cross_entropy(None, eps)(logits[twice], y[twice])
    assert float(weighted) == pytest.approx(float(plain), rel=1e-12)


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_loss_is_scikit_learns_weighted_log_loss(eps):
    """Oracle: sklearn.metrics.log_loss, whose sample_weight gives sum_i w_i l_i / sum_i w_i, with
    w_i = class_weight[y_i] x sample_weight_i. The smoothed loss is linear in the target,
    (1 - e) l(y) + (e / K) sum_k l(k), so it is that combination of log losses with the same weights."""
    from sklearn.metrics import log_loss

    rng = np.random.default_rng(7)
    K, b = 3, 8
    logits = rng.normal(scale=2.0, size=(b, K))
    y = np.array([0, 1, 2, 2, 1, 0, 2, 1])
    class_weight, sample_weight = np.array([1.0, 3.0, 0.5]), rng.uniform(0.1, 2.0, size=b)
    proba = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    for cw, sw in ((None, None), (class_weight, None), (None, sample_weight), (class_weight, sample_weight)):
        w = (np.ones(b) if cw is None else cw[y]) * (1.0 if sw is None else sw)

        def ll(labels, w=w):
            return log_loss(labels, proba, sample_weight=w, labels=list(range(K)))

        expected = (1 - eps) * ll(y) + eps / K * sum(ll(np.full(b, k)) for k in range(K))
        loss = weighted_cross_entropy(None if cw is None else torch.from_numpy(cw), eps)
        got = loss(torch.from_numpy(logits), torch.from_numpy(y), None if sw is None else torch.from_numpy(sw))
        assert float(got) == pytest.approx(expected, rel=1e-10)
    if eps == 0.0:
        # Without smoothing PyTorch's class-weighted mean is the same rule (with smoothing it is not: its
        # weight= also weights each class's share of the smoothing term, 0.61 against 0.53 on a small case).
        torch_mean = torch.nn.functional.cross_entropy(
            torch.from_numpy(logits), torch.from_numpy(y), weight=torch.from_numpy(class_weight)
        )
        ours = weighted_cross_entropy(torch.from_numpy(class_weight))(torch.from_numpy(logits), torch.from_numpy(y))
        assert float(ours) == pytest.approx(float(torch_mean), rel=1e-12)


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


def test_mse_is_the_mean_square_and_a_weight_of_two_counts_twice():
    rng = np.random.default_rng(1)
    pred, y = rng.normal(size=(5, 2, 3)), rng.normal(size=(5, 2, 3))
    assert float(mse_loss(torch.from_numpy(pred), torch.from_numpy(y))) == pytest.approx(((pred - y) ** 2).mean())
    weight = torch.tensor([1.0, 2.0, 0.0, 1.0, 3.0], dtype=torch.float64)
    repeated = [0, 1, 1, 3, 4, 4, 4]
    expected = ((pred[repeated] - y[repeated]) ** 2).mean()
    assert float(mse_loss(torch.from_numpy(pred), torch.from_numpy(y), weight)) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="differ in shape"):
        mse_loss(torch.zeros(2, 3), torch.zeros(3, 2))
    with pytest.raises(ValueError, match="sample weights"):
        mse_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(3))


def test_masked_reconstruction_scores_the_hidden_steps_only():
    """A loop over the hidden steps: visible steps carry errors 1000 times larger, which must not count."""
    rng = np.random.default_rng(2)
    b, C, L = 3, 2, 9
    target = rng.normal(size=(b, C, L))
    hidden = (rng.random((b, 1, L)) < 0.4).astype(float)
    hidden[0, 0, 0] = 1.0
    prediction = target + np.where(hidden > 0, rng.normal(size=(b, C, L)), 1000.0)
    outputs = torch.from_numpy(np.concatenate([prediction, hidden], axis=1))
    errors = [
        (prediction[i, c, t] - target[i, c, t]) ** 2
        for i in range(b)
        for c in range(C)
        for t in range(L)
        if hidden[i, 0, t]
    ]
    got = float(masked_reconstruction_loss(outputs, torch.from_numpy(target)))
    assert got == pytest.approx(np.mean(errors), rel=1e-12)
    # with sample weights: sample 1 counted twice, sample 2 not at all
    weight = torch.tensor([1.0, 2.0, 0.0], dtype=torch.float64)
    errors = [
        (prediction[i, c, t] - target[i, c, t]) ** 2
        for i in (0, 1, 1)
        for c in range(C)
        for t in range(L)
        if hidden[i, 0, t]
    ]
    got = float(masked_reconstruction_loss(outputs, torch.from_numpy(target), weight))
    assert got == pytest.approx(np.mean(errors), rel=1e-12)
    nothing_hidden = outputs.clone()
    nothing_hidden[:, -1] = 0.0
    assert float(masked_reconstruction_loss(nothing_hidden, torch.from_numpy(target))) == 0.0


def test_masked_reconstruction_is_the_weighted_masked_mean_and_blind_to_visible_steps():
    """Oracle: the formula sum_i w_i sum_{c, t hidden} e_ict^2 / (C sum_i w_i #hidden_i), written with numpy.
    Visible steps may hold anything (here errors up to ~1e6): the loss is bit-identical. Fractional weights
    whose total count is below 1 still give a weighted mean, not a loss scaled down by a floor on the count."""
    rng = np.random.default_rng(6)
    b, C, L = 2, 3, 5
    target = rng.normal(size=(b, C, L))
    prediction = rng.normal(size=(b, C, L))
    hidden = np.zeros((b, 1, L))
    hidden[0, 0, [1, 3]] = 1.0
    hidden[1, 0, 4] = 1.0
    w = np.array([0.02, 0.06])  # C sum_i w_i #hidden_i = 3 x 0.1 = 0.3 < 1
    outputs = torch.from_numpy(np.concatenate([prediction, hidden], axis=1))
    squared = (prediction - target) ** 2 * hidden
    expected = (w[:, None, None] * squared).sum() / (C * (w * hidden[:, 0].sum(1)).sum())
    got = float(masked_reconstruction_loss(outputs, torch.from_numpy(target), torch.from_numpy(w)))
    assert got == pytest.approx(expected, rel=1e-12)
    assert float(masked_reconstruction_loss(outputs, torch.from_numpy(target))) == pytest.approx(
        squared.sum() / (C * hidden.sum()), rel=1e-12
    )
    changed = outputs.clone()
    changed[:, :-1] += torch.from_numpy((1.0 - hidden) * rng.normal(scale=1e6, size=(b, C, L)))
    for weight in (None, torch.from_numpy(w)):
        assert float(masked_reconstruction_loss(changed, torch.from_numpy(target), weight)) == float(
            masked_reconstruction_loss(outputs, torch.from_numpy(target), weight)
        )


def test_losses_keep_the_outputs_dtype_whatever_the_weights():
    """float32 outputs with float64 sample weights (numpy's default) give a float32 loss, equal to the
    float64 oracle to float32 rounding: the weights are cast to the outputs, not the outputs promoted
    (a float64 loss would double the backward pass's memory and run it in float64)."""
    rng = np.random.default_rng(7)
    target = torch.from_numpy(rng.normal(size=(3, 2, 4)))
    hidden = torch.from_numpy((rng.random((3, 1, 4)) < 0.5).astype(np.float64))
    outputs = torch.cat([torch.from_numpy(rng.normal(size=(3, 2, 4))), hidden], 1)
    weight = torch.from_numpy(rng.random(3) + 0.5)  # float64
    loss32 = masked_reconstruction_loss(outputs.float(), target.float(), weight)
    assert loss32.dtype == torch.float32
    assert float(loss32) == pytest.approx(float(masked_reconstruction_loss(outputs, target, weight)), rel=1e-6)
    logits, labels = torch.from_numpy(rng.normal(size=(3, 4))), torch.tensor([0, 3, 1])
    for class_weight in (None, torch.tensor([1.0, 2.0, 0.5, 1.5], dtype=torch.float64)):
        loss = weighted_cross_entropy(class_weight)
        loss32 = loss(logits.float(), labels, weight)
        assert loss32.dtype == torch.float32
        assert float(loss32) == pytest.approx(float(loss(logits, labels, weight)), rel=1e-6)


def _pinball_oracle(levels, outputs, target, weight):
    """The definition, one quantile at a time: rho_tau(d) = tau d for d >= 0, (tau - 1) d for d < 0,
    d = target - predicted quantile; averaged over the levels, then over the observed targets."""
    total = count = 0.0
    for index in np.ndindex(*target.shape):
        if weight is not None and not weight[index]:
            continue
        for q, tau in enumerate(levels):
            d = target[index] - outputs[index + (q,)]
            total += (tau * d if d >= 0 else (tau - 1.0) * d) / len(levels)
        count += 1
    return total / count


def test_pinball_loss_is_the_quantile_loss_of_every_level():
    rng = np.random.default_rng(3)
    levels = np.array([0.1, 0.5, 0.9])
    outputs, target = rng.normal(size=(4, 3, 2, 3)), rng.normal(size=(4, 3, 2))
    weight = (rng.random((4, 3, 2)) < 0.7).astype(float)
    loss = pinball_loss(torch.from_numpy(levels))
    for w in (None, weight):
        got = float(
            loss(torch.from_numpy(outputs), torch.from_numpy(target), None if w is None else torch.from_numpy(w))
        )
        assert got == pytest.approx(_pinball_oracle(levels, outputs, target, w), rel=1e-12)
    # A single target 1 above the 0.9 quantile costs 0.9; 1 below it costs 0.1.
    single = pinball_loss(torch.tensor([0.9], dtype=torch.float64))
    assert float(
        single(torch.zeros(1, 1, 1, 1, dtype=torch.float64), torch.ones(1, 1, 1, dtype=torch.float64))
    ) == pytest.approx(0.9)
    assert float(
        single(torch.zeros(1, 1, 1, 1, dtype=torch.float64), -torch.ones(1, 1, 1, dtype=torch.float64))
    ) == pytest.approx(0.1)


def test_pinball_loss_scores_every_member_of_an_ensemble_alike():
    rng = np.random.default_rng(4)
    levels = torch.tensor([0.25, 0.75], dtype=torch.float64)
    members = torch.from_numpy(rng.normal(size=(3, 2, 4, 1, 2)))  # (b, members, H, C, Q)
    target, weight = torch.from_numpy(rng.normal(size=(3, 4, 1))), torch.from_numpy((rng.random((3, 4, 1)) < 0.8) * 1.0)
    loss = pinball_loss(levels)
    for w in (weight, None):
        each = [float(loss(members[:, m], target, w)) for m in range(2)]
        assert float(loss(members, target, w)) == pytest.approx(np.mean(each), rel=1e-12)


def test_pinball_loss_of_a_single_observed_target_is_its_own_loss():
    """One observed target (weight sum 1) is averaged over itself, not over a floor above it."""
    loss = pinball_loss(torch.tensor([0.5], dtype=torch.float64))
    outputs = torch.zeros(1, 2, 1, 1, dtype=torch.float64)
    target = torch.tensor([[[2.0], [5.0]]], dtype=torch.float64)
    observed = torch.tensor([[[1.0], [0.0]]], dtype=torch.float64)
    assert float(loss(outputs, target, observed)) == pytest.approx(0.5 * 2.0)
    assert float(loss(outputs, target, torch.zeros_like(observed))) == 0.0  # nothing observed: no loss


def test_validation_scores_against_numpy():
    rng = np.random.default_rng(5)
    logits, y = rng.normal(size=(50, 4)), rng.integers(0, 4, 50)
    assert accuracy_of_logits(torch.from_numpy(logits), torch.from_numpy(y)) == pytest.approx(
        np.mean(logits.argmax(1) == y)
    )
    step_logits, step_y = rng.normal(size=(6, 3, 11)), rng.integers(0, 3, (6, 11))
    assert accuracy_of_step_logits(torch.from_numpy(step_logits), torch.from_numpy(step_y)) == pytest.approx(
        np.mean(step_logits.argmax(1) == step_y)
    )
    pred, target = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    assert negative_mse(torch.from_numpy(pred), torch.from_numpy(target)) == pytest.approx(
        -np.mean((pred - target) ** 2)
    )


def test_losses_follow_the_outputs_device_whatever_device_the_weights_are_on():
    """Class weights, sample weights and quantile levels kept on the CPU are moved to the outputs'
    device (PyTorch's meta device stands in for a GPU: the same placement rules, no data)."""
    logits, y = torch.randn(4, 3, device="meta"), torch.zeros(4, dtype=torch.long, device="meta")
    class_weight = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    sample_weight = torch.ones(4, dtype=torch.float64)
    for weights in ((None, None), (class_weight, None), (None, sample_weight), (class_weight, sample_weight)):
        loss = weighted_cross_entropy(weights[0])(logits, y, weights[1])
        assert (loss.device.type, loss.dtype, loss.shape) == ("meta", torch.float32, torch.Size([]))
    outputs, target = torch.randn(4, 5, 2, 3, device="meta"), torch.randn(4, 5, 2, device="meta")
    for levels in (torch.tensor([0.1, 0.5, 0.9]), torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)):
        loss = pinball_loss(levels)(outputs, target)
        assert (loss.device.type, loss.dtype) == ("meta", torch.float32)
    weight = torch.ones(4, 5, 2)
    assert pinball_loss(torch.tensor([0.5]))(outputs[..., :1], target, weight.to("meta")).device.type == "meta"
