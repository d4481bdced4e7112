"""Write the example notebooks of this directory from the cell sources below.

The notebooks are generated, without outputs, so that what is committed can never show
results that the code no longer produces. Edit the cells here, then run

    python notebooks/build_notebooks.py

and commit the regenerated .ipynb files (tests/test_notebooks.py checks that they match).

Every notebook reads SSMTS_NOTEBOOK_QUICK=1 (set by the tests) to shrink data, model and
epochs to a smoke run; without it the settings are the ones the markdown describes, sized
to finish in a few minutes on a 2-core CPU.
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent

QUICK_FLAG = '''\
import os
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

# SSMTS_NOTEBOOK_QUICK=1 shrinks data, model and epochs to a smoke run (used by the tests).
QUICK = os.environ.get("SSMTS_NOTEBOOK_QUICK") == "1"
plt.rcParams["figure.dpi"] = 90'''


# ---------------------------------------------------------------------------------------------
# 01 vital signs
VITAL_SIGNS = [
    ("md", """\
# Respiratory rate from PPG and ECG with a deep state-space model

The BIDMC benchmark asks for a patient's **respiratory rate** (breaths per minute) from a
32-second window of two bedside signals sampled at 125 Hz: the photoplethysmogram (PPG)
of a pulse oximeter and the ECG. Breathing leaves three fingerprints on these signals:
it modulates the pulse amplitude, shifts the baseline, and speeds up and slows down the
heart (respiratory sinus arrhythmia). A model has to find a slow rhythm (0.1 to 0.5 Hz)
hidden inside fast ones (1 to 2 Hz heart beats).

In this notebook you will

1. load vital-sign windows and look at them,
2. fit an `SSMRegressor` inside a scikit-learn `Pipeline`,
3. compare it with classical regressors (ridge, random forest, gradient boosting),
4. check its agreement with the truth the way a clinical method comparison would
   (Bland-Altman), and
