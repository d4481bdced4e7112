"""LinearCDE as the layer of SSMBlock / SSMBackbone: streaming equals the full pass, finite outputs,
the zero-shot scope on its path step, optimizer groups, and the parameter declarations."""

from __future__ import annotations

import pytest
import torch

from ssmts.nn import LNCDE_STRUCTURES, LinearCDE, SSMBackbone, SSMBlock, delta_factor, parameter_groups, scaled_delta
from ssmts.nn.blocks import MaskedBatchNorm
from ssmts.training import BackboneParams, InvalidParameterError


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach(), b.detach()
    return float((a - b).abs().max() / b.abs().max())


STRUCTURE_KWARGS = {
    "diagonal": {},
    "block_diagonal": dict(block_size=4),
    "dplr": dict(rank=2),
    "walsh_hadamard": {},
    "dense": {},
}


def _backbone(structure: str, seed: int = 0, **kwargs) -> SSMBackbone:
    torch.manual_seed(seed)
    # init_std 4: input-dependent transitions far from the identity, so that a wrong state hand-over shows.
    return SSMBackbone(
        3,
        d_model=8,
        n_layers=2,
        layer="lncde",
        d_state=8,
        structure=structure,
        init_std=4.0,
        generator=_gen(seed),
        **STRUCTURE_KWARGS[structure],
        **kwargs,
    ).double()


@pytest.mark.parametrize("structure", LNCDE_STRUCTURES)
@pytest.mark.parametrize(
    "cfg",
    [dict(norm="layer", prenorm=True), dict(norm="batch", prenorm=False, activation="gelu", d_output=2)],
    ids=["layer-prenorm", "batch-postnorm"],
)
def test_lncde_backbone_streaming_equals_full_pass_at_every_position(structure, cfg):
    """Oracle: the one-shot per-step output (scan) of the same backbone; forward_with_state over two
    pieces, then `step` one position at a time, float64, eval mode, rel 1e-10 at every position."""
    model = _backbone(structure, pooling="none", **cfg)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, MaskedBatchNorm):
                m.running_mean.uniform_(-0.5, 0.5, generator=_gen(7))
                m.running_var.uniform_(0.5, 2.0, generator=_gen(8))
    model.eval()
    u = torch.randn(2, 3, 30, generator=_gen(1), dtype=torch.float64)
    with torch.no_grad():
        full = model(u)
        y1, state = model.forward_with_state(u[..., :9])
        y2, state = model.forward_with_state(u[..., 9:20], state)
        steps = []
        for k in range(20, 30):
            y, state = model.step(u[..., k], state)
            steps.append(y)
        step_only, s = [], model.initial_state(2)
        for k in range(30):
            y, s = model.step(u[..., k], s)
            step_only.append(y)
    joined = torch.cat([y1, y2, torch.stack(steps, dim=-1)], dim=-1)
    assert joined.shape == full.shape
    per_position = (joined - full).abs().amax(dim=(0, 1)) / full.abs().max()
    assert float(per_position.max()) < 1e-10
    assert _rel(torch.stack(step_only, dim=-1), full) < 1e-10
    assert all(isinstance(b.ssm, LinearCDE) for b in model.blocks)


def test_lncde_block_step_equals_forward_and_state_is_the_layers():
    torch.manual_seed(0)
    block = SSMBlock(6, layer="lncde", d_state=8, structure="dplr", rank=1, generator=_gen(2)).double().eval()
    x = torch.randn(3, 6, 15, generator=_gen(3), dtype=torch.float64)
    with torch.no_grad():
        full = block(x)
        state, ys = block.ssm.initial_state(3), []
        for k in range(15):
            y, state = block.step(x[..., k], state)
            ys.append(y)
        _, final = block.forward_with_state(x, None)
    assert _rel(torch.stack(ys, -1), full) < 1e-10
    assert state.shape == (3, 8) and _rel(state, final) < 1e-10


