"""DenseSSM (the dense HiPPO-LegS reference) against scipy's discretization and a plain numpy loop."""

from __future__ import annotations

import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.signal import cont2discrete
from scipy.stats import kstest

import ssmts
from ssmts.nn import SSM, DenseSSM, SSMBackbone, discretize_dense, hippo_legs, parameter_groups
from ssmts.nn.analysis import hippo_reference_transfer_function
from ssmts.nn.dense import diagonal_system
from ssmts.nn.init import diagonalize_legs_normal


def _layer(H=3, N=8, M=None, discretization="zoh", alpha=0.5, D=None, dt=0.05, seed=0):
    layer = DenseSSM(
        H,
        N,
        d_output=M,
        discretization=discretization,
        alpha=alpha,
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


@pytest.mark.parametrize("L", [1, 2, 5, 8])
def test_sequences_no_longer_than_the_state_match_the_loop(L):
    """Oracle: the scipy-discretized numpy loop, for L <= N (fewer steps than states, one to no doubling):
    forward, its final state and the kernel."""
    layer = _layer(H=2, N=8, D="none")
    u = torch.randn(3, 2, L, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    expected = _numpy_loop(layer, u.numpy(), "zoh")
    y, x = layer(u, return_state=True)
    np.testing.assert_allclose(y.detach().numpy(), expected, rtol=1e-9, atol=1e-12)
    state = layer.initial_state(3)
    for k in range(L):
        _, state = layer.step(u[..., k], state)
    np.testing.assert_allclose(x.detach().numpy(), state.detach().numpy(), rtol=1e-9, atol=1e-12)
    impulse = torch.zeros(1, 2, L, dtype=torch.float64)
    impulse[0, 1, 0] = 1.0
    K = layer.kernel(L).detach()
    assert K.shape == (2, 2, L)
    np.testing.assert_allclose(K[:, 1].numpy(), _numpy_loop(layer, impulse.numpy(), "zoh")[0], atol=1e-13)


@pytest.mark.parametrize("method,alpha", [("zoh", 0.5), ("bilinear", 0.5), ("gbt", 0.3)])
@pytest.mark.parametrize("H,M,D", [(3, None, None), (1, None, "none"), (2, 4, "full")])
def test_forward_step_and_state_hand_over_match_the_loop(method, alpha, H, M, D):
    """Oracle: x_k = Ad x_{k-1} + Bd u_k with scipy's (Ad, Bd) for the layer's method and alpha."""
    layer = _layer(H=H, M=M, discretization=method, alpha=alpha, D=D)
    u = torch.randn(2, H, 37, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    expected = _numpy_loop(layer, u.numpy(), method, alpha)
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


# ---------------------------------------------------------------- initialization
def test_defaults_are_64_states_and_a_log_uniform_delta_in_1e3_1e1():
    """Oracle: the documented defaults (d_state=64, as SSM; Delta log-uniform on [dt_min, dt_max] =
    [1e-3, 1e-1]): a Kolmogorov-Smirnov test of log Delta over 200 seeds against the uniform law; a
    one-point range gives exactly that Delta (Delta = exp(log_dt), no scale outside scaled_delta)."""
    layer = DenseSSM(2)
    assert layer.d_state == 64 and tuple(layer.A.shape) == (64, 64) and tuple(layer.C.shape) == (2, 64)
    layers = (DenseSSM(1, 2, generator=torch.Generator().manual_seed(s)) for s in range(200))
    deltas = np.array([float(layer.Delta.detach()) for layer in layers])
    assert deltas.min() >= 1e-3 * (1 - 1e-6) and deltas.max() <= 1e-1 * (1 + 1e-6)
    position = (np.log(deltas) - np.log(1e-3)) / (np.log(1e-1) - np.log(1e-3))
    assert kstest(position, "uniform").pvalue > 1e-3
    fixed = DenseSSM(2, 4, dt_min=0.05, dt_max=0.05)
    assert float(fixed.Delta.detach()) == pytest.approx(0.05, rel=1e-6)


def test_gbt_without_alpha_is_the_bilinear_transform():
    """Oracle: scipy's bilinear (Tustin) discretization; gbt's default alpha is 1/2, for the layer and for
    SSM.from_matrices."""
    layer = DenseSSM(3, 6, discretization="gbt", dt_min=0.07, dt_max=0.07).double()
    A, B = layer.A.detach().numpy(), layer.B.detach().numpy()
    Ad, Bd, *_ = cont2discrete((A, B, np.eye(6), np.zeros((6, 3))), float(layer.Delta.detach()), method="bilinear")
    Abar, Bbar = layer.discrete()
    np.testing.assert_allclose(Abar.detach().numpy(), Ad, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(Bbar.detach().numpy(), Bd, rtol=1e-12, atol=1e-13)
    A, B, C, D = _stable_system(4, 2, 1)
    u = np.random.default_rng(1).standard_normal((2, 30))
    y = SSM.from_matrices(A, B, C, D, dt=0.1, discretization="gbt")(torch.from_numpy(u)[None])[0]
    np.testing.assert_allclose(y.detach().numpy(), _system_loop(A, B, C, D, 0.1, u, "bilinear"), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("H", [1, 3])
def test_b_and_c_are_those_the_diagonal_legs_init_projects(H):
    """Oracle: the diagonal legs init from the same generator (SSM, conj_sym=False) stores B = V^H B0 and
    C = C0 V with V the eigenvectors of LegS' normal part: B0, C0 must be this layer's B and C; for H = 1
    B0 is HiPPO's B."""
    dense = DenseSSM(H, 8, d_output=2, generator=torch.Generator().manual_seed(7))
    diag = SSM(H, 8, d_output=2, init="legs", conj_sym=False, generator=torch.Generator().manual_seed(7))
    _, V = diagonalize_legs_normal(8)
    B0, C0 = dense.B.detach().double().numpy(), dense.C.detach().double().numpy()
    np.testing.assert_allclose(torch.view_as_complex(diag.B)[0].detach().numpy(), V.conj().T @ B0, atol=1e-6)
    np.testing.assert_allclose(torch.view_as_complex(diag.C)[0].detach().numpy(), C0 @ V, atol=1e-6)
    if H == 1:
        np.testing.assert_allclose(B0[:, 0], hippo_legs(8)[1], rtol=1e-6)


def test_b_and_c_variances_are_1_over_h_and_1_over_n():
    """Oracle: B ~ N(0, 1/H), C ~ N(0, 1/N) (1024 draws each: the sample variance within 25%)."""
    layer = DenseSSM(16, 64, generator=torch.Generator().manual_seed(0))
    assert float(layer.B.detach().var()) == pytest.approx(1 / 16, rel=0.25)
    assert float(layer.C.detach().var()) == pytest.approx(1 / 64, rel=0.25)


@pytest.mark.parametrize("M,D", [(3, "diagonal"), (4, "full")])
def test_equal_generators_give_equal_layers_whatever_the_global_seed(M, D):
    """Oracle: every random draw (B, C, Delta, D) comes from `generator`, so two layers built from equal
    seeds are equal even when the global torch seed differs between them."""
    layers = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        layers.append(DenseSSM(3, 6, d_output=M, D=D, generator=torch.Generator().manual_seed(5)))
    first, second = (layer.state_dict() for layer in layers)
    assert first.keys() == second.keys() and "D" in first
    for name in first:
        assert torch.equal(first[name], second[name]), name


# ---------------------------------------------------------------- refusals and state
@pytest.mark.parametrize("name", ["d_model", "d_state", "d_output"])
def test_non_positive_sizes_are_refused_with_their_name(name):
    sizes = dict(d_model=2, d_state=4, d_output=2) | {name: 0}
    with pytest.raises(ValueError, match=f"^{name} must be a positive integer, got 0$"):
        DenseSSM(sizes["d_model"], sizes["d_state"], d_output=sizes["d_output"])


def test_bad_alpha_delta_dtype_and_step_input_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="gbt alpha must lie in"):
        DenseSSM(2, 4, discretization="gbt", alpha=1.5)
    with pytest.raises(ValueError, match="need 0 < dt_min <= dt_max, got dt_min=0.0"):
        DenseSSM(2, 4, dt_min=0.0)
    layer = DenseSSM(2, 4)
    with pytest.raises(ValueError, match="u has dtype torch.float64 but the layer has torch.float32"):
        layer(torch.zeros(1, 2, 5, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"step expects u_t of shape \(batch, 2\), got \(3, 2, 1\)"):
        layer.step(torch.zeros(3, 2, 1), layer.initial_state(3))


def test_the_zero_state_is_made_where_asked_else_where_the_layer_is():
    """Oracle: the device asked for, else the layer's (the meta device stands for a second device)."""
    layer = DenseSSM(2, 4).double()
    state = layer.initial_state(3)
    assert state.device.type == "cpu" and torch.equal(state, torch.zeros(3, 4, dtype=torch.float64))
    assert layer.initial_state(3, device="meta").device.type == "meta"
    meta = DenseSSM(2, 4).to("meta")
    assert meta.initial_state(3).device.type == "meta"
    assert meta.initial_state(3, device="cpu").device.type == "cpu"


# ---------------------------------------------------------------- from_matrices
def _stable_system(N, H, M, seed=0):
    """A real stable (A, B, C, D): eigenvalues -0.3 .. -1.5 and a pair -0.7 +- 2i, in a random basis."""
    rng = np.random.default_rng(seed)
    blocks = np.diag(-np.linspace(0.3, 1.5, N))
    blocks[:2, :2] = [[-0.7, 2.0], [-2.0, -0.7]]
    Q = rng.standard_normal((N, N)) + N * np.eye(N)
    A = Q @ blocks @ np.linalg.inv(Q)
    return A, rng.standard_normal((N, H)), rng.standard_normal((M, N)), rng.standard_normal((M, H))


def _system_loop(A, B, C, D, dt, u, method="zoh", alpha=0.5):
    """y_k = C x_k + D u_k, x_k = Ad x_{k-1} + Bd u_k with scipy's (Ad, Bd); u: (H, L)."""
    Ad, Bd, *_ = cont2discrete((A, B, C, np.zeros((C.shape[0], B.shape[1]))), dt, method=method, alpha=alpha)
    x, out = np.zeros(A.shape[0]), []
    for k in range(u.shape[-1]):
        x = Ad @ x + Bd @ u[:, k]
        out.append(C @ x + (0 if D is None else D @ u[:, k]))
    return np.stack(out, -1)


def test_from_matrices_takes_float32_matrices_exactly():
    """Oracle: the float64 scipy loop of the same (float32-representable) system: float32 input is
    diagonalized in float64 like any other, not at float32 precision."""
    A, B, C, D = (m.astype(np.float32) for m in _stable_system(5, 2, 3))
    u = np.random.default_rng(2).standard_normal((2, 40))
    layer = SSM.from_matrices(A, B, C, D, dt=0.1)
    y = layer(torch.from_numpy(u)[None])[0].detach().numpy()
    expected = _system_loop(*(m.astype(np.float64) for m in (A, B, C, D)), 0.1, u)
    np.testing.assert_allclose(y, expected, rtol=1e-9, atol=1e-11)


def test_from_matrices_uses_unit_norm_eigenvectors():
    """Oracle: a symmetric A has orthonormal eigenvectors, so with unit-norm V the stored modes keep the
    norms of B and C (||V^-1 B|| = ||B||, ||C V|| = ||C||): the input and output maps stay balanced, as in
    the legs init, whatever N (B and C train in different parameter groups)."""
    rng = np.random.default_rng(6)
    Q = rng.standard_normal((6, 6))
    A = -(Q @ Q.T) / 6 - 0.3 * np.eye(6)
    B, C = rng.standard_normal((6, 2)), rng.standard_normal((3, 6))
    layer = SSM.from_matrices(A, B, C, dt=0.1)
    B_modes = torch.view_as_complex(layer.B).detach().numpy()
    C_modes = torch.view_as_complex(layer.C).detach().numpy()
    assert np.linalg.norm(B_modes) == pytest.approx(np.linalg.norm(B), rel=1e-10)
    assert np.linalg.norm(C_modes) == pytest.approx(np.linalg.norm(C), rel=1e-10)


@pytest.mark.parametrize("which", ["B", "C"])
def test_from_matrices_refuses_non_finite_b_or_c_alone(which):
    system = dict(zip("ABC", _stable_system(3, 2, 1)[:3]))
    system[which] = system[which].copy()
    system[which][0, 0] = np.inf
    with pytest.raises(ValueError, match="^A, B and C must be finite$"):
        SSM.from_matrices(system["A"], system["B"], system["C"], dt=0.1)


def test_from_matrices_falls_back_only_above_max_condition():
    """Oracle: a diagonal A has eigenvector matrix I, cond exactly 1: max_condition=1 is not exceeded,
    so no PTD warning and the exact system (scipy loop); below 1 the fallback is taken."""
    A, B, C = np.diag([-0.5, -1.0, -2.0]), np.ones((3, 1)), np.array([[1.0, -2.0, 0.5]])
    u = np.random.default_rng(3).standard_normal((1, 25))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layer = SSM.from_matrices(A, B, C, dt=0.2, max_condition=1.0)
    y = layer(torch.from_numpy(u)[None])[0].detach().numpy()
    np.testing.assert_allclose(y, _system_loop(A, B, C, None, 0.2, u), rtol=1e-10, atol=1e-12)
    with pytest.warns(UserWarning, match="ill-conditioned"):
        SSM.from_matrices(A, B, C, dt=0.2, max_condition=0.5)


@pytest.mark.parametrize(
    "build",
    [SSM.from_matrices, lambda *system, dt: diagonal_system(*system)],
    ids=["SSM.from_matrices", "diagonal_system"],
)
def test_the_ill_conditioning_warning_points_outside_the_library(build):
    """The PTD-fallback warning names the caller's line, not a line of ssmts (through either entry point)."""
    A, B = hippo_legs(32)
    with pytest.warns(UserWarning, match="ill-conditioned") as record:
        build(A, B[:, None], np.ones((1, 32)), dt=0.01)
    assert Path(ssmts.__file__).parent not in Path(record[0].filename).resolve().parents


def test_from_matrices_keeps_a_mode_slower_than_the_stability_floor():
    """Oracle: the scipy loop of a system with a mode at -1e-5, below SSM's floor 1e-4 on -Re(Lambda):
    the floor drops to half the slowest decay, so the layer is exact; fine-tuning can take a decay down
    to that floor and no further (1e-4 for faster systems, 5e-6 here)."""
    Q = np.random.default_rng(4).standard_normal((4, 4)) + 4 * np.eye(4)
    A = Q @ np.diag([-1e-5, -0.5, -1.0, -2.0]) @ np.linalg.inv(Q)
    B, C = np.ones((4, 1)), np.array([[1.0, 0.5, -1.0, 2.0]])
    u = np.random.default_rng(5).standard_normal((1, 60))
    slow = SSM.from_matrices(A, B, C, dt=0.5)
    y = slow(torch.from_numpy(u)[None])[0].detach().numpy()
    np.testing.assert_allclose(y, _system_loop(A, B, C, None, 0.5, u), rtol=1e-10, atol=1e-12)
    fast = SSM.from_matrices(*_stable_system(4, 1, 1)[:3], dt=0.1)
    for layer, floor in ((slow, 5e-6), (fast, 1e-4)):
        with torch.no_grad():
            layer.Lambda_re_raw.fill_(-60.0)  # decay exp(-60): a decay driven to 0
        np.testing.assert_allclose(layer.Lambda.real.detach().numpy(), -floor, rtol=1e-9)


def test_a_from_matrices_layer_is_not_taken_for_a_hippo_legs_layer():
    """Its B and C are not HiPPO's projected on LegS' eigenvectors: the HiPPO reference refuses it."""
    layer = SSM.from_matrices(*_stable_system(4, 1, 1)[:3], dt=0.1)
    with pytest.raises(ValueError, match="needs a layer with init='legs' or init='ptd'"):
        hippo_reference_transfer_function(layer, np.linspace(0.1, 1.0, 5))


@pytest.mark.parametrize("kind", ["fractions", "longdouble"])
def test_from_matrices_rounds_exact_or_extended_precision_matrices_to_float64(kind):
    """A system with exact rational entries (fractions.Fraction, as a symbolic derivation gives them) or
    in numpy's extended precision is taken like any real array-like: A, B, C and D rounded to float64.
    Oracle: the float64 scipy loop of the rounded system (exact diagonalization in float64: rtol 1e-10,
    as for float64 input)."""
    A_num, A_den = np.array([[-1, 1], [-2, -3]]), np.array([[2, 3], [3, 4]])
    B_num, B_den = np.array([[1, -2], [5, 1]]), np.array([[3, 7], [6, 1]])
    C_num, C_den = np.array([[2, -1], [1, 1], [-4, 3]]), np.array([[3, 5], [7, 2], [9, 11]])
    D_num, D_den = np.array([[1, 0], [-1, 2], [1, 1]]), np.array([[7, 1], [3, 9], [5, 13]])
    parts = [(A_num, A_den), (B_num, B_den), (C_num, C_den), (D_num, D_den)]
    if kind == "fractions":
        given = [[[Fraction(int(n), int(d)) for n, d in zip(*rows)] for rows in zip(num, den)] for num, den in parts]
        rounded = [np.array([[float(f) for f in row] for row in m]) for m in given]
    else:
        given = [num.astype(np.longdouble) / den.astype(np.longdouble) for num, den in parts]
        rounded = [m.astype(np.float64) for m in given]
    u = np.random.default_rng(7).standard_normal((2, 30))
    layer = SSM.from_matrices(*given, dt=0.2)
    y = layer(torch.from_numpy(u)[None])[0].detach().numpy()
    np.testing.assert_allclose(y, _system_loop(*rounded, 0.2, u), rtol=1e-10, atol=1e-12)
