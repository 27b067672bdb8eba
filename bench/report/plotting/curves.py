"""Training curves per dataset x backbone, from the history each record keeps
(metrics.json "history", bench.train.history): the mean training loss per
epoch and the validation NLL / ECE / AUC per cycle end, one line per method,
the mean over its seeds. Records written before the history existed are
left out."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.report.plotting import plots
from bench.report.render.tables import ordered_methods


VAL_PANELS = (("val_nll", "validation NLL"), ("val_ece", "validation ECE"),
              ("val_auc", "validation AUC (checkpoint score)"))


def history_frames(runs) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(epochs, cycles) as tidy frames: one row per run and epoch (global
    `step_epoch` 1..E, train_loss, lr) and per run and cycle (val metrics)."""
    epochs, cycles = [], []
    for r in runs:
        hist = r.record.history
        key = {"dataset": r.dataset, "backbone": r.backbone, "method": r.method,
               "seed": r.seed}
        epochs += [{**key, "step_epoch": i + 1, **e} for i, e in enumerate(hist.get("epochs", []))]
        cycles += [{**key, **c} for c in hist.get("cycles", [])]
    return pd.DataFrame(epochs), pd.DataFrame(cycles)


def mean_curves(frame: pd.DataFrame, x: str, columns: list[str]) -> pd.DataFrame:
    """Per (dataset, backbone, method, x): the mean over seeds of `columns`."""
    keys = ["dataset", "backbone", "method", x]
    return frame.groupby(keys, sort=True)[columns].mean().reset_index()


def curves_figure(epochs: pd.DataFrame, cycles: pd.DataFrame, title: str, names=str,
                  sections=None):
    """One dataset x backbone: train loss per epoch, then each VAL_PANELS per
    cycle; one line per method in table order (bench.report.render.tables.
    ordered_methods with the report's `sections`), so the legend reads as the
    tables do; epochs and cycles are whole numbers, and so are the ticks."""
    # matplotlib: only when a figure is drawn (--no-plots, CLI start-up)
    from matplotlib.ticker import MaxNLocator

    present = set(epochs["method"]) | set(cycles["method"])
    order = [m for sec in ordered_methods(present, sections) for m in sec if m in present]
    fig, axes = plots.subplots(1, 1 + len(VAL_PANELS), figsize=(4 * (1 + len(VAL_PANELS)), 3.2))
    for method in order:
        rows = epochs[epochs["method"] == method].sort_values("step_epoch")
        axes[0].plot(rows["step_epoch"], rows["train_loss"], label=names(method))
    axes[0].set(xlabel="epoch", title="training loss (epoch mean)")
    for ax, (col, label) in zip(axes[1:], VAL_PANELS):
        for method in order:
            rows = cycles[cycles["method"] == method].sort_values("cycle")
            ax.plot(rows["cycle"], rows[col], marker="o", label=names(method))
        ax.set(xlabel="cycle", title=label)
    for ax in axes:  # a one-epoch run would otherwise get ticks 0.96 ... 1.04
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    axes[0].legend(fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def write_curves(runs, folder: Path, names=str, title=lambda ds, bb: f"{ds} / {bb}",
                 sections=None) -> list[Path]:
    """curves_<dataset>_<backbone>.png/.pdf for each cell with any history;
    `sections`: the report's row order (--order), for the legend."""
    epochs, cycles = history_frames(runs)
    if epochs.empty or cycles.empty:
        return []
    epochs = mean_curves(epochs, "step_epoch", ["train_loss", "lr"])
    cycles = mean_curves(cycles, "cycle", [c for c, _ in VAL_PANELS])
    written = []
    for (ds, bb), rows in epochs.groupby(["dataset", "backbone"]):
        cyc = cycles[(cycles["dataset"] == ds) & (cycles["backbone"] == bb)]
        fig = curves_figure(rows, cyc, title(ds, bb), names, sections)
        written += plots.save(fig, folder / f"curves_{ds}_{bb}")
    return written