def test_token_lncde_backbone_streams():
    torch.manual_seed(0)
    model = (
        SSMBackbone(
            1,
            d_model=8,
            n_layers=2,
            vocab_size=7,
            pooling="none",
            layer="lncde",
            d_state=8,
            structure="walsh_hadamard",
            generator=_gen(0),
        )
        .double()
        .eval()
    )
    tokens = torch.randint(1, 7, (2, 12), generator=_gen(1))
    with torch.no_grad():
        full = model(tokens)
        y, state = model.forward_with_state(tokens[:, :5])
        rest = []
        for k in range(5, 12):
            out, state = model.step(tokens[:, k], state)
            rest.append(out)
    assert _rel(torch.cat([y, torch.stack(rest, -1)], -1), full) < 1e-10


@pytest.mark.parametrize("structure", LNCDE_STRUCTURES)
def test_lncde_backbone_outputs_are_finite_on_long_and_large_inputs(structure):
    """max_norm keeps every transition a contraction: 2000 steps of inputs of size 100 stay finite
    (float32, training mode, mean pooling and a decoder), and the gradient is finite too."""
    model = SSMBackbone(
        3,
        d_model=8,
        n_layers=2,
        d_output=2,
        layer="lncde",
        d_state=8,
        structure=structure,
        generator=_gen(4),
        **STRUCTURE_KWARGS[structure],
    )
    u = 100 * torch.randn(4, 3, 2000, generator=_gen(5))
    y = model(u)
    assert y.shape == (4, 2) and torch.isfinite(y).all()
    y.square().sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_scaled_delta_multiplies_the_lncde_path_step_and_restores_it():
    """Oracle: the same weights in a layer built with dt x factor."""
    layer = LinearCDE(4, 8, structure="block_diagonal", dt=0.1, generator=_gen(0)).double()
    twice = LinearCDE(4, 8, structure="block_diagonal", dt=0.2, generator=_gen(0)).double()
    twice.load_state_dict(layer.state_dict())
    u = torch.randn(2, 4, 25, generator=_gen(1), dtype=torch.float64)
    model = SSMBackbone(4, d_model=4, n_layers=1, layer="lncde", d_state=8)
    model.blocks[0].ssm = layer
    with scaled_delta(model, delta_factor(train_rate=100, new_rate=50)):
        assert layer.step_size == pytest.approx(0.2)
        scaled = layer(u)
    assert layer.step_size == 0.1 and layer._delta_factor == 1.0
    assert _rel(scaled, twice(u)) < 1e-12
    assert _rel(layer(u), twice(u)) > 1e-3  # the factor acts (and is gone after the block)


def test_lncde_backbone_rate_base_factor_is_refused_with_a_pointer_to_scaled_delta():
    model = SSMBackbone(3, d_model=8, n_layers=1, layer="lncde", d_state=8)
    assert model.dt_scale == 1.0 and model.ssm_layers == [] and len(model.lncde_layers) == 1
    model.dt_scale = 1.0  # what the task pipelines set for every model: accepted
    with pytest.raises(ValueError, match="scaled_delta"):
        model.dt_scale = 0.5
    with pytest.raises(ValueError, match="scaled_delta"):
        model.set_sample_rate(8000, 16000)


@pytest.mark.parametrize("structure", LNCDE_STRUCTURES)
def test_parameter_groups_put_lncde_transitions_and_b_in_the_ssm_group(structure):
    model = SSMBackbone(
        3, d_model=8, n_layers=2, layer="lncde", d_state=8, structure=structure, **STRUCTURE_KWARGS[structure]
    )
    groups = {g["name"]: g for g in parameter_groups(model, lr=1e-3, lr_ssm=1e-4, weight_decay=0.1)}
    names = {id(p): n for n, p in model.named_parameters()}
    ssm = {names[id(p)] for p in groups["ssm"]["params"]}
    expected_leaf = {
        "diagonal": {"0", "B"},
        "block_diagonal": {"0", "B"},
        "dense": {"A", "B"},
        "dplr": {"A_diag", "A_U", "A_V", "B"},
        "walsh_hadamard": {"A_diag", "B"},
    }[structure]
    assert {n.split(".")[-1] for n in ssm} == expected_leaf
    assert groups["ssm"]["lr"] == 1e-4 and groups["ssm"]["weight_decay"] == 0.0
    other = {names[id(p)] for p in groups["other"]["params"]}
    assert "blocks.0.ssm.path.weight" in other and "blocks.0.ssm.C" in other
    all_ids = [id(p) for g in groups.values() for p in g["params"]]
    assert len(all_ids) == len(set(all_ids)) == len(list(model.parameters()))


