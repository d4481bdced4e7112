"""The shared Trainer: schedules against their closed forms, checkpoints and resumption."""

import math
import re

import pytest
import torch
from torch import nn

from ssmts.training import EarlyStopping, SequenceData, Trainer


class _Mean(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 1)

    def forward(self, x, mask=None):
        return self.linear(x.mean(-1))[:, 0]


def _mse(out, y, weight=None):
    return ((out - y) ** 2).mean()


def _data(n=32):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 3, 5, generator=g)
    return SequenceData(x, x.mean(-1).sum(-1))


def _lrs(trainer, epochs, steps_per_epoch):
    """Learning rates the Trainer's scheduler gives at each optimizer step."""
    scheduler = trainer._make_scheduler(epochs, steps_per_epoch)
    seen = []
    for _ in range(epochs * steps_per_epoch):
        seen.append(trainer.optimizer.param_groups[0]["lr"])
        trainer.optimizer.step()
        scheduler.step()
    return seen


class _Crash(Exception):
    pass


def _crashing_after(calls):
    count = {"n": 0}

    def loss(out, y, weight=None):
        count["n"] += 1
        if count["n"] > calls:
            raise _Crash
        return _mse(out, y)

    return loss


def test_cosine_with_warmup_follows_its_closed_form():
    """lr_k = lr (k+1)/W during warm-up, then lr/2 (1 + cos(pi (k-W)/(T-W))); 8 steps/epoch here."""
    trainer = Trainer(
        _Mean(),
        _mse,
        lr=0.1,
        lr_ssm=None,
        batch_size=4,
        scheduler="cosine",
        warmup_steps=4,
        total_steps=20,
        device="cpu",
        random_state=0,
    )
    seen = _lrs(trainer, epochs=2, steps_per_epoch=8)
    expected = [0.1 * (k + 1) / 4 if k < 4 else 0.05 * (1 + math.cos(math.pi * (k - 4) / 16)) for k in range(16)]
    assert seen == pytest.approx(expected, rel=1e-9)


def test_plateau_uses_factor_and_patience():
    trainer = Trainer(
        _Mean(),
        _mse,
        lr=0.1,
        lr_ssm=None,
        scheduler="plateau",
        plateau_factor=0.2,
        plateau_patience=0,
        device="cpu",
        random_state=0,
    )
    assert trainer._make_scheduler(1, 1).factor == 0.2
    with pytest.raises(ValueError, match="plateau_factor"):
        Trainer(_Mean(), _mse, scheduler="plateau", plateau_factor=1.5, device="cpu")
    with pytest.raises(ValueError, match="warmup_steps"):
        Trainer(_Mean(), _mse, warmup_steps=10, total_steps=5, device="cpu")


def _straight_and_resumed(model, kwargs, tmp_path):
    """(a run of four epochs in one go, the same run killed in epoch 3 and resumed from its checkpoint),
    each from torch.manual_seed(0), as separate processes would start."""
    data = _data()
    torch.manual_seed(0)
    straight = Trainer(model(), _mse, **kwargs)
    straight.fit(data, epochs=4)
    torch.manual_seed(0)
    first = Trainer(model(), _crashing_after(2 * 4 + 1), **kwargs)  # dies in epoch 3 (4 batches an epoch)
    path = tmp_path / "ckpt.pt"
    with pytest.raises(_Crash):
        first.fit(data, epochs=4, checkpoint=path)
    torch.manual_seed(0)
    resumed = Trainer(model(), _mse, **kwargs)
    resumed.fit(data, epochs=4, checkpoint=path, resume=True)
    return straight, resumed


def test_resume_continues_the_schedule_and_matches_an_uninterrupted_run(tmp_path):
    """Two epochs, stop, resume for the rest == four epochs in one go (weights and learning rates)."""
    kwargs = dict(lr=0.05, lr_ssm=None, batch_size=8, scheduler="cosine", warmup_steps=3, device="cpu", random_state=0)
    straight, resumed = _straight_and_resumed(_Mean, kwargs, tmp_path)
    assert len(resumed.history) == 4
    for a, b in zip(straight.model.parameters(), resumed.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-7)


