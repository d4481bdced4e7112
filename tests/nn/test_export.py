"""The convolution form of a network (ssmts.nn.export), the oracle of every exported model: in
float64 it gives the FFT-mode outputs of the network to 1e-10, for every SSM variant and every
length up to its max_length; it refuses longer input and the layers it cannot hold."""

from __future__ import annotations

import warnings

import pytest
import torch

from ssmts.nn import SequenceHead, SSMBackbone, SSMBlock, scaled_delta
from ssmts.nn.export import KernelConvolution, LengthLimit, convolution_form

MAX_LENGTH = 24
VARIANTS = [
    dict(heads=1),  # one MIMO head: the FFT mode convolves the states ("state" convolution)
    dict(heads=8),  # stacked SISO: the FFT mode convolves kernels
    dict(heads=2, D="full"),
    dict(heads=4, convolution="kernel", D="none"),
    dict(bidirectional="essm"),
    dict(bidirectional="ldnn", heads=4),
    dict(bidirectional="ldnn", D="identity", convolution="kernel"),
    dict(discretization="bilinear", real_bc=True),
    dict(discretization="gbt", alpha=0.3, lambda_enforce="softplus"),
    dict(conj_sym=False, init="lin"),
    dict(init="ptd"),
    dict(norm="batch", prenorm=False, activation="gelu"),
    dict(chunk_length=5),  # the FFT mode runs in chunks, the kernel is the whole one
]


def _network(pooling="mean", seed=0, **kwargs) -> SequenceHead:
    torch.manual_seed(seed)
    head = SequenceHead(SSMBackbone(3, d_model=8, n_layers=2, d_state=8, **kwargs), 4, pooling).double()
    with torch.no_grad():  # away from the initialization: every weight and statistic matters
        for p in head.parameters():
            p.add_(0.1 * torch.randn_like(p))
        for m in head.modules():
            if hasattr(m, "running_var"):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    return head.eval()


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: ",".join(f"{k}={w}" for k, w in v.items()))
def test_convolution_form_equals_the_network_in_float64(variant):
    head = _network(**variant)
    conv = convolution_form(head, MAX_LENGTH)
    assert not any(isinstance(m, type(head.backbone.blocks[0].ssm)) for m in conv.modules())
    for length in (1, 2, 9, MAX_LENGTH):
        u = torch.randn(5, 3, length, dtype=torch.float64)
        with torch.no_grad():
            expected, got = head(u), conv(u)
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-10)


