"""SSMForecaster's fit plumbing: series to training windows, the network, fit and update.

    fit(y, X, fh) -> _fit: the series split by instance (_split_xy), the horizon and context
          (context_length='auto': _windows.auto_context_length), the global statistics of y and X,
          each series' windows (_series_windows), the temporal hold-out (_train_val), the network
          (_build_network) trained through NetworkFitMixin, the conformal widening, the combination
    update(y, X) -> _update: the stored tails merged with the new data (_remember), a few epochs on
          the windows whose targets reach it
    both run inside _all_or_nothing: a failure leaves the forecaster as it was

The parameters and public methods are ssmts.sktime.forecasting's (SSMForecaster); this mixin holds
what fit and update do with them.
"""

from __future__ import annotations

import copy
import math
import warnings
from contextlib import contextmanager

import numpy as np
import pandas as pd
import torch
from sktime.utils.validation.forecasting import check_fh

from .._warnings import caller_stacklevel
from ..nn import ForecastEnsemble
from ..training import SequenceData, predict_batches, resolve_device
from ..training.objectives import pinball_loss
from ._strategies import (
    FORECAST_BATCH,
    conformal_widening,
    fewest_points_to_calibrate,
    symmetric_pairs,
    uncalibrated_coverages,
    unpaired_levels,
)
from ._windows import (
    LEVEL_FLOOR,
    TooFewWindowsError,
    Windows,
    as_float,
    auto_context_length,
    check_gaps,
    check_regular_index,
    column_statistics,
    gaps_into,
    key_name,
    level_swamped_windows,
    make_windows,
    merge,
    pad_front,
    quantile_levels,
    seasonal_period,
    split_instances,
    time_differences,
    time_unit_value,
    window_location,
    window_scaling,
)
from ._windows import steps as horizon_steps

# calibration="holdout": the continuation on every window after the held-out calibration, as a share of
# the epochs the first part ran
HOLDOUT_CONTINUATION = 0.25


