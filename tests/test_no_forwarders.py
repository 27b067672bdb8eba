"""Every module of bench/ is where its code lives: no forwarding module (a
file whose body only imports names from one other bench module and hands
them on), no `moved` module or old-path machinery (an alias in sys.modules,
an import finder, a DeprecationWarning for an old name). The package is
unreleased, so an old path is renamed everywhere instead of kept.

`python -m bench.report.paper.published` runs warning-free: bench.report's
__init__ loads nothing eagerly, so runpy does not find the module imported
before it runs."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the plugin API: one import for a plugin author, gathered from nine modules
FACADES = {"bench/plugins.py"}
OLD_PATH_SIGNS = ("sys.meta_path", "DeprecationWarning", "MetaPathFinder")


def sources() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text()
            for p in sorted((ROOT / "bench").rglob("*.py")) if "__pycache__" not in p.parts}


def forwarded_from(source: str) -> set[str] | None:
    """The bench modules a forwarding module takes its names from, or None
    when `source` holds code of its own (a definition, a computed value, a
    call that does something)."""
    body = ast.parse(source).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    origins = set()
    for node in body:
        if isinstance(node, ast.ImportFrom):
            origins.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            origins.update(a.name for a in node.names)
        elif isinstance(node, ast.Assign) and isinstance(
                node.value, (ast.Name, ast.Attribute, ast.List, ast.Tuple, ast.Constant)):
            continue  # x = module.name, __all__ = [...]
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and any(
                isinstance(a, ast.Name) and a.id == "__name__" for a in node.value.args):
            continue  # alias(__name__): a stub handing itself over
        else:
            return None
    return {o for o in origins if o.startswith(("bench", "."))} or None


def forwarders(files: dict[str, str]) -> list[str]:
    """Modules (not a package's __init__, not a listed facade) whose whole
    body forwards the names of at most two bench modules."""
    return sorted(path for path, text in files.items()
                  if not path.endswith("__init__.py") and path not in FACADES
                  and (origins := forwarded_from(text)) is not None and len(origins) <= 2)


def old_path_machinery(files: dict[str, str]) -> list[str]:
    found = [path for path in files if Path(path).stem == "moved"]
    for path, text in files.items():
        tree = ast.parse(text)
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        found += [f"{path}: {sign}" for sign in ("MOVED", "OldPaths", "alias") if sign in names]
        found += [f"{path}: {sign}" for sign in OLD_PATH_SIGNS if sign in text]
        found += [f"{path}: sys.modules[...] =" for n in ast.walk(tree)
                  if isinstance(n, ast.Assign) and any(
                      isinstance(t, ast.Subscript) and ast.unparse(t.value) == "sys.modules"
                      for t in n.targets)]
    return found


def test_no_module_only_forwards_to_another():
    files = sources()
    assert len(files) > 100 and "bench/core/config.py" in files  # the walk found the tree
    assert forwarders(files) == []


def test_no_moved_module_nor_old_path_machinery():
    assert old_path_machinery(sources()) == []


def test_the_checks_find_each_kind_of_forward():
    stub = '"""Deprecated."""\nfrom bench.core.moved import alias\n\nalias(__name__)\n'
    reexport = ("from bench.calib.metrics import ece, nll\nfrom bench.calib import metrics as m\n"
                "brier = m.brier\n__all__ = ['ece', 'nll', 'brier']\n")
    own = "from bench.calib.metrics import ece\n\ndef twice(p, y):\n    return 2 * ece(p, y)\n"
    files = {"bench/core/a.py": stub, "bench/core/b.py": reexport, "bench/core/c.py": own,
             "bench/core/__init__.py": reexport, "bench/plugins.py": reexport}
    assert forwarders(files) == ["bench/core/a.py", "bench/core/b.py"]
    finder = ("import sys\nimport importlib.abc\nMOVED = {}\nclass OldPaths(importlib.abc."
              "MetaPathFinder):\n    pass\nsys.meta_path.append(OldPaths())\n"
              "sys.modules['bench.x'] = sys\n")
    found = old_path_machinery({"bench/core/moved.py": "", "bench/report/f.py": finder})
    assert found == ["bench/core/moved.py", "bench/report/f.py: MOVED",
                     "bench/report/f.py: OldPaths", "bench/report/f.py: sys.meta_path",
                     "bench/report/f.py: MetaPathFinder", "bench/report/f.py: sys.modules[...] ="]


def test_python_m_on_the_script_path_runs_without_runpy_warning(tmp_path):
    """`python -m bench.report.paper.published` once warned (runpy: the module
    was "found in sys.modules after import of package ... prior to execution"),
    as bench.report's __init__ imported the whole pipeline, that module with it.
    As an error here, that warning would fail the run."""
    fixtures = ROOT / "tests" / "report" / "paper"
    done = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-m", "bench.report.paper.published",
         str(fixtures / "paper_tables.tex"), str(fixtures / "released-notebook-numbers.csv")],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
        text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (ROOT / "bench/report/paper/published.csv").read_text()
