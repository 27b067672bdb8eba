"""The end-of-run table: ACC / ECE / NLL as mean ± population std, x100."""
from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np
from tabulate import tabulate

from . import store

COLUMNS = (("acc", "ACC"), ("ece", "ECE"), ("nll", "NLL"))


def mean_pm_std(values, scale: float = 100.0, digits: int = 2) -> str:
    """'80.71 ± 0.52' with the population std (ddof=0), as the paper."""
    arr = np.asarray(values, dtype=np.float64) * scale
    return f"{arr.mean():.{digits}f} ± {arr.std(ddof=0):.{digits}f}"


def summary_rows(groups) -> list[list[str]]:
    """groups: (experiment, record path) pairs -> one row per experiment."""
    by_exp: "OrderedDict[object, list[dict]]" = OrderedDict()
    for exp, path in groups:
        by_exp.setdefault(exp, []).append(store.read_json(Path(path) / "metrics.json")["test"])
    rows = []
    for exp, metrics in by_exp.items():
        row = [exp.method, exp.backbone, len(metrics)]
        row += [mean_pm_std([m[key] for m in metrics]) for key, _ in COLUMNS]
        rows.append(row)
    return rows


def summary_table(groups) -> str:
    headers = ["method", "backbone", "seeds"] + [f"{title} (x100)" for _, title in COLUMNS]
    return tabulate(summary_rows(groups), headers=headers, tablefmt="github")
