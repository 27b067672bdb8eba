"""Run records -> a tidy table of runs -> report cells with mean ± std over seeds.

One row per finished run (dataset, backbone, method, seed, test metrics,
cost). A cell (CellData) is one (dataset, backbone, row) aggregate of a
report: the per-seed values that the significance tests pair, and from them
the mean and population std (ddof=0, as the paper) over its seeds and n.
("Group" is kept for a fused training group, bench.train.groups.) Derived
rows come from saved predictions (bench.report.derived): `dens`, the deep
ensemble of the sl1h seeds, and `<method>+ts`, temperature scaling of every
seed.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bench.core import files, outcomes, store
from bench.core.outcomes import Failure
from bench.report import frame
from bench.report.frame import COSTS, METRICS
from bench.core.calibration import scaled_probs
from bench.core.paper import DENS, ENSEMBLE_OF, Variant
from bench.report.derived import (MIN_MEMBERS, deep_ensemble, has_ensemble,
                                  temperature_scaled_predictions)
from bench.core.errors import BenchError
from bench.core.metrics import all_metrics

# A deep ensemble's cost sums over its members, except rates: members train
# one after another, so the ensemble's training images/s is their mean.
RATE_COSTS = ("train_images_per_s",)


@dataclass(frozen=True)
class Run:
    dataset: str
    backbone: str
    method: str
    chash: str
    seed: int
    heads: int
    metrics: dict
    cost: dict
    path: Path


# A CellData's `variant` (bench.core.paper.Variant) says what its row is made
# of: the trained runs, the deep ensemble of sl1h seeds, the runs after
# temperature scaling, or the same runs with head logits averaged and T = 1
# (the TS table's un-scaled row).


@dataclass
class CellData:
    """One report cell: a row of one dataset x backbone block, its per-seed values."""

    dataset: str
    backbone: str
    key: str  # row key: 'sl1h', 'dens', 'sl1h+ts', 'sl1h@ts-base'
    method: str  # the trained method behind the row
    chash: str
    seeds: tuple  # seeds averaged (ensemble: its members)
    values: dict  # metric -> per-seed values, aligned with seeds
    cost: dict  # cost -> per-run mean (ensemble: summed over members, rates averaged)
    single: bool = False  # one number, no std (deep ensemble)
    extra: dict = field(default_factory=dict)
    variant: Variant = Variant.SEEDS  # see above

    @property
    def row_method(self) -> str:
        """The method key a table lists the row under ('dens' for D-Ens)."""
        return DENS if self.variant == Variant.DENS else self.method

    @property
    def n(self) -> int:
        return len(self.seeds)

    def mean(self, m: str) -> float:
        return float(np.mean(self.values[m]))

    def std(self, m: str) -> float | None:
        return None if self.single else float(np.std(self.values[m], ddof=0))


# ---------------------------------------------------------------- reading


def runs_of(df: pd.DataFrame) -> list[Run]:
    """Frame rows (bench.report.frame) -> Runs, in frame order."""
    return [Run(dataset=r["dataset"], backbone=r["backbone"], method=r["method"],
                chash=r["config_hash"], seed=int(r["seed"]), heads=int(r["heads"]),
                metrics={k: r[f"test_{k}"] for k in METRICS if _has(r, f"test_{k}")},
                cost={k: r[k] for k in COSTS if _has(r, k)}, path=Path(r["path"]))
            for r in df.to_dict("records")]


def _has(row: dict, key: str) -> bool:
    return key in row and not pd.isna(row[key])


def load_runs(results, datasets=None, backbones=None, methods=None,
              damaged: list | None = None) -> list[Run]:
    """The finished, readable runs matching the filters; damaged records are
    appended to `damaged` (failure rows) when given."""
    df, bad = frame.load_records(results)
    keep = [f for f in bad if (not datasets or f["dataset"] in datasets)
            and (not backbones or f["backbone"] in backbones)
            and (not methods or f["method"] in methods)]
    if damaged is not None:
        damaged += keep
    if df.empty:
        return []
    mask = pd.Series(True, index=df.index)
    for col, allowed in (("dataset", datasets), ("backbone", backbones), ("method", methods)):
        if allowed:
            mask &= df[col].isin(allowed)
    return runs_of(df[mask])


def _reason(obj: dict) -> str:
    for key in ("reason", "error", "message", "exception"):
        if obj.get(key):
            return str(obj[key]).splitlines()[0][:200]
    return f"status {obj.get('status', 'unknown')}"


def find_failures(results) -> list[dict]:
    """Failed or unfinished runs: `*.failed.json` files anywhere, and seed
    directories whose metrics.json says status != done. Unreadable files are
    listed too, never raised: a report must not crash on a broken record."""
    root = Path(results)
    if not root.exists():
        return []
    out = []
    for f in store.failure_files(root):
        try:
            obj = store.read_json(f)
            obj = obj if isinstance(obj, dict) else {}
        except (OSError, ValueError) as err:
            obj = {"reason": f"unreadable {f.name}: {err}"}
        if f.name == "metrics.json" and obj.get("status") == store.DONE:
            continue
        out.append(_failure_row(root, f, obj))
    return out


def _failure_row(root: Path, f: Path, obj: dict) -> dict:
    found = store.key_fields(root, f)  # the file's own fields first, then its path's
    names = [obj.get(k, "") or found[k] for k in ("dataset", "backbone", "method")]
    return Failure("not-done" if f.name == "metrics.json" else "failed", *names,
                   obj.get("config_hash") or found["config_hash"],
                   obj["seed"] if obj.get("seed", "") != "" else found["seed"], _reason(obj),
                   str(f), obj.get("last_step", obj.get("step", ""))).to_row()


# ---------------------------------------------------------------- cells


def _costs(runs: list[Run], ensemble: bool = False) -> dict:
    """Each cost every run has: the per-run mean, or for an ensemble the sum
    over its members, except rates (see RATE_COSTS)."""
    def reduce(c):
        return np.sum if ensemble and c not in RATE_COSTS else np.mean

    return {c: float(reduce(c)([r.cost[c] for r in runs])) for c in COSTS
            if all(c in r.cost for r in runs)}


def _cell(runs: list[Run], key: str, values_fn=None) -> CellData:
    first = runs[0]
    per_seed = [values_fn(r) if values_fn else r.metrics for r in runs]
    return CellData(first.dataset, first.backbone, key, first.method, first.chash,
                 tuple(r.seed for r in runs),
                 {m: [v[m] for v in per_seed] for m in METRICS if all(m in v for v in per_seed)},
                 _costs(runs))


def ensemble_cell(runs: list[Run]) -> CellData:
    """The paper's D-Ens: one number from the sl1h seeds' mean probabilities;
    its cost is that of all members together."""
    if len(runs) < MIN_MEMBERS:
        raise BenchError(f"a deep ensemble needs at least {MIN_MEMBERS} {ENSEMBLE_OF} seeds, "
                         f"got {len(runs)}")
    test = deep_ensemble([r.path for r in runs])["test"]
    first = runs[0]
    return CellData(first.dataset, first.backbone, DENS, first.method, first.chash,
                 tuple(r.seed for r in runs), {m: [test[m]] for m in METRICS if m in test},
                 _costs(runs, ensemble=True), single=True, extra={"members": len(runs)},
                 variant=Variant.DENS)


def ts_cells(runs: list[Run]) -> tuple[CellData, CellData]:
    """(un-scaled, +TS) cells of one method's seeds, for the TS table. The
    un-scaled row averages head logits with T = 1 (paper appendix), so that
    its accuracy is exactly that of the +TS row. Each record is read once."""
    unscaled, fitted = {}, {}
    for r in runs:
        p = store.load_predictions(r.path)
        unscaled[r.seed] = all_metrics(scaled_probs(p["test_logits"], 1.0), p["test_labels"])
        fitted[r.seed] = temperature_scaled_predictions(p)
    base = _cell(runs, Variant.TS_BASE.key(runs[0].method), lambda r: unscaled[r.seed])
    scaled = _cell(runs, Variant.TS.key(runs[0].method), lambda r: fitted[r.seed]["test"])
    base.variant, scaled.variant = Variant.TS_BASE, Variant.TS
    scaled.extra = {"temperature": [fitted[r.seed]["temperature"] for r in runs]}
    return base, scaled


def build_cells(runs: list[Run], with_ts: bool = True, progress=None) -> tuple[dict, list[str]]:
    """Every report cell keyed (dataset, backbone, row key), plus notes."""
    cells, notes = {}, []
    by_method: dict = defaultdict(list)
    for r in runs:
        by_method[(r.dataset, r.backbone, r.method)].append(r)
    for (ds, bb, method), rs in by_method.items():
        cells[(ds, bb, method)] = _cell(rs, method)
        if has_ensemble(method, len(rs)):
            cells[(ds, bb, DENS)] = ensemble_cell(rs)
        elif method == ENSEMBLE_OF:
            notes.append(f"{ds}/{bb}: D-Ens needs >= {MIN_MEMBERS} {ENSEMBLE_OF} seeds, "
                         f"found {len(rs)}")
        if with_ts:
            base, scaled = ts_cells(rs)
            cells[(ds, bb, base.key)], cells[(ds, bb, scaled.key)] = base, scaled
        if progress is not None:
            progress.update(1)
    return cells, notes


# ---------------------------------------------------------------- CSV

CELL_KEYS = ["dataset", "backbone", "row"]
# csv.writer's line ends, as the CSVs had before pandas wrote them
LINE_END = "\r\n"
FAILURE_COLUMNS = list(outcomes.FAILURE_COLUMNS)


def write_frame(path: Path, frame: pd.DataFrame) -> Path:
    """A frame -> CSV, written whole or not at all (bench.core.files)."""
    return files.write_text(path, frame.to_csv(index=False, lineterminator=LINE_END))


def write_csv(path: Path, header: list[str], rows) -> Path:
    """Rows (lists aligned with `header`) -> CSV, written by pandas."""
    return write_frame(path, pd.DataFrame(list(rows), columns=header))


def write_failures_csv(failures: list[dict], path: Path) -> Path:
    return write_csv(path, FAILURE_COLUMNS, ([f.get(k, "") for k in FAILURE_COLUMNS]
                                             for f in failures))


def runs_frame(runs: list[Run]) -> pd.DataFrame:
    """runs.csv: one row per run, test metrics under their plain names."""
    return pd.DataFrame([{"dataset": r.dataset, "backbone": r.backbone, "method": r.method,
                          "config_hash": r.chash, "seed": r.seed, "heads": r.heads,
                          **{m: r.metrics.get(m) for m in METRICS},
                          **{c: r.cost.get(c) for c in COSTS}, "path": str(r.path)}
                         for r in runs],
                        columns=["dataset", "backbone", "method", "config_hash", "seed", "heads",
                                 *METRICS, *COSTS, "path"])


def write_runs_csv(runs: list[Run], path: Path) -> Path:
    return write_frame(path, runs_frame(runs))


def values_frame(cells: dict) -> pd.DataFrame:
    """Every cell's values, long: dataset, backbone, row, metric, value (one
    row per seed; one-number cells, D-Ens and copied rows, one row)."""
    return pd.DataFrame([(ds, bb, key, m, v) for (ds, bb, key), g in cells.items()
                         for m, values in g.values.items() for v in values],
                        columns=[*CELL_KEYS, "metric", "value"])


def _pstd(values: pd.Series) -> float:
    return values.std(ddof=0)  # population std, as the paper


def cell_stats(cells: dict, metrics) -> pd.DataFrame:
    """Mean and population std (ddof=0) over seeds per cell and metric, one
    row per cell in sorted key order, columns <metric>_mean, <metric>_std
    (NaN where a cell lacks the metric; std NaN for one-number cells).

    Series reductions, not groupby's "mean"/"std": those sum with Kahan and
    Welford's updates, which differ from numpy's sums in the last bit, and
    the CSVs and tables keep numpy's numbers (CellData.mean, .std)."""
    cols = [f"{m}_{s}" for m in metrics for s in ("mean", "std")]
    keys = sorted(cells)
    if not keys:
        return pd.DataFrame(columns=cols, dtype=float)
    agg = values_frame(cells).groupby([*CELL_KEYS, "metric"])["value"].agg(
        mean=pd.Series.mean, std=_pstd)
    wide = agg.unstack("metric")
    wide.columns = [f"{m}_{stat}" for stat, m in wide.columns]
    wide = wide.reindex(index=pd.MultiIndex.from_tuples(keys), columns=cols)
    single = [cells[k].single for k in keys]
    wide.loc[single, [c for c in cols if c.endswith("_std")]] = np.nan
    return wide.reset_index(drop=True)