def test_last_pooling_and_the_per_step_features_agree():
    head = _network(pooling="last", bidirectional="essm")
    conv = convolution_form(head, MAX_LENGTH)
    u = torch.randn(3, 3, 17, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(conv(u), head(u), rtol=0, atol=1e-10)
        features = conv.backbone.features(u)
        torch.testing.assert_close(features, head.backbone.features(u), rtol=0, atol=1e-10)


def test_the_delta_in_force_is_baked_into_the_kernels():
    head = _network()
    with scaled_delta(head, 2.5):
        conv = convolution_form(head, MAX_LENGTH)
        u = torch.randn(2, 3, MAX_LENGTH, dtype=torch.float64)
        with torch.no_grad():
            expected = head(u)
    with torch.no_grad():
        torch.testing.assert_close(conv(u), expected, rtol=0, atol=1e-10)  # outside the scope: still x 2.5
        assert (conv(u) - head(u)).abs().max() > 1e-3


def test_kernel_sizes_and_the_original_left_alone():
    causal = SSMBlock(8, d_state=8, heads=2).double().eval()
    both = SSMBlock(8, d_state=8, heads=2, bidirectional="ldnn").double().eval()
    conv_causal, conv_both = convolution_form(causal, 10), convolution_form(both, 10)
    assert isinstance(causal.ssm, type(both.ssm)) and isinstance(conv_causal.ssm, KernelConvolution)
    assert tuple(conv_causal.ssm.weight.shape) == (8, 4, 10)  # (d_output, d_model / heads, max_length)
    assert tuple(conv_both.ssm.weight.shape) == (8, 4, 19)  # two-sided: 2 max_length - 1 taps
    # causal: the newest step meets tap 0 (the last of the correlation's weight), with D folded in
    kernel = causal.ssm.kernel(10)
    expected_tap0 = kernel[..., 0] + torch.diag(causal.ssm.D)
    heads = torch.block_diag(*[expected_tap0[4 * s : 4 * s + 4, 4 * s : 4 * s + 4] for s in range(2)])
    torch.testing.assert_close(torch.block_diag(*conv_causal.ssm.weight[..., -1].split(4)), heads)


def test_longer_input_is_refused():
    conv = convolution_form(_network(), MAX_LENGTH)
    with pytest.raises(ValueError, match=f"up to {MAX_LENGTH} steps"):
        conv(torch.zeros(1, 3, MAX_LENGTH + 1, dtype=torch.float64))
    limit = LengthLimit(4)
    assert torch.equal(limit(torch.ones(2, 3, 4)), torch.ones(2, 3, 4))
    with pytest.raises(ValueError, match="up to max_length=4 steps"):
        limit(torch.ones(2, 3, 5))


def test_layers_without_a_fixed_kernel_are_refused():
    lncde = SequenceHead(SSMBackbone(3, d_model=8, n_layers=1, layer="lncde", d_state=4), 2)
    with pytest.raises(ValueError, match="LinearCDE"):
        convolution_form(lncde, 10)
    with pytest.raises(ValueError, match="max_length"):
        convolution_form(_network(), 0)


def test_traces_to_torchscript_at_every_length():
    head = _network(bidirectional="ldnn").float()
    conv = torch.nn.Sequential(LengthLimit(MAX_LENGTH), convolution_form(head, MAX_LENGTH)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit is deprecated (and warns that shapes are traced)
        traced = torch.jit.trace(conv, (torch.randn(2, 3, 5),), check_trace=False)
    for length in (1, 13, MAX_LENGTH):
        u = torch.randn(4, 3, length)
        with torch.no_grad():
            torch.testing.assert_close(traced(u), head(u), rtol=0, atol=1e-5)
    with pytest.raises(Exception, match="out of (range|bounds)"):
        traced(torch.randn(1, 3, MAX_LENGTH + 1))


def test_error_messages_give_the_length_received():
    with pytest.raises(ValueError, match=f"takes up to {MAX_LENGTH} steps, got {MAX_LENGTH + 1}$"):
        convolution_form(_network(), MAX_LENGTH)(torch.zeros(1, 3, MAX_LENGTH + 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="takes series of up to max_length=4 steps, got 5$"):
        LengthLimit(4)(torch.ones(2, 3, 5))


def test_a_max_length_of_one_gives_the_network_on_single_steps():
    """Oracle: the FFT-mode network on length-1 input (the smallest max_length accepted)."""
    head = _network(bidirectional="ldnn", heads=2)
    conv = convolution_form(head, 1)
    u = torch.randn(4, 3, 1, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(conv(u), head(u), rtol=0, atol=1e-10)


@pytest.mark.parametrize("max_length", [True, 3.0, 0, -2])
def test_max_length_must_be_a_positive_int(max_length):
    with pytest.raises(ValueError, match=rf"max_length must be a positive integer, got {max_length!r}"):
        convolution_form(_network(), max_length)


def test_the_convolution_form_is_independent_of_the_layer_it_came_from():
    """Oracle: the layer's FFT-mode output when the form was made; changing the layer's D and its heads'
    mixer in place afterwards (fine-tuning it) leaves the form as it was."""
    layer = SSMBlock(8, d_state=8, heads=2, D="full").double().eval().ssm
    conv = KernelConvolution(layer, 12)
    u = torch.randn(2, 8, 12, dtype=torch.float64)
    with torch.no_grad():
        expected = layer(u)
        layer.D.add_(1.0)
        layer.mixer.weight.mul_(-2.0)
        assert (layer(u) - expected).abs().max() > 1e-2
        torch.testing.assert_close(conv(u), expected, rtol=0, atol=1e-10)


def test_length_limit_returns_its_input_unchanged_dtype_included():
    """Oracle: the input itself: integer ids (a token model's (batch, L) input) stay integers, floats keep
    their precision."""
    limit = LengthLimit(8)
    for x in (torch.arange(10).reshape(2, 5), torch.randn(2, 3, 8, dtype=torch.float64)):
        y = limit(x)
        assert y.dtype == x.dtype and torch.equal(y, x)


def test_length_limit_adds_nothing_to_the_state_dict():
    """The step table is rebuilt from max_length: a checkpoint of a limited model is the model's own."""
    conv = convolution_form(_network(), MAX_LENGTH)
    limited = torch.nn.Sequential(LengthLimit(MAX_LENGTH), conv)
    assert LengthLimit(MAX_LENGTH).state_dict() == {}
    assert list(limited.state_dict()) == [f"1.{name}" for name in conv.state_dict()]


def test_repr_gives_the_kernel_sizes():
    causal = convolution_form(SSMBlock(8, d_state=8, heads=2).double().eval(), 10)
    both = convolution_form(SSMBlock(8, d_state=8, heads=4, bidirectional="ldnn").double().eval(), 10)
    assert "d_output=8, d_model=8, heads=2, taps=10" in repr(causal.ssm)
    assert "d_output=8, d_model=8, heads=4, taps=19" in repr(both.ssm)


def test_refusals_say_why():
    lncde = SequenceHead(SSMBackbone(3, d_model=8, n_layers=1, layer="lncde", d_state=4), 2)
    reason = (
        r"^a LinearCDE layer \(layer='lncde'\) has input-dependent transitions, so no fixed convolution kernel: "
        r"it cannot be put in convolution form \(only layer='ssm' exports\)$"
    )
    with pytest.raises(ValueError, match=reason):
        convolution_form(lncde, 10)
    dense = SequenceHead(SSMBackbone(3, d_model=4, n_layers=1, layer="dense", d_state=4), 2)
    with pytest.raises(ValueError, match=r"^a DenseSSM layer \(layer='dense'\) cannot be put in convolution form$"):
        convolution_form(dense, 10)
