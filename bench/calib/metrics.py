"""Pure metric functions: numpy arrays in, floats out.

`probs` is [N, K] (rows sum to 1), `labels` is [N] ints. Tables print x100.
"""
from __future__ import annotations

import functools

import numpy as np


def softmax(logits: np.ndarray, axis: int = -1) -> np.ndarray:
    z = logits - logits.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def head_probs(logits: np.ndarray) -> np.ndarray:
    """[N, M, K] per-head logits -> [N, K] mean of per-head softmaxes (paper eq. 1)."""
    return softmax(np.asarray(logits, dtype=np.float32), axis=-1).mean(axis=1)


def accuracy(probs: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(probs, axis=1) == labels))


def ece_bins(probs: np.ndarray, labels: np.ndarray, n_bins: int = 15):
    """Per-bin (accuracy, mean confidence, share of samples) as torchmetrics bins.

    Bins are [k/n, (k+1)/n) with float32 boundaries from torch.linspace and
    float32 confidences, as torchmetrics computes them; a confidence of exactly 1.0 lands in an extra bin of its
    own (index n_bins), which is what torchmetrics' bucketize(right=True) does.
    """
    # torchmetrics bins float32 confidences whatever the input dtype (its
    # `confidences.float()`): float64 probabilities (temperature-scaled rows)
    # on a bin edge must land where they land there.
    conf = np.asarray(probs).max(axis=1).astype(np.float32)
    correct = (probs.argmax(axis=1) == labels).astype(conf.dtype)
    edges = _linspace01(n_bins)
    idx = np.searchsorted(edges, conf, side="right") - 1
    count = np.bincount(idx, minlength=n_bins + 1).astype(np.float64)
    conf_sum = np.bincount(idx, weights=conf, minlength=n_bins + 1)
    acc_sum = np.bincount(idx, weights=correct, minlength=n_bins + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc_bin = np.nan_to_num(acc_sum / count)
        conf_bin = np.nan_to_num(conf_sum / count)
    return acc_bin, conf_bin, count / count.sum()


@functools.lru_cache(maxsize=None)
def _linspace01(n_bins: int) -> np.ndarray:
    # Use torch.linspace itself: its boundaries differ from numpy's by an ulp
    # in places, and a confidence sitting on a boundary must land in the same
    # bin as in torchmetrics, which produced the paper's numbers. float32, as
    # the confidences it bins (ece_bins casts them as torchmetrics does).
    # Cached (read-only): classwise ECE asks for the edges once per class.
    # torch on demand: `bench list` and `import bench.api` load bench.calib, not torch
    import torch

    edges = torch.linspace(0, 1, n_bins + 1, dtype=torch.float32).numpy()
    edges.flags.writeable = False
    return edges


def ece(probs: np.ndarray, labels: np.ndarray, n_bins: int = 15) -> float:
    """Expected calibration error (l1), as MulticlassCalibrationError(n_bins=15)."""
    acc_bin, conf_bin, share = ece_bins(probs, labels, n_bins)
    return float(np.sum(np.abs(acc_bin - conf_bin) * share))


def calibration_gap(probs: np.ndarray, labels: np.ndarray) -> float:
    """Signed gap: mean confidence - accuracy (>0 over-confident, <0 under)."""
    return float(probs.max(axis=1).mean() - accuracy(probs, labels))


# One NLL for every row and variant: p_y clipped to [eps, 1 - eps] with
# float32's eps, as scikit-learn's log_loss (eps="auto": the dtype's) clipped
# the float32 probabilities the released code passed it. A float64 variant
# (temperature scaling) is clipped the same, so a model's NLL does not
# depend on the float type of the path that computed it (docs/fidelity.md).
NLL_EPS = float(np.finfo(np.float32).eps)


def nll(probs: np.ndarray, labels: np.ndarray) -> float:
    """Mean -log p_y, p_y clipped to [NLL_EPS, 1 - NLL_EPS], in float64."""
    probs = np.asarray(probs)
    p_y = np.clip(probs[np.arange(len(labels)), labels].astype(np.float64), NLL_EPS, 1 - NLL_EPS)
    return float(-np.mean(np.log(p_y)))


def brier(probs: np.ndarray, labels: np.ndarray) -> float:
    """Multiclass Brier score: mean over samples of sum_k (p_k - 1[y=k])^2."""
    p = np.asarray(probs, dtype=np.float64)
    onehot = np.eye(p.shape[1])[labels]
    return float(np.mean(np.sum((p - onehot) ** 2, axis=1)))


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
