"""SSMFeatures and FeatureReadout against independent oracles: numpy's geomspace for the steps, the
HiPPO-LegS matrices written out and discretized by scipy for the SSMs, MiniRocket's rules for the
channel mixes and the biases (in numpy), and the composition series + numpy differences."""

import math

import numpy as np
import pytest
import torch
from scipy.linalg import expm

from ssmts.nn import FeatureReadout, SSMFeatures, log_spaced_steps


def _legs_normal(N: int) -> tuple[np.ndarray, np.ndarray]:
    """The normal part of HiPPO-LegS, A + p p^T (p_n = sqrt(n + 1/2)), and its B (B_n = sqrt(2n+1))."""
    n = np.arange(N, dtype=np.float64)
    r = np.sqrt(2.0 * n + 1.0)
    A = -np.tril(np.outer(r, r), -1) - np.diag(n + 1.0)
    p = np.sqrt(n + 0.5)
    return A + np.outer(p, p), r


def _state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Parameters (frozen until trained) and buffers."""
    return {name: value.clone() for name, value in module.state_dict().items()}


def _minirocket_quantile(y: np.ndarray, level: float) -> float:
    """Midway between the order statistics of y at and after floor(level (L - 1))."""
    v = np.sort(y)
    k = int(math.floor(level * (len(v) - 1)))
    return 0.5 * (v[k] + v[min(k + 1, len(v) - 1)])


def _bias_sources(features: SSMFeatures, rows: list[torch.Tensor]) -> list[set[int]]:
    """For each kernel (scale-major), the training series whose response has the kernel's biases as quantiles."""
    responses = [features.responses(row[None])[0].double().numpy() for row in rows]  # (S, M, L_i) each
    levels, biases = features.bias_levels.numpy(), features.biases.double().numpy()
    sources = []
    for s in range(features.n_scales):
        for m in range(features.n_kernels):
            matching = set()
            for i, y in enumerate(responses):
                expected = [_minirocket_quantile(y[s, m], level) for level in levels[s, m]]
                scale = max(1.0, np.abs(y[s, m]).max())
                if np.allclose(biases[s, m], expected, rtol=1e-5, atol=1e-6 * scale):
                    matching.add(i)
            sources.append(matching)
    return sources


def test_steps_are_log_spaced_memories_from_shortest_to_length():
    """1 / Delta is numpy's geomspace from `shortest` (4 steps by default) to the length; one scale takes the
    geometric middle; a length under `shortest` (down to one step) leaves every memory at `shortest`."""
    np.testing.assert_allclose(1.0 / log_spaced_steps(1000, 3).numpy(), np.geomspace(4.0, 1000.0, 3), rtol=1e-12)
    np.testing.assert_allclose(1.0 / log_spaced_steps(90, 4, 2.5).numpy(), np.geomspace(2.5, 90.0, 4), rtol=1e-12)
    one = log_spaced_steps(1000, 1)
    assert one.dtype == torch.float64 and one.shape == (1,)
    np.testing.assert_allclose(1.0 / one.numpy(), [math.sqrt(4.0 * 1000.0)], rtol=1e-15)
    for n_scales in (1, 3):
        steps = log_spaced_steps(1, n_scales)
        assert steps.dtype == torch.float64
        np.testing.assert_allclose(steps.numpy(), np.full(n_scales, 0.25), rtol=1e-15)
    with pytest.raises(ValueError, match="n_scales >= 1"):
        log_spaced_steps(10, 0)


def test_kernels_are_the_legs_normal_system_read_out_by_gaussian_rows():
    """K_m[l] = C0_m Ad^l Bd for the real N-state LegS normal system (A, B from HiPPO's formulas, ZOH by scipy's
    expm): the least-squares C0 fits the kernels exactly, and its entries have the variance 1/N of S5's
    Gaussian C0 in every state (a B other than HiPPO's, or C divided by it, would skew them by mode)."""
    N, L, M = 8, 60, 200
    features = SSMFeatures(1, [0.5, 0.2], n_kernels=M, d_state=N, seed=0)
    K = features.kernels(L).numpy()
    A, B0 = _legs_normal(N)
    for s, Delta in enumerate([0.5, 0.2]):
        Ad = expm(A * Delta)
        Bd = np.linalg.solve(A, (Ad - np.eye(N)) @ B0)
        h = np.stack([np.linalg.matrix_power(Ad, l) @ Bd for l in range(L)], axis=1)  # (N, L)
        C0 = np.linalg.lstsq(h.T, K[s].T, rcond=None)[0]  # (N, M)
        np.testing.assert_allclose(h.T @ C0, K[s].T, atol=1e-10 * np.abs(K[s]).max())
        assert np.all(np.abs(C0.var(axis=1) * N - 1.0) < 0.3), C0.var(axis=1) * N


