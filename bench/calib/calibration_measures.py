"""Calibration measures beyond the paper's ECE, and bootstrap intervals.

Pure functions of `probs` [N, K] and `labels` [N], values as fractions. The
paper's ECE (15 equal-width bins, torchmetrics' binning) is
bench.calib.metrics.ece; this module adds the estimators reviewers ask for:
ECE at other bin counts, adaptive (equal-mass) ECE, classwise ECE (Kull et al.
2019), the debiased top-label L2 calibration error (Kumar, Liang and Ma 2019,
through their `uncertainty-calibration` package), the smooth ECE (Blasiok
and Nakkiran 2024, through their `relplot` package) and AURC.
"""
from __future__ import annotations

import functools

import numpy as np

from bench.calib.metrics import NLL_EPS, _linspace01, ece

BIN_COUNTS = (5, 10, 15, 20, 30)  # equal-width ECE at these bin counts (15 is the paper's)
ADAPTIVE_BINS = 15
BOOT_RESAMPLES = 1000
BOOT_SEED = 0  # fixed, recorded in the CSVs: the intervals are reproducible
BOOT_LEVEL = 0.95


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


# ------------------------------------------------------------ bootstrap --
# A measure with a bootstrap interval declares a resampler (bench.calib.measures):
# fn(probs, labels, idx [R, N]) -> its value on each of the R resamples, in one
# vectorised pass (a loop of R calls would cost seconds per record).
#
# The draws depend only on (N, R, seed), so one report draws them once per
# test-set size: the index arrays are cached read-only, and with them their
# multiplicities counts[r, j] (how often sample j is drawn in resample r).
# Every built-in resampler is then a product with that matrix (one BLAS call
# instead of a gather and a bincount over R x N draws per record and measure).
@functools.lru_cache(maxsize=4)
def _indices(n: int, n_boot: int, seed: int) -> np.ndarray:
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    idx.flags.writeable = False
    return idx


def resample_indices(n: int, n_boot: int = BOOT_RESAMPLES, seed: int = BOOT_SEED) -> np.ndarray:
    """[n_boot, n] indices drawn with replacement (numpy default_rng(seed)); read-only."""
    return _indices(int(n), int(n_boot), int(seed))


_COUNTS: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id(idx) -> (idx, its counts)


def multiplicities(idx: np.ndarray) -> np.ndarray:
    """counts[r, j] (float64 [R, N], read-only): how often sample j is drawn
    in resample r. Kept for the read-only arrays of resample_indices, which
    cannot change under the cache; computed afresh for any other array."""
    hit = _COUNTS.get(id(idx))
    if hit is not None and hit[0] is idx:
        return hit[1]
    idx = np.asarray(idx)
    n_boot, n = idx.shape
    slots = (idx + n * np.arange(n_boot)[:, None]).ravel()
    counts = np.bincount(slots, minlength=n_boot * n).reshape(n_boot, n).astype(np.float64)
    counts.flags.writeable = False
    if not idx.flags.writeable:
        if len(_COUNTS) >= 4:
            _COUNTS.pop(next(iter(_COUNTS)))
        _COUNTS[id(idx)] = (idx, counts)
    return counts


def acc_resamples(probs, labels, idx) -> np.ndarray:
    correct = (np.asarray(probs).argmax(axis=1) == labels).astype(np.float64)
    return multiplicities(idx) @ correct / idx.shape[1]  # integer sums: exact


def ece_resamples(probs, labels, idx, n_bins: int = 15) -> np.ndarray:
    """ECE (the paper's binning) of every resample: resample r's signed gap
    in bin b is sum_j counts[r, j] (conf_j - correct_j) over the samples j of
    bin b, one matrix product for all of them; sum |gap| / N is torchmetrics'
    sum of per-bin |acc - conf| x share."""
    p = np.asarray(probs)
    conf = p.max(axis=1).astype(np.float32)
    correct = (p.argmax(axis=1) == labels).astype(np.float64)
    bins = np.searchsorted(_linspace01(n_bins), conf, side="right") - 1
    w = np.zeros((len(conf), n_bins + 1))
    w[np.arange(len(conf)), bins] = conf.astype(np.float64) - correct
    return np.abs(multiplicities(idx) @ w).sum(axis=1) / idx.shape[1]


def nll_resamples(probs, labels, idx) -> np.ndarray:
    p = np.asarray(probs)
    p_y = np.clip(p[np.arange(len(labels)), labels].astype(np.float64), NLL_EPS, 1 - NLL_EPS)
    return multiplicities(idx) @ -np.log(p_y) / idx.shape[1]


def bootstrap_ci(probs: np.ndarray, labels: np.ndarray, resamplers: dict, n_boot: int = BOOT_RESAMPLES,
                 seed: int = BOOT_SEED, level: float = BOOT_LEVEL) -> dict[str, tuple]:
    """measure -> (low, high): the percentile interval of its values on the
    same `n_boot` resamples of the test samples; `resamplers`: measure ->
    resampler (see above)."""
    idx = resample_indices(len(labels), n_boot, seed)
    tail = (1 - level) / 2 * 100
    out = {}
    for name, fn in resamplers.items():
        v = fn(probs, labels, idx)
        out[name] = (float(np.percentile(v, tail)), float(np.percentile(v, 100 - tail)))
    return out


def seed_interval(values, level: float = BOOT_LEVEL) -> tuple[float, float] | None:
    """Student-t interval of the mean over seeds: mean +- t_{(1+level)/2, n-1}
    s / sqrt(n) with the sample std s (ddof = 1); None below two seeds."""
    # scipy on demand: `bench list` and `import bench.api` load bench.calib, not scipy
    from scipy.stats import t

    v = np.asarray(values, dtype=np.float64)
    if len(v) < 2:
        return None
    half = t.ppf((1 + level) / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return float(v.mean() - half), float(v.mean() + half)


__all__ = ["BIN_COUNTS", "bootstrap_ci", "seed_interval", "adaptive_ece", "classwise_ece",
           "debiased_l2", "smooth_ece", "aurc", "acc_resamples", "ece_resamples",
           "nll_resamples", "multiplicities", "resample_indices"]