def test_a_warm_start_takes_the_optimizers_moments_and_its_own_learning_rates(tmp_path):
    """continue_run=False (warm_start, partial_fit): the saved Adam moments, with this trainer's lr and weight
    decay (the saved groups' lr, 0 at the end of a cosine schedule, came back with them and trained nothing);
    continue_run=True (a resumed run): the saved settings too. Oracle: the saved state's tensors and the
    settings each trainer was built with."""
    data = _data()
    first = Trainer(_Mean(), _mse, lr=0.05, lr_ssm=None, batch_size=8, scheduler="cosine", device="cpu")
    first.fit(data, epochs=2)
    state = first.state_dict()
    assert state["optimizer"]["param_groups"][0]["lr"] == 0.0  # the cosine schedule's end
    warm = Trainer(_Mean(), _mse, lr=0.2, weight_decay=0.3, lr_ssm=None, batch_size=8, scheduler="none", device="cpu")
    warm.load_state_dict(state, continue_run=False)
    group = warm.optimizer.param_groups[0]
    assert group["lr"] == 0.2 and group["weight_decay"] == 0.3 and "initial_lr" not in group
    saved_moments = state["optimizer"]["state"][0]["exp_avg"]
    torch.testing.assert_close(warm.optimizer.state_dict()["state"][0]["exp_avg"], saved_moments, rtol=0, atol=0)
    before = [p.detach().clone() for p in warm.model.parameters()]
    warm.fit(data, epochs=1)
    assert any(not torch.equal(a, b) for a, b in zip(before, warm.model.parameters()))  # it trains
    resumed = Trainer(_Mean(), _mse, lr=0.2, lr_ssm=None, batch_size=8, scheduler="none", device="cpu")
    resumed.load_state_dict(state, continue_run=True)
    assert resumed.optimizer.param_groups[0]["lr"] == 0.0


class _DroppedMean(_Mean):
    """_Mean behind dropout: every training step draws a mask from torch's global RNG."""

    def forward(self, x, mask=None):
        return self.linear(nn.functional.dropout(x, 0.3, self.training).mean(-1))[:, 0]


