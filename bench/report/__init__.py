"""bench.report: run records -> numbers and documents, by concern:

- numbers/   the results frame (public as bench.results.load), the runs a
             report shows and their cells (measure(variant(records)), cached),
             configs and display names, ranks, significance statistics;
- render/    the table kinds, the tables as data and as text (terminal,
             Markdown, LaTeX), captions, footnotes, the end-of-run summary;
- plotting/  the figures (reliability and CD diagrams, curves, shift plots);
- evals/     beyond the test split's tables: shift, OOD, prediction sets;
- paper/     the paper's published numbers, --compare paper, --published-rows.

The report as a library: `build(results_dir, ReportOptions(...)) -> Report`
(bench.report.pipeline), then
`Report.write(out_dir)` (bench.report.document); `bench report` is that and a
print (bench.report.output). The old flat paths (bench.report.<module>)
still import, warning: bench.report.moved.

What it may import: the README's "Layout" table (tests/test_layout.py enforces it).
"""
from bench.report import moved as _moved
from bench.report.pipeline import build
from bench.report.document import Report
from bench.report.options import ReportOptions

__all__ = ["build", "Report", "ReportOptions"]

__getattr__ = _moved.install()
