"""The PTD experiments (ssmts.tasks.ptd): tiny presets end to end, their CLI hook and helpers."""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from ssmts.cli import main  # noqa: E402
from ssmts.nn.analysis import sensitive_frequencies  # noqa: E402
from ssmts.tasks.ptd import (  # noqa: E402
    EXPERIMENTS,
    ablation_table,
    add_sinusoid,
    amplitude_domain,
    build_network,
    get_ptd_preset,
    robustness_table,
    run_ptd,
    sinusoid_table,
    sinusoids,
    top_frequency_dt,
)
from ssmts.tasks.ptd_figures import save_ptd_figures  # noqa: E402
from ssmts.training import BackboneParams  # noqa: E402


def test_presets_exist_for_every_experiment_and_reject_unknown_names():
    for experiment in EXPERIMENTS:
        for preset in ("tiny", "small", "paper"):
            settings = get_ptd_preset(experiment, preset)
            assert settings.inits == ("legs", "ptd", "hippo")
            for init in ("legs", "ptd"):
                settings.backbone_params(init=init)
    assert get_ptd_preset("ptd-robustness", "small").seeds == (0, 1, 2)
    with pytest.raises(ValueError, match="unknown PTD experiment"):
        get_ptd_preset("ptd-nope", "small")
    with pytest.raises(ValueError, match="unknown preset"):
        get_ptd_preset("ptd-ablation", "huge")


def test_presets_hold_the_declared_parameter_groups():
    """A PTD preset sets values of the declared backbone and Trainer parameters (no copies with
    defaults of their own): unknown names and invalid values are refused by those declarations."""
    small = get_ptd_preset("ptd-ablation", "small")
    assert (small.d_model, small.max_epochs, small.optimizer) == (32, 15, "adamw")
    assert small.activation == BackboneParams.__params__["activation"].default  # not set: the declared default
    params = small.backbone_params(init="ptd", d_state=8, ptd_eps=1e-3)
    assert (params.d_state, params.ptd_eps, params.dt_min, params.dt_max) == (8, 1e-3, 1e-3, 1e-1)
    # without dt_min / dt_max, one Delta by the top-frequency rule of the network's own N
    tiny = get_ptd_preset("ptd-ablation", "tiny").backbone_params(init="legs", d_state=32)
    assert tiny.dt_min == tiny.dt_max == pytest.approx(top_frequency_dt(32))
    with pytest.raises(ValueError, match=r"\['d_hiden'\] are not backbone parameters"):
        small.changed(backbone=dict(d_hiden=8))
    with pytest.raises(ValueError, match=r"\['epochs'\] are not training parameters"):
        small.changed(training=dict(epochs=3))
    with pytest.raises(ValueError, match="d_model"):
        small.changed(backbone=dict(d_model=0))


def test_top_frequency_rule_maps_the_legs_spike_to_the_stated_digital_frequency():
    settings = get_ptd_preset("ptd-robustness", "small")
    model = build_network(settings.backbone_params(init="legs"), 1, 10)
    layer = model.backbone.ssm_layers[0]
    assert layer.conj_sym is False
    assert layer.Delta.detach().numpy() == pytest.approx(top_frequency_dt(settings.d_state), rel=1e-5)
    top = float(layer.Lambda.imag.abs().max().detach())
    assert top * modes_delta(layer) == pytest.approx(0.8, rel=1e-4)
    modes = sensitive_frequencies(layer, 3, omegas=np.linspace(0, 1.2 * top, 4001))[0]
    assert modes.delta == pytest.approx(modes_delta(layer))
    # one Delta for every mode: the digital spike frequencies are exactly w Delta (all below pi here)
    np.testing.assert_allclose(modes.peak_thetas, modes.peak_omegas * modes.delta)


def modes_delta(layer):
    delta = layer.Delta.detach().numpy()
    assert delta.max() == pytest.approx(delta.min(), rel=1e-6)
    return float(delta.mean())


def test_signal_helpers():
    x = sinusoids(np.array([0.5]), np.array([2.0]), np.array([0.0]), 8)
    np.testing.assert_allclose(x[0, 0], 2.0 * np.sin(0.5 * np.arange(8)), rtol=1e-6)
    noisy = add_sinusoid(np.zeros((3, 2, 16), np.float32), 1.0, 0.5, np.random.default_rng(0))
    assert noisy.shape == (3, 2, 16) and np.abs(noisy).max() <= 0.5 + 1e-6
    np.testing.assert_allclose(noisy[:, 0], noisy[:, 1])  # every channel gets the same noise
    assert amplitude_domain("interpolation", (1.0, 4.0)) == [(1.0, 2.0), (3.0, 4.0)]
    assert amplitude_domain("extrapolation", (1.0, 4.0)) == [(1.0, 3.0)]
    with pytest.raises(ValueError, match="domain"):
        amplitude_domain("both", (1.0, 4.0))


