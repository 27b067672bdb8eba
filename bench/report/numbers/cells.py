"""Every number of a report, computed one way: measure(variant(records)).

A cell is one (dataset, backbone, row) of a report: a method's seeds under
one Variant (bench.calib.variants: plain, ts-base, ts, dens, a calibrator).
`entry(records, variant, cache)` gives the values of every Measure
(bench.calib.measures) for one record (or, for an ensemble, for all of them
at once); `make_cell` puts a cell's entries together; nothing else computes
a table number. Entries are cached by the records' digests and the
variant's and each measure's version (OUT/cache/measures.json), so a record
is read, and a temperature fitted, once per report at most, and not at all
when nothing changed. The plain variant's stored measures are the values the
trainer wrote to metrics.json with the same functions (its cache entry,
written at training time); they are recomputed only where the measure's
version has moved on since.
"""
from __future__ import annotations

import sys

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.core import files
from bench.calib import measures as M
from bench.calib import variants as V
from bench.calib.measures.intervals import BOOT_RESAMPLES, BOOT_SEED, seed_interval
from bench.core.paper import DENS
from bench.core.record import COSTS

VERSION = 2  # of the cache file's layout; bump and every entry is recomputed
CACHE_FILE = Path("cache") / "measures.json"
# A deep ensemble's cost sums over its members, except rates: members train
# one after another, so the ensemble's training images/s is their mean.
RATE_COSTS = ("train_images_per_s",)


@dataclass(frozen=True)
class Run:
    """A record shown under a row's method key (an ablation's row is METHOD@PREFIX)."""

    record: object  # bench.core.record.Record
    method: str

    dataset = property(lambda self: self.record.dataset)
    backbone = property(lambda self: self.record.backbone)
    chash = property(lambda self: self.record.config_hash)
    seed = property(lambda self: self.record.seed)
    heads = property(lambda self: self.record.heads)
    path = property(lambda self: self.record.path)
    cost = property(lambda self: self.record.cost)


@dataclass
class CellData:
    """One report cell: a row of one dataset x backbone block, its per-seed values."""

    dataset: str
    backbone: str
    key: str  # row key: 'sl1h', 'dens', 'sl1h+ts', 'sl1h@ts-base'
    method: str  # the trained method behind the row
    chash: str
    seeds: tuple  # seeds averaged (ensemble: its members)
    values: dict  # measure -> per-seed values, aligned with seeds
    cost: dict  # cost -> per-run mean (ensemble: summed over members, rates averaged)
    single: bool = False  # one number, no std (deep ensemble, copied rows)
    extra: dict = field(default_factory=dict)  # boot, ci, temperature, members
    variant: V.Variant = V.PLAIN

    @property
    def row_method(self) -> str:
        """The method key a table lists the row under ('dens' for D-Ens)."""
        return DENS if self.variant == V.DENS else self.method

    @property
    def n(self) -> int:
        return len(self.seeds)

    def mean(self, m: str) -> float:
        return float(np.mean(self.values[m]))

    def std(self, m: str) -> float | None:
        return None if self.single else float(np.std(self.values[m], ddof=0))


# ------------------------------------------------------------------ cache --
class Cache:
    """name -> entry in one JSON file (absent or unreadable: empty, rebuilt).
    Only the entries used this time are written back."""

    def __init__(self, file: Path | None = None):
        self.file, self.entries, self.used = file, {}, {}
        if file is None or not file.exists():
            return
        saved = files.read_json(file, default=None)
        why = damage(saved)
        if why:  # named and kept beside the report folder (OUT/cache/ is replaced whole)
            aside = files.move_aside(file, file.parent.parent)
            print(f"bench: warning: report cache {file} is damaged ({why}); set aside as "
                  f"{aside}, its values are computed again", file=sys.stderr)
        elif saved.get("version") == VERSION:  # an older layout: recomputed, said nowhere
            self.entries = saved["entries"]

    def save(self) -> Path | None:
        if self.file is None:
            return None
        return files.write_json(self.file, {"version": VERSION, "entries": self.used},
                                indent=None, sort_keys=False, default=None)


def damage(saved) -> str | None:
    """Why a read cache file is not one this module wrote, or None."""
    if not isinstance(saved, dict):
        return "not a JSON object" if saved is not None else "not readable JSON"
    entries = saved.get("entries")
    if not isinstance(entries, dict) or not isinstance(saved.get("version"), int):
        return "no version and entries"
    bad = next((n for n, e in entries.items() if not isinstance(e, dict)
                or not isinstance(e.get("key"), str) or not isinstance(e.get("value"), dict)),
               None)
    return f"entry {bad!r} is not a key and its values" if bad is not None else None


def cache_for(out) -> Cache:
    return Cache(Path(out) / CACHE_FILE)


