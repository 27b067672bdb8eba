"""The tree is the architecture: every module imports, no import cycles between
the project's modules, and the one-way dependency rule between packages, as
the README's "Layout" table states it (this file parses that table)."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {"bench": ROOT / "bench"}
RULE_MARK = "<!-- the dependency rule: tests/test_layout.py parses this table -->"


def readme_rule(text: str) -> dict[str, set[str]]:
    """package -> the packages it may import (besides itself), read from the
    table under RULE_MARK in the README's "Layout": the rule is written once,
    there, and this test enforces what it says."""
    lines = text[text.index(RULE_MARK):].splitlines()[1:]
    rule = {}
    for line in lines[2:]:  # skip the header row and the |---| row
        if not line.startswith("|"):
            break
        package, deps = [c.strip() for c in line.strip("|").split("|")]
        deps = deps.split("(")[0]  # a parenthesis is a remark, not a package
        rule[package.strip("`")] = {d.strip() for d in deps.split(",")} - {"", "—"}
    return rule


ALLOWED = readme_rule((ROOT / "README.md").read_text())


def modules() -> dict[str, Path]:
    """Every project module name -> its file (packages by their __init__)."""
    out = {}
    for prefix, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([prefix, *parts])] = path
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
            # `from pkg import submodule` binds the submodule; Python imports it
            # even while pkg/__init__ is still running, so it does not depend on
            # what the __init__ defines. Any other name does.
            subs = [f"{base}.{a.name}" for a in node.names]
            targets = subs + ([base] if any(t not in MODULES for t in subs) else [])
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
    # unless a submodule imports a name the package's __init__ defines.
    assert cycles(GRAPH) == []


def test_from_package_import_name_depends_on_the_package_but_a_submodule_does_not(tmp_path):
    path = tmp_path / "x.py"
    path.write_text("from bench.report.numbers import frame\n")
    assert imported("bench.sweep.x", path) == {"bench.report.numbers.frame"}
    path.write_text("from bench.report import build\n")  # a function its __init__ defines
    assert imported("bench.sweep.x", path) == {"bench.report"}


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def against_rule(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} imports {b}" for a, deps in graph.items() for b in deps
                  if layer(a) and layer(b) and layer(a) != layer(b)
                  and layer(b) not in ALLOWED[layer(a)])


def test_packages_import_only_downwards():
    assert against_rule(GRAPH) == []


def test_every_package_is_in_the_rule():
    assert {layer(n) for n in MODULES if layer(n)} == set(ALLOWED)


def test_the_rule_names_only_packages_and_nothing_imports_cli():
    assert set().union(*ALLOWED.values()) <= set(ALLOWED)
    assert ALLOWED["core"] == set() and all("cli" not in deps for deps in ALLOWED.values())
    assert ALLOWED["calib"] == {"core"}  # the calibration maths: arrays in, numbers out


def test_the_rule_is_read_from_the_readme_table():
    # A parser that read nothing would make every import "against the rule"
    # fail loudly, but one that read too much would pass vacuously: pin it.
    text = f"""intro\n{RULE_MARK}\n| package | may import |\n|---|---|
