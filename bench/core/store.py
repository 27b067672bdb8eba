"""Run records on disk, written atomically.

results/<dataset>/<backbone>/<method>/<config-hash>/seed<k>/
    config.json       resolved config, seed, provenance
    metrics.json      val/test metrics, best cycle, timing, status
    predictions.npz   per-head val/test logits [N, M, K] and labels

A record is assembled in a hidden sibling directory and renamed into place
only when every file is written, so a killed run never looks finished, and
`--force` replaces an old record only once the new one is complete.
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import numpy as np

DONE = "done"


def record_dir(root, dataset: str, backbone: str, method: str, chash: str, seed: int) -> Path:
    return Path(root) / dataset / backbone / method / chash / f"seed{seed}"


def is_complete(path: Path) -> bool:
    try:
        return read_json(path / "metrics.json").get("status") == DONE
    except (OSError, ValueError):
        return False


def read_json(path: Path) -> dict:
    with open(path) as f:
        return json.load(f)


def _write_json(path: Path, obj: dict) -> None:
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True, default=str)
        f.flush()
        os.fsync(f.fileno())


def write_record(path: Path, config: dict, metrics: dict, arrays: dict[str, np.ndarray]) -> Path:
    """Write config/metrics/predictions under a temporary name, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        np.savez(tmp / "predictions.npz", **arrays)
        _write_json(tmp / "config.json", config)
        _write_json(tmp / "metrics.json", {**metrics, "status": DONE})  # last: marks complete
        _replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def _replace_dir(new: Path, target: Path) -> None:
    if not target.exists():
        os.rename(new, target)
        return
    old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
    os.rename(target, old)  # the old record is kept until the new one is in place
    os.rename(new, target)
    shutil.rmtree(old, ignore_errors=True)


def load_predictions(path: Path) -> dict[str, np.ndarray]:
    with np.load(Path(path) / "predictions.npz") as z:
        return {k: z[k] for k in z.files}


def iter_records(root) -> list[Path]:
    """Every complete record under `root` (hidden temporaries are skipped)."""
    root = Path(root)
    if not root.exists():
        return []
    found = [p.parent for p in root.glob("*/*/*/*/seed*/metrics.json")]
    return sorted(p for p in found if not p.name.startswith(".") and is_complete(p))