# ---------------------------------------------------------------- entries --
def _key(records, variant: V.Variant) -> tuple[str, str]:
    name = f"{variant.name}:" + "|".join(str(r.path) for r in records)
    return name, f"v{variant.version}:" + "|".join(r.digest for r in records)


def entry(records: list, variant: V.Variant, cache: Cache) -> dict:
    """{"values": measure -> value, "versions", "boot": measure -> (lo, hi),
    "info": what the variant fitted} of one record under `variant`, or of
    all `records` for an ensemble."""
    name, key = _key(records, variant)
    hit = cache.used.get(name) or cache.entries.get(name)  # this report's first, then saved
    hit = dict(hit["value"]) if hit and hit.get("key") == key else {}
    want = {m.name: m.version for m in M.all_measures()}
    have = hit.get("versions", {})
    if variant == V.PLAIN:  # the trainer's values, where still current
        rec = records[0]
        stored = rec.stored("test")
        versions = rec.metrics.get("measure_versions", {})
        for m, v in stored.items():
            if m in want and versions.get(m, 1) == want[m] and have.get(m) != want[m]:
                hit.setdefault("values", {})[m], have[m] = v, want[m]
    missing = [m for m, v in want.items() if have.get(m) != v]
    # a cache written before a measure had a resampler lacks its interval
    need_boot = variant.boot and not set(M.bootstrapped()) <= set(hit.get("boot", {}))
    if missing or need_boot or "info" not in hit:
        preds = [r.predictions for r in records]
        probs, labels, info = variant.apply(preds if variant.ensemble else preds[0])
        values = hit.setdefault("values", {})
        values.update(M.compute(probs, labels, missing))
        have.update({m: want[m] for m in missing})
        hit["info"] = info
        if variant.boot:
            hit["boot"] = {m: list(v) for m, v in M.bootstrap(probs, labels).items()}
    hit["versions"] = have
    cache.used[name] = {"key": key, "value": hit}
    return hit


# ------------------------------------------------------------------ cells --
def _costs(runs: list, ensemble: bool = False) -> dict:
    """Each cost every run has: the per-run mean, or for an ensemble the sum
    over its members, except rates (see RATE_COSTS)."""
    def reduce(c):
        return np.sum if ensemble and c not in RATE_COSTS else np.mean

    return {c: float(reduce(c)([r.cost[c] for r in runs])) for c in COSTS
            if all(c in r.cost for r in runs)}


def make_cell(runs: list, variant: V.Variant, cache: Cache) -> CellData:
    """The cell of one method's seeds (`runs`, one config) under `variant`."""
    first = runs[0]
    if variant.ensemble:
        entries = [entry([r.record for r in runs], variant, cache)]
    else:
        entries = [entry([r.record], variant, cache) for r in runs]
    key = DENS if variant == V.DENS else variant.key(first.method)
    cell = CellData(first.dataset, first.backbone, key, first.method, first.chash,
                    tuple(r.seed for r in runs),
                    {m: [e["values"][m] for e in entries] for m in M.names()},
                    _costs(runs, ensemble=variant.ensemble), single=variant.ensemble,
                    variant=variant)
    if variant.boot:
        cell.extra["boot"] = {m: [tuple(e["boot"][m]) for e in entries] for m in M.bootstrapped()}
    if variant == V.TS:
        cell.extra["temperature"] = [e["info"]["temperature"] for e in entries]
    if variant.ensemble:
        cell.extra["members"] = len(runs)
    cell.extra["ci"] = {m: cell_ci(cell, m) for m in cell.values}
    return cell


def cell_ci(g: CellData, metric: str) -> tuple | None:
    """A cell's 95% interval, cut to the measure's range: over seeds
    (Student t) when it has two or more; a one-number cell (D-Ens, one seed)
    gets its bootstrap interval over test samples where the measure has one,
    else None."""
    measure = M.get(metric) if metric in M.names() else None
    if len(g.values[metric]) >= 2:
        ci = seed_interval(g.values[metric])
        return measure.clip(ci) if measure else ci
    boot = g.extra.get("boot", {}).get(metric)
    return tuple(boot[0]) if boot else None


def run_rows(runs: list, cache: Cache) -> list[dict]:
    """Per run: every measure of its plain predictions and their bootstrap
    bounds (runs.csv's measure columns)."""
    out = []
    for r in runs:
        e = entry([r.record], V.PLAIN, cache)
        row = dict(e["values"])
        for m in M.bootstrapped():
            row[f"{m}_boot_lo"], row[f"{m}_boot_hi"] = e["boot"][m]
        row["boot_resamples"], row["boot_seed"] = BOOT_RESAMPLES, BOOT_SEED
        out.append(row)
    return out
