"""Intervals of a measure: bootstrap resamples of the test samples (one
record) and the Student-t interval over seeds (a table cell).

The resample draws are fixed (seed BOOT_SEED, recorded in the CSVs), so every
interval is reproducible.
"""
from __future__ import annotations

import functools

import numpy as np

from bench.calib.measures.functions import NLL_EPS, _linspace01

BOOT_RESAMPLES = 1000
BOOT_SEED = 0  # fixed, recorded in the CSVs: the intervals are reproducible
BOOT_LEVEL = 0.95


# A measure with a bootstrap interval declares a resampler (its Measure.resample):
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
