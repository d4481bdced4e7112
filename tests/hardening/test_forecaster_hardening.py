"""SSMForecaster's newer surfaces under hostile input: backtests, stream(), infinite and huge
values, and interrupted fits and updates (each a clear error or a correct result, never a silent one)."""

import copy
import warnings

import numpy as np
import pandas as pd
import pytest

from ssmts.sktime import SSMForecaster

TINY = dict(d_model=8, d_state=4, n_layers=1, max_epochs=2, context_length=6, device="cpu", random_state=0)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


def series(n=40):
    t = np.arange(n)
    return pd.Series(10 + np.sin(t / 2.0), index=pd.period_range("2000-01", periods=n, freq="M"))


@pytest.fixture(scope="module")
def fitted():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return SSMForecaster(**TINY).fit(series(), fh=[1, 2])


@pytest.mark.parametrize("where", ["fit", "update", "backtest"])
def test_infinite_values_are_refused_where_they_enter(fitted, where):
    y = series().copy()
    y.iloc[30] = np.inf
    with pytest.raises(ValueError, match=r"y holds 1 infinite value\(s\) \(first: column .* at 200\d-\d\d\)"):
        if where == "fit":
            SSMForecaster(**TINY).fit(y, fh=[1])
        elif where == "update":
            copy.deepcopy(fitted).update(pd.concat([series(), y.iloc[30:31].set_axis(series(41).index[-1:])]))
        else:
            fitted.historical_forecasts(y, cutoffs=y.index[[35]])


def test_huge_values_give_a_clear_error_or_finite_forecasts(fitted):
    y = series() * 1e300
    try:
        out = fitted.historical_forecasts(y, cutoffs=y.index[[20, 30]])
    except FloatingPointError as error:
        assert "non-finite forecasts" in str(error) and "far outside the training data" in str(error)
    else:
        assert np.isfinite(out.to_numpy()).all()


@pytest.mark.parametrize(
    "cutoffs, match",
    [
        (pd.PeriodIndex(["2003-06"], freq="M"), "is after the last observation of y"),
        (pd.PeriodIndex([pd.NaT], freq="M"), "missing value"),
        (pd.PeriodIndex(["1999-06"], freq="M"), "before the first observation"),
    ],
)
def test_backtest_cutoffs_outside_the_data_are_refused(fitted, cutoffs, match):
    with pytest.raises(ValueError, match=match):
        fitted.historical_forecasts(series(), cutoffs=cutoffs)


@pytest.mark.parametrize(
    "value, error, match",
    [(True, TypeError, "booleans"), (np.inf, ValueError, "non-finite"), ("ten", TypeError, "must be numbers")],
)
def test_stream_refuses_booleans_and_infinite_observations(fitted, value, error, match):
    stream = fitted.stream()
    with pytest.raises(error, match=match):
        stream.update(value)
    assert stream.n_seen == 0


def test_a_stream_opened_before_a_refit_is_stale():
    f = SSMForecaster(**TINY).fit(series(), fh=[1, 2])
    stream = f.stream()
    stream.update(10.0)
    f.fit(series(), fh=[1, 2])
    with pytest.raises(ValueError, match="fitted again after this stream was opened"):
        stream.predict()


class _Interrupt(Exception):
    pass


def _interrupting(epochs=1):
    from ssmts.training import Callback

    class Stop(Callback):
        def on_epoch_end(self, trainer, record):
            if record["epoch"] >= epochs:
                raise _Interrupt

    return Stop()


def test_an_interrupted_update_leaves_the_forecaster_as_it_was():
    f = SSMForecaster(**TINY, update_epochs=3).fit(series(30), fh=[1, 2])
    before = (f.cutoff, f.predict().to_numpy(), len(f.history_), {k: v[0].index[-1] for k, v in f._store.items()})
    f.callbacks = [_interrupting()]  # not set_params, which resets a sktime forecaster to unfitted
    with pytest.raises(_Interrupt):
        f.update(series(36).iloc[30:], update_params=True)
    assert f.cutoff == before[0] and len(f.history_) == before[2]
    assert {k: v[0].index[-1] for k, v in f._store.items()} == before[3]
    np.testing.assert_array_equal(f.predict().to_numpy(), before[1])


def test_an_interrupted_refit_keeps_the_previous_fit():
    f = SSMForecaster(**TINY).fit(series(), fh=[1, 2])
    expected = f.predict().to_numpy()
    f.callbacks, f.max_epochs = [_interrupting()], 3
    with pytest.raises(_Interrupt):
        f.fit(series(50), fh=[1, 2, 3])
    np.testing.assert_array_equal(f.predict().to_numpy(), expected)
