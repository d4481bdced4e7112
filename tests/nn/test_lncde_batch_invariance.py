"""A LinearCDE's output for a sample does not depend on the rest of the batch: a batch of 64, its
first 3 and 17 samples, samples alone and a permuted sub-batch give bitwise-equal outputs and
final states (torch.equal), for every structure and compute mode, on one thread and on two.
scikit-learn's estimator checks (check_methods_subset_invariance,
check_methods_sample_order_invariance) compare predictions to 1e-7 and 1e-9 in float32; they hold
only if no product folds the batch into a dimension of a BLAS matrix (see the note on batch
invariance in ssmts.nn.lncde)."""

from __future__ import annotations

import os

import pytest
import torch

from ssmts.nn import LinearCDE

# Every kind of product the layer has: products with the path (and C, D) one sample at a time and,
# when small (L = 7, `step`), as elementwise sums; compositions of 4x4 blocks in torch's own bmm
# loop and of 8x8 blocks and 20x20 / 16x16 matrices one sample at a time, matrix-vector products of
# 4x4 and 8x8 blocks in torch's bmm loop and of 20x20 matrices as elementwise sums.
CONFIGS = {
    "diagonal": dict(structure="diagonal"),
    "block4": dict(structure="block_diagonal", block_size=4),
    "diag+8x8": dict(structure="block_diagonal", block_sizes=[1] * 12 + [8]),
    "dplr": dict(structure="dplr", rank=2),
    "walsh_hadamard": dict(structure="walsh_hadamard", d_state=16),
    "dense": dict(structure="dense"),
}
BATCH = 64
SUB_BATCHES = (3, 17)
ALONE = (0, 16, 63)


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    if request.param > 1 and os.environ.get("MUTANT_UNDER_TEST"):
        # mutation testing forks its workers from the process that ran this: a thread pool started
        # here would deadlock them (docs/architecture.md, "Tests that catch wrong results")
        pytest.skip("more than one thread under mutation testing")
    previous = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(previous)


def _layer(config: str, **kwargs) -> LinearCDE:
    # init_std 2: input-dependent transitions, rescaled by the normalization at some steps.
    kwargs = {"d_state": 20, **CONFIGS[config], **kwargs}
    return LinearCDE(16, d_output=8, d_path=12, init_std=2.0, generator=torch.Generator().manual_seed(0), **kwargs)


@pytest.mark.parametrize("L", [7, 64, 300])
@pytest.mark.parametrize("mode", ["recurrence", "scan", "chunked"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_outputs_do_not_depend_on_the_rest_of_the_batch(config, mode, L, threads):
    layer = _layer(config, chunk_length=128)
    g = torch.Generator().manual_seed(1)
    u = torch.randn(BATCH, 16, L, generator=g)
    h0 = torch.randn(BATCH, layer.d_state, generator=g)
    perm = torch.randperm(SUB_BATCHES[-1], generator=g)
    with torch.no_grad():
        y, h = layer(u, h0, mode=mode, return_state=True)
        for b in SUB_BATCHES:
            y_b, h_b = layer(u[:b], h0[:b], mode=mode, return_state=True)
            assert torch.equal(y_b, y[:b]) and torch.equal(h_b, h[:b]), f"first {b} samples"
        for n in ALONE:
            y_n, h_n = layer(u[n : n + 1].clone(), h0[n : n + 1].clone(), mode=mode, return_state=True)
            assert torch.equal(y_n, y[n : n + 1]) and torch.equal(h_n, h[n : n + 1]), f"sample {n} alone"
        y_p, h_p = layer(u[perm], h0[perm], mode=mode, return_state=True)
        assert torch.equal(y_p, y[perm]) and torch.equal(h_p, h[perm]), "permuted sub-batch"
        assert torch.isfinite(y).all() and y.abs().max() > 0


@pytest.mark.parametrize("config", list(CONFIGS))
def test_steps_do_not_depend_on_the_rest_of_the_batch(config, threads):
    layer = _layer(config)
    g = torch.Generator().manual_seed(2)
    u = torch.randn(17, 16, 5, generator=g)
    with torch.no_grad():

        def roll(v):
            state, ys = layer.initial_state(v.shape[0]), []
            for k in range(v.shape[-1]):
                y, state = layer.step(v[..., k], state)
                ys.append(y)
            return torch.stack(ys, -1), state

        y, h = roll(u)
        for n in (0, 16):
            y_n, h_n = roll(u[n : n + 1])
            assert torch.equal(y_n, y[n : n + 1]) and torch.equal(h_n, h[n : n + 1])
        perm = torch.randperm(17, generator=g)
        y_p, h_p = roll(u[perm])
        assert torch.equal(y_p, y[perm]) and torch.equal(h_p, h[perm])
