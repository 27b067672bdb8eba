"""Small files written whole or not at all, and JSON read with a stated error rule.

Every file the harness rewrites in place (a record's JSON, a run's side
files, the report's measure cache, a worker's outcome, a resume state, the
GPU plan) goes through `write_atomic`: the bytes go to a hidden temporary
beside the target, then one rename puts them in place. A reader therefore
sees the old file or the new one, never half of one; a write that fails
(full disk, a signal) leaves the old file as it was and no temporary
behind.
"""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import IO, Any, Callable

_RAISE = object()


def write_atomic(path, write: Callable[[IO], None], binary: bool = False,
                 durable: bool = False) -> Path:
    """Write `path` through `write(file)` into a temporary, then rename it over
    `path` (creating the folder). durable=True also fsyncs the data before
    the rename, so a power cut cannot leave a renamed but empty file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # hidden and unique: record scans skip dot-files, and two writers never share one
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb" if binary else "w") as f:
            write(f)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError) and err.filename is None and err.errno:
            # a failed write() names no file; the one-line error should
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
    return path


def write_json(path, obj: Any, *, indent: int | None = 2, sort_keys: bool = True,
               default: Callable | None = str, durable: bool = False) -> Path:
    """`obj` as JSON (json.dumps with these arguments), atomically
    (write_atomic). indent=None writes one compact line."""
    return write_atomic(path, lambda f: json.dump(obj, f, indent=indent, sort_keys=sort_keys,
                                                  default=default), durable=durable)


def write_text(path, text: str) -> Path:
    """`text` as UTF-8, byte for byte (no newline translation), atomically: a
    report's CSV or table on a full disk is the old file or none, never an
    empty or half one."""
    return write_atomic(path, lambda f: f.write(text.encode("utf-8")), binary=True)


def read_json(path, default: Any = _RAISE) -> Any:
    """The parsed contents of a JSON file.

    Without `default`, a missing or unreadable file raises OSError and
    malformed JSON raises ValueError (json.JSONDecodeError), so a caller
    can tell a damaged record from a good one. With `default` (often None),
    either case returns `default` instead: for side files that may be
    absent or being replaced.
    """
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        if default is _RAISE:
            raise
        return default
