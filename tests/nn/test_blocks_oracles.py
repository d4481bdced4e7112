"""Blocks and backbone against hand-made float64 oracles.

The block is recomputed from its sublayers as its docstring defines it:
prenorm: x + drop(act(layer(mask * norm(x)))), postnorm: norm(x + drop(act(layer(mask * x)))),
with the norms (layer norm over channels, batch norm over real steps) and the gated GELU written out
by formula, and the sequence layer taken as the block's own `ssm` module (tested elsewhere).
"""

from __future__ import annotations

import math

import pytest
import torch

from ssmts.nn import SSM, LinearCDE, SSMBackbone, SSMBlock, parameter_groups
from ssmts.nn.blocks import MaskedBatchNorm, make_layer
from ssmts.nn.dense import DenseSSM

TOL = dict(rtol=1e-10, atol=1e-12)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randomize_affine(model: torch.nn.Module, seed: int = 3) -> None:
    """Non-trivial norm weights and biases, so that scale and shift are visible in the output."""
    g = _gen(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(
                    torch.rand(p.shape, generator=g, dtype=p.dtype) + 0.5
                    if name.endswith("weight")
                    else torch.randn(p.shape, generator=g, dtype=p.dtype)
                )


# ---------------------------------------------------------------- oracles
def _layer_norm_ref(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight[None, :, None] + bias[None, :, None]


def _batch_norm_stats_ref(x, mask):
    """Mean and biased variance per channel over the real steps of every sample, by a loop."""
    C = x.shape[1]
    mean, var = torch.zeros(C, dtype=torch.float64), torch.zeros(C, dtype=torch.float64)
    for c in range(C):
        vals = [x[b, c, t] for b in range(x.shape[0]) for t in range(x.shape[2]) if mask is None or mask[b, t]]
        vals = torch.stack(vals).double()
        mean[c] = vals.sum() / len(vals)
        var[c] = ((vals - mean[c]) ** 2).sum() / len(vals)
    return mean, var


def _batch_norm_ref(x, weight, bias, mask, eps=1e-5):
    mean, var = _batch_norm_stats_ref(x, mask)
    return (x - mean[None, :, None]) / torch.sqrt(var[None, :, None] + eps) * weight[None, :, None] + bias[
        None, :, None
    ]


def _norm_ref(kind, module, x, mask):
    """Training-mode norm of the given kind, with the module's weight and bias."""
    if kind == "none":
        return x
    if kind == "layer":
        return _layer_norm_ref(x, module.weight, module.bias)
    return _batch_norm_ref(x, module.weight, module.bias, mask)


def _gelu_ref(y):
    return 0.5 * y * (1.0 + torch.erf(y / math.sqrt(2.0)))


def _gated_gelu_ref(y, gate):
    """u' = GELU(y) * sigmoid(W GELU(y) + b) over channels."""
    g = _gelu_ref(y)
    return g * torch.sigmoid(torch.einsum("oc,bcl->bol", gate.weight, g) + gate.bias[None, :, None])


def _block_ref(block, x, mask, *, norm, prenorm):
    """The block of the docstring, from its sublayers (no dropout)."""
    m = torch.ones(x.shape[0], x.shape[2], dtype=torch.bool) if mask is None else mask
    z = _norm_ref(norm, block.norm, x, mask) if prenorm else x
    z = z * m[:, None, :].double()
    out = x + _gated_gelu_ref(block.ssm(z), block.activation.gate)
    return out if prenorm else _norm_ref(norm, block.norm, out, mask)


# ---------------------------------------------------------------- SSMBlock
def test_default_block_is_prenorm_layer_norm_with_gated_gelu():
    """Oracle: x + GatedGELU(layer(LayerNorm(x))) by formula (the defaults: prenorm, norm='layer', gated_gelu)."""
    torch.manual_seed(0)
    block = SSMBlock(4, d_state=4, generator=_gen(0)).double()
    _randomize_affine(block)
    x = torch.randn(2, 4, 7, generator=_gen(1), dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(block(x), _block_ref(block, x, None, norm="layer", prenorm=True), **TOL)


@pytest.mark.parametrize("prenorm", [True, False])
def test_batch_norm_block_in_training_takes_statistics_over_real_steps_only(prenorm):
    """Oracle: the block by formula with batch-norm statistics from a loop over the real (mask True) steps."""
    torch.manual_seed(1)
    block = SSMBlock(3, d_state=4, norm="batch", prenorm=prenorm, generator=_gen(1)).double().train()
    _randomize_affine(block)
    x = torch.randn(2, 3, 6, generator=_gen(2), dtype=torch.float64)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    with torch.no_grad():
        out = block(x, mask)
        ref = _block_ref(block, x, mask, norm="batch", prenorm=prenorm)
    torch.testing.assert_close(out[0], ref[0], **TOL)
    torch.testing.assert_close(out[1, :, :4], ref[1, :, :4], **TOL)


def test_dropout_acts_in_training_only():
    """Oracle: eval mode is the block without dropout; in training every residual branch entry
    is 0 or 1/(1-p) times the oracle's, and both occur."""
    torch.manual_seed(2)
    block = SSMBlock(4, d_state=4, dropout=0.5, generator=_gen(2)).double()
    x = torch.randn(2, 4, 16, generator=_gen(3), dtype=torch.float64)
    with torch.no_grad():
        branch = _block_ref(block, x, None, norm="layer", prenorm=True) - x
        torch.testing.assert_close(block.eval()(x), x + branch, **TOL)
        torch.manual_seed(5)
        out = block.train()(x) - x
    kept = torch.isclose(out, 2 * branch, rtol=1e-10, atol=1e-12)
    dropped = out == 0
    assert bool((kept | dropped).all()) and bool(kept.any()) and bool(dropped.any())


def test_dropout_outside_unit_interval_is_refused():
    with pytest.raises(ValueError, match=r"dropout must lie in \[0, 1\), got 1\.0"):
        SSMBlock(4, dropout=1.0)


# ---------------------------------------------------------------- make_layer
@pytest.mark.parametrize("kind,cls", [("ssm", SSM), ("lncde", LinearCDE), ("dense", DenseSSM)])
def test_make_layer_builds_an_h_to_h_layer_with_the_given_options(kind, cls):
    """Oracle: the layer's class, its d_state (the keyword passed through) and an (batch, H, L) -> (batch, H, L) map."""
    layer = make_layer(kind, 4, d_state=8)
    assert isinstance(layer, cls) and layer.d_state == 8 and layer.d_output == 4
    with torch.no_grad():
        assert layer(torch.randn(2, 4, 5, generator=_gen(0))).shape == (2, 4, 5)


@pytest.mark.parametrize("kind", ["ssm", "lncde", "dense"])
def test_block_layer_output_size_is_fixed_to_d_model(kind):
    """A block's layer is H -> H (the residual needs it): a d_output keyword is refused, not passed on."""
    with pytest.raises(TypeError, match="d_output"):
        SSMBlock(4, layer=kind, d_output=2)


def test_unknown_layer_message_lists_every_choice():
    with pytest.raises(ValueError, match=r"unknown layer 'rnn'; choose one of \('ssm', 'lncde', 'dense'\)"):
        make_layer("rnn", 4)


# ---------------------------------------------------------------- MaskedBatchNorm
@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 3, 2)])
def test_masked_batch_norm_without_mask_equals_torch_batch_norm(shape):
    """Oracles: nn.BatchNorm1d (training output, running mean and unbiased running variance, then eval output)
    and the loop statistics; batch, channels and length differ so that any swapped dimension shows."""
    C = shape[1]
    bn = MaskedBatchNorm(C).double()
    ref = torch.nn.BatchNorm1d(C).double()
    g = _gen(4)
    with torch.no_grad():
        for p in (bn.weight, ref.weight):
            p.copy_(torch.tensor([0.5, 1.5, 2.0], dtype=torch.float64))
        for p in (bn.bias, ref.bias):
            p.copy_(torch.tensor([-1.0, 0.25, 3.0], dtype=torch.float64))
    x = 3 * torch.randn(*shape, generator=g, dtype=torch.float64) + 1
    with torch.no_grad():
        out = bn.train()(x)
        torch.testing.assert_close(out, ref.train()(x), **TOL)
        torch.testing.assert_close(out, _batch_norm_ref(x, bn.weight, bn.bias, None), **TOL)
    torch.testing.assert_close(bn.running_mean, ref.running_mean, **TOL)
    torch.testing.assert_close(bn.running_var, ref.running_var, **TOL)
    x2 = torch.randn(*shape, generator=g, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(bn.eval()(x2), ref.eval()(x2), **TOL)


def test_masked_batch_norm_eval_uses_running_statistics_and_eps_1e_5():
    """Oracle: (x - running_mean) / sqrt(running_var + 1e-5) * weight + bias, with variances small
    enough for eps to matter."""
    bn = MaskedBatchNorm(3).double().eval()
    with torch.no_grad():
        bn.running_mean.copy_(torch.tensor([0.1, -0.2, 0.3]))
        bn.running_var.copy_(torch.tensor([1e-5, 1e-4, 2.0]))
        bn.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
        bn.bias.copy_(torch.tensor([0.0, -1.0, 1.0]))
    x = torch.randn(2, 3, 4, generator=_gen(5), dtype=torch.float64)
    ref = (x - bn.running_mean[None, :, None]) / torch.sqrt(bn.running_var[None, :, None] + 1e-5)
    ref = ref * bn.weight[None, :, None] + bn.bias[None, :, None]
    with torch.no_grad():
        torch.testing.assert_close(bn(x), ref, **TOL)


@pytest.mark.parametrize("masked", [False, True])
def test_masked_batch_norm_keeps_running_statistics_in_its_own_dtype(masked):
    """A float32 norm fed float64 input updates its float32 running statistics by the loop oracle
    (running = 0.9 * initial + 0.1 * batch value, variance unbiased over the real steps)."""
    bn = MaskedBatchNorm(3).train()
    x = torch.randn(2, 3, 5, generator=_gen(6), dtype=torch.float64)
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]]) if masked else None
    with torch.no_grad():
        out = bn(x, mask)
    assert out.dtype == torch.float64
    mean, var = _batch_norm_stats_ref(x, mask)
    n = 7 if masked else 10
    assert bn.running_mean.dtype == bn.running_var.dtype == torch.float32
    torch.testing.assert_close(bn.running_mean, (0.1 * mean).float())
    torch.testing.assert_close(bn.running_var, (0.9 + 0.1 * var * n / (n - 1)).float())


