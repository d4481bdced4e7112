"""Blocks and backbone: streaming vs full pass, padding masks vs unpadded runs, resampling, parameter groups."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ssmts.nn import SSM, SSMBackbone, SSMBlock, parameter_groups
from ssmts.nn.blocks import MaskedBatchNorm


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


def _backbone(seed: int = 0, **kwargs) -> SSMBackbone:
    torch.manual_seed(seed)  # encoder/decoder/norm/gate weights come from the global generator
    kwargs.setdefault("d_state", 8)
    return SSMBackbone(3, d_model=8, n_layers=2, generator=_gen(seed), **kwargs).double()


def _warm_batch_norm(model: torch.nn.Module) -> None:
    """Give batch norms non-trivial running statistics, so that eval mode is not the identity."""
    for m in model.modules():
        if isinstance(m, MaskedBatchNorm):
            m.running_mean.uniform_(-0.5, 0.5, generator=_gen(7))
            m.running_var.uniform_(0.5, 2.0, generator=_gen(8))


# ---------------------------------------------------------------- streaming
STREAM_CONFIGS = [
    dict(norm="layer", prenorm=True),
    dict(norm="batch", prenorm=False, heads=2, activation="gelu"),
    dict(norm="none", activation="leaky_relu", discretization="bilinear", d_output=2),
    dict(norm="layer", prenorm=False, heads=8, real_bc=True, d_output=2),
]


@pytest.mark.parametrize("cfg", STREAM_CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_forward_with_state_then_step_equals_full_pass(cfg):
    """Oracle: the backbone's one-shot per-step output (pooling='none', eval mode, float64, rel 1e-10)."""
    model = _backbone(pooling="none", **cfg)
    with torch.no_grad():
        _warm_batch_norm(model)
    model.eval()
    u = torch.randn(2, 3, 24, generator=_gen(1), dtype=torch.float64)
    full = model(u)
    y1, state = model.forward_with_state(u[..., :10])
    y2, state = model.forward_with_state(u[..., 10:17], state)
    steps = []
    for k in range(17, 24):
        y, state = model.step(u[..., k], state)
        steps.append(y)
    joined = torch.cat([y1, y2, torch.stack(steps, dim=-1)], dim=-1)
    assert joined.shape == full.shape
    assert _rel(joined.detach(), full.detach()) < 1e-10


def test_token_backbone_streaming_equals_full_pass():
    """Oracle: the full pass, with an embedding encoder (vocab_size) instead of a linear one."""
    torch.manual_seed(0)
    model = SSMBackbone(1, d_model=8, n_layers=2, vocab_size=11, pooling="none", d_state=8).double().eval()
    tokens = torch.randint(1, 11, (2, 15), generator=_gen(2))
    full = model(tokens)
    y, state = model.forward_with_state(tokens[:, :9])
    ys = [y]
    for k in range(9, 15):
        yk, state = model.step(tokens[:, k], state)
        ys.append(yk[..., None])
    assert _rel(torch.cat(ys, dim=-1).detach(), full.detach()) < 1e-10
    with pytest.raises(ValueError, match="token input must be int64"):
        model(tokens.double())


def test_bidirectional_backbone_has_no_streaming():
    model = _backbone(pooling="none", bidirectional="essm")
    with pytest.raises(ValueError, match="bidirectional"):
        model.initial_state(2)
    with pytest.raises(ValueError, match="bidirectional"):
        model.forward_with_state(torch.randn(2, 3, 5, dtype=torch.float64))


# ---------------------------------------------------------------- resampling
def test_backbone_set_sample_rate_reaches_every_layer():
    """Every SSM layer's Delta is multiplied by train_rate / new_rate, also through the dt_scale property."""
    model = SSMBackbone(3, d_model=8, n_layers=3, d_state=8)
    layers = model.ssm_layers
    assert len(layers) == 3 and all(isinstance(m, SSM) for m in layers)
    before = [m.Delta.detach().clone() for m in layers]
    model.set_sample_rate(8000, 16000)
    for m, d in zip(layers, before):
        assert m.dt_scale == 2.0
        torch.testing.assert_close(m.Delta.detach(), 2.0 * d)
    model.dt_scale = 0.5
    assert model.dt_scale == 0.5 and all(m.dt_scale == 0.5 for m in layers)
    with pytest.raises(ValueError, match="dt_scale must be > 0"):
        model.dt_scale = 0.0
    with pytest.raises(ValueError, match="sample rates must be > 0"):
        model.set_sample_rate(-1, 16000)


