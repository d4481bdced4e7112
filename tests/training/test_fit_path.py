"""The one fit path: configuration from one declaration, callbacks, resumable state,
transactional fits and the scoped sample-rate factor."""

from __future__ import annotations

import copy
import importlib.util
import inspect
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from ssmts import SSMClassifier, SSMRegressor, SSMTransformer
from ssmts.nn import SSM, SequenceHead, SSMBackbone, delta_factor, scaled_delta
from ssmts.sktime import SSMForecaster, SSMPanelClassifier, SSMPanelRegressor
from ssmts.training import (
    BackboneParams,
    Callback,
    Configurable,
    EarlyStopping,
    InvalidParameterError,
    SequenceData,
    Trainer,
    TrainerConfig,
    fit_model,
    param,
    read_checkpoint,
)
from ssmts.training.config import Integer

TINY = dict(d_model=8, d_state=4, n_layers=1, max_epochs=3, min_steps=0, batch_size=8, device="cpu", random_state=0)


class _Mean(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 1)

    def forward(self, x, mask=None):
        return self.linear(x.mean(-1))


def _mse(out, y, weight=None):
    return ((out - y) ** 2).mean()


def _data(n=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, 5, generator=g)
    return SequenceData(x, x.mean(-1).sum(-1, keepdim=True))


