"""LinearCDE pieces against independent computations: the Sylvester Hadamard matrix against scipy,
the composed transition product against a loop of single-step transitions, the zero state where and
in which precision it is asked, the block checks' messages, and the layer's printed summary; the
dense float64 loop of test_lncde for large transitions, any number of chunks, a single state, a
nonzero path bias and bfloat16; the initialization (generator, decay rates, scales, defaults,
block sizes, what a state_dict holds) against its documented laws."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from scipy.linalg import hadamard as scipy_hadamard
from scipy.stats import kstest

from ssmts.nn import LinearCDE
from ssmts.nn.lncde import hadamard

from .test_lncde import _make, _np, _oracle

STRUCTURES = {
    "diagonal": dict(structure="diagonal"),
    "block_diagonal": dict(structure="block_diagonal", block_sizes=[2, 2, 4]),  # 3 blocks in 2 groups
    "dplr": dict(structure="dplr", rank=2),
    "walsh_hadamard": dict(structure="walsh_hadamard"),
    "dense": dict(structure="dense"),
}


def test_hadamard_is_sylvesters_matrix_of_every_power_of_two():
    """Oracle: scipy.linalg.hadamard, orders 1 to 16, in the dtype asked (float64 by default)."""
    for order in (1, 2, 4, 8, 16):
        H = hadamard(order)
        assert H.dtype == torch.float64
        np.testing.assert_array_equal(H.numpy(), scipy_hadamard(order))
    assert hadamard(4, dtype=torch.float32).dtype == torch.float32
    for order in (0, 3, 6, 12):
        with pytest.raises(ValueError, match=f"order must be a power of two, got {order}"):
            hadamard(order)


@pytest.mark.parametrize("name", list(STRUCTURES))
@pytest.mark.parametrize("L", [1, 2, 5, 7])
def test_transition_product_equals_the_loop_of_single_steps(name, L):
    """Oracle: M_{L-1} ... M_0 multiplied one step at a time from the single-step matrices (each step's
    own transition_product), in float64: the pairwise composition, odd lengths included."""
    torch.manual_seed(0)
    layer = LinearCDE(3, 8, init_std=2.0, generator=torch.Generator().manual_seed(1), **STRUCTURES[name]).double()
    u = torch.randn(2, 3, L, dtype=torch.float64)
    expected = torch.eye(8, dtype=torch.float64).expand(2, 8, 8)
    for t in range(L):
        expected = layer.transition_product(u[:, :, t : t + 1]) @ expected
    torch.testing.assert_close(layer.transition_product(u), expected, rtol=1e-12, atol=1e-12)


def test_the_zero_state_is_made_where_and_in_the_precision_asked():
    """Default: the layer's device and dtype (float64 for a float64 layer); a device or dtype given wins.
    The meta device stands in for a second device."""
    layer = LinearCDE(3, 8).double()
    state = layer.initial_state(2)
    assert state.shape == (2, 8) and state.dtype == torch.float64 and state.device.type == "cpu"
    assert not state.any()
    assert layer.initial_state(2, dtype=torch.float32).dtype == torch.float32
    assert layer.initial_state(2, device="meta").device.type == "meta"
    on_meta = LinearCDE(3, 8).to("meta")
    assert on_meta.initial_state(1).device.type == "meta"


def test_block_options_are_checked_with_the_reason():
    """Blocks of one state are blocks (a diagonal in block form); the messages name the problem."""
    u = torch.randn(1, 3, 4)
    ones = LinearCDE(3, 4, structure="block_diagonal", block_size=1)
    assert ones(u).shape == (1, 3, 4)
    with pytest.raises(ValueError, match=r"^give either block_size or block_sizes, not both$"):
        LinearCDE(3, 8, structure="block_diagonal", block_size=4, block_sizes=[4, 4])
    with pytest.raises(ValueError, match="block_size must be a positive integer, got 0"):
        LinearCDE(3, 8, structure="block_diagonal", block_size=0)
    with pytest.raises(ValueError, match=r"block_size=4 \(the default\) must divide d_state=6"):
        LinearCDE(3, 6, structure="block_diagonal")
    with pytest.raises(ValueError, match=r"block_size=4 must divide d_state=6; or give block_sizes"):
        LinearCDE(3, 6, structure="block_diagonal", block_size=4)


def test_the_printed_summary_names_the_structure_its_blocks_and_rank():
    """print(layer): the structure with its block groups (count x size) or its rank, and the options."""
    blocks = repr(LinearCDE(3, 8, structure="block_diagonal", block_sizes=[2, 2, 4]))
    assert "structure='block_diagonal', blocks=2x2+1x4, dt=0.1," in blocks and "rank=" not in blocks
    dplr = repr(LinearCDE(3, 8, structure="dplr", rank=2))
    assert "structure='dplr', rank=2, dt=0.1," in dplr and "blocks=" not in dplr
    diagonal = repr(LinearCDE(3, 8, structure="diagonal"))
    assert "structure='diagonal', dt=0.1, max_norm=1.0, D='diagonal', mode='scan', chunk_length=128" in diagonal


LARGE = {
    # Transitions or blocks of at least 20 x 20 = 400 entries: their matrix-vector products are
    # elementwise products and row sums (lncde._matvec) rather than torch's bmm loop.
    # name: (configuration of test_lncde, d_state, options)
    "dense": ("dense", 20, {}),
    "block_diagonal": ("block_interleaved", 22, dict(block_sizes=[2, 20])),
    "dplr": ("dplr", 20, {}),
    "walsh_hadamard": ("walsh_hadamard", 32, {}),
}


def _assert_every_mode_is_the_loop(layer, u, h0) -> list:
    """y and the final state of the recurrence, scan and chunked modes against the float64 loop, per
    sample (1e-12: float64 round-off over a few steps); returns each sample's loop output y and
    transitions M_1..M_L."""
    loops = []
    for mode in ("recurrence", "scan", "chunked"):
        y, h = layer(u, h0, mode=mode, return_state=True)
        for n in range(len(u)):
            y_ref, h_ref, Ms, _ = _oracle(layer, _np(u[n]), _np(h0[n]))
            np.testing.assert_allclose(_np(y[n]), y_ref, rtol=0, atol=1e-12, err_msg=mode)
            np.testing.assert_allclose(_np(h[n]), h_ref, rtol=0, atol=1e-12, err_msg=mode)
            loops.append((y_ref, Ms))
    return loops[: len(u)]


@pytest.mark.parametrize("name", list(LARGE))
def test_large_transitions_match_the_dense_loop_in_every_mode(name):
    """Oracle: the dense float64 numpy loop of test_lncde (every M_i built as a matrix from the
    parameters), for transitions or blocks of 20 x 20 and more, from a random initial state; float64
    round-off over 9 steps stays far below 1e-12."""
    config, d, options = LARGE[name]
    layer = _make(config, d=d, init_std=3.0, chunk_length=4, **options)
    g = torch.Generator().manual_seed(3)
    u = torch.randn(2, 3, 9, generator=g, dtype=torch.float64)
    h0 = torch.randn(2, d, generator=g, dtype=torch.float64)
    _assert_every_mode_is_the_loop(layer, u, h0)


@pytest.mark.parametrize("L", [3, 4, 5, 8, 9, 12])
def test_chunked_mode_carries_the_state_across_any_number_of_chunks(L):
    """chunk_length 4 and lengths of one chunk (part or whole), two (the second partial or whole) and
    three: the chunked scan equals the dense float64 loop from a random initial state (round-off far
    below 1e-12)."""
    layer = _make("block_interleaved", init_std=3.0, chunk_length=4)
    g = torch.Generator().manual_seed(4)
    u = torch.randn(2, 3, L, generator=g, dtype=torch.float64)
    h0 = torch.randn(2, 8, generator=g, dtype=torch.float64)
    y, h = layer(u, h0, mode="chunked", return_state=True)
    assert y.shape == (2, 2, L)
    for n in range(2):
        y_ref, h_ref, _, _ = _oracle(layer, _np(u[n]), _np(h0[n]))
        np.testing.assert_allclose(_np(y[n]), y_ref, rtol=0, atol=1e-12)
        np.testing.assert_allclose(_np(h[n]), h_ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", list(STRUCTURES))
def test_a_layer_cast_to_bfloat16_computes_in_bfloat16(name):
    """layer.to(torch.bfloat16): every mode runs in bfloat16 (outputs and final state in bfloat16) and
    agrees with the same layer in float64 to a few bfloat16 roundings: 4 eps (eps = 2^-7) of the
    output's largest entry over 6 steps (the observed error is about 1 eps)."""
    layer = LinearCDE(3, 8, generator=torch.Generator().manual_seed(0), **STRUCTURES[name]).double()
    u = torch.randn(2, 3, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    reference = layer(u)
    low = copy.deepcopy(layer).to(torch.bfloat16)
    eps = torch.finfo(torch.bfloat16).eps
    for mode in ("recurrence", "scan", "chunked"):
        y, h = low(u.to(torch.bfloat16), mode=mode, return_state=True)
        assert y.dtype == h.dtype == torch.bfloat16, mode
        torch.testing.assert_close(y.double(), reference, rtol=0, atol=4 * eps * reference.abs().max().item())


def _state_dicts_equal(a: LinearCDE, b: LinearCDE) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("D", ["diagonal", "full"])
@pytest.mark.parametrize("name", list(STRUCTURES))
def test_the_generator_alone_fixes_the_initialization(name, D):
    """generator: every parameter (transitions, decay rates, path, B, C and D) is drawn from it, so two
    layers built from generators of one seed are equal, whatever the global random state."""
    M = 3 if D == "diagonal" else 2
    layers = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        layers.append(LinearCDE(3, 8, d_output=M, D=D, generator=torch.Generator().manual_seed(0), **STRUCTURES[name]))
    assert _state_dicts_equal(*layers)
    torch.manual_seed(1)
    other = LinearCDE(3, 8, d_output=M, D=D, generator=torch.Generator().manual_seed(5), **STRUCTURES[name])
    assert not torch.equal(other.B, layers[0].B)


def _zero_input_transition(layer: LinearCDE) -> torch.Tensor:
    """M_0 for an input of zeros, (d, d) in the state order: I + dt A^0 (the path is dt (1, tanh(0)))."""
    with torch.no_grad():
        return layer.transition_product(torch.zeros(1, layer.d_model, 1, dtype=layer.B.dtype))[0]


DECAYING = {
    "diagonal": dict(structure="diagonal"),
    "block_diagonal": dict(structure="block_diagonal", block_sizes=[1, 3, 1, 2, 1]),  # 3 groups
    "dplr": dict(structure="dplr"),
    "dense": dict(structure="dense"),
}


@pytest.mark.parametrize("name", list(DECAYING))
def test_with_no_input_each_state_decays_at_its_own_initial_rate(name):
    """Documented initialization: A^0 starts with the diagonal -r_k / dt, so with no input
    M = I + dt A^0 ~ diag(1 - r_k), r_k per-state decay rates in [decay_min, decay_max] (independent
    draws of a continuous law: distinct). With init_std 1e-9 the random part of dt A^j is ~1e-10, far
    below the tolerance of 1e-7 (and the normalization is idle: every |1 - r_k| < 1)."""
    layer = LinearCDE(
        3, 8, init_std=1e-9, decay_min=0.01, decay_max=0.2, generator=torch.Generator().manual_seed(0), **DECAYING[name]
    ).double()
    M = _zero_input_transition(layer)
    r = 1 - torch.diagonal(M)
    assert (M - torch.diag(torch.diagonal(M))).abs().max() < 1e-7
    assert (r > 0.01 - 1e-7).all() and (r < 0.2 + 1e-7).all(), r
    assert r.sort().values.diff().min() > 1e-6, r


def test_initial_decay_rates_are_log_uniform_between_the_bounds():
    """The rates r_k = 1 - M_kk of a zero input step (as above), for 512 states: log r_k uniform on
    [log decay_min, log decay_max] (Kolmogorov-Smirnov test against the uniform law, p > 0.01 at this
    fixed seed), spanning the range; with decay_min == decay_max every rate is that value."""
    layer = LinearCDE(2, 512, structure="diagonal", init_std=1e-9, generator=torch.Generator().manual_seed(0))
    r = 1 - torch.diagonal(_zero_input_transition(layer.double())).numpy()
    position = (np.log(r) - math.log(1e-3)) / math.log(1e-1 / 1e-3)  # the defaults decay_min, decay_max
    assert kstest(position, "uniform").pvalue > 0.01
    assert position.min() < 0.02 and position.max() > 0.98
    equal = LinearCDE(2, 6, structure="diagonal", init_std=1e-9, decay_min=0.05, decay_max=0.05).double()
    np.testing.assert_allclose(1 - torch.diagonal(_zero_input_transition(equal)).numpy(), 0.05, rtol=0, atol=1e-7)


def test_initial_parameters_have_the_documented_scales():
    """Sample standard deviations against the documented scales: the input-driven entries of the A^j,
    init_std / (s sqrt(P)) for s x s blocks (init_std / sqrt(P) for 1 x 1 blocks), and fan-in scales
    for the path's W (1 / sqrt(H)), B (1 / sqrt(P)) and C (1 / sqrt(d)). Each from 2,048 entries or
    more (standard error under 2 %), so within 10 % at this fixed seed; W has full rank (its rows are
    independent draws)."""
    H, p, d, init_std = 64, 32, 128, 2.0
    P = p + 1
    layer = LinearCDE(
        H,
        d,
        d_path=p,
        structure="block_diagonal",
        block_sizes=[1] * 64 + [4] * 16,
        init_std=init_std,
        generator=torch.Generator().manual_seed(0),
    )

    def rms(t: torch.Tensor) -> float:
        return t.detach().double().pow(2).mean().sqrt().item()

    ones, fours = layer.A_blocks
    scales = {
        "1x1 blocks": (rms(ones[1:]), init_std / math.sqrt(P)),  # rows j >= 1: no decay rate added
        "4x4 blocks": (rms(fours[1:]), init_std / (4 * math.sqrt(P))),
        "W": (rms(layer.path.weight), 1 / math.sqrt(H)),
        "B": (rms(layer.B), 1 / math.sqrt(P)),
        "C": (rms(layer.C), 1 / math.sqrt(d)),
    }
    for name, (measured, documented) in scales.items():
        assert abs(measured / documented - 1) < 0.1, (name, measured, documented)
    assert torch.linalg.matrix_rank(layer.path.weight.detach()) == p


@pytest.mark.parametrize(
    "options, sizes",
    [
        (dict(structure="diagonal", d_state=6), (1,) * 6),
        (dict(structure="block_diagonal", d_state=8, block_sizes=[1, 3, 1, 2, 1]), (1, 3, 1, 2, 1)),
        (dict(structure="dplr", d_state=8), (8,)),
        (dict(structure="walsh_hadamard", d_state=8), (8,)),
        (dict(structure="dense", d_state=8), (8,)),
    ],
)
def test_block_sizes_give_the_block_structure_of_every_transition(options, sizes):
    """block_sizes: the diagonal blocks of the transitions in state order (one state each for
    diagonal, the given ones for block_diagonal, one d x d block otherwise). Oracle: the product of
    the transitions of a random input is exactly zero outside those blocks and nonzero in each block;
    a diagonal layer stores its A^j as one (P, d) tensor (as documented)."""
    layer = LinearCDE(3, init_std=3.0, generator=torch.Generator().manual_seed(0), **options).double()
    assert layer.block_sizes == sizes
    product = layer.transition_product(torch.randn(1, 3, 5, dtype=torch.float64))[0]
    inside = torch.zeros_like(product, dtype=torch.bool)
    start = 0
    for s in sizes:
        inside[start : start + s, start : start + s] = True
        assert product[start : start + s, start : start + s].abs().max() > 0
        start += s
    assert start == layer.d_state and (product[~inside] == 0).all()
    if options["structure"] == "diagonal":
        assert [tuple(A.shape) for A in layer.A_blocks] == [(layer.d_path + 1, 6)]


@pytest.mark.parametrize("name", list(STRUCTURES) + ["interleaved blocks"])
def test_the_state_dict_holds_the_parameters_and_nothing_derived(name):
    """A checkpoint holds the trained parameters only: the Hadamard signs and the block permutations
    are rebuilt from the constructor's options (buffers not saved), so a state_dict's keys are the
    parameters' names and it loads strictly into a fresh layer of the same options."""
    options = (
        dict(structure="block_diagonal", block_sizes=[1, 3, 1, 2, 1])
        if name == "interleaved blocks"
        else STRUCTURES[name]
    )
    layer = LinearCDE(3, 8, generator=torch.Generator().manual_seed(0), **options)
    assert set(layer.state_dict()) == {n for n, _ in layer.named_parameters()}
    fresh = LinearCDE(3, 8, generator=torch.Generator().manual_seed(1), **options)
    fresh.load_state_dict(layer.state_dict(), strict=True)
    assert _state_dicts_equal(fresh, layer)
    u = torch.randn(1, 3, 4)
    assert torch.equal(fresh(u), layer(u))


@pytest.mark.parametrize("name", list(STRUCTURES))
def test_a_single_state_works_in_every_structure_and_mode(name):
    """d_state = 1 (a scalar transition 1 + sum_j x^j a^j, rescaled to |M| <= max_norm) is a valid size
    for every structure; oracle: the dense float64 loop, in every mode and step by step."""
    options = {k: v for k, v in STRUCTURES[name].items() if k not in ("block_sizes", "rank")}
    if name == "block_diagonal":
        options["block_size"] = 1
    layer = LinearCDE(
        3, 1, d_output=2, init_std=3.0, chunk_length=3, generator=torch.Generator().manual_seed(0), **options
    )
    layer = layer.double()
    u = torch.randn(2, 3, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    h0 = torch.randn(2, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    product = layer.transition_product(u)
    loops = _assert_every_mode_is_the_loop(layer, u, h0)
    for n, (_, Ms) in enumerate(loops):
        np.testing.assert_allclose(_np(product[n]), np.linalg.multi_dot(Ms[::-1]), rtol=0, atol=1e-12)
    y_loop = np.stack([y_ref for y_ref, _ in loops])
    state = h0
    for k in range(7):
        y_k, state = layer.step(u[..., k], state)
        np.testing.assert_allclose(_np(y_k), y_loop[..., k], rtol=0, atol=1e-12)


@pytest.mark.parametrize("d", [1, 2, 4])
def test_walsh_hadamard_takes_every_power_of_two_including_one(d):
    """d_state may be any power of two, 2^0 = 1 included (H = [1]); oracle: the dense float64 loop
    with scipy's Hadamard matrix, in every mode."""
    layer = _make("walsh_hadamard", d=d, init_std=3.0, chunk_length=3)
    u = torch.randn(1, 3, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    y_ref = _oracle(layer, _np(u[0]))[0]
    for mode in ("recurrence", "scan", "chunked"):
        np.testing.assert_allclose(_np(layer(u, mode=mode)[0]), y_ref, rtol=0, atol=1e-12, err_msg=mode)


def test_the_path_is_dt_times_one_and_tanh_of_the_affine_projection():
    """x_i = dt (1, tanh(W u_i + c)) with a nonzero bias c (a trained layer has one), against numpy in
    float64 (1e-14: a few roundings); the layer's output with that bias matches the dense loop."""
    layer = _make("block", dt=0.3)
    with torch.no_grad():
        layer.path.bias.copy_(torch.randn(4, generator=torch.Generator().manual_seed(1), dtype=torch.float64))
    u = torch.randn(2, 3, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    W, c = _np(layer.path.weight), _np(layer.path.bias)
    for n in range(2):
        expected = 0.3 * np.concatenate([np.ones((1, 6)), np.tanh(W @ _np(u[n]) + c[:, None])]).T
        np.testing.assert_allclose(_np(layer.path_increments(u)[n]), expected, rtol=0, atol=1e-14)
        np.testing.assert_allclose(_np(layer(u)[n]), _oracle(layer, _np(u[n]))[0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("mode", ["recurrence", "scan", "chunked"])
def test_a_state_of_another_precision_is_cast_to_the_layers(mode):
    """A float32 layer given a float64 initial state (e.g. kept from a float64 run) computes in float32:
    outputs and final state in float32, bitwise those of the state cast to float32 first; so does step."""
    layer = LinearCDE(3, 8, structure="dense", generator=torch.Generator().manual_seed(0))
    u = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(1))
    h64 = torch.randn(2, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    y, h = layer(u, h64, mode=mode, return_state=True)
    y32, h32 = layer(u, h64.float(), mode=mode, return_state=True)
    assert y.dtype == h.dtype == torch.float32
    assert torch.equal(y, y32) and torch.equal(h, h32)
    y_t, h_t = layer.step(u[..., 0], h64)
    assert y_t.dtype == h_t.dtype == torch.float32
    assert torch.equal(h_t, layer.step(u[..., 0], h64.float())[1])


def test_rank_and_init_std_default_to_one():
    """The documented defaults: a dplr layer without rank has rank 1 (one column of U^j, V^j), and
    leaving init_std out builds the same layer as init_std=1.0."""
    g = torch.Generator
    dplr = LinearCDE(3, 8, structure="dplr", generator=g().manual_seed(0))
    assert dplr.rank == 1 and dplr.A_U.shape == dplr.A_V.shape == (4, 8, 1)
    assert _state_dicts_equal(dplr, LinearCDE(3, 8, structure="dplr", rank=1, generator=g().manual_seed(0)))
    assert _state_dicts_equal(
        LinearCDE(3, 8, generator=g().manual_seed(0)), LinearCDE(3, 8, init_std=1.0, generator=g().manual_seed(0))
    )
