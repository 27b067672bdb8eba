"""A frozen dataclass to JSON and back, read from its fields: one codec per
field annotation, so a field added to RunSpec travels to a worker process
(or a SLURM job) with no hand-written dict to update. A field whose type has
no codec fails at once (TypeError), never silently as a string.

Codecs: JSON scalars (str, int, float, bool, None) as they are; a tuple as
nested lists read back as nested tuples ((key, value) pairs stay pairs); a
Path as its text; a dataclass (TrainConfig) as a dict of its own fields,
each by its own codec.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from pathlib import Path

SCALARS = (str, int, float, bool, type(None))


def _same(value):
    return value


def _lists(value):
    return [_lists(v) for v in value] if isinstance(value, (tuple, list)) else value


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _optional(enc, dec):
    """A codec that passes None through: for `X | None`."""
    return (lambda v: None if v is None else enc(v)), (lambda v: None if v is None else dec(v))


def codec(hint) -> tuple:
    """(to JSON, from JSON) for a field annotation; TypeError when none fits."""
    if hint in SCALARS:
        return _same, _same
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = typing.get_args(hint)
        if all(a in SCALARS for a in args):
            return _same, _same
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return _optional(*codec(rest[0]))
    if hint is tuple or typing.get_origin(hint) is tuple:
        return _lists, _tuples
    if hint is Path:
        return str, Path
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return functools.partial(encode, hint), functools.partial(decode, hint)
    raise TypeError(f"no JSON codec for a field of type {hint!r}; add one to "
                    "bench.sweep.specjson.codec")


@functools.lru_cache(maxsize=None)
def codecs(cls) -> dict:
    """{field name: (to JSON, from JSON)} for every field of dataclass `cls`."""
    hints = typing.get_type_hints(cls)
    return {f.name: codec(hints[f.name]) for f in dataclasses.fields(cls)}


def encode(cls, obj) -> dict:
    """`obj` (an instance of `cls`) as a JSON-ready dict of its fields."""
    return {name: enc(getattr(obj, name)) for name, (enc, _) in codecs(cls).items()}


def decode(cls, data: dict):
    """An instance of `cls` from `encode`'s dict; a field missing from it (a
    spec written before the field existed) takes its default."""
    table = codecs(cls)
    unknown = set(data) - set(table)
    if unknown:
        raise TypeError(f"{cls.__name__}: unknown fields {sorted(unknown)}")
    return cls(**{k: table[k][1](v) for k, v in data.items()})


def dumps(obj) -> str:
    return json.dumps(encode(type(obj), obj), sort_keys=True)


def loads(cls, text: str):
    return decode(cls, json.loads(text))
