"""DenseSSM (the dense HiPPO-LegS reference) against scipy's discretization and a plain numpy loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.signal import cont2discrete

from ssmts.nn import DenseSSM, SSMBackbone, discretize_dense, hippo_legs, parameter_groups


def _layer(H=3, N=8, M=None, discretization="zoh", D=None, dt=0.05, seed=0):
    layer = DenseSSM(
        H,
        N,
        d_output=M,
        discretization=discretization,
        D=D,
        dt_min=dt,
        dt_max=dt,
        generator=torch.Generator().manual_seed(seed),
    ).double()
    with torch.no_grad():  # move A off LegS so that a wrong transpose or sign shows
        layer.A.add_(0.1 * torch.randn(N, N, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64))
    return layer


def _numpy_loop(layer: DenseSSM, u: np.ndarray, method: str, alpha: float = 0.5) -> np.ndarray:
    """x_k = Ad x_{k-1} + Bd u_k, y_k = C x_k + D u_k with scipy's (Ad, Bd)."""
    A, B, C = (p.detach().numpy() for p in (layer.A, layer.B, layer.C))
    Ad, Bd, *_ = cont2discrete(
        (A, B, C, np.zeros((C.shape[0], B.shape[1]))), float(layer.Delta.detach()), method=method, alpha=alpha
    )
    b, H, L = u.shape
    x, out = np.zeros((b, A.shape[0])), []
    for k in range(L):
        x = x @ Ad.T + u[:, :, k] @ Bd.T
        y = x @ C.T
        if layer.D_mode == "diagonal":
            y = y + layer.D.detach().numpy() * u[:, :, k]
        elif layer.D_mode == "full":
            y = y + u[:, :, k] @ layer.D.detach().numpy().T
        out.append(y)
    return np.stack(out, -1)


