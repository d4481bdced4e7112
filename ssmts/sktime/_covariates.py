"""Exogenous X of the forecaster: the roles of its columns, their standardization, and the
checks that name what is missing.

    ordinary columns   read over the context and at every forecast step (known in advance)
    past_covariates    read over the context only; 0 at the forecast steps of training and predict
    static_covariates  one value per series, remembered from fit/update; constant input channels

Every row the network reads is standardized with the training mean and scale of its column,
gaps carried forward from earlier rows and then set to the mean (0).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ._windows import as_float, key_name


class CovariatesMixin:
    """SSMForecaster's handling of X. Fitted state it reads: n_exog_, x_mean_, x_scale_,
    _x_columns, _x_past / _x_static ((C_x,) bool), _statics ({series key: (S,) values})."""

    def _check_X_y(self, X=None, y=None, **kwargs):
        """sktime's input check (fit, update, predict), after refusing a numpy X that cannot be indexed like
        y: sktime reads an array's n rows as the time points 0..n-1, which hold neither a PeriodIndex's or
        DatetimeIndex's points nor the forecast steps after a cutoff."""
        if isinstance(X, np.ndarray):
            _check_array_x(self, X, y)
        return super()._check_X_y(X=X, y=y, **kwargs)

    def _x_roles(self, X: pd.DataFrame | None) -> None:
        """Which columns of X are past-only and static: (C_x,) bool each, checked against X's columns."""
        columns = [] if X is None else list(X.columns)
        named = {"past_covariates": list(self.past_covariates), "static_covariates": list(self.static_covariates)}
        for what, names in named.items():
            unknown = [name for name in names if name not in columns]
            if unknown:
                raise ValueError(
                    f"{what} names {unknown}, which "
                    + (f"are not columns of X (its columns are {columns})" if X is not None else "needs X in fit")
                )
        both = sorted(set(named["past_covariates"]) & set(named["static_covariates"]))
        if both:
            raise ValueError(f"{both} are both past and static covariates; a column of X is one or the other")
        self._x_past = np.array([name in named["past_covariates"] for name in columns], dtype=bool)
        self._x_static = np.array([name in named["static_covariates"] for name in columns], dtype=bool)

    def _series_statics(self, key: tuple, x_part: pd.DataFrame | None) -> np.ndarray:
        """The static covariates of one series (S,): one value per column over its rows (NaN rows
        ignored), the remembered one where x_part has none; clear errors otherwise."""
        names = list(self._x_columns[self._x_static])
        known = self._statics.get(key)
        values = pd.DataFrame(columns=names, dtype=np.float64) if x_part is None else x_part.reindex(columns=names)
        counts = values.nunique()
        if (counts > 1).any():
            name = counts.index[int(np.argmax(counts.to_numpy() > 1))]
            raise ValueError(
                f"static covariate {name!r} varies within {key_name(key)} (values "
                f"{values[name].dropna().unique()[:3].tolist()} ...); a static covariate has one "
                "value per series"
            )
        value = values.max().to_numpy(dtype=np.float64)  # the one observed value; NaN where there is none
        if known is not None:
            changed = ~np.isnan(value) & (value != known)
            if changed.any():
                j = int(np.argmax(changed))
                raise ValueError(
                    f"static covariate {names[j]!r} of {key_name(key)} is {value[j]} in X, but was "
                    f"{known[j]} before; a static covariate has one value per series"
                )
            return known
        if np.isnan(value).any():
            j = int(np.argmax(np.isnan(value)))
            raise ValueError(
                f"static covariate {names[j]!r} is missing for {key_name(key)}: X has no value of it for this series"
            )
        return value

    def _x_rows(
        self, key: tuple, x_all: pd.DataFrame | None, times: pd.Index, what: str, future: bool = False
    ) -> np.ndarray:
        """Globally standardized X at `times`: (len(times), C_x); a clear error if time points are missing.

        Gaps (NaN) are carried forward from earlier rows of x_all, then set to the training
        mean (0); static columns hold the series' value. future: rows after the cutoff, where
        past-only columns are 0 whatever x_all holds (the network never sees them there).
        """
        needed = ~(self._x_past | self._x_static) if future else ~self._x_static
        if needed.any() and x_all is None:
            raise ValueError(
                f"{type(self).__name__} was fitted with exogenous X ({self.n_exog_} columns), so it needs X "
                f"for {what} of {key_name(key)}; pass X covering them"
            )
        missing = times[~times.isin(x_all.index)] if needed.any() else times[:0]
        if len(missing):
            shown = ", ".join(map(str, missing[:5])) + (" ..." if len(missing) > 5 else "")
            raise ValueError(
                f"X is missing {len(missing)} time point(s) needed for {what} of {key_name(key)}: {shown}; "
                f"{type(self).__name__} was fitted with exogenous X, so fit/update/predict must pass X covering them"
            )
        rows = (
            np.full((len(times), self.n_exog_), np.nan)
            if x_all is None
            else x_all.ffill().reindex(times).to_numpy(dtype=np.float64, copy=True)
        )
        rows[:, self._x_static] = self._statics[key]
        z = (rows - self.x_mean_) / self.x_scale_
        if future:
            z[:, self._x_past] = 0.0
        return np.where(np.isnan(z), 0.0, z)

    def _context_x(self, key, x_old, x_new, context: pd.Index, future: pd.Index, what: str):
        """Standardized X over a context and at future times: (c, C_x), (k, C_x)."""
        xp = x_new.get(key)
        if xp is not None and self._x_static.any():
            self._series_statics(key, xp)  # values passed again must be the remembered ones
        # new values win where given (left-out columns are NaN, so they keep the remembered ones)
        x_all = x_old if xp is None else as_float(xp, "X").combine_first(x_old)[self._x_columns]
        if self._x_past.any():  # past-only columns are unknown after the cutoff, whatever X holds
            x_all = x_all.copy()
            x_all.loc[x_all.index > self.cutoff[0], self._x_columns[self._x_past]] = np.nan
        return self._x_rows(key, x_all, context, "the context"), self._x_rows(key, x_all, future, what, future=True)

    def _check_x_columns(self, X, method: str) -> None:
        if X is None:
            return
        if not self.n_exog_:
            raise ValueError(f"{type(self).__name__} was fitted without exogenous X, but X was passed to {method}")
        fitted, given = list(self._x_columns), list(X.columns)
        # remembered static values, and past-only ones (never read after the cutoff), need not be passed
        optional = self._x_static | (self._x_past if method == "predict" else False)
        required = [name for name, skip in zip(fitted, optional) if not skip]
        if given != [name for name in fitted if name in given] or not set(required) <= set(given):
            raise ValueError(
                f"X passed to {method} has columns {given}, but {type(self).__name__} was fitted with {fitted}"
                + (
                    f" (of which {[n for n, skip in zip(fitted, optional) if skip]} may be left out)"
                    if optional.any()
                    else ""
                )
                + (
                    f": the same columns in another order (X[{[n for n in fitted if n in given]}] gives the fitted one)"
                    if set(required) <= set(given) <= set(fitted)
                    else ""
                )
            )


