"""Runs that stopped without saying so, as failed_runs.csv rows: a seed folder
without metrics.json, and a run interrupted so hard (SIGKILL, power loss) that
it left its lock or progress file in <config-hash>/_sweep/ but no failure file.

The sweep's own failures (`*.failed.json`) and records not marked done are
found by aggregate.find_failures; this adds the runs that wrote nothing about
their end. Whether a lock's holder still trains is the sweep's knowledge, so
the caller passes it in (`live(record) -> str | None`); without it every lock
counts as left behind.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from bench.core import store

SIDE = re.compile(r"(seed\d+)\.(lock|progress\.json)")


def _row(root: Path, record: Path, reason: str, last_step="") -> dict:
    dataset, backbone, method, chash = record.relative_to(root).parts[:4]
    return {"dataset": dataset, "backbone": backbone, "method": method, "config_hash": chash,
            "seed": record.name.removeprefix("seed"), "reason": reason,
            "last_step": last_step, "path": str(record)}


def _progress(sweep: Path, seed: str) -> dict:
    try:
        obj = json.loads((sweep / f"{seed}.progress.json").read_text())
        return obj if isinstance(obj, dict) else {}
    except (OSError, ValueError):
        return {}


def _interrupted(root: Path, live) -> dict[Path, dict]:
    rows = {}
    for side in sorted(root.glob("*/*/*/*/_sweep/seed*")):
        match = SIDE.fullmatch(side.name)
        if not match:
            continue
        record = side.parent.parent / match.group(1)
        if (record in rows or store.is_complete(record)
                or side.with_name(f"{match.group(1)}.failed.json").exists()
                or (live is not None and live(record))):
            continue
        step = _progress(side.parent, match.group(1))
        at = f" at step {step['step']} of {step.get('total', '?')}" if "step" in step else ""
        rows[record] = _row(root, record, f"interrupted{at}: its lock or progress file was "
                            "left behind and no failure was recorded; `bench run` retrains it",
                            step.get("step", ""))
    return rows


def unfinished_runs(results, live=None) -> list[dict]:
    """Rows for seed folders without metrics.json and for interrupted runs."""
    root = Path(results)
    if not root.is_dir():
        return []
    rows = _interrupted(root, live)
    for record in store.iter_seed_dirs(root):
        if record not in rows and not (record / "metrics.json").exists():
            rows[record] = _row(root, record, "incomplete: seed folder without metrics.json; "
                                "`bench run` retrains it")
    return [rows[k] for k in sorted(rows)]
