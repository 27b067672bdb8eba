"""Derived rows computed from run records, no retraining:
temperature scaling of any run and the deep ensemble of sl1h seeds."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.core.calibration import ensemble_probs, fit_temperature, scaled_probs
from bench.core.errors import BenchError
from bench.core.metrics import all_metrics
from bench.core.paper import ENSEMBLE_OF
from bench.core.store import load_predictions


def temperature_scaled(path: Path) -> dict:
    """One run record -> {"temperature", "val", "test"} metrics after TS."""
    return temperature_scaled_predictions(load_predictions(path))


def temperature_scaled_predictions(p: dict) -> dict:
    """Loaded predictions (store.load_predictions) -> as temperature_scaled."""
    t = fit_temperature(p["val_logits"], p["val_labels"])
    return {
        "temperature": t,
        "val": all_metrics(scaled_probs(p["val_logits"], t), p["val_labels"]),
        "test": all_metrics(scaled_probs(p["test_logits"], t), p["test_labels"]),
    }


def deep_ensemble(paths: list[Path]) -> dict:
    """Records of one configuration over seeds -> {"members", "val", "test"}."""
    preds = [load_predictions(p) for p in paths]
    if not preds:
        raise BenchError(f"deep ensemble needs at least one {ENSEMBLE_OF} run record")
    out = {"members": len(preds)}
    for split in ("val", "test"):
        labels = preds[0][f"{split}_labels"]
        if any(not np.array_equal(labels, q[f"{split}_labels"]) for q in preds):
            raise BenchError(f"ensemble members disagree on the {split} labels: {paths}")
        out[split] = all_metrics(ensemble_probs([q[f"{split}_logits"] for q in preds]), labels)
    return out


# The paper's D-Ens is built from the seeds of bench.core.paper.ENSEMBLE_OF.
MIN_MEMBERS = 2  # one seed is no ensemble


def has_ensemble(method: str, n_seeds: int) -> bool:
    """Whether a cell of seeds gets a D-Ens row (summary, tables, figures)."""
    return method == ENSEMBLE_OF and n_seeds >= MIN_MEMBERS
