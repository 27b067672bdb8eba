"""TOML text of a small document: what `bench run --save-grid` writes.

Python's `tomllib` only reads TOML; the grid files hold only strings, ints,
finite floats, bools, arrays of those and one level of tables, so this
writer covers exactly those (anything else is a ValueError: a caller's bug,
never a user's input). tests/core/test_tomltext.py reads every form back
through tomllib.
"""
from __future__ import annotations

import json
import math
import re

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def dumps(doc: dict, comment: str = "") -> str:
    """`doc` as TOML: its plain values first, then each table (a dict value)
    under its [header]; `comment` lines open the file."""
    head = [f"# {line}".rstrip() for line in comment.splitlines()]
    plain = [f"{key(k)} = {value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    tables = [f"\n[{key(k)}]\n" + "".join(f"{key(kk)} = {value(vv)}\n" for kk, vv in v.items())
              for k, v in doc.items() if isinstance(v, dict)]
    return "\n".join(head + plain) + ("\n" if head or plain else "") + "".join(tables)


def key(name: str) -> str:
    """A bare key where TOML allows one, else a quoted one."""
    return name if _BARE.match(name) else _string(name)


def value(v) -> str:
    if isinstance(v, bool):  # before int: bool is an int
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"TOML writer: {v!r} is not a finite float")
        return repr(v)  # repr round-trips a float exactly ('0.1', '1e-05')
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x) for x in v) + "]"
    raise ValueError(f"TOML writer: no form for {type(v).__name__} {v!r}")


def _string(text: str) -> str:
    # JSON's string escapes (\" \\ \n \t \uXXXX) are TOML basic-string
    # escapes; TOML also wants DEL escaped, which JSON leaves as it is
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")
