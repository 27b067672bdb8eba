"""Measures under distribution shift (`bench report --shift`): every Measure
per corruption and severity of each record's `shift` evaluation set, under
every variant a shift table shows.

The same registries as every other cell (bench.calib.variants,
bench.calib.measures), through one move: a record's shifted logits
[C, S, N, M, K] are stacked into one test split of C x S x N samples beside
its own validation split, the variant is applied once (a calibrator is fitted
on the in-distribution validation split, once per record, not once per
corruption: Ovadia et al. 2019's experiment), and the probabilities are cut
back into C x S slices, each measured on its own. Every registered variant
maps each test sample on its own once fitted (the tests check stacked =
one slice at a time), so stacking changes no number.

Entries are cached with the report's other values (OUT/cache/measures.json,
bench.report.numbers.cells.Cache) under `shift:<variant>:<paths>`, keyed by the
records' predictions digests, their shift sets' recorded sha256 and the
variant's version; each measure's values carry its version, and only the
measures asked for are computed.
"""
from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bench.calib import measures as M
from bench.calib import variants as V
from bench.core.errors import BenchError
from bench.core.paper import DENS, ENSEMBLE_OF
from bench.report.numbers.cells import Cache, CellData
from bench.report.evals.evalsets import SHIFT, usable

VERSION = 1  # of a shift entry's layout; bump and every shift entry is recomputed
MIN_MEMBERS = 2  # as bench.report.numbers.aggregate: one seed is no ensemble
LONG_COLUMNS = ["dataset", "backbone", "method", "variant", "seed", "corruption", "severity",
                "measure", "value"]


def severity_key(s: int) -> str:
    """A severity's column-block key in a shift table."""
    return f"severity{s}"


def grid(arrays: dict) -> dict:
    """A shift set as stored (bench.core.evalfiles: logits [B, N, M, K],
    corruption [B] and severity [B], one clean block at severity 0) arranged
    as logits [C, S, N, M, K], labels, corruptions [C], severities [S], the
    clean block standing as severity 0 of every corruption."""
    z, names = np.asarray(arrays["logits"]), [str(c) for c in arrays["corruption"]]
    sev = [int(v) for v in arrays["severity"]]
    clean = [b for b, v in enumerate(sev) if v == 0]
    where = {(c, v): b for b, (c, v) in enumerate(zip(names, sev)) if v}
    corr = list(dict.fromkeys(c for c, _ in where))
    sevs = sorted({v for _, v in where})
    if z.ndim != 4 or len(clean) != 1 or len(where) != len(corr) * len(sevs):
        raise BenchError(f"shift blocks of logits {z.shape}: expected one clean block and "
                         "every corruption at every severity")
    idx = np.array([[clean[0], *(where[(c, v)] for v in sevs)] for c in corr])
    return {"logits": z[idx], "labels": arrays["labels"], "corruptions": np.array(corr),
            "severities": np.array([0, *sevs])}


def stacked(preds: dict, shifted: dict) -> dict:
    """One record's predictions with its shift set as the test split: the
    C x S x N shifted samples in (corruption, severity, sample) order."""
    z, y = np.asarray(shifted["logits"]), np.asarray(shifted["labels"])
    if z.ndim != 5 or z.shape[2] != len(y):
        raise BenchError(f"shift logits of shape {z.shape} and {len(y)} labels: expected "
                         "[corruptions, severities, N, heads, classes] and N labels")
    c, s, n = z.shape[:3]
    val = {k: preds[k] for k in ("val_logits", "val_labels") if k in preds}  # none: plain only
    return {**val, "test_logits": z.reshape(c * s * n, *z.shape[3:]),
            "test_labels": np.tile(y, c * s)}


def slices(variant: V.Variant, records: list, sets: list) -> tuple[np.ndarray, np.ndarray]:
    """(probabilities [C, S, N, K], labels [N]) of `variant` on the records'
    shift sets (one record; an ensemble: its members)."""
    first = sets[0]
    for s in sets[1:]:
        if (s["logits"].shape[:3] != first["logits"].shape[:3]
                or list(s["corruptions"]) != list(first["corruptions"])):
            raise BenchError("ensemble members' shift sets differ in corruptions, severities "
                             "or size")
    preds = [stacked(r.predictions, s) for r, s in zip(records, sets)]
    probs, _, _ = variant.apply(preds if variant.ensemble else preds[0])
    c, s, n = first["logits"].shape[:3]
    return probs.reshape(c, s, n, probs.shape[-1]), np.asarray(first["labels"])


def read(record) -> dict:
    """A record's shift set (checksum checked) as a grid."""
    return grid(record.eval_set(SHIFT))


def entry(records: list, variant: V.Variant, cache: Cache, which, load=read) -> dict:
    """{"values": measure -> [C][S] values, "versions", "corruptions",
    "severities"} of one record (an ensemble: all members) under `variant`,
    for the measures `which` (cached; see the module's text). `load(record)`
    reads a set (compute passes one that reads each record's once)."""
    name = f"shift:{variant.name}:" + "|".join(str(r.path) for r in records)
    key = f"v{VERSION}.{variant.version}:" + "|".join(
        f"{r.digest}/{r.eval_digest(SHIFT)}" for r in records)
    hit = cache.used.get(name) or cache.entries.get(name)
    hit = dict(hit["value"]) if hit and hit.get("key") == key else {}
    want = {m: M.get(m).version for m in which}
    have = dict(hit.get("versions", {}))
    missing = [m for m in which if have.get(m) != want[m]]
    if missing or "corruptions" not in hit:
        sets = [load(r) for r in records]
        probs, labels = slices(variant, records, sets)
        values = dict(hit.get("values", {}))
        for m in missing:
            values[m] = [[M.get(m)(p, labels) for p in per_c] for per_c in probs]
            have[m] = want[m]
        hit["values"] = values
        hit["corruptions"] = [str(c) for c in sets[0]["corruptions"]]
        hit["severities"] = [int(s) for s in sets[0]["severities"]]
    hit["versions"] = have
    cache.used[name] = {"key": key, "value": hit}
    return hit