def test_a_resumed_run_draws_the_dropout_masks_of_the_uninterrupted_one(tmp_path):
    """The checkpoint holds torch's global RNG: the resumed epochs draw the masks the uninterrupted run drew
    (they drew epoch 1's again, from the seed the resuming process set, and the weights differed).
    Oracle: the run in one go, bit for bit."""
    kwargs = dict(lr=0.05, lr_ssm=None, batch_size=8, device="cpu", random_state=0)
    straight, resumed = _straight_and_resumed(_DroppedMean, kwargs, tmp_path)
    assert [r["train_loss"] for r in resumed.history] == [r["train_loss"] for r in straight.history]
    for a, b in zip(straight.model.parameters(), resumed.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def _overfitting_run(loss, patience, tmp_path=None, resume=False, epochs=6):
    """Validation targets of the opposite sign: the more the network learns, the worse it scores, so its
    best epoch is the first (before any crash below) and patience runs out."""
    data = _data()
    val = SequenceData(data.x[:16], -data.y[:16])
    kwargs = dict(lr=0.05, lr_ssm=None, batch_size=8, scheduler="cosine", warmup_steps=3, device="cpu", random_state=0)
    torch.manual_seed(0)
    stopping = EarlyStopping(patience=patience, tol=0.0)
    trainer = Trainer(_Mean(), loss, callbacks=[stopping], **kwargs)
    path = None if tmp_path is None else tmp_path / "ckpt.pt"
    trainer.fit(data, val, epochs=epochs, checkpoint=path, resume=resume)
    return trainer, stopping


@pytest.mark.parametrize("patience", [None, 4])
def test_a_resumed_run_with_early_stopping_ends_on_the_uninterrupted_runs_best_epoch(tmp_path, patience):
    """The checkpoint keeps early stopping's best epoch, weights and patience: a run that died after its
    best epoch restores that epoch's weights, as the run in one go does (before, the resumed run chose
    among the epochs after the resume only)."""
    straight, straight_stopping = _overfitting_run(_mse, patience)
    assert straight_stopping.best_epoch == straight.history[0]["epoch"]  # the best epoch lies before the crash
    with pytest.raises(_Crash):
        _overfitting_run(_crashing_after(3 * 4 + 1), patience, tmp_path)  # dies in epoch 4 (4 batches an epoch)
    resumed, resumed_stopping = _overfitting_run(_mse, patience, tmp_path, resume=True)
    assert resumed_stopping.best_epoch == straight_stopping.best_epoch
    assert [r["epoch"] for r in resumed.history] == [r["epoch"] for r in straight.history]
    for a, b in zip(straight.model.parameters(), resumed.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-7)


def test_a_run_early_stopping_ended_trains_no_further_epoch_when_resumed(tmp_path):
    stopped, _ = _overfitting_run(_mse, 2, tmp_path)
    assert len(stopped.history) == 3  # best at the first epoch, two without improvement: stopped
    again, stopping = _overfitting_run(_mse, 2, tmp_path, resume=True)
    assert len(again.history) == 3 and stopping.best_epoch == stopped.history[0]["epoch"]
    for a, b in zip(stopped.model.parameters(), again.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_a_checkpoint_without_early_stoppings_state_warns_that_the_resumed_run_may_differ(tmp_path):
    with pytest.raises(_Crash):
        _overfitting_run(_crashing_after(3 * 4 + 1), None, tmp_path)
    path = tmp_path / "ckpt.pt"
    state = torch.load(path, weights_only=True)
    del state["callbacks"]  # as an earlier version wrote it
    torch.save(state, path)
    with pytest.warns(UserWarning, match="no state of EarlyStopping"):
        _overfitting_run(_mse, None, tmp_path, resume=True)


def test_verbose_states_the_plan_then_counts_the_epochs(capsys):
    """verbose=1: one line with what the run will cost, in the units its time grows with, then a bar
    over the planned epochs (with its rate and the time left)."""
    data = _data(32)
    trainer = Trainer(_Mean(), _mse, batch_size=10, max_epochs=3, min_steps=0, verbose=1, device="cpu")
    trainer.fit(data, _data(8))
    err = capsys.readouterr().err
    plan = err.splitlines()[0]
    assert plan.startswith("training: 3 epochs x 4 batches of up to 10 = 12 steps on 32 series of 5 steps")
    assert "early stopping may end it sooner" in plan
    assert re.search(r"on cpu, (1 thread|every batch in \d+ shards on up to \d+ threads)$", plan), plan
    assert "3/3" in err and "train_loss=" in err
    Trainer(_Mean(), _mse, max_epochs=1, min_steps=0, device="cpu").fit(data)  # verbose=0: silent
    assert capsys.readouterr().err == ""


class _Recorder(nn.Module):
    """Records the length of every input and the Delta factor in force (as an SSM layer holds it)."""

    _delta_factor = 1.0

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 1)
        self.seen = []

    def forward(self, x, mask=None):
        self.seen.append((x.shape[-1], self._delta_factor, None if mask is None else mask.shape[-1]))
        return self.linear(x.mean(-1))[:, 0]


@pytest.mark.parametrize("share", [0.0, 0.5, 0.999])
def test_a_share_of_batches_is_read_at_half_the_rate_with_delta_doubled(share):
    x = torch.sin(torch.linspace(0, 6, 9)).repeat(32, 3, 1)  # 9 steps: 5 at half the rate
    mask = torch.ones(32, 9, dtype=torch.bool)
    model = _Recorder()
    Trainer(model, _mse, batch_size=4, max_epochs=4, lr=1e-3, half_rate_share=share, random_state=0).fit(
        SequenceData(x, x.mean((1, 2)), mask)
    )
    assert len(model.seen) == 32
    halves = [seen for seen in model.seen if seen[0] == 5]
    assert all(seen in [(9, 1.0, 9), (5, 2.0, 5)] for seen in model.seen)
    if share == 0.0:
        assert not halves
    elif share == 0.999:
        assert len(halves) == 32
    else:
        assert 8 <= len(halves) <= 24  # 16 expected of 32 batches
    assert model._delta_factor == 1.0  # restored
    if share == 0.5:
        with pytest.raises(ValueError, match="half_rate_share"):  # all at half the rate: that rate is the training one
            Trainer(_Recorder(), _mse, half_rate_share=1.0)


def test_half_the_rate_is_band_limited_resampling():
    from ssmts.nn.resampling import change_rate, half_rate

    x = torch.randn(2, 3, 101, generator=torch.Generator().manual_seed(0))
    expected = change_rate(x.numpy(), 2000, 1000, method="resample")
    torch.testing.assert_close(half_rate(x), torch.from_numpy(expected))
    with pytest.raises(ValueError, match="real-valued signals.*token ids"):
        half_rate(torch.ones(2, 10, dtype=torch.int64))
