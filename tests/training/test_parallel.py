"""Data-parallel shards inside one process: the gradient of the whole batch, and results that do not
depend on how many workers run (the machine's load)."""

import itertools

import numpy as np
import pytest
import torch
from torch import nn

from ssmts.nn.backbone import SSMBackbone
from ssmts.training import parallel, threads
from ssmts.training.parallel import ShardWorkers, runs_in_shards, shard_bounds, shard_count, sharded_gradients


@pytest.fixture
def restore_threads(monkeypatch):
    """Also lets the small batches of these tests split into shards (they hold less than SHARD_MIN_STEPS)."""
    monkeypatch.setattr(parallel, "SHARD_MIN_STEPS", 1)
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_short_batches_split_into_fewer_shards():
    assert parallel.shards_of(32, 24, 2) == 1  # ItalyPowerDemand: 768 sample-steps
    assert parallel.shards_of(32, 1460, 2) == 2  # ACSF1
    assert parallel.shards_of(32, 1460, 16) == 5  # 46,720 sample-steps: 5 shards of at least 8,192
    assert parallel.shards_of(3, 100_000, 8) == 3  # never more shards than series


def test_shard_bounds_cover_the_batch_in_order():
    for n, k in itertools.product(range(1, 12), range(1, 6)):
        bounds = shard_bounds(n, k)
        assert len(bounds) == k and bounds[0][0] == 0 and bounds[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
        sizes = [stop - start for start, stop in bounds]
        assert max(sizes) - min(sizes) <= 1


def _weighted_loss(outputs, y, weight):
    """A class-weighted, label-smoothed cross-entropy of the whole batch: not a sum of per-shard means."""
    losses = nn.functional.cross_entropy(outputs, y, reduction="none", label_smoothing=0.1)
    return (losses * weight).sum() / weight.sum()


@pytest.mark.parametrize("shards", [1, 2, 3, 5])
def test_sharded_gradients_are_the_whole_batch_gradients(shards, restore_threads):
    """Oracle: one backward pass over the whole batch, in float64."""
    torch.manual_seed(0)
    model = SSMBackbone(2, 8, 2, 3, d_state=4, heads=2).double()
    x = torch.randn(7, 2, 30, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 0, 1, 2, 2])
    weight = torch.tensor([1.0, 2.0, 0.5, 1.0, 3.0, 1.0, 0.25], dtype=torch.float64)
    parameters = [p for p in model.parameters() if p.requires_grad]

    _weighted_loss(model(x), y, weight).backward()
    expected = [p.grad.clone() for p in parameters]
    model.zero_grad(set_to_none=True)

    parts = [(x[a:b],) for a, b in shard_bounds(len(x), shards)]
    with ShardWorkers(shards) as workers:
        loss = sharded_gradients(
            workers, lambda part: model(part[0]), lambda out: _weighted_loss(out, y, weight), parts, parameters
        )
    torch.testing.assert_close(loss, _weighted_loss(model(x), y, weight).detach(), rtol=1e-12, atol=1e-12)
    for p, g in zip(parameters, expected):
        torch.testing.assert_close(p.grad, g, rtol=1e-10, atol=1e-12)


def _fit_predict(workers_per_step, X, y):
    """An SSMClassifier fit and its probabilities, with the idle cores the fit sees given by hand."""
    from ssmts import SSMClassifier

    answers = itertools.cycle(workers_per_step)
    original = threads.CoreShare.update
    threads.CoreShare.update = lambda self: min(self.limit, next(answers))
    try:
        clf = SSMClassifier(
            d_model=8, d_state=4, n_layers=2, max_epochs=10, min_steps=0, batch_size=8, random_state=0, device="cpu"
        )  # 50 steps (min_steps' default made it 500)
        clf.fit(X, y)
        return clf.predict_proba(X)
    finally:
        threads.CoreShare.update = original


def test_a_fit_does_not_depend_on_how_many_workers_run(restore_threads):
    """The machine's load sets the workers (one, two, changing from step to step); the result is the
    same to the last bit. Before the shards, torch's thread count followed the load and moved the
    probabilities by about 1e-8."""
    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 1, 60)).astype(np.float32)
    y = rng.integers(0, 3, size=40)
    alone = _fit_predict([2], X, y)
    busy = _fit_predict([1], X, y)
    changing = _fit_predict([1, 2, 2, 1, 1], X, y)
    np.testing.assert_array_equal(busy, alone)
    np.testing.assert_array_equal(changing, alone)


