"""bench.report: run records -> numbers and documents: the results frame
(frame.py, public as bench.results.load), one aggregation over seeds,
derived rows (deep ensemble, temperature scaling), the extra calibration
measures and intervals from saved logits (measures.py, cached), ranks,
statistics, tables (LaTeX, Markdown, terminal), figures, the end-of-run
summary.

The report as a library: `build(results_dir, ReportOptions(...)) -> Report`
(bench.report.pipeline), then `Report.write(out_dir)` (bench.report.document);
`bench report` is that and a print.

What it may import: the README's "Layout" table (tests/test_layout.py enforces it).
"""
from bench.report.pipeline import build
from bench.report.document import Report
from bench.report.options import ReportOptions

__all__ = ["build", "Report", "ReportOptions"]
