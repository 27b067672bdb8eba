"""The extra calibration measures of every run and derived row, from the
records' saved logits, cached beside the report.

`bench report` calls `attach`: each run record gets the measures of
bench.core.calibration_measures for its plain predictions (mean of head
softmaxes), for the TS table's un-scaled row (head logits averaged, T = 1)
and for its +TS row, plus a bootstrap interval over test samples of ACC, ECE
and NLL; the deep ensemble gets the same from its members' mean prediction.
Results are cached in OUT/cache/measures.json keyed on each record's
predictions.npz (recorded checksum, size, modification time), so a record
that changes is recomputed and nothing is ever retrained.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.core import calibration_measures as C
from bench.core import files, store
from bench.core.calibration import ensemble_probs, fit_temperature, scaled_probs
from bench.core.metrics import head_probs
from bench.core.paper import TS_VARIANTS, Variant
from bench.report import aggregate
from bench.report.frame import METRICS

EXTRA = tuple(C.MEASURES)  # measures added to every cell (brier is already a record metric)
CI_METRICS = ("acc", "ece", "nll")  # bootstrapped over test samples per run
VERSION = 1  # bump when a measure changes: every cache entry is recomputed
CACHE_FILE = Path("cache") / "measures.json"


def record_key(path: Path) -> str:
    """What identifies one state of a record's predictions."""
    npz = Path(path) / "predictions.npz"
    st = npz.stat()
    try:
        sha = (store.read_json(Path(path) / "metrics.json").get("files") or {}) \
            .get("predictions.npz", {}).get("sha256", "")
    except (OSError, ValueError, AttributeError):
        sha = ""
    return f"v{VERSION}:{sha}:{st.st_size}:{st.st_mtime_ns}"


def _boot(probs, labels) -> dict:
    return {m: list(v) for m, v in C.bootstrap_ci(probs, labels).items()}


def run_entry(path: Path, with_ts: bool) -> dict:
    """Measures of one record: plain, and with TS its ts-base and ts rows."""
    p = store.load_predictions(path)
    z, y = p["test_logits"], p["test_labels"]
    probs = head_probs(z)
    out = {"plain": C.extra_measures(probs, y), "boot": _boot(probs, y)}
    if with_ts:
        t = fit_temperature(p["val_logits"], p["val_labels"])
        out[Variant.TS_BASE.value] = C.extra_measures(scaled_probs(z, 1.0), y)
        out[Variant.TS.value] = C.extra_measures(scaled_probs(z, t), y)
    return out


def dens_entry(paths: list[Path]) -> dict:
    preds = [store.load_predictions(p) for p in paths]
    probs = ensemble_probs([q["test_logits"] for q in preds])
    y = preds[0]["test_labels"]
    return {"plain": C.extra_measures(probs, y), "boot": _boot(probs, y)}


class Cache:
    """key -> entry, read from and written to one JSON file (absent or
    unreadable: an empty cache, rebuilt)."""

    def __init__(self, file: Path | None):
        self.file, self.entries = file, {}
        if file is not None:
            saved = files.read_json(file, default={})
            self.entries = saved.get("entries", {}) if isinstance(saved, dict) else {}
        self.used: dict = {}

    def get(self, name: str, key: str, compute, need=()) -> dict:
        hit = self.entries.get(name)
        if not (hit and hit.get("key") == key and all(k in hit["value"] for k in need)):
            hit = {"key": key, "value": compute()}
        self.used[name] = hit
        return hit["value"]

    def save(self) -> Path | None:
        """Write the entries used this time (stale ones are dropped)."""
        if self.file is None:
            return None
        return files.write_json(self.file, {"version": VERSION, "entries": self.used},
                                indent=None, sort_keys=False, default=None)


def run_measures(cache: Cache, path: Path, with_ts: bool) -> dict:
    need = ("plain", "boot") + tuple(v.value for v in TS_VARIANTS if with_ts)
    return cache.get(str(path), record_key(path), lambda: run_entry(path, with_ts), need)


