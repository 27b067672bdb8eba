"""Imports sit at a module's top; one inside a function says why it is lazy
(a comment on its line, or above it or above its contiguous block)."""
from __future__ import annotations

import ast
import io
import tokenize

from tests.test_layout import MODULES

# --------------------------------------------------- a lazy import says why --
# Imports sit at a module's top; one inside a function stays there for a reason
# (start-up, an optional package, ...) that a comment on its line or the line
# above says (one comment heads a contiguous block): docs/design-notes.md,
# "Start-up". Every module of bench/ is checked.


def unexplained_lazy_imports(source: str) -> list[int]:
    """First lines of the imports inside a function in `source` with a comment
    neither on their lines nor above them (or above the block they end)."""
    comments = {t.start[0]: t.line.lstrip().startswith("#")  # True: a line of its own
                for t in tokenize.generate_tokens(io.StringIO(source).readline)
                if t.type == tokenize.COMMENT}
    lazy = {n.lineno: n for f in ast.walk(ast.parse(source))
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
    starts = {n.end_lineno: n.lineno for n in lazy.values()}
    bare = []
    for start, node in sorted(lazy.items()):
        if any(line in comments for line in range(start, node.end_lineno + 1)):
            continue
        above = start - 1
        while above in starts:  # up to the first import of the block
            above = starts[above] - 1
        if not comments.get(above):
            bare.append(start)
    return bare


def test_every_lazy_import_says_why():
    bare = {name: lines for name, path in MODULES.items()
            if (lines := unexplained_lazy_imports(path.read_text()))}
    assert len(MODULES) > 100  # the whole package was read
    assert bare == {}, ("move each import to its module's top, or say on the line above why "
                        "it must stay lazy (docs/design-notes.md, 'Start-up')")


def test_the_lazy_import_check_finds_a_bare_one():
    source = '''import os
def f():
    import json
    # torch: start-up
    import torch
    from torch.nn import (functional,
                          init)

    import numpy
    import pandas  # optional: the import is the check
    from scipy import (
        stats)  # a comment on any of its lines
    # a comment above code, not above the import
    y = 2
    import sklearn
class C:
    import re
    def g(self):
        import tabulate
'''
    assert unexplained_lazy_imports(source) == [3, 9, 15, 19]
