"""The code identity of a plugin: which source files make it up, and one
digest of them that only a change to the code moves.

A plugin's code is the whole of what it ships, not only the module that
registers a name (a loss moved into an imported helper module must still
count):

- the files its distribution installs (the `.py` files its RECORD lists),
  when the plugin's module is one of them (a regular `pip install`);
- otherwise (an editable install, `--plugin`, `BENCH_PLUGINS`, a module a
  script imported) its top-level package folder, every `.py` file under
  it, or the single module file when it is not a package.

Each file is normalised before it is hashed (`normalised`, UNPARSED):
parsed, its docstrings dropped, and written back with `ast.unparse`, so
comments, docstrings, blank lines and formatting do not count and anything
that changes what runs does. The digest is the sha256 over each file's name
(relative to the folder it was installed or found in) and its normalised
text, in name order. A file that does not parse is hashed as its bytes.

`normalised` is the one normaliser of code text: a built-in method's code
units (bench.core.codeunits) are read through it too, in its DUMPED form.
The two forms stay two because each is what existing records' digests were
made with: a plugin's digest enters its config hash, a unit's is pinned in
codepins.json.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import os
import sys
from importlib import metadata
from pathlib import Path

DOC_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
UNPARSED = "unparsed"  # a plugin's files: docstrings out, ast.unparse
DUMPED = "dumped"      # a built-in code unit: node types and fields
NOT_RUN = {"annotation", "returns", "type_comment", "ctx"}  # fields that never change a number


def normalised(source: bytes, form: str = UNPARSED, pick=None) -> bytes:
    """`source` without what does not change what runs, written one way.

    UNPARSED: docstrings dropped, written back with ast.unparse. DUMPED:
    imports, bare strings, `if TYPE_CHECKING:` blocks and annotations dropped
    as well, each top-level statement that `pick(tree)` chooses (default:
    all) written as its node types and non-empty fields, one a line: a dump
    written here so that it does not move between Python versions (ast.dump's
    and ast.unparse's output may)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # it cannot run either; its bytes still identify it
        return source
    if form == DUMPED:
        stmts = pick(tree) if pick else tree.body
        return "\n".join(_dump(s) for s in stmts if not _inert(s)).encode()
    for node in ast.walk(tree):
        if isinstance(node, DOC_OWNERS) and _docstring(node.body):
            # an emptied body still unparses; `pass` keeps it valid Python
            node.body = node.body[1:] or [ast.Pass()]
    return ast.unparse(tree).encode()


def _docstring(body: list) -> bool:
    first = body[0] if body else None
    return (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str))


def _inert(node) -> bool:
    """A statement that changes no number: an import (moving one is a
    refactor), a bare string (a docstring), an `if TYPE_CHECKING:` block."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return isinstance(node.value.value, str)
    test = getattr(node, "test", None) if isinstance(node, ast.If) else None
    return getattr(test, "id", getattr(test, "attr", None)) == "TYPE_CHECKING"


def _dump(node) -> str:
    """Node type and non-empty fields, recursively: empty fields are left out
    so that a field a newer Python adds (type_params) changes nothing."""
    if isinstance(node, list):
        return "[" + ",".join(_dump(x) for x in node if not _inert(x)) + "]"
    if not isinstance(node, ast.AST):
        return repr(node)
    fields = [f"{k}={_dump(v)}" for k, v in ast.iter_fields(node)
              if k not in NOT_RUN and v is not None and v != []]
    return f"{type(node).__name__}({','.join(fields)})"


def plugin_files(module) -> list[tuple[str, Path]]:
    """(name, path) of every source file of the plugin that `module` belongs
    to, sorted by name ([] for a module without a file: a notebook cell)."""
    file = getattr(module, "__file__", None)
    if not file or not os.path.exists(file):
        return []
    path = Path(file).resolve()
    top = sys.modules.get(module.__name__.split(".")[0]) or module
    top_path = Path(top.__file__).resolve() if getattr(top, "__file__", None) else path
    root = top_path.parent.parent if top_path.name == "__init__.py" else top_path.parent
    # only a folder of installed distributions (site-packages) can hold one
    # whose RECORD lists the plugin: elsewhere no distribution is scanned
    if any(root.glob("*.dist-info")):
        installed = _distribution_files(module.__name__.split(".")[0], path)
        if installed:
            return sorted(installed)
    return sorted(_package_files(top_path))


def _distribution_files(top: str, path: Path) -> list[tuple[str, Path]]:
    """The .py files of the distribution that installs `top`, if it lists `path`."""
    for dist_name in _distributions().get(top, ()):
        try:
            listed = metadata.distribution(dist_name).files or []
        except metadata.PackageNotFoundError:
            continue
        files = [(str(f), Path(f.locate()).resolve()) for f in listed if f.suffix == ".py"]
        files = [(name, p) for name, p in files if p.exists()]
        if any(p == path for _, p in files):
            return files
    return []


@functools.lru_cache(maxsize=1)
def _distributions() -> dict:
    """Top-level import name -> distributions installing it (scanned once a process)."""
    return metadata.packages_distributions()


def _package_files(top_path: Path) -> list[tuple[str, Path]]:
    """Every .py file of a top-level package (`top_path` its __init__.py), or
    the one file of a top-level module."""
    if top_path.name != "__init__.py":
        return [(top_path.name, top_path)]
    folder = top_path.parent
    return [(Path(os.path.relpath(p, folder.parent)).as_posix(), p)
            for p in folder.rglob("*.py") if "__pycache__" not in p.parts]


def digest(modules) -> tuple[list[str], str]:
    """(file names, sha256) of the plugins the `modules` belong to, read now
    (an edit shows at once); a module without a file counts by its source."""
    files: dict[str, Path] = {}
    loose = []
    for module in modules:
        found = plugin_files(module)
        files.update(found)
        if not found:
            loose.append(module)
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + normalised(files[name].read_bytes()) + b"\0")
    for module in loose:
        h.update(module.__name__.encode() + b"\0" + normalised(_cell_source(module)) + b"\0")
    return sorted(files) + [m.__name__ for m in loose], h.hexdigest()


def _cell_source(module) -> bytes:
    try:  # defined in a notebook cell or `python -c`: what inspect can see
        return inspect.getsource(module).encode()
    except (OSError, TypeError):
        return module.__name__.encode()
