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


def test_the_half_rate_network_is_the_demos_network_with_half_of_its_batches_at_half_the_rate(monkeypatch):
    """The comparison's half_rate row fits a copy of the demo's network (its parameters, seed and rate) with
    half_rate_share=0.5, scores it at the rate and on the half-rate clips with Delta rescaled, and the table
    says that column is not zero-shot; the demo's own network is left as it was."""
    import numpy as np

    from ssmts import SSMClassifier

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((24, 1, 200)).astype(np.float32), np.repeat(["a", "b"], 12)
    X[y == "b"] += np.sin(np.arange(200) / 3.0).astype(np.float32)
    tiny = dict(d_model=8, d_state=4, n_layers=1, max_epochs=2, min_steps=0)
    network = SSMClassifier(**tiny, sample_rate=1000, random_state=0)
    fitted = []
    original_fit = SSMClassifier.fit
    monkeypatch.setattr(SSMClassifier, "fit", lambda self, *a, **k: fitted.append(self) or original_fit(self, *a, **k))
    row = demo._fit_baseline("half_rate", (X, y), (X, y), 1000, 0, {}, network=network)
    assert [m.half_rate_share for m in fitted] == [0.5] and fitted[0] is not network
    assert {k: v for k, v in fitted[0].get_params().items() if k != "half_rate_share"} == {
        k: v for k, v in network.get_params().items() if k != "half_rate_share"
    }
    assert network.half_rate_share == 0.0 and row["model"] == "SSMClassifier(half_rate_share=0.5)"
    assert 0.0 <= row["accuracy"] <= 1.0 and 0.0 <= row["half_rate_accuracy"] <= 1.0 and row["n_test"] == 24
    text = demo.format_comparison([demo._scored("SSMClassifier (the network)", 1.0, 12, 12, 24), row], 1000)
    assert "at 500 Hz neither is zero-shot" in text
