"""Run records -> the runs a report shows -> its cells, and the CSVs.

One Run per finished record (bench.report.numbers.cells.Run: the record and the
row's method key), one cell per (dataset, backbone, row) computed by
bench.report.numbers.cells (every number is measure(variant(records))): each
method's seeds as trained (plain), the deep ensemble of the sl1h seeds
(dens), the temperature-scaled rows (ts, and ts-base, the TS table's
un-scaled row) and any post-hoc calibrator asked for (`--variants`).
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from bench.calib import measures as M
from bench.core import files, outcomes, store
from bench.calib import variants as V
from bench.core.errors import BenchError
from bench.core.outcomes import Failure
from bench.core.paper import DENS, ENSEMBLE_OF
from bench.core.record import COSTS, failure_reports
from bench.report.numbers import frame
from bench.report.render import kinds
from bench.report.numbers.cells import Cache, CellData, Run, make_cell, run_rows

MIN_MEMBERS = 2  # one seed is no ensemble


def has_ensemble(method: str, n_seeds: int) -> bool:
    """Whether a cell of seeds gets a D-Ens row (summary, tables, figures)."""
    return method == ENSEMBLE_OF and n_seeds >= MIN_MEMBERS


# ---------------------------------------------------------------- reading


def load_runs(results, datasets=None, backbones=None, methods=None,
              damaged: list | None = None) -> list[Run]:
    """The finished, readable runs matching the filters, in path order;
    damaged records are appended to `damaged` (failure rows) when given."""
    root = Path(results)
    out = []
    for rec in (frame.records_of(root)):
        if ((datasets and rec.dataset not in datasets) or (backbones and rec.backbone not in backbones)
                or (methods and rec.method not in methods)):
            continue
        why = rec.damaged
        if why is None:
            out.append(Run(rec, rec.method))
        elif damaged is not None:
            damaged.append(frame.damaged_failure(root, rec.path, why))
    return out


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
    return [_failure_row(root, f, obj, kind) for f, obj, kind in failure_reports(root)]


def _failure_row(root: Path, f: Path, obj: dict, kind: str) -> dict:
    found = store.key_fields(root, f)  # the file's own fields first, then its path's
    names = [obj.get(k, "") or found[k] for k in ("dataset", "backbone", "method")]
    return Failure(kind, *names,
                   obj.get("config_hash") or found["config_hash"],
                   obj["seed"] if obj.get("seed", "") != "" else found["seed"], _reason(obj),
                   str(f), obj.get("last_step", obj.get("step", ""))).to_row()


# ---------------------------------------------------------------- cells


def ensemble_cell(runs: list[Run], cache: Cache | None = None) -> CellData:
    """The paper's D-Ens: one number from the sl1h seeds' mean probabilities;
    its cost is that of all members together."""
    if len(runs) < MIN_MEMBERS:
        raise BenchError(f"a deep ensemble needs at least {MIN_MEMBERS} {ENSEMBLE_OF} seeds, "
                         f"got {len(runs)}")
    return make_cell(runs, V.DENS, cache or Cache())


def fitted_runs(runs: list[Run]) -> list[Run]:
    """The runs a calibrator (+TS, --variants) can be fitted on: those whose
    record holds a validation split."""
    return [r for r in runs if r.record.has_validation]


def without_validation(runs: list[Run]) -> dict:
    """dataset -> the labels of its records without validation arrays (an
    earlier record format): their calibrated rows are left out."""
    out: dict = defaultdict(list)
    for r in runs:
        if not r.record.has_validation:
            out[r.dataset].append(r.record.key.label)
    return dict(out)


def thin_validation(runs: list[Run], variants) -> dict:
    """dataset -> one line per record whose validation split is too small for
    a calibrator of `variants` to be fitted on it: fewer samples than the
    numbers the calibrator estimates, or a class without any sample (which
    it then never sees)."""
    out: dict = defaultdict(list)
    for r in runs:
        if not r.record.has_validation:
            continue  # left out of the calibrated rows altogether (without_validation)
        labels, k = r.record.validation
        absent = k - len(np.unique(labels))
        few = [v for v in variants if v.params and (absent or len(labels) < v.params(k))]
        if few:
            why = f"{len(labels)} validation samples" + (
                f", {absent} of {k} classes absent" if absent else "")
            names = ", ".join(f"{v.label or v.name} ({v.params(k)} parameters)" for v in few)
            out[r.dataset].append(f"{r.record.key.label}: {why}, for {names}")
    return dict(out)


def build_cells(runs: list[Run], with_ts: bool = True, progress=None, cache: Cache | None = None,
                variants=()) -> tuple[dict, list[str]]:
    """Every report cell keyed (dataset, backbone, row key), plus notes."""
    cache = cache or Cache()
    cells, notes = {}, []
    by_method: dict = defaultdict(list)
    for r in runs:
        by_method[(r.dataset, r.backbone, r.method)].append(r)
    for (ds, bb, method), rs in by_method.items():
        for variant in kinds.computed_variants(with_ts, variants):
            use = fitted_runs(rs) if variant.posthoc else rs
            if use:  # a calibrator is fitted on the validation split: records without one sit out
                cell = make_cell(use, variant, cache)
                cells[(ds, bb, cell.key)] = cell
        if has_ensemble(method, len(rs)):
            cells[(ds, bb, DENS)] = ensemble_cell(rs, cache)
        elif method == ENSEMBLE_OF:
            notes.append(f"{ds}/{bb}: D-Ens needs >= {MIN_MEMBERS} {ENSEMBLE_OF} seeds, "
                         f"found {len(rs)}")
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


RUN_KEYS = ["dataset", "backbone", "method", "config_hash", "seed", "heads"]


def runs_frame(runs: list[Run], cache: Cache | None = None) -> pd.DataFrame:
    """runs.csv: one row per run: the stored measures, the costs, the path,
    then the other measures and the bootstrap bounds (with the resample count
    and seed that made them), all of its plain predictions (bench.report.numbers.cells)."""
    rows = run_rows(runs, cache or Cache())
    stored, more = M.stored(), [m for m in M.names() if m not in M.stored()]
    boot = [f"{m}_boot_{s}" for m in M.bootstrapped() for s in ("lo", "hi")]
    return pd.DataFrame(
        [{"dataset": r.dataset, "backbone": r.backbone, "method": r.method,
          "config_hash": r.chash, "seed": r.seed, "heads": r.heads,
          **{m: row.get(m) for m in stored}, **{c: r.cost.get(c) for c in COSTS},
          "path": str(r.path), **{k: row[k] for k in (*more, *boot, "boot_resamples", "boot_seed")}}
         for r, row in zip(runs, rows)],
        columns=[*RUN_KEYS, *stored, *COSTS, "path", *more, *boot, "boot_resamples", "boot_seed"])


def write_runs_csv(runs: list[Run], path: Path, cache: Cache | None = None) -> Path:
    return write_frame(path, runs_frame(runs, cache))


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
    """groups.csv: per cell its ids, n/N, every stored measure's mean and
    population std (fractions, not x100), the costs, `variant` (what the row
    is made of: seeds, dens, ts, ts-base, a calibrator), the other measures'
    mean and std, then every measure's 95% interval (cells.cell_ci)."""
    rows = [{"dataset": ds, "backbone": bb, "row": key, "method": g.method,
             "config_hash": g.chash, "n": g.n, "N": len(expected.get(ds, ())),
             "seeds": " ".join(map(str, g.seeds))} for (ds, bb, key), g in sorted(cells.items())]
    ids = pd.DataFrame(rows, columns=["dataset", "backbone", "row", "method", "config_hash",
                                      "n", "N", "seeds"])
    costs = pd.DataFrame([{**{c: g.cost.get(c) for c in COSTS}, "variant": str(g.variant)}
                          for _, g in sorted(cells.items())], columns=[*COSTS, "variant"])
    more = [m for m in M.names() if m not in M.stored()]
    ci_cols = [f"{m}_ci_{s}" for m in M.names() for s in ("lo", "hi")]
    ci = []
    for _, g in sorted(cells.items()):
        row = {}
        for m in M.names():
            interval = g.extra.get("ci", {}).get(m)
            row[f"{m}_ci_lo"], row[f"{m}_ci_hi"] = interval if interval else (None, None)
        ci.append(row)
    return pd.concat([ids, cell_stats(cells, M.stored()), costs, cell_stats(cells, more),
                      pd.DataFrame(ci, columns=ci_cols)], axis=1)


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
