"""SSMForecaster's forecasts: each series' context (its last context_length observations, and X
around them), normalized as its training windows were, one batched pass of the network, and the
quantile grids back in the units of y, assembled into sktime's frames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ..training import on_device, resolve_device
from ._strategies import Contexts, interpolate_quantiles, quantile_probabilities, widen
from ._windows import future_times, impute, key_name, pad_front, split_instances
from ._windows import steps as horizon_steps


class ForecastPredictMixin:
    """predict and predict_quantiles of SSMForecaster (and what historical_forecasts and stream share)."""

    def _predict(self, fh, X=None):
        results = self._forecast(fh, X, alpha=None)
        return self._assemble([(key, times, point) for key, times, point, _ in results], self._y_columns)

    def _predict_quantiles(self, fh, X, alpha):
        alpha = quantile_probabilities(alpha)
        results = self._forecast(fh, X, alpha=alpha)
        # (k, C, A) -> columns ordered variable-major, as in _get_columns
        frames = [(key, times, q.reshape(len(times), -1)) for key, times, _, q in results]
        return self._assemble(frames, self._get_columns(method="predict_quantiles", alpha=list(alpha)))

    def _assemble(self, results, columns, names=None) -> pd.DataFrame:
        values = np.concatenate([v for _, _, v in results]) if results else np.zeros((0, len(columns)))
        if len(results) == 1 and results[0][0] == ():
            return pd.DataFrame(values, index=results[0][1], columns=columns)
        # level by level (from_tuples builds a Python tuple per row: slow for many origins)
        sizes = [len(times) for _, times, _ in results]
        keys = [
            pd.Index([key[i] for (key, _, _), size in zip(results, sizes) for _ in range(size)])
            for i in range(len(results[0][0]))
        ]
        times = results[0][1].append([t for _, t, _ in results[1:]])
        index = pd.MultiIndex.from_arrays([*keys, times], names=names or self._index_names)
        return pd.DataFrame(values, index=index, columns=columns)

    def _contexts(self, fh, X):
        """Per series: key, context y (c, C), future times of the requested steps, the steps, X windows."""
        self._check_x_columns(X, "predict")
        x_new = dict(split_instances(X.reindex(columns=self._x_columns))) if X is not None else {}
        c, cutoff = self.context_length_, self.cutoff[0]
        items = []
        for key, (tail, x_old) in self._store.items():
            history = tail[tail.index <= cutoff]
            if len(history) < c and self.irregular == "time_deltas":
                raise ValueError(
                    f"context_length={c} is longer than the series: forecasting needs the last {c} observations, "
                    f"but {key_name(key)} has {len(history)}"
                )
            before = history.index[:-c] if len(history) > c else None
            history = history.iloc[-c:]
            self._check_observed(
                history.to_numpy(),
                f"the context of {key_name(key)} (its last {min(c, len(history))} observations, up to "
                f"{history.index[-1]})",
            )
            if self.irregular == "time_deltas":
                items.append(self._irregular_context(key, fh, history, before, x_old, x_new))
                continue
            steps = self._check_steps(horizon_steps(fh, history.index), key)
            x_ctx = x_future = None
            if self.n_exog_:
                # direct: the head reads X at all trained steps; recursive: up to the last requested one
                n_future = self._strategy.future_steps(self.horizon_, int(steps.max()))
                future = future_times(fh, history.index, range(1, n_future + 1))
                x_ctx, x_future = self._context_x(
                    key, x_old, x_new, history.index, future, f"the forecast steps 1..{n_future}"
                )
                x_ctx = pad_front(x_ctx, c, 0.0)
            context = pad_front(history.to_numpy(), c, np.nan)  # a short series: missing values first
            items.append((key, context, future_times(fh, history.index, steps), steps, x_ctx, x_future))
        return items

    def _check_observed(self, context: np.ndarray, where: str) -> None:
        """context (c, C): a forecast needs at least one observed value of every target column."""
        empty = np.isnan(context).all(0)
        if empty.any():
            raise ValueError(
                f"{where} has no observed value of {list(self._y_columns[empty])}; a forecast needs at "
                "least one: pass the missing values, or use a longer context_length"
            )

    def _check_steps(self, steps: np.ndarray, key: tuple) -> np.ndarray:
        if steps.min() < 1:
            raise ValueError(f"fh reaches into the observed data of {key_name(key)} (steps {steps.tolist()})")
        if steps.max() > self.horizon_:
            raise ValueError(
                f"fh needs {steps.max()} steps ahead for {key_name(key)}, but the network was trained for "
                f"{self.horizon_}; refit with this fh"
            )
        return steps

    def _forecast_times(self, fh, key: tuple, last) -> pd.Index:
        """irregular='time_deltas': the time stamps of fh, sorted, checked to follow `last` (key's last observed)."""
        try:
            future = fh.to_absolute_index(self.cutoff).sort_values()
        except Exception as error:  # sktime needs a freq for a relative fh on a DatetimeIndex
            raise ValueError(
                f"with irregular='time_deltas' give fh as the time stamps to forecast (an absolute "
                f"ForecastingHorizon); a relative fh has no time stamps here: {error}"
            ) from None
        if future[0] <= last:
            raise ValueError(
                f"fh reaches into the observed data of {key_name(key)}: forecasts start after {last}; give the "
                "time stamps to forecast as fh (after update, those of the last fh may lie in the past)"
            )
        return future

    def _irregular_context(self, key, fh, history, before, x_old, x_new):
        """_contexts' item with irregular='time_deltas': every time stamp of fh is one rolled step; the
        gap channel follows X (the gap into each context step, then into each forecast time)."""
        future = self._forecast_times(fh, key, history.index[-1])
        gaps = self._gaps(history.index.append(future), f"the context and forecast times of {key_name(key)}", before)
        x_ctx, x_future = gaps[: len(history)], gaps[len(history) :]
        if self.n_exog_:
            xc, xf = self._context_x(key, x_old, x_new, history.index, future, "the forecast times")
            x_ctx, x_future = np.concatenate([xc, x_ctx], axis=1), np.concatenate([xf, x_future], axis=1)
        return key, history.to_numpy(), future, np.arange(1, len(future) + 1), x_ctx, x_future

    def _forecast(self, fh, X, alpha):
        """[(key, absolute times, point (k, C), quantiles (k, C, A) or None)] in original units."""
        items = self._contexts(fh, X)
        outputs = self._run([(ctx, steps, x_ctx, x_future) for _, ctx, _, steps, x_ctx, x_future in items], alpha)
        return [(item[0], item[2], point, q) for item, (point, q) in zip(items, outputs)]

    def _run(self, items, alpha):
        """_forecast_batch, refusing non-finite forecasts instead of returning them."""
        results = self._forecast_batch(items, alpha)
        bad = [
            i
            for i, (point, q) in enumerate(results)
            if not np.isfinite(point).all() or (q is not None and not np.isfinite(q).all())
        ]
        if bad:
            largest = max(float(np.nanmax(np.abs(items[i][0]))) for i in bad)
            raise FloatingPointError(
                f"{type(self).__name__} computed non-finite forecasts for {len(bad)} of {len(results)} contexts. "
                f"Likely causes: values far outside the training data (largest |y| in these contexts: {largest:.3g}; "
                f"the training values lie within {self.y_mean_.min():.3g} +- a few x {self.y_scale_.max():.3g}) or a "
                "model whose training diverged"
            )
        return results

    @torch.no_grad()
    def _forecast_batch(self, items, alpha):
        """One batched forward for n forecasts: items [(context y (c, C), steps (k,), X context
        (c, C_x) or None, future X (n_future, C_x) or None)] ->
        [(point (k, C), quantiles (k, C, A) or None)] in original units."""
        device = resolve_device(self.device)
        model = self.model_ = on_device(self.model_, device)
        model.eval()
        levels = self.quantile_levels_
        median = int(np.flatnonzero(levels == 0.5)[0])
        context = np.stack([item[0].T for item in items])  # (n, C, c)
        shift, scale = self._norm_stats(context)
        c = context.shape[-1]
        exog = self.n_exog_ or self.irregular == "time_deltas"  # the gaps travel as the last covariate
        ctx = Contexts(
            impute((context - shift[..., :c]) / scale),  # gaps carried forward
            np.stack([item[2].T for item in items]) if exog else None,
            [item[3] for item in items] if exog else None,
            int(max(item[1].max() for item in items)),
        )
        # (n, 1, C), or for "drift" the line's points over the horizon (n, H, C)
        shift_t = np.transpose(shift if shift.shape[-1] == 1 else shift[..., c:], (0, 2, 1))
        scale_t = np.transpose(scale, (0, 2, 1))
        results = []
        if self.strategy == "direct":
            grid, _ = self._strategy.forecast(model, ctx, self.horizon_, device)
            widening = getattr(self, "interval_widening_", None)
            if widening is not None:
                grid = widen(grid, widening, levels)
            grid = grid * scale_t[..., None] + shift_t[..., None]  # (n, H, C, Q)
            for i, (_, wanted, _, _) in enumerate(items):
                g = grid[i, wanted - 1]
                results.append((g[..., median], None if alpha is None else interpolate_quantiles(g, levels, alpha)))
            return results
        point, paths = self._strategy.forecast(
            model,
            ctx,
            self.horizon_,
            device,
            median=median,
            levels=levels,
            n_paths=0 if alpha is None else self.n_sample_paths,
            seed=self._seed_,
        )
        point = point * scale_t + shift_t
        if paths is not None:
            paths = paths * scale_t[:, None, None] + shift_t[:, None, None]  # (n, P, members, S, C)
        for i, (_, wanted, _, _) in enumerate(items):
            q = None
            if paths is not None:
                # each member's path quantiles, averaged over the members: (k, C, A)
                q = np.moveaxis(np.quantile(paths[i][:, :, wanted - 1], alpha, axis=0).mean(1), 0, -1)
            results.append((point[i, wanted - 1], q))
        return results


__all__ = ["ForecastPredictMixin"]