def _toy(n=24, length=12, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, length))
    y = (X[:, : length // 2].mean(1) > 0).astype(int)
    return X, y


# ---------------------------------------------------------------- one declaration
@pytest.mark.parametrize(
    "cls", [SSMClassifier, SSMRegressor, SSMTransformer, SSMPanelClassifier, SSMPanelRegressor, SSMForecaster]
)
def test_signature_docstring_and_params_come_from_the_declarations(cls):
    signature = inspect.signature(cls)
    declared = cls.__params__
    assert list(signature.parameters) == list(declared)
    for name, p in signature.parameters.items():
        assert p.kind is inspect.Parameter.KEYWORD_ONLY and p.default == declared[name].default
        assert f"{name} : " in cls.__doc__, f"{name} missing from the docstring of {cls.__name__}"
    assert cls().get_params() == {name: p.default for name, p in declared.items()}


def test_faces_share_declarations_and_only_change_defaults():
    assert SSMClassifier.__params__["d_model"].doc == SSMForecaster.__params__["d_model"].doc
    # One declaration (BackboneParams: 64); the forecaster, the classifiers and the regressors change its default
    assert BackboneParams.__params__["d_model"].default == 64
    assert SSMForecaster.__params__["d_model"].default == SSMClassifier.__params__["d_model"].default == 32
    assert SSMPanelClassifier.__params__["d_model"].default == SSMRegressor.__params__["d_model"].default == 32
    assert BackboneParams.__params__["n_layers"].default == 4
    assert SSMClassifier.__params__["n_layers"].default == SSMPanelClassifier.__params__["n_layers"].default == 3
    assert SSMClassifier.__params__["norm"].default == SSMRegressor.__params__["norm"].default == "batch"
    # the regressors: the classifiers' network at lr=3e-3, in both faces
    assert SSMRegressor.__params__["lr"].default == SSMPanelRegressor.__params__["lr"].default == 3e-3
    assert SSMClassifier.__params__["lr"].default == 1e-2
    assert SSMPanelRegressor.__params__["n_layers"].default == SSMRegressor.__params__["n_layers"].default == 3
    assert SSMPanelClassifier.__params__["min_steps"].default == SSMClassifier.__params__["min_steps"].default == 500
    assert SSMForecaster.__params__["min_steps"].default == 0
    adapter = set(SSMPanelClassifier.__params__)
    assert adapter == set(SSMClassifier.__params__) - {"warm_start", "sample_rate", "half_rate_share"}
    assert not {"pooling", "warm_start", "sample_rate", "half_rate_share"} & set(SSMForecaster.__params__)
    # normalize: the faces' one name for input scaling, declared by the forecaster for its windows
    assert SSMForecaster.__params__["normalize"].default is True
    assert SSMForecaster.__params__["normalize"].group == "Forecaster"
    assert SSMClassifier.__params__["normalize"].default == "channel"


@pytest.mark.parametrize(
    "params, fragment",
    [
        (dict(d_state=8.7), "d_state must be an int"),
        (dict(n_layers=True), "n_layers must be an int"),
        (dict(prenorm="no"), "prenorm must be a bool"),
        (dict(sample_rate=True), "sample_rate must be > 0"),
        (dict(sample_rate=float("inf")), "sample_rate must be > 0"),
        (dict(n_iter_no_change=0), "n_iter_no_change must be an integer >= 1"),
        (dict(tol=-1.0), "tol must be >= 0"),
        (dict(lr=float("nan")), "lr must be > 0"),
        (dict(weight_decay=float("nan")), "weight_decay must be >= 0"),
        (dict(bidirectional=1), "unknown bidirectional 1"),
        (dict(class_weight={0: -1.0}), "class_weight must be"),
        (dict(callbacks=[print]), "callbacks must be"),
        (dict(dt_min=0.5, dt_max=0.1), "dt_min=0.5 must not exceed dt_max=0.1"),
    ],
)
def test_no_parameter_is_coerced(params, fragment):
    X, y = _toy()
    clf = SSMClassifier(**{**TINY, **params})
    with pytest.raises(InvalidParameterError, match=fragment) as info:
        clf.fit(X, y)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)
    assert not hasattr(clf, "model_")


def test_a_face_can_only_change_the_default_of_a_declared_parameter():
    with pytest.raises(TypeError, match="not one of its parameters"):

        class Broken(BackboneParams):  # noqa: F841
            _param_defaults = {"d_modle": 3}


def test_declaring_a_parameter_gives_init_validation_and_docs():
    class Tiny(Configurable):
        width: int = param(default=4, doc="How wide.", constraint=Integer(1))

    t = Tiny(width=7)
    assert t.width == 7 and Tiny().width == 4
    assert list(inspect.signature(Tiny).parameters) == ["width"]
    assert "width : int, default 4. How wide." in Tiny.params_doc()
    with pytest.raises(TypeError, match="unexpected parameter"):
        Tiny(height=2)
    with pytest.raises(InvalidParameterError, match="width must be an integer >= 1"):
        Tiny(width=0).validate_params()


@pytest.mark.slow  # a mypy run
@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_type_checkers_see_the_parameters(tmp_path):
    """typing.dataclass_transform: a type checker knows each parameter's name and type."""
    (tmp_path / "use.py").write_text(
        textwrap.dedent("""
        from ssmts import SSMClassifier
        from ssmts.training import TrainerConfig
        ok = SSMClassifier(d_model=32, lr=1e-3, sample_rate=16000.0)
        wrong_type = SSMClassifier(d_model="wide")
        wrong_name = TrainerConfig(learning_rate=0.1)
        reveal_type(SSMClassifier.__init__)
    """)
    )
    (tmp_path / "mypy.ini").write_text(
        textwrap.dedent("""
        [mypy]
        follow_imports = silent
        ignore_missing_imports = True
        [mypy-torch.*,pandas.*,numpy.*,scipy.*,torchaudio.*,soundfile.*,tqdm.*,matplotlib.*,joblib.*]
        follow_imports = skip
    """)
    )
    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", "cache", "use.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": root},
    )
    out = done.stdout
    assert 'Argument "d_model" to "SSMClassifier" has incompatible type "str"; expected "int"' in out, out
    assert 'Unexpected keyword argument "learning_rate" for "TrainerConfig"' in out, out
    assert "use.py:4" not in out, out  # the correct call type-checks
    assert "d_model: int =" in out and "sample_rate: float | None =" in out, out


# ---------------------------------------------------------------- callbacks
class _Recorder(Callback):
    def __init__(self, stop_at=None):
        self.stop_at = stop_at

    def on_fit_start(self, trainer):
        self.records, self.started, self.ended = [], True, False

    def on_epoch_end(self, trainer, record):
        self.records.append(dict(record))
        return self.stop_at is not None and record["epoch"] >= self.stop_at

    def on_fit_end(self, trainer):
        self.ended, self.error = True, trainer.error


def test_a_callback_sees_every_record_and_can_stop_the_run():
    recorder = _Recorder(stop_at=2)
    trainer = Trainer(_Mean(), _mse, max_epochs=6, lr_ssm=None, device="cpu", random_state=0, callbacks=[recorder])
    history = trainer.fit(_data(), _data(seed=1))
    assert [r["epoch"] for r in recorder.records] == [1, 2] and len(history) == 2
    assert recorder.records == history and recorder.ended and recorder.error is None
    assert {"train_loss", "val_loss", "lr", "seconds"} <= set(history[0])


