"""MLflowLogger and TensorBoardLogger: every fit is a run with the face's parameters and one
metric point per epoch, read back from a local store; a grid search gives one run per fit."""

import os
import subprocess
import sys

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV

from ssmts import SSMClassifier
from ssmts.training import Callback, MLflowLogger, TensorBoardLogger

TINY = dict(d_model=8, d_state=4, n_layers=1, max_epochs=3, min_steps=0, batch_size=8, device="cpu", random_state=0)
RNG = np.random.default_rng(0)
X = RNG.standard_normal((24, 12))
Y = (X[:, :6].mean(1) > 0).astype(int)


@pytest.fixture
def mlflow_store(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # a local file store, as in a notebook
    mlflow.set_tracking_uri((tmp_path / "mlruns").as_uri())
    yield mlflow
    while mlflow.active_run() is not None:
        mlflow.end_run()


def test_mlflow_run_holds_the_parameters_and_one_point_per_epoch(mlflow_store):
    mlflow = mlflow_store
    clf = SSMClassifier(**TINY, callbacks=[MLflowLogger(run_name="tiny")]).fit(X, Y)
    (run,) = mlflow.search_runs(output_format="list", search_all_experiments=True)
    assert run.info.run_name == "tiny" and run.info.status == "FINISHED"
    assert run.data.params["d_model"] == "8" and run.data.params["estimator"] == "SSMClassifier"
    history = mlflow.tracking.MlflowClient().get_metric_history(run.info.run_id, "train_loss")
    assert [point.step for point in history] == [1, 2, 3]
    np.testing.assert_allclose([point.value for point in history], [r["train_loss"] for r in clf.history_])
    assert mlflow.active_run() is None


class _StopAt(Callback):
    def __init__(self, error):
        self.error = error

    def on_epoch_end(self, trainer, record):
        if record["epoch"] == 2:
            raise self.error


@pytest.mark.parametrize("error, status", [(RuntimeError("diverged"), "FAILED"), (KeyboardInterrupt(), "KILLED")])
def test_a_fit_that_raises_is_logged_as_failed_or_killed_not_finished(mlflow_store, error, status):
    mlflow = mlflow_store
    with pytest.raises(type(error)):
        SSMClassifier(**TINY, callbacks=[MLflowLogger(), _StopAt(error)]).fit(X, Y)
    (run,) = mlflow.search_runs(output_format="list", search_all_experiments=True)
    assert run.info.status == status and mlflow.active_run() is None
    history = mlflow.tracking.MlflowClient().get_metric_history(run.info.run_id, "train_loss")
    assert [point.step for point in history] == [1, 2]  # what ran before the failure stays logged


def test_mlflow_logger_works_with_mlflows_own_default_store(tmp_path):
    """No tracking URI set, a fresh working directory: what a user gets after `pip install ssmts[logging]`."""
    pytest.importorskip("mlflow")
    code = (
        "import numpy as np, mlflow\n"
        "from ssmts import SSMClassifier\n"
        "from ssmts.training import MLflowLogger\n"
        "X = np.random.default_rng(0).standard_normal((24, 12)); y = (X[:, :6].mean(1) > 0).astype(int)\n"
        f"SSMClassifier(**{TINY!r}, callbacks=[MLflowLogger()]).fit(X, y)\n"
        "(run,) = mlflow.search_runs(output_format='list', search_all_experiments=True)\n"
        "points = mlflow.tracking.MlflowClient().get_metric_history(run.info.run_id, 'train_loss')\n"
        "print(run.info.status, len(points))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2:] == ["FINISHED", "3"]


def test_a_grid_search_logs_each_fit_as_a_nested_run(mlflow_store):
    mlflow = mlflow_store
    grid = GridSearchCV(SSMClassifier(**TINY, callbacks=[MLflowLogger()]), {"d_model": [4, 8]}, cv=2)
    with mlflow.start_run(run_name="search") as parent:
        grid.fit(X, Y)
    runs = mlflow.search_runs(output_format="list", search_all_experiments=True)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == 2 * 2 + 1  # 2 candidates x 2 folds, and the refit
    refit = str(grid.best_params_["d_model"])
    assert sorted(r.data.params["d_model"] for r in children) == sorted(["4", "4", "8", "8", refit])


def test_tensorboard_run_holds_one_scalar_per_epoch(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logger = TensorBoardLogger(tmp_path / "tb")
    clf = SSMClassifier(**TINY, callbacks=[logger]).fit(X, Y)
    SSMClassifier(**TINY, callbacks=[logger]).fit(X, Y)  # a second fit: a run directory of its own
    runs = sorted(p for p in (tmp_path / "tb").iterdir())
    assert len(runs) == 2 and runs[0].name.startswith("SSMClassifier-")
    events = EventAccumulator(str(runs[0])).Reload()
    scalars = events.Scalars("train_loss")
    assert [s.step for s in scalars] == [1, 2, 3]
    np.testing.assert_allclose([s.value for s in scalars], [r["train_loss"] for r in clf.history_], rtol=1e-6)
    assert "parameters/text_summary" in events.Tags()["tensors"]


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda tmp: MLflowLogger(run_name=3), TypeError, r"MLflowLogger: run_name must be a string or None, got int"),
        (
            lambda tmp: TensorBoardLogger(log_dir=None),
            TypeError,
            r"TensorBoardLogger: log_dir must be a non-empty path",
        ),
        (lambda tmp: TensorBoardLogger(log_dir=""), TypeError, r"log_dir must be a non-empty path, got ''"),
        (lambda tmp: TensorBoardLogger(log_dir=tmp / "file.txt"), ValueError, r"exists and is not a directory"),
    ],
)
def test_bad_logger_arguments_are_named_when_the_logger_is_made(tmp_path, make, error, match):
    (tmp_path / "file.txt").write_text("not a directory")
    with pytest.raises(error, match=match):
        make(tmp_path)
