"""Which runs of a report have which evaluation sets (bench.core.evalfiles),
for `bench report --shift` and `--ood`: the sets to use, the damaged ones
named in notes and set aside, and the one-line refusal when a flag finds no
set at all.

A set is checked against its manifest entry (sha256, size) every report,
cache or not: the cache is keyed by the manifest's recorded sha256, which a
file damaged later does not change.
"""
from __future__ import annotations

from collections import defaultdict

from bench.core.errors import BenchError
from bench.core.evalfiles import MANIFEST, images_digest

SHIFT = "shift"
OOD_PREFIX = "ood-"
# what to run to get the sets a flag reads, for its refusal
HOW = {SHIFT: ("shift", "--eval shift"), "ood": ("ood", "--eval ood:DATASET")}


def is_wanted(kind: str, name: str) -> bool:
    return name == SHIFT if kind == SHIFT else name.startswith(OOD_PREFIX)


def require(runs, kind: str, results) -> None:
    """BenchError (one line, exit 2) when no run has a set of `kind` ('shift'
    or 'ood'), intact or not: what to run to make them. A damaged manifest
    counts as having sets (its note names it)."""
    if any(is_wanted(kind, n) for r in runs for n in r.record.evals):
        return
    if any(what == MANIFEST for r in runs for what, _ in r.record.eval_damage()):
        return
    label, flag = HOW[kind]
    raise BenchError(
        f"bench report --{kind}: none of the {len(runs)} records under {results}/ has an "
        f"{label} evaluation set; make them with `bench run ... {flag}` (while training) or "
        f"`bench eval --results {results} {flag}` (records trained with --keep-weights)")


def require_same_images(runs, kind: str) -> None:
    """BenchError (one line, exit 2) naming two records of one cell (dataset,
    backbone, method, config) whose set of one name was computed on other
    images (a shift set built from another test split, an edited OOD
    folder): averaged together they would give a number of no set."""
    seen: dict = defaultdict(dict)  # (cell, set name) -> images digest -> a record
    for r in runs:
        for name, meta in r.record.evals.items():
            digest = images_digest(meta) if is_wanted(kind, name) else ""
            if digest:
                seen[(r.dataset, r.backbone, r.method, r.chash, name)].setdefault(digest, r.path)
    for (ds, bb, method, chash, name), by in sorted(seen.items()):
        if len(by) > 1:
            a, b = list(by.values())[:2]
            raise BenchError(
                f"bench report --{kind}: the {name} sets of {a} and {b} were computed on other "
                f"images ({len(by)} different sets in the {ds}/{bb}/{method} cell, config "
                f"{chash}); evaluate them again on one set: bench eval --results ... "
                f"--eval {name.replace(OOD_PREFIX, 'ood:', 1)}")


def usable(runs, kind: str) -> tuple[dict, list[str]]:
    """(run -> its intact set names of `kind`, in name order; notes naming
    every damaged set or manifest, set aside)."""
    out, notes = {}, []
    for r in runs:
        names = sorted(n for n in r.record.evals if is_wanted(kind, n))
        damaged = dict(r.record.eval_damage()) if names or not r.record.evals else {}
        if MANIFEST in damaged:
            notes.append(damaged_note(r, MANIFEST, damaged[MANIFEST]))
            continue
        for n in names:
            if n in damaged:
                notes.append(damaged_note(r, n, damaged[n]))
        for n in names:
            if n not in damaged and n == SHIFT and other_split(r, r.record.evals[n]):
                damaged[n] = other_split(r, r.record.evals[n])
                notes.append(f"skipped evaluation set {n} of {r.path}: {damaged[n]}; evaluate "
                             "it again (bench eval)")
        kept = [n for n in names if n not in damaged]
        if kept:
            out[r] = kept
    return out, notes


def other_split(run, meta: dict) -> str:
    """Why a shift set is not of the record's own test split ('' when it is,
    or when either count is unknown): its image count against config.json's
    split_sizes (a set that `bench eval` built before it read the record's
    data options, issue 39)."""
    n, test = meta.get("n"), (run.record.config.get("split_sizes") or {}).get("test")
    if isinstance(n, int) and isinstance(test, int) and n != test:
        return (f"built from {n} test images, but the record was tested on {test} (another "
                "split)")
    return ""


def damaged_note(run, what: str, why: str) -> str:
    """The note of a set (or the manifest) set aside."""
    return (f"skipped damaged evaluation set {what} of {run.path}: {why}; evaluate it again "
            "(bench eval)")
