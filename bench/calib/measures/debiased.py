"""The debiased top-label L2 calibration error (`dl2ce`) on bootstrap
resamples, all at once, and the resampler that gives `dl2ce` its interval
(`dl2ce_interval_resamples`: why it recentres is in its docstring).

`bench.calib.measures.functions.debiased_l2` calls Kumar, Liang and Ma's
`uncertainty-calibration` package (`get_top_calibration_error(p=2,
debias=True)`). That call takes ~10 ms on a few thousand samples, so 1,000
resamples per record, one call each, would cost ten seconds a record and an
hour for the paper's 360 records. `dl2ce_resamples` computes the package's
estimator on every resample in a few vectorised passes and gives the same
value on each (tests/calib/test_debiased.py compares them resample by
resample), including its two regimes:

- **continuous** (the usual case): 15 equal-mass bins of the resample's
  confidences, `get_equal_bins`: the sorted confidences split by
  `numpy.array_split`, each boundary halfway between the last value of one
  part and the first of the next; a sample joins the first bin whose
  boundary is >= its confidence;
- **discrete** (`is_discrete`: every class column of the probabilities has
  fewer than N/4 distinct values): one bin per distinct confidence.

The estimator is then sqrt(max(0, sum_b (n_b/N) [(conf_b - acc_b)^2 -
acc_b (1 - acc_b) / (n_b - 1)])), bins of fewer than two samples adding 0.

A resample is a multiset of the test samples, so everything is computed on
the samples sorted once by confidence, with per-resample multiplicities
`counts[r, j]` (bench.calib.measures.intervals.multiplicities, shared with
the other resamplers): a resample's sorted confidences are the sorted
originals, each repeated `counts[r, j]` times.
"""
from __future__ import annotations

import numpy as np

from bench.calib.measures.intervals import multiplicities

N_BINS = 15  # the package's default for scaling (continuous) models
CHUNK = 64  # resamples per pass: bounds the temporaries at ~CHUNK x N x 8 bytes each


def dl2ce_resamples(probs, labels, idx, n_bins: int = N_BINS, squared: bool = False
                    ) -> np.ndarray:
    """dl2ce of each resample probs[idx[r]], labels[idx[r]]: [R] values;
    squared=True: the debiased squared error before the floor at 0 and the root."""
    p = np.asarray(probs, dtype=np.float64)
    p = p / p.sum(axis=1, keepdims=True)  # as debiased_l2: float32 rows may sum to 1 +- 1e-7
    conf = p.max(axis=1)
    correct = (p.argmax(axis=1) == np.asarray(labels)).astype(np.float64)
    counts = multiplicities(idx)
    out = np.empty(len(counts))
    discrete = _discrete(p, counts)
    for which, fn in ((~discrete, _equal_mass), (discrete, _by_value)):
        rows = np.flatnonzero(which)
        for start in range(0, len(rows), CHUNK):
            part = rows[start:start + CHUNK]
            out[part] = fn(conf, correct, np.take(counts, part, axis=0), n_bins)
    if squared:
        return out
    return np.sqrt(np.maximum(out, 0.0))


def dl2ce_interval_resamples(probs, labels, idx, n_bins: int = N_BINS) -> np.ndarray:
    """The values whose percentiles are dl2ce's bootstrap interval (the
    Measure registry's `resample` of dl2ce). A resample's bins see the test
    set as their population, so the debiased squared error of the resamples
    centres on the test set's *plug-in* squared error, not on its debiased
    one: their percentiles would repeat the bias the estimator removes, and
    near perfect calibration the interval would miss the true value one time
    in three (benchmarks/ci_coverage.py). So the resamples' squared values are
    shifted to centre on the test set's debiased value, then floored at 0 and
    rooted, as the estimator is."""
    squared = dl2ce_resamples(probs, labels, idx, n_bins, squared=True)
    own = dl2ce_resamples(probs, labels, np.arange(np.shape(idx)[1])[None, :], n_bins,
                          squared=True)[0]
    return np.sqrt(np.maximum(squared - (squared.mean() - own), 0.0))


def _group_sums(counts: np.ndarray, ids: np.ndarray, u: int, weights=None) -> np.ndarray:
    """[R, u]: per resample, the drawn total of `weights` (default 1) over the
    samples of each group ids == g: counts @ G with G[j, ids[j]] = weights[j],
    G sparse (one entry per sample)."""
    # scipy on demand: `import bench.api` loads bench.calib, not scipy
    from scipy.sparse import csc_matrix

    n = len(ids)
    w = np.ones(n) if weights is None else weights
    g = csc_matrix((w, (ids, np.arange(n))), shape=(u, n))  # G transposed
    return np.asarray(g @ counts.T).T