# ---------------------------------------------------------------- declarations
def test_backbone_params_build_an_lncde_backbone_with_the_declared_options():
    params = BackboneParams(
        d_model=8,
        d_state=16,
        n_layers=2,
        layer="lncde",
        lncde_structure="block_diagonal",
        lncde_block_size=8,
        lncde_dt=0.05,
        lncde_max_norm=0.9,
    )
    params.validate_params()
    model = params.build_backbone(3)
    layer = model.blocks[1].ssm
    assert isinstance(layer, LinearCDE) and model.layer == "lncde"
    assert (layer.d_state, layer.structure, layer.block_sizes, layer.dt, layer.max_norm) == (
        16,
        "block_diagonal",
        (8, 8),
        0.05,
        0.9,
    )
    dplr = BackboneParams(
        d_model=8, d_state=8, n_layers=1, layer="lncde", lncde_structure="dplr", lncde_rank=3
    ).build_backbone(2, vocab_size=5)
    assert dplr.blocks[0].ssm.rank == 3 and dplr.vocab_size == 5
    # The default stays the SSM: nothing changes for existing users.
    assert BackboneParams().layer == "ssm"
    assert type(BackboneParams(d_model=8, d_state=8, n_layers=1).build_backbone(3).blocks[0].ssm).__name__ == "SSM"


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(lncde_structure="dense"), r"lncde_structure='dense' only applies to layer='lncde'"),
        (dict(lncde_dt=0.5), r"lncde_dt=0.5 only applies to layer='lncde'"),
        (dict(layer="lncde", heads=2), r"heads=2 only applies to layer='ssm'; with layer='lncde'"),
        (dict(layer="lncde", bidirectional="essm"), r"bidirectional='essm' only applies to layer='ssm'"),
        (dict(layer="lncde", dt_max=0.5), r"dt_max=0.5 only applies to layer='ssm'"),
        (dict(layer="lncde", lncde_structure="dense", lncde_block_size=2), r"lncde_block_size=2 needs lncde_structure"),
        (dict(layer="lncde", lncde_rank=2), r"lncde_rank=2 needs lncde_structure='dplr'"),
        (dict(layer="lncde", d_state=6), r"lncde_block_size=4 \(the default\) must divide d_state=6"),
        (dict(layer="lncde", d_state=24, lncde_structure="walsh_hadamard"), r"d_state=24 must be a power of two"),
    ],
)
def test_options_of_the_other_layer_family_are_refused_by_name(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        BackboneParams(**kwargs).backbone_kwargs()


def test_defaults_given_as_numpy_scalars_are_defaults():
    import numpy as np

    kwargs = BackboneParams(
        layer="lncde", bidirectional=np.False_, dt_max=np.float64(0.1), heads=np.int64(1)
    ).backbone_kwargs()
    assert kwargs["layer"] == "lncde" and "heads" not in kwargs
    with pytest.raises(InvalidParameterError, match="bidirectional=True only applies"):
        BackboneParams(layer="lncde", bidirectional=True).backbone_kwargs()


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(layer="mamba"), r"unknown layer 'mamba'"),
        (dict(lncde_max_norm=1.5), r"lncde_max_norm must be"),
        (dict(lncde_structure="sparse"), r"unknown lncde_structure 'sparse'"),
    ],
)
def test_lncde_declarations_validate(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        BackboneParams(**kwargs).validate_params()
