"""Small files written whole or not at all, and JSON read with a stated error rule.

Every file the harness rewrites in place (a record's JSON, a run's side
files, the report's measure cache, a worker's outcome, a resume state, the
GPU plan) goes through `write_atomic`: the bytes go to a hidden temporary
beside the target, then one rename puts them in place. A reader therefore
sees the old file or the new one, never half of one; a write that fails
(full disk, a signal) leaves the old file as it was and no temporary
behind.

A set of files that belong together (a report folder) goes through
`replace_entries`: written whole into a hidden staging folder, then swapped
in by renames, so a failure leaves the previous set untouched.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from datetime import datetime, timezone
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


def sha256(path) -> str:
    """The sha256 of a file's bytes, read in chunks (record files, evaluation
    sets and corrupted sets are checked against it)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


# sorted keys, no spaces: the form every digest of a record's JSON is taken in
COMPACT = (",", ":")
# json's own separators: the corrupted sets' recipe digests were taken in it
SPACED = (", ", ": ")


def json_sha256(obj: Any, separators: tuple = COMPACT) -> str:
    """The sha256 (hex) of `obj` as sorted-key JSON, a value JSON cannot hold
    written as its text (default=str). The one digest of a JSON value: the
    config hash, metrics.json's and the eval manifest's digests, a corrupted
    set's recipe key."""
    text = json.dumps(obj, sort_keys=True, separators=separators, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def move_aside(path, folder=None) -> Path:
    """Rename a damaged file or folder to `<name>.damaged-<UTC time>` beside it
    (or in `folder`: one that outlives the file's own; kept for a look, never
    read again; a second one the same second gets a random suffix, so none
    overwrites another); returns the new path. The one naming of everything
    set aside: records, resume states, caches."""
    path = Path(path)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = Path(folder or path.parent) / f"{path.name}.damaged-{stamp}"
    if target.exists():
        target = target.with_name(f"{target.name}-{uuid.uuid4().hex[:6]}")
    os.replace(path, target)
    return target


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


STAGE = ".staging"  # replace_entries' hidden folder: <folder>/.staging-<id>


def replace_entries(folder, fill: Callable[[Path], Any]) -> tuple[Any, Path]:
    """Write a set of files into `folder` all at once: `fill(stage)` writes
    them into a hidden staging folder inside `folder` (same filesystem, so
    renames work), then each top-level entry it wrote replaces the one of
    that name. A `fill` that fails (a full disk, an error, Ctrl-C) leaves
    `folder` as it was, never part old and part new; a `folder` this call
    created is removed again. Entries `fill` did not write are left alone (a
    user's own files beside a report). Returns (fill's result, the staging
    path, so the caller can map the paths it wrote)."""
    folder = Path(folder)
    created = _first_missing(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stage = folder / f"{STAGE}-{uuid.uuid4().hex[:8]}"
    try:
        result = fill(stage)
        _swap_in(stage, folder)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        if created is not None:
            _remove_empty(folder, created)
        raise
    return result, stage


def _swap_in(stage: Path, folder: Path) -> None:
    """Each entry of `stage` replaces its namesake in `folder`: the old one is
    renamed aside first and put back if a later rename fails."""
    old = stage.with_name(f"{stage.name}.old")
    old.mkdir()
    moved, placed = [], []
    try:
        for name in sorted(os.listdir(stage)):
            if os.path.lexists(folder / name):
                os.rename(folder / name, old / name)
                moved.append(name)
            os.rename(stage / name, folder / name)
            placed.append(name)
    except BaseException:
        for name in reversed(placed):
            os.rename(folder / name, stage / name)
        for name in reversed(moved):
            os.rename(old / name, folder / name)
        old.rmdir()  # empty again (were a rename back to fail, it would stay, kept)
        raise
    shutil.rmtree(old, ignore_errors=True)  # the replaced entries
    os.rmdir(stage)


def _first_missing(path: Path) -> Path | None:
    """The topmost folder of `path` that does not exist yet, or None."""
    missing = None
    while not path.exists() and path != path.parent:
        missing, path = path, path.parent
    return missing


def _remove_empty(path: Path, top: Path) -> None:
    """Remove `path` and its parents up to `top` while they are empty."""
    while True:
        try:
            path.rmdir()
        except OSError:
            return
        if path == top:
            return
        path = path.parent
