"""LSSL-fixed (fixed_transition=True): Lambda and Delta keep their initial values through a fit,
everything else learns; declared once in BackboneParams, so every estimator takes it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ssmts import SSMClassifier
from ssmts.nn import SequenceHead
from ssmts.training import BackboneParams, InvalidParameterError, SequenceData, TrainerConfig, fit_model
from ssmts.training.objectives import mse_loss


def _data(n=32, L=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 1, L, generator=g)
    return SequenceData(x, x.mean(-1) * 2.0 + 1.0)


@pytest.mark.parametrize("fixed", [True, False])
def test_fit_leaves_lambda_and_delta_alone_only_when_fixed(fixed):
    params = BackboneParams(d_model=4, d_state=8, n_layers=2, fixed_transition=fixed)
    params.validate_params()
    model = SequenceHead(params.build_backbone(1), 1)
    layers = model.backbone.ssm_layers
    before = [{name: p.detach().clone() for name, p in layer.named_parameters()} for layer in layers]
    # lr_ssm high so that a trainable Lambda / Delta would visibly move
    config = TrainerConfig(max_epochs=3, batch_size=8, lr=1e-2, lr_ssm=1e-1, device="cpu")
    fit_model(model, _data(), mse_loss, config, seed=0)
    for layer, start in zip(layers, before):
        for name in ("Lambda_re_raw", "Lambda_im", "log_dt"):
            unchanged = torch.equal(getattr(layer, name).detach(), start[name])
            assert unchanged == fixed, name
        # B, C and D learn in both variants
        for name in ("B", "C", "D"):
            assert not torch.equal(getattr(layer, name).detach(), start[name]), name


def test_estimators_take_fixed_transition_and_validate_it():
    X = np.random.default_rng(0).standard_normal((20, 1, 16)).astype(np.float32)
    y = np.arange(20) % 2
    clf = SSMClassifier(
        d_model=4,
        d_state=4,
        n_layers=1,
        max_epochs=2,
        min_steps=0,
        batch_size=8,
        device="cpu",
        random_state=0,
        fixed_transition=True,
        lr_ssm=0.1,
    )
    reference = SSMClassifier(**{**clf.get_params(), "max_epochs": 1})
    clf.fit(X, y)
    assert clf.get_params()["fixed_transition"] is True
    layer = clf.model_.backbone.ssm_layers[0]
    assert not layer.Lambda_im.requires_grad and not layer.log_dt.requires_grad
    # same seed, same init: the fitted Lambda equals the one a 1-epoch fit starts from
    reference.fit(X, y)
    torch.testing.assert_close(layer.Lambda_im, reference.model_.backbone.ssm_layers[0].Lambda_im)
    with pytest.raises(InvalidParameterError, match="fixed_transition"):
        SSMClassifier(fixed_transition="yes").fit(X, y)
