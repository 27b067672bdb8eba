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
print (bench.report.output).

What it may import: the README's "Layout" table (tests/test_layout.py enforces it).
"""
import importlib

__all__ = ["build", "Report", "ReportOptions"]
# name -> the module defining it. Not imported here: each public name loads its
# module on first use (the module `__getattr__` below), so `import
# bench.report.<sub>` loads that sub-module alone. An eager import loaded the
# whole pipeline, bench.report.paper.published with it, before `python -m
# bench.report.paper.published` ran that module (runpy's RuntimeWarning: found
# in sys.modules prior to execution). importlib in a module `__getattr__`, not
# import statements in functions (tests/test_lazy_imports.py caps those).
_PUBLIC = {"build": "bench.report.pipeline", "Report": "bench.report.document",
           "ReportOptions": "bench.report.options"}


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'bench.report' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
