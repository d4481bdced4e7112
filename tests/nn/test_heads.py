"""The task heads of ssmts.nn.heads, each against an independent oracle: the backbone's own per-step
features (`backbone.features`) pushed through the head's documented computation in numpy (float64)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from ssmts.nn import (
    DirectForecastHead,
    ForecastEnsemble,
    MaskedReconstruction,
    PerStepHead,
    RecursiveForecastHead,
    SequenceHead,
    SSMBackbone,
    TwoTowerRetrieval,
)

D_IN, D_MODEL = 3, 8


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _backbone(seed: int = 0, d_input: int = D_IN, **kwargs) -> SSMBackbone:
    torch.manual_seed(seed)  # encoder / norm / gate weights come from the global generator
    kwargs.setdefault("d_state", 4)
    return SSMBackbone(d_input, d_model=D_MODEL, n_layers=2, generator=_gen(seed), **kwargs).double()


def _x(batch: int, channels: int, length: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(batch, channels, length, generator=_gen(seed), dtype=torch.float64)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().numpy().astype(np.float64)


def _linear_np(linear: torch.nn.Linear, z: np.ndarray) -> np.ndarray:
    """nn.Linear in numpy on the last axis: z @ W.T + b."""
    return z @ _np(linear.weight).T + _np(linear.bias)


def _per_step_linear_np(linear: torch.nn.Linear, features: np.ndarray) -> np.ndarray:
    """The linear map at every step: (b, d, L) -> (b, d_out, L)."""
    return np.einsum("od,bdl->bol", _np(linear.weight), features) + _np(linear.bias)[None, :, None]


def _padding_mask(batch: int, length: int) -> torch.Tensor:
    """Real steps in the middle of every series (padding on both sides, different per sample), so
    that neither the first nor the last step is always real."""
    mask = torch.zeros(batch, length, dtype=torch.bool)
    for i in range(batch):
        mask[i, 1 + i : length - 2 - (i % 2)] = True
    return mask


def _garbage_in_padding(x: torch.Tensor, mask: torch.Tensor, seed: int = 9) -> torch.Tensor:
    """x with other (large) values at the padded steps: a head must not see them."""
    noise = 10 * torch.randn(x.shape, generator=_gen(seed), dtype=x.dtype)
    return torch.where(mask[:, None, :], x, noise)


def _headless_message(name: str) -> str:
    return "^" + re.escape(f"the backbone of {name} must have no decoder (build SSMBackbone with d_output=None)") + "$"


# ---------------------------------------------------------------- SequenceHead
@pytest.mark.parametrize("pooling", ["mean", "last"])
def test_sequence_head_pools_the_real_steps_then_applies_the_decoder(pooling):
    """Oracle: numpy mean over the real steps (or the last real step) of backbone.features(x, mask),
    then W z + b; the values at padded steps change nothing."""
    head = SequenceHead(_backbone(), 4, pooling=pooling).double()
    mask = _padding_mask(3, 12)
    x = _garbage_in_padding(_x(3, D_IN, 12), mask)
    features, m = _np(head.backbone.features(x, mask)), mask.numpy()
    if pooling == "mean":
        pooled = (features * m[:, None, :]).sum(-1) / m.sum(-1)[:, None]
    else:
        last = np.array([np.flatnonzero(row).max() for row in m])
        pooled = features[np.arange(3), :, last]
    out = head(x, mask)
    assert out.shape == (3, 4)
    np.testing.assert_allclose(_np(out), _linear_np(head.decoder, pooled), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(head.embed(x, mask)), pooled, rtol=1e-10, atol=1e-12)
    other = _garbage_in_padding(x, mask, seed=10)
    np.testing.assert_allclose(_np(head(other, mask)), _np(out), rtol=1e-10, atol=1e-12)


def test_sequence_head_embed_pooling_argument_overrides_the_head_pooling():
    """Oracle: the last real step of backbone.features (numpy), from a head built with mean pooling."""
    head = SequenceHead(_backbone(), 2, pooling="mean").double()
    mask = _padding_mask(2, 10)
    x = _x(2, D_IN, 10)
    features, m = _np(head.backbone.features(x, mask)), mask.numpy()
    last = np.array([np.flatnonzero(row).max() for row in m])
    np.testing.assert_allclose(
        _np(head.embed(x, mask, pooling="last")), features[np.arange(2), :, last], rtol=1e-10, atol=1e-12
    )


def test_sequence_head_without_decoder_returns_the_pooled_features():
    """d_output=None: forward is the pooled features (batch, d_model) (oracle: numpy mean over L)."""
    head = SequenceHead(_backbone(), None).double()
    assert head.decoder is None
    x = _x(2, D_IN, 9)
    out = head(x)
    assert out.shape == (2, D_MODEL)
    np.testing.assert_allclose(_np(out), _np(head.backbone.features(x)).mean(-1), rtol=1e-10, atol=1e-12)


def test_sequence_head_rejects_an_unknown_pooling_and_a_backbone_with_decoder():
    with pytest.raises(ValueError, match=r"^unknown pooling 'max'; choose one of \('mean', 'last'\)$"):
        SequenceHead(_backbone(), 2, pooling="max")
    with pytest.raises(ValueError, match=_headless_message("SequenceHead")):
        SequenceHead(_backbone(d_output=3), 2)


# ---------------------------------------------------------------- PerStepHead
def test_per_step_head_is_the_decoder_at_every_step_of_the_masked_features():
    """Oracle: W f_t + b in numpy at every step t of backbone.features(x, mask)."""
    head = PerStepHead(_backbone(), 5).double()
    mask = _padding_mask(3, 11)
    x = _garbage_in_padding(_x(3, D_IN, 11), mask)
    out = head(x, mask)
    assert out.shape == (3, 5, 11)
    expected = _per_step_linear_np(head.decoder, _np(head.backbone.features(x, mask)))
    np.testing.assert_allclose(_np(out), expected, rtol=1e-10, atol=1e-12)


def test_per_step_head_streaming_continues_the_full_pass():
    """forward_with_state on two pieces (the second from the first's state), then `step` one step at
    a time, equal the one-shot forward on the whole sequence (eval mode, float64)."""
    head = PerStepHead(_backbone(), 2).double().eval()
    x = _x(2, D_IN, 16)
    full = head(x)
    y1, state = head.forward_with_state(x[..., :6])
    y2, state = head.forward_with_state(x[..., 6:11], state)
    steps = []
    for k in range(11, 16):
        y, state = head.step(x[..., k], state)
        assert y.shape == (2, 2)
        steps.append(y)
    joined = torch.cat([y1, y2, torch.stack(steps, dim=-1)], dim=-1)
    np.testing.assert_allclose(_np(joined), _np(full), rtol=1e-9, atol=1e-11)


def test_per_step_head_rejects_a_backbone_with_decoder():
    with pytest.raises(ValueError, match=_headless_message("PerStepHead")):
        PerStepHead(_backbone(d_output=2), 2)


# ---------------------------------------------------------------- MaskedReconstruction
def _reconstruction_oracle(head: MaskedReconstruction, x, hidden: np.ndarray, mask=None) -> np.ndarray:
    """decoder at every step of backbone.features(x with the hidden steps zeroed, mask)."""
    visible = x * torch.from_numpy(~hidden)[:, None, :].to(x.dtype)
    return _per_step_linear_np(head.decoder, _np(head.backbone.features(visible, mask)))


def test_masked_reconstruction_eval_hides_every_seventh_step_by_default():
    """Default ratio 0.15: in evaluation the hidden steps are every round(1 / 0.15) = 7th step;
    output (batch, C + 1, L) = the reconstruction from the input with those steps zeroed, then the
    hidden-step indicator."""
    head = MaskedReconstruction(_backbone(d_input=2), 2).double().eval()
    x = _x(3, 2, 20)
    out = head(x)
    assert out.shape == (3, 3, 20)
    hidden = np.zeros((3, 20), dtype=bool)
    hidden[:, ::7] = True  # steps 0, 7, 14
    np.testing.assert_array_equal(_np(out[:, -1]), hidden.astype(np.float64))
    np.testing.assert_allclose(_np(out[:, :-1]), _reconstruction_oracle(head, x, hidden), rtol=1e-10, atol=1e-12)


def test_masked_reconstruction_eval_hides_only_real_steps_with_a_mask():
    """ratio 0.5 (every 2nd step) and a padding mask: hidden = every 2nd step AND real; the
    features are computed with the mask (values at padded steps change nothing)."""
    head = MaskedReconstruction(_backbone(d_input=2), 2, ratio=0.5).double().eval()
    mask = _padding_mask(3, 12)
    x = _garbage_in_padding(_x(3, 2, 12), mask)
    out = head(x, mask)
    hidden = (np.arange(12) % 2 == 0)[None, :] & mask.numpy()
    np.testing.assert_array_equal(_np(out[:, -1]), hidden.astype(np.float64))
    expected = _reconstruction_oracle(head, x, hidden, mask)
    np.testing.assert_allclose(_np(out[:, :-1]), expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(head(_garbage_in_padding(x, mask, 10), mask)), _np(out), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("ratio", [0.8, 1.0])
def test_masked_reconstruction_eval_with_a_large_ratio_hides_every_step(ratio):
    """round(1 / ratio) = 1 for ratio > 2/3: every step is hidden and the input is all zeros."""
    head = MaskedReconstruction(_backbone(d_input=2), 2, ratio=ratio).double().eval()
    x = _x(2, 2, 9)
    out = head(x)
    np.testing.assert_array_equal(_np(out[:, -1]), np.ones((2, 9)))
    hidden = np.ones((2, 9), dtype=bool)
    np.testing.assert_allclose(_np(out[:, :-1]), _reconstruction_oracle(head, x, hidden), rtol=1e-10, atol=1e-12)


def test_masked_reconstruction_training_hides_a_random_ratio_of_the_steps():
    """Training: every step of every sample is hidden independently with probability `ratio`
    (binomial oracle: 1600 draws, 0.3 +- 0.05 is > 4 standard deviations); the samples get
    different patterns; the reconstruction is from the input with exactly the reported steps zeroed."""
    head = MaskedReconstruction(_backbone(d_input=2), 2, ratio=0.3).double().train()
    x = _x(32, 2, 50)
    torch.manual_seed(0)
    out = head(x)
    assert out.shape == (32, 3, 50)
    hidden = _np(out[:, -1])
    assert set(np.unique(hidden)) <= {0.0, 1.0}
    assert abs(hidden.mean() - 0.3) < 0.05
    assert len({row.tobytes() for row in hidden}) > 1
    expected = _reconstruction_oracle(head, x, hidden.astype(bool))
    np.testing.assert_allclose(_np(out[:, :-1]), expected, rtol=1e-10, atol=1e-12)


def test_masked_reconstruction_training_never_hides_padded_steps():
    head = MaskedReconstruction(_backbone(d_input=2), 2, ratio=0.9).double().train()
    mask = _padding_mask(4, 12)
    torch.manual_seed(0)
    out = head(_x(4, 2, 12), mask)
    hidden = _np(out[:, -1]).astype(bool)
    assert not (hidden & ~mask.numpy()).any()
    assert hidden.sum() > 0.5 * mask.sum().item()


def test_masked_reconstruction_rejects_a_backbone_with_decoder():
    with pytest.raises(ValueError, match=_headless_message("MaskedReconstruction")):
        MaskedReconstruction(_backbone(d_output=2), 2)


# ---------------------------------------------------------------- DirectForecastHead
@pytest.mark.parametrize("n_exog", [0, 2])
def test_direct_forecast_head_maps_the_last_context_features_and_future_covariates(n_exog):
    """Oracle: z = [backbone.features(x[..., :context])[..., -1], x[:, C:, context:] flattened
    channel by channel]; out = (W z + b) reshaped to (batch, horizon, n_targets, n_quantiles).
    The target channels of the horizon steps are not read."""
    C, c, H, Q, b = 2, 7, 3, 5, 4
    head = DirectForecastHead(_backbone(d_input=C + n_exog), C, n_exog, c, H, Q).double()
    assert (head.n_targets, head.n_exog, head.context_length, head.horizon, head.n_quantiles) == (C, n_exog, c, H, Q)
    x = _x(b, C + n_exog, c + H)
    out = head(x)
    assert out.shape == (b, H, C, Q)
    z = _np(head.backbone.features(x[..., :c]))[..., -1]
    if n_exog:
        z = np.concatenate([z, _np(x[:, C:, c:]).reshape(b, n_exog * H)], axis=1)
    expected = _linear_np(head.head, z).reshape(b, H, C, Q)
    np.testing.assert_allclose(_np(out), expected, rtol=1e-10, atol=1e-12)
    y = x.clone()
    y[:, :C, c:] = 100.0
    np.testing.assert_allclose(_np(head(y)), _np(out), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cls", [DirectForecastHead, RecursiveForecastHead])
def test_forecast_heads_reject_a_backbone_with_decoder(cls):
    with pytest.raises(ValueError, match=_headless_message(cls.__name__)):
        cls(_backbone(d_output=2), 1, 0, 5, 2, 3)


# ---------------------------------------------------------------- RecursiveForecastHead
def test_recursive_forecast_head_reads_every_channel_by_default():
    """time_deltas defaults to False: no channel is taken as a time gap; the outputs are the decoder
    at the steps context-1 .. context+horizon-2 (oracle: numpy on backbone.features(x))."""
    C, Cx, c, H, Q, b = 2, 1, 6, 3, 2, 3
    head = RecursiveForecastHead(_backbone(d_input=C + Cx), C, Cx, c, H, Q).double()
    assert head.time_deltas is False
    x = _x(b, C + Cx, c + H - 1)
    out = head(x)
    assert out.shape == (b, H, C, Q)
    decoded = _per_step_linear_np(head.decoder, _np(head.backbone.features(x)))[..., c - 1 :]
    expected = decoded.reshape(b, C, Q, H).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(_np(out), expected, rtol=1e-10, atol=1e-12)


def test_recursive_forecast_head_steps_by_fractional_gaps_and_by_one_over_a_zero_gap():
    """time_deltas: the last channel is the gap; a position steps by Delta times its gap (here
    fractions of a period, 0.25 .. 0.75) and by one unit where the gap is 0 (padding). Oracle: the
    backbone's features with dt = that gap (numpy where), decoded in numpy."""
    C, c, H, Q, b = 1, 5, 3, 2, 2
    head = RecursiveForecastHead(_backbone(d_input=C), C, 0, c, H, Q, time_deltas=True).double()
    L = c + H - 1
    gaps = torch.linspace(0.25, 0.75, L, dtype=torch.float64).repeat(b, 1)
    gaps[:, -1] = 0.0
    x = torch.cat([_x(b, C, L), gaps[:, None, :]], dim=1)
    dt = torch.from_numpy(np.where(gaps.numpy() > 0, gaps.numpy(), 1.0))
    decoded = _per_step_linear_np(head.decoder, _np(head.backbone.features(x[:, :C], dt=dt)))[..., c - 1 :]
    expected = decoded.reshape(b, C, Q, H).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(_np(head(x)), expected, rtol=1e-10, atol=1e-12)
    unit = _per_step_linear_np(head.decoder, _np(head.backbone.features(x[:, :C])))[..., c - 1 :]
    assert np.abs(unit.reshape(b, C, Q, H).transpose(0, 3, 1, 2) - expected).max() > 1e-6


# ---------------------------------------------------------------- ForecastEnsemble
def test_forecast_ensemble_stacks_its_members_on_axis_one():
    """forward -> (batch, members, horizon, n_targets, n_quantiles); member m's slice is member m's
    own forecast (oracle: each member called alone)."""
    members = [DirectForecastHead(_backbone(seed, d_input=2), 1, 1, 6, 2, 3).double() for seed in range(3)]
    ensemble = ForecastEnsemble(members)
    x = _x(4, 2, 8)
    out = ensemble(x)
    assert out.shape == (4, 3, 2, 1, 3)
    for m, member in enumerate(members):
        np.testing.assert_array_equal(_np(out[:, m]), _np(member(x)))
    assert np.abs(_np(out[:, 0] - out[:, 1])).max() > 1e-6  # differently initialized members


def test_forecast_ensemble_passes_the_mask_to_every_member():
    """Oracle: every member called alone with the same mask (members that pool over real steps)."""
    members = [SequenceHead(_backbone(seed), 2).double() for seed in range(2)]
    ensemble = ForecastEnsemble(members)
    mask = _padding_mask(3, 10)
    x = _garbage_in_padding(_x(3, D_IN, 10), mask)
    out = ensemble(x, mask)
    assert out.shape == (3, 2, 2)
    for m, member in enumerate(members):
        np.testing.assert_array_equal(_np(out[:, m]), _np(member(x, mask)))
        assert np.abs(_np(out[:, m]) - _np(member(x))).max() > 1e-6


# ---------------------------------------------------------------- TwoTowerRetrieval
def _gelu_np(h: np.ndarray) -> np.ndarray:
    return 0.5 * h * (1.0 + np.vectorize(math.erf)(h / math.sqrt(2.0)))


def _retrieval_oracle(model: TwoTowerRetrieval, x: torch.Tensor, mask: torch.Tensor | None) -> np.ndarray:
    """Each document encoded alone, mean-pooled over its real steps (numpy), then
    [y1, y2, y1*y2, y1-y2] -> Linear -> GELU (erf form) -> Linear in numpy."""
    pooled = np.zeros((x.shape[0], 2, model.backbone.d_model))
    for i in range(x.shape[0]):
        for d in range(2):
            m = None if mask is None else mask[i, d][None]
            f = _np(model.backbone.features(x[i, d][None], m))[0]
            w = np.ones(x.shape[-1]) if mask is None else mask[i, d].numpy().astype(np.float64)
            pooled[i, d] = (f * w).sum(-1) / w.sum()
    y1, y2 = pooled[:, 0], pooled[:, 1]
    first, _, second = model.head
    z = np.concatenate([y1, y2, y1 * y2, y1 - y2], axis=-1)
    return _linear_np(second, _gelu_np(_linear_np(first, z)))


def _documents(batch: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Byte ids 1..10, and a mask whose padded steps (at both ends) hold nonzero ids too."""
    x = torch.randint(1, 11, (batch, 2, length), generator=_gen(3))
    mask = torch.stack([_padding_mask(batch, length), _padding_mask(batch, length).flip(0)], dim=1)
    return x, mask


def test_two_tower_retrieval_combines_the_two_mean_pooled_documents():
    """Oracle: _retrieval_oracle (documents encoded one at a time, numpy mean pooling and MLP)."""
    model = TwoTowerRetrieval(_backbone(vocab_size=11), n_classes=3).double()
    x, mask = _documents(3, 10)
    out = model(x, mask)
    assert out.shape == (3, 3)
    np.testing.assert_allclose(_np(out), _retrieval_oracle(model, x, mask), rtol=1e-9, atol=1e-11)
    other = torch.where(mask, x, torch.randint(1, 11, x.shape, generator=_gen(4)))
    np.testing.assert_allclose(_np(model(other, mask)), _np(out), rtol=1e-9, atol=1e-11)


def test_two_tower_retrieval_without_mask_pools_every_step_into_two_classes():
    """mask=None: mean over all steps; n_classes defaults to 2 (binary: same topic or not)."""
    model = TwoTowerRetrieval(_backbone(vocab_size=11)).double()
    x, _ = _documents(3, 10)
    out = model(x)
    assert out.shape == (3, 2)
    np.testing.assert_allclose(_np(out), _retrieval_oracle(model, x, None), rtol=1e-9, atol=1e-11)


def test_two_tower_retrieval_rejects_bad_shapes_and_a_backbone_with_decoder():
    model = TwoTowerRetrieval(_backbone(vocab_size=11)).double()
    for shape in [(2, 3, 6), (2, 6), (2, 1, 6)]:
        message = "^" + re.escape(f"retrieval input must have shape (batch, 2, length), got {shape}") + "$"
        with pytest.raises(ValueError, match=message):
            model(torch.ones(shape, dtype=torch.int64))
    message = "^" + re.escape("the retrieval encoder must have no decoder (build SSMBackbone with d_output=None)") + "$"
    with pytest.raises(ValueError, match=message):
        TwoTowerRetrieval(_backbone(vocab_size=11, d_output=2))
