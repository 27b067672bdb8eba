"""`Report`: what bench.report.build computed, as data, and `Report.write`,
which writes the files `bench report` writes:

  OUT/runs.csv, OUT/groups.csv, OUT/failed_runs.csv   tidy data
  OUT/cache/measures.json                            the measures' cache
  OUT/stats/paired_tests.csv, OUT/stats/friedman.csv
  OUT/tables/<dataset>_{main,std,ts}.{tex,md} (+ _doc.tex wrappers, all_tables.tex)
  OUT/figures/...                                    reliability, ECE/bins, curves, CD
  OUT/compare/...                                    with --compare paper
  OUT/report.md                                      everything in one page

Figures are drawn on demand (`reliability_figures`, `cd_figure`) or by
`write`; a figure is a matplotlib Figure of its own, never pyplot's state.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bench.core.files import write_text
from bench.core.pathnames import path_name
from bench.report.numbers import aggregate
from bench.report.options import ReportOptions
from bench.report.plotting import curves
from bench.report.plotting import figures as figs
from bench.report.render import latex, textables
from bench.report.render.tables import dataset_name, method_name, missing_notes
from bench.report.paper.comparetables import CLAIM_COLUMNS, ROW_COLUMNS
from bench.report.numbers.cells import CACHE_FILE
from bench.report.render.markdown import report_markdown
from bench.report.paper import comparetables
from bench.report.evals import ood, setshifttables, setstables, shifttables


@dataclass
class Report:
    """A built report. DataFrames: `runs` (runs.csv: one row per run),
    `groups` (groups.csv: one row per cell, a dataset x backbone x row
    aggregate over seeds), `significance` (the paired tests), `friedman`,
    `comparison` / `claims` (--compare paper); `table_cells()` every table
    cell as shown. `tables` are bench.report.render.tables.Table objects (LaTeX and
    Markdown renderers take them), `failures` the failed or unfinished runs,
    `notes` what the report says beside its tables. After `write`, `paths`
    holds the files written and `text` the summary `bench report` prints."""

    options: ReportOptions
    run_list: list  # bench.report.numbers.cells.Run, the finished runs shown
    cell_map: dict  # (dataset, backbone, row) -> aggregate cell of re-run records
    labels: dict  # display names
    tables: list
    failures: list
    notes: list
    runs: pd.DataFrame
    groups: pd.DataFrame
    significance: pd.DataFrame
    friedman: pd.DataFrame
    comparison: dict | None = None  # {"rows", "claims", "notes"} with --compare paper
    cd_results: list = field(default_factory=list)  # (metric, stats.Friedman)
    cache: object = None  # bench.report.numbers.cells.Cache of every computed value
    # --shift: bench.report.evals.shifttables.ShiftReport (its `frame`: the tidy shift measures)
    shift: object = None
    ood: object = None  # --ood: bench.report.evals.ood.OodReport (its `frame`)
    sets: object = None  # --sets: bench.report.evals.sets.SetsData (its `frame`)
    paths: tuple = ()
    text: str = ""

    # ------------------------------------------------------------ data
    def table_cells(self) -> pd.DataFrame:
        """Every table cell as shown: kind, dataset, backbone, row, label, n,
        N, rank, mark, then <metric>_mean / <metric>_std (fractions)."""
        return tables_frame(self.tables)

    @property
    def comparison_frame(self) -> pd.DataFrame | None:
        if self.comparison is None:
            return None
        return pd.DataFrame(self.comparison["rows"], columns=list(ROW_COLUMNS))

    @property
    def claims(self) -> pd.DataFrame | None:
        if self.comparison is None:
            return None
        return pd.DataFrame(self.comparison["claims"], columns=list(CLAIM_COLUMNS))

    # --------------------------------------------------------- figures
    def reliability_figures(self, dataset: str, backbone: str, seed: int | None = None):
        """(binned, smoothed) reliability diagrams of one block (pooled over
        seeds, or of one seed)."""
        return figs.reliability_figures(self.run_list, dataset, backbone, seed,
                                        self.options.sections, self.labels)

    def cd_figure(self, metric: str = "rank"):
        """The critical-difference diagram of `metric` (rank, acc, ece, nll),
        or None where the Friedman test had too few methods or blocks."""
        for m, f in self.cd_results:
            if m == metric:
                return figs.cd_figure(m, f, self.options.alpha)
        return None

    # ----------------------------------------------------------- write
    def write(self, out_dir) -> list[Path]:
        """Write every file of `bench report --out out_dir`; returns them in
        the order the command lists them."""
        opts, out = self.options, Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.cache.file = out / CACHE_FILE
        written = [aggregate.write_frame(out / "runs.csv", self.runs),
                   aggregate.write_frame(out / "groups.csv", self.groups),
                   self.cache.save(),
                   aggregate.write_failures_csv(self.failures, out / "failed_runs.csv"),
                   aggregate.write_frame(out / "stats" / "paired_tests.csv", self.significance)]
        more, sections = self.write_eval_reports(out)
        # all_tables.tex inputs the --shift / --ood tables too
        extra = [p.name.removesuffix("_doc.tex") for p in more if p.name.endswith("_doc.tex")]
        written += write_tables(self.tables, out, extra) + more
        figures = []
        notes = list(self.notes)
        if not opts.no_plots:
            figures = self.write_figures(out)
            written.append(aggregate.write_frame(out / "stats" / "friedman.csv", self.friedman))
        if self.comparison is not None:
            files, line = comparetables.write(self.comparison, out, not opts.no_plots)
            written += files
            notes.append(line)
        md = out / "report.md"
        shown = figures + [p for p in more if p.parent.name == "figures"]
        write_text(md, report_markdown(self.tables, self.failures, notes, shown, out, sections))
        written += figures + [md]
        self.paths = tuple(written)
        self.text = summary_text(self.tables, self.failures, notes, written, self.run_list,
                                 self.labels, len(extra))
        return written

    def write_eval_reports(self, out: Path) -> tuple[list[Path], list[tuple]]:
        """--shift, --ood and --sets (its shift and site sets too): their files
        and report.md sections."""
        written, sections = [], []
        for rep, write in ((self.shift, lambda r: shifttables.write(r, out,
                                                                   not self.options.no_plots)),
                           (self.ood, lambda r: ood.write(r, out)),
                           (self.sets, lambda r: setstables.write(
                               r, out, self.options.sections, self.labels,
                               not self.options.no_plots)),
                           (self.sets and self.sets.shifted, lambda r: setshifttables.write(
                               r, out, self.options.sections, self.labels))):
            if rep is not None:
                files, secs = write(rep)
                written += files
                sections += secs
        return written, sections

    def write_figures(self, out: Path) -> list[Path]:
        """Reliability diagrams, ECE against bins, training curves and CD diagrams."""
        opts, sections = self.options, self.options.sections
        files = figs.make_reliability(self.run_list, out, opts.per_seed, not opts.no_progress,
                                      sections, self.labels)
        files += figs.make_bin_sensitivity(self.cell_map, out, sections, self.labels)
        files += curves.write_curves(self.run_list, out / "figures",
                                     lambda m: method_name(m, self.labels),
                                     lambda ds, bb: figs.block_title(ds, bb, self.labels),
                                     sections)
        return files + figs.make_cd(self.cd_results, out, opts.alpha)


def write_tables(tables, out: Path, extra=()) -> list[Path]:
    """OUT/tables/: each table's LaTeX fragment, its standalone document and
    Markdown (the post-hoc table also its cells as CSV), and all_tables.tex
    (which also inputs the fragments named in `extra`, written beside them)."""
    tdir = out / "tables"
    tdir.mkdir(parents=True, exist_ok=True)
    written = []
    for t in tables:
        name = path_name(f"{t.dataset}_{t.kind}")  # no ':' in a file (bench.core.pathnames)
        missing = missing_notes(t)
        write_text(tdir / f"{name}.tex", latex.fragment(t, missing))
        write_text(tdir / f"{name}_doc.tex", latex.document([name]))
        write_text(tdir / f"{name}.md", textables.render(t, markdown=True, missing=missing) + "\n")
        written += [tdir / f"{name}.tex", tdir / f"{name}_doc.tex", tdir / f"{name}.md"]
        if t.spec.cells_csv:  # its rows are no groups.csv view: every cell as shown
            written.append(aggregate.write_frame(tdir / f"{name}.csv", tables_frame([t])))
    names = [path_name(f"{t.dataset}_{t.kind}") for t in tables] + list(extra)
    write_text(tdir / "all_tables.tex", latex.document(names))
    return written + [tdir / "all_tables.tex"]


def tables_frame(tables) -> pd.DataFrame:
    """One row per shown table cell (see Report.table_cells)."""
    rows = []
    for t in tables:
        for r in t.rows:
            for b in t.backbones:
                c = t.cells.get((r.key, b))
                if c is None:
                    continue
                rows.append({"kind": t.kind, "dataset": t.dataset, "backbone": b, "row": r.key,
                             "method": r.method, "label": r.label, "copied": r.copied,
                             "n": c.n, "N": c.N, "rank": c.rank, "mark": c.mark,
                             **{f"{m}_mean": v for m, v in c.mean.items()},
                             **{f"{m}_std": v for m, v in (c.std or {}).items()}})
    return pd.DataFrame(rows)


def summary_text(tables, failures, notes, written, runs, labels=None, eval_tables=0) -> str:
    """What `bench report` prints: the main tables, notes, failures, files
    (`eval_tables`: how many --shift / --ood tables were written beside them)."""
    lines = []
    for t in tables:
        if t.spec.headline:
            lines += ["", f"{dataset_name(t.dataset, labels)} (test set, x100)",
                      textables.render(t, missing=missing_notes(t))]
    lines += [f"note: {n}" for n in notes]
    if failures:
        lines += ["", f"{len(failures)} failed or unfinished runs (see failed_runs.csv):"]
        lines += [f"  {f['dataset']}/{f['backbone']}/{f['method']} seed {f['seed']}: "
                  f"{f['reason']}" for f in failures]
    lines += ["", f"{len(runs)} runs, {len(tables) + eval_tables} tables, {len(written)} files:"]
    lines += [f"  {p}" for p in written]
    return "\n".join(lines)
