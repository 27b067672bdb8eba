"""Figures of the extra calibration measures: smooth reliability diagrams
(relplot, Blasiok and Nakkiran 2024) and the bin-count sensitivity of ECE.

Pure data functions (`smooth_data`, `bin_sensitivity`) feed the drawing
functions, so the numbers behind each figure can be tested.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from bench.calib.measures.functions import BIN_COUNTS
from bench.report.plotting.plots import figure_grid, finish_grid, subplots

# The smoothed curve is drawn only where samples lie: at a confidence x whose
# window [x - WINDOW, x + WINDOW] holds at least MIN_SHARE of the samples.
# relplot's kernel density cannot say that: its bandwidth (the smooth ECE's,
# often 0.1-0.2) spreads both the curve and the density far beyond the data,
# so a cut at a share of the density's peak left curves (and over-confident
# patches) where no sample lies (confidences in [0.11, 0.33] drawn up to 0.74).
WINDOW = 0.025
MIN_SHARE = 0.005


def smooth_data(probs: np.ndarray, labels: np.ndarray) -> dict:
    """relplot's smoothed accuracy-given-confidence curve `mu` on `mesh`, the
    kernel density of the confidences, and the smooth ECE. No bootstrap band
    (it would draw from numpy's global random state)."""
    # relplot pulls in scipy, sklearn and seaborn (about 2.5 s): only for the
    # smoothed diagrams, not the binned ones this module also draws
    import relplot

    conf = np.clip(np.asarray(probs).max(axis=1).astype(np.float64), 0.0, 1.0)
    right = (np.asarray(probs).argmax(axis=1) == labels).astype(np.float64)
    if len(conf) < 2:  # relplot's density estimate needs two samples: an empty panel
        mesh = np.linspace(0, 1, 200)
        return {"mesh": mesh, "mu": np.full(200, np.nan), "density": np.zeros(200),
                "smece": float("nan"), "gap": float(conf.mean() - right.mean())}
    d = relplot.prepare_rel_diagram(conf, right, plot_confidence_band=False)
    # where (almost) no sample lies the smoothed curve is extrapolation: not drawn
    mu = np.where(populated(d["mesh"], conf), d["mu"], np.nan)
    return {"mesh": d["mesh"], "mu": mu, "density": d["density"], "smece": float(d["ce"]),
            "gap": float(conf.mean() - right.mean())}


def populated(mesh: np.ndarray, conf: np.ndarray) -> np.ndarray:
    """Per mesh point: whether at least MIN_SHARE of the confidences lie
    within WINDOW of it (and at least one does)."""
    s = np.sort(conf)
    near = (np.searchsorted(s, mesh + WINDOW, side="right")
            - np.searchsorted(s, mesh - WINDOW, side="left"))
    return near >= max(1.0, MIN_SHARE * len(s))


def smooth_reliability_figure(panels: list[tuple[str, np.ndarray, np.ndarray]], title: str):
    """One panel per method: the smoothed accuracy against confidence (red
    where it lies below the diagonal: over-confident; blue above), the
    diagonal, and below it the confidence density on one shared axis."""
    datas = [smooth_data(p, y) for _, p, y in panels]
    top = max(float(d["density"].max()) for d in datas) * 1.05 or 1.0
    fig, height, cells = figure_grid(len(panels))
    for (label, _, _), d, (r, c, cell) in zip(panels, datas, cells):
        inner = cell.subgridspec(2, 1, height_ratios=[3, 1], hspace=0.08)
        ax = fig.add_subplot(inner[0])
        ax_d = fig.add_subplot(inner[1], sharex=ax)
        x, mu = d["mesh"], d["mu"]
        ax.fill_between(x, mu, x, where=mu < x, color="#C44E52", alpha=0.3, lw=0,
                        label="over-confident")
        ax.fill_between(x, mu, x, where=mu >= x, color="#4C72B0", alpha=0.3, lw=0,
                        label="under-confident")
        ax.plot(x, mu, color="black", lw=1.4, label="smoothed accuracy")
        ax.plot([0, 1], [0, 1], "k--", lw=0.8, label="perfect calibration")
        ax.set(xlim=(0, 1), ylim=(0, 1))
        ax.tick_params(labelbottom=False)
        ax.set_title(f"{label}\nsmECE {d['smece'] * 100:.2f} | conf-acc {d['gap'] * 100:+.2f}",
                     fontsize=9)
        ax_d.fill_between(x, d["density"], color="grey")
        ax_d.set(xlim=(0, 1), ylim=(0, top), xlabel="confidence")
        if c == 0:
            ax.set_ylabel("accuracy")
            ax_d.set_ylabel("density")
    return finish_grid(fig, title, height)


def bin_sensitivity(groups: list) -> pd.DataFrame:
    """(label, group) pairs -> tidy frame: label, bins, ECE mean and std over
    seeds (fractions) at every bin count of BIN_COUNTS."""
    rows = []
    for label, g in groups:
        for n in BIN_COUNTS:
            v = np.asarray(g.values[f"ece{n}"], dtype=np.float64)
            rows.append({"label": label, "bins": n, "ece_mean": float(v.mean()),
                         "ece_std": float(v.std()) if len(v) > 1 else 0.0})
    return pd.DataFrame(rows, columns=["label", "bins", "ece_mean", "ece_std"])


def bin_sensitivity_figure(data: pd.DataFrame, title: str):
    """ECE (x100) against the number of equal-width bins, one line per
    method, the paper's 15 bins marked."""
    fig, ax = subplots(figsize=(6.0, 4.0))
    for label, part in data.groupby("label", sort=False):
        ax.errorbar(part["bins"], part["ece_mean"] * 100, yerr=part["ece_std"] * 100,
                    marker="o", ms=4, capsize=2, lw=1.2, label=label)
    ax.axvline(15, color="grey", ls=":", lw=1)
    ax.set(xticks=list(BIN_COUNTS), xlabel="equal-width bins", ylabel="ECE (x100)",
           title=title)
    ax.legend(fontsize=8, ncol=2, frameon=False)
    fig.tight_layout()
    return fig
