"""bench.report: run records -> numbers and documents: the results frame
(frame.py, public as bench.results.load), one aggregation over seeds,
derived rows (deep ensemble, temperature scaling), the extra calibration
measures and intervals from saved logits (measures.py, cached), ranks,
statistics, tables (LaTeX, Markdown, terminal), figures, the end-of-run
summary.

What it may import: the README's "Layout" table (tests/test_layout.py enforces it).
"""
