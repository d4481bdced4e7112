"""ssmts.nn.functional against numpy: pooling over real steps, and the input statistics the faces
scale by (per channel, per series, the series summary, the chunked two-pass form), in float64."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ssmts.nn.functional import (
    channel_statistics,
    chunked_channel_statistics,
    pool,
    series_statistics,
    series_summary,
)


def _data(seed=0, n=5, C=3, L=9):
    rng = np.random.default_rng(seed)
    x = (
        rng.normal(size=(n, C, L)) * np.array([1.0, 10.0, 0.1])[None, :C, None]
        + np.array([0.0, 5.0, -3.0])[None, :C, None]
    )
    mask = np.ones((n, L), dtype=bool)
    mask[1, :4] = False  # left padding
    mask[2, 6:] = False  # right padding
    mask[3, :8] = False  # one real step
    return x, mask


def _masked(x, mask):
    """Per series and channel, the values of the real steps (a list over series of (C, k) arrays)."""
    return [x[i][:, mask[i]] for i in range(x.shape[0])]


def test_pooling_takes_the_mean_or_the_last_of_the_real_steps():
    """Oracle: numpy mean / last over each series' real steps, a series with a single real step included
    (its mean is that step: the count floor of 1 must not divide it)."""
    x, mask = _data()
    xt, mt = torch.from_numpy(x), torch.from_numpy(mask)
    mean = np.stack([v.mean(axis=1) for v in _masked(x, mask)])
    last = np.stack([v[:, -1] for v in _masked(x, mask)])
    np.testing.assert_allclose(pool(xt, mt, "mean").numpy(), mean, rtol=1e-12)
    np.testing.assert_allclose(pool(xt, mt).numpy(), mean, rtol=1e-12)  # the default is the mean
    np.testing.assert_allclose(pool(xt, mt, "last").numpy(), last, rtol=0)
    np.testing.assert_allclose(pool(xt, None).numpy(), x.mean(-1), rtol=1e-12)
    np.testing.assert_allclose(pool(xt, None, "last").numpy(), x[..., -1], rtol=0)
    with pytest.raises(ValueError, match="pooling must be 'mean' or 'last' here, got 'max'"):
        pool(xt, mt, "max")


def test_channel_and_series_statistics_equal_numpy_over_the_real_steps():
    """Oracle: numpy mean and population std over samples and real steps (channels), or over each
    series' own real steps (series); a flat channel or series keeps scale 1."""
    x, mask = _data()
    x[:, 0, :] = 7.0  # a constant channel: scale 1, mean 7
    xt, mt = torch.from_numpy(x), torch.from_numpy(mask)
    values = _masked(x, mask)
    pooled = np.concatenate(values, axis=1)  # (C, all real steps)
    mean, scale = channel_statistics(xt, mt)
    assert mean.dtype == scale.dtype == torch.float64
    np.testing.assert_allclose(mean.numpy(), pooled.mean(1), rtol=1e-12)
    np.testing.assert_allclose(scale.numpy(), [1.0, *pooled[1:].std(1)], rtol=1e-12)
    mean, scale = channel_statistics(xt)
    np.testing.assert_allclose(mean.numpy(), x.mean((0, 2)), rtol=1e-12)
    np.testing.assert_allclose(scale.numpy(), [1.0, *x[:, 1:].std((0, 2))], rtol=1e-12)

    mean, scale = series_statistics(xt, mt)
    expected_scale = np.stack([np.where(v.std(1) > 1e-12 * np.abs(v).max(1), v.std(1), 1.0) for v in values])
    np.testing.assert_allclose(mean.numpy(), np.stack([v.mean(1) for v in values]), rtol=1e-12)
    np.testing.assert_allclose(scale.numpy(), expected_scale, rtol=1e-12)
    assert (scale[3] == 1.0).all()  # one real step: no spread
    mean, scale = series_statistics(xt)
    np.testing.assert_allclose(mean.numpy(), x.mean(2), rtol=1e-12)
    np.testing.assert_allclose(scale[:, 1:].numpy(), x[:, 1:].std(2), rtol=1e-12)


