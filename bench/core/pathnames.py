"""Names in paths: no ':' in a folder or file the harness writes.

A backbone may be named timm:NAME or tv:NAME, but rsync and scp read
'host:path' and Windows refuses a ':' in a file name. So every path part built
from names (record folders, bench.core.store.RecordKey; report files such as
figures/curves_<dataset>_<backbone>.png) writes ':' as '+', through
`path_name`, and record folders read it back with `name_of_path` ('+' is
refused in a name: bench.core.store.check_level_name). A name without ':'
keeps its path exactly.
"""
from __future__ import annotations

COLON, PATH_COLON = ":", "+"


def path_name(name: str) -> str:
    """`name` (or a file stem made of names) as a path part: ':' -> '+'."""
    return name.replace(COLON, PATH_COLON)


def name_of_path(part: str) -> str:
    """The name a path part stands for: '+' -> ':'."""
    return part.replace(PATH_COLON, COLON)
