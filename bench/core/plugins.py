"""Plugins from outside the package, and where each registered entry's code came from.

A plugin is a Python module that registers methods, datasets or backbones
with the public decorators of `bench.plugins` when it is imported. Three
routes load one, in this order, in the `bench` command and in every worker
process (local pool and SLURM tasks):

- an entry point in the group `mhml_bench.plugins` of any installed
  distribution (its value names the module);
- the environment variable `BENCH_PLUGINS` (a comma list of modules);
- `--plugin MODULE` on the command line (repeatable).

Each loaded module is remembered with the `sys.path` folder it came from, so
a grid can carry it to worker processes whose path or environment was fixed
earlier (the fork server starts once per sweep process).

`code_identity(*objects)` says where a registered factory comes from (built-in,
or the plugin's distribution and version, or its module) and a sha256 of its
code: for a plugin, every source file of its package or distribution with
comments and docstrings left out (bench.core.codeid). That digest enters the
config hash, so an edited plugin never reuses an old record, and a comment
never retrains one.
"""
from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import sys
from importlib import metadata
from pathlib import Path

from bench.core import codeid
from bench.core.errors import BenchError

GROUP = "mhml_bench.plugins"
ENV = "BENCH_PLUGINS"
BUILTIN = "built-in"
# a script's own module: multiprocessing re-runs it as __mp_main__ in workers
MAIN_NAMES = ("__main__", "__mp_main__")

# top-level module name -> {"route", "module", "path", ["distribution", "version"]}
_LOADED: dict[str, dict] = {}


def entry_point_modules() -> list[tuple[str, dict]]:
    """(module, origin) of every entry point in GROUP on the current sys.path."""
    out = []
    for ep in metadata.entry_points(group=GROUP):
        dist = getattr(ep, "dist", None)
        origin = {"route": "entry point", "entry_point": ep.name}
        if dist is not None:
            origin.update(distribution=dist.metadata["Name"], version=dist.version)
        out.append((ep.value.split(":")[0].strip(), origin))
    return out


def env_modules() -> list[str]:
    return [m.strip() for m in os.environ.get(ENV, "").split(",") if m.strip()]


def load(modules=(), paths=()) -> list[str]:
    """Import every plugin (entry points, BENCH_PLUGINS, then `modules`);
    `paths` are sys.path folders to add first (carried from the sweep).
    A plugin that fails is one BenchError naming it and its error."""
    for path in paths:
        if path and path not in sys.path:
            sys.path.append(path)
    wanted = entry_point_modules()
    wanted += [_named(m, ENV) for m in env_modules()]
    wanted += [_named(m, "--plugin") for m in modules]
    done = []
    for module, origin in wanted:
        _import(module, origin)
        done.append(module)
    return done


def _named(item: str, route: str) -> tuple[str, dict]:
    """(module, origin) of a plugin named by module or by path: a .py file or
    a package folder (anything ending in .py, holding a path separator or
    naming an existing file), whose folder goes on sys.path. A path that is not one is a BenchError."""
    looks_like_path = item.endswith(".py") or "/" in item or os.sep in item
    if not (looks_like_path or os.path.exists(item)):
        return item, {"route": route}
    path = Path(item).expanduser()
    allowed = "give a .py file, a package folder (with __init__.py) or a module name"
    if not path.exists():
        raise BenchError(f"{route} {item}: no such file or folder; {allowed}")
    path = path.resolve()
    if path.is_dir():
        path = path / "__init__.py"
        if not path.is_file():
            raise BenchError(f"{route} {item}: a folder without __init__.py; {allowed}")
    elif path.suffix != ".py":
        raise BenchError(f"{route} {item}: not a .py file; {allowed}")
    name = path.parent.name if path.name == "__init__.py" else path.stem
    if not name.isidentifier():
        raise BenchError(f"{route} {item}: '{name}' is not an importable module name "
                         "(letters, digits and _); rename it")
    folder = str(path.parent.parent if path.name == "__init__.py" else path.parent)
    if folder not in sys.path:
        sys.path.append(folder)
    return name, {"route": route, "file": str(path)}


def _import(module: str, origin: dict) -> None:
    top = module.split(".")[0]
    if module in sys.modules and top in _LOADED:
        return
    try:
        mod = _import_from_path_or_cwd(module, origin["route"])
        _check_file(mod, origin.get("file"))
    except BenchError as err:
        raise BenchError(f"plugin '{module}' ({_route(origin)}): {err}") from None
    except Exception as err:  # noqa: BLE001 - any import failure is one line naming the plugin
        first = (str(err).strip().splitlines() or [""])[0]
        raise BenchError(f"plugin '{module}' ({_route(origin)}) failed to import: "
                         f"{type(err).__name__}: {first}") from None
    _LOADED.setdefault(top, {**origin, "module": module, "path": _path_entry(mod, module)})