# ---------------------------------------------------------------- padding masks
LENGTHS = [20, 13, 7]


def _padded(seed: int, garbage: float = 50.0):
    """A batch of 3 sequences of LENGTHS padded to 20 with large garbage, and its mask."""
    u = torch.randn(3, 3, 20, generator=_gen(seed), dtype=torch.float64)
    mask = torch.zeros(3, 20, dtype=torch.bool)
    for i, n in enumerate(LENGTHS):
        mask[i, :n] = True
    noise = garbage * torch.randn(u.shape, generator=_gen(seed + 100), dtype=torch.float64)
    return torch.where(mask[:, None, :], u, noise), mask


MASK_CONFIGS = [
    dict(norm="layer", bidirectional=False),
    dict(norm="layer", bidirectional="essm"),
    dict(norm="batch", bidirectional=False),
    dict(norm="batch", bidirectional="ldnn", prenorm=False),
]
MASK_IDS = ["layer-causal", "layer-essm", "batch-causal", "batch-ldnn-postnorm"]


@pytest.mark.parametrize("pooling", ["mean", "last", "none"])
@pytest.mark.parametrize("cfg", MASK_CONFIGS, ids=MASK_IDS)
def test_padded_batch_equals_unpadded_runs(cfg, pooling):
    """Oracle: each sequence run alone, unpadded (eval mode). Padded steps change nothing; pooling ignores them."""
    model = _backbone(pooling=pooling, d_output=2, **cfg)
    with torch.no_grad():
        _warm_batch_norm(model)
    model.eval()
    u, mask = _padded(3)
    y = model(u, mask)
    for i, n in enumerate(LENGTHS):
        alone = model(u[i : i + 1, :, :n])[0]
        got = y[i, :, :n] if pooling == "none" else y[i]
        assert _rel(got.detach(), alone.detach()) < 1e-10, (i, n)


@pytest.mark.parametrize("cfg", MASK_CONFIGS, ids=MASK_IDS)
def test_padded_steps_change_nothing_in_training_mode(cfg):
    """Training mode (batch statistics): two different paddings give identical real steps and running stats."""
    outs, stats = [], []
    for garbage in (1.0, 1e3):
        model = _backbone(pooling="none", **cfg).train()
        u, mask = _padded(4, garbage)
        outs.append(model(u, mask))
        stats.append([b.detach().clone() for b in model.buffers()])
    m = mask[:, None, :]
    assert _rel(outs[0][m.expand_as(outs[0])].detach(), outs[1][m.expand_as(outs[1])].detach()) < 1e-10
    for a, b in zip(*stats):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_masked_batch_norm_uses_statistics_of_real_steps_only():
    """Oracle: numpy mean/var over the real steps only, gathered by hand."""
    bn = MaskedBatchNorm(3).double().train()
    x, mask = _padded(5, 1e3)
    y = bn(x, mask)
    real = np.concatenate([x[i, :, :n].numpy() for i, n in enumerate(LENGTHS)], axis=1)  # (3, sum LENGTHS)
    mean, var = real.mean(axis=1), real.var(axis=1)
    expected = (x.numpy() - mean[None, :, None]) / np.sqrt(var[None, :, None] + bn.eps)
    m = mask[:, None, :].expand_as(x).numpy()
    np.testing.assert_allclose(y.detach().numpy()[m], expected[m], rtol=1e-10)
    n = real.shape[1]
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * mean, rtol=1e-10)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.9 + 0.1 * var * n / (n - 1), rtol=1e-10)


def test_block_mask_zeroes_padded_input_to_bidirectional_ssm():
    """Oracle: the block applied to the unpadded sequence. Without the mask the padding would leak backwards."""
    torch.manual_seed(0)
    block = SSMBlock(3, d_state=8, bidirectional="essm").double()
    x, mask = _padded(6)
    y = block(x, mask)
    alone = block(x[2:3, :, :7])
    assert _rel(y[2:3, :, :7].detach(), alone.detach()) < 1e-10
    leaked = block(x)[2:3, :, :7]
    assert _rel(leaked.detach(), alone.detach()) > 1e-3