@dataclass
class Outcome:
    """One (record or ensemble) x variant of a shift table: its cached entry."""

    dataset: str
    backbone: str
    method: str
    chash: str
    variant: V.Variant
    seeds: tuple  # one seed, or an ensemble's members
    entry: dict

    @property
    def row(self) -> str:
        """The table row key: 'sl1h', 'sl1h+ts', 'dens'."""
        return DENS if self.variant == V.DENS else self.variant.key(self.method)

    def mean_over_corruptions(self, m: str) -> list[float]:
        """Per severity: the measure averaged over corruptions."""
        return [float(v) for v in np.mean(np.asarray(self.entry["values"][m]), axis=0)]


@dataclass
class ShiftData:
    outcomes: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    measures: tuple = ()


def compute(runs: list, variants, cache: Cache, which) -> ShiftData:
    """Every outcome of the runs' intact shift sets under `variants` (the
    per-seed ones: plain and the calibrators) and D-Ens of the sl1h seeds;
    damaged or malformed sets named in notes, set aside."""
    have, notes = usable(runs, "shift")
    out = ShiftData(notes=notes, measures=tuple(which))
    groups = defaultdict(list)
    for r in sorted(have, key=lambda r: (r.dataset, r.backbone, r.method, r.seed)):
        once = functools.cache(read)  # every variant of this record, one read; then freed
        fitted = r.record.has_validation
        if not fitted and any(v.posthoc for v in variants):
            out.notes.append(f"{r.path}: no validation arrays (an earlier record format): its "
                             "calibrated rows under shift are left out")
        try:
            for v in (v for v in variants if fitted or not v.posthoc):
                e = entry([r.record], v, cache, which, once)
                out.outcomes.append(Outcome(r.dataset, r.backbone, r.method, r.chash, v,
                                            (r.seed,), e))
        except (BenchError, ValueError, KeyError) as err:
            out.notes.append(f"skipped the shift set of {r.path}: {err}")
            continue
        groups[(r.dataset, r.backbone, r.method, r.chash)].append(r)
    for (ds, bb, method, chash), members in groups.items():
        if method != ENSEMBLE_OF or len(members) < MIN_MEMBERS:
            continue
        try:
            e = entry([r.record for r in members], V.DENS, cache, which)
        except (BenchError, ValueError, KeyError) as err:
            out.notes.append(f"{ds}/{bb}: no D-Ens under shift: {err}")
            continue
        out.outcomes.append(Outcome(ds, bb, method, chash, V.DENS,
                                    tuple(r.seed for r in members), e))
    out.notes += without_sets(runs, have)
    return out


def without_sets(runs: list, have: dict) -> list[str]:
    """A note per dataset/backbone/method whose seeds lack a shift set, in a
    dataset x backbone where others have one (a table is made there)."""
    blocks = {(r.dataset, r.backbone) for r in have}
    lacking = defaultdict(list)
    for r in runs:
        if r not in have and (r.dataset, r.backbone) in blocks:
            lacking[(r.dataset, r.backbone, r.method)].append(r.seed)
    return [f"{ds}/{bb}/{m}: no shift set for seed(s) {', '.join(map(str, sorted(s)))}; "
            "the shift table averages over the seeds that have one"
            for (ds, bb, m), s in sorted(lacking.items())]


def severity_cells(outcomes: list) -> dict:
    """(dataset, backbone, row key, severity) -> CellData whose per-seed
    values are each measure averaged over corruptions at that severity (a
    table's cell; D-Ens one number)."""
    by = defaultdict(list)
    for o in outcomes:
        by[(o.dataset, o.backbone, o.row)].append(o)
    cells = {}
    for (ds, bb, row), os_ in by.items():
        first = os_[0]
        for i, s in enumerate(first.entry["severities"]):
            values = {m: [o.mean_over_corruptions(m)[i] for o in os_]
                      for m in first.entry["values"]}
            cells[(ds, bb, row, s)] = CellData(
                ds, severity_key(s), row, first.method, first.chash,
                tuple(o.seeds[0] for o in os_) if not first.variant.ensemble else first.seeds,
                values, {}, single=first.variant.ensemble, variant=first.variant)
    return cells


def long_frame(data: ShiftData) -> pd.DataFrame:
    """The tidy CSV: one row per (run or D-Ens) x variant x corruption x
    severity x measure; D-Ens has no seed."""
    rows = []
    for o in data.outcomes:
        seed = None if o.variant.ensemble else o.seeds[0]
        method = DENS if o.variant == V.DENS else o.method
        cs, ss = o.entry["corruptions"], o.entry["severities"]
        for m in data.measures:
            grid = o.entry["values"][m]
            rows += [(o.dataset, o.backbone, method, o.variant.name, seed, c, s, m, grid[i][j])
                     for i, c in enumerate(cs) for j, s in enumerate(ss)]
    df = pd.DataFrame(rows, columns=LONG_COLUMNS)
    return df.astype({"seed": "Int64"})  # an integer column with D-Ens's empty seed
