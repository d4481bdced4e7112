"""Per-component forecasts of SSMForecaster(combine="validation"), written by the forecast benchmarks'
`--components PATH`, and `python -m ssmts.bench combine PATH [PATH ...]`, which scores every combination
rule on them offline: the weights each rule gives each series from its held-out windows, applied to the
components' forecasts of the benchmark's test outcomes, without refitting anything. Rows from several
files (seeds) are averaged set by set.

One JSON line per benchmark origin and series:

    set, origin, series        where the record comes from (series: the panel's key; "" for one series)
    components                 the names of the M components (the network first)
    val_truth   (k, H)         the series' held-out windows in fit (k = its validation windows, H = max(fh))
    val_points  (M, k, H)      each component's forecast of them (null: not validated)
    val_scale                  the MASE scale of the data before the held-out windows (the forecaster's own)
    test_truth  (h,)           the benchmark's outcomes after the origin
    test_points (M, h)         each component's forecast of them (null: the component left out)
    test_scale                 the benchmark's MASE scale (in-sample seasonal naive MAE of the training data)

NaN is written as null. Univariate targets only (the benchmarks' series are).
"""

from __future__ import annotations

import json

import numpy as np


def _listed(array: np.ndarray | None):
    return None if array is None else np.asarray(array, dtype=np.float64).tolist()


def _clean(value):
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def mase_scale(history: np.ndarray, season: int) -> float:
    """The in-sample MAE of the seasonal naive forecast (the benchmarks' MASE denominator)."""
    history = np.asarray(history, dtype=np.float64)
    lag = season if len(history) > season else 1
    return float(np.mean(np.abs(history[lag:] - history[:-lag])))


def component_records(model, set_name: str, origin: str, truths: dict, scales: dict) -> list[dict]:
    """One record per series of a fitted combining SSMForecaster (see the module docstring).
    truths: {key: (h,) outcomes}, scales: {key: the benchmark's MASE scale}; keys as the forecaster's
    (a tuple: () for one series, (name,) for a panel's)."""
    if model.n_targets_ != 1:
        raise ValueError("component records are written for univariate targets only")
    forecasts = model._forecast(model.fh, None, alpha=None)
    network = {key: point[:, 0] for key, _, point, _ in forecasts}
    times = {key: t for key, t, _, _ in forecasts}
    records = []
    for key, truth in truths.items():
        points = [network[key]]
        for name in model._combined_components[1:]:
            stored = model._classical_cache[key][name]
            if stored is None:
                points.append(np.full(len(truth), np.nan))
                continue
            where = stored[0].get_indexer(times[key])
            points.append(stored[1][where, 0])
        val_truth, val_points = None, None
        if key in model._validation:
            vt, comps = model._validation[key]
            val_truth = vt[..., 0]
            val_points = np.stack(
                [
                    comps[name][0][..., 0] if comps[name] is not None else np.full(val_truth.shape, np.nan)
                    for name in model._combined_components
                ]
            )
        records.append(
            dict(
                set=set_name,
                origin=str(origin),
                series="/".join(str(k) for k in key),
                components=list(model._combined_components),
                val_truth=_listed(val_truth),
                val_points=_listed(val_points),
                val_scale=float(model._scales[key][0]),
                test_truth=_listed(np.asarray(truth, dtype=np.float64)),
                test_points=_listed(np.stack(points)),
                test_scale=float(scales[key]),
            )
        )
    return records


def append_records(path: str | None, records: list[dict]) -> None:
    if not path or not records:
        return
    with open(path, "a") as handle:
        for record in records:
            handle.write(json.dumps(_clean(record)) + "\n")


# ---------------------------------------------------------------------------- scoring rules offline
BASELINES = ("naive", "theta", "ets")


def load_records(paths) -> list[dict]:
    """The records of each file, tagged with it (`_file`): one file is one run (a seed)."""
    records = []
    for path in paths:
        with open(path) as handle:
            records += [{**json.loads(line), "_file": str(path)} for line in handle if line.strip()]
    return records


def _nan(value):
    if isinstance(value, list):
        return [_nan(v) for v in value]
    return np.nan if value is None else value


def held_out_errors(record: dict, signed: bool = False) -> np.ndarray | None:
    """Absolute errors (k, H, 1, M) of the components on the series' held-out windows, as the forecaster
    holds them (signed: forecast - outcome); None for a series that held out none."""
    if record["val_truth"] is None:
        return None
    truth, points = np.array(_nan(record["val_truth"])), np.array(_nan(record["val_points"]))  # (k, H), (M, k, H)
    errors = np.moveaxis(points - truth[None], 0, -1)[:, :, None, :]
    return errors if signed else np.abs(errors)


