"""OUT/report.md: every table in Markdown, notes, failed runs and figures."""
from __future__ import annotations

import os
from pathlib import Path

from bench.report import textables
from bench.report.tables import dataset_name, missing_notes

TITLES = {"main": "results", "std": "mean ± std over seeds",
          "ts": "with/out temperature scaling (+TS rows: head logits averaged, then scaled)",
          "posthoc": "with/out post-hoc calibration fitted on the validation split (head "
                     "logits averaged first)"}


def title(table) -> str:
    """What the table's cells hold (intervals in the std table with --ci)."""
    if table.kind == "std" and table.ci:
        return "mean and 95% interval [lo, hi] over seeds"
    return TITLES[table.kind]


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