def test_defaults_are_64_kernels_of_the_32_state_legs_head_with_4_biases_and_seed_0():
    """Without options: 64 kernels per scale on the 16 conjugate modes of the 32-state LegS normal part (numpy's
    eigenvalues), 4 biases (6 features per kernel), the difference featurized too, seed 0 for the SSMs and
    for the draw of the training series."""
    steps = log_spaced_steps(20, 2)
    features = SSMFeatures(1, steps)
    assert features.n_features == 2 * 64 * 6
    modes = np.linalg.eigvals(_legs_normal(32)[0])
    modes = modes[modes.imag > 0]
    Lambda = torch.view_as_complex(features.Lambda_pairs).numpy()
    Lambda, modes = Lambda[np.argsort(Lambda.imag)], modes[np.argsort(modes.imag)]
    np.testing.assert_allclose(Lambda, modes, atol=1e-8)
    for name, value in SSMFeatures(1, steps, seed=0).state_dict().items():
        assert torch.equal(_state(features)[name], value), name

    network = FeatureReadout(1, steps, 1)
    for module in (network.series, network.difference):
        assert torch.equal(module.Lambda_pairs, features.Lambda_pairs) and module.n_kernels == 64
    x = torch.randn(4, 1, 20, generator=torch.Generator().manual_seed(0))
    assert network.features(x).shape == (4, 2 * 2 * 64 * 6)
    explicit = FeatureReadout(1, steps, 1, seed=0)
    assert all(torch.equal(a, b) for a, b in zip(network.buffers(), explicit.buffers()))
    network.fit_biases(lambda i: x[i], 4)
    explicit.fit_biases(lambda i: x[i], 4, seed=0)
    assert torch.equal(network.features(x), explicit.features(x))


def test_channel_mix_sizes_are_log_uniform_up_to_9_channels_as_minirocket():
    """MiniRocket's multivariate draw: a kernel reads 2^U(0, log2(min(H, 9) + 1)) channels (floored), so
    P(size = k) = log2((k + 1) / k) / log2(10) for k = 1..9 out of 12 channels, each a distinct channel."""
    features = SSMFeatures(12, log_spaced_steps(10, 4), n_kernels=500, d_state=2, seed=0)
    mix = features.channel_mix
    assert set(torch.unique(mix).tolist()) == {0.0, 1.0}
    sizes = mix.sum(-1).long().reshape(-1).numpy()
    assert sizes.min() >= 1 and sizes.max() <= 9
    k = np.arange(1, 10)
    expected = np.log2((k + 1) / k) / np.log2(10.0)
    observed = np.bincount(sizes, minlength=10)[1:] / len(sizes)
    np.testing.assert_allclose(observed, expected, atol=0.035)


def test_one_channel_mix_reads_it_and_draws_what_the_general_loop_draws():
    """With one channel every kernel reads it, and the shortcut leaves the generator where the per-kernel
    loop (a size draw and a permutation of the one channel each) leaves it: later draws (bias levels) are
    those of the loop."""
    from ssmts.nn.features import _channel_mix

    fast, loop = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(_channel_mix(4, 7, 1, 9, fast), torch.ones(4, 7, 1, dtype=torch.float64))
    for _ in range(4 * 7):
        torch.rand(1, generator=loop)
        torch.randperm(1, generator=loop)
    assert torch.equal(torch.rand(5, generator=fast), torch.rand(5, generator=loop))