@pytest.mark.parametrize("error", [RuntimeError("diverged"), KeyboardInterrupt()])
def test_a_run_that_raises_ends_its_callbacks_with_the_error_and_propagates_it(error):
    class Failing(_Recorder):
        def on_epoch_end(self, trainer, record):
            super().on_epoch_end(trainer, record)
            if record["epoch"] == 2:
                raise error

    recorder = Failing()
    trainer = Trainer(_Mean(), _mse, max_epochs=6, lr_ssm=None, device="cpu", random_state=0, callbacks=[recorder])
    with pytest.raises(type(error)):
        trainer.fit(_data())
    assert recorder.ended and recorder.error is error and len(recorder.records) == 2
    trainer.fit(_data(), epochs=1)  # the next run starts clean
    assert recorder.error is None


def test_callbacks_reach_the_estimators_and_a_pruning_exception_leaves_the_fit_undone():
    """The docs' Optuna pruning pattern, with a stand-in trial: report, then raise to prune."""

    class Pruned(Exception):
        pass

    class FakeTrial:
        def __init__(self):
            self.reports = []

        def report(self, value, step):
            self.reports.append((step, value))

        def should_prune(self):
            return len(self.reports) >= 2

    class Pruning(Callback):
        def __init__(self, trial):
            self.trial = trial

        def on_epoch_end(self, trainer, record):
            self.trial.report(record["val_score"], step=record["epoch"])
            if self.trial.should_prune():
                raise Pruned

    X, y = _toy(40)
    clf = SSMClassifier(**TINY).fit(X, y)
    before = (clf.model_, copy.deepcopy(clf.model_.state_dict()), list(clf.history_), clf.n_iter_)
    trial = FakeTrial()
    clf.set_params(callbacks=[Pruning(trial)], early_stopping=True, validation_fraction=0.25, max_epochs=5)
    with pytest.raises(Pruned):
        clf.fit(X, y)
    assert [step for step, _ in trial.reports] == [1, 2]
    assert all(0.0 <= value <= 1.0 for _, value in trial.reports)
    # Transactional: the previous fit is intact.
    assert clf.model_ is before[0] and clf.history_ == before[2] and clf.n_iter_ == before[3]
    for key, value in clf.model_.state_dict().items():
        torch.testing.assert_close(value, before[1][key], rtol=0, atol=0)


def test_an_interrupted_warm_start_leaves_the_model_as_it_was():
    class Interrupt(Callback):
        def on_epoch_end(self, trainer, record):
            raise KeyboardInterrupt

    X, y = _toy()
    clf = SSMClassifier(**TINY, warm_start=True).fit(X, y)
    weights = copy.deepcopy(clf.model_.state_dict())
    clf.set_params(callbacks=[Interrupt()])
    with pytest.raises(KeyboardInterrupt):
        clf.fit(X, y)
    assert clf.n_iter_ == TINY["max_epochs"]
    for key, value in clf.model_.state_dict().items():
        torch.testing.assert_close(value, weights[key], rtol=0, atol=0)


def test_early_stopping_restores_the_weights_of_the_best_epoch():
    """Oracle: a callback that snapshots the weights after every epoch."""

    class Snapshots(Callback):
        def on_fit_start(self, trainer):
            self.states = {}

        def on_epoch_end(self, trainer, record):
            self.states[record["epoch"]] = copy.deepcopy(trainer.model.state_dict())

    snapshots = Snapshots()
    stop = EarlyStopping(patience=None, tol=0.0)
    result = fit_model(
        _Mean,
        _data(),
        _mse,
        TrainerConfig(max_epochs=8, lr=0.3, lr_ssm=None, device="cpu"),
        seed=0,
        validation=_data(seed=1),
        early_stopping=stop,
        callbacks=[snapshots],
    )
    best = max(result.history, key=lambda r: -r["val_loss"])["epoch"]
    assert stop.best_epoch == best
    for key, value in result.model.state_dict().items():
        torch.testing.assert_close(value, snapshots.states[best][key], rtol=0, atol=0)


