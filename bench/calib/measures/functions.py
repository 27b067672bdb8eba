"""Every built-in measure of probabilities, as a pure function.

`probs` is [N, K] (rows sum to 1), `labels` is [N] ints; values are
fractions (tables print x100). The paper's three: accuracy, ECE (15
equal-width bins, torchmetrics' binning) and NLL; beside them Brier, the
signed calibration gap and the estimators reviewers ask for: ECE at other
bin counts, adaptive (equal-mass) ECE, classwise ECE (Kull et al. 2019), the
debiased top-label L2 calibration error (Kumar, Liang and Ma 2019, through
their `uncertainty-calibration` package), the smooth ECE (Blasiok and
Nakkiran 2024, through their `relplot` package) and AURC. The checkpoint
score (macro AUC) is bench.calib.metrics.auc_ovr_macro, beside the
probabilities training computes. The registry that names them all is
bench.calib.measures.
"""
from __future__ import annotations

import functools

import numpy as np

BIN_COUNTS = (5, 10, 15, 20, 30)  # equal-width ECE at these bin counts (15 is the paper's)
ADAPTIVE_BINS = 15


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


def _top(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(probs)
    return p.max(axis=1).astype(np.float64), (p.argmax(axis=1) == labels).astype(np.float64)


def adaptive_ece(probs: np.ndarray, labels: np.ndarray, n_bins: int = ADAPTIVE_BINS) -> float:
    """ECE over equal-mass bins: the samples sorted by top-label confidence
    (stable order for ties) and cut into `n_bins` runs whose sizes differ by at
    most one; sum_b (n_b / N) |acc_b - conf_b|."""
    conf, correct = _top(probs, labels)
    order = np.argsort(conf, kind="mergesort")
    total = 0.0
    for part in np.array_split(order, min(n_bins, len(order))):
        total += len(part) * abs(correct[part].mean() - conf[part].mean())
    return float(total / len(order))


def _binary_ece(p: np.ndarray, y: np.ndarray, n_bins: int) -> float:
    """Equal-width ECE of scores p for the binary outcome y, binned as
    torchmetrics' BinaryCalibrationError (float32 scores, [k/n, (k+1)/n))."""
    conf = np.asarray(p, dtype=np.float32)
    idx = np.searchsorted(_linspace01(n_bins), conf, side="right") - 1
    gap = np.bincount(idx, weights=conf.astype(np.float64) - y, minlength=n_bins + 1)
    return float(np.sum(np.abs(gap)) / len(conf))


def classwise_ece(probs: np.ndarray, labels: np.ndarray, n_bins: int = 15) -> float:
    """Kull et al. (2019): mean over classes k of the equal-width ECE of
    p_k against 1[y = k] over all samples."""
    p = np.asarray(probs)
    return float(np.mean([_binary_ece(p[:, k], (labels == k).astype(np.float64), n_bins)
                          for k in range(p.shape[1])]))


def debiased_l2(probs: np.ndarray, labels: np.ndarray) -> float:
    """Kumar, Liang and Ma (2019): debiased top-label L2 calibration error,
    `calibration.get_top_calibration_error(p=2, debias=True)` (15 equal-mass
    bins; per bin the squared gap less its sampling variance acc(1-acc)/(n-1),
    floored at 0 before the square root)."""
    # optional package (pip: uncertainty-calibration): the import is the check
    import calibration

    p = np.asarray(probs, dtype=np.float64)
    p = p / p.sum(axis=1, keepdims=True)  # float32 rows may sum to 1 +- 1e-7
    return float(calibration.get_top_calibration_error(p, np.asarray(labels, np.int64),
                                                       p=2, debias=True))


def smooth_ece(probs: np.ndarray, labels: np.ndarray) -> float:
    """Blasiok and Nakkiran (2024): relplot.smECE of the top-label
    confidence against correctness (kernel-smoothed, bandwidth chosen by the
    package's fixed-point rule)."""
    # optional package (pip: relplot): the import is the check
    import relplot

    conf, correct = _top(probs, labels)
    return float(relplot.smECE(np.clip(conf, 0.0, 1.0), correct))


def aurc(probs: np.ndarray, labels: np.ndarray) -> float:
    """Area under the risk-coverage curve (Geifman and El-Yaniv 2017): the
    samples sorted by confidence, most confident first (ties in order of
    appearance); the mean over i = 1..N of the error rate of the first i."""
    conf, correct = _top(probs, labels)
    order = np.argsort(-conf, kind="mergesort")
    errors = np.cumsum(1.0 - correct[order])
    return float(np.mean(errors / np.arange(1, len(order) + 1)))


def ece_at(n_bins: int):
    """The paper's ECE estimator with `n_bins` equal-width bins."""
    def measure(probs, labels):
        return ece(probs, labels, n_bins)
    return measure
