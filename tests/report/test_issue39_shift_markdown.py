"""Issue 39, smaller point: the shift table's Markdown is one block of
columns per severity (at most about 12 columns a line, readable in a
terminal or a README), each block's numbers those of the LaTeX table, whose
one row per method across all severities is unchanged."""
from __future__ import annotations

import re

from bench.cli.main import main


def test_shift_markdown_is_a_block_per_severity_with_the_latex_numbers(tmp_path):
    import evalrecords as E

    root = E.write(tmp_path / "runs", ood=False)
    out = tmp_path / "rep"
    assert main(["report", "--results", str(root), "--out", str(out), "--no-plots",
                 "--no-progress", "--shift"]) == 0
    md = (out / "tables" / "shift_toy_resnet50.md").read_text()
    tex = (out / "tables" / "shift_toy_resnet50.tex").read_text()
    lines = [ln for ln in md.splitlines() if ln.startswith("|")]
    assert lines and max(ln.count("|") - 1 for ln in lines) <= 12
    heads = [ln for ln in lines if ln.startswith("| Method")]
    assert [re.search(r"\| (Clean \(0\)|Severity \d) ACC", h).group(1) for h in heads] == \
        ["Clean (0)"] + [f"Severity {s}" for s in E.SEVERITIES[1:]]
    # per method: the Markdown blocks, read in order, give the LaTeX row's numbers
    md_rows: dict = {}
    for ln in lines:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        if cells[0] in ("Method",) or set(cells[0]) <= {"-"}:
            continue
        md_rows.setdefault(cells[0], []).extend(
            re.sub(r"[*_]|\(\d/\d\)", "", c).strip() for c in cells[1:])
    for label in ("SL1H", "2HML", "D-Ens"):
        row = next(ln for ln in tex.splitlines() if ln.startswith(f"\\textbf{{{label}}}"))
        values = [re.sub(r"[${}\\]|textbf|underline|\^\{?\d/\d\}?", "", v).strip()
                  for v in row.rstrip("\\ ").split(" & ")[1:]]
        assert len(values) == 5 * len(E.SEVERITIES)  # LaTeX: every severity in one row
        assert md_rows[label] == values, label