def test_construction_and_fitting_follow_the_seed_and_leave_the_global_rng_alone():
    """Every draw (read-outs, channel mixes, bias levels, the training series of each kernel) comes from the
    seed: the same seed gives the same state, another seed another, and torch's global RNG is not touched."""
    data = torch.randn(4, 3, 16, generator=torch.Generator().manual_seed(0))
    steps = log_spaced_steps(16, 2)
    state = torch.get_rng_state()
    first = SSMFeatures(3, steps, n_kernels=6, d_state=8, seed=7).fit_biases(lambda i: data[i], 4, seed=2)
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(123)
    second = SSMFeatures(3, steps, n_kernels=6, d_state=8, seed=7).fit_biases(lambda i: data[i], 4, seed=2)
    for name, value in first.state_dict().items():
        assert torch.equal(value, _state(second)[name]), name
    other = SSMFeatures(3, steps, n_kernels=6, d_state=8, seed=8).fit_biases(lambda i: data[i], 4, seed=3)
    for name in ("readout_pairs", "channel_mix", "bias_levels", "biases"):
        assert not torch.equal(_state(first)[name], _state(other)[name]), name


def test_a_flat_series_is_above_none_of_its_own_biases():
    """A zero series has zero responses, so biases fitted on it are 0 and PPV (the share of steps strictly
    above a bias, numpy's (y > b).mean()) is 0, as are the mean and the maximum."""
    features = SSMFeatures(2, log_spaced_steps(16, 2), n_kernels=5, n_biases=3, d_state=8, seed=0)
    zero = torch.zeros(1, 2, 16)
    features.fit_biases(lambda i: zero[0], 1, seed=0)
    y = features.responses(zero)[0].numpy()
    b = features.biases.numpy()
    expected = np.concatenate(
        [(y[..., None, :] > b[..., None]).mean(-1), y.mean(-1)[..., None], y.max(-1)[..., None]], -1
    )
    assert np.all(expected == 0.0)
    np.testing.assert_array_equal(features(zero)[0].numpy(), expected.reshape(-1))


