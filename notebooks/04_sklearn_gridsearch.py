# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Hyperparameter search for an SSM classifier with scikit-learn
#
# `SSMClassifier` is a scikit-learn estimator, so the tools you use for any other model
# apply: `Pipeline` to chain preprocessing, `GridSearchCV` to choose hyperparameters,
# `cross_val_score`, `clone`, joblib persistence. This notebook searches a small grid on
# handwritten digits read as sequences: each 8x8 image becomes a 64-step signal, one pixel
# per step, row by row (the offline stand-in for sequential MNIST).
#
# It shows
#
# 1. the data as sequences,
# 2. a `Pipeline` of a scikit-learn scaler and the SSM classifier,
# 3. `GridSearchCV` over SSM hyperparameters, validated on the data set's own validation
#    split (`PredefinedSplit`), with the results table,
# 4. the chosen model on the test split, its training history, and its confusion matrix.

# %%
import os
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

# SSMTS_NOTEBOOK_QUICK=1 shrinks data, model and epochs to a smoke run (used by the tests).
QUICK = os.environ.get("SSMTS_NOTEBOOK_QUICK") == "1"
plt.rcParams["figure.dpi"] = 90

# %%
from ssmts.data.pixels import load_digits_sequential

data = load_digits_sequential(random_state=0)
n_train = 200 if QUICK else len(data.train.y)
X_train, y_train = data.train.X[:n_train, 0], data.train.y[:n_train]   # (n, 64): one row per image
X_val, y_val = data.val.X[:, 0], data.val.y
X_test, y_test = data.test.X[:, 0], data.test.y
print(f"train {X_train.shape}, validation {X_val.shape}, test {X_test.shape}")

fig, axes = plt.subplots(2, 1, figsize=(10, 4), layout="constrained")
for ax, i in zip(axes, [0, 1]):
    ax.plot(X_train[i], drawstyle="steps-mid")
    for row in range(1, 8):
        ax.axvline(8 * row - 0.5, color="0.85", lw=0.8)
    ax.set_title(f"digit {y_train[i]} as a 64-step sequence (grey lines: image rows)", fontsize=10)
axes[-1].set_xlabel("step (pixel index)")
plt.show()

# %% [markdown]
# ## A pipeline
#
# A 2D array `(n_samples, 64)` is read by the SSM estimators as one univariate series per
# row, so any scikit-learn transformer for 2D data can come first. `StandardScaler`
# standardizes every pixel position with training statistics (the estimator's own
# `normalize="channel"` standardizes channels, i.e. all steps alike). The pipeline is then one
# estimator with parameters like `ssm__d_model`.

# %%
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from ssmts import SSMClassifier

pipeline = Pipeline([
    ("scale", StandardScaler()),
    ("ssm", SSMClassifier(d_model=16 if QUICK else 32, d_state=32, n_layers=2, lr=1e-2,
                          max_epochs=2 if QUICK else 20, min_steps=0, batch_size=32, random_state=0)),
])
pipeline

# %% [markdown]
# ## The search
#
# Each configuration trains a network, so the grid is small and validation uses the data
# set's validation split once (`PredefinedSplit`) instead of k folds. The grid asks two
# questions:
#
# - does a **bidirectional** layer (reading the image forwards and backwards, which is
#   allowed here because the whole image is available) beat a causal one?
# - does a **larger state** (`d_state`, more modes per layer) help?
#
# `refit=False` makes the search only score the configurations; the next section refits
# the winner itself, with validation curves recorded.

# %%
from sklearn.model_selection import GridSearchCV, PredefinedSplit

X_search = np.concatenate([X_train, X_val])
y_search = np.concatenate([y_train, y_val])
validation_fold = np.r_[np.full(len(y_train), -1), np.zeros(len(y_val), dtype=int)]  # -1: always train

grid = {"ssm__bidirectional": [False, True], "ssm__d_state": [8, 32]}
search = GridSearchCV(pipeline, grid, cv=PredefinedSplit(validation_fold), scoring="accuracy", refit=False)
started = time.perf_counter()
search.fit(X_search, y_search)
print(f"{len(search.cv_results_['params'])} configurations in {time.perf_counter() - started:.0f} s")

results = pd.DataFrame(search.cv_results_)
columns = {"param_ssm__bidirectional": "bidirectional", "param_ssm__d_state": "d_state",
           "mean_test_score": "validation accuracy", "mean_fit_time": "fit seconds"}
results[list(columns)].rename(columns=columns).sort_values("validation accuracy", ascending=False).round(3)

# %% [markdown]
# ## The chosen model
#
# Refit the best configuration on training plus validation data, with `early_stopping=True`
# so that 10 % of it is held out to record validation curves and keep the best epoch,
# and score it once on the test split.

# %%
from sklearn.base import clone

best = clone(pipeline).set_params(**search.best_params_, ssm__early_stopping=True)
best.fit(X_search, y_search)
print("best parameters:", search.best_params_)
print(f"test accuracy: {best.score(X_test, y_test):.3f}")

# %%
from sklearn.metrics import ConfusionMatrixDisplay

from ssmts.plot import plot_history

fig = plot_history(best)
plt.show()

fig, ax = plt.subplots(figsize=(5, 4.5), layout="constrained")
ConfusionMatrixDisplay.from_estimator(best, X_test, y_test, ax=ax, colorbar=False)
ax.set_title("test split")
plt.show()

# %% [markdown]
# ## Notes for larger searches
#
# - Every fit trains a network: a search costs the number of configurations times the
#   folds times one training. Search coarse first (width, depth, learning rate), then fine.
# - `n_jobs` in `GridSearchCV` runs fits in parallel; on a CPU set `OMP_NUM_THREADS` so
#   that the parallel fits do not fight over cores. On a GPU keep `n_jobs=1`.
# - `random_state` makes each fit reproducible, so differences between configurations
#   are not seed noise of the search itself; repeat the winner with a few seeds before
#   trusting a small difference.
# - The same works for `SSMRegressor`, `SSMTransformer` (inside a pipeline with a
#   downstream model), and the sktime estimators with sktime's tuning tools.
