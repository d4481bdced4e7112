"""SSMForecaster.historical_forecasts under awkward input: cutoffs before the first full context, int
and Timestamp cutoffs on a PeriodIndex, y shorter than the context, numpy y and X (each a correct
result or an error in the user's terms, never a silent result or a pandas error)."""

import warnings

import numpy as np
import pandas as pd
import pytest

from ssmts.sktime import SSMForecaster

TINY = dict(d_model=8, d_state=4, n_layers=1, max_epochs=1, context_length=6, device="cpu", random_state=0)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


def series(n=40, start="2000-01"):
    t = np.arange(n)
    return pd.Series(10 + np.sin(t / 2.0) + 0.01 * t, index=pd.period_range(start, periods=n, freq="M"))


def panel():
    """Series 'b' starts ten months after 'a'."""
    return pd.concat({"a": series(40), "b": series(30, "2000-11")}, names=["shop", "month"]).to_frame("sales")


@pytest.fixture(scope="module")
def fitted():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return SSMForecaster(**TINY).fit(series(), fh=[1, 2])


@pytest.fixture(scope="module")
def fitted_panel():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return SSMForecaster(**TINY).fit(panel(), fh=[1])


# ---------------------------------------------------------------- 1. cutoffs before the first full context
def test_a_cutoff_before_the_first_full_context_is_refused_naming_the_first_possible_one(fitted):
    y = series()
    with pytest.raises(
        ValueError,
        match=r"cutoff 2000-03 is too early for y: 3 of its observations lie at or before it, but the network reads "
        r"a context of context_length=6; the first possible cutoff is 2000-06, its 6th observation.*pad_contexts=True",
    ):
        fitted.historical_forecasts(y, cutoffs=y.index[[2, 20]])
    assert fitted.historical_forecasts(y, cutoffs=y.index[[5]]).shape == (2, 1)  # the first possible one
    padded = fitted.historical_forecasts(y, cutoffs=y.index[[2]], pad_contexts=True)  # asked for
    # the oracle: the three missing observations before the cutoff written out as missing values
    written = pd.concat([pd.Series(np.nan, index=pd.period_range(end=y.index[0] - 1, periods=3, freq="M")), y])
    pd.testing.assert_frame_equal(padded, fitted.historical_forecasts(written, cutoffs=y.index[[2]]))
    assert padded.shape == (2, 1) and np.isfinite(padded.to_numpy()).all()


def test_a_cutoff_too_early_for_one_series_of_a_panel_names_that_series(fitted_panel):
    with pytest.raises(ValueError, match=r"too early for series 'b': 3 of .* first possible cutoff is 2001-04"):
        fitted_panel.historical_forecasts(panel(), cutoffs=pd.Period("2001-01", "M"))


# ---------------------------------------------------------------- 2. int and Timestamp cutoffs on a PeriodIndex
def test_int_cutoffs_on_a_period_index_are_positions_as_in_sktimes_splitters(fitted, fitted_panel):
    from sktime.split import CutoffSplitter

    y = series()
    by_position = fitted.historical_forecasts(y, cutoffs=[10, 20])
    by_period = fitted.historical_forecasts(y, cutoffs=y.index[[10, 20]])
    pd.testing.assert_frame_equal(by_position, by_period)
    # a panel: the position within each series, as sktime's CutoffSplitter splits it
    train, _ = next(iter(CutoffSplitter(cutoffs=np.array([20]), fh=[1], window_length=5).split_series(panel())))
    expected = {shop: train.loc[shop].index[-1] for shop in ("a", "b")}
    got = fitted_panel.historical_forecasts(panel(), cutoffs=20)
    assert {shop: cut for shop, cut, _ in got.index} == expected == {"a": y.index[20], "b": pd.Period("2002-07", "M")}