5. look inside the trained model: its eigenvalues and step sizes (the views of the eSSM
   paper's Figs. 8 and 9), its convolution kernels, and which frequencies each layer passes.

It runs offline in a few minutes on a laptop CPU."""),
    ("code", QUICK_FLAG),
    ("md", """\
## 1. The data

The real BIDMC windows are not redistributable with the library, so this notebook uses
an offline stand-in with the same layout: `make_synthetic_vitals` simulates PPG and ECG
at 125 Hz with `neurokit2`, applies the three respiratory modulations explicitly, and
labels every window with the respiratory rate it was simulated with. The windows here
are 8 s long (1000 samples) to keep the notebook fast; BIDMC's are 32 s.

**Using the real data.** Download the `BIDMC32RR` problem (two `.ts` files) of the Monash
Time Series Extrinsic Regression archive and replace the next cell's loader with

```python
from ssmts.data.bidmc import load_bidmc
data = load_bidmc("~/data/bidmc", target="rr")   # X: (n, 2, 4000) at 125 Hz, S4's split
```

Everything below runs unchanged; training takes longer on 4000-step windows
(`ssmts tasks run bidmc-rr --data-dir ~/data/bidmc` runs the full pipeline)."""),
    ("code", """\
from ssmts.data.vitals_synth import make_synthetic_vitals

data = make_synthetic_vitals(n_windows=60 if QUICK else 300, length=1000, target="rr", seed=0)
print(f"sample rate: {data.sample_rate:g} Hz, channels: {data.meta['channels']}")
for name in ("train", "val", "test"):
    split = getattr(data, name)
    print(f"{name:>5}: X {split.X.shape}, respiratory rate {split.y.min():.1f} to {split.y.max():.1f} breaths/min")"""),
    ("code", """\
seconds = np.arange(data.train.X.shape[-1]) / data.sample_rate
fig, axes = plt.subplots(3, 1, figsize=(10, 6), sharex=True, layout="constrained")
for ax, i in zip(axes, [0, 1, 2]):
    ppg, ecg = data.train.X[i]
    ax.plot(seconds, ppg, lw=0.8, label="PPG")
    ax.plot(seconds, ecg - 4, lw=0.8, label="ECG (shifted down)")
    ax.set_title(f"window {i}: {data.train.y[i]:.1f} breaths/min", fontsize=10)
    ax.set_yticks([])
axes[0].legend(loc="upper right", fontsize=8)
axes[-1].set_xlabel("time (s)")
plt.show()"""),
    ("md", """\
The channels are standardized with training statistics. Look for the slow swell of the
PPG amplitude and baseline: one cycle per breath.

## 2. A pipeline: downsample, then the state-space model

Breathing lives below 1 Hz and the heart below about 3 Hz, so 125 Hz carries far more
samples than the task needs. The pipeline first low-pass filters and downsamples by 5
to 25 Hz (`scipy.signal.decimate`), which makes the sequences five times shorter, and
then fits the `SSMRegressor`. The regressor standardizes its inputs and its target
itself and reports predictions in breaths per minute.

`early_stopping=True` holds out 15 % of the training windows, records the validation
loss every epoch and keeps the weights of the best epoch. `sample_rate` tells the model
the rate it is trained at, which the plots below use to put time in seconds and
frequency in Hz."""),
    ("code", """\
from scipy.signal import decimate
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer

from ssmts import SSMRegressor

FACTOR = 5
RATE = data.sample_rate / FACTOR          # 25 Hz
architecture = dict(d_model=16 if QUICK else 32, d_state=32, n_layers=2, random_state=0)

model = Pipeline([
    ("downsample", FunctionTransformer(decimate, kw_args={"q": FACTOR, "axis": -1})),
    ("ssm", SSMRegressor(**architecture, max_epochs=3 if QUICK else 15, batch_size=16,
                         early_stopping=True, validation_fraction=0.15, sample_rate=RATE)),
])
started = time.perf_counter()
model.fit(data.train.X, data.train.y)
ssm_fit_seconds = time.perf_counter() - started
print(f"trained {model['ssm'].n_iter_} epochs in {ssm_fit_seconds:.0f} s")"""),
    ("code", """\
from ssmts.plot import plot_history

fig = plot_history(model)
plt.show()"""),
    ("md", """\
## 3. Against classical regressors

`fit_vital_baselines` fits the models LSSL compares with on BIDMC (ridge regression and
gradient boosting, here scikit-learn's `HistGradientBoostingRegressor` in place of
XGBoost) plus a random forest and the training mean (the floor every model must beat),
on the flattened windows. To make the comparison fair they get the same 25 Hz windows
as the SSM. Ridge picks its penalty on the validation split."""),
    ("code", """\
from dataclasses import replace

from ssmts.baselines import fit_vital_baselines, mae, rmse
from ssmts.data.base import Split

downsample = model.named_steps["downsample"]


def at_25_hz(split):
    return Split(downsample.transform(split.X).astype(np.float32), split.y)


data_25hz = replace(data, train=at_25_hz(data.train), val=at_25_hz(data.val), test=at_25_hz(data.test),
                    sample_rate=RATE)
baseline_models = ("ridge", "random_forest", "mean") if QUICK else ("ridge", "random_forest", "hist_gradient_boosting", "mean")
baselines = fit_vital_baselines(data_25hz, models=baseline_models)

predicted = model.predict(data.test.X)
ssm_row = pd.DataFrame({"test_rmse": [rmse(data.test.y, predicted)], "test_mae": [mae(data.test.y, predicted)],
                        "fit_seconds": [ssm_fit_seconds]}, index=["ssm"])
table = pd.concat([ssm_row, baselines[["test_rmse", "test_mae", "fit_seconds"]]]).sort_values("test_rmse")
table.round(2)"""),
    ("md", """\
RMSE and MAE are in breaths per minute on the test windows, which no model saw in
training. On the real BIDMC data LSSL reports an RMSE of 0.350 for its SSM against 1.67
for XGBoost and 3.86 for ridge regression; numbers on this stand-in are not comparable
with those, but the question is the same: does the model find the breathing rhythm, or
only the average?

## 4. Agreement with the truth

A scatter of predicted against true rate shows bias and spread; the Bland-Altman plot
shows the difference against the mean of the two, with the mean difference (bias) and
the 95 % limits of agreement (bias plus or minus 1.96 standard deviations of the
differences)."""),
    ("code", """\
truth = data.test.y
difference, average = predicted - truth, (predicted + truth) / 2
bias, spread = difference.mean(), 1.96 * difference.std(ddof=1)

fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
left.scatter(truth, predicted, s=18)
lims = [truth.min() - 1, truth.max() + 1]
left.plot(lims, lims, color="0.5", lw=1, label="perfect agreement")
left.set(xlabel="true rate (breaths/min)", ylabel="predicted rate (breaths/min)", title="SSM on the test windows")
left.legend()
right.scatter(average, difference, s=18)
for value, style in ((bias, "-"), (bias - spread, "--"), (bias + spread, "--")):
    right.axhline(value, color="C3", ls=style, lw=1)
right.set(xlabel="mean of predicted and true (breaths/min)", ylabel="predicted - true (breaths/min)",
          title=f"Bland-Altman: bias {bias:+.2f}, limits of agreement ±{spread:.2f}")
plt.show()"""),
    ("md", """\
## 5. Inside the trained model

Every layer of the network is a linear system with eigenvalues $\\lambda$ and step sizes
$\\Delta$. To see how training moved them, build the same architecture without training:
an `SSMTransformer(objective="none")` with the same architecture and `random_state`
creates exactly the layers the regressor started from."""),
    ("code", """\
from ssmts import SSMTransformer
from ssmts.plot import plot_eigenvalues, plot_kernels, plot_step_sizes, plot_transfer_function

initial = SSMTransformer(objective="none", **architecture).fit(data_25hz.train.X[:4])

fig = plot_eigenvalues(model, initial=initial)
plt.show()"""),
    ("md", """\
**Eigenvalues** (as in eSSM Fig. 8): real part on the x-axis (how fast a mode forgets),
$\\mathrm{arcsinh}$ of the imaginary part on the y-axis (how fast it oscillates). Black
dots are the initialization: the HiPPO-LegS normal part puts every eigenvalue at real
part $-1/2$. Points that moved left forget faster; points that stay put were not needed
or were already where the task wants them."""),
    ("code", """\
fig = plot_step_sizes(model, initial=initial)
plt.show()"""),
    ("md", """\
**Step sizes** (as in eSSM Fig. 9): $\\ln \\Delta$ of every state, one row per layer, with
the initialization range dashed. At 25 Hz a mode with real part $-1/2$ and step
$\\Delta$ remembers about $2 / \\Delta$ samples, i.e. $2 / (25 \\Delta)$ seconds: the
smallest steps give memories of tens of seconds, the largest a fraction of a second.

**Kernels.** Each layer is a convolution with a kernel as long as the window. Here is
how an impulse on a channel echoes on the same channel over the next 8 seconds."""),
    ("code", """\
fig = plot_kernels(model, length=int(8 * RATE), sample_rate=RATE, max_pairs=4)
plt.show()"""),
    ("md", """\
**Which frequencies does a layer pass?** The exact frequency response of the first layer
on 25 Hz data, with the band of respiratory rates (10 to 30 breaths per minute) and of
heart rates (50 to 120 beats per minute) of this data set shaded. The first layer sees
the encoded PPG and ECG channels, so its gains show which rhythms it amplifies for the
layers above."""),
    ("code", """\
fig = plot_transfer_function(model, layer_index=0, discrete=True, sample_rate=RATE,
                             frequencies=np.linspace(0.02, RATE / 2, 600))
ax = fig.axes[0]
ax.axvspan(10 / 60, 30 / 60, color="C2", alpha=0.15, label="breathing, 10-30 /min")
ax.axvspan(50 / 60, 120 / 60, color="C3", alpha=0.12, label="heart, 50-120 /min")
ax.set_xscale("log")
ax.legend(fontsize=8)
plt.show()"""),
    ("md", """\
## Where to go from here

- Train on the real BIDMC windows (section 1) with `load_bidmc`, or run the whole
  benchmark with `ssmts tasks run bidmc-rr --data-dir ~/data/bidmc`.
- Predict heart rate instead: `make_synthetic_vitals(target="hr")` or
  `load_bidmc(..., target="hr")`; real PPG with heartpy's labels is in
  `ssmts.data.vitals_synth.load_heartpy_ppg`.
- Tune the model with a search (see `04_sklearn_gridsearch.ipynb`): `d_model`, `n_layers`,
  `dt_min`/`dt_max` (the range of time scales) and `pooling="last"` are the first
  parameters to try."""),
]


# ---------------------------------------------------------------------------------------------
# 04 grid search
GRID_SEARCH = [
    ("md", """\
# Hyperparameter search for an SSM classifier with scikit-learn

`SSMClassifier` is a scikit-learn estimator, so the tools you use for any other model
apply: `Pipeline` to chain preprocessing, `GridSearchCV` to choose hyperparameters,
`cross_val_score`, `clone`, joblib persistence. This notebook searches a small grid on
handwritten digits read as sequences: each 8x8 image becomes a 64-step signal, one pixel
per step, row by row (the offline stand-in for sequential MNIST).

It shows

1. the data as sequences,
2. a `Pipeline` of a scikit-learn scaler and the SSM classifier,
3. `GridSearchCV` over SSM hyperparameters, validated on the data set's own validation
   split (`PredefinedSplit`), with the results table,
4. the chosen model on the test split, its training history, and its confusion matrix."""),
    ("code", QUICK_FLAG),
    ("code", """\
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
plt.show()"""),
    ("md", """\
## A pipeline

A 2D array `(n_samples, 64)` is read by the SSM estimators as one univariate series per
row, so any scikit-learn transformer for 2D data can come first. `StandardScaler`
standardizes every pixel position with training statistics (the estimator's own
`scale_input` standardizes channels, i.e. all steps alike). The pipeline is then one
estimator with parameters like `ssm__d_model`."""),
    ("code", """\
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from ssmts import SSMClassifier

pipeline = Pipeline([
    ("scale", StandardScaler()),
    ("ssm", SSMClassifier(d_model=16 if QUICK else 32, d_state=32, n_layers=2, lr=1e-2,
                          max_epochs=2 if QUICK else 20, batch_size=32, random_state=0)),
])
pipeline"""),
    ("md", """\
## The search

Each configuration trains a network, so the grid is small and validation uses the data
set's validation split once (`PredefinedSplit`) instead of k folds. The grid asks two
questions:

- does a **bidirectional** layer (reading the image forwards and backwards, which is
  allowed here because the whole image is available) beat a causal one?
- does a **larger state** (`d_state`, more modes per layer) help?

`refit=False` makes the search only score the configurations; the next section refits
the winner itself, with validation curves recorded."""),
    ("code", """\
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
results[list(columns)].rename(columns=columns).sort_values("validation accuracy", ascending=False).round(3)"""),
    ("md", """\
## The chosen model

Refit the best configuration on training plus validation data, with `early_stopping=True`
so that 10 % of it is held out to record validation curves and keep the best epoch,
and score it once on the test split."""),
    ("code", """\
from sklearn.base import clone

best = clone(pipeline).set_params(**search.best_params_, ssm__early_stopping=True)
best.fit(X_search, y_search)
print("best parameters:", search.best_params_)
print(f"test accuracy: {best.score(X_test, y_test):.3f}")"""),
    ("code", """\
from sklearn.metrics import ConfusionMatrixDisplay

from ssmts.plot import plot_history

fig = plot_history(best)
plt.show()

fig, ax = plt.subplots(figsize=(5, 4.5), layout="constrained")
ConfusionMatrixDisplay.from_estimator(best, X_test, y_test, ax=ax, colorbar=False)
ax.set_title("test split")
plt.show()"""),
    ("md", """\
## Notes for larger searches

- Every fit trains a network: a search costs the number of configurations times the
  folds times one training. Search coarse first (width, depth, learning rate), then fine.
- `n_jobs` in `GridSearchCV` runs fits in parallel; on a CPU set `OMP_NUM_THREADS` so
  that the parallel fits do not fight over cores. On a GPU keep `n_jobs=1`.
- `random_state` makes each fit reproducible, so differences between configurations
  are not seed noise of the search itself; repeat the winner with a few seeds before
  trusting a small difference.
- The same works for `SSMRegressor`, `SSMTransformer` (inside a pipeline with a
  downstream model), and the sktime estimators with sktime's tuning tools."""),
]

