"""Figures: reliability diagrams and the critical-difference diagram.

Reliability diagram (Guo et al. 2017) per dataset and backbone, one panel
per method: accuracy per confidence bin (the 15 torchmetrics bins of
bench.calib.measures.functions.ece_bins), the gap between each bin's accuracy and its mean
confidence, and below it the share of samples per bin (one axis for all
panels). The title gives ECE
and the signed gap (mean confidence - accuracy: < 0 under-confident).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.core.files import write_atomic
from bench.core.pathnames import path_name
from bench.calib.measures.functions import calibration_gap, ece, ece_bins

N_BINS = 15
PANELS_PER_ROW = 5


def new_figure(**kwargs):
    """A matplotlib Figure of its own, never pyplot's: drawing a report (also
    from a notebook, through bench.api) leaves the caller's backend and open
    figures alone, and needs no display. matplotlib's one entry point here:
    the report modules import this module at their top."""
    # matplotlib on demand (~1 s): `import bench.api`, `bench report --help`
    # and --no-plots draw nothing (tests/report/test_report.py)
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def reliability_data(probs: np.ndarray, labels: np.ndarray, n_bins: int = N_BINS) -> dict:
    """Per-bin accuracy, mean confidence and share for plotting. ece_bins
    keeps confidences of exactly 1.0 in an extra bin; for the picture it is
    merged (count-weighted) into the last bin, which ends at 1.0 anyway."""
    acc, conf, share = ece_bins(probs, labels, n_bins)
    acc, conf, share = acc.copy(), conf.copy(), share.copy()
    total = share[-2] + share[-1]
    if share[-1] > 0:
        acc[-2] = (acc[-2] * share[-2] + acc[-1] * share[-1]) / total
        conf[-2] = (conf[-2] * share[-2] + conf[-1] * share[-1]) / total
        share[-2] = total
    edges = np.linspace(0, 1, n_bins + 1)
    return {"centers": (edges[:-1] + edges[1:]) / 2, "width": 1.0 / n_bins,
            "acc": acc[:-1], "conf": conf[:-1], "share": share[:-1],
            "ece": ece(probs, labels, n_bins), "gap": calibration_gap(probs, labels)}


def _panel(ax, ax_hist, label: str, d: dict, hist_top: float | None = None) -> None:
    filled = d["share"] > 0
    c, w = d["centers"][filled], d["width"]
    acc, conf = d["acc"][filled], d["conf"][filled]
    ax.bar(c, acc, width=w, color="#4C72B0", edgecolor="black", lw=0.5,
           label="accuracy", zorder=1)
    # The gap (accuracy -> mean confidence) is a half-width hatched bar with a
    # red line at the mean confidence, and each accuracy bar keeps a black top
    # line: both heights stay readable whether the gap goes up
    # (over-confident) or down into the bar (under-confident).
    # A light face keeps the hatching visible inside a (dark) accuracy bar.
    ax.bar(c, conf - acc, bottom=acc, width=w / 2, facecolor=(1.0, 0.92, 0.92, 0.85),
           edgecolor="#C44E52", hatch="///", lw=0.8, label="gap to mean confidence", zorder=2)
    ax.hlines(acc, c - w / 2, c + w / 2, color="black", lw=1.6, zorder=3)
    ax.hlines(conf, c - w / 4, c + w / 4, color="#C44E52", lw=2.0, zorder=3,
              label="mean confidence")
    ax.plot([0, 1], [0, 1], "k--", lw=0.8, label="perfect calibration", zorder=4)
    ax.set(xlim=(0, 1), ylim=(0, 1))
    ax.tick_params(labelbottom=False)
    ax.set_title(f"{label}\nECE {d['ece'] * 100:.2f} | conf-acc {d['gap'] * 100:+.2f}",
                 fontsize=9)
    ax_hist.bar(d["centers"], d["share"] * 100, width=d["width"], color="grey",
                edgecolor="black", lw=0.5)
    ax_hist.set(xlim=(0, 1), xlabel="confidence")
    if hist_top is not None:  # one % axis for every panel, so heights compare
        ax_hist.set_ylim(0, hist_top)


def hist_top(datas: list[dict]) -> float:
    """The shared top of the sample-share axes: the largest bin, plus 5%."""
    return max(float(d["share"].max()) for d in datas) * 100 * 1.05 or 1.0


def figure_grid(n: int):
    """(figure, [(row, col, outer cell)]) for n panels, PANELS_PER_ROW a row."""
    cols = min(n, PANELS_PER_ROW)
    nrows = -(-n // cols)
    height = 3.9 * nrows + 1.4
    fig = new_figure(figsize=(2.7 * cols + 0.6, height))
    outer = fig.add_gridspec(nrows, cols, hspace=0.4, wspace=0.28, top=1 - 0.95 / height,
                             bottom=0.75 / height)
    return fig, height, [(*divmod(i, cols), outer[divmod(i, cols)]) for i in range(n)]


def finish_grid(fig, title: str, height: float):
    """A figure_grid figure's shared legend (the first panel's entries, below
    the panels) and its title; returns the figure."""
    handles, names = fig.axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=10, y=1 - 0.12 / height)
    return fig


def reliability_figure(panels: list[tuple[str, np.ndarray, np.ndarray]], title: str):
    """panels: (label, probs [N, K], labels [N]) -> matplotlib Figure."""
    datas = [reliability_data(probs, labels) for _, probs, labels in panels]
    top = hist_top(datas)
    fig, height, cells = figure_grid(len(panels))
    for (label, _, _), d, (r, c, cell) in zip(panels, datas, cells):
        inner = cell.subgridspec(2, 1, height_ratios=[3, 1], hspace=0.08)
        ax = fig.add_subplot(inner[0])
        ax_hist = fig.add_subplot(inner[1], sharex=ax)
        _panel(ax, ax_hist, label, d, top)
        if c == 0:
            ax.set_ylabel("accuracy")
            ax_hist.set_ylabel("% samples")
    return finish_grid(fig, title, height)


def save(fig, stem: Path) -> list[Path]:
    """stem.png (150 dpi) and stem.pdf; a ':' of a name in the stem is '+'
    (bench.core.pathnames). The suffix is appended, not swapped: a timm
    name's tag (timm:resnet18.a1_in1k) is no suffix, and seeds' files would
    otherwise collide."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.parent / f"{path_name(stem.name)}.{fmt}" for fmt in ("png", "pdf")]
    for p in paths:  # whole or not at all, as every report file (bench.core.files)
        write_atomic(p, lambda f, fmt=p.suffix[1:]: fig.savefig(f, format=fmt, dpi=150,
                                                               bbox_inches="tight"), binary=True)
    return paths


