"""Run records with known metric values, written with bench.core.store, for the
report tests (no training). Values are percentages per seed; metrics.json
stores fractions, as the trainer does."""
from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np

from bench.core import store

K = 4  # classes
N_TEST, N_VAL = 40, 40
HEADS = {"sl1h": 1, "ls": 1, "2hml": 2, "4hml": 4}
# (backbone, method) -> {metric: per-seed %}; seeds 0..len-1
KNOWN = {
    ("resnet50", "sl1h"): {"acc": [80, 81, 82], "ece": [6, 5, 4], "nll": [50, 52, 54]},
    ("resnet50", "ls"): {"acc": [78, 78, 78], "ece": [3, 3, 3], "nll": [60, 60, 60]},
    ("resnet50", "2hml"): {"acc": [81, 82, 83], "ece": [4, 4, 4], "nll": [49, 50, 51]},
    ("resnet50", "4hml"): {"acc": [82, 82, 82], "ece": [2, 2, 2], "nll": [48, 48, 48]},
    ("convnext_tiny", "sl1h"): {"acc": [90, 90, 90], "ece": [5, 5, 5], "nll": [30, 30, 30]},
    ("convnext_tiny", "ls"): {"acc": [88, 89], "ece": [1, 2], "nll": [35, 36]},  # seed 2 missing
    ("convnext_tiny", "2hml"): {"acc": [91, 91, 91], "ece": [3, 3, 3], "nll": [28, 28, 28]},
    ("convnext_tiny", "4hml"): {"acc": [89, 89, 89], "ece": [2, 2, 2], "nll": [27, 27, 27]},
}
# The sl1h test predictions are identical: every sample of class 0 gets
# p = 0.8 on class 0, so the deep ensemble has ACC 100, ECE 20, NLL -log 0.8.
DENS = {"acc": 100.0, "ece": 20.0, "nll": -np.log(0.8) * 100}
IMAGES_PER_S = (150.0, 175.0, 230.0)  # per seed: mean 185.0 over 3, 162.5 over 2
COST = {"sl1h": 1_000_000, "ls": 1_000_000, "2hml": 1_000_100, "4hml": 1_000_300}


def _logits(method: str, seed: int, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    heads = HEADS[method]
    labels = np.arange(n) % K  # the split is fixed: same labels for every run
    z = rng.normal(0, 1.0, (n, heads, K))
    z[np.arange(n), :, labels] += rng.normal(1.5, 1.0, (n, heads))  # mostly right
    return z.astype(np.float32), labels.astype(np.int64)


def _sl1h_test() -> tuple[np.ndarray, np.ndarray]:
    p = np.full((N_TEST, 1, K), 0.2 / (K - 1), np.float64)
    p[:, :, 0] = 0.8
    return np.log(p).astype(np.float32), np.zeros(N_TEST, np.int64)


def write_known(root: Path, dataset: str = "toy") -> Path:
    for (backbone, method), values in KNOWN.items():
        for seed in range(len(values["acc"])):
            rng = np.random.default_rng(zlib.crc32(f"{backbone}/{method}/{seed}".encode()))
            val_z, val_y = _logits(method, seed, N_VAL, rng)
            test_z, test_y = _sl1h_test() if method == "sl1h" else _logits(method, seed, N_TEST, rng)
            test = {m: values[m][seed] / 100 for m in ("acc", "ece", "nll")}
            test.update(brier=0.3, auc=0.9, gap=-0.05)
            metrics = {"test": test, "val": dict(test), "n_params": COST[method],
                       "train_seconds": 10.0 + seed, "infer_ms_per_image": 0.5,
                       "train_images_per_s": IMAGES_PER_S[seed]}
            config = {"dataset": dataset, "backbone": backbone, "method": method, "seed": seed,
                      "heads": HEADS[method]}
            path = store.record_dir(root, dataset, backbone, method, "abc123", seed)
            store.write_record(path, config, metrics, {
                "val_logits": val_z, "val_labels": val_y,
                "test_logits": test_z, "test_labels": test_y})
    return root


def write_failures(root: Path, dataset: str = "toy") -> None:
    """A failure record as a sweep may write it, a record whose
    metrics.json says failed, and an unreadable failure file."""
    d = root / dataset / "convnext_tiny" / "ls" / "abc123"
    d.mkdir(parents=True, exist_ok=True)
    (d / "seed2.failed.json").write_text(json.dumps(
        {"status": "failed", "reason": "CUDA out of memory", "last_step": 123}))
    bad = root / dataset / "resnet50" / "mixup" / "def456" / "seed0"
    bad.mkdir(parents=True, exist_ok=True)
    (bad / "metrics.json").write_text(json.dumps({"status": "failed", "error": "loss is NaN"}))
    (root / dataset / "broken.failed.json").write_text("{not json")
    # an old failure of a run that has since finished: not listed
    (root / dataset / "resnet50" / "sl1h" / "abc123" / "seed0.failed.json").write_text(
        json.dumps({"reason": "killed"}))