def test_tiny_sinusoids_and_ablation_write_results_and_figures(tmp_path):
    sin = run_ptd("ptd-sinusoids", preset="tiny", out=tmp_path / "sin" / "results.json")
    stored = json.loads((tmp_path / "sin" / "results.json").read_text())
    assert {(r["domain"], r["init"]) for r in stored["runs"]} == {
        (d, i) for d in ("interpolation", "extrapolation") for i in ("legs", "ptd", "hippo")
    }
    hippo = next(r for r in stored["runs"] if r["init"] == "hippo")
    assert hippo["layer0_spikes"] is None and np.isfinite(hippo["amplitude_mae_seen"])
    grid = stored["settings"]["grid"]
    assert np.array(stored["runs"][0]["amplitude_abs_error"]).shape == (grid, grid)
    assert save_ptd_figures(sin, tmp_path / "sin" / "results.json") == [tmp_path / "sin" / "results_heatmaps.png"]
    assert (tmp_path / "sin" / "results_heatmaps.png").stat().st_size > 0
    assert "interpolation | legs" in sinusoid_table(sin)

    abl = run_ptd("ptd-ablation", preset="tiny", out=tmp_path / "abl" / "results.json")
    ptd_rows = [r for r in abl["runs"] if r["init"] == "ptd"]
    assert [r["ptd_eps"] for r in ptd_rows] == [1e-4, 1e-2]
    assert all(0 < r["relative_size"] < 0.1 and r["condition_number"] >= 1 for r in ptd_rows)
    assert "| 8 | legs |" in ablation_table(abl)
    save_ptd_figures(abl, tmp_path / "abl" / "results.json")
    assert (tmp_path / "abl" / "results_ablation.png").exists()


def test_cli_runs_the_tiny_robustness_experiment(tmp_path, capsys):
    out = tmp_path / "rob" / "results.json"
    assert (
        main(["tasks", "run", "ptd-robustness", "--preset", "tiny", "--seeds", "0,1", "--out", str(out), "--quiet"])
        == 0
    )
    results = json.loads(out.read_text())
    assert [r["seed"] for r in results["runs"]] == [0, 0, 0, 1, 1, 1]
    assert [r["init"] for r in results["runs"]][:3] == ["legs", "ptd", "hippo"]
    assert results["columns"] == ["clean", "spike@0.5", "random@0.5"]
    for seed in ("0", "1"):
        spikes = results["spikes"][seed]
        assert len(spikes["spike_thetas"]) == 1 and 0 < spikes["spike_thetas"][0] <= np.pi
    assert "| legs | 2 |" in robustness_table(results) and "| hippo | 2 |" in robustness_table(results)
    assert "results_noise.png" in capsys.readouterr().out
    assert main(["tasks", "run", "ptd-robustness", "--seeds", "a,b", "--out", str(out)]) == 2
    assert "--seeds" in capsys.readouterr().err


def test_cli_lists_and_shows_the_ptd_experiments(capsys):
    assert main(["tasks", "list"]) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in EXPERIMENTS)
    assert main(["tasks", "show", "ptd-ablation"]) == 0
    assert "preset paper" in capsys.readouterr().out


def test_spike_column_errors_scores_the_columns_at_the_legs_spikes():
    grid = [0.1, 0.2, 0.3, 0.4]
    legs_error = [[1.0, 1.0], [5.0, 5.0], [1.0, 1.0], [1.0, 1.0]]  # (theta, amplitude): bad at theta = 0.2
    runs = [
        {
            "domain": "interpolation",
            "init": init,
            "seed": 0,
            "amplitude_abs_error": error,
            "layer0_spikes": {"peak_thetas": [0.21, 0.205, 2.5]},
        }
        for init, error in (("legs", legs_error), ("ptd", np.ones((4, 2)).tolist()))
    ]
    from ssmts.tasks.ptd import spike_column_errors

    rows = {r["init"]: r for r in spike_column_errors({"grid_theta": grid, "runs": runs})}
    assert rows["legs"]["amplitude_mae_spike_columns"] == 5.0 and rows["legs"]["amplitude_mae_other_columns"] == 1.0
    assert rows["ptd"]["amplitude_mae_spike_columns"] == 1.0
