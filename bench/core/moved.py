"""The old paths of modules that moved out of bench.core, kept for a
deprecation period: `import bench.core.metrics` still works, warns, and gives
the module itself (bench.calib.metrics), so a plugin written against the old
path keeps running while it is updated. Nothing in this project imports an
old path (tests/test_layout.py checks); the aliases go after the release that
follows issue 40.
"""
from __future__ import annotations

import importlib
import sys
import warnings

# old module path -> new module path
MOVED = {f"bench.core.{name}": f"bench.calib.{name}"
         for name in ("metrics", "calibration", "calibration_measures", "measures",
                      "variants", "posthoc", "debiased", "ood", "conformal")}


def alias(old: str) -> None:
    """Called by the stub at `old`: warn, then make `old` the moved module, so
    every name (private ones too) and every monkeypatch is shared with it."""
    new = MOVED[old]
    # the module is imported by name, not by an import statement: bench.core
    # may import nothing above it (the Layout rule), and the alias is the one
    # sanctioned way back, listed in MOVED
    module = importlib.import_module(new)
    # stacklevel 3: past this function and the stub, to the importing line
    # (warnings skips the import machinery's frames)
    warnings.warn(f"{old} moved to {new}; import it from there (the old path goes "
                  "after the next release)", DeprecationWarning, stacklevel=3)
    sys.modules[old] = module
