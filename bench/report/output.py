"""Where `bench report` (and bench.api.report) put a report: the whole of it
into --out at once, or nothing.

A report is many files (CSVs, tables, figures, report.md); written one by one
into --out, a failure half-way (a full disk, an error in a late table) left a
folder that looked finished: new runs.csv and main tables beside the previous
TS table. Here Report.write fills a hidden staging folder inside --out and
bench.core.files.replace_entries swaps its entries in by renames, so a failed
report leaves the previous one untouched, and files of the user's own in
--out are never touched.
"""
from __future__ import annotations

import os
from pathlib import Path

from bench.core.files import replace_entries
from bench.report.numbers.aggregate import write_failures_csv


def write_report(report, out) -> list[Path]:
    """report.write(out), whole or not at all; report.paths and report.text
    name the files at their final place."""
    out = Path(out)
    written, stage = replace_entries(out, report.write)
    report.paths = tuple(out / os.path.relpath(p, stage) for p in written)
    report.text = report.text.replace(str(stage), str(out))
    return list(report.paths)


def write_failures(failures: list[dict], out) -> Path:
    """Only OUT/failed_runs.csv, for a report that found no finished record
    (bench.report.pipeline.NoRecords): the runs it names, with their reasons."""
    out = Path(out)
    _, stage = replace_entries(out, lambda s: write_failures_csv(failures, s / "failed_runs.csv"))
    return out / "failed_runs.csv"
