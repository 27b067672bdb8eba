"""One exception type for every user-facing failure, and the one line a
full disk is reported as.

The CLI turns a BenchError into a single line on stderr and a non-zero exit,
so the message must name the bad value and what is allowed.
"""

import errno
import os
import sys

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class BenchError(Exception):
    """A user-facing error: the message is shown as one line, no traceback."""


# Registries a plugin can extend: their unknown-name errors say how.
PLUGIN_KINDS = ("method", "dataset", "backbone")
PLUGIN_HINT = ("; or add your own in a plugin module (bench run --plugin MODULE, "
               "BENCH_PLUGINS=MODULE or an entry point in group mhml_bench.plugins: "
               "see docs/methods.md)")


def choices_error(kind: str, value, valid) -> BenchError:
    listed = ", ".join(str(v) for v in valid)
    hint = PLUGIN_HINT if kind in PLUGIN_KINDS else ""
    return BenchError(f"unknown {kind} '{value}'; choose from: {listed}{hint}")


def is_disk_full(err: BaseException) -> bool:
    return isinstance(err, OSError) and err.errno in DISK_FULL


def disk_full_message(err: OSError) -> str:
    """One line for a write that found no space (or quota) left."""
    where = f" writing {err.filename}" if err.filename else ""
    return (f"{DISK_FULL_TEXT}{where}: {os.strerror(err.errno).lower()}; free space and rerun "
            "(finished records are kept)")


DISK_FULL_TEXT = "disk full"  # how disk_full_message starts: a run's reason tells it apart


def says_disk_full(reason: str) -> bool:
    """Is this one-line reason (a failed run's) disk_full_message's?"""
    return str(reason).startswith(DISK_FULL_TEXT)


# Import names whose pip package is named differently (the rest match).
PIP_NAMES = {"calibration": "uncertainty-calibration", "sklearn": "scikit-learn", "PIL": "pillow"}


def missing_package_message(err: ModuleNotFoundError) -> str | None:
    """One line for a third-party package that is not installed (a `pip install
    --no-deps`, an image that lacks one); None for a module of bench itself,
    which is a bug whose traceback should be seen."""
    top = (err.name or "").split(".")[0]
    if not top or top == "bench":
        return None
    pip = PIP_NAMES.get(top, top)
    return (f"the Python package '{pip}' is not installed (import {err.name} failed); "
            f"pip install {pip}, or run ./setup.sh, which installs every dependency")


_WARNED: set[str] = set()


def warn_once(text: str) -> None:
    """`bench: warning: TEXT` on stderr, once per process for the same text: a
    dataset loaded at two sizes, or once per run of a grid, says it once."""
    if text not in _WARNED:
        _WARNED.add(text)
        print(f"bench: warning: {text}", file=sys.stderr)
