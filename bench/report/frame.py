"""Run records -> a tidy pandas DataFrame, one row per finished run.

Columns: dataset, backbone, method, config_hash, seed, heads, the config's
settings (`backbone_weights`, `train_<field>`, `param_<method param>`), the
test and validation metrics (`test_acc`, `val_ece`, ... as fractions), the
cost (`n_params`, `train_seconds`, `train_images_per_s`,
`infer_ms_per_image`) and `path`. A record whose files cannot be read is not
a row: it is returned as a failure ("damaged: ...") so that a report lists it
instead of aborting.
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from bench.core import store
from bench.core.outcomes import Failure

METRICS = ("acc", "ece", "nll", "brier", "auc", "gap")
COSTS = ("n_params", "train_seconds", "train_images_per_s", "infer_ms_per_image")
KEYS = ("dataset", "backbone", "method", "config_hash", "seed")
# the columns every frame has, an empty one too (so `df.groupby(...)["test_ece"]` works)
COLUMNS = [*KEYS, "heads", *(f"{split}_{m}" for split in ("test", "val") for m in METRICS),
           *COSTS, "path"]
# What a damaged file raises when read: a truncated zip, a missing file, bad
# JSON, an array whose bytes are cut short.
READ_ERRORS = (zipfile.BadZipFile, OSError, ValueError, KeyError, EOFError,
               json.JSONDecodeError)


def damaged(path: Path) -> str | None:
    """Why the record at `path` cannot be used, or None when it is intact:
    store.verify checks the files against the checksums the record wrote last
    (older records without checksums are checked by reading every array)."""
    return store.verify(path)


def settings(cfg: dict) -> dict:
    """The config's scalar settings as columns (training fields, method params)."""
    out = {"backbone_weights": cfg.get("backbone_weights")}
    out.update({f"train_{k}": v for k, v in (cfg.get("train") or {}).items()})
    out.update({f"param_{k}": v for k, v in (cfg.get("method_params") or {}).items()
                if np.isscalar(v)})
    # an edited plugin makes a new config: its digest tells the two apart
    out.update({f"{role}_sha256": c.get("sha256", "")[:12]
                for role, c in (cfg.get("plugin_code") or {}).items()})
    return {k: v for k, v in out.items() if v is not None}


def record_row(root: Path, path: Path) -> dict:
    """One record -> one frame row (config.json is optional: older records)."""
    m = store.read_json(path / "metrics.json")
    try:
        cfg = store.read_json(path / "config.json")
    except READ_ERRORS:
        cfg = {}
    key = store.RecordKey.parse(path, root)
    row = {"dataset": cfg.get("dataset", key.dataset),
           "backbone": cfg.get("backbone", key.backbone), "method": cfg.get("method", key.method),
           "config_hash": key.config_hash, "seed": int(cfg.get("seed", key.seed)),
           "heads": int(cfg.get("heads", 1))}
    for split in ("test", "val"):
        row.update({f"{split}_{k}": float(m[split][k]) for k in METRICS
                    if k in (m.get(split) or {})})
    row.update({k: float(m[k]) for k in COSTS if m.get(k) is not None})
    row.update(settings(cfg))
    row["path"] = path
    return row


def damaged_failure(root: Path, path: Path, reason: str) -> dict:
    """A failed_runs.csv row for a record that cannot be read."""
    key = store.RecordKey.parse(path, root)
    return Failure("damaged", key.dataset, key.backbone, key.method, key.config_hash, key.seed,
                   f"damaged: {reason}", str(path)).to_row()


def load_records(results, paths=None) -> tuple[pd.DataFrame, list[dict]]:
    """(frame of the readable records, failures of the damaged ones) under
    `results`, or of the given record `paths` only."""
    root = Path(results)
    rows, failures = [], []
    for p in ([k.path(root) for k in store.iter_records(root)] if paths is None
              else map(Path, paths)):
        why = damaged(p)
        if why is None:
            rows.append(record_row(root, p))
        else:
            failures.append(damaged_failure(root, p, why))
    frame = pd.DataFrame(rows, columns=None if rows else COLUMNS)
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
