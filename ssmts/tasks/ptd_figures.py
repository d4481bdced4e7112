"""The figures of the PTD experiments (ssmts.tasks.ptd), drawn from their results dicts with the
helpers of ssmts.plot: the amplitude-error heat maps (PTD paper Fig. 2), accuracy under noise
(Fig. 3(b)) and the perturbation-size ablation (Fig. 3(c)). matplotlib is imported when a figure
is saved; the plot functions take the Figure to fill (or make one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from ssmts.plot import panel_grid

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure


def _heatmap(ax, values, grid_x, grid_y, vmax, title):
    image = ax.imshow(
        np.asarray(values).T,
        origin="lower",
        aspect="auto",
        vmin=0.0,
        vmax=vmax,
        cmap="viridis",
        extent=[grid_x[0], grid_x[-1], grid_y[0], grid_y[-1]],
    )
    ax.set_title(title, fontsize="small")
    ax.set_xlabel("theta (rad/sample)")
    ax.set_ylabel("amplitude a")
    return image


def plot_sinusoid_errors(results: Mapping, *, seed: int | None = None, fig: "Figure | None" = None) -> "Figure":
    """Heat maps of the absolute amplitude error over the (theta, a) test grid (PTD paper Fig. 2).

    results: the dict of ``ssmts.tasks.ptd.run_ptd("ptd-sinusoids")``. One row per domain
    (interpolation, extrapolation), one column per init; the error is averaged over seeds (or
    that of `seed`). Dashed lines bound the amplitudes seen in training.
    """
    runs = [r for r in results["runs"] if seed is None or r["seed"] == seed]
    if not runs:
        raise ValueError(f"no run with seed={seed} in these results")
    domains = list(dict.fromkeys(r["domain"] for r in runs))
    inits = list(dict.fromkeys(r["init"] for r in runs))
    maps = {
        (d, i): np.mean([r["amplitude_abs_error"] for r in runs if r["domain"] == d and r["init"] == i], axis=0)
        for d in domains
        for i in inits
    }
    vmax = float(max(np.max(m) for m in maps.values()))
    fig, axes = panel_grid(fig, None, len(domains) * len(inits), panel_size=(3.6, 3.0), ncols=len(inits))
    grid_x, grid_y = results["grid_theta"], results["grid_amplitude"]
    lo, hi = results["settings"]["amplitude_range"]
    third = (hi - lo) / 3
    image = None
    for k, (d, i) in enumerate((d, i) for d in domains for i in inits):
        image = _heatmap(axes[k], maps[(d, i)], grid_x, grid_y, vmax, f"{d}, init={i}")
        bounds = [lo + third, hi - third] if d == "interpolation" else [hi - third]
        for b in bounds:
            axes[k].axhline(b, color="white", ls="--", lw=0.8)
    fig.colorbar(image, ax=axes, label="|predicted a - a|")
    return fig


def plot_noise_robustness(results: Mapping, *, fig: "Figure | None" = None) -> "Figure":
    """Test accuracy against noise amplitude at spike and random frequencies (PTD paper Fig. 3(b)).

    results: the dict of ``run_ptd("ptd-robustness")``; mean over seeds with min-max bars.
    """
    fig, axes = panel_grid(fig, None, 2, panel_size=(4.2, 3.2))
    amplitudes = list(results["settings"]["noise_amplitudes"])
    for ax, label in zip(axes, ("spike", "random")):
        for row in results["summary"]:
            mean = [row["clean"]] + [row[f"{label}@{a:g}"] for a in amplitudes]
            low = [row["clean_min"]] + [row[f"{label}@{a:g}_min"] for a in amplitudes]
            high = [row["clean_max"]] + [row[f"{label}@{a:g}_max"] for a in amplitudes]
            x = [0.0] + amplitudes
            yerr = np.abs(np.array([np.subtract(mean, low), np.subtract(high, mean)]))
            ax.errorbar(x, mean, yerr=yerr, marker="o", capsize=3, label=f"init={row['init']} ({row['n_seeds']} seeds)")
        title = (
            "noise at the legs spike frequencies" if label == "spike" else "noise at random frequencies (spikes' band)"
        )
        ax.set_title(title, fontsize="small")
        ax.set_xlabel("noise amplitude (standardized input units)")
        ax.set_ylabel("test accuracy")
        ax.legend(fontsize="x-small")
    return fig


def plot_ablation(results: Mapping, *, fig: "Figure | None" = None) -> "Figure":
    """Accuracy and cond(V) against ||E||/||A|| per state size (PTD paper Fig. 3(c)).

    results: the dict of ``run_ptd("ptd-ablation")``; the legs init is a horizontal line.
    """
    states = sorted({r["d_state"] for r in results["summary"]})
    fig, axes = panel_grid(fig, None, len(states), panel_size=(4.2, 3.2))
    for ax, N in zip(axes, states):
        rows = [r for r in results["summary"] if r["d_state"] == N and r["init"] == "ptd"]
        rows.sort(key=lambda r: r["relative_size"])
        x = [r["relative_size"] for r in rows]
        ax.errorbar(
            x,
            [r["test_accuracy"] for r in rows],
            yerr=[r["test_accuracy_std"] for r in rows],
            marker="o",
            color="tab:red",
            capsize=3,
            label="ptd accuracy",
        )
        for r in results["summary"]:
            if r["d_state"] == N and r["init"] == "legs":
                ax.axhline(r["test_accuracy"], color="gray", ls="--", lw=1, label="legs accuracy")
        ax.set_xscale("log")
        ax.set_xlabel("||E|| / ||A||")
        ax.set_ylabel("test accuracy", color="tab:red")
        twin = ax.twinx()
        twin.plot(x, [r["condition_number"] for r in rows], marker="s", color="tab:blue", label="cond(V)")
        twin.set_yscale("log")
        twin.set_ylabel("cond(V) at init", color="tab:blue")
        ax.set_title(f"N = {N}", fontsize="small")
        ax.legend(fontsize="x-small", loc="lower left")
    return fig


def save_ptd_figures(results: Mapping, out) -> list:
    """Write the figure of a PTD experiment's results (``ssmts.tasks.ptd.run_ptd``) next to `out`.

    Returns the paths: ``<stem>_heatmaps.png`` (ptd-sinusoids), ``<stem>_noise.png``
    (ptd-robustness) or ``<stem>_ablation.png`` (ptd-ablation).
    """
    from pathlib import Path

    import matplotlib.pyplot as plt

    out = Path(out)
    experiment = results["experiment"]
    draw, suffix = {
        "ptd-sinusoids": (plot_sinusoid_errors, "heatmaps"),
        "ptd-robustness": (plot_noise_robustness, "noise"),
        "ptd-ablation": (plot_ablation, "ablation"),
    }[experiment]
    fig = draw(results)
    path = out.with_name(f"{out.stem}_{suffix}.png")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return [path]


__all__ = ["plot_sinusoid_errors", "plot_noise_robustness", "plot_ablation", "save_ptd_figures"]
