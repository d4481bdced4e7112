"""SSMForecaster(pretrained=...): zero-shot forecasts from stored weights, fine-tuning from them,
refusals, and the weights shipped with ssmts."""

from __future__ import annotations

import copy
import json
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from ssmts.estimators._persistence import _checksum
from ssmts.sktime import SSMForecaster
from ssmts.sktime._pretrained import METADATA_KEY, default_weights, read_pretrained, write_pretrained

H = 6


def _series(n=80, seed=0, name="y"):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    values = 50 + 0.3 * t + 5 * np.sin(2 * np.pi * t / 12) + rng.normal(0, 1, n)
    return pd.Series(values, index=pd.period_range("2000-01", periods=n, freq="M"), name=name)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A tiny forecaster trained on one series, and its network written as pretrained weights."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        f = SSMForecaster(context_length=16, d_model=8, d_state=8, max_epochs=2, random_state=0)
        f.fit(_series(), fh=list(range(1, H + 1)))
    path = tmp_path_factory.mktemp("weights") / "tiny.safetensors"
    write_pretrained(f, path, {"corpus": "one series, for the tests"})
    return f, str(path)


def _state(forecaster):
    return {k: v.clone() for k, v in forecaster.model_.state_dict().items()}


def test_zero_shot_forecasts_are_those_of_the_network_that_wrote_the_weights(source):
    trained, path = source
    y = _series(100)  # continues the series the source network was trained on
    zero_shot = SSMForecaster(pretrained=True, pretrained_weights=path).fit(y, fh=[1, 2, 3])
    # the oracle: the source network itself, given the new observations without training
    oracle = copy.deepcopy(trained).update(y.iloc[80:], update_params=False)
    np.testing.assert_allclose(zero_shot.predict().to_numpy(), oracle.predict().to_numpy()[:3], rtol=1e-5)
    assert zero_shot.n_iter_ == 0 and zero_shot.history_ == []
    assert zero_shot.pretrained_params_["d_model"] == 8 and zero_shot.pretrained_params_["context_length"] == 16
    assert zero_shot.context_length_ == 16 and zero_shot.horizon_ == H


def test_zero_shot_takes_no_gradient_step_in_fit_or_update(source):
    _, path = source
    f = SSMForecaster(pretrained="zero-shot", pretrained_weights=path).fit(_series(60, seed=4), fh=[1, 2])
    before = _state(f)
    _, stored = read_pretrained(path)
    assert all(torch.equal(before[k], stored[k]) for k in stored)
    f.update(_series(70, seed=4).iloc[60:], update_params=True)
    after = _state(f)
    assert all(torch.equal(before[k], after[k]) for k in before)


def _inside_counts(forecaster, y, low, high):
    """Per horizon step k = 1..H: (outcomes inside [q_low, q_high] of the forecasts from every origin
    with a full context, outcomes there), from historical_forecasts (its own contexts, one per origin)."""
    c = forecaster.context_length_
    hf = forecaster.historical_forecasts(y, cutoffs=y.index[c - 1 : len(y) - 1], alpha=[low, high])
    hf = hf[hf.index.get_level_values(1).isin(y.index)]
    position = {t: i for i, t in enumerate(y.index)}
    cutoff, time = hf.index.get_level_values(0), hf.index.get_level_values(1)
    step = np.array([position[t] - position[u] for u, t in zip(cutoff, time)])
    truth = y.loc[time].to_numpy()
    inside = (hf.iloc[:, 0].to_numpy() <= truth) & (truth <= hf.iloc[:, 1].to_numpy())
    return [(int(inside[step == k].sum()), int((step == k).sum())) for k in range(1, H + 1)]


@pytest.mark.parametrize("low, high", [(0.1, 0.9), (0.05, 0.95)])
def test_zero_shot_intervals_are_calibrated_on_every_window_of_the_series(source, low, high):
    """The network saw none of the series: its windows are all held out, and split-conformal
    calibration on them makes the central interval hold ceil((n + 1)(high - low)) of the n outcomes of
    each step (give or take the one on its boundary), whether it must widen or narrow. The oracle: the
    outcomes counted from historical_forecasts' intervals at every origin; without calibration the
    same count misses."""
    _, path = source
    y = _series(90, seed=11)
    calibrated = SSMForecaster(pretrained=True, pretrained_weights=path).fit(y, fh=list(range(1, H + 1)))
    assert calibrated.calibration_ == "conformal" and calibrated.interval_widening_.shape == (H, 7)
    wanted = [int(np.ceil((n + 1) * (high - low) - 1e-9)) for _, n in _inside_counts(calibrated, y, low, high)]
    counts = [inside for inside, _ in _inside_counts(calibrated, y, low, high)]
    assert all(k - 1 <= inside <= k + 1 for inside, k in zip(counts, wanted)), (counts, wanted)
    raw = SSMForecaster(pretrained=True, pretrained_weights=path, calibration="none").fit(y, fh=list(range(1, H + 1)))
    assert raw.calibration_ == "none" and raw.interval_widening_ is None
    raw_counts = [inside for inside, _ in _inside_counts(raw, y, low, high)]
    assert any(not k - 1 <= inside <= k + 1 for inside, k in zip(raw_counts, wanted)), raw_counts
    np.testing.assert_array_equal(calibrated.predict().to_numpy(), raw.predict().to_numpy())  # points unmoved


