"""sktime's own conformance suite (check_estimator) on every ssmts sktime estimator.

Each estimator runs all tests of its scitype on every instance of its get_test_params (tiny
networks, a couple of epochs), one pytest test per instance so that parallel workers (pytest -n)
share them out: 453 checks on each of the forecaster's five instances (about 35 s each on one idle
CPU thread of the 2-core machine, 145 s for the one combined with classical forecasts), 138 on each
of the classifier's three (about 30 s in all) and 81 on each of the regressor's three (17 s in
all), and the same on the two instances of each feature face (about 4 s and 2 s each; 163 checks on each
of the feature transformer's two, 3 s each). The
class-level checks run with each instance. No test is skipped by tag.
"""

import warnings

import pytest
from sktime.utils.estimator_checks import check_estimator

from ssmts.sktime import (
    SSMFeaturePanelClassifier,
    SSMFeaturePanelRegressor,
    SSMFeaturePanelTransformer,
    SSMForecaster,
    SSMPanelClassifier,
    SSMPanelRegressor,
)

ESTIMATORS = (
    SSMForecaster,
    SSMPanelClassifier,
    SSMPanelRegressor,
    SSMFeaturePanelClassifier,
    SSMFeaturePanelRegressor,
    SSMFeaturePanelTransformer,
)
INSTANCES = [(estimator, i) for estimator in ESTIMATORS for i in range(len(estimator.get_test_params()))]


def test_every_estimator_has_test_instances_to_check():
    assert {estimator for estimator, _ in INSTANCES} == set(ESTIMATORS)
    assert sum(estimator is SSMForecaster for estimator, _ in INSTANCES) >= 4


@pytest.mark.slow
@pytest.mark.usefixtures("fixed_thread_count")
@pytest.mark.parametrize("estimator, i", INSTANCES, ids=[f"{e.__name__}-{i}" for e, i in INSTANCES])
def test_check_estimator_has_no_failures(estimator, i):
    assert not estimator.get_class_tag("tests:skip_by_name", None), "no sktime test may be skipped"
    instances, _ = estimator.create_test_instances_and_names()
    assert len(instances) == len(estimator.get_test_params())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(instances[i], raise_exceptions=False, verbose=False)
    failures = {name: result for name, result in results.items() if result != "PASSED"}
    assert len(results) >= 80, f"suspiciously few sktime tests ran: {len(results)}"
    details = "\n".join(f"{name}: {str(result)[:300]}" for name, result in failures.items())
    assert not failures, f"{len(failures)} of {len(results)} sktime checks failed:\n{details}"


# ---------------------------------------------------------------- the panel adapters delegate
TINY = dict(d_model=8, d_state=4, n_layers=1, max_epochs=3, min_steps=0, batch_size=8, device="cpu", random_state=0)


def _unequal_panel(n=12, seed=0):
    """pd-multiindex panel of 2-channel series of lengths 20..31, label = sign of channel 0's mean."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    frames, labels = [], []
    for i in range(n):
        length = 20 + i
        values = rng.normal(size=(length, 2)) + (1.0 if i % 2 else -1.0) * np.array([1.0, 0.0])
        index = pd.MultiIndex.from_product([[i], range(length)], names=["instance", "time"])
        frames.append(pd.DataFrame(values, index=index, columns=["a", "b"]))
        labels.append("up" if i % 2 else "down")
    return pd.concat(frames), np.array(labels)


def test_adapters_take_the_sklearn_parameters():
    from ssmts import SSMClassifier, SSMFeatureClassifier, SSMFeatureRegressor, SSMFeatureTransformer, SSMRegressor

    for adapter, sklearn_estimator in (
        (SSMPanelClassifier, SSMClassifier),
        (SSMPanelRegressor, SSMRegressor),
        (SSMFeaturePanelClassifier, SSMFeatureClassifier),
        (SSMFeaturePanelRegressor, SSMFeatureRegressor),
        (SSMFeaturePanelTransformer, SSMFeatureTransformer),
    ):
        rate_only = ("warm_start", "sample_rate", "half_rate_share")
        expected = {k: v for k, v in sklearn_estimator().get_params().items() if k not in rate_only}
        assert adapter().get_params() == expected


def test_classifier_on_unequal_lengths_matches_the_sklearn_estimator_on_ragged_lists():
    import numpy as np

    from ssmts import SSMClassifier

    X, y = _unequal_panel()
    clf = SSMPanelClassifier(**TINY).fit(X, y)
    proba = clf.predict_proba(X)
    assert proba.shape == (12, 2) and np.allclose(proba.sum(1), 1.0)
    assert set(clf.predict(X)) <= {"up", "down"}
    ragged = [X.loc[i].to_numpy().T for i in range(12)]  # (2, L_i) arrays
    direct = SSMClassifier(**TINY).fit(ragged, y).predict_proba(ragged)
    np.testing.assert_allclose(proba, direct, rtol=1e-6)


def test_regressor_multioutput_is_one_joint_model():
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    X = rng.normal(size=(16, 2, 24))
    y = pd.DataFrame({"mean0": X[:, 0].mean(1), "mean1": X[:, 1].mean(1)})
    reg = SSMPanelRegressor(**TINY).fit(X, y)
    pred = reg.predict(X)
    assert isinstance(pred, pd.DataFrame) and list(pred.columns) == ["mean0", "mean1"] and pred.shape == (16, 2)
    assert reg.estimator_.n_targets_ == 2 and not hasattr(reg, "regressors_")


def test_feature_faces_on_unequal_lengths_match_the_sklearn_estimators_on_ragged_lists():
    """The same features and ridge as SSMFeatureClassifier / SSMFeatureRegressor on each series at its own
    length; several targets are one regressor with a penalty each."""
    import numpy as np
    import pandas as pd

    from ssmts import SSMFeatureClassifier, SSMFeatureRegressor, SSMFeatureTransformer

    X, y = _unequal_panel()
    ragged = [X.loc[i].to_numpy().T for i in range(12)]
    params = dict(n_scales=3, n_kernels=6, d_state=4, random_state=0)
    clf = SSMFeaturePanelClassifier(**params).fit(X, y)
    direct = SSMFeatureClassifier(**params).fit(ragged, y)
    np.testing.assert_array_equal(clf.predict(X), direct.predict(ragged))
    np.testing.assert_allclose(clf.estimator_.decision_function(ragged), direct.decision_function(ragged), rtol=1e-9)
    proba = clf.predict_proba(X)  # sktime's one-hot of predict: a ridge gives no probabilities
    assert set(np.unique(proba)) <= {0.0, 1.0} and np.allclose(proba.sum(1), 1.0)

    targets = pd.DataFrame({"level": [r[0].mean() for r in ragged], "spread": [r[1].std() for r in ragged]})
    reg = SSMFeaturePanelRegressor(**params).fit(X, targets)
    pred = reg.predict(X)
    assert isinstance(pred, pd.DataFrame) and list(pred.columns) == ["level", "spread"]
    reference = SSMFeatureRegressor(**params).fit(ragged, targets.to_numpy())
    np.testing.assert_allclose(pred.to_numpy(), reference.predict(ragged), rtol=1e-9)
    assert reg.estimator_.alpha_.shape == (2,)

    features = SSMFeaturePanelTransformer(**params).fit(X).transform(X)  # the classifier's features, a row a series
    assert isinstance(features, pd.DataFrame) and features.shape == (12, clf.estimator_.n_features_out_)
    np.testing.assert_array_equal(features.to_numpy(), SSMFeatureTransformer(**params).fit(ragged).transform(ragged))