def test_statistics_scale_exactly_with_the_data_at_any_magnitude():
    """Formed in units of a power of two: at ordinary magnitudes the digits of the plain formulas (numpy's
    mean and std, bit for bit), and at 1e200 and 1e-200 those digits times the factor, where the plain
    squares overflow to infinity or underflow to 0."""
    x, mask = _data()
    xt, mt = torch.from_numpy(x), torch.from_numpy(mask)
    for statistics in (channel_statistics, series_statistics):
        for m in (None, mt):
            mean, scale = statistics(xt, m)
            if m is None:
                dims = (0, 2) if statistics is channel_statistics else (2,)
                np.testing.assert_array_equal(mean.numpy(), xt.mean(dims).numpy())
                np.testing.assert_array_equal(scale.numpy(), xt.std(dims, unbiased=False).numpy())
            flat = scale.numpy() == 1.0  # a flat channel or series keeps scale 1 at any magnitude
            for factor in (2.0**-700, 2.0**700):  # exact: 1e-211 and 1e211
                big_mean, big_scale = statistics(xt * factor, m)
                np.testing.assert_array_equal(big_mean.numpy(), mean.numpy() * factor)
                np.testing.assert_array_equal(big_scale.numpy(), np.where(flat, 1.0, scale.numpy() * factor))
            with np.errstate(over="ignore", under="ignore"):
                assert not np.isfinite(((x * 2.0**700) ** 2).sum()) and ((x * 2.0**-700) ** 2).max() == 0


def test_window_scaling_scales_exactly_with_the_data_at_any_magnitude():
    """The forecaster's windows: shift and scale of y times 2^700 or 2^-700 are those of y times the factor."""
    from ssmts.sktime._windows import window_scaling

    rng = np.random.default_rng(0)
    context = 5.0 + rng.standard_normal((4, 2, 12))
    context[1, 0, 3:5] = np.nan  # unobserved steps
    context[2, 1] = 0.0  # a window at level 0: the panel's floor
    floor = np.array([1e-3, 2e-3])
    for location in ("last", "mean", "drift"):
        shift, scale = window_scaling(context, location, 3, np.zeros(2), np.ones(2), floor)
        assert np.isfinite(scale).all() and (scale > 0).all()
        for factor in (2.0**-700, 2.0**700):
            scaled = window_scaling(context * factor, location, 3, np.zeros(2), np.ones(2), floor * factor)
            np.testing.assert_array_equal(scaled[0], shift * factor)
            np.testing.assert_array_equal(scaled[1], scale * factor)


def test_the_scale_floor_is_relative_to_the_data_magnitude():
    """The default floor is float64 rounding's (1e-12 of the level): a spread of 1e-7 of the level is data
    (pressures of 1e5 varying by 0.01) and is scaled, a spread of 1e-14 is rounding (scale 1); a spread of
    1e-7 is noise at rel_floor 1e-6. The same at every magnitude (1e-13 or 1e13)."""
    for magnitude in (1e-13, 1.0, 1e13):
        for share, informative in ((1e-7, True), (1e-14, False)):
            wiggle = np.array([1.0, 1.0 + share, 1.0 - share, 1.0])
            x = torch.from_numpy((magnitude * wiggle)[None, None, :])
            spread = (magnitude * wiggle).std()
            expected = pytest.approx(spread, rel=1e-6) if informative else 1.0
            assert float(channel_statistics(x)[1]) == expected
            assert float(chunked_channel_statistics(x.numpy())[1][0]) == expected
            assert float(series_statistics(x)[1][0, 0]) == expected
        assert float(channel_statistics(x, rel_floor=1e-6)[1]) == 1.0
        wiggle = np.array([1.0, 1.0 + 1e-7, 1.0 - 1e-7, 1.0])
        assert float(chunked_channel_statistics(magnitude * wiggle[None, None, :], rel_floor=1e-6)[1][0]) == 1.0


def test_a_constant_channel_of_many_chunks_keeps_scale_1():
    """The chunks' sums are added exactly: 4,000 chunks of a constant 1/3 give its mean to within float64
    rounding (adding the chunk sums in sequence is off by 1.3e-14 of it here, an error that grows with
    the number of chunks and would in the end lift a constant channel's spread above the floor) and
    scale 1. Oracle: math.fsum of the values."""
    x = np.full((4000, 1, 500), 1.0 / 3.0)
    mean, scale = chunked_channel_statistics(x, chunk_bytes=8 * 500)
    assert float(scale[0]) == 1.0
    assert float(mean[0]) == pytest.approx(math.fsum(x.ravel()) / x.size, rel=1e-15, abs=0)


