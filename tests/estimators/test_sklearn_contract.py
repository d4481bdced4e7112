"""scikit-learn's own estimator checks, on CPU with random_state set: zero failures, no xfails."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from ssmts import (
    Resampler,
    SSMClassifier,
    SSMFeatureClassifier,
    SSMFeatureRegressor,
    SSMFeatureTransformer,
    SSMRegressor,
    SSMTransformer,
)

# Tiny, fast settings that still learn the checks' toy problems (R^2 > 0.5, accuracy > 0.83): over
# random_state 0-5, accuracy 0.975-0.98 (two blobs) and 0.95-0.96 (three), R^2 0.64-0.84 (0.81 at 0, the
# checks' seed); 180 optimizer steps a fit on the checks' 200-300 rows (a third of the time of batches of
# 16 at lr 1e-2 for 60 epochs, which scored 0.975 / 0.94 / 0.62 at their worst).
TINY = dict(
    d_model=32,
    d_state=8,
    n_layers=1,
    max_epochs=60,
    min_steps=0,
    batch_size=64,
    lr=5e-2,
    lr_ssm=5e-2,
    device="cpu",
    random_state=0,
)

# The same network with LinearCDE layers (SLiCE). check_regressors_train's target is linear in one
# step of ten-step sequences (its one informative feature); with the default lncde_max_norm=1 a
# LinearCDE reaches R^2 0.34 there after TINY's 780 steps (0.49-0.67 with lncde_dt=1). Trained
# without the rescaling, its transitions are growing rotations (spectral radius about 2, some 50
# degrees a step), which the rescaling's norm bound forbids (it damps every rotation, see
# LinearCDE); harmless over ten steps. So: no rescaling, the transitions at a higher learning rate,
# and fewer, larger batches: R^2 0.64-0.81 over random_state 0-5 in 160 steps, and about a minute
# for the checks of the two instances.
LNCDE = dict(
    layer="lncde",
    lncde_max_norm=None,
    d_model=32,
    d_state=8,
    n_layers=1,
    max_epochs=40,
    min_steps=0,
    batch_size=64,
    lr=2e-2,
    lr_ssm=5e-2,
    device="cpu",
    random_state=0,
)

# The training-free estimators at a small size (the checks' data have 2 to 20 time points).
FEATURES = dict(n_scales=3, n_kernels=16, device="cpu", random_state=0)


# slow: scikit-learn's checks over nine estimators: about 3 minutes on 2 cores (6 before the settings above)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("fixed_thread_count")]


@parametrize_with_checks(
    [
        SSMClassifier(**TINY),
        SSMRegressor(**TINY),
        SSMTransformer(**TINY),
        Resampler(target_rate=8, sample_rate=16),
        SSMClassifier(**LNCDE),
        SSMRegressor(**LNCDE),
        SSMFeatureClassifier(**FEATURES),
        SSMFeatureRegressor(**FEATURES),
        SSMFeatureTransformer(**FEATURES),
    ]
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


@pytest.mark.parametrize(
    "estimator",
    [
        SSMClassifier(**TINY),
        SSMRegressor(**TINY),
        SSMTransformer(**TINY),
        SSMFeatureClassifier(**FEATURES),
        SSMFeatureTransformer(**FEATURES),
    ],
    ids=lambda estimator: type(estimator).__name__,
)
def test_dataframe_column_names_are_checked_as_scikit_learn_does(estimator):
    """Not among the checks parametrize_with_checks yields in this scikit-learn, so run here: a DataFrame's
    columns are the timepoints, and reordered or other columns were read by position, silently (a ramp
    classifier scored 0.0 on its training frame with the columns reversed)."""
    from sklearn.utils.estimator_checks import check_dataframe_column_names_consistency

    check_dataframe_column_names_consistency(type(estimator).__name__, estimator)


def test_column_names_are_kept_by_save_and_not_asked_at_another_rate(tmp_path):
    import numpy as np
    import pandas as pd

    X = pd.DataFrame(np.random.default_rng(0).normal(size=(30, 16)), columns=[f"t{i:02d}" for i in range(16)])
    y = np.arange(30) % 2
    clf = SSMFeatureClassifier(**FEATURES, sample_rate=16.0).fit(X, y)
    clf.save(tmp_path / "model.safetensors")
    loaded = SSMFeatureClassifier.load(tmp_path / "model.safetensors")
    np.testing.assert_array_equal(loaded.feature_names_in_, X.columns.to_numpy(dtype=object))
    with pytest.raises(ValueError, match="Feature names must be in the same order as they were in fit"):
        loaded.predict(X[X.columns[::-1]])
    half = X.iloc[:, ::2].set_axis([f"h{i}" for i in range(8)], axis=1)  # 8 Hz: other timepoints, other names
    np.testing.assert_array_equal(loaded.predict(half, sample_rate=8.0), clf.predict(half.to_numpy(), sample_rate=8.0))