def _check_file(mod, wanted: str | None) -> None:
    """A plugin named by path must be that file, not a namesake found first."""
    file = getattr(mod, "__file__", None)
    if wanted and (not file or Path(file).resolve() != Path(wanted)):
        raise BenchError(f"a module of that name is already importable from {file}, "
                         f"not {wanted}; rename the file or folder")


def _import_from_path_or_cwd(module: str, route: str):
    """Import `module`; a module named on the command line or in BENCH_PLUGINS
    may also sit in the current folder (`bench` itself does not put it on the path)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        cwd = os.getcwd()
        if route == "entry point" or err.name != module.split(".")[0] or cwd in sys.path:
            raise
        sys.path.append(cwd)
        return importlib.import_module(module)


def _route(origin: dict) -> str:
    if origin["route"] == "entry point":
        dist = origin.get("distribution")
        where = f" of {dist} {origin.get('version')}" if dist else ""
        return f"entry point '{origin['entry_point']}'{where} in group {GROUP}"
    return origin["route"]


def _path_entry(mod, module: str) -> str:
    """The sys.path folder `module` was imported from ('' if not a file)."""
    file = getattr(mod, "__file__", None)
    if not file:
        return ""
    p = Path(file).resolve()
    if p.name == "__init__.py":
        p = p.parent
    return str(p.parents[len(module.split(".")) - 1])


def carried(modules=()) -> tuple:
    """Sorted (module, path) pairs for worker processes: the plugins loaded
    here, and `modules` (those defining a run's plugin code, which a script or
    notebook may have imported itself, on a path the workers do not have)."""
    pairs = {(o["module"], o["path"]) for o in _LOADED.values()}
    for name in modules:
        mod = sys.modules.get(name)
        if mod is not None and name not in MAIN_NAMES and getattr(mod, "__file__", None):
            pairs.add((name, _path_entry(mod, name)))
    return tuple(sorted(pairs))


def load_carried(pairs) -> None:
    """A worker's start: the sweep's plugins (and any entry point on the path)."""
    pairs = [tuple(p) for p in pairs]
    load([m for m, _ in pairs], [p for _, p in pairs])


def origin(obj) -> dict:
    """Where `obj` (a registered factory or class) comes from."""
    module = getattr(obj, "__module__", "") or ""
    module = "__main__" if module in MAIN_NAMES else module
    if _builtin(module):
        return {"origin": BUILTIN}
    plugin = _LOADED.get(module.split(".")[0])
    if plugin is None:  # registered by a script or notebook that imported it itself
        return {"origin": "plugin", "module": module}
    out = {"origin": "plugin", "module": plugin["module"]}
    if "distribution" in plugin:
        out.update(distribution=plugin["distribution"], version=plugin["version"])
    return out


def origin_text(obj) -> str:
    """'built-in', 'plugin mhml-confpen 0.1.0 (confpen)' or 'plugin module mymod'."""
    o = origin(obj)
    if o["origin"] == BUILTIN:
        return BUILTIN
    if "distribution" in o:
        return f"plugin {o['distribution']} {o['version']} ({o['module']})"
    return f"plugin module {o['module']}"


def code_identity(*objects) -> dict:
    """Origin of the first object, the modules defining all of them and a
    sha256 of their code, read now (an edit shows at once). Built-in code: the
    bytes of the defining modules (recorded, never hashed: the harness's
    version and commit identify it). Plugin code: every source file of each
    plugin involved, comments and docstrings left out (bench.core.codeid)."""
    names, mods = [], []
    for obj in objects:
        mod = inspect.getmodule(obj)
        name = "__main__" if mod is not None and mod.__name__ in MAIN_NAMES else \
            getattr(mod, "__name__", None)
        if mod is None or name in names:
            continue
        names.append(name)
        mods.append(mod)
    ident = origin(objects[0])
    if ident["origin"] == BUILTIN:
        digest = hashlib.sha256()
        for mod in mods:
            digest.update(_source(mod))
        return {**ident, "modules": names, "sha256": digest.hexdigest()}
    # a plugin factory may build a built-in class (CrossEntropy): only the
    # plugin's own files make its digest
    files, sha = codeid.digest([m for m in mods if not _builtin(m.__name__)])
    return {**ident, "modules": names, "files": files, "sha256": sha}


def _builtin(module: str) -> bool:
    return module == "bench" or module.startswith("bench.")


def _source(mod) -> bytes:
    file = getattr(mod, "__file__", None)
    if file and os.path.exists(file):
        return Path(file).read_bytes()
    return mod.__name__.encode()
