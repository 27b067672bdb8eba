"""TensorBoard event files beside a finished record (`bench run --tensorboard`).

Written after the run from the history the record keeps (metrics.json
"history", bench.train.history), so the training loop is untouched and the
flag never changes a config hash. One x axis for every scalar, the epoch
(1, 2, ...): train/loss and train/lr at each epoch, val/acc, val/ece, val/nll
and val/auc at the last epoch of each cycle. The folder is rewritten whole
each time, so a rerun never doubles the curves.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from bench.calib import measures
from bench.core.record import Record

FOLDER = "tensorboard"
# the history's validation values per cycle (bench.train.history): the paper's
# measures and the checkpoint AUC
VAL = (*measures.paper(), "auc")


def scalars(history: dict) -> list[tuple[str, float, int]]:
    """(tag, value, epoch) of every point of a record's history."""
    out, last_epoch = [], {}
    for step, e in enumerate(history.get("epochs", []), start=1):
        out += [("train/loss", e["train_loss"], step), ("train/lr", e["lr"], step)]
        last_epoch[e["cycle"]] = step
    for c in history.get("cycles", []):
        step = last_epoch.get(c["cycle"], c["cycle"])
        out += [(f"val/{m}", c[f"val_{m}"], step) for m in VAL if c.get(f"val_{m}") is not None]
    return out


def write_events(record) -> Path | None:
    """Write <record>/tensorboard/ from its history; None for a record written
    before the history existed (nothing to draw)."""
    # optional package (tensorboard): bench run checks it first (plan.check_packages)
    from torch.utils.tensorboard import SummaryWriter

    record = Path(record)
    history = Record(record).history
    if not history:
        return None
    folder, tmp = record / FOLDER, record / f".{FOLDER}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    writer = SummaryWriter(log_dir=str(tmp))
    try:
        for tag, value, step in scalars(history):
            writer.add_scalar(tag, float(value), step)
    finally:
        writer.close()
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return folder
