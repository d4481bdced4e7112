"""LinearCDE pieces against independent computations: the Sylvester Hadamard matrix against scipy,
the composed transition product against a loop of single-step transitions, the zero state where and
in which precision it is asked, the block checks' messages, and the layer's printed summary."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.linalg import hadamard as scipy_hadamard

from ssmts.nn import LinearCDE
from ssmts.nn.lncde import hadamard

STRUCTURES = {
    "diagonal": dict(structure="diagonal"),
    "block_diagonal": dict(structure="block_diagonal", block_sizes=[2, 2, 4]),  # 3 groups of blocks
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
