"""Run records with evaluation sets (shift, ood), written with
bench.core.store and bench.core.evalfiles, for the `--shift` / `--ood`
report tests (no training, no images).

Dataset `toy`, backbone resnet50, K = 3 classes; sl1h (one head) and 2hml
(two heads), seeds 0 and 1. The in-distribution validation logits are
over-confident (sharp logits, ~70% right: T ~ 6 fits them); the shifted
logits are softer (a temperature fitted on them is ~2 at severity 2), so a
calibrator fitted on the shifted data gives other numbers than one fitted
in-distribution (the point of the test).
"""
from __future__ import annotations

import zlib

import numpy as np

from bench.core import evalfiles, store

K, N_VAL, N_TEST, N_OOD = 3, 90, 40, 30
HEADS = {"sl1h": 1, "2hml": 2}
SEEDS = (0, 1)
CORRUPTIONS = ("blur", "noise")
SEVERITIES = (0, 1, 2)


def _rng(*parts) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32("/".join(map(str, parts)).encode()))


def logits(rng, n: int, heads: int, labels, scale: float, right: float) -> np.ndarray:
    """[n, heads, K]: right with probability ~`right`, sharpness `scale`."""
    z = rng.normal(0, 1, (n, heads, K))
    hit = rng.random(n) < right
    target = np.where(hit, labels, (labels + 1) % K)
    z[np.arange(n), :, target] += 2.0
    return (scale * z).astype(np.float32)


def shift_arrays(method: str, seed: int) -> dict:
    """logits [C, S, N, M, K]: severity 0 the clean test logits of every
    corruption, worse and softer with severity."""
    heads, labels = HEADS[method], np.arange(N_TEST) % K
    out = np.empty((len(CORRUPTIONS), len(SEVERITIES), N_TEST, heads, K), np.float32)
    clean = logits(_rng(method, seed, "test"), N_TEST, heads, labels, 2.5, 0.75)
    for i, c in enumerate(CORRUPTIONS):
        for j, s in enumerate(SEVERITIES):
            out[i, j] = clean if s == 0 else logits(_rng(method, seed, c, s), N_TEST, heads,
                                                    labels, 0.6 / s, 0.75 - 0.15 * s)
    return {"logits": out, "labels": labels.astype(np.int64),
            "corruptions": np.array(CORRUPTIONS), "severities": np.array(SEVERITIES)}


def blocks(arrays: dict) -> dict:
    """The same set in the per-block layout bench.train.evaluate writes:
    logits [B, N, M, K], block 0 the clean images, then each corruption at
    severities 1.. (names in `corruption`, levels in `severity`)."""
    z = arrays["logits"]
    order = [(0, 0)] + [(i, j) for i in range(len(CORRUPTIONS))
                        for j in range(1, len(SEVERITIES))]
    return {"logits": np.stack([z[i, j] for i, j in order]), "labels": arrays["labels"],
            "corruption": np.array(["clean" if j == 0 else CORRUPTIONS[i] for i, j in order]),
            "severity": np.array([SEVERITIES[j] for _, j in order], np.int64)}


def write(root, shift: bool = True, ood: bool = True, dataset: str = "toy"):
    """Every record (and its sets, the shift set stored as the evaluation
    stores it: blocks); returns root."""
    for method, heads in HEADS.items():
        for seed in SEEDS:
            rng = _rng(method, seed, "val")
            val_y = np.arange(N_VAL) % K
            preds = {"val_logits": logits(rng, N_VAL, heads, val_y, 4.0, 0.7),
                     "val_labels": val_y.astype(np.int64),
                     "test_logits": shift_arrays(method, seed)["logits"][0, 0],
                     "test_labels": (np.arange(N_TEST) % K).astype(np.int64)}
            test = {"acc": 0.7, "ece": 0.1, "nll": 0.8, "brier": 0.4, "auc": 0.8, "gap": 0.1}
            config = {"dataset": dataset, "backbone": "resnet50", "method": method,
                      "seed": seed, "heads": heads}
            path = store.record_dir(root, dataset, "resnet50", method, "abc123", seed)
            store.write_record(path, config, {"test": test, "val": dict(test)}, preds)
            if shift:
                arrays = shift_arrays(method, seed)
                evalfiles.write(path, "shift", blocks(arrays), {"kind": "shift"})
            if ood:
                z = logits(_rng(method, seed, "ood"), N_OOD, heads, np.zeros(N_OOD, int), 1.0,
                           0.4)
                evalfiles.write(path, "ood-kvasir", {"logits": z}, {"kind": "ood"})
    return root


def record(root, method: str, seed: int, dataset: str = "toy"):
    return store.record_dir(root, dataset, "resnet50", method, "abc123", seed)