def test_torch_batch_statistics_and_dropout_keep_the_batch_whole():
    assert runs_in_shards(SSMBackbone(1, 8, 1, 2, d_state=4))
    assert runs_in_shards(SSMBackbone(1, 8, 1, 2, d_state=4, norm="batch"))  # records its updates
    assert not runs_in_shards(SSMBackbone(1, 8, 1, 2, d_state=4, dropout=0.1))
    assert not runs_in_shards(nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)))
    assert shard_count(4, nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))) == 1
    assert shard_count(4, SSMBackbone(1, 8, 1, 2, d_state=4, norm="batch")) == 4


def test_batch_norm_in_shards_normalizes_each_shard_and_updates_in_shard_order(restore_threads):
    """Oracle: each shard's mean and (biased) variance over its samples and steps, by numpy; the running
    statistics lerped towards the shards' in shard order, as two consecutive batches would move them."""
    from ssmts.nn.blocks import MaskedBatchNorm

    torch.manual_seed(0)
    norm = MaskedBatchNorm(3).double().train()
    x = torch.randn(7, 3, 11, dtype=torch.float64) * torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)[:, None]
    parts = [(x[a:b],) for a, b in shard_bounds(7, 2)]
    with ShardWorkers(2) as workers:
        sharded_gradients(
            workers, lambda part: norm(part[0]), lambda out: out.square().sum(), parts, list(norm.parameters())
        )
    mean, var = np.zeros(3), np.ones(3)
    for (part,) in parts:
        values = part.numpy().transpose(1, 0, 2).reshape(3, -1)
        mean += 0.1 * (values.mean(1) - mean)
        var += 0.1 * (values.var(1, ddof=1) - var)
    np.testing.assert_allclose(norm.running_mean.numpy(), mean, rtol=1e-12)
    np.testing.assert_allclose(norm.running_var.numpy(), var, rtol=1e-12)
    expected = torch.cat(
        [
            (p - p.mean((0, 2), keepdim=True)) / torch.sqrt(p.var((0, 2), unbiased=False, keepdim=True) + norm.eps)
            for (p,) in parts
        ]
    )
    torch.testing.assert_close(
        torch.cat([norm(p) for (p,) in parts]).detach(), expected
    )  # eval-free: training mode, per shard


def test_a_batch_norm_fit_does_not_depend_on_how_many_workers_run(restore_threads):
    """The demo's kind of network (batch normalization after each block): one worker or two, the
    same probabilities and running statistics to the last bit."""
    from ssmts import SSMClassifier

    torch.set_num_threads(2)
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 1, 60)).astype(np.float32)
    y = rng.integers(0, 3, size=40)
    fits = []
    for workers in ([2], [1], [1, 2, 2, 1]):
        answers = itertools.cycle(workers)
        original = threads.CoreShare.update
        threads.CoreShare.update = lambda self: min(self.limit, next(answers))
        try:
            clf = SSMClassifier(
                d_model=8,
                d_state=4,
                n_layers=2,
                norm="batch",
                prenorm=False,
                max_epochs=10,
                min_steps=0,  # 50 steps (min_steps' default made it 500)
                batch_size=8,
                random_state=0,
                device="cpu",
            ).fit(X, y)
        finally:
            threads.CoreShare.update = original
        norms = [m for m in clf.model_.modules() if hasattr(m, "running_var")]
        assert norms  # the network has batch norms
        fits.append((clf.predict_proba(X), torch.cat([m.running_var for m in norms])))
    for proba, running_var in fits[1:]:
        np.testing.assert_array_equal(proba, fits[0][0])
        torch.testing.assert_close(running_var, fits[0][1], rtol=0, atol=0)


def test_a_workers_error_reaches_the_caller_and_the_thread_count_comes_back(restore_threads):
    torch.set_num_threads(3)

    def fail_on_the_last(k):
        if k == 2:
            raise ValueError("shard 2 failed")
        return k

    workers = ShardWorkers(3)
    assert torch.get_num_threads() == 1
    with pytest.raises(ValueError, match="shard 2 failed"):
        workers.map(fail_on_the_last, [0, 1, 2])
    assert workers.map(lambda k: k * k, [0, 1, 2]) == [0, 1, 4]
    workers.close()
    assert torch.get_num_threads() == 3


def test_concatenate_joins_tuples_element_by_element():
    a = (torch.ones(2, 3), torch.zeros(2))
    b = (torch.ones(1, 3) * 2, torch.ones(1))
    joined = parallel.concatenate([a, b])
    assert isinstance(joined, tuple) and joined[0].shape == (3, 3) and joined[1].tolist() == [0.0, 0.0, 1.0]
