"""Old module paths are for outside users only. bench.core's (stub files,
bench.core.moved) and bench.report's flat ones (one finder, bench.report.moved)
still import, warn with a DeprecationWarning and give the moved module itself;
nothing in this project (bench/, tests/, examples/, benchmarks/) uses one, and
no text of it or of the docs names a flat report module, so dropping the
aliases breaks nothing here."""
from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import bench.report
from bench.core import moved as core_moved
from bench.report import moved as report_moved

ROOT = Path(__file__).resolve().parents[1]
OLD = {**core_moved.MOVED, **report_moved.MOVED}  # old path -> new path
USERS = ("bench", "tests", "examples", "benchmarks")
TEXTS = (".py", ".md", ".sh", ".tex", ".toml")


def files(folders, suffixes=(".py",)) -> dict[str, str]:
    """Path under ROOT -> text, for every file of `folders` with a suffix listed."""
    return {p.relative_to(ROOT).as_posix(): p.read_text()
            for folder in folders for p in sorted((ROOT / folder).rglob("*"))
            if p.suffix in suffixes and p.is_file() and "__pycache__" not in p.parts}


def old_path_uses(source: str, old=OLD) -> set[tuple[int, str]]:
    """(line, old path) where `source` imports an old path (`import a.b`, `from
    a.b import c`, `from a import b`) or names one in a string that is a module
    path (importlib.import_module, monkeypatch.setattr and mock.patch targets)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]
        else:
            continue
        found |= {(node.lineno, o) for n in names for o in old if n == o or n.startswith(o + ".")}
    return found


def flat_report_mentions(text: str) -> list[str]:
    """`bench.report.<flat>` and `bench/report/<flat>.py` in any text: a
    docstring, a comment, a doc page (the new paths have a sub-package between)."""
    names = "|".join(old.rpartition(".")[2] for old in report_moved.MOVED)
    return re.findall(rf"\bbench(?:\.report\.(?:{names})\b|/report/(?:{names})\.py\b)", text)


def test_nothing_here_imports_an_old_path():
    uses = {path: sorted(found) for path, text in files(USERS).items()
            if (found := old_path_uses(text))}
    assert uses == {}, "import the new path (bench.core.moved, bench.report.moved list them)"


def test_no_text_here_names_a_flat_report_module():
    texts = files((*USERS, "docs"), TEXTS)
    texts.update({name: (ROOT / name).read_text() for name in ("README.md", "pyproject.toml")})
    texts.pop("bench/report/moved.py")  # the one place that lists them
    assert len(texts) > 200 and "docs/reports.md" in texts  # the walk found the project
    mentions = {path: found for path, text in texts.items()
                if (found := flat_report_mentions(text))}
    assert mentions == {}, "name the sub-package's module (bench/report/moved.py has the map)"


def test_the_checks_find_each_kind_of_use():
    old, new = sorted(report_moved.MOVED.items())[0]
    package, _, name = old.rpartition(".")
    source = f'''import {old}
from {old} import x
from {package} import build, {name}
importlib.import_module("{old}")
monkeypatch.setattr("{old}.f", g)
from {new} import fine
from {package} import build
'''
    assert old_path_uses(source) == {(line, old) for line in (1, 2, 3, 4, 5)}
    flat, moved = old.replace(".", "/") + ".py", new.replace(".", "/") + ".py"
    text = f"{old} and {flat}; not {new}, {moved}, {package}.build or bench/report/paper/x.csv"
    assert flat_report_mentions(text) == [old, flat]


@pytest.mark.parametrize("old", sorted(OLD))
def test_an_old_path_imports_warns_and_is_the_moved_module(old, monkeypatch):
    new = importlib.import_module(OLD[old])
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=re.escape(f"{old} moved to {OLD[old]}")) as seen:
        exec(compile(f"import {old}", "plugin.py", "exec"), {})
    assert [w.filename for w in seen] == ["plugin.py"]  # the importing line, shown in __main__
    assert sys.modules[old] is new and importlib.import_module(old) is new
    assert new.__spec__.name == OLD[old]  # the module's own spec, not the old path's


@pytest.mark.parametrize("old", sorted(report_moved.MOVED))
def test_a_flat_name_of_the_report_package_warns_and_is_the_moved_module(old, monkeypatch):
    name, new = old.rpartition(".")[2], importlib.import_module(report_moved.MOVED[old])
    monkeypatch.delitem(sys.modules, old, raising=False)
    monkeypatch.delattr(bench.report, name, raising=False)  # as before any import of it
    namespace = {}
    with pytest.warns(DeprecationWarning, match=re.escape(f"{old} moved to")):
        exec(f"from bench.report import {name} as got", namespace)
    assert namespace["got"] is new and getattr(bench.report, name) is new
    monkeypatch.delattr(bench.report, name)
    with pytest.warns(DeprecationWarning, match=re.escape(f"{old} moved to")):
        assert getattr(bench.report, name) is new  # an attribute, with no import statement


def test_the_report_map_names_every_flat_module_that_moved():
    for old, new in report_moved.MOVED.items():
        assert new.rpartition(".")[2] == old.rpartition(".")[2]
        assert (ROOT / f"{new.replace('.', '/')}.py").is_file()
        assert not (ROOT / f"{old.replace('.', '/')}.py").exists()
    # every flat module of issue 40 but the four that stayed: pipeline, options,
    # document (build -> Report, Report.write) and output (where it goes)
    assert len(report_moved.MOVED) == 35
    assert all((ROOT / "bench/report" / f"{n}.py").is_file()
               for n in ("pipeline", "options", "document", "output"))


def test_the_finder_answers_for_old_paths_only():
    assert importlib.util.find_spec("bench.report.nonesuch") is None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("bench.report.nonesuch")
    with pytest.raises(AttributeError, match="nonesuch"):
        bench.report.nonesuch
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new paths import without a warning
        for new in report_moved.MOVED.values():
            importlib.import_module(new)


def test_python_m_on_the_old_script_path_runs_the_moved_module_with_a_note(tmp_path):
    """The transcriber of published.csv was documented as a script at its flat
    path: `python -m <old>` runs it (same output, same exit status) after one
    note naming the new command."""
    new = "bench.report.paper.published"
    old, = (o for o, n in report_moved.MOVED.items() if n == new)  # not spelt out: see above
    fixtures = ROOT / "tests" / "report" / "paper"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run(*args):
        return subprocess.run([sys.executable, "-m", *args],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)

    done = run(old, str(fixtures / "paper_tables.tex"),
               str(fixtures / "released-notebook-numbers.csv"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == (ROOT / "bench/report/paper/published.csv").read_text()
    assert done.stderr.splitlines() == [
        f"note: {old} moved to {new}; run `python -m {new}` (the old path goes after the "
        "next release)"]
    bad, direct = run(old), run(new)  # no arguments: the module's own usage line, exit 2
    usage = bad.stderr.splitlines()[1:]
    assert (bad.returncode, direct.returncode) == (2, 2)
    assert len(usage) == 1 and usage[0].startswith(f"usage: python -m {new} ")
    assert direct.stderr.splitlines() == usage  # nothing else: no runpy warning (below)


def test_python_m_on_the_new_script_path_runs_without_runpy_warning(tmp_path):
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
