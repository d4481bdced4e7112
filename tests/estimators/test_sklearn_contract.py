"""scikit-learn's own estimator checks, on CPU with random_state set: zero failures, no xfails."""
from sklearn.utils.estimator_checks import parametrize_with_checks

from ssmts import Resampler, SSMClassifier, SSMRegressor, SSMTransformer

# Tiny, fast settings that still learn the checks' toy problems (R^2 > 0.5, accuracy > 0.83).
TINY = dict(d_model=32, d_state=8, n_layers=1, max_epochs=60, min_steps=0, batch_size=16, lr=1e-2, lr_ssm=1e-2,
            device="cpu", random_state=0)


@parametrize_with_checks(
    [SSMClassifier(**TINY), SSMRegressor(**TINY), SSMTransformer(**TINY), Resampler(target_rate=8, sample_rate=16)]
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