def test_early_stopping_from_the_start_keeps_the_start_when_no_epoch_beats_it():
    """The start scored on the validation data competes: a run whose every epoch is worse (a learning
    rate far too large) ends with the starting weights exactly; a run that improves keeps its best epoch."""
    torch.manual_seed(0)
    start = _Mean()
    weights = copy.deepcopy(start.state_dict())

    def run(**settings):
        stop = EarlyStopping(patience=None, tol=0.0, from_start=True)
        config = TrainerConfig(max_epochs=4, lr_ssm=None, device="cpu", **settings)
        result = fit_model(
            copy.deepcopy(start), _data(), _mse, config, seed=0, validation=_data(seed=1), early_stopping=stop
        )
        return stop, result

    stop, result = run(lr=50.0, grad_clip=None, optimizer="sgd")
    assert stop.best_epoch == 0 and all(r["val_loss"] > -stop.best for r in result.history)
    for key, value in result.model.state_dict().items():
        torch.testing.assert_close(value, weights[key], rtol=0, atol=0)
    stop, _ = run(lr=0.3)
    assert stop.best_epoch >= 1
    with pytest.raises(ValueError, match="validation data"):
        fit_model(_Mean, _data(), _mse, TrainerConfig(max_epochs=1, device="cpu"), seed=0, early_stopping=stop)


def test_a_diverged_run_raises_instead_of_returning_a_nan_model():
    def nan_loss(out, y, weight=None):
        return (out * float("nan")).mean()

    with pytest.raises(FloatingPointError, match="diverged"):
        fit_model(_Mean, _data(), nan_loss, TrainerConfig(max_epochs=2, device="cpu"), seed=0)


# ---------------------------------------------------------------- resuming
def test_state_dict_round_trip_continues_a_run_exactly():
    """Stop after 2 of 5 epochs, carry the state to a new Trainer, finish: equals 5 in one go."""
    kwargs = dict(
        lr=0.05,
        lr_ssm=None,
        batch_size=8,
        scheduler="cosine",
        warmup_steps=3,
        device="cpu",
        random_state=0,
        max_epochs=5,
    )
    torch.manual_seed(0)
    straight = Trainer(_Mean(), _mse, **kwargs)
    straight.fit(_data())

    torch.manual_seed(0)
    first = Trainer(_Mean(), _mse, callbacks=[_Recorder(stop_at=2)], **kwargs)
    first.fit(_data())
    state = first.state_dict()
    torch.manual_seed(123)  # the weights come from the state, not from this seed
    second = Trainer(_Mean(), _mse, **kwargs)
    second.load_state_dict(state)
    second.fit(_data())
    assert [r["epoch"] for r in second.history] == [1, 2, 3, 4, 5]
    for a, b in zip(straight.model.parameters(), second.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-7)


def test_checkpoints_load_without_executing_code(tmp_path):
    trainer = Trainer(_Mean(), _mse, max_epochs=1, device="cpu", random_state=0)
    trainer.fit(_data(), checkpoint=tmp_path / "run.pt")
    assert read_checkpoint(tmp_path / "run.pt")["run_epoch"] == 1
    (tmp_path / "broken.pt").write_bytes((tmp_path / "run.pt").read_bytes()[:100])
    with pytest.raises(ValueError, match="damaged, truncated"):
        read_checkpoint(tmp_path / "broken.pt")


def test_warm_start_carries_optimizer_history_and_shuffling_forward():
    X, y = _toy()
    clf = SSMClassifier(**TINY, warm_start=True).fit(X, y)
    first_state = clf.training_state_
    assert first_state["optimizer"]["state"], "Adam moments are kept"
    clf.fit(X, y)
    assert [r["epoch"] for r in clf.history_] == list(range(1, 2 * TINY["max_epochs"] + 1))
    assert not torch.equal(first_state["shuffle_generator"], clf.training_state_["shuffle_generator"])


