"""Forecast accuracy benchmark on sktime's bundled series: `python -m ssmts.bench forecast [options]`.

Compares SSMForecaster with seasonal naive, Theta and AutoETS on an expanding-window
backtest: `folds` forecasts of h steps whose cutoffs are `step` apart, the last ending at
the end of the series; every model is refitted on all data up to each cutoff.

    series     n    season  h   folds x step  first training size
    airline    144  12      12  3 x 12        108
    lynx       114  1       10  3 x 10        84
    shampoo    36   1       6   3 x 3         24
    uschange   187  1       8   3 x 8         163   (target "Consumption", univariate)

Seasons: airline is monthly with a yearly pattern; lynx is annual (its ~10-year cycle is not
a calendar season); shampoo has a trend but no stable seasonal pattern in 3 years; uschange
is seasonally adjusted quarterly growth. --uschange-exog adds a row where the SSM also uses
the other uschange columns (Income, Production, Savings, Unemployment) as exogenous X, with
their true future values over the horizon (an oracle-X setting the baselines do not get).
--uschange-past adds the realistic row: the same columns as past-only covariates
(past_covariates), read up to each cutoff and never after it, so predict gets no future X.

Metrics per fold: MASE (scaled by the in-sample MAE of the seasonal naive forecast with the
series' season) and sMAPE (in %); the table shows their means over folds and the mean fit
time. The last line is the geometric mean over series of MASE(SSM) / MASE(best statistical
baseline), the best being chosen per series on the test folds (an oracle choice, the strict
comparison).

SSM settings: the same for every series (SSM_SETTINGS) except context_length, which follows
one rule from the training length: min(3 * max(season, h), shortest training series // 3).
--validation runs the same protocol on the data before the first test cutoff (the last
span of folds removed), which is what the settings (learning rate, epochs, network size,
the context rule, the ensemble) were chosen on; the test folds were not used for any choice.
On validation one network's MASE moves with its seed (uschange 0.55-0.65 over seeds 0-2),
so the SSM is an ensemble of 5 networks (ensemble_size=5): validation geometric-mean
ratio 0.80, against 0.79-0.82 for single networks; dropout 0.1 (0.84-0.87) and 75
epochs (0.95) were worse, and normalize="mean" tied with "last" (0.81-0.82), so the
default "last" stays. Three folds a series are few, so the settings were checked again on
`--validation --dense 2` (6 origins a series at half the step): the ensemble of 5 gives
0.853 and beats seasonal naive on 4/4 series; normalize="mean" gives 0.904, and
averaging ensembles at several context lengths (1-3 or 2-5 times max(season, h), as in
N-BEATS) gives 0.851-0.854, no better, so the settings stay.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np

from .panels import MIN_TRAIN, PANEL_TASKS, PanelTask, load_panel, panel_backtest, panel_summary, validation_panel

MODELS = ("ssm", "naive", "theta", "ets")
SERIES = ("airline", "lynx", "shampoo", "uschange")

# Chosen on the --validation protocol (never on the test folds); see the module docstring.
SSM_SETTINGS = dict(
    strategy="direct",
    normalize=True,
    d_model=32,
    d_state=32,
    n_layers=2,
    max_epochs=150,
    batch_size=16,
    lr=1e-3,
    ensemble_size=5,
    device="cpu",
    random_state=0,
)


# The panels differ from the single series in what the defaults must adapt to (many short
# series): the context follows context_length="auto" and the forecaster's max_steps bounds the
# training. One network: an ensemble of 5 gained at most 0.006 MASE at 2000 steps for 5x the time.
PANEL_SETTINGS = dict(context_length="auto", ensemble_size=1)


@dataclass
class Task:
    name: str
    season: int
    h: int
    folds: int
    step: int


TASKS = {
    "airline": Task("airline", 12, 12, 3, 12),
    "lynx": Task("lynx", 1, 10, 3, 10),
    "shampoo": Task("shampoo", 1, 6, 3, 3),
    "uschange": Task("uschange", 1, 8, 3, 8),
}


def load_series(name: str):
    """(y, X or None) with a float y."""
    from sktime import datasets

    if name == "airline":
        return datasets.load_airline().astype(float), None
    if name == "lynx":
        return datasets.load_lynx().astype(float), None
    if name == "shampoo":
        return datasets.load_shampoo_sales().astype(float), None
    if name == "uschange":
        y, X = datasets.load_uschange()
        return y.astype(float), X.astype(float)
    raise ValueError(f"unknown series {name!r}; choose from {SERIES}")


def cutoffs(n: int, task: Task) -> list[int]:
    """Training lengths of the folds: the last fold's test window ends at n."""
    return [n - task.h - (task.folds - 1 - k) * task.step for k in range(task.folds)]


