"""Parsed flags -> a frozen options dataclass: the one place where an argparse
Namespace becomes the typed options the libraries take (bench.sweep.options,
bench.report.options); no Namespace travels further."""
from __future__ import annotations

import dataclasses


def options_from(cls, args):
    """`cls` built from the attributes of `args` that name its fields (others
    keep their defaults). The dataclass brings each value to its one form
    (bench.core.flags.Options): lists become tuples, KEY=VALUE texts pairs."""
    return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)
                  if hasattr(args, f.name)})