def _left_padded():
    u = torch.randn(1, 3, 10, generator=_gen(9), dtype=torch.float64)
    mask = torch.tensor([[False] * 4 + [True] * 6])
    return u, torch.where(mask[:, None, :], u, torch.full_like(u, 30.0)), mask


def test_left_padding_with_mean_pooling_equals_unpadded_run():
    """Oracle: the unpadded run. A causal model fed zeros (masked) before the sequence keeps a zero state."""
    model = _backbone(pooling="mean", d_output=2).eval()
    u, padded, mask = _left_padded()
    assert _rel(model(padded, mask).detach(), model(u[..., 4:]).detach()) < 1e-10


def test_left_padding_with_last_pooling_equals_unpadded_run():
    """Oracle: the unpadded run; 'last' must be the last real step whatever side the padding is on."""
    model = _backbone(pooling="last", d_output=2).eval()
    u, padded, mask = _left_padded()
    assert _rel(model(padded, mask).detach(), model(u[..., 4:]).detach()) < 1e-10


def test_mask_shape_is_checked():
    model = _backbone()
    with pytest.raises(ValueError, match=r"mask must have shape \(2, 6\)"):
        model(torch.randn(2, 3, 6, dtype=torch.float64), torch.ones(2, 5, dtype=torch.bool))


# ---------------------------------------------------------------- parameter groups
@pytest.mark.parametrize("bidirectional", [False, "ldnn"])
def test_parameter_groups_put_lambda_delta_b_in_own_group(bidirectional):
    """SSM parameters (Lambda, log_dt, B) get lr_ssm and no weight decay; every parameter appears exactly once."""
    model = SSMBackbone(3, d_model=8, n_layers=2, d_output=2, d_state=8, bidirectional=bidirectional)
    groups = parameter_groups(model, lr=1e-3, lr_ssm=1e-4, weight_decay=0.05)
    by_name = {g["name"]: g for g in groups}
    assert set(by_name) == {"ssm", "other", "no_decay"}
    ssm = by_name["ssm"]
    assert ssm["lr"] == 1e-4 and ssm["weight_decay"] == 0.0
    names = {id(p): n for n, p in model.named_parameters()}
    ssm_names = {names[id(p)].split(".")[-1] for p in ssm["params"]}
    expected = {"Lambda_re_raw", "Lambda_im", "log_dt", "B"}
    if bidirectional == "ldnn":
        expected |= {"Lambda_backward_re_raw", "Lambda_backward_im"}
    assert ssm_names == expected
    assert len(ssm["params"]) == 2 * len(expected)  # two layers
    all_ids = [id(p) for g in groups for p in g["params"]]
    assert len(all_ids) == len(set(all_ids)) == len(list(model.parameters()))
    other = {names[id(p)] for p in by_name["other"]["params"]}
    assert by_name["other"]["weight_decay"] == 0.05 and by_name["no_decay"]["weight_decay"] == 0.0
    assert "blocks.0.ssm.C" in other and "encoder.weight" in other
    no_decay = {names[id(p)] for p in by_name["no_decay"]["params"]}
    assert {"blocks.0.ssm.D", "encoder.bias", "blocks.0.norm.weight"} <= no_decay
    torch.optim.AdamW(groups)  # the groups are valid optimizer input
    assert parameter_groups(model, lr=1e-3)[-1]["lr"] == 1e-3  # lr_ssm defaults to lr


# ---------------------------------------------------------------- argument checks
@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(pooling="max"), r"unknown pooling 'max'"),
        (dict(norm="group"), r"unknown norm 'group'"),
        (dict(activation="relu6"), r"unknown activation 'relu6'"),
        (dict(n_layers=0), r"n_layers must be >= 1"),
        (dict(dropout=1.0), r"dropout must lie in \[0, 1\)"),
        (dict(D="scalar"), r"unknown D 'scalar'"),
        (dict(init="s4"), r"unknown init 's4'"),
    ],
)
def test_bad_backbone_arguments_raise_named_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SSMBackbone(3, d_model=8, d_state=8, **kwargs)


def test_backbone_rejects_wrong_input_shape():
    model = _backbone()
    with pytest.raises(ValueError, match=r"input must have shape \(batch, 3, length\), got \(2, 4, 6\)"):
        model(torch.randn(2, 4, 6, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"input must have shape \(batch, 3, length\)"):
        model(torch.randn(3, 6, dtype=torch.float64))
