"""ForecastStream: SSMForecaster forecasts updated one observation at a time.

Every step appends the new observation to a buffer of the last context_length values (and
X rows) and runs the network on that window, so step t's forecast equals
update(y[t], update_params=False) + predict on the prefix, exactly.

Why the window is run again rather than the layers' recurrent `step` state carried: the
network reads a normalized window. normalize shifts and scales the whole context by
statistics of the window (its last value, mean, spread), which change with every new
observation, and even with global standardization the direct head (and the recursive
context read) sees only the last context_length points, a sliding window that a
recurrence cannot forget its way out of through the nonlinear layers. A step therefore
costs one forward over context_length (+ horizon) positions at batch 1 (plus the roll for
strategy="recursive"), not O(1): cheap for the short contexts of classic series.
"""

from __future__ import annotations

import numpy as np

from ._backtest import relative_steps
from ._strategies import quantile_probabilities
from ._windows import fill_forward, key_name
from ._windows import steps as horizon_steps


class ForecastStream:
    """Streaming forecasts of one series of a fitted SSMForecaster (the forecaster does not move).

    update(y, X=None): append one observation, y of shape (C,) (or a scalar for one
    column), X its exogenous row (C_x,) when fitted with X.
    predict(X_future=None, alpha=None): forecast at the fh steps from the last observation:
    point (k, C), or with alpha (point, quantiles (k, C, A)). X_future: (n, C_x) X at the
    steps 1..n after the last observation (n = the trained horizon for strategy="direct",
    max(fh) for "recursive").
    step(y, X=None, X_future=None, alpha=None): update then predict.
    """

    def __init__(self, forecaster, instance=None, fh=None):
        self._f = forecaster
        key = () if instance is None else (instance if isinstance(instance, tuple) else (instance,))
        if key not in forecaster._store:
            known = [k if len(k) != 1 else k[0] for k in forecaster._store]
            what = "one series (instance=None)" if known == [()] else f"the series {known[:10]}"
            if instance is None and known != [()]:  # a panel: which series to stream
                raise ValueError(f"stream: the forecaster was fitted on a panel; pass instance=, one of {known[:10]}")
            raise ValueError(f"stream: no series {instance!r}; the forecaster was fitted on {what}")
        if forecaster.irregular == "time_deltas":
            raise ValueError(
                "stream() takes one step per period of a regular time index; with "
                "irregular='time_deltas' use update + predict"
            )
        if forecaster.n_exog_ and (forecaster._x_past.any() or forecaster._x_static.any()):
            raise ValueError(
                "stream() does not take past_covariates or static_covariates yet; use update(..., "
                "update_params=False) + predict, or historical_forecasts"
            )
        self.key = key
        tail, x_old = forecaster._store[key]
        fh, _ = relative_steps(forecaster, fh)
        self.steps = forecaster._check_steps(horizon_steps(fh, tail.index), key)
        self.n_future = forecaster._strategy.future_steps(forecaster.horizon_, int(self.steps.max()))
        tail = tail[tail.index <= forecaster.cutoff[0]]
        c = forecaster.context_length_
        self._y = tail.to_numpy()[-c:].copy()  # the last <= c observations, oldest first
        self._x = None
        if forecaster.n_exog_:
            self._x = forecaster._x_rows(key, x_old, tail.index[-len(self._y) :], "the context")
        self.n_seen = 0  # observations streamed so far
        self._fit_id = forecaster._fit_id_  # a refit makes this stream's context and weights stale

    @property
    def ready(self) -> bool:
        """Whether a full context has been seen (forecasts need context_length observations)."""
        return len(self._y) >= self._f.context_length_

    def _check_current(self) -> None:
        if self._f._fit_id_ != self._fit_id:
            raise ValueError(
                f"the {type(self._f).__name__} was fitted again after this stream was opened: its context and "
                "weights are stale; open a new stream with forecaster.stream()"
            )

    @staticmethod
    def _values(value, what: str, allow_nan: bool) -> np.ndarray:
        """value as a float64 row; booleans and infinite values are refused (NaN is a missing value)."""
        array = np.asarray(value)
        if array.dtype == bool or array.dtype == object and any(isinstance(v, bool) for v in array.ravel()):
            raise TypeError(f"{what} must be numbers, got booleans: {value!r}")
        try:
            row = array.astype(np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise TypeError(f"{what} must be numbers, got {value!r}") from None
        if np.isinf(row).any() or (not allow_nan and np.isnan(row).any()):
            raise ValueError(
                f"{what} holds a non-finite value: {row.tolist()} (NaN is a missing value, inf is refused)"
            )
        return row

    def update(self, y, X=None) -> "ForecastStream":
        f, c = self._f, self._f.context_length_
        self._check_current()
        row = self._values(y, "stream.update's observation", allow_nan=True)
        if row.shape != (f.n_targets_,):
            raise ValueError(f"stream.update takes one observation of {f.n_targets_} value(s), got shape {np.shape(y)}")
        if f.n_exog_:
            if X is None:
                raise ValueError(
                    f"{type(f).__name__} was fitted with exogenous X ({f.n_exog_} columns), so "
                    f"stream.update needs the new observation's X row"
                )
            x = self._values(X, "stream.update's X row", allow_nan=True)
            if x.shape != (f.n_exog_,):
                raise ValueError(f"stream.update: X must hold {f.n_exog_} value(s), got shape {np.shape(X)}")
            self._x = np.concatenate([self._x, self._standardize(x[None], self._x[-1:])])[-c:]
        elif X is not None:
            raise ValueError(f"{type(f).__name__} was fitted without exogenous X, but X was passed to stream.update")
        self._y = np.concatenate([self._y, row[None]])[-c:]
        self.n_seen += 1
        return self

    def predict(self, X_future=None, alpha=None):
        f, c = self._f, self._f.context_length_
        self._check_current()
        if not self.ready:
            raise ValueError(
                f"context_length={c} is longer than what {key_name(self.key)} has seen so far "
                f"({len(self._y)} observations); stream.update more before predicting"
            )
        x_future = None
        if f.n_exog_:
            if X_future is None:
                raise ValueError(
                    f"{type(f).__name__} was fitted with exogenous X, so stream.predict needs X_future: "
                    f"X at the forecast steps 1..{self.n_future}"
                )
            x_future = self._values(X_future, "stream.predict's X_future", allow_nan=True).reshape(-1, f.n_exog_)
            if len(x_future) < self.n_future:
                raise ValueError(
                    f"stream.predict needs X at the forecast steps 1..{self.n_future}, but X_future "
                    f"has {len(x_future)} row(s)"
                )
            x_future = self._standardize(x_future[: self.n_future], self._x[-1:])
        elif X_future is not None:
            raise ValueError(f"{type(f).__name__} was fitted without exogenous X, but X_future was passed")
        f._check_observed(self._y, f"the last {c} observations of {key_name(self.key)}")
        if alpha is not None:
            alpha = quantile_probabilities(alpha)
        ((point, q),) = f._run([(self._y, self.steps, self._x, x_future)], alpha)
        return point if alpha is None else (point, q)

    def _standardize(self, rows: np.ndarray, previous: np.ndarray) -> np.ndarray:
        """Raw X rows (n, C_x) -> standardized, gaps carried forward from `previous` (the last
        standardized row, (1, C_x) or empty), then 0 (the training mean), as predict does."""
        z = (rows - self._f.x_mean_) / self._f.x_scale_
        first = previous if len(previous) else np.zeros((1, z.shape[1]))  # never NaN
        return fill_forward(np.concatenate([first, z]).T).T[1:]

    def step(self, y, X=None, X_future=None, alpha=None):
        return self.update(y, X).predict(X_future, alpha)
