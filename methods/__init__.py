"""Training methods, one file each, registered by explicit import.

What it may import: the README's "Layout" table (tests/test_layout.py enforces it).
"""
from .base import METHODS, Method, create_method, method_params  # noqa: F401
from . import sl1h, ls, mbls, mixup, dca, mhml, focal  # noqa: F401
from bench.core.paper import EXTRA_BASELINES, PAPER_METHODS

# `--method all`, in the paper's table order, then the released code's extra
# baselines. `mhml` (any M) is left out: with its default M = 4 it is 4hml.
# `--method paper` is PAPER_METHODS: exactly the trained rows of the paper's
# tables, so ranks compare with the paper's.
PAPER_ORDER = PAPER_METHODS + EXTRA_BASELINES


def training_methods() -> list[str]:
    """Names `bench run --method all` trains: every registered training method,
    paper order first, any later registration (a new plugin) appended."""
    extra = [n for n in METHODS.names() if n not in PAPER_ORDER and n != "mhml"]
    return [n for n in PAPER_ORDER if n in METHODS] + extra
