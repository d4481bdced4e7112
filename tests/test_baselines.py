"""Classical regression baselines: RMSE helper, table layout, and ridge on a linear target."""

from __future__ import annotations

import numpy as np
import pytest

from ssmts.baselines import fit_vital_baselines, mae, rmse
from ssmts.data.base import Split, TaskData

COLUMNS = ["val_rmse", "val_mae", "test_rmse", "test_mae", "fit_seconds", "n_train", "n_features", "details"]


def _linear_task(n_train: int = 200, n_eval: int = 60, channels: int = 2, length: int = 15, seed: int = 0) -> TaskData:
    """Windows X: (n, channels, length) whose target is a fixed linear function of X plus 1 % noise."""
    rng = np.random.default_rng(seed)
    weights = rng.normal(size=channels * length)

    def split(n: int) -> Split:
        X = rng.normal(size=(n, channels, length)).astype(np.float32)
        signal = X.reshape(n, -1).astype(np.float64) @ weights + 20.0
        return Split(X, signal + 0.01 * np.std(signal) * rng.normal(size=n))

    return TaskData(train=split(n_train), val=split(n_eval), test=split(n_eval), sample_rate=125.0)


def test_rmse_and_mae_on_known_values():
    assert rmse(np.array([0.0, 0.0]), np.array([3.0, 4.0])) == pytest.approx(np.sqrt(12.5))
    assert mae(np.array([0.0, 0.0]), np.array([3.0, -4.0])) == pytest.approx(3.5)
    assert rmse([1.0, 2.0], [1.0, 2.0]) == 0.0
    with pytest.raises(ValueError, match="shape"):
        rmse(np.zeros(3), np.zeros((3, 1)))
    with pytest.raises(ValueError, match="empty"):
        rmse(np.zeros(0), np.zeros(0))


def test_ridge_recovers_a_linear_target_and_table_layout():
    data = _linear_task()
    table = fit_vital_baselines(data, models=("mean", "ridge"))
    assert list(table.index) == ["mean", "ridge"]
    assert list(table.columns) == COLUMNS
    assert table.loc["ridge", "n_features"] == 30 and table.loc["ridge", "n_train"] == 200
    spread = np.std(data.test.y)
    assert table.loc["ridge", "test_rmse"] < 0.05 * spread
    assert table.loc["ridge", "val_rmse"] < 0.05 * spread
    assert table.loc["ridge", "details"].startswith("alpha=")
    # the mean predictor is the floor: its RMSE is about the target's spread
    assert table.loc["mean", "test_rmse"] == pytest.approx(
        rmse(data.test.y, np.full_like(data.test.y, data.train.y.mean()))
    )
    assert table.loc["mean", "test_rmse"] > 10 * table.loc["ridge", "test_rmse"]
    assert (table["fit_seconds"] >= 0).all()


def test_tree_models_fit_and_beat_the_mean_on_a_simple_target():
    rng = np.random.default_rng(1)

    def split(n: int) -> Split:
        X = rng.normal(size=(n, 1, 8)).astype(np.float32)
        return Split(X, 10.0 * (X[:, 0, 0] > 0) + X[:, 0, 1])  # a step the trees can place

    data = TaskData(train=split(300), val=split(80), test=split(80))
    table = fit_vital_baselines(
        data,
        models=("mean", "random_forest", "hist_gradient_boosting"),
        params={"random_forest": {"n_estimators": 30, "max_features": 1.0}, "hist_gradient_boosting": {"max_iter": 50}},
    )
    assert table.loc["random_forest", "details"] == "n_estimators=30, max_features=1.0"
    for model in ("random_forest", "hist_gradient_boosting"):
        assert table.loc[model, "test_rmse"] < 0.5 * table.loc["mean", "test_rmse"]
    repeat = fit_vital_baselines(data, models=("random_forest",), params={"random_forest": {"n_estimators": 30}})
    again = fit_vital_baselines(data, models=("random_forest",), params={"random_forest": {"n_estimators": 30}})
    assert repeat.loc["random_forest", "test_rmse"] == again.loc["random_forest", "test_rmse"]  # seeded


def test_bad_inputs_get_clear_errors():
    data = _linear_task(n_train=20, n_eval=5)
    with pytest.raises(ValueError, match="unknown model"):
        fit_vital_baselines(data, models=("xgboost",))
    with pytest.raises(ValueError, match="not in models"):
        fit_vital_baselines(data, models=("ridge",), params={"random_forest": {}})
    two_targets = TaskData(
        train=Split(data.train.X, np.stack([data.train.y, data.train.y], 1)), val=data.val, test=data.test
    )
    with pytest.raises(ValueError, match="select one target"):
        fit_vital_baselines(two_targets, models=("ridge",))
    classification = TaskData(train=data.train, val=data.val, test=data.test, n_classes=3)
    with pytest.raises(ValueError, match="regression"):
        fit_vital_baselines(classification)