def _check_array_x(forecaster, X: np.ndarray, y) -> None:
    """A numpy X passes where sktime's reading of it (rows at the time points 0..n-1) covers y's time
    points: y an array too, or a single series on the points 0..n-1. Else: what to pass instead."""
    rows = f"sktime reads its {len(X)} rows as the time points 0..{len(X) - 1}"
    if y is None:  # predict: X holds the future steps
        if not getattr(forecaster, "n_exog_", 0):
            return  # the forecaster's own error: fitted without X
        cutoff = forecaster.cutoff
        after = f" after the cutoff {cutoff[0]}" if len(cutoff) == 1 else " after each series' cutoff"
        raise TypeError(
            f"X is a numpy array, which has no time index ({rows}): predict needs X at every forecast step "
            f"1..max(fh){after}. Pass X as a pandas DataFrame indexed by those time points (y's index continued), "
            "with the columns of fit's X"
        )
    if not isinstance(y, (pd.Series, pd.DataFrame)):
        return  # y an array too (sktime indexes both alike), or another of sktime's types: its own checks
    if isinstance(y.index, pd.MultiIndex):
        raise TypeError(
            f"X is a numpy array, which has no time index ({rows}), but y is a panel (a MultiIndex); pass X as a "
            "pandas DataFrame with y's (series, time) index, one row for each of y's rows"
        )
    if not y.index.isin(pd.RangeIndex(len(X))).all():
        raise TypeError(
            f"X is a numpy array, which has no time index ({rows}), but y's time points are {y.index[0]}.."
            f"{y.index[-1]}; pass X as a pandas DataFrame indexed like y (a row for each time point of y)"
        )
