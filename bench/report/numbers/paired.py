"""Paired significance tests of every table row against a reference method
(`bench report --significance --significance-ref METHOD`, default SL1H)."""
from __future__ import annotations

from bench.core.errors import BenchError
from bench.calib import variants as V
from bench.report.numbers import stats
from bench.report.render.tables import REFERENCE

COLUMNS = ("dataset", "backbone", "row", "metric", "test", "n", "statistic", "p", "significant")


def check_reference(reference: str, present) -> None:
    """The reference must be a trained method with records in this report."""
    if reference not in present:
        raise BenchError(f"--significance-ref {reference}: no records of that method here; "
                         f"choose from: {', '.join(sorted(present))}")


def significance(cells: dict, test: str, alpha: float,
                 reference: str = REFERENCE) -> tuple[dict, list[dict]]:
    """(dataset, backbone, row) -> {metric: p < alpha} against `reference`;
    one dict per test (COLUMNS, the rows of stats/paired_tests.csv). A TS-table row is compared with that table's un-scaled
    reference row (logits averaged, T = 1)."""
    marks, rows = {}, []
    for (ds, bb, key), g in sorted(cells.items()):
        ref_key = V.TS_BASE.key(reference) if g.variant in V.TS_VARIANTS else reference
        ref = cells.get((ds, bb, ref_key))
        if ref is None or key == ref_key or g.single:
            continue
        res = stats.paired_vs_reference(g.values, g.seeds, ref.values, ref.seeds, test=test)
        marks[(ds, bb, key)] = {m: r is not None and r.p < alpha for m, r in res.items()}
        for m, r in res.items():
            if r is not None:
                rows.append(dict(zip(COLUMNS, (ds, bb, key, m, r.test, r.n, r.statistic,
                                               r.p, r.p < alpha))))
    return marks, rows
