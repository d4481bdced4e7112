"""SSMForecaster(combine="validation"): the network combined per series with AutoETS, Theta, seasonal
naive and drift (the classical forecasts; combine_components chooses among them), the weights set by each
series' own last windows.

    fit:  each series' last k windows of max(fh) steps held out (k = combine_windows, fewer for a short
          series); a copy of the network trained on the data before them (every series cut before its
          own first held-out window: purged), forecasting every held-out window from its origin with
          those weights; the classical forecasts refitted at each origin on the data up to it
       -> validation_errors_: the MAE of each component over the held-out windows, per series
       -> per-series weights by combine_rule (a classical forecast that could not be validated on a series:
          no weight there); a series too short to hold out a window takes the weights of the pooled (scaled)
          errors of the series validated in full; equal weights (calibrate: the network alone) when none is.
          network_first: the network alone unless the series' held-out steps hold strong evidence against
          it (a sign test; then the inverse-error weights); the median of all where no series of
          the fit holds out enough steps for that test ever to tell (no evidence for the network either).
          network_ets (the default): the same with the mean of the network and AutoETS in the network's place
       -> conformal widening of the combined intervals on the held-out windows (pooled over the series,
          steps and windows, in units of each interval's width; only ever wider), cross-fitted: each
          window is combined with weights chosen without it (inverse_error and select: those of the
          series' other windows, so a series needs two windows to calibrate them; network_first and
          network_ets: their rule on the other windows; median and calibrate choose nothing on the windows)
       -> the network as trained on all the data (the forecaster's own), the classical forecasts refitted
          on it and their forecasts of every step predict may ask (1..horizon_) stored; a classical model
          that cannot fit or forecast a series is left out of it, its weight spread over the others
    predict: per series, the weighted point forecasts; the quantile grids averaged with the same weights
    (quantile averaging around each component's point forecast), widened, interpolated at alpha.
    update: the classical models take the new observations; one that cannot is left out from then on.
    Whatever is left out or not validated is warned about; combination_weights_ always holds the
    weights predict uses.

The forecaster's own network state (model_, the stored tails) is the network's as with combine="none";
this module adds the classical models and the weights.
"""

from __future__ import annotations

import copy
import inspect
import math
import warnings
from contextlib import contextmanager

import numpy as np
import pandas as pd

from .._warnings import caller_stacklevel
from ._export import ForecasterExportMixin
from ._strategies import (
    conformal_rank,
    fewest_points_to_calibrate,
    interpolate_quantiles,
    quantile_probabilities,
    symmetric_pairs,
    uncalibrated_coverages,
)
from ._windows import TooFewWindowsError, key_name

CLASSICAL = ("ets", "theta", "naive", "drift")  # the classical forecasts combine_components chooses from
COMPONENTS = ("network", *CLASSICAL)
LABELS = {"network": "the network", "ets": "AutoETS", "theta": "Theta", "naive": "seasonal naive", "drift": "drift"}
RULES = ("network_ets", "inverse_error", "select", "median", "calibrate", "network_first")
# the rules that keep a base forecast unless the held-out steps hold strong evidence against it
EVIDENCE_RULES = ("network_first", "network_ets")
# network_first and network_ets leave their base only on a one-sided sign test at this level,
# Bonferroni-corrected over the classical forecasts they compare the base with
EVIDENCE = 0.05
MIN_PREFIX = 8  # observations before the first held-out window (or a full horizon, if longer)
SIMULATIONS = 500  # sample paths of an ETS model whose intervals sktime cannot compute
# How statsmodels (through sktime) refuses a series it cannot model: no converged fit, too few
# observations, a singular system (numpy's LinAlgError is a ValueError), an overflow. Anything else
# is a bug and propagates.
CLASSICAL_FAILURES = (ValueError, ArithmeticError)
STATSMODELS = ("ets", "theta")  # the components on statsmodels, which takes no missing values


# ---------------------------------------------------------------------------- classical components
def classical_models(season: int, y: pd.DataFrame) -> dict:
    """Unfitted AutoETS, Theta, seasonal naive and drift for one series, as ssmts.bench builds its
    baselines: AutoETS and Theta seasonal only with two seasons of data (Theta's multiplicative
    deseasonalization also needs positive values), seasonal naive with one."""
    from sktime.forecasting.ets import AutoETS
    from sktime.forecasting.naive import NaiveForecaster
    from sktime.forecasting.theta import ThetaForecaster

    seasonal = season > 1 and len(y) >= 2 * season
    positive = bool((y.to_numpy() > 0).all())
    return {
        "ets": AutoETS(auto=True, sp=season if seasonal else 1, n_jobs=1),
        "theta": ThetaForecaster(sp=season if seasonal and positive else 1, deseasonalize=seasonal and positive),
        "naive": NaiveForecaster(strategy="last", sp=season if len(y) >= season else 1),
        "drift": NaiveForecaster(strategy="drift"),
    }


def fit_classical(season: int, y: pd.DataFrame, names: tuple = CLASSICAL) -> tuple[dict, dict]:
    """({name: fitted sktime forecaster, or None where it cannot fit this series}, {name: why not}) of the
    classical forecasts named."""
    models = dict.fromkeys(names)
    if len(y) < 3:
        return models, dict.fromkeys(models, f"it has {len(y)} observation(s), fewer than 3")
    missing = bool(y.isna().to_numpy().any())
    failures = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # statsmodels' convergence chatter, sktime's FutureWarnings
        for name, model in classical_models(season, y).items():
            if name not in models:
                continue
            if missing and name in STATSMODELS:
                failures[name] = "it has missing values, which statsmodels does not take"
                continue
            try:
                models[name] = model.fit(y)
            except CLASSICAL_FAILURES as error:
                failures[name] = _reason(error)
    return models, failures


