"""Training methods, one file each, registered by explicit import.

What it may import: the README's "Layout" table (tests/test_layout.py enforces it).
"""
from .base import METHODS, Method, create_method, legacy_filled, method_params  # noqa: F401
from . import sl1h, ls, mbls, mixup, dca, mhml, focal  # noqa: F401
from . import mdca, brier, mmce, mcdropout, batchensemble, packed  # noqa: F401
from . import dualfocal, acls, rankmixup, mimo, adafocal, cals  # noqa: F401
# --method extra and recent (bench.core.methodgroups: --help reads them without torch)
from bench.core.methodgroups import EXTRA, METHOD_GROUPS, RECENT  # noqa: F401
from bench.core.paper import EXTRA_BASELINES, PAPER_METHODS

# `--method all`, in the paper's table order, then the released code's extra
# baselines. `mhml` (any M) is left out: with its default M = 4 it is 4hml.
# `--method paper` is PAPER_METHODS: exactly the trained rows of the paper's
# tables, so ranks compare with the paper's.
PAPER_ORDER = PAPER_METHODS + EXTRA_BASELINES


def training_methods() -> list[str]:
    """Names `bench run --method all` trains: every registered training method,
    paper order first, any later registration (a new plugin) appended; not
    mhml, nor the `extra` group (METHOD_GROUPS)."""
    grouped = {n for names in METHOD_GROUPS.values() for n in names}
    extra = [n for n in METHODS.names() if n not in PAPER_ORDER and n != "mhml"
             and n not in grouped]
    return [n for n in PAPER_ORDER if n in METHODS] + extra


def every_method() -> list[str]:
    """training_methods() and then every method group's: the methods whose
    --set keys `bench list --keys` lists and an unknown key is looked up in."""
    out = training_methods()
    return out + [n for names in METHOD_GROUPS.values() for n in names if n not in out]
