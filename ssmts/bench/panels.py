"""Forecasting on panels: one global SSMForecaster against per-series statistical baselines.

    panel       series  frequency   h   folds x step  what
    fertility   196     yearly      6   3 x 3         statsmodels' fertility: births per woman by
                                                      country, 1960-2011 (2012-13 are empty)
    macrodata   12      quarterly   8   3 x 8         statsmodels' macrodata: US macro series,
                                                      1959Q1-2009Q3
    m1yearly    181     yearly      6   1             the M1 competition's yearly series (shipped
                                                      with aeon), 15-58 observations, each
                                                      aligned to end in 2000 (they are unrelated:
                                                      the calendar year carries nothing); the
                                                      competition's protocol, the last 6 held out.
                                                      A check panel: no setting was chosen on it

Expanding-window backtest: `folds` origins `step` apart, the last forecast ending at the end of
the panel; every model is refitted on all data up to each origin. The SSM is one network for the
whole panel; the baselines are fitted per series: seasonal naive, Theta, AutoETS, and "median",
the median of those three forecasts (a strong, cheap combination). Fertility keeps the countries
whose observations are contiguous and number at least 10 before the first origin (196 of 219;
the others have gaps or too little data for the baselines); its series start in different years,
so the panel holds series of 10 to 46 training observations.

The SSM's 80 % and 90 % intervals: the share of the test values inside them, pooled over series,
origins and steps.

Metrics per series and origin: MASE (scaled by the in-sample MAE of the seasonal naive forecast
on that origin's training data) and sMAPE (%), averaged over series and origins. The SSM's ratio
lines compare its mean MASE with the best single baseline's and with the median's.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

BASELINES = ("naive", "theta", "ets")
COVERAGE = (0.8, 0.9)  # nominal levels of the SSM's intervals whose coverage is measured


@dataclass
class PanelTask:
    name: str
    season: int
    h: int
    folds: int
    step: int


PANEL_TASKS = {
    "fertility": PanelTask("fertility", 1, 6, 3, 3),
    "macrodata": PanelTask("macrodata", 4, 8, 3, 8),
    "m1yearly": PanelTask("m1yearly", 1, 6, 1, 6),
}
MIN_TRAIN = 10  # observations a series needs before the first origin (fertility)


def load_panel(name: str) -> pd.DataFrame:
    """A float panel with a (series, time) MultiIndex and one column "y"; time is a PeriodIndex."""
    import statsmodels.api as sm

    if name == "fertility":
        data = sm.datasets.fertility.load_pandas().data
        values = data.set_index("Country Code").loc[:, "1960":"2011"].astype(float)
        values.columns = pd.PeriodIndex(values.columns, freq="Y")
        task = PANEL_TASKS[name]
        first_origin = len(values.columns) - task.h - (task.folds - 1) * task.step
        keep = []
        for code, row in values.iterrows():
            span = row.loc[row.first_valid_index() : row.last_valid_index()] if row.notna().any() else row[:0]
            contiguous = len(span) and not span.isna().any() and span.index[-1] == values.columns[-1]
            if contiguous and span.index[0] <= values.columns[first_origin - MIN_TRAIN]:
                keep.append(span.rename_axis("time").to_frame("y").assign(series=code))
        return pd.concat(keep).reset_index().set_index(["series", "time"])
    if name == "macrodata":
        data = sm.datasets.macrodata.load_pandas().data
        time_index = pd.PeriodIndex.from_fields(year=data["year"].astype(int), quarter=data["quarter"].astype(int))
        frames = [
            pd.DataFrame({"y": data[col].to_numpy(float), "series": col, "time": time_index})
            for col in data.columns
            if col not in ("year", "quarter")
        ]
        return pd.concat(frames).set_index(["series", "time"])
    if name == "m1yearly":
        from ssmts.data.forecast_corpus import package_series

        series = {k.split(":", 1)[1]: v for k, v in package_series().items() if k.startswith("m1_yearly:")}
        if not series:
            raise ValueError("the m1yearly panel needs aeon installed (pip install aeon)")
        frames = [
            pd.DataFrame({"y": v, "series": k, "time": pd.period_range(end="2000", periods=len(v), freq="Y")})
            for k, v in series.items()
        ]
        return pd.concat(frames).set_index(["series", "time"])
    raise ValueError(f"unknown panel {name!r}; choose from {sorted(PANEL_TASKS)}")


def validation_panel(panel: pd.DataFrame, task: PanelTask) -> pd.DataFrame:
    """The panel less the span of its test origins (the validation protocol: the same backtest on the
    data before the first test origin), keeping the series with MIN_TRAIN observations before the
    first origin of that backtest."""
    times = panel.index.get_level_values("time").unique().sort_values()
    span = task.h + (task.folds - 1) * task.step
    kept = panel[panel.index.get_level_values("time") <= times[-span - 1]]
    first_origin = times[len(times) - span - span - 1]  # the validation backtest's first cutoff
    before = kept[kept.index.get_level_values("time") <= first_origin]
    counts = before.groupby(level="series").size()
    return kept[kept.index.get_level_values("series").isin(counts.index[counts >= MIN_TRAIN])]


def _baseline(name: str, season: int, y_train: pd.Series):
    from ssmts.sktime._combine import classical_models

    if name in ("naive", "theta", "ets"):  # as SSMForecaster(combine="validation") builds them
        return classical_models(season, y_train)[name]
    raise ValueError(name)


def _scores(truth: np.ndarray, pred: np.ndarray, train: np.ndarray, season: int) -> tuple[float, float]:
    """(MASE, sMAPE in %) of one series' forecast."""
    from .components import mase_scale

    scale = mase_scale(train, season)
    mase = np.mean(np.abs(truth - pred)) / max(scale, 1e-12)
    smape = 100 * np.mean(2 * np.abs(truth - pred) / np.maximum(np.abs(truth) + np.abs(pred), 1e-12))
    return float(mase), float(smape)