def test_responses_of_chosen_scales_are_those_of_all_scales():
    features = SSMFeatures(2, log_spaced_steps(20, 3), n_kernels=4, d_state=8, seed=0)
    u = torch.randn(2, 2, 20, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(features.responses(u, slice(1, 3)), features.responses(u)[:, 1:3])


# (channels, length, d_state): several channels through the mixes; with 8 states, 2P = 8 < 16 kernels goes
# through the mode responses; short series, where the order statistic after the level's is the last one (or
# the only one).
@pytest.mark.parametrize("channels, length, d_state", [(1, 50, 32), (3, 50, 32), (1, 5, 8), (2, 2, 8), (1, 1, 8)])
def test_biases_are_minirocket_quantiles_of_responses_to_training_series_drawn_at_random(channels, length, d_state):
    """Each kernel's biases are the quantiles of its response to one training series at its levels, midway
    between the order statistics at and after floor(level (L - 1)) (numpy), and the series is drawn at random
    for each kernel: 32 kernels draw every one of 4 training series."""
    features = SSMFeatures(channels, log_spaced_steps(50, 2), n_kernels=16, d_state=d_state, n_biases=3, seed=3)
    data = torch.randn(4, channels, length, generator=torch.Generator().manual_seed(1))
    features.fit_biases(lambda i: data[i], 4, seed=0)
    sources = _bias_sources(features, list(data))
    assert all(sources), sources
    assert set().union(*sources) == {0, 1, 2, 3}
    levels = features.bias_levels
    assert (levels >= 0.1).all() and (levels <= 0.9).all()


@pytest.mark.parametrize("backward", [False, True])
def test_biases_of_series_of_unequal_lengths_are_quantiles_of_their_own_responses(backward):
    """Series of four lengths (each drawn series run alone, unpadded), forward and backward in time; 2 channels
    x 8 modes < 40 kernels, so the bank's responses go through the mode responses while fit_biases runs only
    the kernels drawn for each series."""
    features = SSMFeatures(2, log_spaced_steps(50, 3), n_kernels=40, d_state=8, n_biases=3, backward=backward, seed=5)
    g = torch.Generator().manual_seed(2)
    rows = [torch.randn(2, length, generator=g) for length in (50, 37, 50, 20, 9)]
    features.fit_biases(lambda i: rows[i], len(rows), seed=1)
    sources = _bias_sources(features, rows)
    assert all(sources), [m for m, found in enumerate(sources) if not found]
    assert set().union(*sources) == set(range(len(rows)))


def test_readout_features_are_those_of_the_series_and_of_numpy_differences_and_padding_changes_nothing():
    """FeatureReadout's features are SSMFeatures(d_input, steps, options, seed) of the series, then those of its
    own SSMs on numpy's first difference; a padded batch of unequal lengths (down to 2 steps) gives each
    series' features and outputs as if it were alone."""
    steps = log_spaced_steps(12, 2)
    network = FeatureReadout(2, steps, 3, n_kernels=3, d_state=4, n_biases=2, seed=3)
    alone = SSMFeatures(2, steps, n_kernels=3, d_state=4, n_biases=2, seed=3)
    for name, value in alone.state_dict().items():
        assert torch.equal(_state(network.series)[name], value), name
    assert network.difference.n_features == alone.n_features
    assert not torch.equal(network.difference.readout_pairs, network.series.readout_pairs)
    reseeded = FeatureReadout(2, steps, 3, n_kernels=3, d_state=4, n_biases=2, seed=4)
    assert not torch.equal(network.difference.readout_pairs, reseeded.difference.readout_pairs)

    g = torch.Generator().manual_seed(0)
    training = torch.randn(3, 2, 12, generator=g)  # not the series below: a bias on a value of theirs would be a tie
    network.fit_biases(lambda i: training[i], 3)
    series = [torch.randn(2, n, generator=g) for n in (12, 2, 7)]
    padded, mask = torch.zeros(3, 2, 12), torch.zeros(3, 12)
    for i, x in enumerate(series):
        padded[i, :, : x.shape[-1]], mask[i, : x.shape[-1]] = x, 1.0
    features, outputs = network.features(padded, mask), network(padded, mask)
    for i, x in enumerate(series):
        difference = torch.from_numpy(np.diff(x.numpy(), axis=-1))[None]
        expected = torch.cat([network.series(x[None]), network.difference(difference)], dim=1)
        torch.testing.assert_close(network.features(x[None]), expected)
        torch.testing.assert_close(features[i], expected[0], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(outputs[i], network.readout(expected.double())[0], rtol=1e-5, atol=1e-6)


def test_readout_seed_draws_the_training_series_of_both_networks():
    """fit_biases draws the training series of every kernel of the series' SSMs and of the differences' SSMs
    from its seed: the biases of both are quantiles of their responses (to the series, to numpy's differences)
    spread over all training series, and another seed draws others."""
    g = torch.Generator().manual_seed(2)
    series = [torch.randn(1, n, generator=g) for n in (20, 20, 15, 20)]
    differences = [torch.from_numpy(np.diff(x.numpy(), axis=-1)) for x in series]
    network = FeatureReadout(1, log_spaced_steps(20, 2), 1, n_kernels=16, d_state=8, n_biases=2, seed=0)
    network.fit_biases(lambda i: series[i], 4, seed=0)
    for module, rows in ((network.series, series), (network.difference, differences)):
        sources = _bias_sources(module, rows)
        assert all(sources) and set().union(*sources) == {0, 1, 2, 3}
    before = network.series.biases.clone(), network.difference.biases.clone()
    network.fit_biases(lambda i: series[i], 4, seed=5)
    assert not torch.equal(network.series.biases, before[0])
    assert not torch.equal(network.difference.biases, before[1])


def test_readout_without_difference_is_the_series_features_alone():
    """difference=False: the features are SSMFeatures' of the series alone (series of one step allowed), and
    the read-out takes exactly those."""
    steps = log_spaced_steps(6, 2)
    network = FeatureReadout(1, steps, 2, difference=False, n_kernels=4, d_state=4, seed=1)
    g = torch.Generator().manual_seed(0)
    series = [torch.randn(1, n, generator=g) for n in (1, 6, 6)]
    network.fit_biases(lambda i: series[i], 3)
    x = torch.stack(series[1:])
    features = network.features(x)
    torch.testing.assert_close(features, network.series(x))
    assert features.shape == (2, network.series.n_features)
    torch.testing.assert_close(network(x), network.readout(features.double()))
    one = network.features(series[0][None])
    torch.testing.assert_close(one, network.series(series[0][None]))


def test_a_trainable_bank_computes_exactly_the_fixed_features_and_trains_its_dynamics():
    """requires_grad_() changes no value (PPV still counts steps); Lambda, Delta and C get gradients, and
    the optimizer's SSM group holds Lambda and Delta."""
    from ssmts.nn import parameter_groups

    data = torch.randn(5, 2, 40, generator=torch.Generator().manual_seed(0))
    bank = SSMFeatures(2, log_spaced_steps(40, 3), n_kernels=6, d_state=8, seed=0).fit_biases(lambda i: data[i], 5, 0)
    mask = torch.ones(5, 40)
    mask[1, 30:] = 0
    with torch.no_grad():
        fixed = bank(data, mask)
    bank.requires_grad_(True)
    trained = bank(data, mask)
    assert torch.equal(trained.detach(), fixed)
    trained.sum().backward()
    for p in (bank.Lambda_pairs, bank.steps, bank.readout_pairs):
        assert p.grad is not None and p.grad.abs().sum() > 0
    groups = {g["name"]: g["params"] for g in parameter_groups(bank, 1e-3, 1e-4)}
    assert {id(p) for p in groups["ssm"]} == {id(bank.Lambda_pairs), id(bank.steps)}


def test_ppv_gradient_is_that_of_a_sigmoid_of_the_documented_temperature():
    """Oracle in float64: d PPV_q / d y_t = sigmoid'((y_t - b_q) / tau) / (tau * count) on real steps and 0 on
    padded ones, tau = PPV_TEMPERATURE x the kernel's standard deviation over the batch's real steps."""
    from ssmts.nn.features import PPV_TEMPERATURE, _ppv_surrogate_gradient

    g = torch.Generator().manual_seed(1)
    y = torch.randn(3, 2, 12, generator=g, dtype=torch.float64)
    y[2, :, 9:] = -math.inf  # padded steps
    count = torch.tensor([[12.0], [12.0], [9.0]], dtype=torch.float64)
    biases = torch.randn(2, 3, generator=g, dtype=torch.float64) * 0.5
    y_leaf = y.clone().requires_grad_(True)
    surrogate = _ppv_surrogate_gradient(y_leaf, biases, count)
    assert torch.equal(surrogate.detach(), torch.zeros(3, 2, 3, dtype=torch.float64))
    weights = torch.randn(3, 2, 3, generator=g, dtype=torch.float64)
    (surrogate * weights).sum().backward()
    real = np.isfinite(y.numpy())
    y_np = np.where(real, y.numpy(), 0.0)
    expected = np.zeros_like(y_np)
    for m in range(2):
        tau = PPV_TEMPERATURE * np.std(y.numpy()[:, m, :][real[:, m, :]], ddof=1)
        for i in range(3):
            for q in range(3):
                s = 1.0 / (1.0 + np.exp(-(y_np[i, m] - biases[m, q].item()) / tau))
                expected[i, m] += weights[i, m, q].item() * real[i, m] * s * (1 - s) / (tau * count[i, 0].item())
    np.testing.assert_allclose(y_leaf.grad.numpy(), expected, rtol=1e-10, atol=1e-14)


def _envelope_by_loop(features: SSMFeatures, u: np.ndarray, length: int) -> np.ndarray:
    """(S, H, P, 4) float64: every mode's state x[t] = exp(lambda Delta) x[t -+ 1] + (exp(lambda Delta) - 1) /
    lambda u[t] (ZOH) recurred step by step over the first `length` steps of u (H, L), backwards for a
    backward bank, then the RMS and maximum of |x| over the RMS of those steps, and the mean of
    log sqrt(|x|^2 + (1e-6 RMS)^2) less the log of the RMS, and log(mean |x|^4 / (mean |x|^2)^2)."""
    Lambda = features.Lambda_pairs[:, 0].double().numpy() + 1j * features.Lambda_pairs[:, 1].double().numpy()
    u = u[:, :length].astype(np.float64)
    if features.backward:
        u = u[:, ::-1]
    rms = np.sqrt((u**2).mean(-1))  # (H,)
    out = np.empty((features.n_scales, u.shape[0], len(Lambda), 4))
    for s, Delta in enumerate(features.steps.double().numpy()):
        abar = np.exp(Lambda * Delta)
        gamma = (abar - 1.0) / Lambda
        for h in range(u.shape[0]):
            x, magnitudes = np.zeros(len(Lambda), dtype=np.complex128), []
            for v in u[h]:
                x = abar * x + gamma * v
                magnitudes.append(np.abs(x))
            magnitudes = np.array(magnitudes)  # (length, P)
            out[s, h, :, 0] = np.sqrt((magnitudes**2).mean(0)) / rms[h]
            out[s, h, :, 1] = magnitudes.max(0) / rms[h]
            out[s, h, :, 2] = 0.5 * np.log(magnitudes**2 + (1e-6 * rms[h]) ** 2).mean(0) - np.log(rms[h])
            out[s, h, :, 3] = np.log((magnitudes**4).mean(0) / (magnitudes**2).mean(0) ** 2)
    return out


@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("path", ["compiled", "fft", "tensor"])
@pytest.mark.parametrize("channels", [1, 3])
def test_envelope_features_are_the_pooled_magnitudes_of_the_modes_recurred_by_a_loop(
    backward, path, channels, monkeypatch
):
    """The last scales x channels x modes x 4 features of a bank with envelope=True are those of
    `_envelope_by_loop` for series of unequal lengths (padding at the end), on each of the three paths:
    the compiled recurrence, the FFT convolutions it falls back to with many channels, and the
    differentiable tensor path."""
    from ssmts.nn import features as module

    if path == "fft":
        monkeypatch.setattr(module, "COMPILED_RECURRENCE_STATES", 0)
    torch.manual_seed(1)
    bank = SSMFeatures(channels, log_spaced_steps(40, 3), n_kernels=5, d_state=8, envelope=True, backward=backward)
    lengths = [40, 29, 33]
    u = torch.randn(3, channels, 40)
    mask = (torch.arange(40) < torch.tensor(lengths)[:, None]).float()
    bank.fit_biases(lambda i: u[i, :, : lengths[i]], 3, 0)
    with torch.no_grad():
        features = bank._pooled(u, mask) if path == "tensor" else bank(u, mask)
    assert features.shape == (3, bank.n_features) and bank.n_envelope_features == 3 * channels * 4 * 4
    envelope = features[:, -bank.n_envelope_features :].double().numpy()
    for i, length in enumerate(lengths):
        expected = _envelope_by_loop(bank, u[i].numpy(), length).reshape(-1)
        np.testing.assert_allclose(envelope[i], expected, rtol=2e-4, atol=2e-5)


def test_envelope_features_ignore_the_loudness_of_a_series_and_stay_finite_for_a_silent_one():
    torch.manual_seed(2)
    bank = SSMFeatures(2, log_spaced_steps(50, 3), n_kernels=4, d_state=8, envelope=True)
    u = torch.randn(2, 2, 50)
    bank.fit_biases(lambda i: u[i], 2, 0)
    columns = slice(bank.n_features - bank.n_envelope_features, None)
    with torch.no_grad():
        reference = bank(u)[:, columns]
        for gain in (1e-3, 7.0, 1e3):
            np.testing.assert_allclose(bank(gain * u)[:, columns], reference, rtol=1e-4, atol=1e-4)
        silent = bank(torch.zeros(1, 2, 50))[:, columns]
    assert torch.isfinite(silent).all()


def test_readout_pools_the_envelope_in_its_causal_banks_only():
    readout = FeatureReadout(2, log_spaced_steps(30, 3), 1, backward=True, envelope=True, n_kernels=4, d_state=8)
    envelope = 3 * 2 * 4 * 4  # scales x channels x modes x statistics
    responses = 3 * 4 * 6  # scales x kernels x (4 PPVs, mean, maximum)
    expected = [False] * responses + [True] * envelope
    expected = expected + expected + [False] * (2 * responses)  # series, difference, then both backward
    assert readout.envelope_columns().tolist() == expected
    u = torch.randn(3, 2, 30)
    readout.fit_biases(lambda i: u[i], 3)
    assert readout.features(u).shape == (3, len(expected))
    plain = FeatureReadout(2, log_spaced_steps(30, 3), 1, backward=True, n_kernels=4, d_state=8)
    assert not plain.envelope_columns().any() and len(plain.envelope_columns()) == 4 * responses


def test_a_trainable_bank_with_envelopes_has_finite_gradients_on_a_silent_series():
    """The envelope's RMS and maximum are square roots: at a series of zeros their gradient would be
    infinite (and 0 x inf a NaN in every parameter's gradient) without the clamps."""
    torch.manual_seed(3)
    bank = SSMFeatures(1, log_spaced_steps(30, 2), n_kernels=3, d_state=4, envelope=True)
    u = torch.randn(3, 1, 30)
    u[1] = 0.0
    bank.fit_biases(lambda i: u[i], 3, 0)
    bank.requires_grad_()
    bank(u).sum().backward()
    for name, parameter in bank.named_parameters():
        assert torch.isfinite(parameter.grad).all(), name
