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
# # Forecasting in depth: covariates, gaps, irregular time stamps, backtests, streaming, intervals
#
# The [forecasting notebook](03_forecasting_sktime.ipynb) fits `SSMForecaster` on one clean
# monthly series. Real forecasting data is rarely that tidy. This notebook goes through what
# `SSMForecaster` does beyond it, one capability per section, on small synthetic data whose
# truth is known:
#
# 1. covariates known ahead, known only up to the cutoff (past-only), and static per series;
# 2. missing values in `y` and `X`;
# 3. irregular time stamps, modelled with a per-step $\Delta_k$ instead of resampling;
# 4. backtests over many forecast origins without refitting;
# 5. streaming: one new observation at a time;
# 6. prediction intervals: the quantile head and sktime's conformal wrapper.

# %%
import os
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

# SSMTS_NOTEBOOK_QUICK=1 shrinks data, model and epochs to a smoke run (used by the tests).
QUICK = os.environ.get("SSMTS_NOTEBOOK_QUICK") == "1"
EPOCHS = 3 if QUICK else 60
SMALL = dict(d_model=16, d_state=16, n_layers=2, random_state=0)
plt.rcParams["figure.dpi"] = 90
warnings.filterwarnings("ignore", category=FutureWarning)  # sktime's notices about future defaults

from ssmts.sktime import SSMForecaster

# %% [markdown]
# ## 1. Covariates of every kind
#
# A panel of three shops, 120 months each. Sales follow a season, a planned promotion
# (known ahead: the shop decides it), a footfall sensor (measured: known only up to today,
# and it moves sales one month later) and the shop's size (one number per shop).
#
# `SSMForecaster` takes all three kinds of `X` column: by default a column is known ahead
# and `predict` needs its future values; `past_covariates=[...]` are read over the context
# only, so `predict` never needs (nor reads) their future; `static_covariates=[...]` are
# constant within each series and remembered from `fit`.

# %%
rng = np.random.default_rng(0)
months = pd.period_range("2015-01", periods=120, freq="M")
frames = []
for shop, size in [("north", 1.0), ("south", 2.0), ("east", 3.0)]:
    sensor = rng.normal(size=len(months))
    promo = (rng.random(len(months)) < 0.2).astype(float)
    season = np.sin(2 * np.pi * np.arange(len(months)) / 12)
    sales = 10 * size + 2 * size * season + 3 * promo + 1.5 * np.roll(sensor, 1) + 0.3 * rng.normal(size=len(months))
    index = pd.MultiIndex.from_product([[shop], months], names=["shop", "month"])
    frames.append(pd.DataFrame({"sales": sales, "promo": promo, "sensor": sensor, "size": size}, index=index))
panel = pd.concat(frames)
horizon = 6
train = panel.groupby(level="shop").head(len(months) - horizon)
test = panel.groupby(level="shop").tail(horizon)


def mae_by_shop(pred: pd.DataFrame) -> pd.Series:
    return (pred["sales"] - test["sales"]).abs().groupby(level="shop").mean()


fh = list(range(1, horizon + 1))
settings = {
    "no X": dict(columns=[], past=[], static=[]),
    "promo (known ahead)": dict(columns=["promo"], past=[], static=[]),
    "+ sensor (past-only) + size (static)": dict(columns=["promo", "sensor", "size"], past=["sensor"],
                                                  static=["size"]),
}
errors = {}
for name, s in settings.items():
    forecaster = SSMForecaster(context_length=24, max_epochs=EPOCHS, past_covariates=s["past"],
                               static_covariates=s["static"], **SMALL)
    X_train = train[s["columns"]] if s["columns"] else None
    forecaster.fit(train[["sales"]], X=X_train, fh=fh)
    # predict needs only the known-ahead column's future; the past-only and static ones are not asked for
    X_future = test[["promo"]] if s["columns"] else None
    errors[name] = mae_by_shop(forecaster.predict(X=X_future))
print(pd.DataFrame(errors).round(3).T)

# %% [markdown]
# The promotion is known ahead and the sensor's last value moves next month's sales: the rows
# show what each kind of covariate is worth here (the quick run's three epochs are only a
# smoke test). A past-only column is safe against leakage: its values after the cutoff are
# never read, which the test suite checks by poisoning them.

# %% [markdown]
# ## 2. Missing values
#
# Sensors drop out and shops close for a week. `y` and `X` may hold `NaN`: every window is
# normalized by its observed values, gaps are carried forward inside the network's input,
# and a missing target weighs nothing in the loss. Here about a tenth of the training sales
# are removed, in runs of 1 to 3 months.

# %%
gappy = train.copy()
for shop in gappy.index.get_level_values("shop").unique():
    rows = np.flatnonzero(gappy.index.get_level_values("shop") == shop)
    for start in rng.choice(rows[:-24], size=6, replace=False):
        gappy.iloc[start:start + rng.integers(1, 4), 0] = np.nan
print(f"missing sales: {gappy['sales'].isna().mean():.0%}")

