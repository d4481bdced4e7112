"""The LinearCDE (SLiCE) layer against independent oracles: a dense float64 numpy loop that
builds every transition M_i as a matrix from the parameters, scipy's Hadamard matrix, dense
products of those matrices, and torch.autograd.gradcheck."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.linalg import hadamard as scipy_hadamard

import ssmts.nn.lncde as lncde_module
from ssmts.nn import LNCDE_STRUCTURES, LinearCDE

CONFIGS = {
    "diagonal": dict(structure="diagonal"),
    "block": dict(structure="block_diagonal", block_size=2),
    "block_interleaved": dict(structure="block_diagonal", block_sizes=[1, 3, 1, 2, 1]),
    "block_mixed": dict(structure="block_diagonal", block_sizes=[1] * 5 + [3]),
    "dplr": dict(structure="dplr", rank=2),
    "walsh_hadamard": dict(structure="walsh_hadamard"),
    "dense": dict(structure="dense"),
}


# ---------------------------------------------------------------- oracle
def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().numpy()


def _make(config: str, *, H=3, d=8, M=2, d_path=4, seed=0, **kw) -> LinearCDE:
    torch.manual_seed(seed)
    return LinearCDE(H, d, d_output=M, d_path=d_path, **{**CONFIGS[config], **kw}).double()


def _block_layout(layer: LinearCDE) -> list[tuple[int, int, np.ndarray]]:
    """(start, size, A^j of the block (P, s, s)) for every block in the documented order:
    consecutive states, one tensor per distinct size in order of first appearance."""
    sizes = list(layer.block_sizes)
    distinct = list(dict.fromkeys(sizes))
    seen = {s: 0 for s in distinct}
    blocks, start = [], 0
    for s in sizes:
        g, k = distinct.index(s), seen[s]
        seen[s] += 1
        A = _np(layer.A_blocks[g])
        blocks.append((start, s, A[:, k, None, None] if s == 1 else A[:, k]))
        start += s
    return blocks


def _oracle_A(layer: LinearCDE) -> np.ndarray:
    """The A^j as dense (P, d, d) matrices, built from the parameters alone."""
    d, P = layer.d_state, layer.d_path + 1
    if layer.structure in ("diagonal", "block_diagonal"):
        A = np.zeros((P, d, d))
        for start, s, block in _block_layout(layer):
            A[:, start : start + s, start : start + s] = block
        return A
    if layer.structure == "dense":
        return _np(layer.A)
    diag = _np(layer.A_diag)
    if layer.structure == "dplr":
        U, V = _np(layer.A_U), _np(layer.A_V)
        return np.stack([np.diag(diag[j]) + U[j] @ V[j].T for j in range(P)])
    Hn = scipy_hadamard(d) / math.sqrt(d)
    return np.stack([Hn @ np.diag(diag[j]) for j in range(P)])


def _holder(M: np.ndarray) -> float:
    return math.sqrt(np.linalg.norm(M, 1) * np.linalg.norm(M, np.inf))


def _normalize(layer: LinearCDE, M: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, int, int]:
    """The documented rescaling M / max(1, nu / max_norm), block by block for block structures;
    also how many of its units (blocks, or the whole matrix) it rescaled, out of how many."""
    rho, changed = layer.max_norm, 0
    M = M.copy()
    if layer.structure in ("diagonal", "block_diagonal"):
        blocks = _block_layout(layer)
        for start, s, _ in blocks:
            sl = slice(start, start + s)
            nu = _holder(M[sl, sl])
            if nu > rho:
                M[sl, sl] *= rho / nu
                changed += 1
        return M, changed, len(blocks)
    if layer.structure == "dense":
        nu = _holder(M)
    else:
        g = x @ _np(layer.A_diag)
        if layer.structure == "dplr":
            U, V = _np(layer.A_U), _np(layer.A_V)
            nu = np.abs(1 + g).max() + sum(
                abs(x[j]) * np.linalg.norm(U[j]) * np.linalg.norm(V[j]) for j in range(len(x))
            )
        else:
            nu = 1 + np.abs(g).max()
    return (M * rho / nu, 1, 1) if nu > rho else (M, 0, 1)


def _oracle(layer: LinearCDE, u: np.ndarray, h0: np.ndarray | None = None):
    """Dense loop for one sample u (H, L): y (M, L), final state, the transitions M_i and
    (rescaled, total) counts of the normalization's units."""
    d = layer.d_state
    A = _oracle_A(layer)
    W, c = _np(layer.path.weight), _np(layer.path.bias)
    B, C = _np(layer.B), _np(layer.C)
    h = np.zeros(d) if h0 is None else h0.copy()
    ys, Ms, rescaled, units = [], [], 0, 0
    for i in range(u.shape[1]):
        x = layer.dt * np.concatenate([[1.0], np.tanh(W @ u[:, i] + c)])
        M, changed, total = _normalize(layer, np.eye(d) + np.einsum("j,jkl->kl", x, A), x)
        rescaled, units = rescaled + changed, units + total
        Ms.append(M)
        h = M @ h + B @ x
        y = C @ h
        if layer.D_mode == "diagonal":
            y = y + _np(layer.D) * u[:, i]
        elif layer.D_mode == "full":
            y = y + _np(layer.D) @ u[:, i]
        elif layer.D_mode == "identity":
            y = y + u[:, i]
        ys.append(y)
    return np.stack(ys, axis=1), h, Ms, (rescaled, units)


