"""Plots of what a deep SSM learned, and of how its training went.

Every function accepts what you have at hand: a fitted estimator (``SSMClassifier``,
``SSMRegressor``, ``SSMTransformer``, the sktime estimators, or a ``Pipeline`` /
``GridSearchCV`` ending in one), an ``ssmts.nn.SSMBackbone`` (or any ``torch.nn.Module``
holding SSM layers), or a single ``ssmts.nn.SSM`` layer. Each draws with matplotlib's
object-oriented API, takes an optional ``ax`` (one Axes to draw into) or ``fig`` (a
Figure to fill with panels), and returns the Figure. Nothing calls ``plt.show()``, so
the functions work with any backend, including the non-interactive "Agg".

- ``plot_eigenvalues``: learned eigenvalues Lambda of every layer in the complex plane
  (real part against arcsinh of the imaginary part, as eSSM Fig. 8), optionally with
  the initialization as black dots.
- ``plot_step_sizes``: the learned step sizes Delta of every layer on a log axis (eSSM Fig. 9).
- ``plot_kernels``: the learned convolution kernels ``K_l = C Abar^l Bbar`` over the lag.
- ``plot_transfer_function``: the gain ``|G(i w)|`` of one layer (continuous time), or
  its exact discrete frequency response in Hz; see ``ssmts.nn.analysis``.
- ``plot_history``: training and validation loss and the validation score per epoch.
- ``plot_sensitive_frequencies``: ``|G(i w) - G_HiPPO(i w)|`` of one layer with its spikes
  marked (``ssmts.nn.analysis.sensitive_frequencies``), on a continuous-frequency axis with
  the digital frequency of each spike in the legend.

The figures of the PTD experiments, drawn from their results, live beside the experiments
(``ssmts.tasks.ptd_figures``).

matplotlib is imported only when a function is called.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .nn.analysis import SensitiveModes, frequency_response, sensitive_frequencies, transfer_function
from .nn.ssm import SSM

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "plot_eigenvalues",
    "plot_step_sizes",
    "plot_kernels",
    "plot_transfer_function",
    "plot_history",
    "ssm_layers_of",
    "plot_sensitive_frequencies",
]

_INITIAL_STYLE = dict(color="black", s=10, zorder=3, label="initialization")


# ---------------------------------------------------------------- resolving inputs
def ssm_layers_of(obj: Any) -> list[SSM]:
    """The SSM layers inside `obj`, in network order.

    Args:
        obj: an ``SSM`` layer, any ``torch.nn.Module`` containing SSM layers (a backbone or
            a wrapper around one), a fitted ssmts estimator (its ``model_``; the sktime
            panel adapters through their ``estimator_``), or a fitted ``Pipeline`` /
            ``GridSearchCV`` whose final estimator is one.

    Returns:
        The ``ssmts.nn.SSM`` modules, first layer first.

    Raises:
        sklearn.exceptions.NotFittedError: for an estimator that has not been fitted.
        TypeError: for anything without SSM layers.
    """
    from torch import nn

    if isinstance(obj, SSM):
        return [obj]
    if isinstance(obj, nn.Module):
        layers = [m for m in obj.modules() if isinstance(m, SSM)]
        if not layers:
            raise TypeError(f"the {type(obj).__name__} module contains no ssmts.nn.SSM layer")
        return layers
    network = _fitted_network(obj)
    if not any(isinstance(m, SSM) for m in network.modules()):
        estimator = type(_final_estimator(obj)).__name__
        raise TypeError(
            f"{estimator}'s network has no trained ssmts.nn.SSM layer to draw (the feature estimators read a "
            "fixed bank of kernels, FeatureReadout): these plots take the networks' estimators (SSMClassifier, "
            "SSMRegressor, SSMTransformer, SSMForecaster), a backbone or a layer"
        )
    return ssm_layers_of(network)


def _final_estimator(obj: Any) -> Any:
    """Unwrap GridSearchCV-like (best_estimator_), Pipeline-like (steps) and adapter (estimator_) objects."""
    if hasattr(obj, "best_estimator_"):
        return _final_estimator(obj.best_estimator_)
    if hasattr(obj, "param_grid") or hasattr(obj, "param_distributions"):
        _raise_not_fitted(obj, f"{type(obj).__name__} has no best_estimator_ (not fitted, or refit=False)")
    steps = getattr(obj, "steps", None)
    if isinstance(steps, list) and steps and isinstance(steps[-1], tuple):
        return _final_estimator(steps[-1][1])
    if not hasattr(obj, "model_") and hasattr(obj, "estimator_"):
        # sktime's panel classifiers and regressors delegate to a fitted sklearn estimator.
        return _final_estimator(obj.estimator_)
    return obj


def _fitted_network(obj: Any):
    estimator = _final_estimator(obj)
    network = getattr(estimator, "model_", None)
    if network is not None:
        return network
    if hasattr(estimator, "fit") or hasattr(estimator, "get_params"):
        _raise_not_fitted(estimator, f"{type(estimator).__name__} is not fitted yet")
    raise TypeError(
        f"expected an SSM layer, a torch module with SSM layers, or a fitted ssmts estimator; got {type(obj).__name__}"
    )


def _raise_not_fitted(estimator: Any, reason: str) -> None:
    from sklearn.exceptions import NotFittedError

    raise NotFittedError(f"{reason}: call fit first, then plot what it learned")


def _history_of(obj: Any) -> list[dict]:
    if isinstance(obj, Sequence) and not isinstance(obj, (str, bytes)):
        history = list(obj)
    elif hasattr(obj, "to_dict") and hasattr(obj, "columns"):  # a pandas DataFrame
        history = obj.to_dict("records")
    else:
        estimator = _final_estimator(obj)
        history = getattr(estimator, "history_", None)
        if history is None:
            if hasattr(estimator, "fit") or hasattr(estimator, "get_params"):
                _raise_not_fitted(estimator, f"{type(estimator).__name__} has no training history yet")
            raise TypeError(f"expected a fitted ssmts estimator or a list of per-epoch dicts, got {type(obj).__name__}")
        history = list(history)
    if not all(isinstance(record, Mapping) for record in history):
        raise TypeError("a training history is a list of dicts, one per epoch (e.g. estimator.history_)")
    return history


def _kept_epoch_of(obj: Any) -> int | None:
    """The epoch whose weights a fitted estimator kept (its best_epoch_; 0: the starting weights), or
    None for a bare history or an estimator that does not say."""
    if isinstance(obj, Sequence) or (hasattr(obj, "to_dict") and hasattr(obj, "columns")):
        return None
    kept = getattr(_final_estimator(obj), "best_epoch_", None)
    return None if kept is None else int(kept)


# ---------------------------------------------------------------- figure helpers
def _new_figure(figsize: tuple[float, float]) -> "Figure":
    import matplotlib.pyplot as plt

    return plt.figure(figsize=figsize, layout="constrained")


def panel_grid(fig: "Figure | None", ax: "Axes | None", n_panels: int, panel_size=(3.6, 3.0), ncols=None):
    """(figure, list of n_panels axes). With `ax`, every panel is that one Axes."""
    if ax is not None:
        return ax.figure, [ax] * n_panels
    ncols = min(n_panels, 4) if ncols is None else max(1, min(int(ncols), n_panels))
    nrows = math.ceil(n_panels / ncols)
    if fig is None:
        fig = _new_figure((panel_size[0] * ncols, panel_size[1] * nrows))
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for extra in axes[n_panels:]:
        extra.remove()
    return fig, list(axes[:n_panels])


def _single_axes(fig: "Figure | None", ax: "Axes | None", figsize=(6.0, 4.0)) -> tuple["Figure", "Axes"]:
    if ax is not None:
        return ax.figure, ax
    if fig is None:
        fig = _new_figure(figsize)
    return fig, fig.add_subplot(1, 1, 1)


def _numpy(tensor) -> np.ndarray:
    import torch

    array = tensor.detach().cpu()
    return (array.to(torch.complex128) if array.is_complex() else array.to(torch.float64)).numpy()


def _matching_initial_layers(initial: Any, layers: list[SSM]) -> list[SSM] | None:
    if initial is None:
        return None
    reference = ssm_layers_of(initial)
    if len(reference) != len(layers):
        raise ValueError(f"initial has {len(reference)} SSM layers but the model has {len(layers)}")
    for i, (a, b) in enumerate(zip(reference, layers)):
        if a.Lambda.shape != b.Lambda.shape:
            raise ValueError(
                f"layer {i + 1} of initial has Lambda of shape {tuple(a.Lambda.shape)}, "
                f"the model's has {tuple(b.Lambda.shape)}; initial must be the same architecture"
            )
    return reference


# ---------------------------------------------------------------- eigenvalues
def plot_eigenvalues(
    model: Any,
    *,
    initial: Any = None,
    include_conjugates: bool = False,
    ncols: int | None = None,
    ax: "Axes | None" = None,
    fig: "Figure | None" = None,
) -> "Figure":
    """Learned eigenvalues Lambda of every SSM layer in the complex plane (eSSM Fig. 8).

    One panel per layer: the real part on the x-axis and ``arcsinh`` of the imaginary
    part on the y-axis (arcsinh is linear near 0 and logarithmic far from it, so slow
    and fast oscillating modes are both visible). Colours distinguish heads of
    multi-head layers; an ``"ldnn"`` bidirectional layer's backward eigenvalues are
    drawn as crosses.

    Args:
        model: fitted estimator, backbone, module or SSM layer (see ``ssm_layers_of``).
        initial: the same architecture at initialization (e.g. an unfitted backbone built
            with the same seed), drawn as black dots under the learned eigenvalues.
        include_conjugates: also draw the conjugate of every stored eigenvalue of
            ``conj_sym`` layers, i.e. the full spectrum of the real system.
        ncols: panels per row (default up to 4).
        ax: draw every layer into this one Axes instead (colours then cycle per head only).
        fig: a Figure to fill with the panels.

    Returns:
        The matplotlib Figure.
    """
    layers = ssm_layers_of(model)
    reference = _matching_initial_layers(initial, layers)
    fig, axes = panel_grid(fig, ax, len(layers), ncols=ncols)

    def points(layer: SSM, backward: bool = False) -> np.ndarray:
        Lambda = _numpy(layer._lambda("Lambda_backward" if backward else "Lambda"))  # (heads, P)
        if include_conjugates and layer.conj_sym:
            Lambda = np.concatenate([Lambda, np.conj(Lambda)], axis=1)
        return Lambda

    for index, (layer, panel) in enumerate(zip(layers, axes)):
        if reference is not None:
            init = points(reference[index]).ravel()
            panel.scatter(init.real, np.arcsinh(init.imag), **_INITIAL_STYLE)
        Lambda = points(layer)
        for head in range(layer.heads):
            label = f"head {head + 1}" if layer.heads > 1 else "learned"
            panel.scatter(
                Lambda[head].real,
                np.arcsinh(Lambda[head].imag),
                s=14,
                alpha=0.75,
                color=f"C{head % 10}",
                label=label,
                zorder=4,
            )
        if layer.bidirectional == "ldnn":
            back = points(layer, backward=True).ravel()
            panel.scatter(back.real, np.arcsinh(back.imag), marker="x", s=16, color="C3", label="backward", zorder=4)
        panel.set_xlabel("Re λ")
        panel.set_ylabel("arcsinh(Im λ)")
        if ax is None:
            panel.set_title(f"layer {index + 1}")
    return _finish_layer_figure(fig, axes, ax, len(layers), "Learned eigenvalues λ per layer")


# ---------------------------------------------------------------- step sizes
def plot_step_sizes(
    model: Any,
    *,
    initial: Any = None,
    show_init_range: bool = True,
    ax: "Axes | None" = None,
    fig: "Figure | None" = None,
) -> "Figure":
    """Learned step sizes Delta of every SSM layer (eSSM Fig. 9).

    ``ln Delta`` on the x-axis, one row per layer on the y-axis (layer 1 at the top),
    one dot per state (points are spread vertically a little so that they do not hide
    each other). Delta includes any ``dt_scale`` set for zero-shot resampling.

    Args:
        model: fitted estimator, backbone, module or SSM layer.
        initial: the same architecture at initialization, drawn as black dots just
            below each layer's row.
        show_init_range: dashed lines at ``ln dt_min`` and ``ln dt_max``, the range the
            step sizes were drawn from at initialization.
        ax, fig: where to draw (one Axes).

    Returns:
        The matplotlib Figure.
    """
    layers = ssm_layers_of(model)
    reference = _matching_initial_layers(initial, layers)
    fig, panel = _single_axes(fig, ax, figsize=(6.0, 1.0 + 0.6 * len(layers)))
    jitter = np.random.default_rng(0)
    for index, layer in enumerate(layers):
        log_delta = np.log(_numpy(layer.Delta).ravel())
        offsets = jitter.uniform(-0.12, 0.12, size=log_delta.size)
        panel.scatter(
            log_delta, index + offsets, s=12, alpha=0.75, color="C0", label="learned" if index == 0 else None, zorder=3
        )
        if reference is not None:
            log_init = np.log(_numpy(reference[index].Delta).ravel())
            panel.scatter(
                log_init,
                index + 0.3 + jitter.uniform(-0.05, 0.05, size=log_init.size),
                **{**_INITIAL_STYLE, "s": 6, "label": "initialization" if index == 0 else None},
            )
    if show_init_range:
        bounds = sorted({(layer.dt_min, layer.dt_max) for layer in layers})
        for k, (low, high) in enumerate(bounds):
            for value in (low, high):
                panel.axvline(
                    math.log(value),
                    color="0.5",
                    ls="--",
                    lw=0.9,
                    label="initialization range" if k == 0 and value == low else None,
                )
    panel.set_yticks(range(len(layers)), [f"layer {i + 1}" for i in range(len(layers))])
    panel.set_ylim(len(layers) - 0.5, -0.5)
    panel.set_xlabel("ln Δ")
    panel.set_title("Learned step sizes Δ per layer")
    _dedupe_legend(panel, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    return fig


# ---------------------------------------------------------------- kernels
def plot_kernels(
    model: Any,
    *,
    length: int = 256,
    pairs: Sequence[tuple[int, int]] | None = None,
    max_pairs: int = 6,
    sample_rate: float | None = None,
    ncols: int | None = None,
    ax: "Axes | None" = None,
    fig: "Figure | None" = None,
) -> "Figure":
    """Learned convolution kernels ``K_l = 2 Re(C Abar^l Bbar)`` of every SSM layer.

    One panel per layer, one curve per (output channel m, input channel h) pair: how an
    impulse on channel h at time 0 shows up on channel m l steps later (the SSM part of
    the layer, without the feed-through D and the head mixer; ``SSM.kernel``).

    Args:
        model: fitted estimator, backbone, module or SSM layer.
        length: number of lags to draw.
        pairs: (m, h) pairs to draw; default the first ``max_pairs`` diagonal pairs
            (m, m), i.e. each channel's response to itself.
        max_pairs: how many diagonal pairs the default draws.
        sample_rate: samples per second; when given, the x-axis is in seconds.
        ncols: panels per row.
        ax: draw every layer into this one Axes instead.
        fig: a Figure to fill with the panels.

    Returns:
        The matplotlib Figure.
    """
    import torch

    if not (isinstance(length, (int, np.integer)) and length >= 1):
        raise ValueError(f"length must be a positive integer, got {length!r}")
    if sample_rate is not None and (
        isinstance(sample_rate, bool) or not isinstance(sample_rate, numbers.Real) or not sample_rate > 0
    ):
        raise ValueError(f"sample_rate must be a number > 0, got {sample_rate!r}")
    layers = ssm_layers_of(model)
    fig, axes = panel_grid(fig, ax, len(layers), panel_size=(4.0, 2.8), ncols=ncols)
    lags = np.arange(length) / (sample_rate or 1.0)
    for index, (layer, panel) in enumerate(zip(layers, axes)):
        chosen = _channel_pairs(layer.d_output, layer.d_model, pairs, max_pairs)
        with torch.no_grad():
            K = _numpy(layer.kernel(length))
        for m, h in chosen:
            label = f"K[{m}, {h}]" if ax is None else f"layer {index + 1}: K[{m}, {h}]"
            panel.plot(lags, K[m, h], lw=1.1, label=label)
        panel.axhline(0.0, color="0.6", lw=0.8)
        panel.set_xlabel("lag (s)" if sample_rate else "lag (steps)")
        panel.set_ylabel("kernel")
        if ax is None:
            panel.set_title(f"layer {index + 1}")
    return _finish_layer_figure(fig, axes, ax, len(layers), "Learned convolution kernels per layer")


def _channel_pairs(n_outputs: int, n_inputs: int, pairs, max_pairs: int) -> list[tuple[int, int]]:
    """Validated (m, h) pairs; default the first `max_pairs` diagonal pairs."""
    if pairs is None:
        if max_pairs < 1:
            raise ValueError(f"max_pairs must be >= 1, got {max_pairs}")
        return [(i, i) for i in range(min(max_pairs, n_outputs, n_inputs))]
    chosen = [(int(m), int(h)) for m, h in pairs]
    for m, h in chosen:
        if not (0 <= m < n_outputs and 0 <= h < n_inputs):
            raise ValueError(
                f"pair ({m}, {h}) is out of range for a layer with {n_outputs} outputs and {n_inputs} inputs"
            )
    if not chosen:
        raise ValueError("pairs is empty")
    return chosen


# ---------------------------------------------------------------- transfer function
TRANSFER_MODES = ("auto", "entries", "singular_values")


def plot_transfer_function(
    model_or_layer: Any,
    frequencies=None,
    *,
    layer_index: int = 0,
    discrete: bool = False,
    sample_rate: float | None = None,
    mode: str = "auto",
    pairs: Sequence[tuple[int, int]] | None = None,
    include_feedthrough: bool = True,
    include_mixer: bool = True,
    decibels: bool = False,
    ax: "Axes | None" = None,
    fig: "Figure | None" = None,
) -> "Figure":
    """Gain of one SSM layer against frequency.

    Continuous time (default): ``|G(i w)|`` with ``G(s) = C (sI - Lambda)^-1 B + D``
    (conjugate modes, heads, D, the head mixer and bidirectionality included; see
    ``ssmts.nn.analysis.transfer_function``), on log-log axes, ``w`` in radians per
    unit of the model's continuous time.

    ``discrete=True``: the exact frequency response of the layer on sampled data
    (``ssmts.nn.analysis.frequency_response``), up to the Nyquist frequency, in Hz when
    ``sample_rate`` is given (else radians per sample). This is the view to read as
    "which frequencies of my signal does this layer pass".

    Args:
        model_or_layer: an SSM layer, or anything ``ssm_layers_of`` accepts together
            with ``layer_index``.
        frequencies: where to evaluate; default 400 log-spaced ``w`` around the
            eigenvalues' scales (continuous) or 512 points from 0 to Nyquist (discrete).
        layer_index: which layer of a model (0 = first).
        discrete, sample_rate: see above.
        mode: "entries" draws ``|G_mh|`` for each (m, h) in ``pairs`` (default: all
            pairs when M * H <= 16, else the first 8 diagonal ones); "singular_values"
            draws the singular values of the M x H matrix ``G`` at every frequency (the
            MIMO gains; the largest is the worst-case amplification of any input
            direction); "auto" picks entries for small layers and singular values otherwise.
        pairs: (m, h) pairs for mode "entries".
        include_feedthrough, include_mixer: passed to the computation.
        decibels: plot ``20 log10 |G|`` on a linear axis instead of ``|G|`` on a log axis.
        ax, fig: where to draw (one Axes).

    Returns:
        The matplotlib Figure.
    """
    if mode not in TRANSFER_MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {TRANSFER_MODES}")
    if sample_rate is not None and not discrete:
        raise ValueError("sample_rate applies to the discrete frequency response: pass discrete=True")
    layers = ssm_layers_of(model_or_layer)
    if not -len(layers) <= layer_index < len(layers):
        raise IndexError(f"layer_index {layer_index} is out of range for a model with {len(layers)} SSM layers")
    layer = layers[layer_index]
    if frequencies is not None:  # checked here, in this function's words (the analysis calls them omegas)
        frequencies = np.asarray(frequencies, dtype=np.float64)
        if frequencies.ndim != 1 or not frequencies.size:
            raise ValueError(f"frequencies must be a non-empty 1-D sequence, got shape {frequencies.shape}")
        if not np.isfinite(frequencies).all():
            raise ValueError("frequencies must be finite")

    if discrete:
        if frequencies is None:
            nyquist = np.pi if sample_rate is None else sample_rate / 2.0
            frequencies = np.linspace(0.0, nyquist, 512)
        G = frequency_response(
            layer,
            frequencies,
            sample_rate=sample_rate,
            include_feedthrough=include_feedthrough,
            include_mixer=include_mixer,
        )
        x_label = "frequency (Hz)" if sample_rate is not None else "θ (radians per sample)"
        title = r"Frequency response $|H(e^{i\theta})|$"
    else:
        if frequencies is None:
            scales = np.abs(_numpy(layer.Lambda)).ravel()
            low, high = max(scales.min(), 1e-6) / 10.0, scales.max() * 10.0
            frequencies = np.logspace(np.log10(low), np.log10(high), 400)
        G = transfer_function(layer, frequencies, include_feedthrough=include_feedthrough, include_mixer=include_mixer)
        x_label = "ω (radians per unit time)"
        title = r"Transfer function $|G(i\omega)|$"
    frequencies = np.asarray(frequencies, dtype=np.float64)

    M, H = G.shape[:2]
    if mode == "auto":
        mode = "entries" if (pairs is not None or M * H <= 16) else "singular_values"
    fig, panel = _single_axes(fig, ax)
    if mode == "entries":
        if pairs is None and M * H <= 16:
            chosen = [(m, h) for m in range(M) for h in range(H)]
        else:
            chosen = _channel_pairs(M, H, pairs, 8)
        for m, h in chosen:
            panel.plot(frequencies, _gain(np.abs(G[m, h]), decibels), lw=1.2, label=f"|G[{m}, {h}]|")
    else:
        sigma = np.linalg.svd(np.moveaxis(G, -1, 0), compute_uv=False)  # (n, min(M, H)), descending
        for k in range(sigma.shape[1] - 1, 0, -1):
            panel.plot(
                frequencies,
                _gain(sigma[:, k], decibels),
                color="0.7",
                lw=0.7,
                label="other singular values" if k == 1 else None,
            )
        panel.plot(frequencies, _gain(sigma[:, 0], decibels), color="C0", lw=1.6, label="largest singular value")
    if not discrete:
        panel.set_xscale("log")
    if not decibels:
        panel.set_yscale("log")
    panel.set_xlabel(x_label)
    panel.set_ylabel("gain (dB)" if decibels else "gain")
    panel.set_title(f"{title}, layer {layer_index % len(layers) + 1}")
    _dedupe_legend(panel, fontsize="small")
    return fig


def _gain(magnitude: np.ndarray, decibels: bool) -> np.ndarray:
    if not decibels:
        return magnitude
    with np.errstate(divide="ignore"):
        return 20.0 * np.log10(magnitude)


# ---------------------------------------------------------------- history
def plot_history(
    estimator_or_history: Any,
    *,
    ax: "Axes | None" = None,
    fig: "Figure | None" = None,
) -> "Figure":
    """Training history: losses per epoch and, when recorded, the validation score.

    Args:
        estimator_or_history: a fitted ssmts estimator (its ``history_``), a Pipeline or
            GridSearchCV ending in one, or the history itself (a list of per-epoch dicts
            with ``train_loss`` and optionally ``val_loss``, ``val_score``; or a DataFrame).
        ax: one Axes: losses on it, the validation score on a twin y-axis.
        fig: a Figure to fill (two panels when a validation score was recorded).

    Validation losses and scores exist only when the estimator held out a validation
    set (``early_stopping=True``). The score is the estimator's validation metric:
    accuracy for classifiers, minus the mean squared error of the standardized
    targets for regressors.

    Returns:
        The matplotlib Figure.
    """
    from matplotlib.ticker import MaxNLocator

    history = _history_of(estimator_or_history)
    if not history:
        raise ValueError("the training history is empty: the estimator has not run any epoch")
    epochs = np.array([record.get("epoch", i + 1) for i, record in enumerate(history)], dtype=float)

    def series(key: str) -> np.ndarray | None:
        values = [record.get(key) for record in history]
        if all(v is None for v in values):
            return None
        return np.array([np.nan if v is None else float(v) for v in values])

    losses = {name: series(key) for key, name in (("train_loss", "training loss"), ("val_loss", "validation loss"))}
    losses = {name: values for name, values in losses.items() if values is not None}
    score = series("val_score")
    if not losses and score is None:
        raise ValueError("the history records neither train_loss, val_loss nor val_score")
    score_label = _score_label(estimator_or_history)
    marker = "o" if len(epochs) <= 30 else None

    if ax is not None:
        fig, loss_ax = ax.figure, ax
        score_ax = ax.twinx() if score is not None else None
    else:
        n_panels = 1 + (score is not None and bool(losses))
        fig = fig if fig is not None else _new_figure((5.0 * n_panels, 3.6))
        panels = fig.subplots(1, n_panels, squeeze=False).ravel()
        loss_ax = panels[0] if losses else None
        score_ax = (panels[-1] if losses else panels[0]) if score is not None else None

    if losses and loss_ax is not None:
        for k, (name, values) in enumerate(losses.items()):
            loss_ax.plot(epochs, values, marker=marker, ms=3, color=f"C{k}", label=name)
        finite = np.concatenate([v[np.isfinite(v)] for v in losses.values()])
        if finite.size and np.all(finite > 0) and finite.max() / finite.min() > 20:
            loss_ax.set_yscale("log")
        loss_ax.set_xlabel("epoch")
        loss_ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        loss_ax.set_ylabel("loss")
        loss_ax.set_title("Training history")
        loss_ax.legend(loc="upper right", fontsize="small")
    if score is not None and score_ax is not None:
        score_ax.plot(epochs, score, marker=marker, ms=3, color="C2", label=score_label)
        score_ax.set_xlabel("epoch")
        score_ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        score_ax.set_ylabel(score_label)
        if ax is None:
            score_ax.set_title("Validation score")
        # Mark the epoch whose weights the estimator kept (early stopping keeps a later epoch only if it
        # is better by more than tol, so the highest point need not be it); a bare history, its best.
        kept = _kept_epoch_of(estimator_or_history)
        marked = None
        if kept is None and np.isfinite(score).any():
            marked, name = int(np.nanargmax(score)), "best"
        elif kept is not None and kept in epochs:
            marked, name = int(np.flatnonzero(epochs == kept)[0]), f"kept (epoch {kept})"
        elif kept == 0:
            score_ax.plot([], [], " ", label="kept: the starting weights")
        if marked is not None:
            label = f"{name}: {score[marked]:.4g}"
            score_ax.scatter([epochs[marked]], [score[marked]], color="C3", zorder=5, s=30, label=label)
        score_ax.legend(loc="lower right", fontsize="small")
    return fig


def _score_label(obj: Any) -> str:
    if isinstance(obj, Sequence) or hasattr(obj, "columns"):
        return "validation score"
    from sklearn.base import is_classifier, is_regressor

    estimator = _final_estimator(obj)
    try:
        if is_classifier(estimator):
            return "validation accuracy"
        if is_regressor(estimator):
            return "validation −MSE (standardized)"
    except Exception:  # noqa: BLE001 - a non-sklearn object: fall back to the generic label
        pass
    return "validation score"


def _finish_layer_figure(fig, axes, ax, n_layers: int, title: str):
    """One legend (outside the last panel, or in the caller's axes) and a title for a per-layer figure."""
    if ax is None:
        _dedupe_legend(axes[-1], fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        _dedupe_legend(ax, fontsize="small")
    if ax is None and n_layers > 1:
        fig.suptitle(title)
    return fig


def _dedupe_legend(ax: "Axes", **kwargs) -> None:
    handles, labels = ax.get_legend_handles_labels()
    unique: dict[str, Any] = {}
    for handle, label in zip(handles, labels):
        if label and not label.startswith("_"):
            unique.setdefault(label, handle)
    if unique:
        ax.legend(unique.values(), unique.keys(), **kwargs)


# ---------------------------------------------------------------- sensitive frequencies (PTD)
def plot_sensitive_frequencies(
    model_or_modes: Any,
    omegas=None,
    *,
    layer_index: int = 0,
    n_peaks: int = 5,
    reference: Any = "hippo",
    delta: float | None = None,
    label: str | None = None,
    show_reference: bool = True,
    ax: "Axes | None" = None,
    fig: "Figure | None" = None,
) -> "Figure":
    """``||G(i w) - G_ref(i w)||`` of one layer against continuous frequency, spikes marked.

    Args:
        model_or_modes: a fitted estimator, a network, an ``SSM`` (analysed with
            ``ssmts.nn.analysis.sensitive_frequencies``), or a ``SensitiveModes`` it returned.
        omegas, n_peaks, reference, delta: passed to ``sensitive_frequencies``.
        layer_index: which SSM layer.
        label: legend label of the curve (default "layer i").
        show_reference: also draw ``||G_ref(i w)||`` (dotted) for scale.

    The x axis is ``w`` in radians per unit of continuous model time; the legend gives each
    spike's digital frequency ``theta = w Delta`` (folded into [0, pi], radians per sample) under
    the step ``delta`` the analysis used. Call it twice on one ``ax`` to compare two inits.
    """
    if isinstance(model_or_modes, SensitiveModes):
        modes, number = model_or_modes, model_or_modes.layer_index + 1
    else:
        layers = ssm_layers_of(model_or_modes)
        if not -len(layers) <= layer_index < len(layers):  # negative from the last, as a list's index
            raise ValueError(f"layer_index={layer_index} out of range for {len(layers)} SSM layers")
        modes = sensitive_frequencies(layers[layer_index], n_peaks, omegas=omegas, reference=reference, delta=delta)[0]
        number = layer_index % len(layers) + 1  # the layer's number in the model, counted from 1 as elsewhere
    fig, ax = _single_axes(fig, ax)
    name = label or f"layer {number}"
    (line,) = ax.plot(modes.omegas, modes.gap, lw=1.0, label=f"{name}: gap to reference")
    if show_reference:
        ax.plot(
            modes.omegas, modes.reference_gain, ls=":", color=line.get_color(), lw=1.0, label=f"{name}: reference gain"
        )
    peaks = ", ".join(f"{t:.2f}" for t in modes.peak_thetas)
    ax.scatter(
        modes.peak_omegas,
        modes.peak_gaps,
        color=line.get_color(),
        s=18,
        zorder=3,
        label=f"{name} spikes, theta = {peaks} rad/sample (Delta = {modes.delta:.3g})",
    )
    ax.set_yscale("log")
    ax.set_xlabel("w (rad per unit model time)")
    ax.set_ylabel("||G(iw) - G_ref(iw)||")
    ax.legend(fontsize="x-small")
    return fig