results = {}
for name, data in (("complete", train), ("with gaps", gappy)):
    forecaster = SSMForecaster(context_length=24, max_epochs=EPOCHS, **SMALL)
    forecaster.fit(data[["sales"]], X=data[["promo"]], fh=fh)
    results[name] = forecaster.predict(X=test[["promo"]])
    errors[name] = mae_by_shop(results[name])
print(pd.DataFrame({k: errors[k] for k in ("complete", "with gaps")}).round(3).T)

fig, ax = plt.subplots(figsize=(8, 3))
shop = "south"
ax.plot(gappy.loc[shop, "sales"].to_timestamp(), ".", ms=3, label="training sales (with gaps)")
ax.plot(test.loc[shop, "sales"].to_timestamp(), "k.", ms=4, label="held out")
for name, pred in results.items():
    ax.plot(pred.loc[shop, "sales"].to_timestamp(), label=f"forecast, trained {name}")
ax.set_xlim(months[-36].to_timestamp(), months[-1].to_timestamp())
ax.set_title(f"shop {shop}: forecasts from complete and gappy training data")
ax.legend(fontsize="small")
plt.show()

# %% [markdown]
# ## 3. Irregular time stamps
#
# A sensor that reports at random times: a sum of sinusoids observed with exponential gaps.
# `irregular="time_deltas"` lets each step of the SSM take $\Delta$ times the gap to the next
# observation ($x_k = e^{\Lambda \Delta_k} x_{k-1} + \dots$, computed by a parallel scan), so
# the series is modelled as observed. The usual alternative is to interpolate onto a regular
# grid first and forecast there.

# %%
from sktime.forecasting.base import ForecastingHorizon

n_obs = 200 if QUICK else 900
# observation times in hours, on whole minutes (sktime's horizons need a frequency)
t = np.cumsum(np.round(60 * np.maximum(rng.exponential(1.0, n_obs), 0.05))) / 60
gap = np.diff(t, prepend=0.0)
signal = lambda tt: np.sin(2 * np.pi * tt / 7.3) + 0.7 * np.sin(2 * np.pi * tt / 17.0)
values = signal(t) + 0.05 * rng.normal(size=n_obs)
n_ahead = 8
stamps = pd.Timestamp("2024-01-01") + pd.to_timedelta(np.round(60 * t), unit="min")
y_irregular = pd.Series(values[:-n_ahead], index=stamps[:-n_ahead])
future_times = t[-n_ahead:]

irregular = SSMForecaster(irregular="time_deltas", strategy="recursive", time_unit="1h", context_length=48,
                          max_epochs=EPOCHS, **SMALL)
irregular.fit(y_irregular, fh=ForecastingHorizon(stamps[-n_ahead:], is_relative=False, freq="min"))
pred_irregular = irregular.predict().to_numpy()

# resample-then-forecast: linear interpolation onto a grid at the median gap
step = float(np.median(gap))
grid = np.arange(t[0], t[-n_ahead - 1] + 1e-9, step)
y_grid = pd.Series(np.interp(grid, t[:-n_ahead], values[:-n_ahead]))
steps_needed = int(np.ceil((future_times[-1] - grid[-1]) / step))
regular = SSMForecaster(context_length=48, max_epochs=EPOCHS, **SMALL)
regular.fit(y_grid, fh=list(range(1, steps_needed + 1)))
pred_grid = regular.predict().to_numpy()
pred_resampled = np.interp(future_times, grid[-1] + step * np.arange(1, steps_needed + 1), pred_grid)

truth = signal(future_times)
for name, pred in (("per-step Delta", pred_irregular), ("resample, then forecast", pred_resampled)):
    print(f"{name:24s} RMSE against the noise-free signal: {np.sqrt(np.mean((pred - truth) ** 2)):.3f}")

fig, ax = plt.subplots(figsize=(8, 3))
ax.plot(t[-80:-n_ahead], values[-80:-n_ahead], ".", ms=4, label="observed (uneven times)")
dense = np.linspace(t[-80], t[-1], 400)
ax.plot(dense, signal(dense), color="gray", lw=0.8, label="noise-free signal")
ax.plot(future_times, pred_irregular, "o-", label="irregular='time_deltas'")
ax.plot(future_times, pred_resampled, "s-", label="resample, then forecast")
ax.legend(fontsize="small")
ax.set_xlabel("time")
plt.show()

# %% [markdown]
# One run on one series says little: `python -m ssmts.bench irregular` compares the two over
# seeds (a tie at this smoothness, see the [resampling guide](../docs/guides/resampling.md)).
# What the per-step $\Delta_k$ offers is that no grid step has to be chosen and no value is
# invented by interpolation.

# %% [markdown]
# ## 4. Backtests from many origins, without refitting
#
# How good is a forecaster one to six months ahead? The honest answer is a backtest: forecast
# from many past origins and score against what happened. sktime's
# `evaluate(..., strategy="no-update_params")` does it with one fit and then an update and a
# predict per origin. `historical_forecasts` (darts' name) gives the same forecasts from every
# origin in one batched forward of the network.

