"""Classical baselines: MiniRocket for classification and regression, and regressors for the vital-sign tasks.

``MiniRocketRidge`` is MiniRocket's transform (sktime) with a ridge read-out, the row that
``ssmts demo`` and ``python -m ssmts.bench classify`` set beside the SSMs.


LSSL's BIDMC table compares against gradient boosting (XGBoost) and ridge regression
fitted on the raw windows. ``fit_vital_baselines`` fits scikit-learn counterparts on the
same ``TaskData`` splits a deep model uses, so their RMSEs can sit in one table::

    from ssmts.baselines import fit_vital_baselines
    table = fit_vital_baselines(data)          # pandas DataFrame, one row per model
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ssmts.data.base import TaskData

BASELINE_MODELS = ("ridge", "random_forest", "hist_gradient_boosting", "mean")
# Ridge penalties tried on the validation split, in half-decade steps. The upper end is
# high because tens of thousands of correlated, standardized samples of a waveform need
# strong shrinkage.
RIDGE_ALPHAS = tuple(float(a) for a in np.logspace(-2, 6, 17))


def _paired(y_true, y_pred, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Both as float64 arrays; a clear error for different shapes or empty input."""
    y_true = np.asarray(y_true, dtype=np.float64)
    y_pred = np.asarray(y_pred, dtype=np.float64)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"y_true has shape {y_true.shape} but y_pred has {y_pred.shape}")
    if y_true.size == 0:
        raise ValueError(f"{metric} of empty arrays is undefined")
    return y_true, y_pred


