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
# # Probabilistic forecasting with `SSMForecaster` and sktime
#
# `ssmts.sktime.SSMForecaster` is an sktime forecaster: `fit(y, fh=...)`, `predict()`,
# `predict_interval()`, `predict_quantiles()`, `update()`, and it composes with sktime's
# pipelines and evaluation tools. Its network predicts a grid of quantiles, so every
# forecast comes with prediction intervals.
#
# A deep model is only worth its cost if it beats simple statistics, so this notebook
# compares it with three classical forecasters on the airline passenger series (monthly,
# 1949 to 1960, trend plus a yearly season whose size grows with the level):
#
# - `NaiveForecaster(strategy="last", sp=12)`: repeat last year (seasonal naive);
# - `ThetaForecaster(sp=12)`: the Theta method with seasonal adjustment;
# - `AutoETS`: exponential smoothing with automatic model selection.
#
# The last 24 months are held out. Forecasts are compared on accuracy (MAPE, and MASE,
# which divides by the error of the seasonal naive forecast in training) and on the
# quality of their 90 % prediction intervals (how many test months they cover, and how
# wide they are).

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
from contextlib import contextmanager


@contextmanager
def quiet():
    """Keep warnings out of the output: sktime's notices about future default changes
    and statsmodels' optimizer messages. They are recorded instead of filtered, because
    sktime re-enables FutureWarning filters while it runs."""
    with warnings.catch_warnings(record=True):
        yield


# %%
from sktime.datasets import load_airline
from sktime.split import temporal_train_test_split
from sktime.utils.plotting import plot_series

y = load_airline()
y_train, y_test = temporal_train_test_split(y, test_size=24)
fh = np.arange(1, len(y_test) + 1)      # 1 to 24 months ahead
fig, ax = plot_series(y_train, y_test, labels=["training", "held out"])
ax.set_title("Airline passengers (thousands per month)")
plt.show()

# %% [markdown]
# ## The SSM forecaster
#
# The forecaster cuts the training series into windows of `context_length` months followed
# by the horizon, and learns to map each context to the quantiles of the next 24 months.
# Each window is normalized by its own context (`normalize=True`), so the growing
# level of the series does not have to be learned. A context of 36 months holds three
# seasons.

# %%
from ssmts.sktime import SSMForecaster

with quiet():
    ssm = SSMForecaster(context_length=36, max_epochs=3 if QUICK else 150, random_state=0)
    started = time.perf_counter()
    ssm.fit(y_train, fh=fh)
    ssm_fit_seconds = time.perf_counter() - started
    quantiles = ssm.predict_quantiles(alpha=[0.05, 0.25, 0.5, 0.75, 0.95])
print(f"trained {ssm.n_iter_} epochs in {ssm_fit_seconds:.0f} s")

fig, ax = plot_series(y_train[-48:], y_test, labels=["training", "held out"])
levels = quantiles.columns.get_level_values(-1)
column = lambda q: quantiles.iloc[:, list(levels).index(q)]
ax.fill_between(y_test.index.to_timestamp(), column(0.05), column(0.95), color="C2", alpha=0.2, label="90 % interval")
ax.fill_between(y_test.index.to_timestamp(), column(0.25), column(0.75), color="C2", alpha=0.35, label="50 % interval")
ax.plot(y_test.index.to_timestamp(), column(0.5), color="C2", label="median")
ax.legend()
ax.set_title("SSMForecaster: quantile forecast")
plt.show()

# %% [markdown]
# ## The statistical baselines
#
# The seasonal pattern of the airline series grows with its level (multiplicative
# seasonality). `AutoETS` is therefore fitted on the logarithm of the series, where the
# season becomes additive, inside sktime's `TransformedTargetForecaster`, which maps the
# forecasts and intervals back. Restricting it to additive components on the log scale
# also gives closed-form prediction intervals.

# %%
from sktime.forecasting.compose import TransformedTargetForecaster
from sktime.forecasting.ets import AutoETS
from sktime.forecasting.naive import NaiveForecaster
from sktime.forecasting.theta import ThetaForecaster
from sktime.transformations.series.boxcox import LogTransformer

