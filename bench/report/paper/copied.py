"""`bench report --published-rows`: the paper's published rows beside re-run ones.

For every (dataset, backbone) block of the paper that a report shows, the
paper's rows of its eight methods, D-Ens and the +TS rows become cells of
their own, row keys METHOD@paper (bench.core.paper.COPIED_SUFFIX), one number each (the
published mean; no std, no seeds to pair). A table never mixes copied and
re-run rows of one method: a method with records of its own in that
dataset's table keeps its own rows and its published rows are left out.
Ranks are computed over every row shown, copied ones included (the tables'
footnote says so). The numbers come from bench.report.paper.published.
"""
from __future__ import annotations

from bench.core.errors import BenchError
from bench.core.paper import COPIED_SUFFIX
from bench.calib import variants as V
from bench.report.paper import published
from bench.report.numbers.cells import CellData
from bench.report.render.tables import paper_metrics

# per dataset: the published table of its means, and of its +TS rows
SOURCES = {"chaoyang": ("chaoyang", "chaoyang_ts"), "kvasir": ("kvasir", "kvasir_ts"),
           "pathmnist": ("pathmnist_dispersion", None)}
NONE_ADDED = ("--published-rows added no row: no table here has a block of the paper "
              "(chaoyang, kvasir, pathmnist x resnet50, convnext_tiny, swin_tiny) with a "
              "published method that has no records of its own")


def check_metrics(metrics: tuple) -> None:
    """Copied rows carry only the paper's columns (ACC, ECE, NLL)."""
    if metrics and tuple(metrics) != paper_metrics():
        raise BenchError(f"--published-rows with --metrics {','.join(metrics)}: the paper "
                         "published ACC, ECE and NLL only; drop --metrics or use "
                         "--metrics ece,nll")


def _cell(r: dict, key: str, method: str, variant: V.Variant) -> CellData:
    n = published.SEEDS  # every published row is over 5 runs (D-Ens: of 5 members)
    return CellData(r["dataset"], r["backbone"], key, method, "paper", tuple(range(n)),
                 {m: [r[m] / 100] for m in published.METRICS}, {}, single=True,
                 extra={"copied": True}, variant=variant)


def published_cells(cells: dict, with_ts: bool = True) -> dict:
    """(dataset, backbone, row key) -> CellData of each published row that the
    report's blocks take (see the module docstring)."""
    blocks = {(ds, bb) for ds, bb, _ in cells if ds in SOURCES}
    rerun = {(ds, g.row_method) for (ds, _, _), g in cells.items()}
    out = {}
    for r in published.rows():
        ds, bb, m, variant = r["dataset"], r["backbone"], r["method"], r["variant"]
        main, ts = SOURCES.get(ds, (None, None))
        if (ds, bb) not in blocks or (ds, m) in rerun or r["table"] not in (main, ts):
            continue
        copy = f"{m}{COPIED_SUFFIX}"
        if r["table"] == main:
            out[(ds, bb, copy)] = _cell(r, copy, copy, V.COPIED)
        elif with_ts:  # the +TS table's rows, keyed as their variants key them
            ts_variant = V.of_column(variant)
            key = ts_variant.key(copy)
            out[(ds, bb, key)] = _cell(r, key, copy, ts_variant)
    return out