# ---------------------------------------------------------------------------------------------
# 02 audio at several sample rates
AUDIO = [
    ("md", """\
# Spoken words at any sample rate: zero-shot resampling

Audio, ECG, EEG and accelerometer data come at whatever rate the device recorded them:
8 or 16 kHz for speech, 250 or 500 Hz for ECG. A model trained at one rate usually has
to be retrained, or the data resampled, before it can read another.

A state-space model is different: each layer is a continuous-time system, sampled with a
step size $\\Delta$. Trained at rate $f_0$, it can read data sampled at $f_1$ by scaling
every step, $\\Delta \\to \\Delta f_0 / f_1$, with nothing retrained. This notebook
trains a classifier of spoken command words on raw audio at one rate and classifies
held-out speakers at other rates in three ways:

1. **rescale $\\Delta$**: pass the new-rate audio with its `sample_rate`;
2. **resample the audio** back to the training rate first (`change_rate`), then predict;
3. **ignore the rate**: pass the new-rate audio as if nothing had changed.

It runs offline in a few minutes on a CPU."""),
    ("code", QUICK_FLAG),
    ("md", """\
## The data

The repository ships a compact stand-in for Speech Commands: the ten SC10 words (*yes,
no, up, down, left, right, on, off, stop, go*) spoken by 24 synthetic espeak-ng voices,
one clip per word and voice, 1 s at 16 kHz, in the Speech Commands directory layout.
Validation and test voices are never heard in training, so every score below is on
unseen speakers.

**Using the real data.** Download Speech Commands v0.02, extract it, and pass its
directory instead: `load_speech_commands("~/data/speech_commands_v0.02", max_per_class=...)`.
The papers train at 16 kHz on a GPU (`ssmts tasks run sc10 --data-dir ... --preset paper`)."""),
    ("code", """\
from ssmts.data.speech import change_rate, default_spoken_commands_dir, load_speech_commands

ORIGINAL_RATE = 16000
clips = load_speech_commands(default_spoken_commands_dir(), sample_rate=ORIGINAL_RATE,
                             max_per_class=2 if QUICK else None)
words = clips.classes
# Validation and test voices together: every clip of a speaker the model never heard.
X_heldout = np.concatenate([clips.val.X, clips.test.X])
y_heldout = np.concatenate([clips.val.y, clips.test.y])
print(f"words: {', '.join(words)}")
print(f"training clips {clips.train.X.shape}, held-out clips {X_heldout.shape} at {ORIGINAL_RATE} Hz")"""),
    ("md", """\
## Training at 2 kHz

Raw audio at 16 kHz means 16,000 steps per word, more than a CPU should train on in a
notebook. The classifier is trained at 2 kHz instead: `change_rate(..., method="resample")`
low-pass filters and resamples, keeping everything below 1 kHz (the voice's pitch and
first formant, enough to tell these words apart, though not as well as full-band audio).
The spectrograms show what the 2 kHz version keeps."""),
    ("code", """\
TRAIN_RATE = 1000 if QUICK else 2000
example = clips.train.X[0, 0]
at_train_rate = change_rate(example, ORIGINAL_RATE, TRAIN_RATE, method="resample")

fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5), layout="constrained", sharex=True)
top.specgram(example, Fs=ORIGINAL_RATE, NFFT=256, noverlap=192, cmap="magma")
top.set(title=f"'{words[clips.train.y[0]]}' at {ORIGINAL_RATE} Hz", ylabel="frequency (Hz)")
bottom.specgram(at_train_rate, Fs=TRAIN_RATE, NFFT=32, noverlap=24, cmap="magma")
bottom.set(title=f"the same clip at {TRAIN_RATE} Hz", ylabel="frequency (Hz)", xlabel="time (s)")
bottom.set_ylim(0, ORIGINAL_RATE / 2)
plt.show()"""),
    ("md", """\
The model settings are those of `ssmts demo`: three layers of width 32, batch
normalization after each residual sum and a learning rate of 0.01, which train fastest
on raw audio in our runs. `sample_rate=TRAIN_RATE` records the training rate; it is what
makes the rescaling below possible."""),
    ("code", """\
from ssmts import SSMClassifier

X_train = change_rate(clips.train.X, ORIGINAL_RATE, TRAIN_RATE, method="resample")
classifier = SSMClassifier(
    d_model=8 if QUICK else 32, d_state=32, n_layers=1 if QUICK else 3, norm="batch", prenorm=False,
    lr=1e-2, lr_ssm=1e-3, batch_size=16, max_epochs=1 if QUICK else 20,
    sample_rate=TRAIN_RATE, random_state=0,
)
started = time.perf_counter()
classifier.fit(X_train, clips.train.y)
print(f"trained in {time.perf_counter() - started:.0f} s; "
      f"training accuracy {classifier.score(X_train, clips.train.y):.2f}, chance {1 / len(words):.2f}")"""),
    ("md", """\
## Classifying at other rates

The held-out clips are produced at each rate from the 16 kHz originals (band-limited
resampling, as a recorder at that rate would capture them). The three approaches then
differ only in what they do with that audio."""),
    ("code", """\
RATES = [500, 1000, 2000] if QUICK else [1000, 2000, 4000, 8000, 16000]

rows = []
for rate in RATES:
    X_rate = change_rate(X_heldout, ORIGINAL_RATE, rate, method="resample")
    back_to_training_rate = change_rate(X_rate, rate, TRAIN_RATE, method="resample")
    rows.append({
        "rate (Hz)": rate,
        "rescale Δ": classifier.score(X_rate, y_heldout, sample_rate=rate),
        "resample to training rate": classifier.score(back_to_training_rate, y_heldout),
        "ignore the rate": classifier.score(X_rate, y_heldout, sample_rate=TRAIN_RATE),
    })
accuracy = pd.DataFrame(rows).set_index("rate (Hz)")
accuracy.round(3)"""),
    ("code", """\
fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
for column, marker in zip(accuracy.columns, ["o", "s", "^"]):
    ax.plot(accuracy.index, accuracy[column], marker=marker, label=column)
ax.axvline(TRAIN_RATE, color="0.6", ls=":", label="training rate")
ax.axhline(1 / len(words), color="0.3", ls="--", lw=1, label="chance")
ax.set_xscale("log", base=2)
ax.set_xticks(accuracy.index, [f"{r / 1000:g} kHz" for r in accuracy.index])
ax.set(xlabel="sample rate of the held-out audio", ylabel="accuracy on unseen voices", ylim=(0, 1),
       title="One model, audio at other rates")
ax.legend(fontsize=8)
plt.show()"""),
    ("md", """\
How to read it:

- **Ignoring the rate** plays every word faster or slower to the model (at twice the rate
  a word lasts twice as many steps and its pitch, in cycles per step, halves). Accuracy
  falls towards chance as the mismatch grows.
- **Rescaling $\\Delta$** makes the layers run the same continuous-time filters on the new
  samples. Above the training rate the audio also carries frequencies the model never
  heard (above 1 kHz here), which the filters respond to in untrained ways; below it,
  part of the band the model relies on is missing. How much accuracy survives is the
  measure of how well the model learned a continuous-time description of the signal.
- **Resampling to the training rate** recreates the training conditions exactly when
  the audio comes at a higher rate (the low-pass filter removes what the model never
  heard), so it is the reference for rates above the training rate; below it, nothing
  can restore the missing band.

The papers report the zero-shot setting on real Speech Commands, trained at 16 kHz and
tested at 8 kHz with $\\Delta$ doubled: S4 98.32 % to 96.30 %, eSSM 97.59 % to 94.23 %,
LSSL 95.87 % to 88.66 %.

## Why rescaling works: the same filter at two rates

A layer's frequency response on sampled data depends on its step sizes. With $\\Delta$
rescaled for 16 kHz input, the first layer's response over 0 to 1 kHz is (almost) the
one it has at the training rate, and it continues above 1 kHz where training never
constrained it. The curves show the largest gain over all channel pairs
(`ssmts.nn.analysis.frequency_response`)."""),
    ("code", """\
from ssmts.nn.analysis import frequency_response
from ssmts.plot import ssm_layers_of


def largest_gain(layer, frequencies_hz, rate):
    response = frequency_response(layer, frequencies_hz, sample_rate=rate)   # (M, H, n) complex
    return np.linalg.svd(np.moveaxis(response, -1, 0), compute_uv=False)[:, 0]


backbone = classifier.model_
first_layer = ssm_layers_of(classifier)[0]
at_training = np.geomspace(10, TRAIN_RATE / 2, 400)
at_16k = np.geomspace(10, ORIGINAL_RATE / 2, 800)
gain_training = largest_gain(first_layer, at_training, TRAIN_RATE)
try:
    backbone.set_sample_rate(ORIGINAL_RATE, TRAIN_RATE)          # Delta * TRAIN_RATE / 16000
    gain_16k = largest_gain(first_layer, at_16k, ORIGINAL_RATE)
finally:
    backbone.dt_scale = 1.0                                       # back to the training rate

fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
ax.plot(at_16k, gain_16k, color="C1", lw=1.2, label=f"Δ rescaled, {ORIGINAL_RATE} Hz input")
ax.plot(at_training, gain_training, color="C0", lw=2, ls="--", label=f"as trained, {TRAIN_RATE} Hz input")
ax.axvspan(TRAIN_RATE / 2, ORIGINAL_RATE / 2, color="0.9", label="never seen in training")
ax.set(xscale="log", xlabel="frequency (Hz)", ylabel="largest gain",
       title="First layer: frequency response at two sample rates")
ax.legend(fontsize=8)
plt.show()"""),
    ("md", """\
Over the band the model was trained on, the two curves nearly coincide: rescaling $\\Delta$ keeps
the layer the same continuous-time filter. Peaks in the grey band belong to modes that
oscillate faster than the training rate can represent: at 2 kHz they were folded
(aliased) below 1 kHz, at 16 kHz they appear at their own frequency. Such modes are one
reason a rescaled model can behave differently on full-band audio.

## Next steps

- Run the demo for the half-rate comparison table: `ssmts demo` (train at 4 kHz, test
  at 2 kHz, with decimated and resampled inputs).
- With a GPU, train on the real Speech Commands at 16 kHz and test at 8 kHz:
  `ssmts tasks run sc10 --data-dir ~/data/speech_commands_v0.02 --preset paper --device cuda`.
- The same `sample_rate` mechanism works for any signal: fit with the rate of your
  training recordings, predict with the rate of the new ones."""),
]