def _run_steps(layer: LinearCDE, u: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    ys = []
    for k in range(u.shape[-1]):
        y, state = layer.step(u[..., k], state)
        ys.append(y)
    return torch.stack(ys, dim=-1), state


# ---------------------------------------------------------------- modes against the oracle
# Two regimes of the normalization: "strong" rescales most transitions, "weak" few.
REGIMES = {
    "strong": dict(init_std=3.0, decay_min=0.05, decay_max=0.5),
    "weak": dict(init_std=1.0, decay_min=0.1, decay_max=0.5),
}


def _inputs(seed: int = 1, L: int = 23, with_state: bool = False):
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(2, 3, L, generator=g, dtype=torch.float64)
    return u, (torch.randn(2, 8, generator=g, dtype=torch.float64) if with_state else None)


@pytest.mark.parametrize("regime", list(REGIMES))
@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_modes_match_the_dense_oracle(config, with_state, regime):
    """recurrence == scan == chunked (uneven chunks) == the dense loop, to float64 round-off;
    every oracle transition has spectral norm <= max_norm."""
    layer = _make(config, chunk_length=5, **REGIMES[regime])
    u, h0 = _inputs(with_state=with_state)
    outputs = {mode: layer(u, h0, mode=mode, return_state=True) for mode in ("recurrence", "scan", "chunked")}
    for n in range(u.shape[0]):
        y_ref, h_ref, Ms, _ = _oracle(layer, _np(u[n]), None if h0 is None else _np(h0[n]))
        assert max(np.linalg.norm(M, 2) for M in Ms) <= layer.max_norm + 1e-12
        for mode, (y, h) in outputs.items():
            np.testing.assert_allclose(_np(y[n]), y_ref, rtol=0, atol=1e-12, err_msg=mode)
            np.testing.assert_allclose(_np(h[n]), h_ref, rtol=0, atol=1e-12, err_msg=mode)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_both_branches_of_the_normalization_are_exercised(config):
    """Across the two regimes some transitions (or blocks) are rescaled and some are left alone,
    except Walsh-Hadamard, whose bound 1 + max|g| exceeds 1 whenever g != 0."""
    rescaled = untouched = 0
    for kwargs in REGIMES.values():
        layer = _make(config, **kwargs)
        u, _ = _inputs()
        for n in range(u.shape[0]):
            count, total = _oracle(layer, _np(u[n]))[3]
            rescaled, untouched = rescaled + count, untouched + total - count
    assert rescaled > 0
    assert untouched > 0 or config == "walsh_hadamard"


def test_max_norm_none_is_the_plain_linear_cde():
    """Without the normalization M_i = I + sum_j A^j x^j exactly (the oracle without rescaling)."""
    layer = _make("dense", init_std=3.0, max_norm=None)
    u, _ = _inputs()
    A, W, c = _oracle_A(layer), _np(layer.path.weight), _np(layer.path.bias)
    h = np.zeros(8)
    for i in range(u.shape[-1]):
        x = layer.dt * np.concatenate([[1.0], np.tanh(W @ _np(u[0, :, i]) + c)])
        h = (np.eye(8) + np.einsum("j,jkl->kl", x, A)) @ h + _np(layer.B) @ x
    for mode in ("recurrence", "scan", "chunked"):
        np.testing.assert_allclose(_np(layer(u, mode=mode, return_state=True)[1][0]), h, rtol=0, atol=1e-12)


@pytest.mark.parametrize("D", ["none", "identity", "full"])
def test_feedthrough_modes_match_the_oracle(D):
    layer = _make("block", M=3 if D == "identity" else 2, D=D)
    u = torch.randn(1, 3, 9, dtype=torch.float64)
    np.testing.assert_allclose(_np(layer(u)[0]), _oracle(layer, _np(u[0]))[0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_step_equals_forward_at_every_position(config):
    layer = _make(config, init_std=3.0)
    u = torch.randn(2, 3, 17, dtype=torch.float64)
    h0 = torch.randn(2, 8, dtype=torch.float64)
    y, h = layer(u, h0, return_state=True)
    y_steps, h_steps = _run_steps(layer, u, h0)
    torch.testing.assert_close(y_steps, y, rtol=0, atol=1e-12)
    torch.testing.assert_close(h_steps, h, rtol=0, atol=1e-12)
    # Streaming in two pieces continues exactly where the first stopped.
    y1, h1 = layer(u[..., :7], h0, return_state=True)
    y2 = layer(u[..., 7:], h1, mode="chunked")
    torch.testing.assert_close(torch.cat([y1, y2], -1), y, rtol=0, atol=1e-12)
    assert torch.equal(layer.initial_state(2), torch.zeros(2, 8, dtype=torch.float64))


# ---------------------------------------------------------------- block-diagonal closure
def test_block_diagonal_scan_stays_block_diagonal():
    """The scan composes blocks only (no d x d tensor), the composed product equals the dense
    product of the oracle's transitions, and its off-block entries are exactly zero."""
    sizes = [1, 1, 3, 1, 2, 1, 1]
    torch.manual_seed(0)
    layer = LinearCDE(3, 10, d_path=4, structure="block_diagonal", block_sizes=sizes, init_std=3.0).double()
    u = torch.randn(2, 3, 13, dtype=torch.float64)
    rep = layer._transitions(layer.path_increments(u))
    assert [tuple(t.shape[2:]) for t in rep] == [(5,), (1, 3, 3), (1, 2, 2)]
    composed = layer._compose(rep, rep)
    assert [t.shape for t in composed] == [t.shape for t in rep]
    product = layer.transition_product(u)
    mask = np.zeros((10, 10), dtype=bool)
    start = 0
    for s in sizes:
        mask[start : start + s, start : start + s] = True
        start += s
    for n in range(2):
        Ms = _oracle(layer, _np(u[n]))[2]
        dense = np.linalg.multi_dot(Ms[::-1])
        np.testing.assert_allclose(_np(product[n]), dense, rtol=0, atol=1e-13)
        assert np.all(_np(product[n])[~mask] == 0.0) and np.all(dense[~mask] == 0.0)
        assert np.abs(dense[mask]).max() > 1e-3


@pytest.mark.parametrize("config", ["dplr", "walsh_hadamard", "dense"])
def test_transition_product_of_unclosed_structures(config):
    layer = _make(config, init_std=3.0)
    u = torch.randn(1, 3, 6, dtype=torch.float64)
    Ms = _oracle(layer, _np(u[0]))[2]
    np.testing.assert_allclose(_np(layer.transition_product(u)[0]), np.linalg.multi_dot(Ms[::-1]), rtol=0, atol=1e-13)


# ---------------------------------------------------------------- Walsh-Hadamard
def test_walsh_hadamard_matrices_equal_the_explicit_product():
    layer = _make("walsh_hadamard", d=16)
    Hn = scipy_hadamard(16) / 4.0
    np.testing.assert_allclose(_np(layer.hadamard), Hn, rtol=0, atol=0)
    A = _np(layer._dense_A())
    for j, dj in enumerate(_np(layer.A_diag)):
        np.testing.assert_allclose(A[j], Hn @ np.diag(dj), rtol=0, atol=1e-15)
    np.testing.assert_allclose(Hn @ Hn.T, np.eye(16), atol=1e-15)
    with pytest.raises(ValueError, match=r"d_state=12 must be a power of two"):
        LinearCDE(3, 12, structure="walsh_hadamard")


# ---------------------------------------------------------------- gradients
def _grad_params(layer: LinearCDE) -> dict[str, torch.Tensor]:
    return {name: p for name, p in layer.named_parameters() if name.startswith("A") or name in ("B", "path.weight")}


@pytest.mark.parametrize("config", ["diagonal", "block_mixed", "dplr", "walsh_hadamard", "dense"])
def test_gradcheck_scan(config):
    """gradcheck of the scan w.r.t. the input and the transition parameters (float64, tiny)."""
    torch.manual_seed(0)
    kw = dict(CONFIGS[config])
    if config == "block_mixed":
        kw["block_sizes"] = [1, 1, 2]
    layer = LinearCDE(2, 4, d_output=2, d_path=2, init_std=3.0, max_norm=0.97, **kw).double()
    u = torch.randn(1, 2, 5, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(1, 4, dtype=torch.float64, requires_grad=True)
    names = list(_grad_params(layer))

    def fn(u, h0, *params):
        return torch.func.functional_call(layer, dict(zip(names, params)), (u, h0), {"mode": "scan"})

    params = [p.detach().clone().requires_grad_(True) for p in _grad_params(layer).values()]
    assert torch.autograd.gradcheck(fn, (u, h0, *params), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_scan_chunked_and_recurrence_give_the_same_gradients(config):
    layer = _make(config, init_std=3.0, chunk_length=4)
    u = torch.randn(2, 3, 11, dtype=torch.float64)
    grads = {}
    for mode in ("recurrence", "scan", "chunked"):
        layer.zero_grad()
        uu = u.clone().requires_grad_(True)
        layer(uu, mode=mode).pow(2).sum().backward()
        grads[mode] = [uu.grad] + [p.grad.clone() for p in layer.parameters()]
    for mode in ("scan", "chunked"):
        for a, b in zip(grads[mode], grads["recurrence"]):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    assert all(g.abs().sum() > 0 for g in grads["scan"])


# ---------------------------------------------------------------- stability
@pytest.mark.parametrize("structure", LNCDE_STRUCTURES)
def test_long_sequence_stays_bounded(structure):
    """L = 16384, random inputs. Default settings: finite, and no growth along the sequence.
    Adversarial settings (dt = 1, A^j 10x larger): without the normalization the state overflows;
    with max_norm = 1 it grows at most linearly, ||h_i|| <= sum_k ||b_k||; with max_norm < 1 it
    stays within ||b||_max / (1 - max_norm) at every step."""
    torch.manual_seed(0)
    L = 16384
    kw = dict(block_sizes=[1] * 6 + [2]) if structure == "block_diagonal" else {}
    u = 3 * torch.randn(2, 2, L)

    def build(**options):
        torch.manual_seed(1)
        return LinearCDE(2, 8, d_path=3, structure=structure, D="none", **kw, **options)

    with torch.no_grad():
        y = build()(u)
        assert torch.isfinite(y).all()
        early, late = y[..., :2048].abs().max(), y[..., -2048:].abs().max()
        assert late <= 2 * early, (early, late)

        adversarial = dict(dt=1.0, init_std=10.0)
        assert not torch.isfinite(build(max_norm=None, **adversarial)(u[..., :2048])).all()

        layer = build(**adversarial)
        y, h = layer(u, return_state=True)
        b_norm = (layer.path_increments(u) @ layer.B.T).norm(dim=-1)  # (batch, L)
        assert torch.isfinite(y).all()
        assert (h.norm(dim=-1) <= b_norm.sum(-1) * (1 + 1e-5)).all()

        rho = 0.9
        layer = build(max_norm=rho, mode="chunked", chunk_length=1024, **adversarial)
        y, h = layer(u, return_state=True)
        b_max = (layer.path_increments(u) @ layer.B.T).norm(dim=-1).max()
        assert y.norm(dim=1).max() <= torch.linalg.matrix_norm(layer.C, 2) * b_max / (1 - rho) * (1 + 1e-5)
        assert h.norm(dim=-1).max() <= b_max / (1 - rho) * (1 + 1e-5)


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(structure="sparse"), r"unknown structure 'sparse'"),
        (dict(structure="block_diagonal", block_sizes=[4, 4, 4]), r"block_sizes must sum to d_state=8, got sum 12"),
        (
            dict(structure="block_diagonal", block_sizes=[4, 0, 4]),
            r"block_sizes must be a non-empty list of positive integers",
        ),
        (dict(structure="block_diagonal", block_size=3), r"block_size=3 must divide d_state=8"),
        (dict(structure="block_diagonal", block_size=0), r"block_size must be a positive integer"),
        (dict(structure="block_diagonal", block_size=2, block_sizes=[4, 4]), r"either block_size or block_sizes"),
        (
            dict(structure="dense", block_size=2),
            r"block_size/block_sizes are only used with structure='block_diagonal'",
        ),
        (dict(structure="dplr", rank=0), r"rank must be a positive integer, got 0"),
        (dict(structure="diagonal", rank=2), r"rank is only used with structure='dplr'"),
        (dict(structure="walsh_hadamard", d_state=6), r"d_state=6 must be a power of two"),
        (dict(d_model=0), r"d_model must be a positive integer, got 0"),
        (dict(d_state=0), r"d_state must be a positive integer"),
        (dict(d_output=0), r"d_output must be a positive integer, got 0"),
        (dict(d_path=0), r"d_path must be a positive integer"),
        (dict(mode="parallel"), r"unknown mode 'parallel'"),
        (dict(chunk_length=0), r"chunk_length must be a positive integer"),
        (dict(dt=0.0), r"dt must be > 0"),
        (dict(max_norm=1.5), r"max_norm must lie in \(0, 1\]"),
        (dict(max_norm=0.0), r"max_norm must lie in \(0, 1\]"),
        (dict(decay_min=0.5, decay_max=0.1), r"need 0 < decay_min <= decay_max < 1"),
        (dict(decay_min=0.0), r"need 0 < decay_min <= decay_max < 1"),
        (dict(decay_max=1.0), r"need 0 < decay_min <= decay_max < 1"),
        (dict(init_std=-1.0), r"init_std must be > 0"),
        (dict(init_std=0.0), r"init_std must be > 0"),
        (dict(D="weird"), r"unknown D 'weird'"),
        (dict(d_output=2, D="diagonal"), r"D='diagonal' needs d_output == d_model"),
    ],
)
def test_constructor_errors_name_the_parameter(kwargs, message):
    """Each invalid option, on either side of its documented range (bounds included where they are
    excluded), is refused with a message that names it."""
    kwargs = {"d_model": 3, "d_state": 8, **kwargs}
    with pytest.raises(ValueError, match=message):
        LinearCDE(**kwargs)


def test_call_errors():
    layer = LinearCDE(3, 8, structure="diagonal")
    with pytest.raises(ValueError, match=r"shape \(batch, 3, length\)"):
        layer(torch.randn(3, 5))
    with pytest.raises(ValueError, match=r"expects 3 input channels, got 4"):
        layer(torch.randn(1, 4, 5))
    with pytest.raises(ValueError, match=r"^LinearCDE input has length 0$"):
        layer(torch.randn(1, 3, 0))
    with pytest.raises(ValueError, match=r"unknown mode 'fft'"):
        layer(torch.randn(1, 3, 5), mode="fft")
    with pytest.raises(ValueError, match=r"state must be real of shape \(1, 8\)"):
        layer(torch.randn(1, 3, 5), torch.zeros(1, 4))
    with pytest.raises(ValueError, match=r"step expects u_t of shape \(batch, 3\)"):
        layer.step(torch.randn(1, 3, 1), layer.initial_state(1))


def test_defaults_float32_and_pure_torch_module():
    layer = LinearCDE(4)
    assert layer.structure == "block_diagonal" and layer.block_sizes == (4,) * 16 and layer.d_path == 4
    y, h = layer(torch.randn(2, 4, 50), return_state=True)
    assert y.shape == (2, 4, 50) and y.dtype == torch.float32 and h.shape == (2, 64)
    tree = ast.parse(Path(lncde_module.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    # Its siblings are what it shares with the SSM layer: the scan, the batch-invariant products, the
    # feed-through and the input check, each torch only; and ssmts' helper that names the user's line in a warning,
    # standard library only. (Under `mutmut run` the mutated copies also import mutmut's trampoline.)
    siblings = {"scan", "batch_invariant", "feedthrough", "checks"}
    helper = Path(lncde_module.__file__).parent.parent / "_warnings.py"
    assert imported - {"mutmut"} <= {"__future__", "math", "warnings", "torch", "_warnings"} | siblings, imported
    for path in [Path(lncde_module.__file__).parent / f"{sibling}.py" for sibling in siblings] + [helper]:
        tree = ast.parse(path.read_text())
        own = {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        own |= {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        allowed = (
            {"__future__", "os", "sys"} if path == helper else {"__future__", "typing", "math", "torch"} | siblings
        )
        assert own - {"mutmut"} <= allowed, (path.name, own)


def test_renamed_arguments_still_work_with_a_warning():
    """d_hidden and chunk_size are d_state and chunk_length, as in the SSM layer; the old names give the
    same layer, with a FutureWarning, for one release."""
    torch.manual_seed(0)
    new = LinearCDE(4, d_state=8, chunk_length=16)
    torch.manual_seed(0)
    with pytest.warns(FutureWarning, match="d_hidden is now d_state"), pytest.warns(FutureWarning, match="chunk_size"):
        old = LinearCDE(4, d_hidden=8, chunk_size=16)
    assert (old.d_state, old.chunk_length) == (8, 16)
    with pytest.warns(FutureWarning, match="LinearCDE's d_hidden is now d_state") as record:
        LinearCDE(4, d_hidden=8)
    # the constructor's warning, too, names the caller's line (outside ssmts)
    assert Path(lncde_module.__file__).parents[1] not in Path(record[0].filename).resolve().parents
    for name, value in new.state_dict().items():
        torch.testing.assert_close(old.state_dict()[name], value, rtol=0, atol=0)
    with pytest.warns(FutureWarning, match="chunk_size is now chunk_length") as record:
        assert old.chunk_size == 16
    # named outside ssmts (this file; under mutation testing mutmut's trampoline)
    assert Path(lncde_module.__file__).parents[1] not in Path(record[0].filename).resolve().parents
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['d_hiden'\]"):
        LinearCDE(4, d_hiden=8)