def cells_frame(cells: dict, expected: dict) -> pd.DataFrame:
    """groups.csv: mean, population std, n/N per cell (fractions, not x100);
    `variant` says what the row is made of (seeds, dens, ts, ts-base)."""
    rows = [{"dataset": ds, "backbone": bb, "row": key, "method": g.method,
             "config_hash": g.chash, "n": g.n, "N": len(expected.get(ds, ())),
             "seeds": " ".join(map(str, g.seeds))} for (ds, bb, key), g in sorted(cells.items())]
    ids = pd.DataFrame(rows, columns=["dataset", "backbone", "row", "method", "config_hash",
                                      "n", "N", "seeds"])
    costs = pd.DataFrame([{**{c: g.cost.get(c) for c in COSTS}, "variant": g.variant}
                          for _, g in sorted(cells.items())], columns=[*COSTS, "variant"])
    return pd.concat([ids, cell_stats(cells, METRICS), costs], axis=1)


def write_cells_csv(cells: dict, expected: dict, path: Path) -> Path:
    return write_frame(path, cells_frame(cells, expected))


def expected_seeds(runs: list[Run], n_seeds: int | None = None) -> dict[str, tuple]:
    """Seeds asked per dataset: 0..N-1 if given, else every seed seen there."""
    out: dict = defaultdict(set)
    for r in runs:
        out[r.dataset].add(r.seed)
    if n_seeds:
        return {ds: tuple(range(n_seeds)) for ds in out}
    return {ds: tuple(sorted(s)) for ds, s in out.items()}
