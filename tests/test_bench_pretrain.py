"""The pretraining script: reproducible weights that SSMForecaster(pretrained=...) reads."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ssmts.bench.pretrain import main
from ssmts.sktime import SSMForecaster
from ssmts.sktime._pretrained import read_pretrained


def _run(path, seed=0):
    argv = ["--series", "40", "--steps", "12", "--context", "12", "--horizon", "4", "--seed", str(seed)]
    assert main([*argv, "--threads", "1", "--out", str(path)]) == 0
    return read_pretrained(path)


def test_the_same_seed_gives_the_same_weights_and_another_seed_others(tmp_path):
    (meta_a, a), (meta_b, b), (_, c) = (_run(tmp_path / f"{k}.safetensors", s) for k, s in ("a0", "b0", "c1"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a)
    assert meta_a["training"]["command"] == meta_b["training"]["command"]
    assert meta_a["training"]["command"].endswith("--series 40 --steps 12 --context 12 --horizon 4 --seed 0")
    assert meta_a["context_length"] == 12 and meta_a["horizon"] == 4
    # the corpus keeps out the development sets and M1's yearly series
    packaged = meta_a["training"]["packaged_series"]
    assert packaged and not any(name.startswith("m1_yearly:") for name in packaged)


def test_the_weights_forecast_zero_shot(tmp_path):
    _run(tmp_path / "w.safetensors")
    y = pd.Series(np.linspace(1, 30, 30), index=pd.period_range("2000", periods=30, freq="Y"))
    f = SSMForecaster(pretrained=True, pretrained_weights=str(tmp_path / "w.safetensors")).fit(y, fh=[1, 2, 3, 4])
    assert f.n_iter_ == 0 and np.isfinite(f.predict().to_numpy()).all()
