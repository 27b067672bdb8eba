"""Whether a script calling bench.api would be run again by the pool's workers.

The local executor starts its runs through multiprocessing's fork server,
whose children re-import the parent's main module (as `__mp_main__`) before
they run anything: multiprocessing does so to unpickle what the script may
define. A script that calls `bench.api.run(...)` at its top level, outside
`if __name__ == "__main__":`, then calls it again in every worker, where
starting processes is refused, and every run fails with "process exited with
code 1 before reporting". `require_guard` finds that call before anything
starts and says what to add, in one line.
"""
from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

from bench.core.errors import BenchError


def reimported_script() -> Path | None:
    """The file of `__main__` that a spawned or fork-server child re-runs, or
    None where none is (a notebook, the REPL, `python -c`, `python -m
    pkg.__main__`, an IPython script): multiprocessing.spawn's own rules
    (get_preparation_data, _fixup_main_from_name / _fixup_main_from_path)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path:
        return None
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name is not None and (name == "__main__" or name.endswith(".__main__")):
        return None
    if name is None and os.path.splitext(os.path.basename(path))[0] == "ipython":
        return None
    return Path(path)


def unguarded_line(source: str, line: int) -> bool:
    """Whether module-level line `line` of `source` lies outside every
    `if __name__ == "__main__":` body (and `!=`'s else branch)."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.If):
            continue
        branch = _guarded_branch(node)
        if branch and branch[0].lineno <= line <= branch[-1].end_lineno:
            return False
    return True


def _guarded_branch(node: ast.If) -> list:
    """The statements of `node` that run only in the main process: the body
    of `__name__ == "__main__"`, the else of `!=`; [] for another test."""
    test = node.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return []
    sides = {_text(test.left), _text(test.comparators[0])}
    if sides != {"name:__name__", "str:__main__"}:
        return []
    if isinstance(test.ops[0], ast.Eq):
        return node.body
    return node.orelse if isinstance(test.ops[0], ast.NotEq) else []


def _text(node) -> str:
    if isinstance(node, ast.Name):
        return f"name:{node.id}"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return f"str:{node.value}"
    return ""


def require_guard(caller: str) -> None:
    """BenchError when this call comes from the top level of a script the
    workers re-import, outside its `__main__` guard; nothing where that cannot
    be told (no script, its source unreadable, code run by exec)."""
    script = reimported_script()
    if script is None:
        return
    main_globals = sys.modules["__main__"].__dict__
    frame, line = sys._getframe(1), None
    while frame is not None:  # the outermost frame of the script's own module code
        code = frame.f_code
        if frame.f_globals is main_globals and code.co_name == "<module>" \
                and os.path.abspath(code.co_filename) == os.path.abspath(script):
            line = frame.f_lineno
        frame = frame.f_back
    if line is None:
        return
    try:
        source = script.read_text(encoding="utf-8")
        unguarded = unguarded_line(source, line)
    except (OSError, UnicodeDecodeError, SyntaxError):
        return
    if unguarded:
        raise BenchError(f"{caller}: called from line {line} of {script}, outside "
                         "`if __name__ == \"__main__\":`; the worker processes re-import the "
                         "script and would run it again, so every run would fail; put the "
                         "script's calls under that guard (docs/api.md, \"From a script\")")