def rule_weights_offline(records: list[dict], rule: str) -> list[np.ndarray | None]:
    """The (M,) weights `rule` gives each record's series (None: the median): the forecaster's own
    series_weights, given the held-out errors of the records of the fit each comes from (its set, origin
    and file); "network" is the network alone."""
    from ssmts.sktime._combine import mean_errors, series_weights

    M = len(records[0]["components"])
    if rule == "network":
        return [np.eye(M)[0] for _ in records]
    fits: dict = {}
    for i, record in enumerate(records):
        fits.setdefault((record["set"], record["origin"], record.get("_file")), []).append(i)
    out: list = [None] * len(records)
    for members in fits.values():
        signed = {i: held_out_errors(records[i], signed=True) for i in members if records[i]["val_truth"] is not None}
        errors = {i: mean_errors(np.abs(signed[i])) if i in signed else np.full((1, M), np.nan) for i in members}
        scales = {i: np.array([records[i]["val_scale"]]) for i in members}
        weights, _ = series_weights(rule, signed, errors, scales, 1, tuple(records[members[0]]["components"]))
        for i in members:
            out[i] = None if weights[i] is None else weights[i][0]
    return out


def test_mase(record: dict, weights: np.ndarray | None) -> float:
    """MASE of the combination with these weights (None: the median of the components present) on the
    record's test outcomes."""
    from ssmts.sktime._combine import combine_point

    points = np.array(_nan(record["test_points"]))
    combined = combine_point(points, weights)
    truth = np.array(_nan(record["test_truth"]))
    return float(np.mean(np.abs(truth - combined)) / max(record["test_scale"], 1e-12))


def score_rules(records: list[dict], rules) -> dict:
    """{rule: {set: mean MASE over the set's records (series and origins), averaged over files}} and the
    baselines' rows (each component alone)."""
    from ssmts.sktime._combine import COMPONENTS

    M = len(records[0]["components"])
    names = records[0]["components"]
    if list(names) != list(COMPONENTS):
        raise ValueError(
            f"the records hold the forecasts of {names}; scoring the rules against the baselines needs all of "
            f"{list(COMPONENTS)} (a fit with the default combine_components)"
        )
    table: dict = {}
    for rule in [*rules, *BASELINES]:
        if rule in BASELINES:
            weights = [np.eye(M)[names.index(rule)] for _ in records]
        else:
            weights = rule_weights_offline(records, rule)
        by_file: dict = {}
        for record, w in zip(records, weights):
            by_file.setdefault((record["set"], record.get("_file")), []).append(test_mase(record, w))
        sets: dict = {}
        for (set_name, _), values in by_file.items():
            sets.setdefault(set_name, []).append(float(np.mean(values)))
        table[rule] = {set_name: float(np.mean(values)) for set_name, values in sets.items()}
    return table


def ratios(table: dict) -> dict:
    """{rule: {set: MASE / the best of seasonal naive, Theta and AutoETS on that set}}."""
    best = {name: min(table[b][name] for b in BASELINES) for name in table[BASELINES[0]]}
    return {
        rule: {name: row[name] / best[name] for name in best} for rule, row in table.items() if rule not in BASELINES
    }


def main(argv: list[str] | None = None) -> int:
    import argparse

    from ssmts.sktime._combine import RULES

    p = argparse.ArgumentParser(prog="python -m ssmts.bench combine", description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="+", help="JSON-lines files written by `forecast --components` (one per seed)")
    p.add_argument("--rules", default=",".join(("network", *RULES)), help="comma-separated rules to score")
    args = p.parse_args(argv)
    rules = [r.strip() for r in args.rules.split(",") if r.strip()]
    unknown = sorted(set(rules) - {"network", *RULES})
    if unknown:
        p.error(f"unknown rules {unknown}; choose from {['network', *RULES]}")
    try:
        records = load_records(args.paths)
    except OSError as error:
        p.error(f"cannot read {error.filename}: {error.strerror}")
    except json.JSONDecodeError as error:
        p.error(f"not a file of component records (JSON lines from `forecast --components`): {error}")
    if not records:
        p.error("the files hold no records")
    table = ratios(score_rules(records, rules))
    sets = list(next(iter(table.values())))
    print(f"MASE / best of seasonal naive, Theta and AutoETS ({len(args.paths)} file(s), {len(records)} records)")
    print("| set | " + " | ".join(rules) + " |")
    print("|---|" + "---|" * len(rules))
    for name in sets:
        print(f"| {name} | " + " | ".join(f"{table[r][name]:.3f}" for r in rules) + " |")
    geo = {r: float(np.exp(np.mean(np.log(list(table[r].values()))))) for r in rules}
    print("| geometric mean | " + " | ".join(f"{geo[r]:.3f}" for r in rules) + " |")
    print("| worst set | " + " | ".join(f"{max(table[r].values()):.3f}" for r in rules) + " |")
    return 0
