"""SSMFeatures against independent oracles: the recurrence run step by step, numpy's pooling,
unpadded series one at a time, and the continuous-time meaning of Delta (zero-shot rates)."""

import math

import numpy as np
import pytest
import torch
from scipy import signal

from ssmts.nn import FeatureReadout, SSMFeatures, log_spaced_steps, scaled_delta


def _system(features: SSMFeatures, scale: int):
    """(Lambda (P,), readout (M, P), Delta) of one scale, complex128."""
    return (
        torch.view_as_complex(features.Lambda_pairs).numpy(),
        torch.view_as_complex(features.readout_pairs)[scale].numpy(),
        float(features.steps[scale]),
    )


# (channels, kernels, length): channels x 2P >= kernels convolves every kernel (3 x 8 >= 5), also with an odd
# FFT length (13 steps: 25); fewer go through the 2P mode responses of each channel and combine them
# (1 x 8 < 20, 2 x 8 < 40).
@pytest.mark.parametrize("channels, n_kernels, length", [(3, 5, 40), (3, 5, 13), (1, 20, 40), (2, 40, 40)])
def test_responses_equal_the_zoh_recurrence_run_step_by_step(channels, n_kernels, length):
    """y_m[t] = 2 Re(sum_p C_mp x_p[t]), x_p[t] = Abar_p x_p[t-1] + gamma_p B_p u_m[t], with u_m the sum of
    the channels kernel m reads: a float64 loop over time, against the FFT responses (float32)."""
    torch.manual_seed(0)
    features = SSMFeatures(channels, log_spaced_steps(40, 3), n_kernels=n_kernels, d_state=8, seed=1)
    u = torch.randn(2, channels, length, dtype=torch.float64)
    y = features.responses(u).double().numpy()  # (b, S, M, L)
    mix = features.channel_mix.numpy()
    for s in range(features.n_scales):
        Lambda, readout, Delta = _system(features, s)
        Abar = np.exp(Lambda * Delta)
        gamma = (Abar - 1.0) / Lambda  # ZOH
        for m in range(features.n_kernels):
            drive = np.einsum("h,bhl->bl", mix[s, m], u.numpy())
            x = np.zeros((2, len(Lambda)), dtype=np.complex128)
            expected = np.empty((2, length))
            for t in range(length):
                x = Abar * x + gamma * drive[:, t, None]
                expected[:, t] = 2.0 * (x @ readout[m]).real
            np.testing.assert_allclose(y[:, s, m], expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def test_kernels_equal_the_impulse_response_of_the_real_system():
    """K_m is the impulse response of the real 2P-state system that scipy discretizes and simulates with the
    step given (a Python float, kept exactly)."""
    features = SSMFeatures(1, [0.3], n_kernels=2, d_state=6, seed=0)
    Lambda, readout, _ = _system(features, 0)
    Delta = 0.3
    # The real system of the conjugate pairs: per mode a + ib the block [[a, -b], [b, a]] on (Re x, Im x),
    # input 1 into Re x, output 2 Re(c x) = 2 Re(c) Re(x) - 2 Im(c) Im(x).
    P = len(Lambda)
    A = np.zeros((2 * P, 2 * P))
    b = np.zeros((2 * P, 1))
    for p, lam in enumerate(Lambda):
        A[2 * p : 2 * p + 2, 2 * p : 2 * p + 2] = [[lam.real, -lam.imag], [lam.imag, lam.real]]
        b[2 * p] = 1.0
    impulse = np.zeros(31)
    impulse[0] = 1.0
    for m in range(2):
        c = np.zeros((1, 2 * P))
        c[0, 0::2], c[0, 1::2] = 2.0 * readout[m].real, -2.0 * readout[m].imag
        Ad, Bd, Cd, Dd, _ = signal.cont2discrete((A, b, c, np.zeros((1, 1))), Delta, method="zoh")
        _, expected, _ = signal.dlsim((Ad, Bd, Cd, Dd, Delta), impulse)
        # dlsim's y[k] reads the state before u[k] enters, so K[l] = y[l + 1].
        np.testing.assert_allclose(features.kernels(30)[0, m].numpy(), expected[1:, 0], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("n_kernels, n_biases", [(3, 2), (1, 1)])
def test_pooling_equals_numpy_and_padding_changes_nothing(n_kernels, n_biases):
    """PPV at each bias, the mean and the maximum of every response, over each series' own steps; a
    padded batch of unequal lengths (down to one step) gives each series' features as if it were alone."""
    torch.manual_seed(2)
    features = SSMFeatures(2, log_spaced_steps(30, 2), n_kernels=n_kernels, n_biases=n_biases, seed=0)
    features.biases.normal_()
    lengths = [30, 17, 24, 1]
    series = [torch.randn(2, n) for n in lengths]
    padded = torch.zeros(4, 2, 30)
    mask = torch.zeros(4, 30)
    for i, x in enumerate(series):
        padded[i, :, : len(x[0])], mask[i, : len(x[0])] = x, 1.0
    batch = features(padded, mask)
    for i, x in enumerate(series):
        alone = features(x[None])
        np.testing.assert_allclose(batch[i].numpy(), alone[0].numpy(), rtol=1e-5, atol=1e-6)
        y = features.responses(x[None])[0].numpy()  # (S, M, L_i)
        b = features.biases.numpy()
        expected = np.concatenate(
            [(y[..., None, :] > b[..., None]).mean(-1), y.mean(-1)[..., None], y.max(-1)[..., None]], -1
        )
        np.testing.assert_allclose(alone[0].numpy(), expected.reshape(-1), rtol=1e-5, atol=1e-6)


def test_steps_span_a_few_steps_to_the_series_length():
    steps = log_spaced_steps(1000, 4, shortest=4.0)
    np.testing.assert_allclose(1.0 / steps.numpy(), [4.0, 4.0 * 250 ** (1 / 3), 4.0 * 250 ** (2 / 3), 1000.0])
    assert log_spaced_steps(2, 3, shortest=4.0).allclose(torch.full((3,), 0.25, dtype=torch.float64))
    with pytest.raises(ValueError, match="length >= 1"):
        log_spaced_steps(0, 3)


def test_channel_mixes_read_one_to_max_channels_channels():
    features = SSMFeatures(12, log_spaced_steps(10, 3), n_kernels=50, max_channels=5, seed=0)
    sizes = features.channel_mix.sum(-1)
    assert sizes.min() >= 1 and sizes.max() <= 5 and len(torch.unique(sizes)) > 2
    assert set(torch.unique(features.channel_mix).tolist()) == {0.0, 1.0}


def test_features_are_those_of_the_same_signal_at_twice_the_rate_with_delta_halved():
    """Delta is a time step: a smooth signal sampled twice as densely, read with every Delta halved
    (scaled_delta(0.5)), gives nearly the same responses at the common instants, so nearly the same
    features; the differences are rescaled to the same derivative."""
    t_slow = np.arange(200) / 20.0
    t_fast = np.arange(400) / 40.0
    wave = lambda t: np.sin(0.7 * t) + 0.5 * np.cos(0.23 * t + 1.0)  # noqa: E731
    slow = torch.tensor(wave(t_slow), dtype=torch.float32)[None, None]
    fast = torch.tensor(wave(t_fast), dtype=torch.float32)[None, None]
    network = FeatureReadout(1, log_spaced_steps(200, 4, shortest=8.0), 1, n_kernels=6, seed=0)
    network.fit_biases(lambda i: slow[0], 1)
    y_slow = network.series.responses(slow)[0]
    with scaled_delta(network, 0.5):
        y_fast = network.series.responses(fast)[0][..., 1::2]
        f_fast = network.features(fast)
    scale = y_slow.abs().amax()
    assert (y_fast - y_slow).abs().amax() < 0.05 * scale  # ZOH of a signal sampled 20 vs 40 times a unit
    f_slow = network.features(slow)
    mean_and_max = torch.ones(f_slow.shape[1], dtype=torch.bool).reshape(-1, 6)
    mean_and_max[:, :4] = False  # PPV can jump where a response crosses a bias
    close = (f_fast - f_slow).abs().reshape(-1, 6)[mean_and_max.reshape(-1, 6)]
    assert close.max() < 0.05 * f_slow.abs().max()
    with scaled_delta(network, 0.5):  # differences per training step: twice the fine ones
        assert torch.allclose(network._differences(fast), 2.0 * torch.diff(fast, dim=-1))


def test_readout_outputs_do_not_depend_on_the_batch():
    network = FeatureReadout(1, log_spaced_steps(20, 2), 3, n_kernels=4, seed=0)
    x = torch.randn(7, 1, 20, generator=torch.Generator().manual_seed(1))
    network.fit_biases(lambda i: x[i], 7)
    assert torch.equal(network.features(x)[2:5], network.features(x[2:5]))
    # The float64 read-out's blocked sums may round differently with the batch size: 1e-16, far below float32.
    torch.testing.assert_close(network(x)[2:5], network(x[2:5]), rtol=0, atol=1e-12)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"^every step Delta must be > 0$"):
        SSMFeatures(1, torch.tensor([0.1, 0.0]))
    with pytest.raises(ValueError, match="n_kernels"):
        SSMFeatures(1, torch.tensor([0.1]), n_kernels=0)
    features = SSMFeatures(2, torch.tensor([0.1]))
    with pytest.raises(ValueError, match=r"\(batch, 2, length\)"):
        features.responses(torch.zeros(1, 3, 10))
    network = FeatureReadout(1, torch.tensor([0.1]), 1)
    with pytest.raises(
        ValueError, match=r"^the first difference needs series of at least 2 steps \(difference=True\)$"
    ):
        network.features(torch.zeros(1, 1, 1))


@pytest.mark.parametrize("channels, n_kernels, length", [(3, 5, 40), (3, 5, 13), (1, 20, 40)])
def test_backward_responses_are_the_kernels_run_over_the_steps_after(channels, n_kernels, length):
    """backward=True: y_m[t] = sum_l K_m[l] u_m[t + l] (a float64 loop over the kernels), through both FFT
    paths; a series padded with zeros after its end has the same responses on its real steps, and
    padded steps are above no bias, so a padded batch pools as the series one at a time."""
    features = SSMFeatures(channels, log_spaced_steps(40, 3), n_kernels=n_kernels, d_state=8, backward=True, seed=1)
    u = torch.randn(2, channels, length, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    y = features.responses(u).double().numpy()
    K = features.kernels(length).numpy()
    drive = np.einsum("smh,bhl->bsml", features.channel_mix.numpy(), u.numpy())
    expected = np.zeros_like(y)
    for t in range(length):
        expected[..., t] = np.einsum("sml,bsml->bsm", K[..., : length - t], drive[..., t:])
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
    padded = torch.cat([u, torch.zeros(2, channels, 7, dtype=torch.float64)], -1)
    np.testing.assert_allclose(features.responses(padded).double().numpy()[..., :length], y, rtol=1e-4, atol=1e-5)
    features.fit_biases(lambda i: u[i], 2, seed=0)
    mask = torch.ones(2, length + 7)
    mask[:, length:] = 0
    np.testing.assert_allclose(features(padded, mask).numpy(), features(u).numpy(), rtol=1e-5, atol=1e-6)
    # Whatever the padding holds (standardized zeros are not zero): the mask decides.
    np.testing.assert_allclose(
        features(padded + 5.0 * (1 - mask[:, None]), mask).numpy(), features(u).numpy(), rtol=1e-5, atol=1e-6
    )


def test_backward_banks_have_their_own_draws_and_double_the_features():
    forward_only = FeatureReadout(2, log_spaced_steps(30, 2), 1, n_kernels=4, d_state=8, seed=0)
    both = FeatureReadout(2, log_spaced_steps(30, 2), 1, n_kernels=4, d_state=8, backward=True, seed=0)
    assert both.readout.in_features == 2 * forward_only.readout.in_features
    assert torch.equal(both.series.readout_pairs, forward_only.series.readout_pairs)
    draws = [
        bank.readout_pairs for bank in (both.series, both.difference, both.series_backward, both.difference_backward)
    ]
    assert all(not torch.equal(a, b) for i, a in enumerate(draws) for b in draws[i + 1 :])
    assert both.series_backward.backward and both.difference_backward.backward and not both.series.backward
    u = torch.randn(3, 2, 30, generator=torch.Generator().manual_seed(1))
    both.fit_biases(lambda i: u[i], 3)
    forward_only.fit_biases(lambda i: u[i], 3)
    n = forward_only.readout.in_features
    torch.testing.assert_close(both.features(u)[:, :n], forward_only.features(u), rtol=0, atol=0)


@pytest.mark.parametrize("L", [1, 127, 128, 300, 1461])
def test_count_above_equals_a_count_by_comparison(L):
    """The chunked byte count against numpy's count, with padded steps at -inf and ties at a bias
    (a tie is not above), beyond a byte's 255 and across chunk ends."""
    from ssmts.nn.features import _comparison_buffer, _count_above

    rng = np.random.default_rng(L)
    y = torch.from_numpy(rng.standard_normal((3, 5, L)).astype(np.float32))
    y[0, :, L // 2 :] = -math.inf
    biases = torch.from_numpy(rng.standard_normal((5, 4)).astype(np.float32))
    biases[1, 2] = y[2, 1, 0]  # a response step equal to its bias
    counts = _count_above(y, biases, _comparison_buffer(3, 5, 4, L))
    expected = (y.numpy()[:, :, None, :] > biases.numpy()[None, :, :, None]).sum(-1)
    assert counts.dtype == torch.int32
    np.testing.assert_array_equal(counts.numpy(), expected)


# (channels, kernels): up to COMPILED_RECURRENCE_STATES real states (channels x 2P, 2P = d_state = 8 here) the
# compiled pass recurs the modes and reads them out; 21 x 8 = 168 beyond it convolve every kernel and pool compiled.
@pytest.mark.parametrize("channels, n_kernels", [(1, 20), (3, 5), (21, 3)])
@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("factor", [1.0, 2.0])
def test_compiled_features_equal_a_float64_filter_of_each_series_pooled_by_numpy(channels, n_kernels, backward, factor):
    """The compiled pass (no gradient; both branches) against an independent float64 oracle: every mode of
    every kernel run by scipy's lfilter (x[t] = Abar x[t-1] + gamma u[t]; backwards, the reversed series), read out,
    and pooled by numpy over each series' own steps (unequal lengths, padded with junk after their end),
    at the training rate and, factor 2, at half of it (`scaled_delta`, with its quasi-static modes).
    Counts of PPV must agree exactly except where a response lies within float32's error of a bias."""
    from ssmts.nn.features import COMPILED_RECURRENCE_STATES

    length = 300
    features = SSMFeatures(
        channels, log_spaced_steps(length, 4, shortest=1.0), n_kernels=n_kernels, d_state=8, backward=backward, seed=3
    )
    states = channels * features._readout_weights().shape[-1]
    assert (states > COMPILED_RECURRENCE_STATES) == (channels == 21)  # both branches are covered
    rng = np.random.default_rng(7)
    lengths = [300, 211, 64, 2]
    u = torch.from_numpy(rng.standard_normal((4, channels, length)).cumsum(-1).astype(np.float32) * 0.2)
    mask = torch.zeros(4, length)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1.0
        u[i, :, n:] = 9.0  # padding the mask must hide
    features.fit_biases(lambda i: u[i, :, : lengths[i]], 4, seed=0)
    with scaled_delta(features, factor), torch.no_grad():
        got = features(u, mask).double().numpy().reshape(4, features.n_scales, n_kernels, -1)
        gamma, exponent, quasi_static = (t.numpy() for t in features._discrete_modes())
    assert factor == 1.0 or quasi_static.any()  # the shortest step's fastest modes lie above the new Nyquist rate
    abar = np.where(quasi_static, 0.0, np.exp(exponent))
    readout = torch.view_as_complex(features.readout_pairs).numpy()  # (S, M, P): C B
    mix, biases = features.channel_mix.numpy(), features.biases.double().numpy()
    Q = features.n_biases

    def run(s: int, m: int, x: np.ndarray) -> np.ndarray:
        """Kernel m of scale s over x: each mode by lfilter, read out in float64."""
        states = np.stack([signal.lfilter([g], [1.0, -a], x) for g, a in zip(gamma[s], abar[s])])
        return 2.0 * (readout[s, m] @ states).real

    for i, n in enumerate(lengths):
        series = u[i, :, :n].double().numpy()
        drive = np.einsum("smh,hl->sml", mix, series)
        for s in range(features.n_scales):
            for m in range(n_kernels):
                y = run(s, m, drive[s, m, ::-1] if backward else drive[s, m])
                # |y| <= max |x| x sum |K|: float32 arithmetic errs in proportion to that bound, and an FFT
                # of the padded batch in proportion to the padding's values too
                bound = np.abs(mix[s, m] @ u[i].abs().double().numpy()).max() * np.abs(run(s, m, np.eye(1, n)[0])).sum()
                counts = (y[:, None] > biases[s, m]).sum(0)
                near = (np.abs(y[:, None] - biases[s, m]) < 5e-5 * bound).any(0)
                np.testing.assert_array_equal((got[i, s, m, :Q] * n).round()[~near], counts[~near])
                np.testing.assert_allclose(got[i, s, m, Q:], [y.mean(), y.max()], rtol=1e-4, atol=5e-5 * bound)


def test_a_mask_with_gaps_pools_its_marked_steps():
    """A mask that is not a prefix (a gap inside the series) is pooled over its marked steps only (the
    tensor path; the compiled pass takes padding at the end only)."""
    features = SSMFeatures(1, log_spaced_steps(50, 2), n_kernels=3, d_state=8, seed=0)
    u = torch.randn(1, 1, 50, generator=torch.Generator().manual_seed(0))
    features.fit_biases(lambda i: u[i], 1, seed=0)
    mask = torch.ones(1, 50)
    mask[0, 10:20] = 0
    y = features.responses(u)[0].numpy()[..., mask[0].bool().numpy()]  # (S, M, 40)
    b = features.biases.numpy()
    expected = np.concatenate(
        [(y[..., None, :] > b[..., None]).mean(-1), y.mean(-1)[..., None], y.max(-1)[..., None]], -1
    )
    np.testing.assert_allclose(features(u, mask)[0].numpy(), expected.reshape(-1), rtol=1e-5, atol=1e-6)


def test_order_statistics_are_those_of_a_full_sort():
    """The partial sort picks, for each row, the values a sort would put at the given ranks (ties, the
    first and the last rank, a rank asked twice)."""
    from ssmts.nn.features import _order_statistics

    rng = np.random.default_rng(0)
    rows = rng.integers(0, 20, (50, 37)).astype(np.float32)  # many ties
    ranks = rng.integers(0, 37, (50, 6))
    ranks[0] = [0, 36, 5, 5, 18, 0]
    expected = np.take_along_axis(np.sort(rows, axis=1), ranks, axis=1)
    np.testing.assert_array_equal(_order_statistics(rows, ranks), expected)
