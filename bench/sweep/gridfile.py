"""A grid of runs as a TOML file: `bench run --grid FILE[:NAME]` reads one,
`bench run ... --save-grid FILE` writes one (docs/tracking.md).

A file's keys are `bench run`'s flags without their dashes (`method`,
`seeds`, `jobs-per-gpu`), read from the same `option()` declarations the
flags are built from (RunOptions, bench.core.flags), so a new flag is a new
key; `set` and `data-opt` are tables. The switches of one command rather
than of the grid (--dry-run, --json, --force, ...: declared `in_grid=False`)
are not keys. Top-level keys make the file's grid; a table that is not a key
is a named grid (`FILE:NAME`), which takes the top level's keys and
overrides them (its `set` and `data-opt` key by key). Flags given on the
command line override the file the same way.

Each value is checked as the flag's parser checks it (type, choices); the
`set` and `data-opt` values are checked where the command line's are
(bench.sweep.plan: the same check and message as --set). Every error is one
BenchError naming the file, before anything is planned.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tabulate import tabulate

from bench.core.errors import BenchError
from bench.core.flags import EITHER, PAIRS, REPEAT, SEEDS, SWITCH, Options, declared, option, pairs
from bench.core.tomltext import dumps
from bench.sweep.options import RunOptions


@dataclass(frozen=True)
class GridOptions(Options):
    """`bench run`'s two grid-file flags (never keys of a file themselves)."""

    grid: str | None = option(
        None, "read the grid's options from a TOML file (FILE, or FILE:NAME for one of its "
        "named grids); flags given here override the file's values (docs/tracking.md; "
        "`bench list --keys` lists the keys)", metavar="FILE[:NAME]", in_grid=False)
    save_grid: str | None = option(
        None, "write the grid this command asks for (its flags, and --grid's values) as a TOML "
        "file --grid reads back, once every check has passed", metavar="FILE", in_grid=False)


def grid_keys(cls=RunOptions) -> dict:
    """{file key: Declared} of every grid option of `cls`, in --help's order."""
    return {d.spelling[2:]: d for d in declared(cls) if d.flag.in_grid}


def split_spec(spec: str) -> tuple[str, str | None]:
    """'paper.toml:pathmnist' -> ('paper.toml', 'pathmnist'); a path that
    exists as given (a ':' in its name) is taken whole."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path or Path(spec).exists():
        return spec, None
    return path, name


def read_grid(spec: str) -> dict:
    """{field name: value} of the grid `spec` names (FILE or FILE:NAME)."""
    path, name = split_spec(spec)
    doc = _load(path)
    keys = grid_keys()
    tables = {k for k, d in keys.items() if d.kind == PAIRS}
    named = {k: v for k, v in doc.items() if isinstance(v, dict) and k not in tables}
    top = {k: v for k, v in doc.items() if k not in named}
    if name is None and named and not top:
        raise BenchError(f"--grid {path} holds named grids only: give one as {path}:NAME "
                         f"({', '.join(named)})")
    values = _checked(top, path, "")
    if name is not None:
        if name not in named:
            held = f"its grids: {', '.join(named)}" if named else "it holds no named grids"
            raise BenchError(f"--grid {path}:{name}: no grid '{name}' in the file; {held}")
        values = merged(values, _checked(named[name], path, name))
    return values


def _load(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise BenchError(f"--grid {path}: no such file") from None
    except OSError as err:
        raise BenchError(f"--grid {path}: cannot read it ({err.strerror or err})") from None
    except UnicodeDecodeError:
        raise BenchError(f"--grid {path}: not UTF-8 text (a TOML file is)") from None
    except tomllib.TOMLDecodeError as err:  # its message ends "(at line L, column C)"
        raise BenchError(f"--grid {path}: TOML syntax error: {err}") from None


def _checked(table: dict, path: str, name: str) -> dict:
    """{field name: value} of one grid table, every key and value checked."""
    keys = grid_keys()
    where = f"{path}:{name}" if name else path
    out = {}
    for key, value in table.items():
        d = keys.get(key)
        if d is None:
            inside = f" in [{name}]" if name else ""
            raise BenchError(f"--grid {where}: unknown key '{key}'{inside}; allowed: "
                             f"{', '.join(keys)}")
        shown, problem = _problem(d, value)
        if problem:
            raise BenchError(f"--grid {where}: {key}{shown}: {problem} (as "
                             f"{d.spelling} takes)")
        out[d.name] = value
    return out


def _problem(d, value) -> tuple[str, str]:
    """(' = VALUE' as written, what is wrong with it for option `d`), or
    ('', '') (the parser's checks: the flag's type and choices; the plan
    checks the rest, as for a flag); a table's entry is named '.KEY = VALUE'."""
    if d.kind == PAIRS and isinstance(value, dict):
        bad = [k for k, v in value.items() if not isinstance(v, (str, int, float, bool))]
        return ((f".{bad[0]} = {_shown(value[bad[0]])}", "expected a text, number or "
                 "true/false") if bad else ("", ""))
    problem = _value_problem(d, value)
    return (f" = {_shown(value)}", problem) if problem else ("", "")