def _ssm_forecasts(task: PanelTask, train: pd.DataFrame, fh, ssm_params: dict, context_multiples) -> tuple:
    """(point forecast, interval bounds at every COVERAGE level) frames of the SSM row: one forecaster,
    or with context_multiples (m_1, m_2, ...) one forecaster per context_length = m_k x h, the median
    of their point forecasts and the mean of their interval bounds (quantile averaging)."""
    return _ssm_forecast_variants(task, train, fh, ssm_params, context_multiples)[:2]


def _ssm_forecast_variants(
    task: PanelTask, train: pd.DataFrame, fh, ssm_params: dict, context_multiples, on_combined=None
) -> tuple:
    """_ssm_forecasts' frames and {variant: (point, bounds)}: with combine="validation" (one forecaster),
    those of the network alone and of every combination rule, from the same fit (on_combined, if given,
    is called with that fitted forecaster); else empty."""
    from ssmts.sktime import SSMForecaster
    from ssmts.sktime._combine import combination_variants

    multiples = context_multiples or (None,)
    members = [
        SSMForecaster(**ssm_params, **({} if m is None else {"context_length": m * task.h})).fit(train, fh=fh)
        for m in multiples
    ]
    points = [member.predict() for member in members]
    intervals = [member.predict_interval(coverage=list(COVERAGE)) for member in members]
    if len(members) == 1:
        if on_combined is not None and combination_variants(members[0]):
            on_combined(members[0])
        variants = {}
        for variant in combination_variants(members[0]):
            with members[0]._as_variant(variant):
                variants[variant] = (members[0].predict(), members[0].predict_interval(coverage=list(COVERAGE)))
        return points[0], intervals[0], variants
    point, bounds = points[0].copy(), intervals[0].copy()
    point.iloc[:, :] = np.median(np.stack([p.to_numpy() for p in points]), axis=0)
    bounds.iloc[:, :] = np.mean(np.stack([i.to_numpy() for i in intervals]), axis=0)
    return point, bounds, {}


