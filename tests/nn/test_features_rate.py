"""SSMFeatures at another sample rate (inside scaled_delta) against the training rate's: every kernel
keeps its DC gain, and a band-limited series sampled at r and at r/2 gives the same features, within
a tolerance per time scale, pooling and bank."""

import math

import numpy as np
import pytest
import torch

from ssmts.nn import FeatureReadout, SSMFeatures, log_spaced_steps, scaled_delta


@pytest.mark.parametrize("factor", [2.0, 3.0, 0.5])
def test_every_kernel_keeps_its_dc_gain_at_every_rate(factor):
    """sum_l K[l] = 2 Re(sum_p C_p B_p (-1 / lambda_p)) is a property of the continuous kernel, not of the
    step, so it is the same at any rate: also for the modes aliased at the training rate (the fast scales
    of LegS turn by more than pi per step: they count as the modes they alias to) and for those above the
    new Nyquist frequency (their quasi-static response, a feedthrough of that gain)."""
    features = SSMFeatures(1, log_spaced_steps(64, 4), n_kernels=6, d_state=16, seed=0)
    assert features.modes_above_nyquist() == (0, 32)
    Lambda = torch.view_as_complex(features.Lambda_pairs)
    assert (Lambda.imag[None, :].abs() * features.steps[:, None] > math.pi).any()  # aliased at the training rate
    length = 8000  # the slowest mode decays as exp(-Delta l / 2): below 1e-13 of its start by then
    trained = features.kernels(length).sum(-1)
    with scaled_delta(features, factor):
        at_rate = features.kernels(math.ceil(length / factor)).sum(-1)
        above = features.modes_above_nyquist()[0]
    assert (above > 0) == (factor > 1)  # at a lower rate the fastest modes lie above its Nyquist frequency
    torch.testing.assert_close(at_rate, trained, rtol=1e-9, atol=1e-9 * float(trained.abs().max()))


# Tolerances in units of each feature's spread over the series (how the ridge read-out sees features),
# by the coarse steps a scale remembers: the zero-order hold of the coarse rate holds every sample twice
# as long, which smooths and delays the input by up to half a coarse step, and PPV counts half as many
# steps. A scale that remembers 2 coarse steps samples its kernel twice per memory (measured: at most
# 0.53 spread), one that remembers 4 to 16 coarse steps moves less (0.35), one that remembers more
# barely (0.23). Before the modes were mapped to the new rate, a mode of the 4th scale that turns by
# 2.5 rad per training step (5.1 per coarse step) aliased onto 1.2 rad, inside the band, and moved its
# features by up to 2.54 spreads; the fastest scale's by 0.84.
TOLERANCES = ((0.0, 0.75), (4.0, 0.5), (16.0, 0.3))  # (from memory in coarse steps, rms tolerance in spreads)


def test_features_of_a_band_limited_series_at_half_the_rate():
    """Sums of 3 sines below 0.1 cycle per step (0.2 of the Nyquist frequency; 0.4 of the half rate's),
    sampled at r (2001 steps) and r/2 (x[::2], the same span, read with Delta doubled): per bank (series,
    differences, both backward), pooling (PPV, mean, max) and scale, the rms difference of the features
    stays within the TOLERANCES of the scale's memory."""
    rng = np.random.default_rng(0)
    n, L, M = 48, 2000, 24
    frequency, amplitude, phase = rng.uniform(0.002, 0.1, (3, n, 3))
    amplitude = 0.2 + 0.8 * amplitude / 0.1
    t = np.arange(L + 1)  # odd: x[::2] keeps the last instant
    waves = (amplitude[..., None] * np.sin(2 * np.pi * frequency[..., None] * t + 60 * phase[..., None])).sum(1)
    fine = torch.tensor(waves, dtype=torch.float32)[:, None]
    coarse = fine[..., ::2].contiguous()
    network = FeatureReadout(1, log_spaced_steps(L, 10), 1, n_kernels=M, d_state=16, backward=True, seed=0)
    network.fit_biases(lambda i: fine[i], n)
    at_rate = network.features(fine).double()
    with scaled_delta(network, 2.0):
        at_half = network.features(coarse).double()
    spread = at_rate.std(0).clamp_min(1e-9)
    Q = network.series.n_biases
    z = ((at_half - at_rate) / spread).reshape(n, 4, 10, M, Q + 2)  # (series, bank, scale, kernel, pooled)
    pools = {"ppv": slice(0, Q), "mean": slice(Q, Q + 1), "max": slice(Q + 1, Q + 2)}
    rms = torch.stack([z[..., p].pow(2).mean(dim=(0, 3, 4)).sqrt() for p in pools.values()], -1)  # (bank, scale, 3)
    coarse_memory = 1.0 / (2.0 * network.series.steps)  # the coarse steps each scale remembers
    tolerance = torch.tensor([[t for start, t in TOLERANCES if memory >= start][-1] for memory in coarse_memory])
    banks = ("series", "difference", "series backward", "difference backward")
    beyond = [
        (bank, scale, pool, round(float(rms[b, scale, p]), 3), float(tolerance[scale]))
        for b, bank in enumerate(banks)
        for scale in range(10)
        for p, pool in enumerate(pools)
        if rms[b, scale, p] > tolerance[scale]
    ]
    assert not beyond, beyond


