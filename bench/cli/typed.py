"""Parsed flags -> a frozen options dataclass: the one place where an argparse
Namespace becomes the typed options the libraries take (bench.sweep.options,
bench.report.options); no Namespace travels further."""
from __future__ import annotations

import dataclasses


def options_from(cls, args):
    """`cls` built from the attributes of `args` that name its fields (others
    keep their defaults). Repeatable flags come as lists: they become tuples,
    and one not given (None) becomes () where the field's default is ()."""
    values = {}
    for f in dataclasses.fields(cls):
        if not hasattr(args, f.name):
            continue
        value = getattr(args, f.name)
        if value is None and f.default == ():
            value = ()
        values[f.name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)
