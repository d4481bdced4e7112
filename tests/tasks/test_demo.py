"""The demo's comparison table: intervals and the noise line."""

from __future__ import annotations

from ssmts.tasks import demo
from ssmts.tasks.accuracy import wilson_interval


def test_comparison_rows_carry_wilson_intervals_and_the_noise_line():
    rows = [demo._scored("SSMClassifier (the network)", 160.4, 260, 200, 400)]
    assert rows[0]["accuracy"] == 0.65 and rows[0]["interval"] == wilson_interval(260, 400)
    text = demo.format_comparison(rows, 4000)
    low, high = wilson_interval(260, 400)
    assert f"65.0% ({low:.1%}-{high:.1%})" in text and "50.0% (45.1%-54.9%)" in text
    assert "400 test clips" in text and "±4.9 points" in text and "less than 6.9 points apart" in text
    assert "MiniRocket after resampling" not in text  # no MiniRocket row was scored
