"""What training computes from a model's logits every epoch: its
probabilities (softmax; a multi-head model's mean of head softmaxes) and the
checkpoint score (macro one-vs-rest ROC AUC, bench.train.protocol).

Every measure a report shows (this AUC among them) is named by the Measure
registry, bench.calib.measures; the other measure functions live in
bench.calib.measures.functions.
"""
from __future__ import annotations

import numpy as np


def softmax(logits: np.ndarray, axis: int = -1) -> np.ndarray:
    z = logits - logits.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def head_probs(logits: np.ndarray) -> np.ndarray:
    """[N, M, K] per-head logits -> [N, K] mean of per-head softmaxes (paper eq. 1)."""
    return softmax(np.asarray(logits, dtype=np.float32), axis=-1).mean(axis=1)


def _binary_auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Mann-Whitney U statistic with mid-ranks for ties."""
    n_pos = int(positive.sum())
    n_neg = len(positive) - n_pos
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores), dtype=np.float64)
    sorted_scores = scores[order]
    # mid-rank of each tie group
    _, start, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    mid = start + (counts + 1) / 2.0
    ranks[order] = np.repeat(mid, counts)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def auc_ovr_macro(probs: np.ndarray, labels: np.ndarray) -> float:
    """Macro one-vs-rest ROC AUC over the classes present in `labels`.

    The paper selects checkpoints with it; a class absent from the labels has
    no defined AUC and is skipped (scikit-learn would raise instead).
    """
    p = np.asarray(probs, dtype=np.float64)
    aucs = []
    for k in range(p.shape[1]):
        positive = labels == k
        if 0 < positive.sum() < len(labels):
            aucs.append(_binary_auc(p[:, k], positive))
    return float(np.mean(aucs)) if aucs else float("nan")