# ---------------------------------------------------------------- SSMBackbone
def _backbone_ref(model, u, mask, *, norm, prenorm):
    """Linear encoder by einsum, padded steps zeroed, every block by _block_ref, a final norm on pre-norm stacks."""
    x = torch.einsum("oc,bcl->bol", model.encoder.weight, u) + model.encoder.bias[None, :, None]
    if mask is not None:
        x = x * mask[:, None, :].double()
    for block in model.blocks:
        x = _block_ref(block, x, mask, norm=norm, prenorm=prenorm)
    return _norm_ref(norm, model.final_norm, x, mask) if prenorm else x


def test_default_backbone_is_four_prenorm_blocks_of_width_64():
    """Oracle: the documented defaults (d_model=64, n_layers=4, prenorm layer-norm blocks and a
    final layer norm) by formula."""
    torch.manual_seed(0)
    model = SSMBackbone(2, pooling="none", d_state=4).double()
    _randomize_affine(model)
    assert model.d_model == 64 and model.encoder.out_features == 64 and len(model.blocks) == 4
    u = torch.randn(2, 2, 5, generator=_gen(7), dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(model(u), _backbone_ref(model, u, None, norm="layer", prenorm=True), **TOL)


@pytest.mark.parametrize("norm,prenorm", [("batch", True), ("batch", False), ("layer", False), ("none", True)])
def test_backbone_features_in_training_equal_the_stack_of_block_oracles(norm, prenorm):
    """Oracle: _backbone_ref (every block and the final norm by formula, batch statistics over real steps only)."""
    torch.manual_seed(1)
    model = SSMBackbone(3, d_model=4, n_layers=2, pooling="none", norm=norm, prenorm=prenorm, d_state=4).double()
    _randomize_affine(model)
    model.train()
    u = torch.randn(2, 3, 6, generator=_gen(8), dtype=torch.float64)
    mask = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
    with torch.no_grad():
        out = model.features(u, mask)
        ref = _backbone_ref(model, u, mask, norm=norm, prenorm=prenorm)
    torch.testing.assert_close(out[0], ref[0], **TOL)
    torch.testing.assert_close(out[1, :, :3], ref[1, :, :3], **TOL)


def test_token_zero_is_padding_encoded_as_zeros_and_never_trained():
    """Token id 0 (padding) embeds to the zero vector and its embedding row gets no gradient."""
    torch.manual_seed(0)
    model = SSMBackbone(1, d_model=4, n_layers=1, d_output=2, vocab_size=5, d_state=4)
    assert bool((model.encoder.weight[0] == 0).all()) and bool((model.encoder.weight[1:] != 0).all())
    model(torch.tensor([[0, 1, 2, 0], [3, 4, 0, 1]])).sum().backward()
    assert bool((model.encoder.weight.grad[0] == 0).all()) and bool((model.encoder.weight.grad[1:] != 0).any())


def _last_real_ref(x, mask):
    return torch.stack([x[b, :, max(t for t in range(x.shape[2]) if mask[b, t])] for b in range(x.shape[0])])


def test_pool_defaults_to_the_backbone_pooling_and_honours_how():
    """Oracles: the last real step by a loop; the masked mean by a loop over real steps."""
    x = torch.randn(2, 4, 5, generator=_gen(9), dtype=torch.float64)
    mask = torch.tensor([[True, True, True, False, False], [True, True, True, True, True]])
    mean_ref = torch.stack([x[b][:, mask[b]].mean(-1) for b in range(2)])
    last = SSMBackbone(3, d_model=4, n_layers=1, pooling="last", d_state=4)
    mean = SSMBackbone(3, d_model=4, n_layers=1, pooling="mean", d_state=4)
    torch.testing.assert_close(last.pool(x, mask), _last_real_ref(x, mask), **TOL)
    torch.testing.assert_close(mean.pool(x, mask), mean_ref, **TOL)
    torch.testing.assert_close(mean.pool(x, mask, how="last"), _last_real_ref(x, mask), **TOL)
    torch.testing.assert_close(last.pool(x, mask, how="mean"), mean_ref, **TOL)


def test_backbone_without_decoder_returns_pooled_features():
    """Oracle: d_output=None gives the masked mean over real steps of `features` (batch, d_model)."""
    torch.manual_seed(0)
    model = SSMBackbone(3, d_model=4, n_layers=1, d_state=4).double().eval()
    u = torch.randn(2, 3, 5, generator=_gen(10), dtype=torch.float64)
    mask = torch.tensor([[True] * 5, [True] * 2 + [False] * 3])
    with torch.no_grad():
        feats = model.features(u, mask)
        ref = torch.stack([feats[b][:, mask[b]].mean(-1) for b in range(2)])
        torch.testing.assert_close(model(u, mask), ref, **TOL)


def test_set_sample_rate_on_lncde_backbone_names_the_alternative():
    model = SSMBackbone(3, d_model=4, n_layers=1, layer="lncde", d_state=4)
    match = (
        r"^set_sample_rate changes SSM layers only; a backbone with layer='lncde' takes a "
        r"rate change through ssmts\.nn\.scaled_delta\(model, delta_factor\(train_rate, new_rate\)\)$"
    )
    with pytest.raises(ValueError, match=match):
        model.set_sample_rate(8000, 16000)


def test_step_with_a_state_of_the_wrong_length_says_where_to_start():
    model = SSMBackbone(3, d_model=4, n_layers=2, d_state=4)
    match = (
        r"^state must hold one tensor per block \(2\), got 1; start from initial_state\(batch\) or forward_with_state$"
    )
    with pytest.raises(ValueError, match=match):
        model.step(torch.randn(2, 3), model.initial_state(2)[:1])


# ---------------------------------------------------------------- parameter_groups
def test_parameter_groups_default_to_no_weight_decay_and_carry_their_learning_rates():
    """Every group has the 'lr' the optimizer reads (lr, or lr_ssm for the SSM group); weight_decay defaults to 0."""
    model = SSMBackbone(3, d_model=4, n_layers=1, d_output=2, d_state=4)
    groups = {g["name"]: g for g in parameter_groups(model, lr=0.02, lr_ssm=0.005)}
    assert {n: g["lr"] for n, g in groups.items()} == {"other": 0.02, "no_decay": 0.02, "ssm": 0.005}
    assert {n: g["weight_decay"] for n, g in groups.items()} == {"other": 0.0, "no_decay": 0.0, "ssm": 0.0}
    opt = torch.optim.AdamW(list(groups.values()), lr=0.5)
    assert sorted(g["lr"] for g in opt.param_groups) == [0.005, 0.02, 0.02]


def test_parameter_groups_exempt_a_full_feedthrough_d_from_weight_decay():
    """The feedthrough D goes to no_decay even as a full (M, H) matrix (the '.D' name rule, not only dim < 2)."""
    model = SSMBackbone(3, d_model=4, n_layers=1, d_output=2, d_state=4, D="full")
    assert model.blocks[0].ssm.D.dim() == 2
    groups = {g["name"]: {id(p) for p in g["params"]} for g in parameter_groups(model, lr=1e-3, weight_decay=0.1)}
    assert id(model.blocks[0].ssm.D) in groups["no_decay"]
    assert id(model.blocks[0].ssm.D) not in groups["other"]


def test_parameter_groups_list_a_parameter_shared_by_two_layers_once():
    """Two SSM layers sharing Lambda_im (tied weights): it appears once, so the groups are valid optimizer input."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(SSM(4, 4), SSM(4, 4))
    model[1].Lambda_im = model[0].Lambda_im
    groups = parameter_groups(model, lr=1e-3, lr_ssm=1e-4)
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))
    torch.optim.AdamW(groups)
