"""The feed-through D u shared by SSM, LinearCDE and DenseSSM: each mode against its dense matrix
(float64), for sequences and single steps, and one error per bad mode, in every layer."""

import pytest
import torch

from ssmts.nn import SSM, DenseSSM, LinearCDE
from ssmts.nn.feedthrough import D_MODES, add_feedthrough, feedthrough_mode, initial_feedthrough


def _dense_d(mode: str, D, M: int, H: int) -> torch.Tensor:
    return {
        "none": torch.zeros(M, H, dtype=torch.float64),
        "identity": torch.eye(M, H, dtype=torch.float64),
        "diagonal": torch.diag(D) if D is not None else None,
        "full": D,
    }[mode]


@pytest.mark.parametrize("mode", D_MODES)
def test_each_mode_is_its_matrix(mode):
    M = 3 if mode == "full" else 4
    generator = torch.Generator().manual_seed(0)
    D = initial_feedthrough(mode, M, 4, generator)
    D = None if D is None else D.detach().double()
    u = torch.randn(5, 4, 7, dtype=torch.float64)
    y = torch.randn(5, M, 7, dtype=torch.float64)
    expected = y + torch.einsum("mh,bhl->bml", _dense_d(mode, D, M, 4), u)
    torch.testing.assert_close(add_feedthrough(y, mode, D, u), expected, rtol=1e-14, atol=1e-14)
    # one step, as SSM.step and LinearCDE.step apply it
    torch.testing.assert_close(add_feedthrough(y[..., 0], mode, D, u[..., 0]), expected[..., 0], rtol=1e-14, atol=1e-14)


def test_initial_d_scales():
    """diagonal ~ N(0, 1); full ~ N(0, 1/H): the variance of the D u term does not grow with H."""
    generator = torch.Generator().manual_seed(0)
    full = initial_feedthrough("full", 200, 400, generator).detach()
    diagonal = initial_feedthrough("diagonal", 400, 400, generator).detach()
    assert abs(full.var().item() * 400 - 1) < 0.02 and abs(diagonal.var().item() - 1) < 0.2
    assert initial_feedthrough("identity", 4, 4) is None and initial_feedthrough("none", 4, 4) is None


@pytest.mark.parametrize(
    "make",
    [
        lambda D, M: SSM(4, 4, d_output=M, D=D),
        lambda D, M: LinearCDE(4, d_state=4, d_output=M, D=D),
        lambda D, M: DenseSSM(4, 4, d_output=M, D=D),
    ],
    ids=["SSM", "LinearCDE", "DenseSSM"],
)
def test_every_layer_checks_d_the_same_way(make):
    with pytest.raises(ValueError, match=r"unknown D 'diag'; choose one of \('none', 'identity', 'diagonal', 'full'\)"):
        make("diag", 4)
    with pytest.raises(ValueError, match="D='identity' needs d_output == d_model, got 3 != 4"):
        make("identity", 3)
    assert make(None, 4).D_mode == "diagonal" and make(None, 3).D_mode == "full"
    u = torch.randn(2, 4, 6)
    layer = make("identity", 4)
    zero_d = make("none", 4)
    zero_d.load_state_dict(layer.state_dict(), strict=False)
    torch.testing.assert_close(layer(u) - zero_d(u), u, rtol=1e-5, atol=1e-5)
    assert feedthrough_mode(None, 4, 4) == "diagonal"