def rmse(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Root mean squared error; ``y_true`` and ``y_pred`` of the same shape, e.g. ``(n,)``."""
    y_true, y_pred = _paired(y_true, y_pred, "rmse")
    return float(np.sqrt(np.mean((y_true - y_pred) ** 2)))


def mae(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Mean absolute error; ``y_true`` and ``y_pred`` of the same shape."""
    y_true, y_pred = _paired(y_true, y_pred, "mae")
    return float(np.mean(np.abs(y_true - y_pred)))


def fit_vital_baselines(
    data: TaskData,
    models: Sequence[str] = ("ridge", "random_forest", "hist_gradient_boosting"),
    random_state: int = 0,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    n_jobs: int | None = None,
) -> pd.DataFrame:
    """Fit classical regressors on raw flattened windows; RMSE/MAE on val and test.

    Every model sees ``X: (n, channels, length)`` flattened to ``(n, channels * length)``
    (e.g. ``(n, 8000)`` for BIDMC), trained on ``data.train`` only:

    - ``"ridge"``: ``Pipeline(StandardScaler, Ridge)``, alpha picked from ``RIDGE_ALPHAS``
      by validation RMSE (the model reported is the one fitted on train with that alpha).
    - ``"random_forest"``: ``RandomForestRegressor(n_estimators=200, max_features="sqrt")``;
      "sqrt" keeps thousands of raw time steps tractable (all features per split would
      be about 90 times slower on BIDMC).
    - ``"hist_gradient_boosting"``: ``HistGradientBoostingRegressor`` with sklearn's
      defaults; it stands in for the XGBoost row of LSSL's table (same model family,
      no extra dependency), so its numbers are comparable in kind, not identical.
    - ``"mean"``: predicts the training mean; the floor any model must beat.

    params: per-model keyword overrides, e.g. ``{"random_forest": {"n_estimators": 50}}``.
    n_jobs: passed to the random forest (None = one core).

    Returns a DataFrame indexed by model with columns ``val_rmse, val_mae, test_rmse,
    test_mae, fit_seconds, n_train, n_features, details`` (details: chosen
    hyper-parameters). Targets must be one-dimensional ``y: (n,)``.
    """
    if data.n_classes is not None:
        raise ValueError(f"fit_vital_baselines is for regression; this task has {data.n_classes} classes")
    unknown = [m for m in models if m not in BASELINE_MODELS]
    if unknown:
        raise ValueError(f"unknown model(s) {unknown}; choose from {BASELINE_MODELS}")
    if not models:
        raise ValueError("models is empty")
    params = dict(params or {})
    stray = [m for m in params if m not in models]
    if stray:
        raise ValueError(f"params given for model(s) {stray} that are not in models={tuple(models)}")

    X_train, y_train = _flatten(data.train.X), _target(data.train.y, "train")
    X_val, y_val = _flatten(data.val.X), _target(data.val.y, "val")
    X_test, y_test = _flatten(data.test.X), _target(data.test.y, "test")
    if not X_train.shape[1] == X_val.shape[1] == X_test.shape[1]:
        raise ValueError(
            f"train, val and test windows differ in size ({X_train.shape[1]}, {X_val.shape[1]}, "
            f"{X_test.shape[1]} values); pad or crop them to one length first"
        )

    rows = []
    for name in models:
        started = time.perf_counter()
        model, details = _fit(name, X_train, y_train, X_val, y_val, random_state, dict(params.get(name, {})), n_jobs)
        fit_seconds = time.perf_counter() - started
        val_pred, test_pred = model.predict(X_val), model.predict(X_test)
        rows.append(
            {
                "model": name,
                "val_rmse": rmse(y_val, val_pred),
                "val_mae": mae(y_val, val_pred),
                "test_rmse": rmse(y_test, test_pred),
                "test_mae": mae(y_test, test_pred),
                "fit_seconds": fit_seconds,
                "n_train": len(y_train),
                "n_features": X_train.shape[1],
                "details": details,
            }
        )
    return pd.DataFrame(rows).set_index("model")


def _flatten(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X)
    if X.ndim < 2:
        raise ValueError(f"expected X of shape (n, channels, length) or (n, features), got {X.shape}")
    flat = X.reshape(len(X), -1)
    if not np.all(np.isfinite(flat)):
        raise ValueError("X contains NaN or infinite values; the sklearn baselines cannot use them")
    return flat


def _target(y: np.ndarray, split: str) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1:
        raise ValueError(
            f"{split} targets have shape {y.shape}; fit_vital_baselines needs y: (n,), so select "
            f"one target (e.g. make_synthetic_vitals(target='rr'))"
        )
    if len(y) == 0:
        raise ValueError(f"the {split} split is empty")
    return y


def _fit(
    name: str,
    X_train: np.ndarray,
    y_train: np.ndarray,
    X_val: np.ndarray,
    y_val: np.ndarray,
    random_state: int,
    overrides: dict[str, Any],
    n_jobs: int | None,
) -> tuple[Any, str]:
    from scipy.linalg import LinAlgWarning
    from sklearn.dummy import DummyRegressor
    from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    if name == "ridge":
        alphas = tuple(overrides.pop("alphas", RIDGE_ALPHAS))
        if not alphas:
            raise ValueError("params['ridge']['alphas'] is empty")
        # The scaler does not depend on alpha, so fit it once and search over Ridge only.
        scaler = StandardScaler().fit(X_train)
        Z_train, Z_val = scaler.transform(X_train), scaler.transform(X_val)
        best: tuple[float, float, Any] | None = None
        with warnings.catch_warnings():
            # With more time steps than windows the small alphas are ill-conditioned by
            # design; validation RMSE discards them, so scipy's warning is only noise.
            warnings.simplefilter("ignore", LinAlgWarning)
            for alpha in alphas:
                ridge = Ridge(alpha=alpha, **overrides).fit(Z_train, y_train)
                score = rmse(y_val, ridge.predict(Z_val))
                if best is None or score < best[0]:
                    best = (score, alpha, ridge)
        _, alpha, ridge = best  # type: ignore[misc]  # alphas is non-empty
        note = " (edge of the grid)" if alpha in (min(alphas), max(alphas)) else ""
        return Pipeline([("scale", scaler), ("ridge", ridge)]), f"alpha={alpha:g}{note}"
    if name == "random_forest":
        settings = {"n_estimators": 200, "max_features": "sqrt", "random_state": random_state, "n_jobs": n_jobs}
        settings.update(overrides)
        model = RandomForestRegressor(**settings).fit(X_train, y_train)
        return model, f"n_estimators={model.n_estimators}, max_features={model.max_features}"
    if name == "hist_gradient_boosting":
        settings = {"random_state": random_state}
        settings.update(overrides)
        model = HistGradientBoostingRegressor(**settings).fit(X_train, y_train)
        return model, f"n_iter={model.n_iter_}, learning_rate={model.learning_rate}"
    model = DummyRegressor(strategy="mean", **overrides).fit(X_train, y_train)
    return model, "predicts the training mean"


class MiniRocketRidge:
    """MiniRocket features (sktime; multivariate when there are several channels) + a ridge
    with its penalty chosen by leave-one-out, as in the MiniRocket paper (Dempster et al., 2021).

    X: (n, channels, length) array, or a list of (channels, length_i) arrays of unequal
    lengths (sktime's variable-length MiniRocket, short series padded with zeros).
    sktime's MiniRocket runs on numba. n_jobs: numba threads of the transform.
    """

    def __init__(self, regression: bool = False, random_state: int | None = 0, n_jobs: int = 1):
        self.regression, self.random_state, self.n_jobs = regression, random_state, n_jobs

    def fit(self, X, y) -> MiniRocketRidge:
        from sklearn.linear_model import RidgeClassifierCV, RidgeCV
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            from sktime.transformations.panel.rocket import (
                MiniRocket,
                MiniRocketMultivariate,
                MiniRocketMultivariateVariable,
            )
        if isinstance(X, np.ndarray):
            kind = MiniRocketMultivariate if X.shape[1] > 1 else MiniRocket
            transform = kind(random_state=self.random_state, n_jobs=self.n_jobs)
        else:  # unequal lengths: sktime's variable-length MiniRocket reads a nested DataFrame
            transform = MiniRocketMultivariateVariable(
                random_state=self.random_state, pad_value_short_series=0.0, n_jobs=self.n_jobs
            )
        ridge = (RidgeCV if self.regression else RidgeClassifierCV)(alphas=np.logspace(-3, 3, 10))
        self.transform_ = transform.fit(_sktime_panel(X))
        self.ridge_ = make_pipeline(StandardScaler(with_mean=False), ridge).fit(self._features(X), y)
        return self

    def _features(self, X) -> np.ndarray:
        return np.asarray(self.transform_.transform(_sktime_panel(X)))

    def predict(self, X) -> np.ndarray:
        """Labels (or values), (n,)."""
        return self.ridge_.predict(self._features(X))


def _sktime_panel(X):
    """numpy3D as it is; a list of (channels, length_i) arrays as a nested DataFrame."""
    if isinstance(X, np.ndarray):
        return X
    return pd.DataFrame({f"dim_{c}": [pd.Series(series[c]) for series in X] for c in range(X[0].shape[0])})