# The modes' envelopes (envelope=True) at half the rate, rms difference in spreads by the coarse steps a scale
# remembers: the fastest scales' do not carry over (modes above the half rate's Nyquist frequency answer
# quasi-statically, and those aliased at the training rate move): up to 1.69 at 2-16 steps, 0.33 at 32, at
# most 0.08 from 63 on (RMS, maximum, mean log); the modulation up to 0.51 at 2-16 steps, 0.34 at 32 and
# 0.22 beyond (the slowest scales' modulation hardly varies between series, so small changes weigh).
# No bound below 30 steps; the read-out fitted with a sample_rate sees both rates.
ENVELOPE_TOLERANCES = ((30.0, 0.4), (60.0, 0.1))
MODULATION_TOLERANCE = 0.4  # from 30 steps on


def test_envelopes_of_a_band_limited_series_at_half_the_rate():
    """The series of the test above; per causal bank, scale and envelope statistic (RMS, maximum, mean log,
    modulation), the rms difference over the series and modes stays within the tolerances above."""
    rng = np.random.default_rng(0)
    n, L = 48, 2000
    frequency, amplitude, phase = rng.uniform(0.002, 0.1, (3, n, 3))
    amplitude = 0.2 + 0.8 * amplitude / 0.1
    t = np.arange(L + 1)
    waves = (amplitude[..., None] * np.sin(2 * np.pi * frequency[..., None] * t + 60 * phase[..., None])).sum(1)
    fine = torch.tensor(waves, dtype=torch.float32)[:, None]
    coarse = fine[..., ::2].contiguous()
    network = FeatureReadout(1, log_spaced_steps(L, 10), 1, n_kernels=4, d_state=16, envelope=True, seed=0)
    network.fit_biases(lambda i: fine[i], n)
    columns = network.envelope_columns()
    at_rate = network.features(fine).double()[:, columns]
    with scaled_delta(network, 2.0):
        at_half = network.features(coarse).double()[:, columns]
    z = ((at_half - at_rate) / at_rate.std(0).clamp_min(1e-9)).reshape(n, 2, 10, 8, 4)  # bank, scale, mode, pool
    rms = z.pow(2).mean(dim=(0, 3)).sqrt()  # (bank, scale, pool)
    coarse_memory = 1.0 / (2.0 * network.series.steps)
    bounds = [[t for start, t in ENVELOPE_TOLERANCES if memory >= start] for memory in coarse_memory.tolist()]
    beyond = [
        (bank, scale, pool, round(float(rms[bank, scale, pool]), 3), limit)
        for scale, bound in enumerate(bounds)
        if bound
        for bank in range(2)
        for pool, limit in enumerate([bound[-1]] * 3 + [MODULATION_TOLERANCE])
        if rms[bank, scale, pool] > limit
    ]
    assert not beyond, beyond
    assert rms[:, :4].max() > 1.0  # the fastest scales' envelopes do not carry over, as said above
