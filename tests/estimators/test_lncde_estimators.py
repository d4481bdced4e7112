"""The estimators and the forecaster with layer="lncde": they fit, predict and learn through the
shared parameter declarations; the recursive forecaster rolls a LinearCDE with `step`."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from ssmts import SSMClassifier, SSMRegressor, SSMTransformer
from ssmts.nn import LinearCDE
from ssmts.training import InvalidParameterError

LNCDE = dict(layer="lncde", min_steps=0, d_model=16, d_state=8, n_layers=1, batch_size=16, device="cpu", random_state=0)


def test_lncde_classifier_fits_predicts_and_learns():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 20))
    y = (X[:, :10].mean(1) > 0).astype(int)
    clf = SSMClassifier(
        **LNCDE, lncde_structure="block_diagonal", lncde_block_size=4, max_epochs=40, lr=1e-2, lr_ssm=1e-2
    ).fit(X[:80], y[:80])
    assert all(isinstance(b.ssm, LinearCDE) for b in clf.model_.backbone.blocks)
    proba = clf.predict_proba(X[80:])
    assert proba.shape == (40, 2) and np.all(np.isfinite(proba))
    assert clf.score(X[80:], y[80:]) >= 0.75


@pytest.mark.parametrize("structure", ["diagonal", "dplr", "walsh_hadamard", "dense"])
def test_lncde_regressor_and_transformer_fit_every_structure(structure):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 2, 15))
    y = X[:, 0].sum(1)
    reg = SSMRegressor(**LNCDE, lncde_structure=structure, max_epochs=2).fit(X, y)
    assert reg.predict(X).shape == (40,) and np.all(np.isfinite(reg.predict(X)))
    Z = SSMTransformer(**LNCDE, lncde_structure=structure, max_epochs=1).fit(X).transform(X)
    assert Z.shape[0] == 40 and np.all(np.isfinite(Z))


def test_lncde_classifier_ragged_input_is_padded_at_the_end_and_matches_unpadded_prediction():
    """Padding at the end leaves a causal LinearCDE's real steps untouched: 'last' pooling of a
    padded batch equals the prediction of each series alone."""
    rng = np.random.default_rng(2)
    X = [rng.standard_normal(n) for n in (9, 14, 20, 11)]
    y = np.array([0, 1, 0, 1])
    clf = SSMClassifier(**LNCDE, pooling="last", max_epochs=1).fit(X, y)
    together = clf.predict_proba(X)
    alone = np.concatenate([clf.predict_proba([x]) for x in X])
    np.testing.assert_allclose(together, alone, rtol=1e-5, atol=1e-6)


def test_lncde_options_with_the_ssm_layer_raise_at_fit_naming_the_parameter():
    with pytest.raises(InvalidParameterError, match="lncde_structure='dense' only applies to layer='lncde'"):
        SSMClassifier(lncde_structure="dense", max_epochs=1, min_steps=0).fit(np.zeros((4, 5)), [0, 1, 0, 1])
    with pytest.raises(InvalidParameterError, match="heads=2 only applies to layer='ssm'"):
        SSMRegressor(layer="lncde", heads=2, max_epochs=1, min_steps=0).fit(np.zeros((4, 5)), np.zeros(4))


def test_recursive_forecaster_rolls_an_lncde_backbone_with_step():
    """Oracle as for the SSM forecaster: `step` from the context state equals one scan pass over the
    context followed by the fed-back medians."""
    import pandas as pd

    from ssmts.sktime import SSMForecaster

    rng = np.random.default_rng(0)
    t = np.arange(60)
    y = pd.Series(
        10 + np.sin(2 * np.pi * t / 12) + 0.1 * rng.normal(size=60),
        index=pd.period_range("2000-01", periods=60, freq="M"),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        f = SSMForecaster(
            layer="lncde",
            lncde_structure="block_diagonal",
            d_model=8,
            d_state=8,
            n_layers=2,
            max_epochs=3,
            batch_size=16,
            device="cpu",
            random_state=0,
            strategy="recursive",
            context_length=12,
        ).fit(y, fh=[1, 2, 3, 4, 5, 6])
        forecast = f.predict()
    assert np.all(np.isfinite(forecast.to_numpy()))
    net = f.model_.members[0].double()
    assert isinstance(net.backbone.blocks[0].ssm, LinearCDE)
    C = f.n_targets_
    context = torch.randn(3, C, f.context_length, dtype=torch.float64)
    median = int(np.flatnonzero(f.quantile_levels_ == 0.5)[0])
    picked, rolled = net.rollout(context, None, 6, lambda q: q.sort(-1).values[..., median])
    sequence = torch.cat([context, picked[:, :-1].transpose(1, 2)], dim=-1)
    with torch.no_grad():
        scan = net(sequence)
    torch.testing.assert_close(rolled, scan, rtol=1e-9, atol=1e-9)
