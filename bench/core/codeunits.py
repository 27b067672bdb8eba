"""The code identity of a built-in method: the units of code its numbers
depend on, one digest per unit that only a change to what runs moves, and
the pins that keep records written before code identity valid.

A unit is a module of the harness (`bench.train.loop`) or one top-level
definition in it with every top-level name of that module it uses, followed
transitively (`bench.train.nets:MCDropoutNet` brings `AlwaysDropout`), so an
edit to MC-Dropout's network leaves the multi-head model's unit alone.

- A method's own units: the modules of its class and its bases under
  `bench.` (bench.methods.packed brings bench.methods.batchensemble), and
  the network units it declares in `Method.code` (default: the multi-head
  model). They are part of the record's identity (bench.train.experiment).
- The shared units (SHARED): the training loop, step, augmentation and the
  method contract every run goes through. They are recorded with every
  record (config.json `code_units`) and compared by `bench run` and
  `bench report`; an edit to them never retrains by itself.

A unit's digest reads its source without what does not change what runs:
comments, formatting, bare string statements (docstrings), imports,
`if TYPE_CHECKING:` blocks and type annotations. It is the sha256 of the
code normaliser's dump of node types and their non-empty fields
(bench.core.codeid.normalised, DUMPED).

The pins (codepins.json) hold each unit's digest at the commit that
introduced code identity (`baseline`: what records without `code_units`
were made by) and the versions accepted as equal (`same`, written by
`bench run --accept-code-change`). docs/architecture.md, "Code identity".
"""
from __future__ import annotations

import ast
import functools
import hashlib
import json
from pathlib import Path

from bench.core.codeid import DUMPED, normalised
from bench.core.errors import BenchError
from bench.core.files import read_json, write_atomic

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding bench/
PINS = Path(__file__).with_name("codepins.json")
DIGEST_CHARS = 16

# Code every training run goes through, whatever its method: recorded and
# compared, never a reason to retrain (a comment or a refactor there would
# otherwise retrain every record of every method).
SHARED = ("bench.methods.base", "bench.train.loop", "bench.train.graphstep",
          "bench.train.maskaug", "bench.train.augment", "bench.train.protocol",
          "bench.train.fused", "bench.core.schedule", "bench.train.nets:vmap_safe",
          "bench.train.staging", "bench.train.streams",
          # the backbone builders (stems, classifier removal, drop-path scaling,
          # the small CNN): every method's model starts there
          "bench.train.backbones", "bench.train.nets:smallcnn_features",
          "bench.train.nets:drop_classifier", "bench.train.nets:drop_last_linear",
          "bench.train.nets:scale_drop_path", "bench.train.nets:max_drop_path")


def module_path(module: str) -> Path:
    base = PACKAGE_ROOT.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def unit_digest(unit: str) -> str:
    """The digest of `unit` ('pkg.mod' or 'pkg.mod:Name'), read now."""
    module, _, name = unit.partition(":")
    path = module_path(module)
    if not path.is_file():
        raise BenchError(f"code unit {unit}: no module {module} at {path}")
    stat = path.stat()
    return _digest(str(path), stat.st_mtime_ns, stat.st_size, name, unit)


@functools.lru_cache(maxsize=512)
def _digest(path: str, mtime_ns: int, size: int, name: str, unit: str) -> str:
    """Cached by the file's mtime and size: a grid builds hundreds of runs."""
    pick = (lambda tree: _closure(tree, name, unit)) if name else None
    text = normalised(Path(path).read_bytes(), DUMPED, pick)
    return hashlib.sha256(text).hexdigest()[:DIGEST_CHARS]


def _closure(tree: ast.Module, name: str, unit: str) -> list:
    """The top-level statements defining `name` and every top-level name
    they use, transitively, in source order."""
    defines: dict[str, list] = {}
    for stmt in tree.body:
        for bound in _bound(stmt):
            defines.setdefault(bound, []).append(stmt)
    if name not in defines:
        raise BenchError(f"code unit {unit}: its module defines no top-level '{name}'")
    todo, seen = [name], set()
    while todo:
        n = todo.pop()
        if n in seen or n not in defines:
            continue
        seen.add(n)
        todo += [x.id for s in defines[n] for x in ast.walk(s) if isinstance(x, ast.Name)]
    picked = {id(s) for n in seen for s in defines[n]}
    return [s for s in tree.body if id(s) in picked]


