"""Export of a fitted SSMForecaster for serving without ssmts or pandas: one ONNX graph (or a
TorchScript module) from the last `context_length` observations of a batch of series to their
quantile forecasts over the trained horizon, in the units of y.

The graph holds what predict does to a context: the window's normalization (normalize:
location and scale of the observed values, the scale floor, the drift line), missing values
carried forward, the network with its SSM layers as direct convolutions (ssmts.nn.export), the
sorting and averaging of the members' quantile grids, the conformal widening of the intervals,
and the way back to the units of y. The statistics are computed in float64 as predict does; the
network runs in float32.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .._version import __version__
from ..estimators._export import check_format, serving_network, write_onnx, write_torchscript
from ..nn.export import InputCheck

INPUT_NAME = "y"
OUTPUT_NAMES = ("forecast", "quantiles", "valid")


class ForecastServingModel(nn.Module):
    """y (batch, n_targets, context_length) float64, NaN where missing ->
    forecast (batch, horizon, n_targets) float64 (the median, = predict at fh 1..horizon) and
    quantiles (batch, horizon, n_targets, Q) float64 at the fitted quantile levels.

    valid (batch,) bool is False for a series whose context predict refuses: one holding inf, one
    whose forecasts are not finite (values so large that the window statistics overflow, or a
    target with no observed value in the context). Its forecasts and quantiles are then all NaN."""

    def __init__(
        self,
        network: nn.Module,
        context_length: int,
        horizon: int,
        location: str | None,
        y_mean: np.ndarray,
        y_scale: np.ndarray,
        scale_floor: np.ndarray,
        levels: np.ndarray,
        widening: np.ndarray | None,
    ):
        super().__init__()
        self.expected = InputCheck(INPUT_NAME, len(y_mean), "targets", double=True, length=context_length)
        self.network = network.eval()
        self.context_length, self.horizon, self.location = context_length, horizon, location
        self.median = int(np.flatnonzero(levels == 0.5)[0])
        c = context_length

        def buffer(name, values):
            self.register_buffer(name, torch.as_tensor(np.asarray(values, dtype=np.float64)))

        buffer("y_mean", y_mean[:, None])  # (C, 1)
        buffer("y_scale", y_scale[:, None])
        buffer("scale_floor", scale_floor[:, None])
        buffer("steps", np.arange(c + horizon))
        buffer("earlier", np.tril(np.ones((c, c))))  # earlier[t, s] = 1 where s <= t
        # each level moved away from the median by the conformal widening: (H, 1, Q)
        sign = np.sign(np.asarray(levels) - 0.5)
        buffer("widening", np.zeros((horizon, 1, len(levels))) if widening is None else (sign * widening)[:, None, :])
        self.eval().requires_grad_(False)

    def _last_observed_index(self, observed: torch.Tensor) -> torch.Tensor:
        """observed (n, C, c) bool -> (n, C, c) int64: the index of the last observed step <= t (0 before
        the first), as a masked maximum (ONNX has no cumulative maximum)."""
        marked = observed.to(torch.float64) * self.steps[: self.context_length]  # (n, C, c)
        return (marked[..., None, :] * self.earlier).amax(-1).to(torch.int64)

    def _norm_stats(self, y: torch.Tensor, observed: torch.Tensor, last: torch.Tensor):
        """SSMForecaster._norm_stats: shift (n, C, 1) or (n, C, c + horizon) for drift, scale (n, C, 1)."""
        if self.location is None:
            return self.y_mean.expand(y.shape[0], -1, -1), self.y_scale.expand(y.shape[0], -1, -1)
        zeros = torch.where(observed, y, torch.zeros_like(y))
        count = observed.sum(-1, keepdim=True).to(y.dtype)
        mean = zeros.sum(-1, keepdim=True) / count
        var = torch.where(observed, y - mean, torch.zeros_like(y)).pow(2).sum(-1, keepdim=True) / count
        shift = mean if self.location == "mean" else last
        level = zeros.abs().sum(-1, keepdim=True) / count
        floor = torch.where(level > 0, 1e-3 * level, self.scale_floor)
        scale = torch.sqrt(var + floor**2)
        if self.location == "drift":
            c = self.context_length
            steps = self.steps[:c].expand_as(y)
            first = torch.where(observed, steps, torch.full_like(y, c)).amin(-1, keepdim=True)
            final = torch.where(observed, steps, torch.full_like(y, -1.0)).amax(-1, keepdim=True)
            start = torch.gather(zeros, -1, first.clamp(max=c - 1).to(torch.int64))
            slope = torch.where(
                final > first, (shift - start) / torch.clamp(final - first, min=1.0), torch.zeros_like(shift)
            )
            shift = shift + slope * (self.steps - final)
        return shift, scale

    def forward(self, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        c, H = self.context_length, self.horizon
        y = self.expected(y)
        observed = ~torch.isnan(y)
        index = self._last_observed_index(observed)
        shift, scale = self._norm_stats(y, observed, torch.gather(y, -1, index[..., -1:]))
        # normalized, then carried forward (as predict's impute); 0 before the first observation
        normalized = torch.gather((y - shift[..., :c]) / scale, -1, index)
        normalized = torch.where(torch.isnan(normalized), torch.zeros_like(normalized), normalized)
        x = torch.cat([normalized, torch.zeros_like(normalized[..., :1]).expand(-1, -1, H)], -1)
        grid = self.network(x.to(torch.float32)).to(torch.float64)  # (n, members, H, C, Q)
        grid = torch.sort(torch.sort(grid, -1).values.mean(1) + self.widening, -1).values  # (n, H, C, Q)
        shift_t = (shift if shift.shape[-1] == 1 else shift[..., c:]).transpose(1, 2)  # (n, 1 or H, C)
        grid = grid * scale.transpose(1, 2)[..., None] + shift_t[..., None]
        # the model cannot tell a context without observations: its forecasts are NaN, not a number
        valid = ~torch.isinf(y).flatten(1).any(1) & torch.isfinite(grid).flatten(1).all(1)  # (n,)
        grid = torch.where(valid[:, None, None, None], grid, torch.full_like(grid, float("nan")))
        return grid[..., self.median], grid, valid


class ForecasterExportMixin:
    """SSMForecaster.export."""

    def export(self, path: str | Path, format: str = "onnx") -> Path:
        """Write the fitted forecaster as one file that serves without ssmts, sktime or pandas: an
        ONNX graph (onnxruntime, from any language) or a TorchScript module (``torch.jit.load``).

        Input ``y``: float64 (batch, n_targets, context_length): the last context_length
        observations of each series (NaN where missing; a series shorter than the context is
        NaN-padded at the front, as predict does), in the order of the fitted columns.
        Outputs: ``forecast`` (batch, horizon, n_targets), the point forecast (= predict at
        fh = 1..horizon after the last observation) and ``quantiles`` (batch, horizon, n_targets, Q)
        at the levels in the metadata ``quantile_levels`` (= predict_quantiles at those levels),
        both float64 in the units of y. The metadata (ONNX metadata_props; TorchScript: the extra
        file ``ssmts.json``) also records context_length, horizon, the target columns and the
        seasonal period.

        Not exported: the recursive strategy (its forecast is a loop over the layers' step mode,
        feeding draws back), exogenous X and irregular time stamps (their remembered values,
        past-only and static columns are the forecaster's state, not a function of one input),
        layer="lncde"; each is refused with its reason. The graph does not check its outputs
        (predict raises on non-finite forecasts).
        """
        name = type(self).__name__
        if not self.is_fitted or not hasattr(self, "model_"):
            raise ValueError(f"this {name} is not fitted yet; fit it before export")
        check_format(format)
        reasons = {
            "strategy='recursive'": self.strategy == "recursive",
            "exogenous X": bool(self.n_exog_),
            "irregular='time_deltas'": self.irregular == "time_deltas",
        }
        refused = [what for what, applies in reasons.items() if applies]
        if refused:
            raise ValueError(
                f"this {name} cannot be exported: {', '.join(refused)} is not part of the exported graph "
                "(only the direct strategy on y alone, regular time stamps, exports)"
            )
        c, H = self.context_length_, self.horizon_
        model = ForecastServingModel(
            serving_network(self.model_, c + H, name),
            c,
            H,
            self.window_location_,
            self.y_mean_,
            self.y_scale_,
            self.scale_floor_,
            self.quantile_levels_,
            getattr(self, "interval_widening_", None),
        )
        metadata = {
            "description": f"ssmts {name}: {INPUT_NAME} float64 (batch, n_targets, {c}) -> forecast "
            f"(batch, {H}, n_targets), quantiles (batch, {H}, n_targets, {len(self.quantile_levels_)})",
            "estimator": name,
            "ssmts_version": __version__,
            "context_length": str(c),
            "horizon": str(H),
            "targets": json.dumps([str(column) for column in self._y_columns]),
            "quantile_levels": json.dumps(self.quantile_levels_.tolist()),
            "seasonal_period": str(self.sp_),
            "outputs": json.dumps(list(OUTPUT_NAMES)),
        }
        example = torch.zeros(2, self.n_targets_, c, dtype=torch.float64)
        path = Path(path)
        if format == "onnx":
            write_onnx(model, path, example, ({0: torch.export.Dim("batch")},), INPUT_NAME, OUTPUT_NAMES, metadata)
        else:
            write_torchscript(model, path, example, metadata)
        return path


__all__ = ["ForecastServingModel", "ForecasterExportMixin"]