def test_zero_shot_on_a_short_series_says_which_intervals_it_cannot_calibrate_and_how_to_fix_it(source):
    """12 observations, context 16: the series' windows give few outcomes at the far steps (one at
    step 6), too few for the 90 % and 80 % intervals there; every window is already held out, so the
    advice is more data, not a larger validation_fraction."""
    _, path = source
    with pytest.warns(
        UserWarning,
        match=r"give 1 target\(s\) .* too few to calibrate the central 90%, 80% .* pass longer series, or more of them",
    ):
        f = SSMForecaster(pretrained=True, pretrained_weights=path).fit(_series(12, seed=2), fh=list(range(1, H + 1)))
    assert f.calibration_ == "conformal"


def test_zero_shot_refuses_calibrations_that_train_and_takes_conformal_without_early_stopping(source):
    _, path = source
    for calibration in ("holdout", "refit"):
        with pytest.raises(ValueError, match=rf"calibration='{calibration}' trains the network .* pretrained=True"):
            SSMForecaster(pretrained=True, pretrained_weights=path, calibration=calibration).fit(_series(), fh=[1])
    f = SSMForecaster(pretrained=True, pretrained_weights=path, calibration="conformal").fit(_series(), fh=[1])
    assert f.calibration_ == "conformal" and f.interval_widening_ is not None


def test_fine_tune_starts_from_the_weights_and_trains(source):
    _, path = source
    y = _series(60, seed=5)
    zero_shot = SSMForecaster(pretrained=True, pretrained_weights=path).fit(y, fh=[1, 2, 3])
    tiny_step = SSMForecaster(
        pretrained="fine-tune", pretrained_weights=path, lr=1e-12, lr_ssm=1e-12, max_epochs=1, random_state=0
    )
    tiny_step.fit(y, fh=[1, 2, 3])
    # steps of 1e-12 (also the SSM parameters' own rate) leave the weights (and forecasts) where the
    # pretrained ones are, not at a new init
    np.testing.assert_allclose(tiny_step.predict().to_numpy(), zero_shot.predict().to_numpy(), rtol=1e-5)
    tuned = SSMForecaster(pretrained="fine-tune", pretrained_weights=path, max_epochs=3, random_state=0)
    tuned.fit(y, fh=[1, 2, 3])
    assert tuned.n_iter_ == 3
    _, stored = read_pretrained(path)
    assert any(not torch.equal(tuned.model_.state_dict()[k], stored[k]) for k in stored)


def test_fine_tuning_takes_a_smaller_rate_and_budget_unless_they_are_set(source):
    _, path = source
    y = _series(60, seed=5)
    default = SSMForecaster(pretrained="fine-tune", pretrained_weights=path, max_epochs=3).fit(y, fh=[1])
    assert default._fine_tune_settings() == {"lr": 1e-4, "lr_ssm": 1e-4, "max_steps": 2000}
    assert 0 < max(r["lr"] for r in default.history_) <= 1e-4  # the learning rate after each epoch
    chosen = SSMForecaster(pretrained="fine-tune", pretrained_weights=path, lr=3e-3, max_steps=50, max_epochs=3)
    assert chosen._fine_tune_settings() == {"lr_ssm": 1e-4}
    assert max(r["lr"] for r in chosen.fit(y, fh=[1]).history_) > 1e-4
    assert SSMForecaster()._fine_tune_settings() == {}


