"""FlatAdam against torch's own Adam and AdamW: the same weights and state, bit for bit."""

import pytest
import torch
from torch import nn

from ssmts.nn.backbone import SSMBackbone, parameter_groups
from ssmts.training import SequenceData, Trainer
from ssmts.training.flat import FlatAdam


def _network(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(SSMBackbone(2, 8, 2, None, d_state=4), nn.Flatten(), nn.LazyLinear(3))


def _pair(decoupled: bool, seed=0):
    """Two copies of one network: torch's optimizer on the first, FlatAdam on the second."""
    x = torch.randn(4, 2, 5, generator=torch.Generator().manual_seed(seed))
    first, second = _network(seed), _network(seed)
    first(x), second(x)  # materialize the lazy layer
    second.load_state_dict(first.state_dict())
    kwargs = dict(lr=1e-2, weight_decay=0.05 if decoupled else 0.0)
    torch_optimizer = torch.optim.AdamW if decoupled else torch.optim.Adam
    reference = torch_optimizer(parameter_groups(first, 1e-2, 3e-3, 0.1), **kwargs)
    flat = FlatAdam(parameter_groups(second, 1e-2, 3e-3, 0.1), decoupled_weight_decay=decoupled, **kwargs)
    return first, second, reference, flat, x


def _step(model, optimizer, x, target, skip=()):
    optimizer.zero_grad(set_to_none=True)
    loss = ((model(x) - target) ** 2).mean()
    loss.backward()
    for name, p in model.named_parameters():
        if name in skip:
            p.grad = None
    optimizer.step()


def _assert_same(first, second, reference, flat):
    for (name, a), b in zip(first.named_parameters(), second.parameters()):
        assert torch.equal(a, b), name
    mine, theirs = flat.state_dict(), reference.state_dict()
    assert mine["param_groups"] == theirs["param_groups"]
    for index, entry in theirs["state"].items():
        for key, value in entry.items():
            assert torch.equal(mine["state"][index][key], value), (index, key)


@pytest.mark.parametrize("decoupled", [True, False])
def test_steps_equal_torch_bit_for_bit(decoupled):
    first, second, reference, flat, x = _pair(decoupled)
    target = torch.randn(4, 3, generator=torch.Generator().manual_seed(1))
    for _ in range(25):
        _step(first, reference, x, target)
        _step(second, flat, x, target)
    _assert_same(first, second, reference, flat)
    assert flat._flat is not None and all(group.step is not None for group in flat._flat)  # it ran flat


def test_a_parameter_without_gradient_is_skipped_as_torch_skips_it():
    first, second, reference, flat, x = _pair(True)
    target = torch.randn(4, 3, generator=torch.Generator().manual_seed(1))
    skipped = {name for name, _ in first.named_parameters() if name.endswith("encoder.weight")}
    assert skipped
    for k in range(12):
        skip = skipped if k % 3 == 1 else ()
        _step(first, reference, x, target, skip)
        _step(second, flat, x, target, skip)
        _assert_same(first, second, reference, flat)
    # Its step count now lags its group's: the group steps per tensor, as torch does.
    assert any(group.step is None for group in flat._flat)


def test_state_dict_crosses_over_to_torch_and_back():
    first, second, reference, flat, x = _pair(True)
    target = torch.randn(4, 3, generator=torch.Generator().manual_seed(1))
    for _ in range(5):
        _step(first, reference, x, target)
        _step(second, flat, x, target)
    # swap the states: each optimizer continues from the other's
    torch_state, flat_state = reference.state_dict(), flat.state_dict()
    reference.load_state_dict(flat_state)
    flat.load_state_dict(torch_state)
    for _ in range(5):
        _step(first, reference, x, target)
        _step(second, flat, x, target)
    _assert_same(first, second, reference, flat)
    assert all(group.intact(flat.state) for group in flat._flat)


def test_replaced_parameter_storage_is_gathered_again():
    first, second, reference, flat, x = _pair(True)
    target = torch.randn(4, 3, generator=torch.Generator().manual_seed(1))
    _step(first, reference, x, target)
    _step(second, flat, x, target)
    for p in second.parameters():
        p.data = p.data.clone()  # what moving a module does: the views are gone
    for _ in range(3):
        _step(first, reference, x, target)
        _step(second, flat, x, target)
    _assert_same(first, second, reference, flat)


@pytest.mark.parametrize("option", ["amsgrad", "foreach", "fused"])
def test_per_tensor_options_are_refused(option):
    with pytest.raises(ValueError, match=option):
        FlatAdam(nn.Linear(2, 2).parameters(), **{option: True})


def test_complex_parameters_step_per_tensor_as_torch():
    torch.manual_seed(0)
    a = nn.Parameter(torch.randn(3, dtype=torch.complex64))
    b = nn.Parameter(a.detach().clone())
    reference, flat = torch.optim.Adam([a], lr=0.1), FlatAdam([b], lr=0.1)
    assert flat._flat is None
    for _ in range(3):
        for p, optimizer in ((a, reference), (b, flat)):
            optimizer.zero_grad()
            (p.abs() ** 2).sum().backward()
            optimizer.step()
    assert torch.equal(a, b)


class _Sum(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(15, 1)

    def forward(self, x, mask=None):
        return self.linear(x.flatten(1))[:, 0]


def test_the_trainer_steps_flat_on_a_cpu():
    model = _Sum()
    x = torch.randn(16, 3, 5, generator=torch.Generator().manual_seed(0))
    trainer = Trainer(model, lambda out, y, w=None: ((out - y) ** 2).mean(), max_epochs=2, batch_size=8)
    assert isinstance(trainer.optimizer, FlatAdam)
    trainer.fit(SequenceData(x, x.sum((1, 2))))
    assert trainer.optimizer._flat is not None and trainer.optimizer._flat[0].step == 4


def test_real_pairs_after_an_odd_sized_parameter_still_view_as_complex():
    odd = nn.Parameter(torch.randn(3))
    pairs = nn.Parameter(torch.randn(4, 2))
    optimizer = FlatAdam([odd, pairs], lr=0.1)
    for _ in range(2):
        optimizer.zero_grad()
        (torch.view_as_complex(pairs).abs().sum() + odd.sum()).backward()
        optimizer.step()
    assert pairs.data_ptr() == optimizer._flat[0].pointers[1]


def test_a_lazy_modules_parameters_are_gathered_once_they_exist():
    torch.manual_seed(0)
    first = nn.Sequential(nn.LazyLinear(3), nn.Linear(3, 1))
    second = nn.Sequential(nn.LazyLinear(3), nn.Linear(3, 1))
    reference = torch.optim.AdamW(first.parameters(), lr=0.1)
    flat = FlatAdam(second.parameters(), lr=0.1, weight_decay=1e-2, decoupled_weight_decay=True)
    x = torch.randn(5, 4)
    first(x), second(x)
    second.load_state_dict(first.state_dict())
    for _ in range(3):
        for model, optimizer in ((first, reference), (second, flat)):
            optimizer.zero_grad()
            model(x).square().sum().backward()
            optimizer.step()
    assert flat._flat is not None
    for a, b in zip(first.parameters(), second.parameters()):
        assert torch.equal(a, b)
