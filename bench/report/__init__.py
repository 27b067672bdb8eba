"""bench.report: run records -> numbers and documents: the results frame
(frame.py, public as bench.results.load), one aggregation over seeds,
derived rows (deep ensemble, temperature scaling), the extra calibration
measures and intervals from saved logits (measures.py, cached), ranks,
statistics, tables (LaTeX, Markdown, terminal), figures, the end-of-run
summary.

May import: bench.core only (and the plugins' registries for names). Never
train, sweep, speed or cli: a report needs neither a GPU nor the datasets.
"""