@pytest.mark.parametrize(
    "cutoffs, error, match",
    [
        (
            pd.Timestamp("2001-06-01"),
            TypeError,
            r"cutoffs \[Timestamp\('2001-06-01 00:00:00'\)\] \(DatetimeIndex\) do not match the time index of y, a "
            r"PeriodIndex \(freq 'M'\): give cutoffs as pandas Periods of freq 'M' .* or int positions .*to_period",
        ),
        ("2001-06", TypeError, r"cutoffs \['2001-06'\] .* a PeriodIndex \(freq 'M'\): give cutoffs as pandas Periods"),
        (pd.Period("2001Q2"), TypeError, r"Period\('2001Q2', 'Q-DEC'\).* give cutoffs as pandas Periods of freq 'M'"),
        (40, ValueError, r"cutoff 40 is not a position of y, which has 40 observations \(positions 0 to 39"),
        (-1, ValueError, r"cutoff -1 is not a position of y"),
        (3, ValueError, r"cutoff 3 \(2000-04\) is too early for y"),
    ],
)
def test_cutoffs_of_another_kind_than_a_period_index_are_refused_naming_the_accepted_ones(
    fitted, cutoffs, error, match
):
    with pytest.raises(error, match=match):
        fitted.historical_forecasts(series(), cutoffs=cutoffs)


def test_timestamp_and_int_cutoffs_on_a_datetime_index():
    y = series().set_axis(pd.date_range("2020-01-01", periods=40, freq="D"))
    f = SSMForecaster(**TINY).fit(y, fh=[1])
    expected = f.historical_forecasts(y, cutoffs=y.index[[19]])
    pd.testing.assert_frame_equal(f.historical_forecasts(y, cutoffs=pd.Timestamp("2020-01-20")), expected)
    pd.testing.assert_frame_equal(f.historical_forecasts(y, cutoffs=19), expected)
    with pytest.raises(TypeError, match="a DatetimeIndex .*: give cutoffs as pandas Timestamps without a time zone"):
        f.historical_forecasts(y, cutoffs=pd.Timestamp("2020-01-20", tz="UTC"))


# ---------------------------------------------------------------- 3. y shorter than the context
@pytest.mark.parametrize("n", [1, 5])
def test_y_shorter_than_the_context_is_refused_naming_the_lengths(fitted, n):
    with pytest.raises(
        ValueError,
        match=rf"y has {n} observation\(s\), fewer than context_length=6: .* so y needs at least 6; pass y with more "
        "history, or pass pad_contexts=True",
    ):
        fitted.historical_forecasts(series(n))


def test_an_empty_y_and_a_short_panel_series_are_refused(fitted, fitted_panel):
    with pytest.raises(ValueError, match="y has no observations"):
        fitted.historical_forecasts(series().iloc[:0])
    y = pd.concat({"a": series(40), "b": series(4, "2001-01")}, names=["shop", "month"]).to_frame("sales")
    with pytest.raises(ValueError, match=r"series 'b' has 4 observation\(s\), fewer than context_length=6"):
        fitted_panel.historical_forecasts(y)


# ---------------------------------------------------------------- 4. numpy y and X
def test_a_numpy_y_is_a_series_with_a_range_index(fitted):
    values = series().to_numpy()
    got = fitted.historical_forecasts(values, cutoffs=[20, 30])
    expected = fitted.historical_forecasts(pd.Series(values), cutoffs=[20, 30])
    pd.testing.assert_frame_equal(got, expected)
    assert got.index.get_level_values("cutoff").tolist() == [20, 20, 30, 30]
    pd.testing.assert_frame_equal(fitted.historical_forecasts(values[:, None], cutoffs=[20, 30]), expected)


def test_numpy_x_goes_with_a_numpy_y_and_is_refused_where_it_cannot_be_aligned():
    values, x = series().to_numpy(), np.cos(np.arange(45.0))[:, None]
    f = SSMForecaster(**TINY).fit(values[:30], X=x[:30], fh=[1, 2])
    got = f.historical_forecasts(values, X=x, cutoffs=[29, 39])
    expected = f.historical_forecasts(pd.Series(values), X=pd.DataFrame(x), cutoffs=[29, 39])
    pd.testing.assert_frame_equal(got, expected)
    with pytest.raises(TypeError, match=r"X's time index is a RangeIndex, y's a PeriodIndex \(freq 'M'\)"):
        f.historical_forecasts(series(), X=x, cutoffs=[29])
    named = SSMForecaster(**TINY).fit(series(30), X=pd.DataFrame({"promo": x[:30, 0]}, series(30).index), fh=[1])
    with pytest.raises(ValueError, match=r"X is a numpy array, whose columns have no names, .* \['promo'\]"):
        named.historical_forecasts(series(), X=x, cutoffs=[29])
    with pytest.raises(TypeError, match="historical_forecasts takes y as a pandas Series or DataFrame .* got list"):
        f.historical_forecasts(list(values), cutoffs=[29])
