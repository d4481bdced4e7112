"""Backtests: forecasts from many origins of a series or panel with the fitted weights.

historical_forecasts(forecaster, y, ...) equals update(y up to each cutoff, update_params=False)
+ predict for every cutoff, but sends the K context windows of every series through the
network as one set of batches instead of K calls; the forecaster does not move.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sktime.forecasting.base import ForecastingHorizon

from ._strategies import quantile_probabilities
from ._windows import check_regular_index, future_times, key_name, pad_front
from ._windows import steps as horizon_steps


def relative_steps(forecaster, fh) -> tuple[ForecastingHorizon, np.ndarray]:
    """fh (None: the fitted one) as relative steps ahead of every origin."""
    if fh is None:
        fh = forecaster.fh if forecaster.fh.is_relative else forecaster.fh.to_relative(forecaster.cutoff)
    elif not isinstance(fh, ForecastingHorizon):
        fh = ForecastingHorizon(fh)
    if not fh.is_relative:
        raise ValueError(
            "historical_forecasts and stream need a relative fh (steps ahead of each origin, "
            f"e.g. [1, 2, 3]), got the absolute {list(fh.to_pandas())}"
        )
    return fh, np.asarray(fh.to_pandas(), dtype=np.int64)


def historical_forecasts(forecaster, y, X=None, cutoffs=None, fh=None, alpha=None) -> pd.DataFrame:
    """SSMForecaster.historical_forecasts (see there) of a fitted forecaster."""
    forecaster.check_is_fitted()
    if forecaster.irregular == "time_deltas":
        raise ValueError(
            "historical_forecasts forecasts relative steps from each cutoff, which an irregular "
            "time index (irregular='time_deltas') does not have; use update + predict with "
            "the time stamps as fh"
        )
    fh, _ = relative_steps(forecaster, fh)
    if alpha is not None:
        alpha = quantile_probabilities(alpha)
    y = y.to_frame() if isinstance(y, pd.Series) else y
    X = X.to_frame() if isinstance(X, pd.Series) else X
    forecaster._check_y_columns(y)
    forecaster._check_x_columns(X, "historical_forecasts")
    if X is not None:
        X = X.reindex(columns=forecaster._x_columns)  # left-out static columns: the remembered values
    c = forecaster.context_length_
    items, labels = [], []
    for key, yp, xp in forecaster._split_xy(y, X):
        index = yp.index
        check_regular_index(index, f"the time index of {key_name(key)}")
        steps = forecaster._check_steps(horizon_steps(fh, index), key)
        n_future = forecaster._strategy.future_steps(forecaster.horizon_, int(steps.max()))
        if cutoffs is None:
            positions = np.arange(c - 1, len(index))
            asked = index[positions]
        else:
            asked = cutoffs if isinstance(cutoffs, pd.Index) else pd.Index(list(np.atleast_1d(cutoffs)))
            if asked.isna().any():
                raise ValueError(f"cutoffs holds a missing value (NaN/NaT): {list(asked)}")
            late = asked[asked > index[-1]]
            if len(late):
                raise ValueError(
                    f"cutoff {late[0]} is after the last observation of {key_name(key)} ({index[-1]}): a backtest "
                    "forecasts from cutoffs inside the data; pass y up to the latest cutoff"
                )
            # as update + predict: a series' origin is its last observation at or before the cutoff
            positions = index.searchsorted(asked, side="right") - 1
        short = np.flatnonzero(positions < 0)
        if len(short):
            raise ValueError(
                f"cutoff {asked[short[0]]} comes before the first observation of {key_name(key)} ({index[0]}): "
                "there is nothing to forecast from"
            )
        # A regular index: the time of step s after position p is full[p + s].
        full = index.append(future_times(fh, index, range(1, n_future + 1)))
        values = yp.to_numpy()
        x_ctx = x_fut = None
        if forecaster.n_exog_:
            if forecaster._x_static.any() and key not in forecaster._statics:
                raise ValueError(
                    f"{key_name(key)} was not seen in fit or update, so its static covariates are "
                    "unknown; update the forecaster with it first"
                )
            # context rows read every column; forecast steps never the past-only ones
            in_ctx, in_fut = np.zeros(len(full), dtype=bool), np.zeros(len(full), dtype=bool)
            for p in positions:
                in_ctx[max(0, p - c + 1) : p + 1] = True
                in_fut[p + 1 : p + n_future + 1] = True
            x_ctx, x_fut = (np.full((len(full), forecaster.n_exog_), np.nan) for _ in range(2))
            x_ctx[in_ctx] = forecaster._x_rows(key, xp, full[in_ctx], "the contexts of the cutoffs")
            x_fut[in_fut] = forecaster._x_rows(key, xp, full[in_fut], "the forecast steps of the cutoffs", future=True)
        for label, p in zip(asked, positions):
            first = max(0, p - c + 1)  # a cutoff early in the series: a context padded with missing values
            forecaster._check_observed(
                values[first : p + 1],
                f"the context of {key_name(key)} at cutoff {label} (its last {p + 1 - first} observations)",
            )
            items.append(
                (
                    pad_front(values[first : p + 1], c, np.nan),
                    steps,
                    None if x_ctx is None else pad_front(x_ctx[first : p + 1], c, 0.0),
                    None if x_fut is None else x_fut[p + 1 : p + 1 + n_future],
                )
            )
            labels.append(((*key, label), full[p + steps]))
    if not items:
        raise ValueError("historical_forecasts got no cutoffs")
    outputs = forecaster._run(items, alpha)
    names = [*forecaster._index_names[:-1], "cutoff", forecaster._index_names[-1]]
    if alpha is None:
        return forecaster._assemble(
            [(k, t, point) for (k, t), (point, _) in zip(labels, outputs)], forecaster._y_columns, names
        )
    frames = [(k, t, q.reshape(len(t), -1)) for (k, t), (_, q) in zip(labels, outputs)]
    return forecaster._assemble(frames, forecaster._get_columns(method="predict_quantiles", alpha=list(alpha)), names)