def _value_problem(d, value) -> str:
    if d.kind in (SWITCH, EITHER):
        return "" if isinstance(value, bool) else "expected true or false"
    if d.kind == PAIRS:
        return "expected a table of KEY = VALUE"
    if d.kind == REPEAT:
        texts = isinstance(value, list) and all(isinstance(v, str) for v in value)
        return "" if isinstance(value, str) or texts else "expected a text or a list of texts"
    if d.kind == SEEDS:
        ints = isinstance(value, list) and all(_is_int(v) for v in value)
        ok = _is_int(value) or isinstance(value, str) or (ints and value)
        return "" if ok else "expected N, 'A-B' or a list of seeds"
    if d.type is int:
        return "" if _is_int(value) else "expected an integer"
    if d.type is float:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return "" if number and math.isfinite(value) else "expected a finite number"
    names = isinstance(value, list) and all(isinstance(v, str) for v in value) and value
    if not (isinstance(value, str) or names):  # a list: a comma list's names
        return "expected a text or a list of texts"
    if d.flag.choices is not None and value not in d.flag.choices:
        return f"expected one of {', '.join(map(str, d.flag.choices))}"
    return ""


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value) -> str:
    try:
        return dumps({"v": value}).split("= ", 1)[1].strip()
    except ValueError:
        return repr(value)


def merged(base: dict, over: dict) -> dict:
    """{field: value} of `base` with `over`'s values; a `set` or `data-opt`
    table is merged key by key (a later key wins, as with repeated --set)."""
    pair_fields = {d.name for d in declared(RunOptions) if d.kind == PAIRS}
    out = dict(base)
    for name, value in over.items():
        if name in pair_fields and name in out:
            value = {**_as_dict(out[name]), **_as_dict(value)}
        out[name] = value
    return out


def _as_dict(value) -> dict:
    return dict(pairs(value)) if not isinstance(value, dict) else value


def grid_options(spec: str | None, given: dict) -> tuple[RunOptions, dict]:
    """(RunOptions, {field: value} asked for): the grid file's values (none
    without `spec`) overridden by `given`, the options the command line set."""
    asked = merged(read_grid(spec) if spec else {}, given)
    return RunOptions(**asked), asked


# --------------------------------------------------------------- writing --
def grid_text(opts: RunOptions, asked) -> str:
    """The TOML of the grid options named in `asked` (field names), as `opts`
    holds them: what `bench run --grid` reads back into equal options."""
    fields = {d.name: (key, d) for key, d in grid_keys().items()}
    doc = {}
    for name in (n for n in fields if n in asked):  # --help's order
        key, d = fields[name]
        value = getattr(opts, name)
        if d.kind == PAIRS:
            value = dict(value)
        elif d.kind == REPEAT:
            value = list(value)
        elif d.kind == SEEDS and value.isdigit():
            value = int(value)
        if value is not None and value != {} and value != []:
            doc[key] = value
    return dumps(doc, comment="bench run --grid FILE: the options of one grid of runs "
                 "(docs/tracking.md)")


def save_grid(path: str, opts: RunOptions, asked) -> None:
    """Write `grid_text` to `path` (a folder above it must exist)."""
    try:
        Path(path).write_text(grid_text(opts, asked))
    except OSError as err:
        raise BenchError(f"--save-grid {path}: cannot write it ({err.strerror or err})") \
            from None


def keys_text() -> str:
    """`bench list --keys`' table of the grid file's keys: each beside its
    flag, what it takes and its default (`set` and `data-opt`: tables)."""
    takes = {SWITCH: "true | false", EITHER: "true | false", PAIRS: "table",
             REPEAT: "text or list", SEEDS: "N | 'A-B' | list"}
    names = {int: "integer", float: "number", None: "text"}  # a text: a comma list or a list
    rows = [[key, d.spelling, takes.get(d.kind) or names[d.type],
             "-" if d.default in (None, ()) else _shown(d.default)]
            for key, d in grid_keys().items()]
    return ("grid file keys (bench run --grid FILE[:NAME]; docs/tracking.md):\n"
            + tabulate(rows, headers=["key", "flag", "takes", "default"], tablefmt="simple"))