class ForecasterFitMixin:
    """fit and update of SSMForecaster (sktime's _fit, _update and their hooks); see the module docstring."""

    # ------------------------------------------------------------ all or nothing
    @contextmanager
    def _all_or_nothing(self):
        """fit and update: on any failure or interruption, the forecaster as it was before."""
        saved = dict(self.__dict__)
        # the containers that update changes in place
        kept = {name: dict(saved[name]) for name in ("_store", "_statics") if isinstance(saved.get(name), dict)}
        try:
            yield
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            self.__dict__.update(kept)
            raise

    # ------------------------------------------------------------ data
    def _update_y_X(self, y, X):
        """sktime's hook before the cutoff moves (fit and update): check the time index first."""
        store = getattr(self, "_store", None)
        for key, part in split_instances(y):
            what = f"the time index of {key_name(key)}"
            check_regular_index(part.index, what, even=self.irregular == "refuse")
            if store and key in store:
                seen = store[key][0].index
                if part.index[-1] < seen[-1]:
                    raise ValueError(
                        f"update data for {key_name(key)} ends at {part.index[-1]}, before the cutoff {seen[-1]}: "
                        "update takes data that continues the series (revisions may overlap the past, but must "
                        "reach the cutoff)"
                    )
                # the part itself is checked above; when it continues the series, its junction is all that is new
                joined = seen[-2:].append(part.index) if part.index[0] > seen[-1] else seen.union(part.index)
                check_regular_index(joined, f"{what} with the update appended", even=self.irregular == "refuse")
        previous = self._cutoff if store else None
        super()._update_y_X(y, X)
        # sktime sets the cutoff to the update's last time: an update of some series of a panel that ends
        # before another series' end would move it back, and predict would cut that series' data there
        # and forecast times it has observed; the panel's cutoff is the latest time it has seen
        if previous is not None and len(previous) and self._cutoff[0] < previous[0]:
            self._set_cutoff(previous)

    def _check_fh(self, fh, pred_int=False):
        """sktime's fh check, except with irregular='time_deltas': fh is then the time stamps to forecast,
        which move on with every update, and fit's fh only sets how many observations ahead the windows
        train; so a new fh replaces the last (sktime refuses any fh but fit's), and fit and predict check
        per series that it lies after the data (sktime's check counts periods of a freq the index lacks)."""
        if self.irregular != "time_deltas" or (fh is None and not self.is_fitted):
            return super()._check_fh(fh, pred_int)
        if fh is not None:
            self._fh = check_fh(fh, freq=self._cutoff)
        return self._fh

    def _split_xy(
        self, y: pd.DataFrame, X: pd.DataFrame | None
    ) -> list[tuple[tuple, pd.DataFrame, pd.DataFrame | None]]:
        """[(key, y part, X part or None)] with float values; X parts keep all their rows."""
        x_parts = dict(split_instances(X)) if X is not None else {}
        parts = []
        for key, y_part in split_instances(y):
            x_part = x_parts.get(key)
            if X is not None and x_part is None:
                raise ValueError(f"X has no rows for {key_name(key)} of y")
            parts.append((key, as_float(y_part, "y"), None if x_part is None else as_float(x_part, "X")))
        return parts

    def _norm_stats(self, context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """context (n, C, c) -> (shift, scale) of its windows (`window_scaling` with the fitted statistics)."""
        return window_scaling(
            context, self.window_location_, self.horizon_, self.y_mean_, self.y_scale_, self.scale_floor_
        )

    def _gaps(self, times: pd.Index, where: str, before: pd.Index | None = None) -> np.ndarray:
        """irregular='time_deltas': the gap into each time stamp in time units, (T, 1)."""
        gaps = gaps_into(times, self.time_unit_, before)
        check_gaps(gaps, self.time_unit, where)
        return gaps[:, None]

    def _series_windows(self, key: tuple, y_part: pd.DataFrame, x_all: pd.DataFrame | None, min_start: int = 0):
        x = self._x_rows(key, x_all, y_part.index, "the training windows") if self.n_exog_ else None
        past = self._x_past if self.n_exog_ else None
        if self.irregular == "time_deltas":
            # The gaps ride as the last "covariate": the recursive layout puts the gap into y_{p+1} at position p.
            gaps = self._gaps(y_part.index, f"the time index of {key_name(key)}")
            x = gaps if x is None else np.concatenate([x, gaps], axis=1)
            past = None if past is None else np.append(past, False)
        y_values = y_part.to_numpy()
        if self.irregular != "time_deltas":
            # A series shorter than a context and horizon gives the windows of one that long whose
            # first values are missing: its contexts are normalized over what was observed.
            full = self.context_length_ + self.horizon_
            y_values = pad_front(y_values, full, np.nan)
            x = None if x is None else pad_front(x, full, 0.0)
            if len(y_values) > len(y_part):
                min_start = 0  # all of it is no longer than one window
        return make_windows(
            y_values,
            x,
            self.context_length_,
            self.horizon_,
            self._strategy,
            self._norm_stats,
            min_start,
            past=past,
        )

    # ------------------------------------------------------------ fit
    def _fit(self, y, X, fh):
        self._start_fit()
        self._check_params()
        pretrained = self._read_pretrained(y, X) if self.pretrained is not False else None
        if pretrained is not None:
            self.window_location_ = pretrained[0]["window_location"]
            self.quantile_levels_ = np.asarray(pretrained[0]["quantile_levels"], dtype=np.float64)
        else:
            self.window_location_ = window_location(self._normalize)
            self.quantile_levels_ = quantile_levels(self.quantiles)
        self._warn_of_unpaired_levels()
        parts = self._split_xy(y, X)
        self.n_targets_ = y.shape[1]
        self.n_exog_ = 0 if X is None else X.shape[1]
        self._y_columns = y.columns
        self._index_names = list(y.index.names)
        self._x_columns = None if X is None else X.columns
        self._x_roles(X)

        lengths = {key: len(y_part) for key, y_part, _ in parts}
        if self.irregular == "time_deltas":
            # Gaps in units of a declared duration, or of the median spacing of all training series.
            index = parts[0][1].index
            spacing = np.concatenate([time_differences(p.index) for _, p, _ in parts])
            self.time_unit_ = (
                time_unit_value(self.time_unit, index)
                if self.time_unit is not None
                else float(np.median(spacing))
                if spacing.size
                else 1.0
            )
            with np.errstate(over="ignore"):  # an extreme time_unit, refused just below
                gaps = spacing / self.time_unit_
            check_gaps(gaps, self.time_unit, "the training series", scale=True)
            for key, y_part, _ in parts:  # sktime's fh check skips this (_check_fh)
                self._forecast_times(fh, key, y_part.index[-1])
            self.horizon_ = len(fh)  # training windows: this many observations ahead
        else:
            self.horizon_ = int(max(horizon_steps(fh, y_part.index).max() for _, y_part, _ in parts))
        requested_horizon = self.horizon_  # max(fh) in steps (a pretrained network's horizon may be longer)
        self._classical = None  # combine="validation": the classical models, set once the network is fitted
        self.sp_ = self.sp if self.sp is not None else seasonal_period(parts[0][1].index)
        if pretrained is not None:
            meta = pretrained[0]
            if self.horizon_ > meta["horizon"]:
                raise ValueError(
                    f"the pretrained network forecasts up to {meta['horizon']} steps ahead, but max(fh) is "
                    f"{self.horizon_}; forecast fewer steps, or train from scratch (pretrained=False)"
                )
            self.horizon_, self.context_length_ = meta["horizon"], meta["context_length"]
        elif self.context_length == "auto":
            self.context_length_ = auto_context_length(list(lengths.values()), self.horizon_, self.sp_)
        else:
            self.context_length_ = int(self.context_length)
        c = self.context_length_
        if self.irregular == "time_deltas" and max(lengths.values()) < c + 1:
            longest = max(lengths, key=lengths.get)
            raise ValueError(
                f"context_length={c} is longer than the series: training needs at least {c + 1} observations "
                f"(a context of {c} and one target), but {key_name(longest)} has {lengths[longest]}"
                + ("" if len(parts) == 1 else " (the longest series)")
            )

        values = np.concatenate([p.to_numpy() for _, p, _ in parts])
        self.y_mean_, self.y_scale_ = column_statistics(values, list(y.columns), "y")
        if self.window_location_ is not None:
            self._warn_if_levels_swamp_variations(parts)
        # A constant context at level 0 has std 0 and no level: this floor (a thousandth of the channel's
        # global spread) keeps its scaled targets finite (other windows: _norm_stats).
        self.scale_floor_ = 1e-3 * self.y_scale_
        self._statics = {}
        if X is not None:
            for key, yp, xp in parts:
                absent = yp.index[~yp.index.isin(xp.index)]
                if len(absent):
                    raise ValueError(
                        f"X has no rows for {len(absent)} time point(s) of {key_name(key)} (first "
                        f"{absent[0]}); X must cover every time point of y (X-y must have the same index)"
                    )
                self._statics[key] = self._series_statics(key, xp)
            aligned = np.concatenate([xp.reindex(yp.index).to_numpy() for _, yp, xp in parts])
            self.x_mean_, self.x_scale_ = column_statistics(aligned, list(X.columns), "X")

        # A zero-shot network never saw these series: every window of their past is held out from its
        # training, so with a calibration all of them calibrate it (split conformal, no data given up).
        zero_shot_calibration = self._zero_shot and self._calibration_in_effect(len(parts)) == "conformal"
        needs_windows = not self._zero_shot or zero_shot_calibration
        windows = [self._series_windows(key, yp, xp) for key, yp, xp in parts] if needs_windows else []
        data = Windows.concat(windows)
        if data is None and not self._zero_shot:
            raise TooFewWindowsError(
                "y gives no training window: in every window a target channel has no observed value in its "
                f"context of {c} steps, or none of the window's targets is observed; fill long gaps or use a "
                "longer context_length"
            )
        # Remember what predict and update need: each series' tail and its X.
        self._store = {}
        for key, yp, xp in parts:
            self._remember(key, yp, xp)
        if self._zero_shot:
            self.model_, self.history_, self.training_state_, self.n_iter_, self.best_epoch_ = (
                self._pretrained_network(*pretrained),
                [],
                None,
                0,
                0,
            )
            self.interval_widening_ = None
            if zero_shot_calibration:
                held_out = None if data is None else data.data()
                self.interval_widening_ = self._conformal_widening(held_out, steps=requested_horizon)
            self.calibration_ = "conformal" if self.interval_widening_ is not None else "none"
            if self.combine != "none":
                self._fit_combination(y, X, requested_horizon)
            return self
        network = self._build_network if pretrained is None else self._pretrained_network(*pretrained)
        calibration = self._calibration_in_effect(sum(w is not None for w in windows))
        if calibration in ("holdout", "refit"):
            self._fit_holdout_calibrated(network, data, windows, refit=calibration == "refit")
        else:
            train, val = self._train_val(data, windows)
            # epochs: max_epochs within min_steps..max_steps
            self._train_network(network, train, self._loss(), validation=val, settings=self._fine_tune_settings())
            self.interval_widening_ = self._conformal_widening(val) if calibration == "conformal" else None
        self.calibration_ = calibration if self.interval_widening_ is not None else "none"
        if self.combine != "none":
            self._fit_combination(y, X, requested_horizon)
        return self

    def _warn_if_levels_swamp_variations(self, parts: list) -> None:
        """Warn where most training contexts have a spread below LEVEL_FLOOR of their level: their scale is
        then the floor, the network sees their variations flattened, and the forecasts err by multiples
        of the floor (airline passengers + 1e8: by tens of thousands)."""
        counts = [level_swamped_windows(yp.to_numpy(dtype=np.float64), self.context_length_) for _, yp, _ in parts]
        swamped, judged = sum(c for c, _ in counts), sum(n for _, n in counts)
        if judged and swamped / judged > 0.5:
            warnings.warn(
                f"in {swamped} of the {judged} training contexts of {self.context_length_} steps, y varies by less "
                f"than {LEVEL_FLOOR:g} of its level (mean |y|), the least a window's scale may be: the network sees "
                "their variations flattened and its forecasts are poor; forecast y less its level (for example "
                "y - y.iloc[0]) and add the level back, or set normalize=False",
                UserWarning,
                stacklevel=caller_stacklevel(),
            )

    def _calibration_in_effect(self, n_series: int) -> str:
        """The calibration this fit applies: 'auto' resolved for a direct network without a combination
        ('conformal' on the early-stopping windows with early stopping, and zero-shot on every window of
        the series, none of which the pretrained network saw; else 'refit' for one series and 'holdout'
        for a panel), 'none' for the others; an explicit one as given (refused when fit starts
        where it cannot apply). Why: of one series, the latest windows 'holdout' leaves out of its first
        part are much of what there is to learn from, and its short continuation did not bring back the
        accuracy of a fit on all of them (the development series: geometric mean MASE 0.80-0.87 against
        0.74-0.77); 'refit' keeps that fit's accuracy exactly at a second fit's cost. A panel's first part
        still sees every series, and there 'holdout' was as accurate as a fit on all windows, or more."""
        if self.calibration != "auto":
            return self.calibration
        if self.strategy != "direct" or self.combine != "none":
            return "none"
        if not symmetric_pairs(self.quantile_levels_):  # no pair (l, 1 - l) to widen
            return "none"
        if self.early_stopping or self._zero_shot:
            return "conformal"
        return "refit" if n_series == 1 else "holdout"

    def _warn_of_unpaired_levels(self) -> None:
        """The calibration widens pairs of levels (l, 1 - l): say which levels it leaves as the network's
        (with none paired, 'auto' calibrates nothing; an explicit calibration is refused at _check_params)."""
        unpaired = unpaired_levels(self.quantile_levels_)
        if not unpaired or self.calibration == "none" or self.strategy != "direct" or self.combine != "none":
            return
        paired = bool(symmetric_pairs(self.quantile_levels_))
        warnings.warn(
            f"the quantile levels {unpaired} have no symmetric partner 1 - l in quantiles, and the calibration "
            "widens pairs (l, 1 - l): "
            + (
                "these levels stay the network's, uncalibrated"
                if paired
                else "none can be calibrated, so calibration_ is 'none' (the intervals are the network's)"
            )
            + "; add their partners to calibrate them",
            UserWarning,
            stacklevel=caller_stacklevel(),
        )

    def _fit_holdout_calibrated(self, network, data: Windows, windows: list, refit: bool = False) -> None:
        """calibration='holdout': the network trained on each series' windows before its latest
        validation_fraction (purged), its grid calibrated on those held-out windows (no epoch was chosen
        on them), then trained on to every window for HOLDOUT_CONTINUATION of its epochs, its optimizer
        state carried on (as update(update_params=True) continues): one fit and a short continuation
        instead of a second fit. refit (calibration='refit'): instead of the continuation, the network
        trained again from the start on every window, the very network of calibration='none', widened as
        calibrated. With too few windows to hold any out, the network is trained on all of them and left
        uncalibrated, with a warning."""
        settings = self._fine_tune_settings()
        how = "refit" if refit else "holdout"
        try:
            train, held_out = self._holdout_split(data, windows, calibrating=True)
        except TooFewWindowsError as error:
            chosen = f"calibration={self.calibration!r}" + ("" if self.calibration == how else f" ({how!r} here)")
            warnings.warn(
                f"{chosen}: {error}; the intervals are the network's own, not calibrated",
                UserWarning,
                stacklevel=caller_stacklevel(),
            )
            self._train_network(network, data.data(), self._loss(), settings=settings)
            self.interval_widening_ = None
            return
        # a pretrained module is trained in place: the refit starts from its weights again
        first = copy.deepcopy(network) if refit and isinstance(network, torch.nn.Module) else network
        self._train_network(first, train, self._loss(), settings=settings)
        widening = self._conformal_widening(held_out, how)
        if refit:
            self._train_network(network, data.data(), self._loss(), settings=settings)
        else:
            more = max(1, math.ceil(HOLDOUT_CONTINUATION * self.n_iter_))
            self._train_network(
                self.model_, data.data(), self._loss(), epochs=more, continue_training=True, settings=settings
            )
        self.interval_widening_ = widening

    def _conformal_widening(
        self, held_out: SequenceData | None, how: str = "conformal", steps: int | None = None
    ) -> np.ndarray | None:
        """Split-conformal calibration of the quantile grid (conformalized quantile regression) on
        the windows held out from training: (H, Q) amounts, in normalized units, by which each grid
        level moves away from the median (negative: towards it) so that the central interval of
        every symmetric pair of levels (l, 1 - l) covers 1 - 2l of the held-out targets at each
        horizon step (how: the calibration named in warnings; steps: the horizon steps forecasts are
        asked for, whose targets the warning about too few counts, default all). None without
        held-out windows; 0 for a pair whose held-out windows are too few to calibrate it
        ((n + 1)(1 - 2l) > n)."""
        if held_out is None:
            return None
        inputs = SequenceData(held_out.x)
        device = resolve_device(self.device)
        out = predict_batches(self.model_, inputs, FORECAST_BATCH, device).double().numpy()
        grid = np.sort(out, axis=-1).mean(1)  # (n, H, C, Q), as predict forms it
        target, observed = held_out.y.double().numpy(), held_out.weight.numpy() > 0
        fewest = int(observed[:, :steps].sum((0, 2)).min())  # held-out targets of the step with the fewest
        too_few = uncalibrated_coverages(fewest, self.quantile_levels_)
        if too_few:
            warnings.warn(
                f"calibration={how!r}: the held-out windows give {fewest} target(s) at the horizon step with "
                f"the fewest, too few to calibrate the central {', '.join(f'{c:.0%}' for c in too_few)} "
                f"interval(s) there (a central p interval needs at least {fewest_points_to_calibrate(max(too_few))} "
                f"for p = {max(too_few):.0%}): those steps' intervals are left as the network gives them; "
                + (
                    "pass longer series, or more of them (zero-shot, every window is held out)"
                    if self._zero_shot
                    else "raise validation_fraction or pass longer series"
                ),
                UserWarning,
                stacklevel=caller_stacklevel(),
            )
        return conformal_widening(grid, target, observed, self.quantile_levels_)

    def _build_network(self, spec=None) -> ForecastEnsemble:
        """The fitted sizes' network, of the parameters of `spec`, a forecaster (default: this one; a
        pretrained network's are those of its weights)."""
        spec = self if spec is None else spec
        C, Q = self.n_targets_, len(self.quantile_levels_)
        members = [  # drawn one after another from the seeded generator
            spec._strategy.head(
                spec.build_backbone(C + self.n_exog_),
                C,
                self.n_exog_,
                self.context_length_,
                self.horizon_,
                Q,
                **({"time_deltas": True} if self.irregular == "time_deltas" else {}),
            )
            for _ in range(spec.ensemble_size)
        ]
        return ForecastEnsemble(members)

    def _loss(self):
        return pinball_loss(torch.as_tensor(self.quantile_levels_, dtype=torch.float32))

    def _train_val(self, data: Windows, windows: list) -> tuple[SequenceData, SequenceData | None]:
        if not self.early_stopping:
            return data.data(), None
        return self._holdout_split(data, windows)

    def _holdout_split(
        self, data: Windows, windows: list, calibrating: bool = False
    ) -> tuple[SequenceData, SequenceData]:
        # Temporal hold-out: the latest validation_fraction of each series' windows. The training windows
        # whose targets reach the held-out targets are left out of both (purged), so that neither early
        # stopping nor the conformal calibration scores targets the network was trained on. Calibrating,
        # only windows whose last horizon step is observed are held out (the series' final windows, which
        # run past its end, would leave the far steps without targets), and, over the panel, at least as
        # many as the widest central interval of the grid needs at every step (shared among the series:
        # of a 196-series panel one window each; of one series all 9 a 90 % interval needs; half of a
        # series' windows at most).
        levels = self.quantile_levels_
        needed = fewest_points_to_calibrate(float(levels[-1] - levels[0])) if calibrating else 1
        series = sum(w is not None and len(w.x) >= 2 for w in windows)
        needed = -(-needed // max(series, 1))
        is_val, is_train, offset = np.zeros(len(data.x), dtype=bool), np.ones(len(data.x), dtype=bool), 0
        most_candidates = 0
        for w in windows:
            if w is None:
                continue
            n = len(w.x)
            candidates = np.flatnonzero(w.weight[:, -1, :].any(-1)) if calibrating else np.arange(n)
            most_candidates = max(most_candidates, len(candidates))
            n_val = int(round(self.validation_fraction * n))
            if calibrating:
                n_val = min(max(n_val, needed), len(candidates) // 2)
            if n >= 2 and n_val >= 1:
                held = candidates[np.argsort(w.end[candidates], kind="stable")[-n_val:]]
                is_val[offset + held] = True
                first_held_target = w.end[held].min() - self.horizon_ + 1
                is_train[offset : offset + n] = w.end < first_held_target
            offset += n
        pretrained = self.pretrained is not False  # its horizon is the network's, whatever fh is
        whose = " (the pretrained network's horizon)" if pretrained else ""
        shorter = "" if pretrained else ", a shorter horizon"
        # the split serves the calibration or, without it, early stopping: the remedy names the one in use
        remedy = "another validation_fraction, or " + ("calibration='none'" if calibrating else "early_stopping=False")
        if not is_val.any() and calibrating:
            raise TooFewWindowsError(
                f"holding out the latest validation_fraction of the windows to calibrate needs a series with two "
                f"windows whose last target, {self.horizon_} steps ahead{whose}, is observed, one to hold out and "
                f"one before it, but the series give {most_candidates} such window(s) at most (of {len(data.x)}); "
                f"use longer series{shorter} or calibration='none'"
            )
        if not is_val.any():
            raise TooFewWindowsError(
                f"holding out the latest validation_fraction of the windows needs held-out windows and training "
                f"windows before them, but the series give {len(data.x)} window(s); use longer series, {remedy}"
            )
        if not is_train.any():
            # windows exist, but the purge took every one: their targets reach the held-out targets
            raise TooFewWindowsError(
                f"holding out the latest validation_fraction of the windows leaves no training window before them: "
                f"each of the {int((~is_val).sum())} window(s) not held out has targets among the held-out windows' "
                f"(a horizon of {self.horizon_} steps{whose} is long against the series), and training on them "
                f"would score targets the network saw; use longer series{shorter}, {remedy}"
            )
        return data.data(np.flatnonzero(is_train)), data.data(np.flatnonzero(is_val))

    def _remember(self, key: tuple, y_part: pd.DataFrame, x_part: pd.DataFrame | None) -> None:
        """Keep the last context_length + horizon_ observations (a context, plus the windows
        whose targets reach new data in update) and the X from that point on."""
        keep = self.context_length_ + self.horizon_
        tail = y_part.iloc[-keep:]
        if x_part is not None:
            x_part = x_part[x_part.index >= tail.index[0]]
        self._store[key] = (tail, x_part)

    # ------------------------------------------------------------ update
    def _update(self, y, X=None, update_params=True):
        self._check_x_columns(X, "update")
        self._check_y_columns(y)
        if X is not None:
            X = X.reindex(columns=self._x_columns)  # static columns may be left out
        parts = self._split_xy(y, X)
        fine_tune = []
        for key, yp, xp in parts:
            old_y, old_x = self._store.get(key, (None, None))
            merged_y, merged_x = merge(old_y, yp), merge(old_x, xp)
            if self.n_exog_:
                self._statics[key] = self._series_statics(key, xp)
            if update_params and self.update_epochs and not self._zero_shot:
                n_old = 0 if old_y is None else int((merged_y.index < yp.index[0]).sum())
                # windows whose targets reach the new observations
                first = max(0, n_old - self.context_length_ - self.horizon_ + 1)
                fine_tune.append(self._series_windows(key, merged_y, merged_x, min_start=first))
            self._remember(key, merged_y, merged_x)
        data = Windows.concat(fine_tune)
        if data is not None:
            # A handful of epochs on the newest windows, continuing the optimizer state.
            self._train_network(
                None,
                data.data(),
                self._loss(),
                epochs=self.update_epochs,
                continue_training=True,
                seed=self._seed_ + len(self.history_),
            )
        if self._combining:
            self._update_combination(y, update_params)
        return self

    def _check_y_columns(self, y: pd.DataFrame) -> None:
        if y.shape[1] != self.n_targets_:
            raise ValueError(f"y has {y.shape[1]} columns, but {type(self).__name__} was fitted with {self.n_targets_}")
