"""Training budget in steps (min_steps), batches of similar lengths cut at their last real
step (crop_padding), and per-series standardization (normalize='series' and 'series+stats')."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from ssmts import SSMClassifier, SSMRegressor
from ssmts.nn import SequenceHead, SSMBackbone
from ssmts.nn.functional import series_statistics, series_summary
from ssmts.training import SequenceData, Trainer
from ssmts.training.trainer import batch_order, predict_batches

TINY = dict(d_model=8, d_state=4, n_layers=1, batch_size=8, device="cpu", random_state=0)


class _Mean(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 1)

    def forward(self, x, mask=None):
        return self.linear(x.mean(-1))


def _regression_data(n: int) -> SequenceData:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 2, 5, generator=g)
    return SequenceData(x, x.mean(-1)[:, :1])


@pytest.mark.parametrize(
    "n, batch, max_epochs, budget, expected_epochs",
    [
        (20, 8, 3, {}, 3),  # no minimum, no bound: max_epochs
        (20, 8, 3, {"min_steps": 30}, 10),  # 3 batches an epoch: ceil(30 / 3) = 10 epochs
        (20, 8, 12, {"min_steps": 30}, 12),  # max_epochs already gives more steps
        (100, 8, 2, {"min_steps": 30}, 3),  # 13 batches an epoch: ceil(30 / 13) = 3
        (20, 8, 10, {"max_steps": 12}, 4),  # 3 batches an epoch: 4 epochs take 12 steps
        (20, 8, 10, {"max_steps": 14}, 4),  # 5 epochs would take 15 > 14
        (20, 8, 2, {"max_steps": 100}, 2),  # the bound is above max_epochs' steps: unchanged
        (100, 8, 10, {"max_steps": 5}, 1),  # 13 batches an epoch, more than the bound: one epoch all the same
        (20, 8, 1, {"min_steps": 9, "max_steps": 12}, 3),  # raised to the minimum, within the bound
    ],
)
def test_min_and_max_steps_set_the_epochs_of_small_and_large_data(n, batch, max_epochs, budget, expected_epochs):
    trainer = Trainer(
        _Mean(),
        lambda out, y, w: ((out - y) ** 2).mean(),
        max_epochs=max_epochs,
        batch_size=batch,
        device="cpu",
        random_state=0,
        **budget,
    )
    assert trainer.planned_epochs(n) == expected_epochs
    history = trainer.fit(_regression_data(n))
    assert len(history) == expected_epochs
    steps = len(history) * math.ceil(n / batch)
    assert steps >= budget.get("min_steps", 0) and (len(history) == 1 or steps <= budget.get("max_steps", steps))


def test_max_steps_below_min_steps_is_refused():
    with pytest.raises(ValueError, match="min_steps <= max_steps"):
        Trainer(_Mean(), lambda out, y, w: out.sum(), min_steps=10, max_steps=5, device="cpu")


def test_min_steps_leaves_explicit_epochs_alone():
    """partial_fit-style runs of a given number of epochs are not stretched."""
    trainer = Trainer(
        _Mean(),
        lambda out, y, w: ((out - y) ** 2).mean(),
        max_epochs=1,
        batch_size=8,
        min_steps=100,
        device="cpu",
        random_state=0,
    )
    assert len(trainer.fit(_regression_data(16), epochs=1)) == 1


def _ragged(n: int = 23, length: int = 40, seed: int = 0) -> SequenceData:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, length + 1, (n,), generator=g)
    mask = torch.arange(length)[None, :] < lengths[:, None]
    x = torch.randn(n, 2, length, generator=g) * mask[:, None, :]
    return SequenceData(x, torch.arange(n), mask, crop_padding=True)


def test_bucketed_batches_cover_every_sample_once_and_group_similar_lengths():
    data = _ragged(n=200)
    order = batch_order(data, 8, torch.Generator().manual_seed(1))
    flat = torch.cat(order)
    assert sorted(flat.tolist()) == list(range(200))
    lengths = data.lengths().float()
    spread = np.mean([float(lengths[b].max() - lengths[b].min()) for b in order])
    shuffled = torch.randperm(200, generator=torch.Generator().manual_seed(2)).split(8)
    random_spread = np.mean([float(lengths[b].max() - lengths[b].min()) for b in shuffled])
    assert spread < 0.5 * random_spread
    # The batches are cut at their longest real step.
    for index in order:
        batch = data.take(index).cropped()
        assert batch.x.shape[-1] == int(lengths[index].max())
        assert batch.mask[:, -1].any()


def test_cropped_prediction_equals_padded_prediction_for_both_directions():
    """Padding at the end changes nothing on real steps of an SSM, in either direction: cutting
    it per batch (and batching by length) gives the same pooled outputs, in the samples' order."""
    data = _ragged(n=23)
    for bidirectional in (False, "essm", "ldnn"):
        torch.manual_seed(0)
        model = SequenceHead(SSMBackbone(2, 8, 2, None, d_state=8, bidirectional=bidirectional), 3, "mean").double()
        x = data.x.double()
        padded = predict_batches(model, SequenceData(x, mask=data.mask), 5, "cpu")
        cropped = predict_batches(model, SequenceData(x, mask=data.mask, crop_padding=True), 5, "cpu")
        torch.testing.assert_close(cropped, padded, rtol=1e-9, atol=1e-10)


