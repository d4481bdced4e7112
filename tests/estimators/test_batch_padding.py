"""What a series' output does when it is predicted beside a longer series (float32, the estimators' path).

Series of unequal lengths are padded at the end and masked, and each prediction batch is cut at its
longest series, so the FFT size of a short series' convolutions follows the longest series of its
batch. The padding changes nothing exactly (tests/training/test_budget_and_buckets.py, in float64);
in float32 a longer FFT rounds differently, so the outputs agree to float32 rounding, not bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from ssmts import SSMClassifier, SSMFeatureClassifier, SSMFeatureRegressor, SSMRegressor, SSMTransformer

TINY = dict(d_model=16, d_state=16, max_epochs=2, min_steps=0, random_state=0)


def _data():
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(1, int(n))) for n in rng.integers(20, 60, 40)]
    return X, rng.integers(0, 2, 40), rng.normal(size=40), rng.normal(size=(1, 30)), rng.normal(size=(1, 1000))


@pytest.mark.parametrize(
    "make, target, method",
    [
        (lambda: SSMClassifier(**TINY), "classes", "predict_proba"),
        (lambda: SSMClassifier(**TINY, bidirectional="essm"), "classes", "predict_proba"),
        (lambda: SSMRegressor(**TINY), "values", "predict"),
        (lambda: SSMTransformer(d_model=16, d_state=16, random_state=0), None, "transform"),
        (lambda: SSMFeatureClassifier(random_state=0), "classes", "decision_function"),
        (lambda: SSMFeatureRegressor(random_state=0), "values", "predict"),
    ],
    ids=["classifier", "classifier-bidirectional", "regressor", "transformer", "features", "features-regressor"],
)
def test_a_series_batched_with_a_longer_one_changes_by_float32_rounding_only(make, target, method):
    X, classes, values, short, long = _data()
    estimator = make()
    estimator.fit(X) if target is None else estimator.fit(X, classes if target == "classes" else values)
    predict = getattr(estimator, method)
    alone = np.asarray(predict([short]))[0]
    together = np.asarray(predict([short, long]))[0]  # its batch is cut at 1000 steps, not 30
    scale = max(1.0, float(np.abs(alone).max()))
    assert np.abs(together - alone).max() <= 1e-6 * scale
    # what the tolerance tells apart: the same padding read as data (an array, so nothing is masked)
    as_data = np.asarray(predict(np.concatenate([short, np.zeros((1, 970))], axis=-1)[None]))[0]
    assert np.abs(as_data - alone).max() > 1e-3 * scale