def attach(cells: dict, runs: list, cache: Cache, with_ts: bool = True) -> dict:
    """Add the EXTRA measures to every cell's per-seed values, and to
    `extra`: "boot" (per seed: metric -> bootstrap (lo, hi)) and "ci" (metric
    -> interval of the cell, see cell_ci). Returns {run path: entry}."""
    per_run = {r.path: run_measures(cache, r.path, with_ts) for r in runs}
    by_seed = {(r.dataset, r.backbone, r.method, r.chash, r.seed): r for r in runs}
    for (ds, bb, _), g in cells.items():
        members = [by_seed[(ds, bb, g.method, g.chash, s)] for s in g.seeds]
        if g.variant == Variant.DENS:
            paths = [r.path for r in members]
            key = "|".join(record_key(p) for p in paths)
            entries = [cache.get("dens:" + "|".join(map(str, paths)), key,
                                 lambda: dens_entry(paths))]
        else:
            entries = [per_run[r.path] for r in members]
        part = "plain" if g.variant in (Variant.SEEDS, Variant.DENS) else g.variant
        for m in EXTRA:
            g.values[m] = [e[part][m] for e in entries]
        if part == "plain":
            g.extra["boot"] = {m: [tuple(e["boot"][m]) for e in entries] for m in CI_METRICS}
        g.extra["ci"] = {m: cell_ci(g, m) for m in g.values}
    return per_run


def cell_ci(g, metric: str) -> tuple | None:
    """A table cell's 95% interval: over seeds (Student t) when it has two or
    more; a one-number cell (D-Ens, a single seed) gets its bootstrap interval
    over test samples where there is one (ACC, ECE, NLL), else None. The
    seed interval's lower end is cut at 0 (no measure but the Gap is below)."""
    if len(g.values[metric]) >= 2:
        lo, hi = C.seed_interval(g.values[metric])
        # every measure is >= 0: a t-interval reaching below is cut at 0
        return (max(lo, 0.0) if metric != "gap" else lo), hi
    boot = g.extra.get("boot", {}).get(metric)
    return tuple(boot[0]) if boot else None


def cache_for(out: Path) -> Cache:
    return Cache(Path(out) / CACHE_FILE)


def rows_of(values: dict) -> dict:
    """A run entry's plain measures and bootstrap bounds as flat columns."""
    row = {m: values["plain"][m] for m in EXTRA}
    for m in CI_METRICS:
        row[f"{m}_boot_lo"], row[f"{m}_boot_hi"] = values["boot"][m]
    row["boot_resamples"], row["boot_seed"] = C.BOOT_RESAMPLES, C.BOOT_SEED
    return row


def test_columns(df, cache: Cache | None = None):
    """bench.results.load's frame with every measure as test_<name> and the
    bootstrap bounds as test_<metric>_boot_lo/hi (computed from the logits)."""
    cache = cache or Cache(None)
    rows = [rows_of(run_measures(cache, Path(p), False)) for p in df["path"]]
    extra = {f"test_{k}" if not k.startswith("boot_") else k: [r[k] for r in rows]
             for k in (rows[0] if rows else [])}
    return df.assign(**extra)


RUN_COLUMNS = [*EXTRA, *[f"{m}_boot_{s}" for m in CI_METRICS for s in ("lo", "hi")],
               "boot_resamples", "boot_seed"]


def runs_frame(runs: list, per_run: dict) -> pd.DataFrame:
    """runs.csv: aggregate.runs_frame's columns, then every measure and the
    bootstrap bounds (with the resample count and seed that made them)."""
    extra = pd.DataFrame([rows_of(per_run[r.path]) for r in runs], columns=RUN_COLUMNS)
    return pd.concat([aggregate.runs_frame(runs), extra], axis=1)


def cells_frame(cells: dict, expected: dict) -> pd.DataFrame:
    """groups.csv: aggregate.cells_frame's columns, then each extra measure's
    mean and std, then every metric's 95% interval (cell_ci)."""
    cols = [f"{m}_ci_{s}" for m in (*METRICS, *EXTRA) for s in ("lo", "hi")]
    rows = []
    for _, g in sorted(cells.items()):
        row = {}
        for m in (*METRICS, *EXTRA):
            ci = g.extra.get("ci", {}).get(m)
            row[f"{m}_ci_lo"], row[f"{m}_ci_hi"] = ci if ci else (None, None)
        rows.append(row)
    return pd.concat([aggregate.cells_frame(cells, expected), aggregate.cell_stats(cells, EXTRA),
                      pd.DataFrame(rows, columns=cols)], axis=1)


