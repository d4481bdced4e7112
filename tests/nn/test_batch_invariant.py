"""The batch-invariant products (ssmts.nn.batch_invariant): their values against a plain matmul
and their gradients against finite differences (torch.autograd.gradcheck, float64), for every
shape case each accepts. Their forward passes go one sample at a time; their backward passes are
written by hand, so they need their own oracle."""

import pytest
import torch
from torch import nn

from ssmts.nn.batch_invariant import SpectralProduct, channel_linear, matmul_each_sample, per_sample_mv


def _randn(*shape, complex_=False):
    g = torch.Generator().manual_seed(sum(shape) + len(shape))
    x = torch.randn(*shape, generator=g, dtype=torch.float64)
    if complex_:
        x = torch.complex(x, torch.randn(*shape, generator=g, dtype=torch.float64))
    return x.requires_grad_()


@pytest.mark.parametrize(
    "a_shape, b_shape",
    [
        ((3, 4, 5), (5, 2)),  # samples @ a shared right factor, small: the elementwise form
        ((3, 20, 30), (30, 20)),  # large enough for one product per sample (12000 > ELEMENTWISE_MACS)
        ((6, 5), (3, 5, 4)),  # a shared left factor @ samples, small
        ((30, 20), (3, 20, 20)),  # large
        ((3, 7, 5), (3, 5, 6)),  # a matrix per sample on both sides
        ((2, 3, 7, 5), (2, 3, 5, 6)),  # with a dimension between the batch and the matrices
        ((2, 3, 7, 5), (5, 6)),  # the same, with a shared right factor
    ],
)
def test_matmul_each_sample_values_and_gradients(a_shape, b_shape):
    a, b = _randn(*a_shape), _randn(*b_shape)
    torch.testing.assert_close(matmul_each_sample(a, b), torch.matmul(a, b), rtol=1e-12, atol=1e-12)
    # the gradients against torch.matmul's for a random upstream gradient, then by finite differences:
    # every input for the small shapes, random directions (gradcheck's fast mode) for the large ones,
    # whose 2,400 inputs took 30 s of finite differences a shape
    upstream = torch.randn(torch.matmul(a, b).shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    expected = torch.autograd.grad(torch.matmul(a, b), (a, b), upstream)
    for got, want in zip(torch.autograd.grad(matmul_each_sample(a, b), (a, b), upstream), expected):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    fast = a.numel() + b.numel() > 500
    assert torch.autograd.gradcheck(matmul_each_sample, (a, b), eps=1e-6, atol=1e-8, fast_mode=fast)
    # one gradient at a time (the backward skips what is not needed)
    only_a, only_b = (lambda x: matmul_each_sample(x, b.detach())), (lambda x: matmul_each_sample(a.detach(), x))
    assert torch.autograd.gradcheck(only_a, (a,), eps=1e-6, atol=1e-8, fast_mode=fast)
    assert torch.autograd.gradcheck(only_b, (b,), eps=1e-6, atol=1e-8, fast_mode=fast)


def test_spectral_product_values_and_gradients():
    K = _randn(2, 3, 4, 5, complex_=True)  # (S, F, Mh, Hh)
    U = _randn(6, 2, 3, 5, complex_=True)  # (b, S, F, Hh)
    expected = torch.einsum("sfmh,bsfh->bsfm", K, U)
    torch.testing.assert_close(SpectralProduct.apply(K, U), expected, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(SpectralProduct.apply, (K, U), eps=1e-6, atol=1e-8)
    assert torch.autograd.gradcheck(lambda k: SpectralProduct.apply(k, U.detach()), (K,), eps=1e-6, atol=1e-8)
    assert torch.autograd.gradcheck(lambda u: SpectralProduct.apply(K.detach(), u), (U,), eps=1e-6, atol=1e-8)


@pytest.mark.parametrize("heads", [1, 3])
@pytest.mark.parametrize("rows", [4, 1])
@pytest.mark.parametrize("with_bias", [False, True])
def test_per_sample_mv_is_a_matrix_vector_product_per_head(heads, rows, with_bias):
    A, x = _randn(heads, rows, 5), _randn(6, heads, 5)
    bias = _randn(heads, rows) if with_bias else None
    expected = torch.einsum("smk,bsk->bsm", A, x) + (0 if bias is None else bias)
    torch.testing.assert_close(per_sample_mv(A, x, bias), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bias", [False, True])
def test_channel_linear_is_the_linear_map_of_every_step(bias):
    linear = nn.Linear(5, 3, bias=bias).double()
    x = _randn(4, 5, 7)
    expected = linear(x.transpose(1, 2)).transpose(1, 2)
    torch.testing.assert_close(channel_linear(linear, x), expected, rtol=1e-12, atol=1e-12)


def test_a_sample_alone_gives_its_batch_result_bit_for_bit():
    """The property the module exists for, in float32 where BLAS kernels would differ by batch size."""
    a, w = torch.randn(9, 40, 50), torch.randn(50, 30)
    whole = matmul_each_sample(a, w)
    assert all(torch.equal(matmul_each_sample(a[i : i + 1], w)[0], whole[i]) for i in range(len(a)))
