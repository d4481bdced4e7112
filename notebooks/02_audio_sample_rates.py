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
# # Spoken words at any sample rate: zero-shot resampling
#
# Audio, ECG, EEG and accelerometer data come at whatever rate the device recorded them:
# 8 or 16 kHz for speech, 250 or 500 Hz for ECG. A model trained at one rate usually has
# to be retrained, or the data resampled, before it can read another.
#
# A state-space model is different: each layer is a continuous-time system, sampled with a
# step size $\Delta$. Trained at rate $f_0$, it can read data sampled at $f_1$ by scaling
# every step, $\Delta \to \Delta f_0 / f_1$, with nothing retrained. This notebook
# trains a classifier of spoken command words on raw audio at one rate and classifies
# held-out speakers at other rates in three ways:
#
# 1. **rescale $\Delta$**: pass the new-rate audio with its `sample_rate`;
# 2. **resample the audio** back to the training rate first (`change_rate`), then predict;
# 3. **ignore the rate**: pass the new-rate audio as if nothing had changed.
#
# It runs offline in a few minutes on a CPU.

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

# %% [markdown]
# ## The data
#
# The repository ships a compact stand-in for Speech Commands: the ten SC10 words (*yes,
# no, up, down, left, right, on, off, stop, go*) spoken by 60 synthetic espeak-ng voices,
# one clip per word and voice (600 clips: 160 for training, 40 for validation, 400 for
# testing), 1 s at 16 kHz, in the Speech Commands directory layout.
# Validation and test voices are never heard in training, so every score below is on
# unseen speakers.
#
# **Using the real data.** Download Speech Commands v0.02, extract it, and pass its
# directory instead: `load_speech_commands("~/data/speech_commands_v0.02", max_per_class=...)`.
# The papers train at 16 kHz on a GPU (`ssmts tasks run sc10 --data-dir ... --preset paper`).

# %%
from ssmts.data.speech import change_rate, default_spoken_commands_dir, load_speech_commands

ORIGINAL_RATE = 16000
clips = load_speech_commands(default_spoken_commands_dir(), sample_rate=ORIGINAL_RATE,
                             max_per_class=2 if QUICK else None)
words = clips.classes
# Validation and test voices together: every clip of a speaker the model never heard.
X_heldout = np.concatenate([clips.val.X, clips.test.X])
y_heldout = np.concatenate([clips.val.y, clips.test.y])
print(f"words: {', '.join(words)}")
print(f"training clips {clips.train.X.shape}, held-out clips {X_heldout.shape} at {ORIGINAL_RATE} Hz")

# %% [markdown]
# ## Training at 2 kHz
#
# Raw audio at 16 kHz means 16,000 steps per word, more than a CPU should train on in a
# notebook. The classifier is trained at 2 kHz instead: `change_rate(..., method="resample")`
# low-pass filters and resamples, keeping everything below 1 kHz (the voice's pitch and
# first formant, enough to tell these words apart, though not as well as full-band audio).
# The spectrograms show what the 2 kHz version keeps.

# %%
TRAIN_RATE = 1000 if QUICK else 2000
example = clips.train.X[0, 0]
at_train_rate = change_rate(example, ORIGINAL_RATE, TRAIN_RATE, method="resample")

fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5), layout="constrained", sharex=True)
top.specgram(example, Fs=ORIGINAL_RATE, NFFT=256, noverlap=192, cmap="magma")
top.set(title=f"'{words[clips.train.y[0]]}' at {ORIGINAL_RATE} Hz", ylabel="frequency (Hz)")
bottom.specgram(at_train_rate, Fs=TRAIN_RATE, NFFT=32, noverlap=24, cmap="magma")
bottom.set(title=f"the same clip at {TRAIN_RATE} Hz", ylabel="frequency (Hz)", xlabel="time (s)")
bottom.set_ylim(0, ORIGINAL_RATE / 2)
plt.show()

# %% [markdown]
# The model settings are those of `ssmts demo`: three layers of width 32, batch
# normalization after each residual sum and a learning rate of 0.01, which train fastest
# on raw audio in our runs. `sample_rate=TRAIN_RATE` records the training rate; it is what
# makes the rescaling below possible.

# %%
from ssmts import SSMClassifier

X_train = change_rate(clips.train.X, ORIGINAL_RATE, TRAIN_RATE, method="resample")
classifier = SSMClassifier(
    d_model=8 if QUICK else 32, d_state=32, n_layers=1 if QUICK else 3, norm="batch", prenorm=False,
    lr=1e-2, lr_ssm=1e-3, batch_size=16, max_epochs=1 if QUICK else 20, min_steps=0,
    sample_rate=TRAIN_RATE, random_state=0,
)
started = time.perf_counter()
classifier.fit(X_train, clips.train.y)
print(f"trained in {time.perf_counter() - started:.0f} s; "
      f"training accuracy {classifier.score(X_train, clips.train.y):.2f}, chance {1 / len(words):.2f}")

