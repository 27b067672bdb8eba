"""The end-of-run table: ACC / ECE / NLL as mean ± population std, x100,
with the derived rows under their method: `<method>+ts` (temperature scaling,
mean fitted T) and, under sl1h, `dens` (deep ensemble of its seeds: one
number, no std, as the paper)."""
from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np
from tabulate import tabulate

from bench.core import store
from bench.report.derived import DENS, derived_rows

COLUMNS = (("acc", "ACC"), ("ece", "ECE"), ("nll", "NLL"))


def mean_pm_std(values, scale: float = 100.0, digits: int = 2) -> str:
    """'80.71 ± 0.52' with the population std (ddof=0), as the paper."""
    arr = np.asarray(values, dtype=np.float64) * scale
    return f"{arr.mean():.{digits}f} ± {arr.std(ddof=0):.{digits}f}"


def group_paths(groups) -> "OrderedDict[object, list[Path]]":
    """(experiment, record path) pairs -> experiment: paths, in first-seen order."""
    by_exp: "OrderedDict[object, list[Path]]" = OrderedDict()
    for exp, path in groups:
        by_exp.setdefault(exp, []).append(Path(path))
    return by_exp


def _row(name: str, backbone: str, metrics: list[dict], temperature: str = "") -> list:
    if name == DENS:  # one ensemble, one number per metric
        cells = [f"{100 * metrics[0][key]:.2f}" for key, _ in COLUMNS]
        return [name, backbone, metrics[0]["members"], *cells, temperature]
    cells = [mean_pm_std([m[key] for m in metrics]) for key, _ in COLUMNS]
    return [name, backbone, len(metrics), *cells, temperature]


def summary_rows(groups) -> list[list]:
    """One row per experiment, then its derived rows (+ts, and dens for sl1h)."""
    rows = []
    for exp, paths in group_paths(groups).items():
        metrics = [store.read_json(p / "metrics.json")["test"] for p in paths]
        rows.append(_row(exp.method, exp.backbone, metrics))
        for name, derived in derived_rows(exp.method, paths).items():
            temps = [d["temperature"] for d in derived if "temperature" in d]
            rows.append(_row(name, exp.backbone, derived,
                             f"{np.mean(temps):.3f}" if temps else ""))
    return rows


def summary_table(groups) -> str:
    headers = (["method", "backbone", "seeds"] + [f"{title} (x100)" for _, title in COLUMNS]
               + ["T"])
    # numparse off: "0.230" must keep its digits
    return tabulate(summary_rows(groups), headers=headers, tablefmt="github", disable_numparse=True)