| `core` | — (remark, with commas) |\n| `train` | core, methods (why) |\n\nafter | x |\n"""
    assert readme_rule(text) == {"core": set(), "train": {"core", "methods"}}


def test_an_import_against_the_rule_is_found():
    graph = {"bench.report.numbers.frame": {"bench.train.loop", "bench.core.store"}}
    assert against_rule(graph) == ["bench.report.numbers.frame imports bench.train.loop"]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_files_stay_small(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= 420, f"{name}: {lines} lines; split it by concern"


def test_the_walk_finds_the_project():
    # A wrong ROOT once made every rule above pass vacuously.
    assert len(MODULES) > 40 and "bench.train.loop" in MODULES and "bench.methods.mhml" in MODULES
    assert "bench.core.config" in GRAPH["bench.train.loop"]
    # the plugin packages and the plugin API are under the rule too
    assert {"bench.plugins", "bench.core.plugins", "bench.datasets.digits",
            "bench.methods.base"} <= set(MODULES)
    # a sub-package is in its package's layer: report's rule holds for report/numbers/...
    assert layer("bench.report.numbers.cells") == "report" and "bench.report.numbers.cells" in GRAPH


# ------------------------------------------------ the record path's one home --
# The results tree <dataset>/<backbone>/<method>/<config-hash>/seed<k> (and its
# <config-hash>/_sweep/ side folder) is composed and parsed by bench/core/store.py
# only. A heuristic, on code lines (comments skipped): source patterns that build
# or take apart such a path anywhere else.
RECORD_PATH_PATTERNS = {
    "seed<k> composed": r"(?<!\w)seed\{",  # f".../seed{k}", not f"..._seed{k}"
    "seed<k> parsed": r"(removeprefix|startswith)\(\s*[\"']seed|\[4:\]",
    "path parts indexed": r"\bparts\[",
    "path under a root": r"\.relative_to\(",  # a record's label is its path under the root
    "deep parents": r"\.parents\[[3-9]\]",  # a record's results root is parents[4]
    "record glob": r"\*/\*/\*",
    "side folder": r"[\"']_sweep[\"']",
}


def record_path_sites(source: str) -> dict[str, int]:
    """pattern -> how many code lines of `source` match it."""
    import re

    found: dict[str, int] = {}
    for line in source.splitlines():
        if line.strip().startswith("#"):
            continue
        for kind, pattern in RECORD_PATH_PATTERNS.items():
            if re.search(pattern, line):
                found[kind] = found.get(kind, 0) + 1
    return found


RECORD_PATH_SITES = {name: sites for name, path in MODULES.items()
                     if name != "bench.core.store"
                     and (sites := record_path_sites(path.read_text()))}


def test_no_record_path_outside_the_store():
    assert RECORD_PATH_SITES == {}, (
        "compose or parse record paths in bench/core/store.py (RecordKey, side_file) "
        "and call it from here")


# ------------------------------------------- a record's files: bench/core only --
# A record's files (config.json, metrics.json, predictions.npz) are read by
# bench.core (bench.core.record.Record and bench.core.store) and nowhere else:
# no other module names one in its code (docstrings and comments may).
# (a record's kept weights, model.safetensors, share their name with the Hugging
# Face hub's weight files, which bench.train.weights names: not listed)
RECORD_FILES = ("config.json", "metrics.json", "predictions.npz", "evals.json")


def record_file_sites(source: str) -> list[int]:
    """Lines of `source` whose code names a record's file as a path (a string
    that is the file's name, not a docstring or a message) or calls
    store.load_predictions."""
    tree = ast.parse(source)
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)}
    lines = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in docs  # a message may name one; a path is the name alone
                and node.value.rpartition("/")[2] in RECORD_FILES):
            lines.add(node.lineno)
        if isinstance(node, ast.Attribute) and node.attr == "load_predictions":
            lines.add(node.lineno)
    return sorted(lines)


def test_no_module_outside_core_reads_a_record_file():
    sites = {name: lines for name, path in MODULES.items()
             if not name.startswith("bench.core.")
             and (lines := record_file_sites(path.read_text()))}
    assert sites == {}, "read a record through bench.core.record.Record"


def test_the_record_file_check_finds_each_kind():
    source = '''"""A docstring naming metrics.json is fine."""
def f(path):
    """So is this one: config.json."""
    m = read_json(path / "metrics.json")
    print("a message naming config.json is no read")
    return store.load_predictions(path)
'''
    assert record_file_sites(source) == [4, 6]


def test_the_record_path_heuristic_finds_each_kind():
    source = '''
    d = root / ds / bb / m / h / f"seed{k}"
    seed = int(p.name.removeprefix("seed"))
    dataset = rec.relative_to(root).parts[0]
    root = record.parents[4]
    for p in root.glob("*/*/*/*/seed*"): ...
    side = record.parent / "_sweep"
    # a comment naming parts[0] and parents[4] is not code
    stem = f"{ds}_{bb}_seed{k}"  # a file name, not a record path
    '''
    assert record_path_sites(source) == {k: 1 for k in RECORD_PATH_PATTERNS}
    assert record_path_sites((ROOT / "bench/core/store.py").read_text())  # the one home


# ------------------------------------------------ argparse stays in bench/cli --
# The command line parses its arguments into typed options (RunOptions,
# ReportOptions, ...) and hands those on: no module outside bench/cli imports
# argparse, builds a parser or takes a parsed Namespace (a parameter named
# `args` or `namespace`, or annotated Namespace).
PARSER_CALLS = {"add_argument", "add_argument_group", "add_mutually_exclusive_group",
                "add_parser", "add_subparsers", "parse_args", "parse_known_args"}
# `python -m bench.speed.<tool>`: measurement scripts with a command line of
# their own (not `bench` subcommands, not imported by bench/cli): their parser
# is their entry point, and what it parses never travels further.
ENTRY_SCRIPTS = {"bench.speed.gpuplan", "bench.speed.perf", "bench.speed.sidebyside",
                 "bench.speed.syncs", "bench.speed.capture", "bench.speed.graphtime",
                 "bench.speed.streamtime", "bench.speed.staging", "bench.speed.projection",
                 "bench.speed.cellops"}


def argparse_sites(source: str) -> set[str]:
    """What in `source` imports argparse, builds a parser or takes a Namespace."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "argparse"
                                                for a in node.names):
            found.add("import argparse")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "argparse":
            found.add("import argparse")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in PARSER_CALLS:
            found.add(f"calls {node.func.attr}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            for arg in a.posonlyargs + a.args + a.kwonlyargs:
                note = ast.unparse(arg.annotation) if arg.annotation else ""
                if arg.arg in ("args", "namespace") or "Namespace" in note:
                    found.add(f"def {node.name}({arg.arg})")
    return found


ARGPARSE_SITES = {name: sites for name, path in MODULES.items()
                  if layer(name) != "cli" and name not in ENTRY_SCRIPTS
                  and (sites := argparse_sites(path.read_text()))}


def test_argparse_objects_stay_in_the_cli():
    assert ARGPARSE_SITES == {}, (
        "parse arguments in bench/cli and pass typed options (a frozen dataclass) on")


def test_the_argparse_check_finds_each_kind():
    source = '''
import argparse
from argparse import Namespace
def load(args, *rest): ...
def typed(ns: argparse.Namespace): ...
def fine(*args, **kwargs): ...
def options(p):
    p.add_argument("--x")
'''
    assert argparse_sites(source) == {"import argparse", "def load(args)", "def typed(ns)",
                                      "calls add_argument"}
    assert "bench.speed.perf" in MODULES and argparse_sites(MODULES["bench.speed.perf"].read_text())


def private_imports(source: str) -> set[str]:
    """`from bench.x import _name` in `source`: a private name taken across modules."""
    return {f"{node.module}.{alias.name}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bench")
            for alias in node.names if alias.name.startswith("_")}


def test_the_cli_imports_no_private_name():
    found = {name: hits for name, path in MODULES.items() if layer(name) == "cli"
             and (hits := private_imports(path.read_text()))}
    assert found == {}, "the CLI parses and prints: what it needs is public in its library"
    assert private_imports("from bench.sweep.grid import _load, public") == {
        "bench.sweep.grid._load"}