fit_seconds = {"SSM": ssm_fit_seconds}
with quiet():
    forecasters = {
        "SSM": ssm,
        "seasonal naive": NaiveForecaster(strategy="last", sp=12),
        "Theta": ThetaForecaster(sp=12),
        "AutoETS (log)": TransformedTargetForecaster([
            ("log", LogTransformer()),
            ("ets", AutoETS(auto=True, additive_only=True, sp=12, n_jobs=1)),
        ]),
    }
    for name, forecaster in forecasters.items():
        if name != "SSM":
            started = time.perf_counter()
            forecaster.fit(y_train, fh=fh)
            fit_seconds[name] = time.perf_counter() - started

# %%
from sktime.performance_metrics.forecasting import MeanAbsoluteScaledError, mean_absolute_percentage_error

mase = MeanAbsoluteScaledError(sp=12)
rows, intervals, points = [], {}, {}
for name, forecaster in forecasters.items():
    with quiet():
        points[name] = forecaster.predict()
        intervals[name] = forecaster.predict_interval(coverage=0.9)
    lower, upper = intervals[name].iloc[:, 0], intervals[name].iloc[:, 1]
    rows.append({
        "model": name,
        "MAPE (%)": 100 * mean_absolute_percentage_error(y_test, points[name]),
        "MASE": mase(y_test, points[name], y_train=y_train),
        "90 % interval coverage (%)": 100 * np.mean((y_test >= lower) & (y_test <= upper)),
        "mean interval width": float(np.mean(upper - lower)),
        "fit seconds": fit_seconds[name],
    })
scores = pd.DataFrame(rows).set_index("model").sort_values("MASE")
scores.round(2)

# %% [markdown]
# A 90 % interval should cover about 90 % of the 24 test months (21 or 22 of them); lower
# coverage means overconfident intervals, and among intervals with the right coverage the
# narrower one is more useful. MASE below 1 beats the seasonal naive forecast's
# in-sample error.
#
# One split of one series is a small test: 24 forecasts from a single cutoff. For a
# backtest over several cutoffs and series, run `python -m ssmts.bench forecast` (see the
# Benchmarks page of the documentation).

# %%
fig, axes = plt.subplots(2, 2, figsize=(12, 7), layout="constrained", sharey=True)
for ax, name in zip(axes.ravel(), forecasters):
    plot_series(y_train[-36:], y_test, points[name], labels=["training", "held out", "forecast"],
                pred_interval=intervals[name], ax=ax)
    ax.set_title(f"{name}: MAPE {scores.loc[name, 'MAPE (%)']:.1f} %, "
                 f"coverage {scores.loc[name, '90 % interval coverage (%)']:.0f} %")
    ax.legend(fontsize=8, loc="upper left")
plt.show()

# %% [markdown]
# ## When new data arrive
#
# `update` appends new observations and moves the forecasting origin. With
# `update_params=False` (the cheap choice for streaming) the weights stay as they are and
# the next forecast simply reads the latest context; the default, `update_params=True`,
# also fine-tunes on the new windows. Here the first 12 held-out months arrive, and the
# remaining 12 are forecast from the new origin.

# %%
import copy

streaming = copy.deepcopy(ssm)
with quiet():
    streaming.update(y_test[:12], update_params=False)
    remaining = streaming.predict()[:12]      # the fitted horizon (1 to 24 months) from the new origin
print(f"MAPE of the last 12 months, forecast from the new origin: "
      f"{100 * mean_absolute_percentage_error(y_test[12:], remaining):.1f} %")
fig, ax = plot_series(y_train[-24:], y_test, remaining, labels=["training", "held out", "forecast after update"])
plt.show()

# %% [markdown]
# ## Next steps
#
# - Many related series (patients, wards, sensors): pass them together as a panel
#   (a `pd.DataFrame` with a `MultiIndex` of series and time). The forecaster is global: one
#   network learns from all of them.
# - Exogenous variables: `fit(y, X=X, fh=...)` and `predict(X=X_future)`.
# - `strategy="recursive"` rolls a one-step model forward with the layers' streaming mode
#   instead of predicting all steps at once.
