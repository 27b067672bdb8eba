"""Run records -> a tidy pandas DataFrame, one row per finished run.

Columns: dataset, backbone, method, config_hash, seed, heads, the test
measures metrics.json holds under runs.csv's names (`acc`, `ece`, `nll`,
`brier`, `auc`, `gap`, fractions), the validation ones (`val_acc`,
`val_ece`, ...), the cost (`n_params`, `train_seconds`,
`train_images_per_s`, `infer_ms_per_image`), the config's settings
(`backbone_weights`, `train_<field>`, `param_<method param>`) and `path`. A record whose files cannot be read is not
a row: it is returned as a failure ("damaged: ...") so that a report lists it
instead of aborting.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bench.calib import measures as M
from bench.core.outcomes import Failure
from bench.core.record import COSTS, Record, records

KEYS = ("dataset", "backbone", "method", "config_hash", "seed")


def columns() -> list[str]:
    """The columns every frame has, an empty one too (so
    `df.groupby(...)["ece"]` works)."""
    return [*KEYS, "heads", *M.stored(), *(val_column(m) for m in M.stored()), *COSTS, "path"]


def val_column(measure: str) -> str:
    """A validation measure's column; the test measures keep their own names,
    as in runs.csv."""
    return f"val_{measure}"


def damaged(path: Path) -> str | None:
    """Why the record at `path` cannot be used, or None when it is intact:
    its files are checked against the checksums the record wrote last
    (older records without checksums are checked by reading every array)."""
    return Record(path).damaged


def settings(cfg: dict) -> dict:
    """The config's scalar settings as columns (training fields, method params;
    a key that stays out of the hash at its legacy value shows that value
    where config.json lacks it, bench.methods.base.legacy_filled)."""
    # the method registry on demand: `import bench.api` loads this module
    from bench.methods import legacy_filled

    out = {"backbone_weights": cfg.get("backbone_weights")}
    out.update({f"train_{k}": v for k, v in (cfg.get("train") or {}).items()})
    params = legacy_filled(cfg.get("method", ""), cfg.get("method_params") or {})
    out.update({f"param_{k}": v for k, v in params.items() if np.isscalar(v)})
    # an edited plugin makes a new config: its digest tells the two apart
    out.update({f"{role}_sha256": c.get("sha256", "")[:12]
                for role, c in (cfg.get("plugin_code") or {}).items()})
    return {k: v for k, v in out.items() if v is not None}


def record_row(rec: Record) -> dict:
    """One record -> one frame row (config.json is optional: older records)."""
    row = {"dataset": rec.dataset, "backbone": rec.backbone, "method": rec.method,
           "config_hash": rec.config_hash, "seed": rec.seed, "heads": rec.heads}
    row.update({k: v for k, v in rec.stored("test").items() if k in M.stored()})
    row.update({val_column(k): v for k, v in rec.stored("val").items() if k in M.stored()})
    row.update(rec.cost)
    row.update(settings(rec.config))
    row["path"] = rec.path
    return row


def damaged_failure(root: Path, path: Path, reason: str) -> dict:
    """A failed_runs.csv row for a record that cannot be read."""
    key = Record(path, root).key
    return Failure("damaged", key.dataset, key.backbone, key.method, key.config_hash, key.seed,
                   f"damaged: {reason}", str(path)).to_row()


def records_of(root, paths=None) -> list[Record]:
    return records(root, paths)


def load_records(results, paths=None) -> tuple[pd.DataFrame, list[dict]]:
    """(frame of the readable records, failures of the damaged ones) under
    `results`, or of the given record `paths` only."""
    root = Path(results)
    rows, failures = [], []
    for rec in records(root, paths):
        why = rec.damaged
        if why is None:
            rows.append(record_row(rec))
        else:
            failures.append(damaged_failure(root, rec.path, why))
    frame = pd.DataFrame(rows, columns=None if rows else columns())
    return frame, failures


def load(results_dir) -> pd.DataFrame:
    """Every readable run record under `results_dir`, one row each (the
    public API: bench.results.load). A folder without records gives an empty
    frame with the usual columns; a path that is missing or not a folder raises
    FileNotFoundError / NotADirectoryError naming it."""
    root = Path(results_dir)
    if not root.exists():
        raise FileNotFoundError(f"bench.results.load: {str(root)!r} does not exist; give the "
                                "folder `bench run --results` wrote its records to")
    if not root.is_dir():
        raise NotADirectoryError(f"bench.results.load: {str(root)!r} is a file; give the "
                                 "folder `bench run --results` wrote its records to")
    return load_records(root)[0]
