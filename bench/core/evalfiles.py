"""Evaluation sets beyond the test split, stored beside a record.

A record folder may hold, besides its own files (bench.core.store):

    evals.json          the manifest: per set its file, sha256, size and what
                        was evaluated (spec, source, its digest, image size,
                        how the model was had), and a digest of itself
    eval-<set>.npz      that set's per-head logits (and labels, corruptions)

Sets are written after the record is complete (right after training, or
later by `bench eval` from kept weights) and never touch predictions.npz or
metrics.json: the record and its config hash stay as the trainer made them.
A set is written under a hidden name and renamed, then entered into the
manifest (written atomically); a set file the manifest does not list is
ignored and rewritten by the next evaluation. Arrays load with
allow_pickle=False after their sha256 is checked: a set is data, never code.

Set names: `shift`, `ood-<source>`, `site-<source>` (EvalSpec.name), where
<source> is a dataset name or the last part of a path, in [a-z0-9_.-].

What a set's arrays hold:

    ood     logits [N, M, K]
    site    logits [N, M, K], labels [N]
    shift   logits [B, N, M, K] per block of the corrupted set
            (bench.datasets.shift), labels [N], corruption [B] (names) and
            severity [B]: block 0 the clean images through the same resize
            path (severity 0), then each corruption at severities 1..5
"""
from __future__ import annotations

import json
import os
import re
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.core import files
from bench.core.errors import BenchError
from bench.core.store import check_file

MANIFEST = "evals.json"
KINDS = ("shift", "ood", "site")
_SLUG = re.compile(r"[^a-z0-9_.-]+")


def images_digest(meta: dict) -> str:
    """What identifies the images a set was (or is to be) computed on: a shift
    set's cached array (its sha256), an ood/site set's images and labels."""
    return str(meta.get("set_sha256") or meta.get("images_sha256") or "")


@dataclass(frozen=True)
class EvalSpec:
    """One `--eval` value: `shift`, `ood:SOURCE` or `site:SOURCE`, where SOURCE
    is a registered dataset or a path (a folder of images; for site, a folder
    of class folders or a CSV of image,label)."""

    kind: str
    source: str = ""

    @classmethod
    def parse(cls, text: str) -> "EvalSpec":
        kind, sep, source = str(text).strip().partition(":")
        if kind not in KINDS:
            raise BenchError(f"--eval {text}: unknown kind '{kind}'; give shift, ood:DATASET "
                             "or site:DATASET (a dataset name, or a path)")
        if kind == "shift" and sep:
            raise BenchError(f"--eval {text}: shift takes no source (it corrupts the run's own "
                             "test split); give --eval shift")
        if kind != "shift" and not source.strip():
            raise BenchError(f"--eval {text}: {kind} needs a source: {kind}:DATASET (a dataset "
                             "name, or a path)")
        return cls(kind, source.strip())

    @property
    def text(self) -> str:
        return self.kind if self.kind == "shift" else f"{self.kind}:{self.source}"

    @property
    def name(self) -> str:
        if self.kind == "shift":
            return "shift"
        tail = Path(self.source.rstrip("/")).name or self.source
        slug = _SLUG.sub("-", tail.lower()).strip("-.") or "set"
        return f"{self.kind}-{slug}"

    @property
    def is_path(self) -> bool:
        """A source written as a path (holds a '/', or names an existing file or folder)."""
        return "/" in self.source or os.path.exists(self.source)


def parse_all(texts) -> tuple[EvalSpec, ...]:
    """Every --eval value, each once (in order), two sources with one set name refused."""
    out: dict[str, EvalSpec] = {}
    for text in texts or ():
        for part in str(text).split(","):
            if part.strip():
                spec = EvalSpec.parse(part)
                if spec.name in out and out[spec.name] != spec:
                    raise BenchError(f"--eval {out[spec.name].text} and --eval {spec.text} "
                                     f"would both be stored as '{spec.name}'; give one")
                out[spec.name] = spec
    return tuple(out.values())


def file_name(name: str) -> str:
    return f"eval-{name}.npz"


# ----------------------------------------------------------------- write --
def write(record, name: str, arrays: dict[str, np.ndarray], meta: dict) -> Path:
    """Store one set's arrays in the record folder and enter it in the manifest
    (a set of that name already there is replaced)."""
    record = Path(record)
    target = record / file_name(name)
    tmp = record / f".{target.name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        sha = files.sha256(tmp)
        entry = {**meta, "file": target.name, "sha256": sha, "size": tmp.stat().st_size}
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    sets, _ = read_manifest(record)
    sets[name] = json.loads(json.dumps(entry, default=str))
    files.write_json(record / MANIFEST, _with_digest({"sets": sets}), durable=True)
    return target


def _digest(obj: dict) -> str:
    body = {k: v for k, v in obj.items() if k != "digest"}
    return files.json_sha256(body)


def _with_digest(obj: dict) -> dict:
    return {**obj, "digest": _digest(obj)}


# ------------------------------------------------------------------ read --
def read_manifest(record) -> tuple[dict, str | None]:
    """(set name -> entry, why the manifest is damaged or None). A record
    without a manifest has no sets; a damaged one lists none."""
    path = Path(record) / MANIFEST
    if not path.exists():
        return {}, None
    try:
        obj = files.read_json(path)
    except (OSError, ValueError):
        return {}, f"{MANIFEST}: unreadable"
    if not isinstance(obj, dict) or not isinstance(obj.get("sets"), dict):
        return {}, f"{MANIFEST}: not a manifest"
    if obj.get("digest") != _digest(obj):
        return {}, f"{MANIFEST}: contents changed since written (digest mismatch)"
    return obj["sets"], None


def damage(record, name: str, entry: dict) -> str | None:
    """Why set `name`'s file does not match its manifest entry, or None."""
    fname = entry.get("file")
    if fname != file_name(name):
        return f"{MANIFEST}: set {name} names file {fname!r}"
    why = check_file(record, fname, {fname: {"sha256": entry.get("sha256"),
                                             "size": entry.get("size")}})
    return f"{fname}: {why}" if why else None


def check(record) -> list[tuple[str, str]]:
    """(what, why) for the manifest or every set file that is damaged."""
    sets, why = read_manifest(record)
    if why:
        return [(MANIFEST, why)]
    return [(name, reason) for name, entry in sorted(sets.items())
            if (reason := damage(record, name, entry))]


def load(record, name: str) -> dict[str, np.ndarray]:
    """Set `name`'s arrays, after its checksum is checked (BenchError if not
    there or damaged)."""
    sets, why = read_manifest(record)
    if why:
        raise BenchError(f"{Path(record) / MANIFEST}: {why.split(': ', 1)[1]}")
    if name not in sets:
        raise BenchError(f"{record}: no evaluation set '{name}' (has: "
                         f"{', '.join(sorted(sets)) or 'none'})")
    reason = damage(record, name, sets[name])
    if reason:
        raise BenchError(f"{Path(record)}: {reason}; evaluate it again (bench eval)")
    try:
        with np.load(Path(record) / file_name(name), allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:  # object arrays (a pickle), a bad zip
        raise BenchError(f"{Path(record) / file_name(name)}: not a set of plain arrays "
                         f"({str(err).splitlines()[0]}); it is not loaded") from None
