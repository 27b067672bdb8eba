"""Ovadia-style box plots of a measure under shift (`bench report --shift`):
per dataset x backbone, the severities along x, and at each severity one box
per table row (method, calibrated row, D-Ens) spanning the values of every
corruption (and seed) at that severity (Ovadia et al. 2019, Fig. 2).

The figure is a Figure of its own (bench.report.plotting.plots), never pyplot's.
"""
from __future__ import annotations

import numpy as np

from bench.report.plotting.plots import subplots

WIDTH = 0.8  # of the group of boxes at one severity, in severity units


def box_figure(data: dict, title: str, measure: str = "ECE"):
    """The box plot of bench.report.evals.shifttables.box_data: one box per
    (row, severity) that has values, coloured by row, with a legend."""
    rows, severities = data["rows"], data["severities"]
    fig, ax = subplots(1, 1, figsize=(max(6.0, 0.35 * len(severities) * max(1, len(rows))),
                                      3.8))
    colours = [f"C{i % 10}" for i in range(len(rows))]
    step = WIDTH / max(1, len(rows))
    handles = []
    for i, (label, colour) in enumerate(zip(rows, colours)):
        have = [s for s in severities if data["boxes"].get((label, s))]
        if not have:
            continue
        pos = [s - WIDTH / 2 + step * (i + 0.5) for s in have]
        art = ax.boxplot([np.asarray(data["boxes"][(label, s)]) * 100 for s in have],
                         positions=pos, widths=step * 0.85, patch_artist=True,
                         manage_ticks=False, flierprops={"markersize": 2},
                         medianprops={"color": "black"})
        for box in art["boxes"]:
            box.set_facecolor(colour)
            box.set_alpha(0.75)
        handles.append((art["boxes"][0], label))
    ax.set_xticks(severities)
    ax.set_xticklabels(["clean" if s == 0 else str(s) for s in severities])
    ax.set_xlim(min(severities, default=0) - 0.6, max(severities, default=0) + 0.6)
    ax.set_xlabel("severity (box: corruptions and seeds)")
    ax.set_ylabel(f"{measure} (x100)")
    ax.grid(axis="y", alpha=0.3)
    if handles:
        # beside the axes, never over a box (the saved figure's tight box keeps it)
        ax.legend([h for h, _ in handles], [t for _, t in handles], fontsize=7,
                  loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    for s in severities[:-1]:  # where one severity's group of boxes ends
        ax.axvline(s + 0.5, color="0.85", lw=0.8)
    ax.set_title(title, fontsize=9)
    return fig