def test_ragged_fit_trains_on_cropped_batches():
    """A fit on series of very unequal lengths runs on batches no longer than their longest series."""
    seen = []

    class Recorder(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(2, 1)

        def forward(self, x, mask=None):
            seen.append((x.shape[0], x.shape[-1]))  # a CPU fit may run a batch in shards: count series
            return self.linear((x * mask[:, None, :]).sum(-1) / mask.sum(-1, keepdim=True))

    data = _ragged(n=64, length=400)
    data = SequenceData(data.x, data.x[:, :1, :].sum(-1), data.mask, crop_padding=True)
    Trainer(
        Recorder(), lambda out, y, w: ((out - y) ** 2).mean(), max_epochs=1, batch_size=8, device="cpu", random_state=0
    ).fit(data)
    assert sum(n for n, _ in seen) == 64 and sum(n * length for n, length in seen) < 0.8 * 64 * 400


@pytest.mark.parametrize("norm", [None, "masked", "torch"])
def test_a_model_that_normalizes_by_the_batch_trains_on_batches_of_mixed_lengths(norm):
    """Batches of similar lengths would give batch normalization statistics that depend on the length,
    which the running statistics of prediction average away (a fit of SSMClassifier(norm='batch') on
    unequal-length gestures scored 0.80 on its own training series in eval mode, 1.00 padded): with a
    batch norm the training batches are drawn at random (each still cut at its longest series); without
    one, by length."""
    from ssmts.nn.blocks import MaskedBatchNorm

    seen = []

    class Recorder(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(2, 1)
            self.norm = {"masked": MaskedBatchNorm(2), "torch": nn.BatchNorm1d(2), None: nn.Identity()}[norm]

        def forward(self, x, mask=None):
            seen.append(mask.sum(-1))
            pooled = (x * mask[:, None, :]).sum(-1) / mask.sum(-1, keepdim=True)
            return self.linear(self.norm(pooled[..., None])[..., 0] if norm == "torch" else pooled)

    data = _ragged(n=256, length=400)
    data = SequenceData(data.x, data.x[:, :1, :].sum(-1), data.mask, crop_padding=True)
    Trainer(
        Recorder(), lambda out, y, w: ((out - y) ** 2).mean(), max_epochs=1, batch_size=16, device="cpu", random_state=0
    ).fit(data)
    lengths = torch.cat(seen)
    assert sorted(lengths.tolist()) == sorted(data.lengths().tolist())
    spread = np.mean([float(b.max() - b.min()) for b in seen if len(b) > 1])
    full_range = float(data.lengths().max() - data.lengths().min())
    if norm is None:
        assert spread < 0.25 * full_range  # bucketed by length
    else:
        assert spread > 0.6 * full_range  # random lengths: 16 draws span most of the range


def test_series_statistics_against_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 2.0, size=(4, 3, 30))
    x[1, 2] = 7.0  # a flat series keeps scale 1
    mask = torch.from_numpy(rng.random((4, 30)) < 0.7)
    mean, scale = series_statistics(torch.from_numpy(x), mask)
    for i in range(4):
        for c in range(3):
            real = x[i, c][mask[i].numpy()]
            assert mean[i, c].item() == pytest.approx(real.mean(), rel=1e-12)
            expected = real.std() if real.std() > 1e-12 * np.abs(real).max() else 1.0
            assert scale[i, c].item() == pytest.approx(expected, rel=1e-12)


def test_series_normalization_makes_the_classifier_blind_to_level_and_scale():
    rng = np.random.default_rng(0)
    t = np.linspace(0, 1, 32)
    X = np.stack([np.sin(2 * np.pi * (1 + k % 2) * t + rng.normal(0, 0.2)) for k in range(24)])
    y = np.arange(24) % 2
    clf = SSMClassifier(normalize="series", max_epochs=2, min_steps=0, **TINY).fit(X, y)
    shifted = 5.0 + 100.0 * X
    np.testing.assert_allclose(clf.predict_proba(shifted), clf.predict_proba(X), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="normalize='series'"):
        clf.stream(X[:, :4])
    # 'channel' (the training statistics) keeps levels: the shifted data is read differently.
    channel = SSMClassifier(normalize="channel", max_epochs=2, min_steps=0, **TINY).fit(X, y)
    assert not np.allclose(channel.predict_proba(shifted), channel.predict_proba(X), atol=1e-3)


def test_series_normalization_on_ragged_input_ignores_padding():
    rng = np.random.default_rng(1)
    X = [rng.normal(size=n) for n in (10, 20, 15, 30, 12, 25)]
    y = [0.0, 1.0, 0.5, 2.0, 1.5, 0.2]
    reg = SSMRegressor(normalize="series", max_epochs=1, min_steps=0, **TINY).fit(X, y)
    alone = np.concatenate([reg.predict([series, series[: len(series) // 2]])[:1] for series in X])
    np.testing.assert_allclose(reg.predict(X), alone, rtol=1e-4, atol=1e-5)


def test_series_summary_against_numpy():
    rng = np.random.default_rng(2)
    x = rng.normal(3.0, 2.0, size=(4, 2, 30))
    x[2, 1] = -4.0  # a flat series: spread at its floor
    mask = torch.from_numpy(rng.random((4, 30)) < 0.7)
    channel_mean, channel_scale = np.array([1.0, -2.0]), np.array([0.5, 4.0])
    summary = series_summary(torch.from_numpy(x), mask, torch.from_numpy(channel_mean), torch.from_numpy(channel_scale))
    assert summary.shape == (4, 4) and summary.dtype == torch.float64
    for i in range(4):
        for c in range(2):
            real = x[i, c][mask[i].numpy()]
            assert summary[i, c].item() == pytest.approx((real.mean() - channel_mean[c]) / channel_scale[c], rel=1e-12)
            spread = max(real.std() / channel_scale[c], 1e-3) if real.std() > 1e-12 * np.abs(real).max() else 1e-3
            assert summary[i, 2 + c].item() == pytest.approx(np.log(spread), rel=1e-12)


def test_series_plus_stats_sees_shapes_and_also_level_and_scale():
    """'series+stats' reads shapes as 'series' does and gets each series' level and spread as well:
    a task decided by the level alone, which 'series' cannot learn, is learned."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(48, 24)) + np.where(np.arange(48) % 2, 3.0, -3.0)[:, None]
    y = np.arange(48) % 2
    settings = dict(max_epochs=30, min_steps=0, **TINY)
    series = SSMClassifier(normalize="series", **settings).fit(X, y)
    stats = SSMClassifier(normalize="series+stats", **settings).fit(X, y)
    assert series.score(X, y) < 0.8
    assert stats.score(X, y) == 1.0
    assert stats.model_.backbone.d_input == 3
    # The shapes part is per series: shifting a series moves only its level channel.
    network_input = stats._scaled(stats._prepare_predict_input(X[:2] + 10.0, 1.0))
    base = stats._scaled(stats._prepare_predict_input(X[:2], 1.0))
    np.testing.assert_allclose(network_input[:, 0].numpy(), base[:, 0].numpy(), atol=1e-5)
    np.testing.assert_allclose((network_input[:, 1] - base[:, 1]).numpy(), 10.0 / stats.input_scale_[0], rtol=1e-5)
    np.testing.assert_allclose(network_input[:, 2].numpy(), base[:, 2].numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="normalize='series\\+stats'"):
        stats.stream(X[:, :4])


def test_series_plus_stats_saves_and_loads_and_reads_memory_maps(tmp_path):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(20, 2, 16)).astype(np.float32) * 5 + 2
    y = rng.normal(size=20)
    reg = SSMRegressor(normalize="series+stats", max_epochs=1, min_steps=0, **TINY).fit(X, y)
    loaded = SSMRegressor.load(reg.save(tmp_path / "reg.safetensors"))
    np.testing.assert_allclose(loaded.predict(X), reg.predict(X), rtol=1e-6)
    np.save(tmp_path / "x.npy", X)
    mapped = np.load(tmp_path / "x.npy", mmap_mode="r")
    np.testing.assert_allclose(reg.predict(mapped), reg.predict(X), rtol=1e-5, atol=1e-6)
    from_map = SSMRegressor(normalize="series+stats", max_epochs=1, min_steps=0, **TINY).fit(mapped, y)
    np.testing.assert_allclose(from_map.predict(X), reg.predict(X), rtol=1e-4, atol=1e-5)
