"""Which runs of a report have which evaluation sets (bench.core.evalfiles),
for `bench report --shift` and `--ood`: the sets to use, the damaged ones
named in notes and set aside, and the one-line refusal when a flag finds no
set at all.

A set is checked against its manifest entry (sha256, size) every report,
cache or not: the cache is keyed by the manifest's recorded sha256, which a
file damaged later does not change.
"""
from __future__ import annotations

from bench.core.errors import BenchError
from bench.core.evalfiles import MANIFEST

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
        kept = [n for n in names if n not in damaged]
        if kept:
            out[r] = kept
    return out, notes


def damaged_note(run, what: str, why: str) -> str:
    """The note of a set (or the manifest) set aside."""
    return (f"skipped damaged evaluation set {what} of {run.path}: {why}; evaluate it again "
            "(bench eval)")