def _reason(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"


def _simulated_quantiles(model, fh, levels: np.ndarray, n_columns: int, seed: int) -> np.ndarray | None:
    """(k, C, Q) quantiles of an AutoETS model from simulated paths (sktime's interval code fails for
    the ETS models that need simulation with some statsmodels versions); None if not possible."""
    inner = getattr(model, "forecasters_", None)
    fitted = [inner.iloc[0, j] for j in range(n_columns)] if inner is not None else [model]
    steps = np.asarray(fh.to_relative(model.cutoff).to_pandas(), dtype=np.int64)
    out = []
    for f in fitted:
        results = getattr(f, "_fitted_forecaster", None)
        if results is None or not hasattr(results, "simulate"):
            return None
        paths = np.asarray(
            results.simulate(int(steps.max()), anchor="end", repetitions=SIMULATIONS, **_seeded(results, seed)),
            dtype=np.float64,
        ).reshape(int(steps.max()), -1)
        out.append(np.quantile(paths[steps - 1], levels, axis=1).T)  # (k, Q)
    return np.stack(out, axis=1)


def _seeded(results, seed: int) -> dict:
    """The keyword that seeds ETSResults.simulate: statsmodels 0.15 calls it rng, 0.14 random_state."""
    name = "rng" if "rng" in inspect.signature(results.simulate).parameters else "random_state"
    return {name: np.random.default_rng(seed)}


def classical_forecast(model, fh, levels: np.ndarray, n_columns: int, quantiles: bool, seed: int):
    """(point (k, C), grid (k, C, Q) or None) of a fitted classical model at fh; the grid None where its
    quantiles cannot be computed (the combination then lends it the network's spread). Raises if the
    point forecast fails. The model is not changed (sktime's predict stores fh: a copy predicts)."""
    model = copy.copy(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        point = np.asarray(model.predict(fh=fh), dtype=np.float64).reshape(len(fh), n_columns)
        if not np.isfinite(point).all():
            raise FloatingPointError("non-finite classical forecast")
        if not quantiles:
            return point, None
        try:
            grid = np.asarray(model.predict_quantiles(fh=fh, alpha=list(levels)), dtype=np.float64)
        except (TypeError, *CLASSICAL_FAILURES):  # sktime's ETS intervals: a TypeError with statsmodels >= 0.14
            try:
                grid = _simulated_quantiles(model, fh, levels, n_columns, seed)
            except CLASSICAL_FAILURES:
                grid = None
        else:
            grid = grid.reshape(len(fh), n_columns, len(levels))
    if grid is not None and not np.isfinite(grid).all():
        grid = None
    return point, None if grid is None else np.sort(grid, axis=-1)


# ---------------------------------------------------------------------------- weights and grids
def rule_weights(errors: np.ndarray, rule: str) -> np.ndarray | None:
    """Weights (M,) of the components from their errors (M,) (NaN: not available); None for 'median';
    the network alone for 'calibrate' (the windows then only calibrate its intervals)."""
    if rule == "median":
        return None
    if rule == "calibrate":
        return np.eye(len(errors))[0]
    available = np.isfinite(errors)
    w = np.zeros(len(errors))
    if not available.any():
        return w
    e = errors[available]
    if rule == "select":
        w[np.flatnonzero(available)[np.argmin(e)]] = 1.0
        return w
    # inverse_error: w ~ 1 / error; an exact component (error 0) takes all of the weight
    exact = e <= 1e-12 * max(float(e.max()), 1e-300)
    inverse = exact.astype(float) if exact.any() else 1.0 / e
    w[available] = inverse / inverse.sum()
    return w


def evidence_weights(absolute: np.ndarray, base_absolute: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Weights (C, M) from held-out absolute errors (k, H, C, M) of the components and (k, H, C) of a base
    forecast whose weights are base (C, M): the base, unless a classical forecast has the lower error at
    significantly many of the held-out steps (a one-sided sign test, ties left out, at EVIDENCE / (M - 1));
    then the inverse-error weights of all."""
    from scipy.stats import binomtest

    C, M = absolute.shape[2:]
    errors = mean_errors(absolute)
    out = np.array(base, dtype=np.float64)
    for c in range(C):
        reference = base_absolute[:, :, c].ravel()
        for m in range(1, M):
            other = absolute[:, :, c, m].ravel()
            paired = np.isfinite(reference) & np.isfinite(other) & (reference != other)
            wins, n = int((other[paired] < reference[paired]).sum()), int(paired.sum())
            if n and binomtest(wins, n, alternative="greater").pvalue < EVIDENCE / (M - 1):
                out[c] = rule_weights(errors[c], "inverse_error")
                break
    return out


def network_first_weights(absolute: np.ndarray) -> np.ndarray:
    """Weights (C, M) of 'network_first' from held-out absolute errors (k, H, C, M): the network alone,
    unless the held-out steps hold strong evidence against it (evidence_weights)."""
    C, M = absolute.shape[2:]
    return evidence_weights(absolute, absolute[..., 0], np.tile(np.eye(M)[0], (C, 1)))


def network_ets_base(ets_validated: np.ndarray, components: tuple = COMPONENTS) -> np.ndarray:
    """Base weights (C, M) of 'network_ets' over the components (M,): the network and AutoETS half each in
    the columns where AutoETS was validated (C,) bool, the network alone in the others."""
    M = len(components)
    pair = np.zeros(M)
    pair[[0, components.index("ets")]] = 0.5
    return np.where(np.asarray(ets_validated)[:, None], pair, np.eye(M)[0])


def network_ets_weights(signed: np.ndarray, ets_validated: np.ndarray, components: tuple = COMPONENTS) -> np.ndarray:
    """Weights (C, M) of 'network_ets' from held-out signed errors (forecast - outcome; k, H, C, M): the
    mean of the network and AutoETS (network_ets_base), unless the held-out steps hold strong evidence
    against that mean (evidence_weights)."""
    base = network_ets_base(ets_validated, components)
    base_absolute = np.abs(np.einsum("khcm,cm->khc", np.nan_to_num(signed), base))
    base_absolute[~np.isfinite(signed[..., 0])] = np.nan  # an outcome not observed
    return evidence_weights(np.abs(signed), base_absolute, base)


def steps_to_tell(n_components: int) -> int:
    """The fewest held-out steps at which network_first's sign test can leave the network: n steps that all
    favour a classical forecast have probability 0.5 ** n under the test's coin, which must fall below
    EVIDENCE / (M - 1) (7 steps with five components: one window of 6 steps can never tell)."""
    return math.floor(math.log2((n_components - 1) / EVIDENCE)) + 1


def held_out_steps(absolute: np.ndarray) -> int:
    """The most observed held-out steps of a series' columns, from its absolute errors (k, H, C, M)."""
    return int(np.isfinite(absolute[..., 0]).sum((0, 1)).max()) if absolute.size else 0


def can_tell(absolute: np.ndarray) -> bool:
    """Whether a series' held-out absolute errors (k, H, C, M) hold enough steps for network_first's sign
    test to leave the network at all (steps_to_tell)."""
    return held_out_steps(absolute) >= steps_to_tell(absolute.shape[-1])


def any_can_tell(absolute: dict) -> bool:
    """Whether some series of a fit ({key: held-out absolute errors (k, H, C, M)}) can tell (can_tell)."""
    return any(can_tell(errors) for errors in absolute.values())


def series_weights(
    rule: str, signed: dict, errors: dict, scales: dict, n_targets: int, components: tuple = COMPONENTS
) -> tuple[dict, np.ndarray | None]:
    """({key: (C, M) weights, or None for 'median'}, the pooled weights) of a fit's series, from the
    held-out signed errors (forecast - outcome) of those validated {key: (k, H, C, M)}, every series' MAEs
    {key: (C, M)} (NaN where not validated) and MASE scales {key: (C,)}: each validated series and column by
    its own errors (a component it could not validate: no weight); the others by the errors of the series
    validated in full, pooled in units of their MASE scales (equal weights when there are none; the network
    alone for 'calibrate').
    'network_first' and 'network_ets': by each series' own steps (network_first_weights,
    network_ets_weights), their base (the network alone; the mean of the network and AutoETS) for the others
    (no evidence against it), or, where no series' steps can tell (can_tell: a lone short series), the
    median for all. The pooled weights also serve series first seen in update. components (M,): the
    network's and the classical forecasts' names, in the order of the arrays' last axis."""
    M = len(components)
    absolute = {key: np.abs(values) for key, values in signed.items()}
    if rule == "median" or (rule in EVIDENCE_RULES and not any_can_tell(absolute)):
        return dict.fromkeys(errors), None
    if rule in EVIDENCE_RULES:
        alone = (
            np.tile(np.eye(M)[0], (n_targets, 1))
            if rule == "network_first"
            else network_ets_base([True] * n_targets, components)
        )
        weights = {
            key: _evidence_rule_weights(rule, signed[key], signed[key], components) if key in signed else alone
            for key in errors
        }
        return weights, alone[0]
    rows = [e / scales[key][:, None] for key, e in errors.items()]
    scaled = np.concatenate(rows) if rows else np.zeros((0, M))
    scaled = scaled[np.isfinite(scaled).all(1)]
    if rule == "calibrate":
        pooled = np.eye(M)[0]
    else:
        pooled = rule_weights(scaled.mean(0), rule) if len(scaled) else np.full(M, 1 / M)
    weights = {
        key: np.stack([rule_weights(row, rule) if np.isfinite(row).any() else pooled for row in e])
        for key, e in errors.items()
    }
    return weights, pooled


def ets_validated(signed: np.ndarray, components: tuple = COMPONENTS) -> np.ndarray:
    """(C,) bool: the columns of a series whose held-out signed errors (k, H, C, M) hold AutoETS's."""
    return np.isfinite(signed[..., components.index("ets")]).any((0, 1))


def _evidence_rule_weights(rule: str, signed: np.ndarray, every_window: np.ndarray, components: tuple) -> np.ndarray:
    """(C, M) weights of 'network_first' or 'network_ets' from a series' held-out signed errors (k, H, C, M);
    every_window: its signed errors on all its windows (signed, or more), whose columns with AutoETS validated
    (ets_validated) start network_ets from the mean of the network and AutoETS."""
    if rule == "network_first":
        return network_first_weights(np.abs(signed))
    return network_ets_weights(signed, ets_validated(every_window, components), components)


def renormalized(weights: np.ndarray, present: np.ndarray) -> np.ndarray:
    """weights (M,) over the present components (M,) bool, summing to 1 (the network alone if no
    weighted component is present)."""
    w = np.where(present, np.nan_to_num(weights, nan=0.0), 0.0)
    if w.sum() <= 0:
        w = np.eye(len(w))[0]
    return w / w.sum()


def _point_weights(points: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """weights (M,) renormalized over the components with a forecast in points (M, ...)."""
    return renormalized(weights, np.array([np.isfinite(points[m]).all() for m in range(len(points))]))


def combine_point(points: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """points (M, ...) -> the combined point forecast (weights (M,), or None: the median of those present)."""
    if weights is None:
        present = [m for m in range(len(points)) if np.isfinite(points[m]).all()]
        return np.median(points[present], axis=0)
    w = _point_weights(points, weights)
    return sum(w[m] * points[m] for m in range(len(points)) if w[m] > 0)


def combine_grid(points: np.ndarray, grids: list, weights: np.ndarray | None, median: int):
    """points (M, ...), grids: M arrays (..., Q) or None (that component lends the first's spread: the
    network's), weights (M,) (None: the median of the components) -> (point (...), grid (..., Q)).
    Components whose weight is NaN or whose point is NaN are left out; each grid is centred on its
    component's point forecast."""
    M = len(points)
    spread0 = grids[0] - grids[0][..., median : median + 1]
    centred = []
    for m in range(M):
        spread = spread0 if grids[m] is None else grids[m] - grids[m][..., median : median + 1]
        centred.append(points[m][..., None] + spread)
    present = np.array([np.isfinite(points[m]).all() for m in range(M)])
    if weights is None:
        keep = np.flatnonzero(present)
        point = np.median(np.stack([points[m] for m in keep]), axis=0)
        grid = np.median(np.stack([centred[m] for m in keep]), axis=0)
        return point, np.sort(grid, axis=-1)
    w = _point_weights(points, weights)
    point = sum(w[m] * points[m] for m in range(M) if w[m] > 0)
    grid = sum(w[m] * centred[m] for m in range(M) if w[m] > 0)
    return point, np.sort(grid, axis=-1)


def widen_grid(grid: np.ndarray, factors: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """grid (..., Q) sorted at levels (Q,), factors (Q,): each symmetric pair of levels moved apart by
    factor x its interval's width (on either side); sorted again."""
    out = grid.copy()
    for low, high in symmetric_pairs(levels):
        if factors[low] > 0:
            width = grid[..., high] - grid[..., low]
            out[..., low] = grid[..., low] - factors[low] * width
            out[..., high] = grid[..., high] + factors[low] * width
    return np.sort(out, axis=-1)


def conformal_factors(grids: list, truths: list, levels: np.ndarray) -> np.ndarray:
    """Conformal widening (Q,) of combined grids on held-out windows: grids [(n_i, Q)], truths
    [(n_i,)] pooled; for each symmetric pair (l, 1 - l) the conformal quantile of the scores
    max(q_l - y, y - q_(1-l)) / (q_(1-l) - q_l) (scale-free, so that series of any size pool), kept
    only where positive (the intervals under-cover: they are widened, never narrowed); 0 where there are
    too few points to calibrate the pair ((n + 1)(1 - 2l) > n)."""
    Q = len(levels)
    factors = np.zeros(Q)
    if not grids:
        return factors
    grid, truth = np.concatenate(grids), np.concatenate(truths)
    observed = np.isfinite(truth)
    grid, truth = grid[observed], truth[observed]
    for low, high in symmetric_pairs(levels):
        lo, hi = grid[:, low], grid[:, high]
        scale = np.maximum(np.abs(lo) + np.abs(hi), 1e-12) * 1e-9
        score = np.sort(np.maximum(lo - truth, truth - hi) / np.maximum(hi - lo, scale))
        rank = conformal_rank(len(score), 1 - 2 * levels[low])
        if rank is not None:
            factors[low] = factors[high] = max(0.0, float(score[rank - 1]))
    return factors


def mean_errors(absolute: np.ndarray) -> np.ndarray:
    """Absolute errors (k, H, C, M) -> the MAE (C, M) over the observed steps (NaN where there are none:
    a component not validated, or no window)."""
    observed = np.isfinite(absolute)
    count = observed.sum((0, 1))
    return np.where(count > 0, np.where(observed, absolute, 0.0).sum((0, 1)) / np.maximum(count, 1), np.nan)


def _failures(failed: dict) -> str:
    """{(key, name): why} -> "AutoETS, Theta and drift of y: why; ..." (the first five series and reasons)."""
    grouped: dict = {}
    for (key, name), why in failed.items():
        grouped.setdefault((key, why), []).append(LABELS[name])
    items = [
        f"{', '.join(names[:-1])}{' and ' if len(names) > 1 else ''}{names[-1]} of {key_name(key)}: {why}"
        for (key, why), names in grouped.items()
    ]
    return "; ".join(items[:5]) + (f"; and {len(items) - 5} more" if len(items) > 5 else "")


def _coverages(coverages: list[float]) -> str:
    """[0.9, 0.8] -> "90 % and 80 %"."""
    names = [f"{c:.0%}".replace("%", " %") for c in coverages]
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def _warn(message: str) -> None:
    warnings.warn(f"combine='validation': {message}", UserWarning, stacklevel=caller_stacklevel())


def _naive_scale(values: np.ndarray, season: int) -> float:
    """In-sample MAE of the seasonal naive forecast (the MASE scale) of one column's history."""
    values = values[np.isfinite(values)]
    lag = season if len(values) > season else 1
    if len(values) <= lag:
        return float("nan")
    scale = float(np.mean(np.abs(values[lag:] - values[:-lag])))
    return scale if scale > 0 else float("nan")


def _join(frames: dict, names: list) -> pd.DataFrame:
    """{key: frame indexed by time} -> one frame (a MultiIndex with the keys' levels for a panel)."""
    if list(frames) == [()]:
        return frames[()]
    return pd.concat(list(frames.values()), keys=list(frames), names=names)


# ---------------------------------------------------------------------------- the mixin
def combination_variants(model) -> list[str]:
    """The forecasts one fit of an SSMForecaster with combine="validation" can give (`_as_variant`): the
    network alone and every rule of RULES it can weigh by (what `python -m ssmts.bench forecast` compares);
    none otherwise."""
    if getattr(model, "combine", "none") == "none" or not getattr(model, "_combining", False):
        return []
    return ["network", *model._combine_rules]


class CombinationMixin:
    """fit, predict and update of SSMForecaster(combine="validation"); see the module docstring."""

    @property
    def _combined_components(self) -> tuple[str, ...]:
        """The network and the classical forecasts of combine_components, in COMPONENTS' order (the order of
        every (..., M) array here and of the columns of validation_errors_ and combination_weights_)."""
        chosen = set(self.combine_components)
        return ("network", *(name for name in CLASSICAL if name in chosen))

    @property
    def _combine_rules(self) -> tuple[str, ...]:
        """The rules of RULES this fit can weigh by: network_ets only with AutoETS among the components."""
        return tuple(rule for rule in RULES if rule != "network_ets" or "ets" in self._combined_components)

    @property
    def _combining(self) -> bool:
        if getattr(self, "_variant", None) == "network":
            return False
        return getattr(self, "_classical", None) is not None

    @contextmanager
    def _as_variant(self, variant: str):
        """Forecast, for the time of the block, as the network alone ("network") or by another rule of
        RULES, from this fit (what `python -m ssmts.bench forecast` compares): nothing is refitted."""
        if variant not in ("network", *self._combine_rules):
            raise ValueError(f"unknown variant {variant!r}; choose 'network' or one of {self._combine_rules}")
        self._variant = variant
        try:
            yield self
        finally:
            del self._variant

    def _validation_clone(self):
        """The network's parameters, combine="none", a fixed seed (this fit's), the context fixed at
        context_length_ (so that the network validated has the full fit's shape)."""
        params = self.get_params(deep=False)
        params.update(
            combine="none",
            calibration="none",  # the combination widens the intervals on its own windows
            random_state=int(self._seed_),
            callbacks=None,
            sp=int(self.sp_),
        )
        if self.pretrained is False:
            params["context_length"] = int(self.context_length_)
        return type(self)(**params)

    def _fit_combination(self, y: pd.DataFrame, X: pd.DataFrame | None, horizon: int) -> None:
        """Validation, weights, calibration and the classical models on all of y (see the module doc)."""
        try:
            import statsmodels  # noqa: F401
        except ImportError:  # pragma: no cover - statsmodels comes with the test and notebook extras
            raise ImportError(
                "combine='validation' fits AutoETS and Theta (sktime's, on statsmodels): pip install statsmodels"
            ) from None
        H, C, levels = int(horizon), self.n_targets_, self.quantile_levels_
        components = self._combined_components
        median = int(np.flatnonzero(np.isclose(levels, 0.5))[0])
        parts = self._split_xy(y, X)
        min_prefix = max(MIN_PREFIX, H)
        plan = {key: int(max(0, min(self.combine_windows, (len(yp) - min_prefix) // H))) for key, yp, _ in parts}
        validated = [(key, yp, xp) for key, yp, xp in parts if plan[key] > 0]
        network, network_failure = self._validate_network(validated, plan, H) if validated else ({}, None)
        # per series: truth (k, H, C); per component: points (k, H, C) and grids (k, H, C, Q) or None
        validation, unvalidated = {}, {}
        for key, yp, _ in validated:
            if key in network:
                k, n = plan[key], len(yp)
                truth = np.stack([yp.to_numpy()[n - j * H : n - (j - 1) * H] for j in range(k, 0, -1)])
                classical, failures = self._validate_classical(yp, k, H)
                validation[key] = (truth, {"network": network[key], **classical})
                unvalidated.update({(key, name): why for name, why in failures.items()})
        self._validation = validation
        self._validation_plan = {key: plan[key] if key in validation else 0 for key, _, _ in parts}

        # errors per series and column: MAE over the held-out windows; scales for pooling
        self._signed = {  # (k, H, C, M): forecast - outcome
            key: np.stack(
                [
                    comps[name][0] - truth if comps[name] is not None else np.full(truth.shape, np.nan)
                    for name in components
                ],
                axis=-1,
            )
            for key, (truth, comps) in validation.items()
        }
        self._absolute = {key: np.abs(signed) for key, signed in self._signed.items()}
        self._errors, self._scales = {}, {}
        for key, yp, _ in parts:
            self._errors[key] = (
                mean_errors(self._absolute[key]) if key in validation else np.full((C, len(components)), np.nan)
            )
            prefix = yp.to_numpy()[: len(yp) - self._validation_plan[key] * H]
            self._scales[key] = np.array([_naive_scale(prefix[:, c], int(self.sp_)) for c in range(C)])
        self._weights, self._pooled, self._factors, calibration = {}, {}, {}, {}
        for rule in self._combine_rules:
            self._weights[rule], self._pooled[rule] = self._rule_weights(rule)
            factors, points = self._calibrate(rule, median)
            calibration[rule] = (factors is not None, points)
            self._factors[rule] = np.zeros(len(levels)) if factors is None else factors

        # the classical models on all the data, and their forecasts of every step predict may ask
        self._classical, self._classical_cache, left_out = {}, {}, {}
        for key, yp, _ in parts:
            models, failures = fit_classical(int(self.sp_), yp, components[1:])
            self._classical_cache[key], more = self._classical_forecasts(models)
            self._classical[key] = models
            left_out.update({(key, name): why for name, why in {**failures, **more}.items()})
        self._set_combination_attributes()

        calibrated, points = calibration[self.combine_rule]
        self._report_fit(parts, plan, H, network_failure, calibrated, points, unvalidated, left_out)

    def _report_fit(self, parts, plan, H, network_failure, calibrated, points, unvalidated, left_out) -> None:
        """Warnings: what fit could not validate, calibrate or fit, and what the forecasts do instead.
        calibrated, points: whether the chosen rule's intervals could be calibrated, and on how many
        held-out forecast points."""
        validation, min_prefix = self._validation, max(MIN_PREFIX, H)
        can = any_can_tell(self._absolute)
        M = len(self._combined_components)
        unweighted = {
            "calibrate": "the network alone",
            "network_first": "the network alone" if can else f"the median of the {M} forecasts",
            "network_ets": "the mean of the network and AutoETS" if can else f"the median of the {M} forecasts",
            "median": "the median",
        }
        if not validation:
            longest = max(len(yp) for _, yp, _ in parts)
            why = (
                f"the network could not be trained on the data before the held-out windows ({network_failure})"
                if network_failure
                else f"no series is long enough to hold out a window of max(fh)={H} steps (that needs {min_prefix + H} "
                f"observations, max(8, max(fh)) of them before it; the longest has {longest})"
            )
            how = unweighted.get(self.combine_rule, "equal weights")
            _warn(f"{why}: nothing was validated, so the series are forecast with {how}; the intervals are not widened")
        else:
            short = [f"{key_name(key)} ({len(yp)} observations)" for key, yp, _ in parts if plan[key] == 0]
            if short:
                _warn(
                    f"{len(short)} of the {len(parts)} series are too short to hold out a window of max(fh)={H} steps "
                    f"(that needs {min_prefix + H} observations): {', '.join(short[:5])}"
                    f"{f' and {len(short) - 5} more' if len(short) > 5 else ''}; they are forecast with "
                    + unweighted.get(
                        self.combine_rule,
                        "the weights of the other series' errors, pooled in units of their MASE scales",
                    )
                )
            if self.combine_rule in EVIDENCE_RULES and not can:
                most = max(held_out_steps(absolute) for absolute in self._absolute.values())
                base = "the network" if self.combine_rule == "network_first" else "the mean of the network and AutoETS"
                _warn(
                    f"no series holds out the {steps_to_tell(M)} steps {self.combine_rule}'s sign test "
                    f"needs to tell {base} from a classical forecast (the most: {most}), so there is no evidence for "
                    f"{base} either: the series are forecast with the median of the {M} forecasts; set "
                    "combine_windows higher or pass longer series"
                )
            too_few = uncalibrated_coverages(points, self.quantile_levels_) if calibrated else []
            if too_few:
                _warn(
                    f"the held-out windows give {points} forecast point(s) to calibrate the intervals on, too few "
                    f"for the {_coverages(too_few)} interval(s) (conformal calibration of a central p interval needs "
                    f"at least {fewest_points_to_calibrate(max(too_few))} points for p = {max(too_few):.0%}): those "
                    "are not widened; set combine_windows higher or pass longer series"
                )
            if not calibrated:
                _warn(
                    f"combine_rule={self.combine_rule!r} chooses its weights on the held-out windows, so a window "
                    "calibrates the intervals only combined with the weights of its series' other windows, and no "
                    "series holds out two: the intervals are not widened; set combine_windows >= 2 or pass longer "
                    "series"
                )
        # a classical model that failed at the windows but fits all of y: nothing to weigh it by
        unvalidated = {pair: why for pair, why in unvalidated.items() if pair not in left_out}
        if unvalidated:
            _warn(f"at the held-out windows, {_failures(unvalidated)}; with no errors to weigh them by, no weight")
        if left_out:
            _warn(
                f"left out of the forecasts, their weight spread over the other components (combination_weights_ "
                f"holds the weights used): {_failures(left_out)}"
            )

    def _validate_network(self, validated: list, plan: dict, H: int) -> tuple[dict, str | None]:
        """({key: (points (k, H, C), grids (k, H, C, Q))} of the network trained on each series' data
        before its first held-out window, forecasting each held-out window from its origin; None, or why
        that network could not be trained ({} then)."""
        names = self._index_names[:-1]
        prefix_y = _join({key: yp.iloc[: len(yp) - plan[key] * H] for key, yp, _ in validated}, names)
        prefix_x = None
        if self.n_exog_:
            prefix_x = _join({key: xp.reindex(yp.index[: len(yp) - plan[key] * H]) for key, yp, xp in validated}, names)
        clone = self._validation_clone()
        levels = self.quantile_levels_
        C, Q = self.n_targets_, len(levels)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                x_input = None if prefix_x is None else _as_input(prefix_x, self)
                clone.fit(_as_input(prefix_y, self), X=x_input, fh=_relative(H))
        except TooFewWindowsError as error:  # too little data before the windows: nothing validated
            return {}, _reason(error)
        self.validation_network_ = clone
        # one historical_forecasts call per set of series sharing their cutoffs (an aligned panel: one)
        groups: dict = {}
        for key, yp, xp in validated:
            n, k = len(yp), plan[key]
            labels = yp.index[[n - j * H - 1 for j in range(k, 0, -1)]]
            groups.setdefault(tuple(labels), []).append((key, yp, xp))
        out = {}
        for labels, members in groups.items():
            y_group = _join({key: yp for key, yp, _ in members}, names)
            x_group = _join({key: xp.reindex(yp.index) for key, yp, xp in members}, names) if self.n_exog_ else None
            cutoffs = members[0][1].index[[members[0][1].index.get_loc(label) for label in labels]]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                grids = clone.historical_forecasts(y_group, x_group, cutoffs=cutoffs, alpha=levels, pad_contexts=True)
                points = clone.historical_forecasts(y_group, x_group, cutoffs=cutoffs, pad_contexts=True)
            k = len(labels)
            g = np.sort(grids.to_numpy(dtype=np.float64).reshape(len(members), k, H, C, Q), axis=-1)
            p = points.to_numpy(dtype=np.float64).reshape(len(members), k, H, C)
            for i, (key, _, _) in enumerate(members):
                out[key] = (p[i], g[i])
        return out, None

    def _validate_classical(self, yp: pd.DataFrame, k: int, H: int) -> tuple[dict, dict]:
        """The classical forecasts refitted at the origin of each of a series' last k windows of H steps:
        ({name: (points (k, H, C), grids (k, H, C, Q) or None), or None where a window failed}, {name: why})."""
        n, levels, names = len(yp), self.quantile_levels_, self._combined_components[1:]
        points: dict = {name: [] for name in names}
        grids: dict = {name: [] for name in names}
        failed: dict = {}
        for j in range(k, 0, -1):
            models, failures = fit_classical(int(self.sp_), yp.iloc[: n - j * H], names)
            for name in names:
                if name in failed:
                    continue
                if name in failures:
                    failed[name] = failures[name]
                    continue
                try:
                    point, grid = classical_forecast(
                        models[name], _relative(H), levels, self.n_targets_, True, int(self._seed_)
                    )
                except CLASSICAL_FAILURES as error:
                    failed[name] = _reason(error)
                    continue
                points[name].append(point)
                grids[name].append(grid)
        comps = {
            name: None
            if name in failed
            else (np.stack(points[name]), None if any(g is None for g in grids[name]) else np.stack(grids[name]))
            for name in names
        }
        return comps, failed

    def _rule_weights(self, rule: str) -> tuple[dict, np.ndarray | None]:
        """series_weights of this fit's held-out errors."""
        return series_weights(
            rule, self._signed, self._errors, self._scales, self.n_targets_, self._combined_components
        )

    def _window_weights(self, rule: str, key: tuple, j: int) -> np.ndarray | None:
        """(C, M) weights of a series' held-out window j chosen without it, a NaN row where none can be
        (inverse_error and select on a series with one window); None for 'median'."""
        weights = self._weights[rule][key]
        if rule in ("median", "calibrate") or weights is None:  # nothing chosen on the windows
            return weights
        if rule in EVIDENCE_RULES:  # the rule on the other windows (none: its base)
            signed = self._signed[key]
            return _evidence_rule_weights(rule, np.delete(signed, j, axis=0), signed, self._combined_components)
        others = mean_errors(np.delete(self._absolute[key], j, axis=0))  # (C, M); NaN with one window
        return np.stack([rule_weights(row, rule) if np.isfinite(row).any() else row for row in others])

    def _calibrate(self, rule: str, median: int) -> tuple[np.ndarray | None, int]:
        """(conformal widening factors (Q,) of the rule's combined grids on the held-out windows, each window
        combined with weights chosen without it (_window_weights), None where no window can be; the observed
        held-out points they were set on)."""
        grids, truths, components = [], [], self._combined_components
        for key, (truth, comps) in self._validation.items():
            for j in range(len(truth)):
                weights = self._window_weights(rule, key, j)
                for c in range(self.n_targets_):
                    if weights is not None and not np.isfinite(weights[c]).all():
                        continue
                    points = [
                        comps[name][0][j, :, c] if comps[name] is not None else np.full(truth.shape[1], np.nan)
                        for name in components
                    ]
                    comp_grids = [
                        None if comps[name] is None or comps[name][1] is None else comps[name][1][j, :, c, :]
                        for name in components
                    ]
                    _, grid = combine_grid(
                        np.stack(points), comp_grids, None if weights is None else weights[c], median
                    )
                    grids.append(grid)
                    truths.append(truth[j, :, c])
        observed = int(sum(np.isfinite(t).sum() for t in truths))
        return (conformal_factors(grids, truths, self.quantile_levels_) if grids else None), observed

    def _available(self, key: tuple) -> np.ndarray:
        """(M,) bool: the components that forecast the series (the network, and the classical models that
        could fit and forecast it)."""
        cache = self._classical_cache[key]
        return np.array([True] + [cache[name] is not None for name in self._combined_components[1:]])

    def _used_weights(self, rule: str, key: tuple) -> np.ndarray | None:
        """(C, M) weights predict gives the components of a series by rule (None: the median of those
        available): the rule's, renormalized over the available components."""
        weights = self._weights[rule][key]
        if weights is None:
            return None
        available = self._available(key)
        return np.stack([renormalized(row, available) for row in weights])

    def _row_index(self, keys: list) -> pd.Index:
        """One row per series (and per target column when y has several)."""
        C = self.n_targets_
        names = self._index_names[:-1]
        columns = list(self._y_columns)
        if keys == [()]:
            return pd.Index(columns, name="variable")
        if C == 1:
            if len(names) == 1:
                return pd.Index([key[0] for key in keys], name=names[0])
            return pd.MultiIndex.from_tuples(keys, names=names)
        return pd.MultiIndex.from_tuples([(*key, col) for key in keys for col in columns], names=[*names, "variable"])

    def _set_combination_attributes(self) -> None:
        keys = list(self._errors)
        index = self._row_index(keys)
        C = self.n_targets_
        errors = np.concatenate([self._errors[key] for key in keys])
        self.validation_errors_ = pd.DataFrame(errors, index=index, columns=list(self._combined_components))
        rows = []
        for key in keys:
            used = self._used_weights(self.combine_rule, key)
            if used is None:  # median: NaN for the components whose median is taken, 0 for those left out
                used = np.tile(np.where(self._available(key), np.nan, 0.0), (C, 1))
            rows.append(used)
        self.combination_weights_ = pd.DataFrame(
            np.concatenate(rows), index=index, columns=list(self._combined_components)
        )
        self.validation_windows_ = pd.Series(
            np.repeat([self._validation_plan[key] for key in keys], C), index=index, name="windows"
        )
        self.combination_widening_ = dict(zip(self.quantile_levels_.tolist(), self._factors[self.combine_rule]))

    # ------------------------------------------------------------------------ predict
    def _predict(self, fh, X=None):
        if not self._combining:
            return super()._predict(fh, X)
        results = self._combined_forecast(fh, X, None)
        return self._assemble([(key, times, point) for key, times, point, _ in results], self._y_columns)

    def _predict_quantiles(self, fh, X, alpha):
        if not self._combining:
            return super()._predict_quantiles(fh, X, alpha)
        alpha = quantile_probabilities(alpha)
        results = self._combined_forecast(fh, X, alpha)
        frames = [(key, times, q.reshape(len(times), -1)) for key, times, _, q in results]
        return self._assemble(frames, self._get_columns(method="predict_quantiles", alpha=list(alpha)))

    def _combined_forecast(self, fh, X, alpha, rule: str | None = None):
        """[(key, times, point (k, C), quantiles (k, C, A) or None)], as _forecast, of the combination."""
        rule = rule or getattr(self, "_variant", None) or self.combine_rule
        levels = self.quantile_levels_
        median = int(np.flatnonzero(np.isclose(levels, 0.5))[0])
        want_q = alpha is not None
        network = self._forecast(fh, X, alpha=levels if want_q else None)
        factors = self._factors[rule]
        C = self.n_targets_
        out = []
        for key, times, point, grid in network:
            weights = self._used_weights(rule, key)
            points, grids = [point], [None if grid is None else np.sort(grid, axis=-1)]
            for m, name in enumerate(self._combined_components[1:], start=1):
                stored = self._classical_cache[key][name]
                if stored is None or (weights is not None and not weights[:, m].any()):  # left out, or weight 0
                    points.append(np.full_like(point, np.nan))
                    grids.append(None)
                    continue
                where = stored[0].get_indexer(times)
                if (where < 0).any():  # fit and update store every step predict accepts (1..horizon_)
                    raise RuntimeError(
                        f"{LABELS[name]}'s stored forecasts of {key_name(key)} miss {list(times[where < 0])}"
                    )
                points.append(stored[1][where])
                grids.append(None if stored[2] is None else stored[2][where])
            combined_point = np.empty_like(point)
            combined_q = np.empty((len(times), C, len(alpha))) if want_q else None
            for c in range(C):
                w = None if weights is None else weights[c]
                p = np.stack([pts[:, c] for pts in points])
                if not want_q:
                    combined_point[:, c] = combine_point(p, w)
                    continue
                cp, cg = combine_grid(p, [None if gr is None else gr[:, c, :] for gr in grids], w, median)
                combined_point[:, c] = cp
                combined_q[:, c, :] = interpolate_quantiles(widen_grid(cg, factors, levels), levels, alpha)
            out.append((key, times, combined_point, combined_q))
        return out

    # ------------------------------------------------------------------------ update
    def _update_combination(self, y: pd.DataFrame, update_params: bool) -> None:
        """The classical models take the new observations (sktime's update: refitted with update_params,
        else their states only where the model can); one that cannot is left out of its series from then
        on, with a warning (combination_weights_ follows). Series first seen here are fitted on what they
        bring and take the pooled weights (a row of their own in combination_weights_). The weights stay
        those of fit. New containers, not changed in place: a failing update leaves the forecaster as it was."""
        classical, cache = dict(self._classical), dict(self._classical_cache)
        errors, plan = dict(self._errors), dict(self._validation_plan)
        weights = {rule: dict(w) for rule, w in self._weights.items()}
        C, M = self.n_targets_, len(self._combined_components)
        left_out = {}
        for key, yp, _ in self._split_xy(y, None):
            if key in classical:
                models, failures = dict(classical[key]), {}
                for name, model in models.items():
                    if model is None:
                        continue
                    try:
                        model = _updated(model, yp, update_params)
                    except CLASSICAL_FAILURES as error:
                        failures[name], model = _reason(error), None
                    models[name] = model
            else:  # a series first seen here
                models, failures = fit_classical(int(self.sp_), self._store[key][0], self._combined_components[1:])
                errors[key], plan[key] = np.full((C, M), np.nan), 0
                for rule, pooled in self._pooled.items():
                    weights[rule][key] = None if pooled is None else np.tile(pooled, (C, 1))
            classical[key] = models
            cache[key], more = self._classical_forecasts(models)
            left_out.update({(key, name): why for name, why in {**failures, **more}.items()})
        self._classical, self._classical_cache = classical, cache
        self._errors, self._validation_plan, self._weights = errors, plan, weights
        self._set_combination_attributes()
        if left_out:
            _warn(
                f"left out of the forecasts from now on, their weight spread over the other components "
                f"(combination_weights_ holds the weights used): {_failures(left_out)}"
            )

    def _classical_forecasts(self, models: dict) -> tuple[dict, dict]:
        """({name: (times, point (S, C), grid (S, C, Q) or None), or None}, {name: why not}) of a series'
        classical models at every step predict accepts, 1..horizon_ after its last observation: predict
        reads them from here (an sktime predict per series and model costs milliseconds: a panel's predict
        would take seconds). A model that cannot forecast them is left out of the series (None)."""
        fh, C, levels = _relative(int(self.horizon_)), self.n_targets_, self.quantile_levels_
        out, failures = {}, {}
        for name, model in models.items():
            out[name] = None
            if model is None:
                continue
            try:
                point, grid = classical_forecast(model, fh, levels, C, True, int(self._seed_))
            except CLASSICAL_FAILURES as error:
                failures[name] = _reason(error)
                continue
            out[name] = (fh.to_absolute_index(model.cutoff), point, grid)
        return out, failures

    # ------------------------------------------------------------------------ refusals
    def _refuse_combined(self, what: str) -> None:
        if self._combining:
            raise ValueError(
                f"{what} uses the network alone, but this {type(self).__name__} combines it with classical "
                "forecasts (combine='validation'); fit with combine='none' for it"
            )

    def _save_state(self):
        if self._combining:
            raise ValueError(
                "the safetensors format holds the network, not the classical models of combine='validation'; "
                "save with format='sktime' (a pickle)"
            )
        return super()._save_state()

    def export(self, path, format: str = "onnx"):
        self._refuse_combined("export")
        return super().export(path, format)

    export.__doc__ = ForecasterExportMixin.export.__doc__


def _updated(model, y: pd.DataFrame, update_params: bool):
    """A copy of a classical model that has taken y (sktime's update). Without update_params, a model that
    sktime cannot give new data without refitting (AutoETS: statsmodels' ETS result has no append; sktime
    warns and keeps the old state, so it would go on forecasting from before y) is refitted on all its
    data instead: no component forecasts from before the update."""
    updated = copy.deepcopy(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        updated.update(y, update_params=update_params)
    if update_params or not any("can not accept new data" in str(w.message) for w in caught):
        return updated
    updated = copy.deepcopy(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        updated.update(y, update_params=True)
    return updated


def _relative(H: int):
    from sktime.forecasting.base import ForecastingHorizon

    return ForecastingHorizon(list(range(1, H + 1)), is_relative=True)


def _as_input(frame: pd.DataFrame, owner) -> pd.DataFrame:
    """A frame of the forecaster's inner mtypes, with the level names fit saw."""
    if isinstance(frame.index, pd.MultiIndex):
        frame = frame.copy()
        frame.index = frame.index.set_names(owner._index_names)
    return frame


__all__ = ["CLASSICAL", "CombinationMixin", "COMPONENTS", "RULES", "key_name"]