def test_series_summary_is_the_standardized_level_and_log_spread():
    """Oracle: ((series mean - channel mean) / channel scale, log(max(series std / channel scale,
    min_spread))) per channel, numpy over each series' real steps; a flat series gets log(min_spread)."""
    x, mask = _data(seed=1)
    x[4, 2, :] = -3.0  # a flat series
    xt, mt = torch.from_numpy(x), torch.from_numpy(mask)
    channel_mean, channel_scale = channel_statistics(xt, mt)
    summary = series_summary(xt, mt, channel_mean.float(), channel_scale.float())  # min_spread 1e-3 by default
    assert summary.shape == (5, 6) and summary.dtype == torch.float64
    cm, cs = channel_mean.float().double().numpy(), channel_scale.float().double().numpy()
    for i, v in enumerate(_masked(x, mask)):
        np.testing.assert_allclose(summary[i, :3].numpy(), (v.mean(1) - cm) / cs, rtol=1e-10)
        spread = np.where(v.std(1) > 1e-12 * np.abs(v).max(1), v.std(1), 0.0) / cs
        np.testing.assert_allclose(summary[i, 3:].numpy(), np.log(np.maximum(spread, 1e-3)), rtol=1e-10)
    assert float(summary[4, 5]) == pytest.approx(np.log(1e-3))
    assert float(summary[3, 3]) == pytest.approx(np.log(1e-3))  # one real step: no spread either
    unmasked = series_summary(xt, None, channel_mean, channel_scale)
    np.testing.assert_allclose(unmasked[:, :3].numpy(), (x.mean(2) - channel_mean.numpy()) / channel_scale.numpy())


@pytest.mark.parametrize("chunk_bytes", [1, 8 * 3 * 9 * 2, 1 << 20])
def test_chunked_statistics_equal_the_whole_array_ones(tmp_path, chunk_bytes):
    """Oracle: channel_statistics of the array in memory; read from a memmap one row, two rows or all
    at a time (the chunks cover every row exactly once), a flat channel included."""
    x, _ = _data(seed=2, n=7)
    x[:, 2, :] = 0.5
    path = tmp_path / "x.npy"
    np.save(path, x.astype(np.float32))
    disk = np.load(path, mmap_mode="r")
    mean, scale = chunked_channel_statistics(disk, chunk_bytes=chunk_bytes)
    ref_mean, ref_scale = channel_statistics(torch.from_numpy(np.asarray(disk, dtype=np.float64)))
    assert mean.dtype == scale.dtype == torch.float64
    np.testing.assert_allclose(mean.numpy(), ref_mean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(scale.numpy(), ref_scale.numpy(), rtol=1e-12)
    assert float(scale[2]) == 1.0
    # the floor is relative, as in channel_statistics
    tiny = 1e-13 * (1.0 + 1e-7 * np.array([[[0.0, 1.0, -1.0, 0.0]]]))
    assert float(chunked_channel_statistics(tiny, rel_floor=1e-6)[1][0]) == 1.0
    assert float(chunked_channel_statistics(tiny)[1][0]) == pytest.approx(tiny.std(), rel=1e-6)


def test_every_channel_and_series_has_its_own_floor_and_zeros_keep_scale_1():
    """The floor is relative to each channel's (series') own magnitude, not to the largest of the data:
    a channel at 1 with a spread of 1e-4 is informative beside a channel at 1e9; an all-zero channel
    or series keeps scale 1 (no division by zero)."""
    small = 1.0 + 1e-4 * np.array([0.0, 1.0, -1.0, 0.0, 1.0, -1.0])
    x = np.stack([np.full(6, 1e9), small, np.zeros(6)])[None].repeat(2, axis=0)  # (2, 3, 6)
    xt = torch.from_numpy(x)
    mask = torch.ones(2, 6, dtype=torch.bool)
    for args in ((xt,), (xt, mask)):
        mean, scale = channel_statistics(*args)
        np.testing.assert_allclose(scale.numpy(), [1.0, small.std(), 1.0], rtol=1e-9)
        mean, scale = series_statistics(*args)
        np.testing.assert_allclose(scale.numpy(), [[1.0, small.std(), 1.0]] * 2, rtol=1e-9)
    mean, scale = chunked_channel_statistics(x, chunk_bytes=1)
    np.testing.assert_allclose(scale.numpy(), [1.0, small.std(), 1.0], rtol=1e-9)
    np.testing.assert_allclose(mean.numpy(), [1e9, small.mean(), 0.0], rtol=1e-12)


def test_chunked_statistics_of_a_single_value():
    """One sample of one step: its value is the mean and the scale is 1 (no spread)."""
    mean, scale = chunked_channel_statistics(np.array([[[3.0], [-2.0]]]))
    np.testing.assert_array_equal(mean.numpy(), [3.0, -2.0])
    np.testing.assert_array_equal(scale.numpy(), [1.0, 1.0])


class _RecordingArray:
    """A stand-in for a memmap that records the rows (start, stop) of every read."""

    def __init__(self, data):
        self.data, self.shape, self.reads = data, data.shape, []

    def __getitem__(self, key):
        start, stop, _ = key.indices(self.shape[0])
        self.reads.append((start, stop))
        return self.data[key]


@pytest.mark.parametrize(
    "chunk_bytes, rows_per_read",
    [(1, 1), (216, 1), (2 * 216, 2), (3 * 216 - 1, 2), (1 << 20, 7)],
    ids=["row-larger-than-budget", "one-row", "two-rows", "just-under-three", "all"],
)
def test_chunked_statistics_read_as_many_whole_rows_as_fit_in_chunk_bytes(chunk_bytes, rows_per_read):
    """The memory bound of a memmap read: a row of 3 channels x 9 steps is 216 bytes in float64, so each
    read holds floor(chunk_bytes / 216) whole rows, one when a single row exceeds the budget; each of the
    two passes (mean, then spread) reads every row once, in order. Oracle: the row ranges worked out by
    hand; the statistics still equal the in-memory ones (float64 sums of 63 values: rtol 1e-12)."""
    x, _ = _data(seed=3, n=7)
    array = _RecordingArray(x)
    mean, scale = chunked_channel_statistics(array, chunk_bytes=chunk_bytes)
    one_pass = [(start, min(start + rows_per_read, 7)) for start in range(0, 7, rows_per_read)]
    assert array.reads == one_pass + one_pass
    np.testing.assert_allclose(mean.numpy(), x.mean(axis=(0, 2)), rtol=1e-12)
    np.testing.assert_allclose(scale.numpy(), x.std(axis=(0, 2)), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.bool_, np.uint16, np.int32, np.float16, np.float32, np.longdouble])