@pytest.mark.parametrize(
    "params, fh, match",
    [
        ({"d_model": 16}, [1], r"pretrained network has d_model=8, but d_model=16"),
        ({"context_length": 24}, [1], r"pretrained network has context_length=16, but context_length=24"),
        ({"quantiles": (0.2, 0.8)}, [1], r"pretrained network has quantiles="),
        ({}, list(range(1, H + 2)), rf"forecasts up to {H} steps ahead, but max\(fh\) is {H + 1}"),
    ],
)
def test_parameters_the_weights_fix_are_refused_when_they_differ(source, params, fh, match):
    _, path = source
    with pytest.raises(ValueError, match=match):
        SSMForecaster(pretrained=True, pretrained_weights=path, **params).fit(_series(), fh=fh)


def test_parameters_equal_to_the_pretrained_ones_are_accepted(source):
    _, path = source
    f = SSMForecaster(pretrained=True, pretrained_weights=path, d_model=8, d_state=8, context_length=16)
    assert np.isfinite(f.fit(_series(), fh=[1]).predict().to_numpy()).all()


def test_multivariate_y_and_exogenous_x_are_refused(source):
    _, path = source
    y = _series()
    two = pd.concat([y.rename("a"), y.rename("b")], axis=1)
    with pytest.raises(ValueError, match=r"univariate y without X .* got 2 column\(s\) in y"):
        SSMForecaster(pretrained=True, pretrained_weights=path).fit(two, fh=[1])
    with pytest.raises(ValueError, match=r"got 1 column\(s\) in y, X"):
        SSMForecaster(pretrained=True, pretrained_weights=path).fit(y, X=y.to_frame("x"), fh=[1])


def test_a_short_series_and_a_panel_forecast_zero_shot(source):
    _, path = source
    short = _series(5, seed=6)  # shorter than the context: padded at the front
    f = SSMForecaster(pretrained=True, pretrained_weights=path).fit(short, fh=[1, 2])
    assert np.isfinite(f.predict().to_numpy()).all()
    panel = pd.concat({"a": _series(40, 1).to_frame("y"), "b": _series(30, 2).to_frame("y")}, names=["s", "t"])
    g = SSMForecaster(pretrained=True, pretrained_weights=path).fit(panel, fh=[1, 2])
    assert g.predict().shape == (4, 1)


def _rewrite(path, tmp_path, metadata=None, state=None, sign=True):
    """The file with its metadata and/or tensors edited; sign: with the checksum made anew (a forger's file,
    which only the checks of the metadata's values can refuse), else with the file's own checksum."""
    from safetensors.torch import save_file

    meta, tensors = read_pretrained(path)
    meta = metadata(meta) if metadata else meta
    tensors = state(tensors) if state else tensors
    if sign and isinstance(meta, dict):
        meta = {**meta, "sha256": _checksum(tensors, meta)}
    out = tmp_path / "changed.safetensors"
    save_file(tensors, str(out), metadata={METADATA_KEY: json.dumps(meta)} if meta is not None else None)
    return str(out)


def _params(**changes):
    return lambda m: {**m, "params": {**m["params"], **changes}}


def _flip_exponent_bit(s):
    name = next(k for k, v in s.items() if v.is_floating_point())
    flipped = s[name].clone()
    flipped.view(torch.int32).view(-1)[0] ^= 1 << 30
    return {**s, name: flipped}


@pytest.mark.parametrize(
    "metadata, state",
    [
        # the cases: each would run the network in a way it was not trained for
        (lambda m: m, lambda s: s),  # the control: the file rewritten unchanged reads
        (lambda m: {**m, "quantile_levels": m["quantile_levels"][::-1]}, None),
        (lambda m: {**m, "quantile_levels": [0.1, 0.5, 0.9]}, None),
        (_params(normalize="mean"), None),
        (lambda m: {**m, "window_location": "mean", "params": {**m["params"], "normalize": "mean"}}, None),
        (lambda m: {**m, "context_length": m["context_length"] * 2}, None),
        (_params(discretization="bilinear"), None),
        (_params(bidirectional=True), None),
        (None, _flip_exponent_bit),
        (None, lambda s: {k: v * 1.01 if v.is_floating_point() else v for k, v in s.items()}),
    ],
)
def test_any_edit_of_weights_or_metadata_breaks_the_checksum(source, tmp_path, metadata, state):
    _, path = source
    changed = _rewrite(path, tmp_path, metadata, state, sign=False)
    if metadata is not None and state is not None:
        read_pretrained(changed)
        return
    with pytest.raises(ValueError, match=r"does not match its checksum \(weights or metadata\); it was damaged"):
        SSMForecaster(pretrained=True, pretrained_weights=changed).fit(_series(), fh=[1])


