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

from pathlib import Path

from bench.core import store
from bench.core.outcomes import Failure
from bench.core.record import has_metrics, read_side

LEFT_BEHIND = ("lock", "progress.json")  # side files a killed run leaves


def _row(kind: str, key: store.RecordKey, record: Path, reason: str, last_step="") -> dict:
    return Failure(kind, key.dataset, key.backbone, key.method, key.config_hash, str(key.seed),
                   reason, str(record), last_step).to_row()


def _interrupted(root: Path, live) -> dict[Path, dict]:
    rows = {}
    for key in store.iter_side_records(root, LEFT_BEHIND):
        record = key.path(root)
        if (store.is_complete(record) or store.side_file(record, "failed.json").exists()
                or (live is not None and live(record))):
            continue
        step = read_side(record, "progress.json") or {}
        at = f" at step {step['step']} of {step.get('total', '?')}" if "step" in step else ""
        rows[record] = _row("interrupted", key, record,
                            f"interrupted{at}: its lock or progress file was left behind and "
                            "no failure was recorded; `bench run` retrains it",
                            step.get("step", ""))
    return rows


def unfinished_runs(results, live=None) -> list[dict]:
    """Rows for seed folders without metrics.json and for interrupted runs."""
    root = Path(results)
    if not root.is_dir():
        return []
    rows = _interrupted(root, live)
    for key in store.iter_seed_dirs(root):
        record = key.path(root)
        if record not in rows and not has_metrics(record):
            rows[record] = _row("incomplete", key, record, "incomplete: seed folder without "
                                "metrics.json; `bench run` retrains it")
    return [rows[k] for k in sorted(rows)]
