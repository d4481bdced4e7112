"""A classifier trained and saved on a GPU loads and predicts on this machine, whatever it has.

data/gpu_trained_classifier.safetensors was written on an NVIDIA H200 (torch 2.11.0+cu130, Python
3.12.3) by `python scripts/gpu_run.py save-model` as it was then (the script now also sets min_steps=60):
SSMClassifier(d_model=16, d_state=8, n_layers=2, max_epochs=3, batch_size=16, random_state=0,
device="auto") fitted there on the CUDA device to the
two-class data of data/gpu_trained_classifier_data.npz (noisy sines of two frequencies, (64, 2, 96)),
where it classified all 64 series correctly. Its GPU probabilities were not kept (that step of the run
ran out of time after saving), so the oracle is the GPU's reported accuracy and the file's own
record of where it was written.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from ssmts import SSMClassifier
from ssmts.estimators._persistence import read_header

DATA = Path(__file__).parent / "data"
MODEL = DATA / "gpu_trained_classifier.safetensors"


def test_gpu_trained_classifier_loads_and_predicts_on_the_cpu():
    header, _ = read_header(MODEL, False, None)
    assert header["versions"]["python"] == "3.12.3"  # written on the GPU machine, not here
    clf = SSMClassifier.load(MODEL)
    assert clf.device == "auto"
    assert all(p.device.type == "cpu" for p in clf.model_.parameters())
    data = np.load(DATA / "gpu_trained_classifier_data.npz")
    proba = clf.set_params(device="cpu").predict_proba(data["X"])
    assert np.isfinite(proba).all() and np.allclose(proba.sum(1), 1.0)
    assert np.mean(clf.classes_[proba.argmax(1)] == data["y"]) == 1.0  # as on the GPU


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without CUDA")
def test_asking_for_cuda_without_one_says_how_to_run_on_the_cpu():
    clf = SSMClassifier.load(MODEL).set_params(device="cuda")
    data = np.load(DATA / "gpu_trained_classifier_data.npz")
    with pytest.raises(ValueError, match=r"set_params\(device='cpu'\)"):
        clf.predict(data["X"])