# %%
import copy

sales = panel.loc["south", ["sales"]]
promo = panel.loc["south", ["promo"]]
first = len(months) - 36
backtester = SSMForecaster(context_length=24, max_epochs=EPOCHS, **SMALL)
backtester.fit(sales.iloc[:first], X=promo.iloc[:first], fh=fh)
cutoffs = sales.index[first - 1 : -horizon]

started = time.perf_counter()
one_pass = backtester.historical_forecasts(sales, X=promo, cutoffs=cutoffs)
one_pass_seconds = time.perf_counter() - started

looped = copy.deepcopy(backtester)  # the same fitted weights, moved origin by origin
started = time.perf_counter()
separate = []
for cutoff in cutoffs:
    looped.update(sales.loc[:cutoff], X=promo.loc[:cutoff], update_params=False)
    separate.append(looped.predict(X=promo.loc[cutoff + 1 : cutoff + horizon]))
loop_seconds = time.perf_counter() - started
print(f"{len(cutoffs)} origins: historical_forecasts {1000 * one_pass_seconds:.0f} ms, "
      f"update + predict per origin {1000 * loop_seconds:.0f} ms")
difference = max(np.abs(one_pass.xs(c, level="cutoff").to_numpy() - s.to_numpy()).max()
                 for c, s in zip(cutoffs, separate))
print(f"largest difference between the two: {difference:.2e}")

# error by lead time over all origins
errors_by_lead = []
for cutoff in cutoffs:
    forecast = one_pass.xs(cutoff, level="cutoff")["sales"]
    actual = sales["sales"].reindex(forecast.index)
    errors_by_lead.append(np.abs(forecast.to_numpy() - actual.to_numpy()))
fig, ax = plt.subplots(figsize=(5, 3))
ax.plot(fh, np.nanmean(errors_by_lead, axis=0), "o-")
ax.set_xlabel("months ahead")
ax.set_ylabel("mean absolute error")
ax.set_title(f"backtest over {len(cutoffs)} origins")
plt.show()

# %% [markdown]
# ## 5. Streaming: one observation at a time
#
# In production the data arrives a point at a time. `stream()` returns a `ForecastStream` that
# takes each new observation and returns the updated forecast, equal to `update` + `predict`
# on the prefix. Here the sensor-free model of section 4 follows the last 12 months of the
# south shop.

# %%
streaming = SSMForecaster(context_length=24, max_epochs=EPOCHS, **SMALL)
streaming.fit(sales.iloc[:-12], fh=fh)
stream = streaming.stream()
started = time.perf_counter()
latest = [stream.step(value) for value in sales["sales"].iloc[-12:-horizon].to_numpy()]
per_step = (time.perf_counter() - started) / len(latest)
check = copy.deepcopy(streaming)
check.update(sales.iloc[:-horizon], update_params=False)
print(f"{1000 * per_step:.1f} ms per observation; last streamed forecast equals update + predict: "
      f"{np.allclose(latest[-1][:, 0], check.predict().to_numpy().ravel(), rtol=1e-5)}")

# %% [markdown]
# ## 6. Prediction intervals you can trust
#
# The forecaster calibrates its intervals by default (`calibration="auto"`; `calibration_`
# says what ran: for one series, `"refit"` widens the quantile head's intervals by what it
# missed on held-out windows of the training series, then trains the network again on all
# of them). On the backtest of section 4 we can count how often the 80 % interval held the
# truth. sktime's `ConformalIntervals` is the other way to calibrate: it refits the
# forecaster on past windows and widens by its errors there. Give it a forecaster with
# `calibration="none"`, so that the intervals are calibrated once, not twice.

# %%
from sktime.forecasting.conformal import ConformalIntervals

quantiles = backtester.historical_forecasts(sales, X=promo, cutoffs=cutoffs, alpha=[0.1, 0.9])
lower, upper = quantiles.iloc[:, 0], quantiles.iloc[:, 1]
actual = sales["sales"].reindex(quantiles.index.get_level_values(-1)).to_numpy()
inside = (actual >= lower.to_numpy()) & (actual <= upper.to_numpy())
print(f"calibration_ = {backtester.calibration_!r}; nominal 80 %: {100 * np.nanmean(inside):.0f} % of "
      f"{inside.size} backtest forecasts covered")

# the wrapper refits the forecaster on past windows to collect its errors (here half of them)
conformal = ConformalIntervals(SSMForecaster(context_length=24, max_epochs=EPOCHS, calibration="none", **SMALL),
                               initial_window=first - 12, sample_frac=0.1 if QUICK else 0.5)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)  # sktime's notice about a future default
    conformal.fit(sales.iloc[:-horizon], fh=fh)
    interval = conformal.predict_interval(coverage=0.8)
held_out = sales["sales"].iloc[-horizon:].to_numpy()
covered = (held_out >= interval.iloc[:, 0].to_numpy()) & (held_out <= interval.iloc[:, 1].to_numpy())
print(f"conformal 80 % interval on the last {horizon} months: {covered.sum()} of {horizon} covered")