def _bound(stmt) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    targets = stmt.targets if isinstance(stmt, ast.Assign) else \
        [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else []
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


# -------------------------------------------------------------- methods --
def own_units(method) -> tuple[str, ...]:
    """The units a method's identity covers: its class's modules under
    `bench.` (not the shared method contract) and its declared `code`."""
    mods = [c.__module__ for c in type(method).__mro__
            if c.__module__.startswith("bench.") and c.__module__ not in SHARED]
    return tuple(dict.fromkeys([*mods, *getattr(method, "code", ())]))


def record_units(method) -> dict[str, str]:
    """unit -> digest of the method's own and the shared units (config.json)."""
    return {u: unit_digest(u) for u in sorted({*own_units(method), *SHARED})}


def own_code(method) -> dict | None:
    """{"units", "sha256"} of the method's own code for the config hash, or
    None where every unit is its pinned (or an accepted) version: records
    made before code identity keep their hash."""
    pins = load_pins()
    units = own_units(method)
    versions = {u: canonical(pins, u, unit_digest(u)) for u in units}
    if all(v == pins["baseline"].get(u) for u, v in versions.items()):
        return None
    text = "".join(f"{u}\0{v}\0" for u, v in sorted(versions.items()))
    return {"units": sorted(units), "sha256": hashlib.sha256(text.encode()).hexdigest()}


def made_by_today(config: dict) -> bool | None:
    """Whether a record's own method code (its config.json `code_units`,
    those of `method_code` or else all but the shared ones) is today's, each
    unit compared as its canonical version; None where the record cannot say
    (made before code identity; a plugin's method, identified by its digest)."""
    units = config.get("code_units") or {}
    own = (config.get("method_code") or {}).get("units") or [u for u in units if u not in SHARED]
    own = [u for u in own if u in units]
    if not own:
        return None
    pins = load_pins()
    try:
        return all(canonical(pins, u, unit_digest(u)) == canonical(pins, u, units[u])
                   for u in own)
    except BenchError:  # a unit that no longer exists: not today's code
        return False


# ----------------------------------------------------------------- pins --
def load_pins(path: Path | None = None) -> dict:
    """The pins; without them every built-in hash would move, so a missing
    file is an error, not an empty table."""
    path = path or PINS
    try:
        pins = read_json(path)
    except (OSError, ValueError) as exc:
        raise BenchError(f"{path}: cannot read the code pins ({exc}); without them every "
                         "built-in method's config hash would move: reinstall the harness "
                         "or restore the file from git") from exc
    return {"baseline": pins.get("baseline", {}), "same": pins.get("same", {})}


def canonical(pins: dict, unit: str, digest: str) -> str:
    """The version `digest` counts as: the one it was accepted as equal to."""
    return pins["same"].get(unit, {}).get(digest, digest)


def versions_of(pins: dict, units: dict | None, names) -> dict[str, str]:
    """unit -> canonical version for a record's `code_units` (None: a record
    made before code identity, taken as the pinned baseline)."""
    got = units if units is not None else pins["baseline"]
    return {u: canonical(pins, u, got[u]) for u in names if u in got}


def accept(equal: dict[str, str], path: Path | None = None) -> None:
    """Record each unit's current digest as the same version as `equal[unit]`
    (the version existing records were made with)."""
    if not equal:
        return
    path = path or PINS
    pins = load_pins(path)
    for unit, old in equal.items():
        now = unit_digest(unit)
        pins["same"].setdefault(unit, {})[now] = canonical(pins, unit, old)
    write_pins(pins, path)


def write_pins(pins: dict, path: Path | None = None) -> None:
    text = json.dumps({"about": "bench.core.codeunits: each unit's pinned digest and the "
                                "versions accepted as equal (bench run --accept-code-change)",
                       **pins}, indent=1, sort_keys=True)
    write_atomic(path or PINS, lambda f: f.write(text + "\n"))


def mixed_shared(configs: list[dict]) -> list[str]:
    """'bench.train.loop (2 versions)' for each shared unit whose version
    differs between these records' config.json (bench report's note)."""
    pins = load_pins()
    seen: dict[str, set] = {}
    for config in configs:
        for unit, version in versions_of(pins, config.get("code_units"), SHARED).items():
            seen.setdefault(unit, set()).add(version)
    return [f"{u} ({len(v)} versions)" for u, v in sorted(seen.items()) if len(v) > 1]