# ---------------------------------------------------------------------------------------------
# 03 forecasting with sktime
FORECASTING = [
    ("md", """\
# Probabilistic forecasting with `SSMForecaster` and sktime

`ssmts.sktime.SSMForecaster` is an sktime forecaster: `fit(y, fh=...)`, `predict()`,
`predict_interval()`, `predict_quantiles()`, `update()`, and it composes with sktime's
pipelines and evaluation tools. Its network predicts a grid of quantiles, so every
forecast comes with prediction intervals.

A deep model is only worth its cost if it beats simple statistics, so this notebook
compares it with three classical forecasters on the airline passenger series (monthly,
1949 to 1960, trend plus a yearly season whose size grows with the level):

- `NaiveForecaster(strategy="last", sp=12)`: repeat last year (seasonal naive);
- `ThetaForecaster(sp=12)`: the Theta method with seasonal adjustment;
- `AutoETS`: exponential smoothing with automatic model selection.

The last 24 months are held out. Forecasts are compared on accuracy (MAPE, and MASE,
which divides by the error of the seasonal naive forecast in training) and on the
quality of their 90 % prediction intervals (how many test months they cover, and how
wide they are)."""),
    ("code", QUICK_FLAG + """
from contextlib import contextmanager


@contextmanager
def quiet():
    \"\"\"Keep warnings out of the output: sktime's notices about future default changes
    and statsmodels' optimizer messages. They are recorded instead of filtered, because
    sktime re-enables FutureWarning filters while it runs.\"\"\"
    with warnings.catch_warnings(record=True):
        yield"""),
    ("code", """\
from sktime.datasets import load_airline
from sktime.split import temporal_train_test_split
from sktime.utils.plotting import plot_series

y = load_airline()
y_train, y_test = temporal_train_test_split(y, test_size=24)
fh = np.arange(1, len(y_test) + 1)      # 1 to 24 months ahead
fig, ax = plot_series(y_train, y_test, labels=["training", "held out"])
ax.set_title("Airline passengers (thousands per month)")
plt.show()"""),
    ("md", """\
## The SSM forecaster

The forecaster cuts the training series into windows of `context_length` months followed
by the horizon, and learns to map each context to the quantiles of the next 24 months.
Each window is normalized by its own context (`instance_norm=True`), so the growing
level of the series does not have to be learned. A context of 36 months holds three
seasons."""),
    ("code", """\
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
plt.show()"""),
    ("md", """\
## The statistical baselines

The seasonal pattern of the airline series grows with its level (multiplicative
seasonality). `AutoETS` is therefore fitted on the logarithm of the series, where the
season becomes additive, inside sktime's `TransformedTargetForecaster`, which maps the
forecasts and intervals back. Restricting it to additive components on the log scale
also gives closed-form prediction intervals."""),
    ("code", """\
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
            fit_seconds[name] = time.perf_counter() - started"""),
    ("code", """\
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
scores.round(2)"""),
    ("md", """\
A 90 % interval should cover about 90 % of the 24 test months (21 or 22 of them); lower
coverage means overconfident intervals, and among intervals with the right coverage the
narrower one is more useful. MASE below 1 beats the seasonal naive forecast's
in-sample error.

One split of one series is a small test: 24 forecasts from a single cutoff. For a
backtest over several cutoffs and series, run `python -m ssmts.bench forecast` (see the
Benchmarks page of the documentation)."""),
    ("code", """\
fig, axes = plt.subplots(2, 2, figsize=(12, 7), layout="constrained", sharey=True)
for ax, name in zip(axes.ravel(), forecasters):
    plot_series(y_train[-36:], y_test, points[name], labels=["training", "held out", "forecast"],
                pred_interval=intervals[name], ax=ax)
    ax.set_title(f"{name}: MAPE {scores.loc[name, 'MAPE (%)']:.1f} %, "
                 f"coverage {scores.loc[name, '90 % interval coverage (%)']:.0f} %")
    ax.legend(fontsize=8, loc="upper left")
plt.show()"""),
    ("md", """\
## When new data arrive

`update` appends new observations and moves the forecasting origin. With
`update_params=False` (the cheap default for streaming) the weights stay as they are and
the next forecast simply reads the latest context; `update_params=True` would also
fine-tune on the new windows. Here the first 12 held-out months arrive, and the
remaining 12 are forecast from the new origin."""),
    ("code", """\
import copy

streaming = copy.deepcopy(ssm)
with quiet():
    streaming.update(y_test[:12], update_params=False)
    remaining = streaming.predict()[:12]      # the fitted horizon (1 to 24 months) from the new origin
print(f"MAPE of the last 12 months, forecast from the new origin: "
      f"{100 * mean_absolute_percentage_error(y_test[12:], remaining):.1f} %")
fig, ax = plot_series(y_train[-24:], y_test, remaining, labels=["training", "held out", "forecast after update"])
plt.show()"""),
    ("md", """\
## Next steps

- Many related series (patients, wards, sensors): pass them together as a panel
  (a `pd.DataFrame` with a `MultiIndex` of series and time). The forecaster is global: one
  network learns from all of them.
- Exogenous variables: `fit(y, X=X, fh=...)` and `predict(X=X_future)`.
- `strategy="recursive"` rolls a one-step model forward with the layers' streaming mode
  instead of predicting all steps at once."""),
]