@pytest.mark.parametrize("method,alpha", [("zoh", 0.5), ("bilinear", 0.5), ("gbt", 0.3)])
def test_discretize_dense_matches_scipy(method, alpha):
    A = hippo_legs(6)[0] + 0.2 * np.random.default_rng(0).standard_normal((6, 6))
    B = np.random.default_rng(1).standard_normal((6, 2))
    Abar, Bbar = discretize_dense(
        torch.from_numpy(A), torch.from_numpy(B), torch.tensor(0.07, dtype=torch.float64), method, alpha
    )
    Ad, Bd, *_ = cont2discrete((A, B, np.eye(6), np.zeros((6, 2))), 0.07, method=method, alpha=alpha)
    np.testing.assert_allclose(Abar.numpy(), Ad, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(Bbar.numpy(), Bd, rtol=1e-12, atol=1e-13)


def test_discretize_dense_defaults_and_the_bilinear_alpha():
    """The defaults are ZOH and, for "gbt", alpha = 1/2 (scipy's bilinear); "bilinear" is alpha = 1/2
    whatever alpha says; an alpha outside [0, 1] is refused for the dense system as for the diagonal one."""
    A = torch.from_numpy(hippo_legs(4)[0])
    B = torch.from_numpy(np.random.default_rng(2).standard_normal((4, 1)))
    dt = torch.tensor(0.1, dtype=torch.float64)
    Ad, Bd, *_ = cont2discrete((A.numpy(), B.numpy(), np.eye(4), np.zeros((4, 1))), 0.1, method="zoh")
    Abar, Bbar = discretize_dense(A, B, dt)
    np.testing.assert_allclose(Abar.numpy(), Ad, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(Bbar.numpy(), Bd, rtol=1e-12, atol=1e-13)
    Ad, Bd, *_ = cont2discrete((A.numpy(), B.numpy(), np.eye(4), np.zeros((4, 1))), 0.1, method="bilinear")
    for Abar, Bbar in (discretize_dense(A, B, dt, "gbt"), discretize_dense(A, B, dt, "bilinear", alpha=0.9)):
        np.testing.assert_allclose(Abar.numpy(), Ad, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(Bbar.numpy(), Bd, rtol=1e-12, atol=1e-13)
    with pytest.raises(ValueError, match="gbt alpha must lie in"):
        discretize_dense(A, B, dt, "gbt", alpha=1.5)


@pytest.mark.parametrize("method", ["zoh", "bilinear"])
@pytest.mark.parametrize("H,M,D", [(3, None, None), (1, None, "none"), (2, 4, "full")])
def test_forward_step_and_state_hand_over_match_the_loop(method, H, M, D):
    layer = _layer(H=H, M=M, discretization=method, D=D)
    u = torch.randn(2, H, 37, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    expected = _numpy_loop(layer, u.numpy(), method)
    np.testing.assert_allclose(layer(u).detach().numpy(), expected, rtol=1e-9, atol=1e-11)
    state, steps = layer.initial_state(2), []
    for k in range(u.shape[-1]):
        y_t, state = layer.step(u[..., k], state)
        steps.append(y_t)
    np.testing.assert_allclose(torch.stack(steps, -1).detach().numpy(), expected, rtol=1e-9, atol=1e-11)
    y1, x1 = layer(u[..., :10], return_state=True)
    y2, x2 = layer(u[..., 10:], state=x1, return_state=True)
    np.testing.assert_allclose(torch.cat([y1, y2], -1).detach().numpy(), expected, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(x2.detach().numpy(), state.detach().numpy(), rtol=1e-9, atol=1e-11)


def test_kernel_is_the_impulse_response():
    layer = _layer(H=2, D="none")
    impulse = torch.zeros(2, 2, 16, dtype=torch.float64)
    impulse[0, 0, 0] = impulse[1, 1, 0] = 1.0
    K = layer.kernel(16).detach()
    np.testing.assert_allclose(layer(impulse)[0].detach().numpy(), K[:, 0].numpy(), atol=1e-13)
    np.testing.assert_allclose(layer(impulse)[1].detach().numpy(), K[:, 1].numpy(), atol=1e-13)


def test_gradients_reach_every_parameter_and_pass_gradcheck():
    layer = _layer(H=2, N=4)
    u = torch.randn(1, 2, 9, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: layer(x), (u,))
    layer(u).square().sum().backward()
    for name, p in layer.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


def test_init_is_legs_fixed_A_and_in_the_ssm_group():
    layer = DenseSSM(4, 6, learn_A=False)
    np.testing.assert_allclose(layer.A.detach().numpy(), hippo_legs(6)[0], rtol=1e-6)
    assert not layer.A.requires_grad
    backbone = SSMBackbone(1, 4, 2, 3, layer="dense", d_state=6)
    groups = {g["name"]: g for g in parameter_groups(backbone, 1e-3, 1e-4)}
    ssm_ids = {id(p) for p in groups["ssm"]["params"]}
    for block in backbone.blocks:
        assert {id(block.ssm.A), id(block.ssm.B), id(block.ssm.log_dt)} <= ssm_ids
    assert backbone(torch.randn(5, 1, 12)).shape == (5, 3)


def test_bad_arguments_are_refused_with_the_name():
    with pytest.raises(ValueError, match="unknown init 'lin' for a dense SSM"):
        DenseSSM(2, 4, init="lin")
    with pytest.raises(ValueError, match="dt_min"):
        DenseSSM(2, 4, dt_min=0.2, dt_max=0.1)
    with pytest.raises(ValueError, match="D='diagonal' needs d_output == d_model"):
        DenseSSM(2, 4, d_output=3, D="diagonal")
    layer = DenseSSM(2, 4)
    with pytest.raises(ValueError, match=r"expected u of shape \(batch, 2, L\)"):
        layer(torch.randn(1, 3, 5))
    with pytest.raises(ValueError, match="state must be"):
        layer(torch.randn(1, 2, 5), state=torch.zeros(1, 5))