def test_weights_written_without_a_checksum_are_refused_with_the_way_out(source, tmp_path):
    _, path = source
    unsigned = _rewrite(path, tmp_path, lambda m: {k: v for k, v in m.items() if k != "sha256"}, sign=False)
    with pytest.raises(ValueError, match=r"has no checksum: .* \(python -m ssmts.bench pretrain\)"):
        read_pretrained(unsigned)


@pytest.mark.parametrize(
    "metadata, state, match",
    [
        (lambda m: None, None, r"holds no pretrained forecaster"),
        (lambda m: {**m, "extra": 1}, None, r"must have exactly the fields"),
        (lambda m: {**m, "horizon": "6"}, None, r"field 'horizon' .* must be a int"),
        (lambda m: {**m, "format": "other"}, None, r"is a 'other' file"),
        (lambda m: {**m, "window_location": "mean"}, None, r"window_location='mean', which contradicts its normalize"),
        (lambda m: {**m, "params": {**m["params"], "d_model": 16}}, None, r"do not fit the network"),
        (lambda m: {**m, "params": {**m["params"], "no_such": 1}}, None, r"set 'no_such', which SSMForecaster"),
        (None, lambda s: {k: v for k, v in list(s.items())[1:]}, r"do not fit the network"),
        # sizes a small file cannot hold are refused before a network is built
        (lambda m: {**m, "params": {**m["params"], "d_model": 10**9}}, None, r"d_model=1000000000 cannot describe"),
        (lambda m: {**m, "horizon": 10**9}, None, r"horizon=1000000000 cannot describe"),
        # quantile levels that would report one quantile as another, even in a file signed anew
        (lambda m: {**m, "quantile_levels": m["quantile_levels"][::-1]}, None, r"must increase strictly and hold 0.5"),
        (lambda m: {**m, "quantile_levels": m["quantile_levels"][:1] * 2}, None, r"must increase strictly"),
        (lambda m: {**m, "quantile_levels": [0.1, 0.9]}, None, r"must increase strictly and hold 0.5"),
        (lambda m: {**m, "quantile_levels": [0.1, 0.5, 1.5]}, None, r"holds 1.5, not a number in \(0, 1\)"),
        (lambda m: {**m, "quantile_levels": ["0.5"]}, None, r"holds '0.5', not a number in \(0, 1\)"),
        (_params(quantiles=[0.2, 0.8]), None, r"are not those of its quantiles parameter \(\[0.2, 0.5, 0.8\]\)"),
        (
            None,
            lambda s: {k: v.fill_(float("nan")) if v.is_floating_point() else v for k, v in s.items()},
            r"holds NaN or infinite values; the file is damaged",
        ),  # fmt: skip
    ],
)
def test_a_damaged_weights_file_gets_a_clear_error(source, tmp_path, metadata, state, match):
    _, path = source
    changed = _rewrite(path, tmp_path, metadata, state)
    with pytest.raises(ValueError, match=match):
        SSMForecaster(pretrained=True, pretrained_weights=changed).fit(_series(), fh=[1])


def test_weights_of_earlier_versions_name_normalize_instance_norm(source, tmp_path):
    """Weights written before the rename hold instance_norm: read as normalize, and still fixed by them."""
    _, path = source

    def old_name(m):
        params = dict(m["params"])
        params["instance_norm"] = params.pop("normalize")
        return {**m, "params": params}

    changed = _rewrite(path, tmp_path, old_name)
    metadata, _ = read_pretrained(changed)
    assert metadata["params"]["normalize"] is True and "instance_norm" not in metadata["params"]
    f = SSMForecaster(pretrained=True, pretrained_weights=changed).fit(_series(), fh=[1])
    assert f.window_location_ == "last" and f.pretrained_params_["normalize"] is True
    with pytest.raises(ValueError, match="pretrained network has normalize=True, but normalize='mean'"):
        SSMForecaster(pretrained=True, pretrained_weights=changed, normalize="mean").fit(_series(), fh=[1])
    with pytest.warns(FutureWarning), pytest.raises(ValueError, match="has normalize=True, but normalize='mean'"):
        SSMForecaster(pretrained=True, pretrained_weights=changed, instance_norm="mean").fit(_series(), fh=[1])
    both = _rewrite(changed, tmp_path, lambda m: {**m, "params": {**m["params"], "instance_norm": "mean"}})
    with pytest.raises(ValueError, match="sets both 'instance_norm' and its new name 'normalize'"):
        read_pretrained(both)