def subplots(*grid, figsize) -> tuple:
    """(figure, axes) as pyplot.subplots, on a Figure of its own."""
    fig = new_figure(figsize=figsize)
    return fig, fig.subplots(*grid)


# ---------------------------------------------------------------- CD diagram


def cliques(ranks_sorted: list[float], cd: float) -> list[tuple[int, int]]:
    """Maximal runs (i, j) of sorted average ranks within less than CD of each
    other: the groups a Nemenyi test cannot tell apart."""
    out = []
    for i in range(len(ranks_sorted)):
        j = max(k for k in range(i, len(ranks_sorted)) if ranks_sorted[k] - ranks_sorted[i] < cd)
        if j > i and not any(a <= i and j <= b for a, b in out):
            out.append((i, j))
    return out


def cd_figure(names: list[str], avg_ranks: list[float], cd: float, title: str):
    """Demšar's critical-difference diagram: methods on a rank axis (1 =
    best, left), the CD as a bar, and thick lines joining methods whose
    average ranks differ by less than CD."""
    order = np.argsort(avg_ranks)
    names = [names[i] for i in order]
    ranks = [float(avg_ranks[i]) for i in order]
    k = len(names)
    half = -(-k // 2)
    fig, ax = subplots(figsize=(6.5, 1.2 + 0.28 * half))
    ax.set_xlim(0.5, k + 0.5)
    ax.set_ylim(-0.35 * (half + 1), 1.0)
    ax.axis("off")
    ax.hlines(0, 1, k, color="black", lw=1)
    for t in range(1, k + 1):
        ax.vlines(t, 0, 0.08, color="black", lw=1)
        ax.text(t, 0.13, str(t), ha="center", va="bottom", fontsize=8)
    ax.hlines(0.6, 1, 1 + cd, color="black", lw=1.5)
    ax.text(1 + cd / 2, 0.65, f"CD = {cd:.2f}", ha="center", va="bottom", fontsize=8)
    for i, (name, r) in enumerate(zip(names, ranks)):
        left = i < half
        y = -0.35 * ((i if left else k - 1 - i) + 1)
        x_text = 0.6 if left else k + 0.4
        ax.plot([r, r, x_text], [0, y, y], color="black", lw=0.8)
        ax.text(x_text, y, f"{name} ({r:.2f})", ha="right" if left else "left", va="center",
                fontsize=8)
    for n, (i, j) in enumerate(cliques(ranks, cd)):
        ax.hlines(-0.1 - 0.07 * n, ranks[i] - 0.03, ranks[j] + 0.03, color="#C44E52", lw=3)
    ax.set_title(title, fontsize=9)
    return fig
