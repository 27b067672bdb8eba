"""Each table kind is declared once (bench.report.render.kinds) and read there: no
report module compares a kind's name, and what the pipeline computes and
shows follows the declarations."""
import ast
import csv
from pathlib import Path

import pytest
from report_records import write_known

from bench.calib import variants as V
from bench.cli.main import main
from bench.report.render import kinds
from bench.report.options import KINDS, ReportOptions

REPORT = Path(__file__).resolve().parents[2] / "bench" / "report"
NAMES = set(kinds.KINDS)


def kind_comparisons(source: str) -> list[int]:
    """Lines comparing something named kind (a variable or a .kind) with a
    kind's name, or testing one for membership in a tuple of them."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        named = any((isinstance(s, ast.Name) and s.id == "kind")
                    or (isinstance(s, ast.Attribute) and s.attr == "kind") for s in sides)
        consts = [c.value for s in sides for c in ast.walk(s) if isinstance(c, ast.Constant)]
        if named and NAMES & set(consts):
            lines.append(node.lineno)
    return lines


def test_no_report_module_compares_a_kind_name():
    files = sorted(REPORT.rglob("*.py"))  # the sub-packages too
    assert REPORT / "render" / "kinds.py" in files and len(files) > 40
    sites = {str(p.relative_to(REPORT)): lines for p in files if p.name != "kinds.py"
             and (lines := kind_comparisons(p.read_text()))}
    assert sites == {}, "read the table's TableKind (table.spec) instead"


def test_the_check_finds_a_comparison():
    src = 'if table.kind in ("ts", "posthoc"): pass\nif kind == "std": pass\nif x == "std": pass\n'
    assert kind_comparisons(src) == [1, 2]


def test_every_dataset_table_kind_has_its_caption_option():
    assert KINDS == ("main", "std", "ts", "posthoc")
    opts = ReportOptions(caption_ts="mine {dataset}")
    assert opts.caption("ts") == "mine {dataset}"
    assert opts.caption("main") == kinds.MAIN.caption
    assert ReportOptions(ci=True).caption("std") == kinds.STD.ci_caption


@pytest.mark.parametrize("with_ts,variants,expected", [
    (True, (), ["plain", "ts-base", "ts"]),
    (False, (), ["plain"]),
    (True, ("vs", "iso"), ["plain", "ts-base", "ts", "vs", "iso"]),
    # --no-ts: no +TS row, even with --variants (the posthoc table's base row stays)
    (False, ("hb",), ["plain", "ts-base", "hb"]),
    (False, ("ts", "hb"), ["plain", "ts-base", "ts", "hb"]),  # asked for by name
])
def test_computed_variants(with_ts, variants, expected):
    assert [v.name for v in kinds.computed_variants(with_ts, variants)] == expected


def test_rows_of_each_kind():
    assert kinds.MAIN.rows() is None and kinds.STD.rows() is None
    assert kinds.TS.rows() == V.TS_VARIANTS
    assert kinds.POSTHOC.rows(True, ("vs",)) == (V.TS_BASE, V.get("vs"))
    assert [v.name for v in kinds.SHIFT.rows(False, ("ts", "vs"))] == ["plain", "ts", "vs"]
    assert [k.name for k in kinds.TABLES if k.shown(False, ())] == ["main", "std"]
    assert kinds.POSTHOC.fitted(True, ("vs",)) == [V.get("vs")]


def _rows_written(tmp_path, *flags) -> set:
    """The `row` keys of groups.csv after `bench report --no-plots <flags>`
    over the known records (written once per test)."""
    results = tmp_path / "results"
    if not results.exists():
        write_known(results)
    out = tmp_path / ("out" + "".join(flags))
    assert main(["report", "--results", str(results), "--out", str(out), "--no-plots",
                 "--no-progress", *flags]) == 0
    with open(out / "groups.csv", newline="") as f:
        return {r["row"] for r in csv.DictReader(f)}


def test_no_ts_writes_no_ts_row_to_groups_csv_even_with_variants(tmp_path):
    rows = _rows_written(tmp_path, "--no-ts", "--variants", "hb")
    assert {"sl1h+hb", "sl1h@ts-base", "4hml+hb"} <= rows  # the posthoc table's rows
    assert not [r for r in rows if r.endswith("+ts")]
    # asked for by name, the +TS rows are back
    assert {"sl1h+ts", "4hml+ts"} <= _rows_written(tmp_path, "--no-ts", "--variants", "ts,hb")