def context_length_for(task: Task, shortest_train: int) -> int:
    return int(min(3 * max(task.season, task.h), shortest_train // 3))


def make_model(name: str, task: Task, shortest_train: int, ssm_overrides: dict):
    from sktime.forecasting.ets import AutoETS
    from sktime.forecasting.naive import NaiveForecaster
    from sktime.forecasting.theta import ThetaForecaster

    if name == "ssm":
        from ssmts.sktime import SSMForecaster

        # sp: the season of the baselines (it sets the classical models of combine="validation"; the
        # network reads it only for context_length="auto", which this benchmark does not use)
        params = {
            **SSM_SETTINGS,
            "context_length": context_length_for(task, shortest_train),
            "sp": task.season,
            **ssm_overrides,
        }
        return SSMForecaster(**params)
    if name == "naive":
        return NaiveForecaster(strategy="last", sp=task.season)
    if name == "theta":
        # with season 1 there is nothing to deseasonalize (and the multiplicative
        # decomposition would reject uschange's negative values)
        return ThetaForecaster(sp=task.season, deseasonalize=task.season > 1)
    if name == "ets":
        return AutoETS(auto=True, sp=task.season, n_jobs=1)
    raise ValueError(f"unknown model {name!r}; choose from {MODELS}")


def backtest(
    model_name: str,
    task: Task,
    y,
    X,
    ssm_overrides: dict,
    use_x: bool | str = False,
    coverage: tuple = (),
    components: str | None = None,
) -> dict:
    """Mean MASE, sMAPE (%) and fit seconds over the folds of `task` on y; with `coverage`
    levels, also the empirical coverage of each central interval (share of the fold's test
    points inside it, pooled over folds) as cov<level in %>. use_x: False, True (X known
    ahead: fit and predict get it) or "past" (every X column past-only: predict gets none).
    With combine="validation" in the SSM's settings, the result also holds "variants": {label:
    result} of the network alone and of each combination rule, from the same fits."""
    if use_x == "past":
        ssm_overrides = {**ssm_overrides, "past_covariates": list(X.columns)}
    from sktime.performance_metrics.forecasting import (
        mean_absolute_percentage_error,
        mean_absolute_scaled_error,
    )

    from ssmts.sktime._combine import combination_variants

    from .components import append_records, component_records, mase_scale

    ends = cutoffs(len(y), task)
    fh = list(range(1, task.h + 1))
    scores = {}  # variant (None: the model as configured) -> {"mase": [...], "smape": [...], level: [...]}
    seconds = []
    for end in ends:
        y_train, y_test = y.iloc[:end], y.iloc[end : end + task.h]
        # per fold: some lazily imported modules re-enable FutureWarnings on import
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sktime FutureWarnings, statsmodels convergence chatter
            model = make_model(model_name, task, ends[0], ssm_overrides)
            start = time.perf_counter()
            X_future = None
            if use_x:
                model.fit(y_train, X=X.iloc[:end], fh=fh)
                X_future = None if use_x == "past" else X.iloc[end : end + task.h]
            else:
                model.fit(y_train, fh=fh)
            seconds.append(time.perf_counter() - start)
            if components and combination_variants(model):
                truth, scale = y_test.to_numpy().ravel(), mase_scale(y_train.to_numpy().ravel(), task.season)
                records = component_records(model, task.name, str(y_train.index[-1]), {(): truth}, {(): scale})
                append_records(components, records)
            for variant in [None, *combination_variants(model)]:
                with model._as_variant(variant) if variant else nullcontext():
                    y_pred = model.predict(X=X_future)
                    bounds = None
                    if coverage:
                        try:
                            bounds = model.predict_interval(X=X_future, coverage=list(coverage))
                        except Exception as error:  # a baseline's interval code failing must not end the run
                            print(
                                f"  {model_name} on {task.name}: no intervals ({type(error).__name__}: {error})",
                                file=sys.stderr,
                            )
                record = scores.setdefault(variant, {"mase": [], "smape": [], **{lv: [] for lv in coverage}})
                for level in coverage:
                    if bounds is None:
                        record[level].append(np.nan)
                        continue
                    lower = bounds.iloc[:, bounds.columns.get_level_values(1) == level]
                    lo, hi = lower.iloc[:, 0].to_numpy(dtype=float), lower.iloc[:, 1].to_numpy(dtype=float)
                    truth = y_test.to_numpy().ravel()
                    record[level].extend(((truth >= lo) & (truth <= hi)).tolist())
                record["mase"].append(mean_absolute_scaled_error(y_test, y_pred, y_train=y_train, sp=task.season))
                record["smape"].append(100 * mean_absolute_percentage_error(y_test, y_pred, symmetric=True))

    def summarize(record):
        result = dict(mase=float(np.mean(record["mase"])), smape=float(np.mean(record["smape"])))
        result["fit_s"] = float(np.mean(seconds))
        for level in coverage:
            result[f"cov{round(100 * level)}"] = 100 * float(np.mean(record[level]))
        return result

    result = summarize(scores.pop(None))
    if scores:
        result["variants"] = {variant: summarize(record) for variant, record in scores.items()}
    return result


def synthetic_series(n: int, seed: int = 0):
    """An hourly development series: trend, a daily cycle and noise (n points)."""
    import pandas as pd

    t = np.arange(n)
    rng = np.random.default_rng(seed)
    values = 10 + 0.01 * t + np.sin(2 * np.pi * t / 24) + 0.3 * np.sin(2 * np.pi * t / 168) + 0.2 * rng.normal(size=n)
    return pd.Series(values, index=pd.period_range("2000-01-01", periods=n, freq="h"), name="y")


def backtest_timing(args) -> list[dict]:
    """Seconds for forecasts from K origins (the last K points at which an h-step forecast can
    be checked) with one fitted network, by five routes: historical_forecasts (one batched
    forward), K update(update_params=False) + predict calls, K steps of stream(), sktime
    evaluate with strategy="no-update_params" (which also fits once, on the first window:
    with one epoch there, and that fit timed alone next to it), and refitting at every
    origin (estimated from `refits` fits x K). Repeats are interleaved; the minimum and
    median are kept."""
    import copy

    from sktime.forecasting.model_evaluation import evaluate
    from sktime.split import ExpandingWindowSplitter

    from ssmts.sktime import SSMForecaster

    K, h, n = args.timing_origins, args.timing_h, args.timing_length
    y = synthetic_series(n)
    first = n - h - K + 1  # training length at the first origin
    fh = list(range(1, h + 1))
    params = {**SSM_SETTINGS, "context_length": 48, "ensemble_size": 1, "max_epochs": 20, **args.ssm_params}
    make = lambda: SSMForecaster(**params)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = make().fit(y.iloc[:first], fh=fh)
        cutoffs = y.index[first - 1 : first - 1 + K]

        def one_pass():
            fitted.historical_forecasts(y.iloc[: first - 1 + K], cutoffs=cutoffs)

        def update_predict():
            f = copy.deepcopy(fitted)
            start = time.perf_counter()
            f.predict()
            for k in range(1, K):
                f.update(y.iloc[first - 1 + k : first + k], update_params=False)
                f.predict()
            return time.perf_counter() - start

        def sktime_evaluate():
            # evaluate fits on the first window; one epoch keeps that fit from hiding the per-origin cost
            cv = ExpandingWindowSplitter(initial_window=first, step_length=1, fh=fh)
            result = evaluate(
                SSMForecaster(**{**params, "max_epochs": 1}),
                cv,
                y.iloc[: first - 1 + K + h],
                strategy="no-update_params",
            )
            assert len(result) == K, len(result)

        def streaming():
            stream = copy.deepcopy(fitted).stream()
            start = time.perf_counter()
            stream.predict()
            for k in range(1, K):
                stream.step(y.iloc[first - 1 + k])
            return time.perf_counter() - start

        def fit_one_epoch():
            SSMForecaster(**{**params, "max_epochs": 1}).fit(y.iloc[:first], fh=fh)

        def refit():
            for _ in range(args.timing_refits):
                make().fit(y.iloc[:first], fh=fh).predict()

        routes = {
            "historical_forecasts (one pass)": one_pass,
            "K x update + predict": update_predict,
            "stream(): K steps, batch 1": streaming,
            "sktime evaluate no-update_params (+1 fit of 1 epoch)": sktime_evaluate,
            "(that fit of 1 epoch alone)": fit_one_epoch,
            f"refit at each origin (estimated: {args.timing_refits} fit(s) x K)": refit,
        }
        seconds = {name: [] for name in routes}
        for _ in range(args.timing_repeats):  # interleaved, so slow phases of a shared machine hit every route
            for name, route in routes.items():
                start = time.perf_counter()
                inner = route()
                elapsed = inner if inner is not None else time.perf_counter() - start
                if name.startswith("refit"):
                    elapsed = elapsed / args.timing_refits * K
                seconds[name].append(elapsed)
    base = float(np.min(seconds["historical_forecasts (one pass)"]))
    return [
        dict(
            route=name,
            min_s=float(np.min(v)),
            median_s=float(np.median(v)),
            ms_per_origin=1000 * float(np.min(v)) / K,
            vs_one_pass=float(np.min(v)) / base,
        )
        for name, v in seconds.items()
    ]


def write_json(path: str | None, rows: list[dict]) -> None:
    if path:
        with open(path, "w") as handle:
            json.dump(rows, handle, indent=1)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m ssmts.bench forecast", description=__doc__.split("\n\n")[0])
    p.add_argument("--series", default=None, help=f"comma-separated subset of {','.join(SERIES)} (not with --panels)")
    p.add_argument(
        "--models",
        default=",".join(MODELS),
        help=f"comma-separated subset of {','.join(MODELS)}; with --panels it says only whether the ssm row "
        "runs (the baselines and their median always do)",
    )
    p.add_argument(
        "--validation",
        action="store_true",
        help="run on the data before the first test cutoff (for choosing settings); with --panels, on each "
        "panel less its test span",
    )
    p.add_argument(
        "--uschange-exog",
        action="store_true",
        help="add an SSM row for uschange with the other columns as exogenous X (oracle future X)",
    )
    p.add_argument(
        "--uschange-past",
        action="store_true",
        help="add an SSM row for uschange with the other columns as past-only covariates (no future X)",
    )
    p.add_argument("--ssm-params", default="{}", help="JSON dict overriding SSMForecaster settings")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: all cores available)")
    p.add_argument(
        "--dense",
        type=int,
        default=1,
        metavar="K",
        help="K times the folds at 1/K of each series' step (at least 1): more, overlapping "
        "forecast origins over about the same span, for less noisy comparisons",
    )
    p.add_argument(
        "--coverage",
        default=None,
        metavar="LEVELS",
        help="also measure the empirical coverage (%%) of central prediction intervals at these "
        "comma-separated nominal levels, e.g. 0.8,0.9 (every model; pooled over folds and steps; not with "
        "--panels, which measure the SSM's 80 %% and 90 %% intervals)",
    )
    p.add_argument(
        "--backtest-timing",
        action="store_true",
        help="instead of the accuracy table: seconds for forecasts from K origins of a synthetic series "
        "by historical_forecasts, K update+predict calls, stream(), sktime evaluate "
        "(no-update_params) and refitting, with their ratios",
    )
    p.add_argument("--timing-origins", type=int, default=100, help="K for --backtest-timing")
    p.add_argument("--timing-length", type=int, default=1000, help="series length for --backtest-timing")
    p.add_argument("--timing-h", type=int, default=12, help="forecast horizon for --backtest-timing")
    p.add_argument("--timing-refits", type=int, default=2, help="fits timed to estimate refitting K times")
    p.add_argument("--timing-repeats", type=int, default=3, help="interleaved repeats for --backtest-timing")
    p.add_argument(
        "--panels",
        default=None,
        metavar="NAMES",
        help="instead of the single series: the panels fertility,macrodata (and the check panel m1yearly; "
        "one global SSM against per-series naive, Theta, AutoETS and their median; see ssmts.bench.panels)",
    )
    p.add_argument(
        "--context-multiples",
        default="",
        help="with --panels: the SSM row is the median of one forecaster per context_length = m x h for these "
        "comma-separated m (an ensemble over context lengths, the N-BEATS recipe), e.g. 2,3,4",
    )
    p.add_argument("--quick", action="store_true", help="smoke test: 5 epochs, one fold per series, 1 thread")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the table's rows to this JSON file")
    p.add_argument(
        "--components",
        default=None,
        metavar="PATH",
        help="with combine='validation' in --ssm-params: append each origin's per-component forecasts (held-out "
        "windows and test) to this JSON-lines file, to compare combination rules offline (ssmts.bench.components)",
    )
    args = p.parse_args(argv)
    args.panels = [s.strip() for s in args.panels.split(",") if s.strip()] if args.panels else []
    try:
        args.context_multiples = tuple(int(m) for m in args.context_multiples.split(",") if m.strip())
    except ValueError:
        p.error(f"--context-multiples takes comma-separated whole numbers, got {args.context_multiples!r}")
    if args.context_multiples and (not args.panels or min(args.context_multiples) < 1):
        p.error("--context-multiples needs --panels and multiples >= 1")
    unknown_panels = sorted(set(args.panels) - set(PANEL_TASKS))
    if unknown_panels:
        p.error(f"unknown panels {unknown_panels}; choose from {sorted(PANEL_TASKS)}")
    if args.panels and (args.series is not None or args.coverage):
        # the panels run their own series and measure the SSM's 80 % and 90 % coverage: said, not ignored
        p.error(
            "--series and --coverage are for the single series; --panels runs each panel's series and "
            "measures the SSM's 80 % and 90 % coverage"
        )
    args.series = [s.strip() for s in (args.series or ",".join(SERIES)).split(",") if s.strip()]
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    for values, allowed, what in ((args.series, SERIES, "series"), (args.models, MODELS, "models")):
        unknown = sorted(set(values) - set(allowed))
        if unknown:
            p.error(f"unknown {what} {unknown}; choose from {list(allowed)}")
    try:
        args.ssm_params = json.loads(args.ssm_params)
    except json.JSONDecodeError as error:
        p.error(f"--ssm-params is not valid JSON: {error}")
    if not isinstance(args.ssm_params, dict):
        p.error("--ssm-params must be a JSON object")
    try:
        args.coverage = tuple(float(v) for v in args.coverage.split(",") if v.strip()) if args.coverage else ()
    except ValueError:
        p.error(f"--coverage takes comma-separated levels in (0, 1), got {args.coverage!r}")
    if any(not 0 < level < 1 for level in args.coverage):
        p.error(f"--coverage levels must lie in (0, 1), got {list(args.coverage)}")
    if args.dense < 1:
        p.error(f"--dense must be an integer >= 1, got {args.dense}")
    if args.threads is not None and args.threads < 1:
        p.error(f"--threads must be an integer >= 1, got {args.threads}")
    if not args.panels and not args.backtest_timing:
        for name in args.series:  # every fold needs data before its cutoff
            task = folds_to_run(TASKS[name], args)
            first = cutoffs(len(protocol_series(name, args.validation)[0]), task)[0]
            if first < 2:
                p.error(
                    f"--dense {args.dense} puts {name}'s first of {task.folds} folds (step {task.step}) at a cutoff "
                    f"of {first} observations; use a smaller --dense"
                )
    if args.quick and args.backtest_timing:
        # a tiny model, a short series, one repeat: seconds, for a smoke test
        args.ssm_params = {
            "d_model": 8,
            "d_state": 4,
            "n_layers": 1,
            "max_epochs": 1,
            "context_length": 8,
            **args.ssm_params,
        }
        args.timing_origins, args.timing_length, args.timing_h = min(args.timing_origins, 10), 80, 3
        args.timing_refits, args.timing_repeats = 1, 1
    if args.quick:
        args.ssm_params = {"max_epochs": 5, **args.ssm_params}
        if args.threads is None:
            args.threads = 1
    if args.threads is None:
        args.threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return args


def folds_to_run(task: Task, args) -> Task:
    """The task with the folds actually run: --quick (one fold) or --dense K (K x folds at step // K)."""
    if args.quick:
        return Task(task.name, task.season, task.h, 1, task.step)
    if args.dense > 1:
        return Task(task.name, task.season, task.h, task.folds * args.dense, max(1, task.step // args.dense))
    return task


def protocol_series(name: str, validation: bool):
    """(y, X or None) of a series under the protocol: all of it, or with --validation the data before the
    first test cutoff (the span of the test folds dropped)."""
    task, (y, X) = TASKS[name], load_series(name)
    if validation:
        span = task.h + (task.folds - 1) * task.step
        y, X = y.iloc[:-span], None if X is None else X.iloc[:-span]
    return y, X


def run(args) -> list[dict]:
    rows = []
    for name in args.series:
        y, X = protocol_series(name, args.validation)
        task = folds_to_run(TASKS[name], args)
        runs = [(m, m, False) for m in args.models]
        if name == "uschange" and args.uschange_exog and "ssm" in args.models:
            runs.append(("ssm+X", "ssm", True))
        if name == "uschange" and args.uschange_past and "ssm" in args.models:
            runs.append(("ssm+pastX", "ssm", "past"))
        for label, model_name, use_x in runs:
            extra = {"coverage": args.coverage} if args.coverage else {}
            if args.components:
                extra["components"] = args.components
            result = backtest(model_name, task, y, X, args.ssm_params, use_x=use_x, **extra)
            variants = result.pop("variants", {})
            rows.append(dict(series=name, model=label, **result))
            print(f"  done {name:9s} {label:6s} MASE {result['mase']:.3f}", file=sys.stderr, flush=True)
            for variant, values in variants.items():  # the same fits, forecast another way
                rows.append(dict(series=name, model=f"{label}/{variant}", **values))
    return rows


def summary(rows: list[dict]) -> tuple[str, list[str]]:
    """The table and the closing lines (ratio to the best baseline, naive check), for the SSM row and
    for each of its variants (ssm/...: the same fits forecast another way)."""
    import pandas as pd

    df = pd.DataFrame(rows)
    formatters = {"mase": "{:.3f}".format, "smape": "{:.2f}".format, "fit_s": "{:.2f}".format}
    formatters.update({c: "{:.1f}".format for c in df.columns if c.startswith("cov")})
    table = df.to_string(index=False, formatters=formatters)
    lines = []
    labels = [m for m in dict.fromkeys(df.model) if m == "ssm" or m.startswith("ssm/")]
    for label in labels:
        shown = "SSM" if label == "ssm" else label
        ratios, beats_naive = [], []
        for name, group in df.groupby("series", sort=False):
            by_model = group.set_index("model")
            if label not in by_model.index:
                continue
            baselines = by_model.loc[[m for m in ("naive", "theta", "ets") if m in by_model.index]]
            if baselines.empty:
                continue
            best = baselines.mase.idxmin()
            ratio = by_model.mase[label] / baselines.mase[best]
            ratios.append(ratio)
            line = f"{name}: MASE({shown})/MASE({best}) = {ratio:.3f}"
            if "naive" in by_model.index:
                beats = by_model.mase[label] < by_model.mase["naive"]
                beats_naive.append(beats)
                line += f"; {shown} {'beats' if beats else 'does not beat'} seasonal naive"
            lines.append(line)
        if ratios:
            geo = math.exp(float(np.mean(np.log(ratios))))
            lines.append(
                f"geometric mean over {len(ratios)} series of MASE({shown})/MASE(best statistical baseline) = {geo:.3f}"
            )
        if beats_naive:
            lines.append(f"{shown} beats seasonal naive on {sum(beats_naive)}/{len(beats_naive)} series")
    return table, lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    if args.backtest_timing:
        settings = {**SSM_SETTINGS, "context_length": 48, "ensemble_size": 1, "max_epochs": 20, **args.ssm_params}
        print(
            f"ssmts forecast backtest timing: K={args.timing_origins} origins, h={args.timing_h}, synthetic series "
            f"of {args.timing_length} points, threads={args.threads}, torch={torch.__version__}"
        )
        print(f"SSM settings: {settings}")
        import pandas as pd

        df = pd.DataFrame(backtest_timing(args))
        print(
            df.to_string(
                index=False,
                formatters={
                    "min_s": "{:.3f}".format,
                    "median_s": "{:.3f}".format,
                    "ms_per_origin": "{:.2f}".format,
                    "vs_one_pass": "{:.1f}x".format,
                },
            )
        )
        stream_row = df[df.route.str.startswith("stream")].iloc[0]
        print(f"stream(): {1000 / stream_row.ms_per_origin:.0f} steps/s at batch 1")
        write_json(args.json, df.to_dict(orient="records"))
        return 0
    if args.panels:
        settings = {**SSM_SETTINGS, **PANEL_SETTINGS, **args.ssm_params}
        print(f"ssmts panel forecast benchmark: threads={args.threads} torch={torch.__version__}")
        print(f"SSM settings: {settings}")
        if args.context_multiples:
            print(f"SSM row: median of forecasters with context_length = m x h, m in {args.context_multiples}")
        if args.validation:
            print(
                "protocol: validation (each panel's test span removed; series with fewer than "
                f"{MIN_TRAIN} observations before the first origin left out)"
            )
        rows = []
        for name in args.panels:
            task = PANEL_TASKS[name]
            panel = load_panel(name)
            if args.validation:
                panel = validation_panel(panel, task)
            if args.quick:
                task = PanelTask(task.name, task.season, task.h, 1, task.step)
            rows += panel_backtest(
                task,
                panel,
                {"sp": task.season, **settings} if "ssm" in args.models else None,
                verbose=True,
                context_multiples=args.context_multiples,
                components=args.components,
            )
        print(panel_summary(rows))
        write_json(args.json, rows)
        return 0
    protocol = "validation (data before the first test cutoff)" if args.validation else "test"
    print(f"ssmts forecast benchmark: protocol={protocol} threads={args.threads} torch={torch.__version__}")
    settings = {**SSM_SETTINGS, **args.ssm_params}
    print(f"SSM settings: {settings}; context_length = min(3*max(season, h), shortest training length // 3)")
    for name in args.series:
        t = folds_to_run(TASKS[name], args)
        print(f"  {name}: season {t.season}, h {t.h}, {t.folds} fold(s), step {t.step}")
    start = time.perf_counter()
    rows = run(args)
    write_json(args.json, rows)
    table, lines = summary(rows)
    print(table)
    for line in lines:
        print(line)
    print(f"total {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
