"""The demo's comparison table: intervals, the noise line, and MiniRocket skipped without numba."""

from __future__ import annotations

import numpy as np

from ssmts import baselines
from ssmts.tasks import demo
from ssmts.tasks.accuracy import wilson_interval


def test_comparison_rows_carry_wilson_intervals_and_the_noise_line():
    rows = [demo._scored("SSMClassifier (the network)", 160.4, 260, 200, 400)]
    rows.append({"model": demo.BASELINE_NAMES["minirocket"], "skipped": "No module named 'numba'"})
    assert rows[0]["accuracy"] == 0.65 and rows[0]["interval"] == wilson_interval(260, 400)
    text = demo.format_comparison(rows, 4000)
    low, high = wilson_interval(260, 400)
    assert f"65.0% ({low:.1%}-{high:.1%})" in text and "50.0% (45.1%-54.9%)" in text
    assert "MiniRocket + ridge" in text and "skipped: No module named 'numba'" in text
    assert "400 test clips" in text and "±4.9 points" in text and "less than 6.9 points apart" in text
    assert "MiniRocket after resampling" not in text  # no MiniRocket row was scored


def test_minirocket_without_numba_is_skipped_with_the_install_command(monkeypatch):
    def no_numba(self, X, y):
        raise ModuleNotFoundError("No module named 'numba'")

    monkeypatch.setattr(baselines.MiniRocketRidge, "fit", no_numba)
    rng = np.random.default_rng(0)
    clips = (rng.standard_normal((4, 1, 40)).astype(np.float32), np.array(["yes", "no"] * 2))
    row = demo._fit_baseline("minirocket", clips, clips, 40, 0, {})
    assert row["model"] == "MiniRocket + ridge" and "numba" in row["skipped"]
    assert "pip install 'ssmts[bench]'" in row["skipped"]
