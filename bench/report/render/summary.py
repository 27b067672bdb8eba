"""The end-of-run table: ACC / ECE / NLL as mean ± population std, x100,
with the derived rows under their method: `<method>+ts` (temperature scaling,
mean fitted T) and, under sl1h, `dens` (deep ensemble of its seeds: one
number, no std, as the paper). Its numbers come from the same aggregation as
`bench report` (bench.report.numbers.aggregate.build_cells)."""
from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np
from tabulate import tabulate

from bench.calib import measures as M
from bench.core import store
from bench.calib import variants as V
from bench.core.record import records as read_records
from bench.report.numbers import aggregate
from bench.report.numbers.cells import CellData, Run
from bench.report.numbers.names import recorded_names
from bench.report.render.tables import backbone_name, mean_pm, method_name, number
# Which cells the summary shows under each method, in this order.
SHOWN = (V.PLAIN, V.TS, V.DENS)


def seeds_cell(values) -> str:
    """'80.71 ± 0.52': the mean and population std (ddof=0, as the paper) of
    the seeds' values, each scaled x100 before the sums (as always here)."""
    arr = np.asarray(values, dtype=np.float64) * 100
    return mean_pm(arr.mean(), arr.std(ddof=0), scale=1)


def experiment_paths(records) -> "OrderedDict[object, list[Path]]":
    """(experiment, record path) pairs -> experiment: paths, in first-seen order."""
    by_exp: "OrderedDict[object, list[Path]]" = OrderedDict()
    for exp, path in records:
        by_exp.setdefault(exp, []).append(Path(path))
    return by_exp


def _row(g: CellData, names: dict) -> list:
    """One row, named as the report's tables name it: the method's display
    name (+TS for its scaled row, D-Ens for the ensemble) and the backbone's."""
    label = method_name(g.row_method, names) + ("" if g.variant == V.DENS else g.variant.label)
    backbone = backbone_name(g.backbone, names)
    if g.single:  # one ensemble, one number per metric
        cells = [number(g.values[key][0]) for key in M.paper()]
        return [label, backbone, g.extra["members"], *cells, ""]
    cells = [seeds_cell(g.values[key]) for key in M.paper()]
    temps = g.extra.get("temperature")
    return [label, backbone, g.n, *cells, f"{np.mean(temps):.3f}" if temps else ""]


def summary_rows(records) -> list[list]:
    """One row per experiment, then its derived rows (+ts, and dens for sl1h)."""
    rows = []
    for paths in experiment_paths(records).values():
        recs = read_records(store.RecordKey.root_of(paths[0]), paths)
        runs = [Run(r, r.method) for r in recs if r.damaged is None]
        built, _ = aggregate.build_cells(runs)
        names, _ = recorded_names(runs)  # the backbone's recorded display name
        by_variant = {g.variant: g for g in built.values()}
        rows += [_row(by_variant[v], names) for v in SHOWN if v in by_variant]
    return rows


def summary_table(records) -> str:
    """The table of (experiment, record path) pairs, one row per experiment and its derived rows."""
    headers = (["method", "backbone", "seeds"] + [f"{M.get(m).head} (x100)" for m in M.paper()]
               + ["T"])
    # numparse off: "0.230" must keep its digits
    return tabulate(summary_rows(records), headers=headers, tablefmt="github", disable_numparse=True)