def _discrete(p: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per resample, the package's `is_discrete`: every column of the drawn
    rows has fewer than N/4 distinct values. A column with fewer than N/4
    distinct values overall has fewer in every resample; for the others a
    resample's distinct values are the groups of equal values it draws from,
    and a resample is continuous from its first such column."""
    n_boot, n = counts.shape
    undecided = np.ones(n_boot, dtype=bool)
    for k in range(p.shape[1]):
        ids = np.unique(p[:, k], return_inverse=True)[1].reshape(-1)
        u = int(ids.max()) + 1
        if u < n / 4:
            continue
        rows = np.flatnonzero(undecided)
        drawn = counts[rows] if u == n else _group_sums(counts[rows], ids, u)
        undecided[rows[np.count_nonzero(drawn, axis=1) >= n / 4]] = False
        if not undecided.any():
            break
    return undecided


def _estimate(n_b: np.ndarray, conf_b: np.ndarray, acc_b: np.ndarray, n: int) -> np.ndarray:
    """sum_b (n_b/N) [(conf_b - acc_b)^2 - acc_b(1-acc_b)/(n_b-1)] per row of
    per-bin sums (`unbiased_square_ce`); n_b, conf_b, acc_b: [R, bins] counts and sums."""
    with np.errstate(invalid="ignore", divide="ignore"):
        mc, ma = conf_b / n_b, acc_b / n_b
        err = (mc - ma) ** 2 - ma * (1.0 - ma) / (n_b - 1.0)
    err = np.where(n_b >= 2, err, 0.0)
    return (n_b / n * err).sum(axis=1)


def _equal_mass(conf, correct, counts, n_bins: int) -> np.ndarray:
    n_boot, n = counts.shape
    order = np.argsort(conf, kind="stable")
    cs, cc = conf[order], correct[order]
    # counts[r, j]: how often the j-th smallest confidence is drawn in resample r
    counts = np.take(counts, order, axis=1)  # take: several times faster than [:, order]
    cum = np.cumsum(counts, axis=1)  # whole numbers, exact in float64
    r = np.arange(n_boot)[:, None]
    # get_equal_bins: array_split's parts, a boundary between consecutive parts
    bins = min(n_bins, n)
    sizes = np.full(bins, n // bins)
    sizes[:n % bins] += 1
    ends = np.cumsum(sizes)[:-1]  # the first position of parts 1..bins-1
    # the value at position q of resample r's sorted confidences: the first j
    # with cum[r, j] > q (rows offset so that one searchsorted serves all)
    key = (cum + (n + 1) * r).ravel()

    def at(q):
        return cs[np.searchsorted(key, (q[None, :] + (n + 1) * r).ravel(), side="right")
                  .reshape(n_boot, -1) - n * r]

    bounds = (at(ends - 1) + at(ends)) / 2.0
    # a sample lies above boundary b when its confidence is > b: the cut is the
    # number of sorted samples with confidence <= b; bin i holds the sorted
    # samples from cut i-1 to cut i, so its sums are differences of running sums
    cuts = np.searchsorted(cs, bounds.ravel(), side="right").reshape(n_boot, -1)
    edges = np.concatenate([cuts, np.full((n_boot, 1), n, np.int64)], axis=1)

    def per_bin(running):  # running[r, j]: total over the sorted samples 0..j
        upto = np.take_along_axis(running, edges - 1, axis=1)  # each edge >= 1
        return np.diff(upto, axis=1, prepend=0)

    n_b = per_bin(cum)
    acc_b = per_bin(np.cumsum(counts * cc, axis=1))
    conf_b = per_bin(np.cumsum(counts * cs, axis=1))
    return _estimate(n_b, conf_b, acc_b, n)


def _by_value(conf, correct, counts, n_bins: int) -> np.ndarray:
    """`get_discrete_bins`: one bin per distinct confidence of the resample."""
    ids = np.unique(conf, return_inverse=True)[1].reshape(-1)
    u = int(ids.max()) + 1
    return _estimate(_group_sums(counts, ids, u), _group_sums(counts, ids, u, conf),
                     _group_sums(counts, ids, u, correct), counts.shape[1])