def test_a_missing_or_foreign_file_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="no pretrained forecaster weights"):
        SSMForecaster(pretrained=True, pretrained_weights=str(tmp_path / "none.safetensors")).fit(_series(), fh=[1])
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x00" * 64)
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        SSMForecaster(pretrained=True, pretrained_weights=str(junk)).fit(_series(), fh=[1])


# Clean seasonal series with a trend, y = 50 + 0.3 t + 5 sin(2 pi t / period + phase), 100 observations
# and 12 steps to forecast: a network that learned to forecast continues both the cycle and the trend.
SEASONAL_CASES = [(period, phase) for period in (12, 7) for phase in (0, 1, 2, 3)]


def _seasonal_case(period, phase, n=100, h=12):
    t = np.arange(n + h)
    values = 50 + 0.3 * t + 5 * np.sin(2 * np.pi * t / period + phase)
    return pd.Series(values[:n], index=pd.period_range("2000-01", periods=n, freq="M")), values[n:]


def _seasonal_errors(make) -> np.ndarray:
    """(case, 3): mean absolute errors of the forecaster make(period) and of the naive (last value)
    and seasonal naive forecasts, over SEASONAL_CASES."""
    errors = []
    for period, phase in SEASONAL_CASES:
        y, truth = _seasonal_case(period, phase)
        forecast = make(period).fit(y, fh=list(range(1, len(truth) + 1))).predict().to_numpy().ravel()
        seasonal_naive = np.resize(y.to_numpy()[-period:], len(truth))
        errors.append(
            [np.abs(forecast - truth).mean(), np.abs(y.iloc[-1] - truth).mean(), np.abs(seasonal_naive - truth).mean()]
        )
    return np.asarray(errors)


def _forecasts_like_a_trained_network(errors: np.ndarray) -> bool:
    """On every case, less than three quarters of the error of the naive and of the seasonal naive
    forecast (which misses the trend by 0.3 x period a step), and within a quarter of the cycle's
    amplitude (5) on average. Measured with the shipped weights (three members): at most 0.49 and 0.56
    of theirs, mean error 0.94 (its first member alone: 0.31, 0.35, 0.72; the other two alone up to
    0.68, 0.79, 1.52); random weights: 2.5 to 4.5 times the naive error."""
    model, naive, seasonal_naive = errors.T
    return bool((model < 0.75 * naive).all() and (model < 0.75 * seasonal_naive).all() and model.mean() < 1.25)


def test_the_shipped_weights_forecast_zero_shot():
    metadata, _ = read_pretrained()
    assert default_weights().stat().st_size < 5e6
    assert metadata["training"]["command"].startswith("python -m ssmts.bench pretrain")
    f = SSMForecaster(pretrained=True).fit(_series(100, seed=7), fh=list(range(1, 13)))
    assert f.n_iter_ == 0 and f.history_ == [] and np.isfinite(f.predict().to_numpy()).all()
    errors = _seasonal_errors(lambda period: SSMForecaster(pretrained=True))
    assert _forecasts_like_a_trained_network(errors), errors


def _random_weights(monkeypatch):
    """read_pretrained giving the shipped file's metadata with weights drawn at random (each tensor
    with its own mean and spread), so that only the training is missing."""
    import ssmts.sktime._pretrained as pretrained

    read = pretrained.read_pretrained

    def randomized(path=None):
        metadata, state = read(path)
        generator = torch.Generator().manual_seed(0)
        return metadata, {
            k: torch.randn(v.shape, generator=generator) * v.std() + v.mean()
            if v.is_floating_point() and v.numel() > 1
            else v
            for k, v in state.items()
        }

    monkeypatch.setattr(pretrained, "read_pretrained", randomized)
    return lambda period: SSMForecaster(pretrained=True)


@pytest.mark.parametrize(
    "forecaster",
    [
        pytest.param(_random_weights, id="random-weights"),
        pytest.param(lambda mp: lambda period: _naive("last"), id="naive"),
        pytest.param(lambda mp: lambda period: _naive("drift"), id="drift"),
        pytest.param(lambda mp: lambda period: _naive("last", sp=period), id="seasonal-naive"),
    ],
)
def test_the_zero_shot_check_refuses_what_is_not_a_trained_network(monkeypatch, forecaster):
    """The check of the shipped weights above fails for random weights and for the naive forecasts."""
    assert not _forecasts_like_a_trained_network(_seasonal_errors(forecaster(monkeypatch)))


def _naive(strategy, sp=1):
    from sktime.forecasting.naive import NaiveForecaster

    return NaiveForecaster(strategy=strategy, sp=sp)
