"""The tree is the architecture: every module imports, no import cycles between
the project's modules, and the one-way dependency rule between packages
(bench/*/__init__.py docstrings state it)."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {"bench": ROOT / "bench", "bench.methods": ROOT / "methods",
           "bench.datasets": ROOT / "datasets"}
# package -> the packages it may import (besides itself)
ALLOWED = {
    "core": set(),
    "methods": {"core"},
    "datasets": {"core"},
    "train": {"core", "methods", "datasets"},
    "sweep": {"core", "train", "methods", "datasets"},
    "report": {"core", "methods", "datasets"},
    "speed": {"core", "train", "sweep", "methods", "datasets"},
    "cli": {"core", "train", "sweep", "report", "speed", "methods", "datasets"},
    "results": {"core", "report"},  # bench.results: the public facade of the results frame
    "plugins": {"core", "train", "methods", "datasets"},  # bench.plugins: the plugin API
    # bench.api: the harness from Python, beside the CLI (never importing it)
    "api": {"core", "train", "sweep", "methods", "datasets", "results", "report"},
}


def modules() -> dict[str, Path]:
    """Every project module name -> its file (packages by their __init__)."""
    out = {}
    for prefix, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([prefix, *parts])
            if prefix == "bench" and parts and parts[0] in ("methods", "datasets"):
                continue
            out[name] = path
    return out


MODULES = modules()


def imported(name: str, path: Path) -> set[str]:
    """Project modules `name` imports anywhere in its file (top level or inside
    functions: a lazy import is still a dependency)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for t in targets:
            while t and t not in MODULES:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


GRAPH = {name: imported(name, path) for name, path in MODULES.items()}


def layer(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else None


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_imports_and_says_what_it_is_for(name):
    if name.endswith(".__main__"):  # importing an entry point runs it: compile only
        compile(MODULES[name].read_text(), str(MODULES[name]), "exec")
    else:
        importlib.import_module(name)
    doc = ast.get_docstring(ast.parse(MODULES[name].read_text()))
    assert doc and doc.strip(), f"{name} has no docstring saying what it is for"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    # A package __init__ that re-exports its own submodules is not a cycle
    # unless a submodule imports the package back.
    assert cycles(GRAPH) == []


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_packages_import_only_downwards():
    bad = [f"{a} imports {b}" for a, deps in GRAPH.items() for b in deps
           if layer(a) and layer(b) and layer(a) != layer(b)
           and layer(b) not in ALLOWED[layer(a)]]
    assert bad == []


def test_every_package_is_in_the_rule():
    assert {layer(n) for n in MODULES if layer(n)} == set(ALLOWED)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_files_stay_small(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= 420, f"{name}: {lines} lines; split it by concern"


def test_the_walk_finds_the_project():
    # A wrong ROOT once made every rule above pass vacuously.
    assert len(MODULES) > 40 and "bench.train.loop" in MODULES and "bench.methods.mhml" in MODULES
    assert "bench.core.config" in GRAPH["bench.train.loop"]