def panel_backtest(
    task: PanelTask,
    panel: pd.DataFrame,
    ssm_params: dict | None,
    verbose: bool = False,
    context_multiples: tuple[int, ...] = (),
    components: str | None = None,
) -> list[dict]:
    """Rows {panel, model, mase, smape, fit_s, series}: the mean over series and origins (fit_s:
    seconds per origin for the whole panel). ssm_params None: baselines only. context_multiples: the
    SSM row is an ensemble over context lengths (see _ssm_forecasts). components: a path that gets a
    combining SSM's per-component forecasts appended (ssmts.bench.components)."""
    from .components import append_records, component_records, mase_scale

    times = panel.index.get_level_values("time").unique().sort_values()
    origins = [len(times) - task.h - (task.folds - 1 - k) * task.step for k in range(task.folds)]
    fh = list(range(1, task.h + 1))
    models = [*BASELINES, "median"] + ([] if ssm_params is None else ["ssm"])
    scores = {m: [] for m in models}
    inside = {}  # the SSM's (and its variants') central intervals: {model: {level: [...]}}
    seconds = {m: 0.0 for m in models}
    for origin in origins:
        cut, test_times = times[origin - 1], times[origin : origin + task.h]
        train = panel[panel.index.get_level_values("time") <= cut]
        series = train.index.get_level_values("series").unique()
        forecasts = {m: {} for m in models}
        for name in BASELINES:
            start = time.perf_counter()
            for key in series:
                y_train = train.loc[key, "y"]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # statsmodels' convergence chatter
                    model = _baseline(name, task.season, y_train).fit(y_train, fh=fh)
                    forecasts[name][key] = np.asarray(model.predict(), dtype=float).ravel()
            seconds[name] += time.perf_counter() - start
        for key in series:
            forecasts["median"][key] = np.median([forecasts[n][key] for n in BASELINES], axis=0)
        if ssm_params is not None:

            def record(model, train=train, test_times=test_times, series=series, cut=cut):
                truths = {(key,): panel.loc[key, "y"].reindex(test_times).to_numpy(dtype=float) for key in series}
                scales = {(key,): mase_scale(train.loc[key, "y"].to_numpy(dtype=float), task.season) for key in series}
                append_records(components, component_records(model, task.name, str(cut), truths, scales))

            start = time.perf_counter()
            predicted, bounds, variants = _ssm_forecast_variants(
                task, train, fh, ssm_params, context_multiples, on_combined=record if components else None
            )
            seconds["ssm"] += time.perf_counter() - start
            for variant, (v_point, v_bounds) in {None: (predicted, bounds), **variants}.items():
                label = "ssm" if variant is None else f"ssm/{variant}"
                if label not in scores:  # a variant's first origin
                    models.append(label)
                    scores[label], forecasts[label] = [], {}
                cover = inside.setdefault(label, {level: [] for level in COVERAGE})
                for key in series:
                    forecasts[label][key] = v_point.loc[key, "y"].to_numpy(dtype=float)
                    truth = panel.loc[key, "y"].reindex(test_times).to_numpy(dtype=float)
                    for level in COVERAGE:
                        lo, hi = (
                            v_bounds.loc[key, ("y", level, side)].to_numpy(dtype=float) for side in ("lower", "upper")
                        )
                        cover[level].extend((truth >= lo) & (truth <= hi))
        for key in series:
            truth = panel.loc[key, "y"].reindex(test_times).to_numpy(dtype=float)
            history = train.loc[key, "y"].to_numpy(dtype=float)
            for m in models:
                scores[m].append(_scores(truth, forecasts[m][key], history, task.season))
        if verbose:
            print(f"  {task.name}: origin {cut} done", flush=True)
    rows = []
    for m in models:
        values = np.asarray(scores[m])
        rows.append(
            dict(
                panel=task.name,
                model=m,
                mase=float(values[:, 0].mean()),
                smape=float(values[:, 1].mean()),
                fit_s=seconds.get(m, seconds.get("ssm", 0.0)) / len(origins),
                series=len(values) // len(origins),
                **{f"cov{round(100 * v)}": 100 * float(np.mean(inside[m][v])) for v in COVERAGE if m in inside},
            )
        )
    return rows


def panel_summary(rows: list[dict]) -> str:
    """Markdown table of panel_backtest rows, with the SSM's ratios per panel."""
    lines = [
        "| panel | model | MASE | sMAPE % | fit s | series | 80 % covers | 90 % covers |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cov = " | ".join(f"{r[k]:.1f} %" if k in r else "" for k in ("cov80", "cov90"))
        lines.append(
            f"| {r['panel']} | {r['model']} | {r['mase']:.3f} | {r['smape']:.2f} | {r['fit_s']:.1f} | {r['series']} "
            f"| {cov} |"
        )
    for panel in dict.fromkeys(r["panel"] for r in rows):
        by = {r["model"]: r["mase"] for r in rows if r["panel"] == panel}
        best = min(BASELINES, key=by.get)
        for label in [m for m in by if m == "ssm" or m.startswith("ssm/")]:
            lines.append(
                f"\n{panel}: {label.upper() if label == 'ssm' else label} MASE / best baseline ({best}) = "
                f"{by[label] / by[best]:.3f}; / median ensemble = {by[label] / by['median']:.3f}; / naive = "
                f"{by[label] / by['naive']:.3f}"
            )
    return "\n".join(lines)