# ---------------------------------------------------------------- the rate as a scoped argument
def test_scaled_delta_composes_with_the_base_scale_nests_and_is_undone_on_error():
    model = SSMBackbone(2, 8, 2, d_state=4)
    layers = model.ssm_layers
    model.dt_scale = 0.0625  # a model's own base factor (Path-X)
    base = [layer.Delta.detach().clone() for layer in layers]
    with scaled_delta(model, 2.0):
        for layer, delta in zip(layers, base):
            torch.testing.assert_close(layer.Delta, delta * 2.0)
        with scaled_delta(model, 3.0):
            torch.testing.assert_close(layers[0].Delta, base[0] * 6.0)
        torch.testing.assert_close(layers[0].Delta, base[0] * 2.0)
    with pytest.raises(RuntimeError):
        with scaled_delta(model, 4.0):
            raise RuntimeError
    for layer, delta in zip(layers, base):
        torch.testing.assert_close(layer.Delta, delta, rtol=0, atol=0)
        assert layer.dt_scale == 0.0625
    for bad in (0.0, -1.0, math.inf, math.nan, True):
        with pytest.raises(ValueError, match="must be > 0 and finite"):
            with scaled_delta(model, bad):
                pass


def test_scaled_delta_equals_a_layer_built_with_that_step():
    """Oracle: the same layer with dt_scale set to the factor (the layer's own discretization)."""
    torch.manual_seed(0)
    layer = SSM(3, 8).double()
    u = torch.randn(2, 3, 50, dtype=torch.float64)
    fixed = copy.deepcopy(layer)
    fixed.dt_scale = delta_factor(16000, 8000)
    with scaled_delta(layer, delta_factor(train_rate=16000, new_rate=8000)):
        torch.testing.assert_close(layer(u), fixed(u))
    with pytest.raises(ValueError, match="sample rates must be > 0"):
        delta_factor(16000, 0)


def test_sample_rate_set_after_a_fit_without_rate_is_refused():
    X, y = _toy()
    clf = SSMClassifier(**TINY).fit(X, y)
    clf.set_params(sample_rate=50.0)
    with pytest.raises(ValueError, match="fitted without sample_rate"):
        clf.predict(X)


@pytest.mark.parametrize(
    "Estimator, how",
    [
        (SSMClassifier, "warm_start"),
        (SSMClassifier, "partial_fit"),
        (SSMRegressor, "warm_start"),
        (SSMRegressor, "partial_fit"),
        (SSMTransformer, "warm_start"),
    ],  # fmt: skip
)
def test_a_continued_fit_at_a_new_rate_takes_2d_x_of_that_rate_and_refuses_the_old_length(Estimator, how):
    """After set_params(sample_rate=50) a warm-started fit (or partial_fit) trains on 50 Hz data: 2-D rows of
    half the timepoints are taken as 3-D ones are, and rows of the 100 Hz length are refused as predict
    refuses them (they were once taken, and trained with every Delta doubled). Oracle: the same continued
    fit on the 3-D form of the same data."""
    X, y = _toy(length=40)
    target = () if Estimator is SSMTransformer else (y if Estimator is SSMClassifier else y.astype(float),)
    first = Estimator(**TINY, sample_rate=100.0, warm_start=True).fit(X, *target).set_params(sample_rate=50.0)
    flat, deep = copy.deepcopy(first), copy.deepcopy(first)
    continue_fit = (
        (lambda e, Z: e.partial_fit(Z, *target)) if how == "partial_fit" else (lambda e, Z: e.fit(Z, *target))
    )
    continue_fit(flat, X[:, ::2])
    continue_fit(deep, X[:, None, ::2])
    for a, b in zip(flat.model_.state_dict().values(), deep.model_.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    with pytest.raises(ValueError, match="X has 40 timepoints, but at sample_rate=50"):
        continue_fit(flat, X)


def test_predicting_at_another_rate_leaves_no_trace_on_the_model():
    X, y = _toy()
    clf = SSMClassifier(**TINY, sample_rate=100.0).fit(X, y)
    before = clf.decision_function(X)
    clf.predict(X[:, ::2], sample_rate=50.0)
    assert all(layer._delta_factor == 1.0 and layer.dt_scale == 1.0 for layer in clf.model_.backbone.ssm_layers)
    np.testing.assert_array_equal(clf.decision_function(X), before)


def test_every_estimator_network_is_a_head_exposing_its_backbone():
    X, y = _toy()
    for model in (
        SSMClassifier(**TINY).fit(X, y).model_,
        SSMRegressor(**TINY).fit(X, y.astype(float)).model_,
        SSMTransformer(**TINY).fit(X).model_,
    ):
        assert isinstance(model.backbone, SSMBackbone)
    assert isinstance(SSMClassifier(**TINY).fit(X, y).model_, SequenceHead)
