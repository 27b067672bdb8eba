"""The old paths of modules that moved, kept for a deprecation period:
`import bench.core.metrics` still works, warns, and gives the module itself
(bench.calib.metrics), so a plugin written against the old path keeps running
while it is updated. Two ways to the one `alias`: a stub file at the old path
(bench.core's, listed in MOVED), or, for a package whose modules moved into its
own sub-packages, one `OldPaths` finder for all of them (bench.report's, its
`moved` module), so that no stub file is left beside the sub-packages. Nothing
in this project imports an old path (tests/test_layout.py checks); the aliases
go after the release that follows issue 40.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

# old module path -> new module path
MOVED = {f"bench.core.{name}": f"bench.calib.{name}"
         for name in ("metrics", "calibration", "calibration_measures", "measures",
                      "variants", "posthoc", "debiased", "ood", "conformal")}


def alias(old: str, new: str | None = None):
    """Called by the stub at `old` (or by OldPaths): warn, then make `old` the
    moved module (`new`, else MOVED's), so every name (private ones too) and
    every monkeypatch is shared with it; -> that module."""
    new = new or MOVED[old]
    # the module is imported by name, not by an import statement: bench.core
    # may import nothing above it (the Layout rule), and the alias is the one
    # sanctioned way back, listed in MOVED or in an OldPaths map
    module = importlib.import_module(new)
    # stacklevel 3: past this function and its one caller (the stub, or
    # OldPaths), to the importing line (warnings skips the import machinery's
    # frames)
    warnings.warn(f"{old} moved to {new}; import it from there (the old path goes "
                  "after the next release)", DeprecationWarning, stacklevel=3)
    sys.modules[old] = module
    return module


class OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A finder (on sys.meta_path) for the old paths in `moved` (old -> new)
    and nothing else; it loads each as its stub would have, with `alias`."""

    def __init__(self, moved: dict[str, str]):
        self.moved = dict(moved)

    @classmethod
    def install(cls, moved: dict[str, str]) -> "OldPaths":
        """The finder for `moved` on sys.meta_path, put there once (a package
        imported again finds its finder there)."""
        for finder in sys.meta_path:
            if isinstance(finder, cls) and finder.moved == moved:
                return finder
        finder = cls(moved)
        # last: an old path is asked for only once every real place has said no
        sys.meta_path.append(finder)
        return finder

    def find_spec(self, name, path=None, target=None):
        if name not in self.moved:
            return None
        # the moved module's file as the origin: `python -m <old path>` makes
        # it sys.argv[0] and __file__, as `python -m <new path>` would
        new = importlib.util.find_spec(self.moved[name])
        return importlib.util.spec_from_loader(name, self, origin=new and new.origin)

    def get_code(self, name):
        """`python -m <old path>` (runpy asks the loader for the code it runs
        as __main__; an import never does): a one-line note on stderr naming
        the new command, then the moved module's own code, so the old script
        path runs as the new one does."""
        new = self.moved[name]
        print(f"note: {name} moved to {new}; run `python -m {new}` (the old path goes after "
              "the next release)", file=sys.stderr)
        return importlib.util.find_spec(new).loader.get_code(new)

    def create_module(self, spec):
        return None  # a blank module, as a stub file's: exec_module replaces it

    def exec_module(self, module) -> None:
        # the import system returns what sys.modules holds after this: the moved
        # module, its own __spec__ untouched (create_module returning it would
        # have had the old path's spec written over it)
        alias(module.__name__, self.moved[module.__name__])

    def attribute(self, package: str):
        """A module `__getattr__` for `package`, for an old name as its
        attribute: `from package import <old name>` asks for it (before any
        finder), and so does `package.<old name>` (a package's submodules were
        its attributes once imported)."""
        def __getattr__(name: str):
            old = f"{package}.{name}"
            if old not in self.moved:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            module = alias(old, self.moved[old])  # called from here, as by a stub
            setattr(sys.modules[package], name, module)  # as importing `old` would
            return module
        return __getattr__
