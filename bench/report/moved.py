"""The report's old flat paths (bench.report.cells, ...), kept for a deprecation period.

Every module of bench/report was once a file of the package itself; issue 40
sorted them into sub-packages. `import bench.report.cells` (or `from
bench.report import cells`) still works, warns with a DeprecationWarning and
gives the module itself (bench.report.numbers.cells), by one finder
(bench.core.moved.OldPaths) rather than a stub file each. Nothing in this
project uses an old path (tests/test_layout.py checks); they go with
bench.core's after the release that follows issue 40.
"""
from __future__ import annotations

from bench.core.moved import OldPaths

# sub-package -> the modules that moved into it from bench/report/
GROUPS = {
    "numbers": ("frame", "cells", "aggregate", "ranks", "names", "configs", "stats", "paired",
                "unfinished"),
    "render": ("kinds", "tables", "textables", "latex", "markdown", "captions", "footnotes",
               "summary"),
    "plotting": ("figures", "plots", "calplots", "curves", "shiftplots"),
    "evals": ("shift", "shifttables", "setshift", "setshifttables", "sets", "setstables",
              "evalsets", "ood"),
    "paper": ("compare", "comparetables", "comparable", "published", "copied"),
}
# old module path -> new module path
MOVED = {f"bench.report.{name}": f"bench.report.{group}.{name}"
         for group, names in GROUPS.items() for name in names}


def install():
    """Put the old paths' finder on sys.meta_path (once); -> the package's
    module `__getattr__` (an old name as an attribute of bench.report)."""
    return OldPaths.install(MOVED).attribute("bench.report")
