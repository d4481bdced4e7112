"""What an installed ssmts must do outside the repository: run by scripts/check_install.py with the
interpreter of a fresh virtual environment, from an empty working directory.

    python install_smoke.py REPOSITORY      # fails if ssmts is imported from REPOSITORY

Checks: the package comes from the environment, the data and weights it ships are found, every face
fits a tiny model, predicts, and saves and loads to the same predictions.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

import ssmts
from ssmts import SSMClassifier, SSMFeatureClassifier, SSMFeatureRegressor, SSMRegressor, SSMTransformer
from ssmts.data.speech import default_spoken_commands_dir, load_speech_commands
from ssmts.sktime import SSMFeaturePanelClassifier, SSMForecaster, SSMPanelClassifier, SSMPanelRegressor

TINY = dict(d_model=8, d_state=4, n_layers=1, max_epochs=2, min_steps=0, batch_size=8, device="cpu", random_state=0)


def check(condition: bool, what: str) -> None:
    if not condition:
        raise SystemExit(f"install smoke: {what}")
    print(f"ok  {what}")


def same_after_save_and_load(estimator, predict, folder: Path, name: str) -> None:
    path = estimator.save(folder / f"{name}.safetensors")
    loaded = type(estimator).load(path)
    np.testing.assert_allclose(np.asarray(predict(loaded)), np.asarray(predict(estimator)), rtol=1e-6, atol=1e-6)
    print(f"ok  {name}: fit, predict, save and load give the same predictions")


def main(repository: Path) -> None:
    package = Path(ssmts.__file__).resolve().parent
    check(not package.is_relative_to(repository.resolve()), f"ssmts is imported from the environment ({package})")

    clips = load_speech_commands(default_spoken_commands_dir(), sample_rate=2000)
    sizes = (len(clips.train.y), len(clips.val.y), len(clips.test.y))
    check(sizes == (160, 40, 400) and clips.train.X.shape[1:] == (1, 2000), f"the demo's clips are installed {sizes}")

    rng = np.random.default_rng(0)
    X = rng.standard_normal((32, 1, 40)).astype(np.float32)
    labels = (X[:, 0, :20].mean(1) > 0).astype(int)
    target = X[:, 0, :20].mean(1)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, estimator, y, predict in [
            ("SSMClassifier", SSMClassifier(**TINY), labels, lambda e: e.predict_proba(X)),
            ("SSMRegressor", SSMRegressor(**TINY), target, lambda e: e.predict(X)),
            ("SSMTransformer", SSMTransformer(**TINY), labels, lambda e: e.transform(X)),
            ("SSMFeatureClassifier", SSMFeatureClassifier(random_state=0), labels, lambda e: e.predict(X)),
            ("SSMFeatureRegressor", SSMFeatureRegressor(random_state=0), target, lambda e: e.predict(X)),
        ]:
            estimator.fit(X, y)
            same_after_save_and_load(estimator, predict, folder, name)

        y_series = pd.Series(np.sin(np.arange(60) / 4.0) + 0.05 * rng.standard_normal(60), name="y")
        forecaster = SSMForecaster(context_length=12, **TINY).fit(y_series, fh=[1, 2, 3])
        same_after_save_and_load(forecaster, lambda e: e.predict(), folder, "SSMForecaster")
        pretrained = SSMForecaster(pretrained=True).fit(y_series, fh=[1, 2, 3])
        check(np.isfinite(pretrained.predict().to_numpy()).all(), "the shipped pretrained forecaster forecasts")

        panel = pd.concat(
            {i: pd.DataFrame({"c0": X[i, 0]}, index=pd.RangeIndex(40)) for i in range(len(X))}, names=["instance", "t"]
        )
        for name, estimator, y in [
            ("SSMPanelClassifier", SSMPanelClassifier(**TINY), labels),
            ("SSMPanelRegressor", SSMPanelRegressor(**TINY), target),
            ("SSMFeaturePanelClassifier", SSMFeaturePanelClassifier(n_scales=2, n_kernels=4, random_state=0), labels),
        ]:
            estimator.fit(panel, y)
            same_after_save_and_load(estimator, lambda e: e.predict(panel), folder, name)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]))