# %% [markdown]
# ## Classifying at other rates
#
# The held-out clips are produced at each rate from the 16 kHz originals (band-limited
# resampling, as a recorder at that rate would capture them). The three approaches then
# differ only in what they do with that audio. Below the training rate the classifier warns
# (`ExtrapolationWarning`): it never saw data at those rates, so how accurate it stays there is
# for a measurement like this one to say.

# %%
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
accuracy.round(3)

# %%
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
plt.show()

# %% [markdown]
# How to read it:
#
# - **Ignoring the rate** plays every word faster or slower to the model (at twice the rate
#   a word lasts twice as many steps and its pitch, in cycles per step, halves). Accuracy
#   falls towards chance as the mismatch grows.
# - **Rescaling $\Delta$** makes the layers run the same continuous-time filters on the new
#   samples. Above the training rate the audio also carries frequencies the model never
#   heard (above 1 kHz here), which the filters respond to in untrained ways; below it,
#   part of the band the model relies on is missing. How much accuracy survives is the
#   measure of how well the model learned a continuous-time description of the signal.
# - **Resampling to the training rate** recreates the training conditions exactly when
#   the audio comes at a higher rate (the low-pass filter removes what the model never
#   heard), so it is the reference for rates above the training rate; below it, nothing
#   can restore the missing band.
#
# The papers report the zero-shot setting on real Speech Commands, trained at 16 kHz and
# tested at 8 kHz with $\Delta$ doubled: S4 98.32 % to 96.30 %, eSSM 97.59 % to 94.23 %,
# LSSL 95.87 % to 88.66 %.
#
# ## Why rescaling works: the same filter at two rates
#
# A layer's frequency response on sampled data depends on its step sizes. With $\Delta$
# rescaled for 16 kHz input, the first layer's response over 0 to 1 kHz is (almost) the
# one it has at the training rate, and it continues above 1 kHz where training never
# constrained it. The curves show the largest gain over all channel pairs
# (`ssmts.nn.analysis.frequency_response`).

# %%
from ssmts.nn import delta_factor, scaled_delta
from ssmts.nn.analysis import frequency_response
from ssmts.plot import ssm_layers_of


def largest_gain(layer, frequencies_hz, rate):
    response = frequency_response(layer, frequencies_hz, sample_rate=rate)   # (M, H, n) complex
    return np.linalg.svd(np.moveaxis(response, -1, 0), compute_uv=False)[:, 0]


first_layer = ssm_layers_of(classifier)[0]
at_training = np.geomspace(10, TRAIN_RATE / 2, 400)
at_16k = np.geomspace(10, ORIGINAL_RATE / 2, 800)
gain_training = largest_gain(first_layer, at_training, TRAIN_RATE)
# Delta * TRAIN_RATE / 16000 inside the block only: the model is back as trained afterwards
with scaled_delta(classifier.model_, delta_factor(TRAIN_RATE, ORIGINAL_RATE)):
    gain_16k = largest_gain(first_layer, at_16k, ORIGINAL_RATE)

fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
ax.plot(at_16k, gain_16k, color="C1", lw=1.2, label=f"Δ rescaled, {ORIGINAL_RATE} Hz input")
ax.plot(at_training, gain_training, color="C0", lw=2, ls="--", label=f"as trained, {TRAIN_RATE} Hz input")
ax.axvspan(TRAIN_RATE / 2, ORIGINAL_RATE / 2, color="0.9", label="never seen in training")
ax.set(xscale="log", xlabel="frequency (Hz)", ylabel="largest gain",
       title="First layer: frequency response at two sample rates")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# Over the band the model was trained on, the two curves nearly coincide: rescaling $\Delta$ keeps
# the layer the same continuous-time filter. Peaks in the grey band belong to modes that
# oscillate faster than the training rate can represent: at 2 kHz they were folded
# (aliased) below 1 kHz, at 16 kHz they appear at their own frequency. Such modes are one
# reason a rescaled model can behave differently on full-band audio.
#
# ## Next steps
#
# - Run the demo for the half-rate comparison table: `ssmts demo` (train at 4 kHz, test
#   at 2 kHz, with decimated and resampled inputs).
# - With a GPU, train on the real Speech Commands at 16 kHz and test at 8 kHz:
#   `ssmts tasks run sc10 --data-dir ~/data/speech_commands_v0.02 --preset paper --device cuda`.
# - The same `sample_rate` mechanism works for any signal: fit with the rate of your
#   training recordings, predict with the rate of the new ones.
