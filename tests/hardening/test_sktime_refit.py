"""A failed or interrupted refit of the sktime estimators leaves the earlier fit intact (sktime's fit
resets an estimator before fitting it again)."""

import warnings

import numpy as np
import pandas as pd
import pytest

from ssmts.sktime import SSMForecaster, SSMPanelClassifier, SSMPanelRegressor
from ssmts.training import Callback

TINY = dict(d_model=8, d_state=4, n_layers=1, max_epochs=2, device="cpu", random_state=0)


class Interrupt(Callback):
    """Ctrl-C after the first epoch."""

    def on_epoch_end(self, trainer, record):
        raise KeyboardInterrupt


def panel_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 2, 30))
    labels = np.where(X[:, 0].mean(axis=1) > 0, "up", "down")
    return X, labels, X[:, 0].mean(axis=1)


def fitted(kind):
    X, labels, target = panel_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        if kind == "classifier":
            return SSMPanelClassifier(**TINY, min_steps=0).fit(X, labels), X
        if kind == "regressor":
            return SSMPanelRegressor(**TINY, min_steps=0).fit(X, target), X
        y = pd.Series(np.sin(np.arange(40) / 2.0), index=pd.period_range("2000-01", periods=40, freq="M"))
        y = pd.concat({"a": y, "b": 2 * y}, names=["shop", "month"]).to_frame("sales")
        return SSMForecaster(**TINY, context_length=6).fit(y, fh=[1, 2]), y


def refit(estimator, data, kind, broken):
    X, labels, target = panel_data()
    if kind == "forecaster":
        y = data.copy()
        if broken:
            y.iloc[5, 0] = np.inf
        return estimator.fit(y, fh=[1, 2, 3])
    if broken:
        X = X.copy()
        X[0, 0, 0] = np.nan  # the panel estimators take no missing values: sktime refuses them in fit
    return estimator.fit(X[:12], labels[:12] if kind == "classifier" else target[:12])


def outputs(estimator, data, kind):
    return estimator.predict().to_numpy() if kind == "forecaster" else np.asarray(estimator.predict(data[:4]))


@pytest.mark.parametrize("kind", ["classifier", "regressor", "forecaster"])
@pytest.mark.parametrize("failure", ["interrupt", "error"])
def test_a_failed_or_interrupted_refit_keeps_the_earlier_fit(kind, failure):
    estimator, data = fitted(kind)
    before = outputs(estimator, data, kind)
    if failure == "interrupt":
        estimator.callbacks = [Interrupt()]  # not set_params, which resets a sktime estimator to unfitted
        with pytest.raises(KeyboardInterrupt):
            refit(estimator, data, kind, broken=False)
    else:
        with pytest.raises((ValueError, TypeError)):
            refit(estimator, data, kind, broken=True)
    assert estimator.is_fitted
    np.testing.assert_array_equal(outputs(estimator, data, kind), before)
    estimator.callbacks = None
    refit(estimator, data, kind, broken=False)  # and it still refits
    assert estimator.is_fitted