NOTEBOOKS = {
    "01_vital_signs.ipynb": VITAL_SIGNS,
    "02_audio_sample_rates.ipynb": AUDIO,
    "03_forecasting_sktime.ipynb": FORECASTING,
    "04_sklearn_gridsearch.ipynb": GRID_SEARCH,
}


def build(cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    """A notebook without outputs from (kind, source) pairs; cell ids are stable across builds."""
    notebook = nbformat.v4.new_notebook()
    notebook.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    for index, (kind, source) in enumerate(cells):
        if kind == "md":
            cell = nbformat.v4.new_markdown_cell(source)
        elif kind == "code":
            cell = nbformat.v4.new_code_cell(source)
        else:
            raise ValueError(f"unknown cell kind {kind!r}")
        cell.id = f"cell-{index:02d}"
        notebook.cells.append(cell)
    nbformat.validate(notebook)
    return notebook


def render(cells: list[tuple[str, str]]) -> str:
    """The notebook file's text, exactly as written to disk."""
    return nbformat.writes(build(cells)) + "\n"


def main(argv: list[str]) -> int:
    targets = argv or list(NOTEBOOKS)
    for name in targets:
        if name not in NOTEBOOKS:
            print(f"unknown notebook {name!r}; choose from {sorted(NOTEBOOKS)}", file=sys.stderr)
            return 2
        (HERE / name).write_text(render(NOTEBOOKS[name]), encoding="utf-8")
        print(f"wrote {HERE / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