def test_chunked_statistics_read_any_numeric_memmap_in_float64(tmp_path, dtype):
    """Indicators (bool), counts (uint16, int32), half, single or extended precision on disk: both passes
    convert every read to float64. Oracle: numpy's float64 mean and population std of the values as
    float64, read one row at a time (float64 sums of 45 values: rtol 1e-12)."""
    rng = np.random.default_rng(4)
    values = {
        np.bool_: lambda: rng.random((5, 3, 9)) < 0.4,
        np.uint16: lambda: rng.integers(0, 60_000, size=(5, 3, 9)),
        np.int32: lambda: rng.integers(-(10**6), 10**6, size=(5, 3, 9)),
    }.get(dtype, lambda: rng.normal(size=(5, 3, 9)) * 3.0 + 1.0)()
    path = tmp_path / "x.npy"
    np.save(path, np.asarray(values, dtype=dtype))
    disk = np.load(path, mmap_mode="r")
    as_float64 = np.asarray(disk, dtype=np.float64)
    mean, scale = chunked_channel_statistics(disk, chunk_bytes=1)
    assert mean.dtype == scale.dtype == torch.float64
    np.testing.assert_allclose(mean.numpy(), as_float64.mean(axis=(0, 2)), rtol=1e-12)
    np.testing.assert_allclose(scale.numpy(), as_float64.std(axis=(0, 2)), rtol=1e-12)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64])
def test_masked_mean_pooling_keeps_the_dtype_of_the_features(dtype):
    """Features in half precision (an autocast forward) pool to their own dtype with a mask as without
    one (as x.mean does). Oracle: numpy's float64 mean over the real steps of the same (rounded) values;
    the pooled value is a sum of at most 9 steps and a division, each rounded once in the format: 2 eps
    relative, or 2 eps of the largest value where the sum cancels."""
    x, mask = _data(seed=5)
    xt = torch.from_numpy(x).to(dtype)
    rounded = xt.double().numpy()
    mean = np.stack([v.mean(axis=1) for v in _masked(rounded, mask)])
    eps = torch.finfo(dtype).eps
    for pooled in (pool(xt, torch.from_numpy(mask), "mean"), pool(xt, None, "mean")):
        assert pooled.dtype == dtype
    pooled = pool(xt, torch.from_numpy(mask), "mean").double().numpy()
    np.testing.assert_allclose(pooled, mean, rtol=2 * eps, atol=2 * eps * np.abs(rounded).max())
