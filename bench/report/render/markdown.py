"""OUT/report.md: every table in Markdown, notes, failed runs and figures."""
from __future__ import annotations

import os
from pathlib import Path

from bench.report.render import textables
from bench.report.render.tables import dataset_name, missing_notes

def title(table) -> str:
    """What the table's cells hold (intervals in the std table with --ci)."""
    return table.spec.title_for(table.ci)


def report_markdown(tables, failures, notes, figures, out: Path, sections=()) -> str:
    """report.md; `sections`: (title, Markdown) of the --shift / --ood tables."""
    lines = ["# mhml-bench report", "",
             "Test-set metrics x100: ACC (higher is better), ECE and NLL (lower is better); "
             "Rank = mean of the three per-backbone ranks (1 = best; best in bold italics, "
             "second in bold).", ""]
    for t in tables:
        lines += [f"## {dataset_name(t.dataset, t.names)}: {title(t)}", "",
                  textables.render(t, markdown=True, missing=missing_notes(t)), ""]
    for title_text, text in sections:
        lines += [f"## {title_text}", "", text, ""]
    if failures:
        lines += ["## Failed or unfinished runs", "", "| run | seed | reason |", "|---|---|---|"]
        lines += [f"| {f['dataset']}/{f['backbone']}/{f['method']} | {f['seed']} | "
                  f"{str(f['reason']).replace('|', '/')} |" for f in failures]
        lines.append("")
    if notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    pngs = [p for p in figures if Path(p).suffix == ".png"]
    if pngs:
        lines += ["## Figures", ""]
        lines += [f"![{Path(p).stem}]({os.path.relpath(p, out)})" for p in pngs] + [""]
    return "\n".join(lines)
