"""Significance beyond the paper.

- Paired test of a row against SL1H over seeds (same dataset and backbone,
  paired by seed). With few seeds the exact Wilcoxon signed-rank test cannot
  reach p < 0.05 at all (n = 5: smallest two-sided p = 2/32 = 0.0625), so
  `auto` uses the paired t-test below WILCOXON_MIN_N seeds and Wilcoxon from
  there on. No multiple-comparison correction: each mark is one test.
- Friedman test over blocks (each (dataset, backbone) is a block, methods
  are the treatments) with the Nemenyi critical difference of average ranks
  (Demšar 2006, JMLR 7:1-30).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from bench.core.errors import choices_error
from bench.calib import measures

# Fewer paired seeds than this: the report prints a caution next to any marks.
MIN_SEEDS_NOTE = 3
WILCOXON_MIN_N = 6  # n = 6 is the first size where exact Wilcoxon can give p < 0.05
TESTS = ("auto", "ttest", "wilcoxon")
_NAMES = {"ttest": "paired t-test", "wilcoxon": "Wilcoxon signed-rank"}


def _sps():
    """scipy.stats, imported on first use: every `bench` command imports this
    module (the report parser's --test choices), and scipy.stats takes about
    a second to import."""
    # scipy.stats: about a second to import (see the docstring)
    from scipy import stats

    return stats


@dataclass(frozen=True)
class Paired:
    test: str  # 'paired t-test' | 'Wilcoxon signed-rank'
    n: int
    statistic: float
    p: float


def choose_test(n: int, test: str = "auto") -> str:
    if test not in TESTS:
        raise choices_error("significance test", test, TESTS)
    if test == "auto":
        return "ttest" if n < WILCOXON_MIN_N else "wilcoxon"
    return test


def paired_test(a, b, test: str = "auto") -> Paired | None:
    """Two-sided paired test of a vs b (equal-length, seed-aligned). None when
    it cannot be computed (fewer than 2 pairs)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) != len(b) or len(a) < 2:
        return None
    kind = choose_test(len(a), test)
    d = a - b
    if np.allclose(d, 0):
        return Paired(_NAMES[kind], len(a), 0.0, 1.0)
    with warnings.catch_warnings():  # constant differences: scipy warns, p is still defined
        warnings.simplefilter("ignore", RuntimeWarning)
        if kind == "ttest":
            res = _sps().ttest_rel(a, b)
        else:
            res = _sps().wilcoxon(a, b, zero_method="wilcox", alternative="two-sided")
    p = float(res.pvalue)
    return Paired(_NAMES[kind], len(a), float(res.statistic), 1.0 if math.isnan(p) else p)


def paired_vs_reference(values: dict, seeds, ref_values: dict, ref_seeds,
                        metrics=None, test: str = "auto") -> dict:
    """metric -> Paired (or None) for one row against the reference row,
    using only the seeds both have; metrics: by default the paper's
    (bench.calib.measures)."""
    if metrics is None:
        metrics = measures.paper()
    common = [s for s in seeds if s in set(ref_seeds)]
    idx = {s: i for i, s in enumerate(seeds)}
    ridx = {s: i for i, s in enumerate(ref_seeds)}
    out = {}
    for m in metrics:
        if m not in values or m not in ref_values:
            out[m] = None
            continue
        a = [values[m][idx[s]] for s in common]
        b = [ref_values[m][ridx[s]] for s in common]
        out[m] = paired_test(a, b, test)
    return out


# ---------------------------------------------------------------- Friedman


@dataclass(frozen=True)
class Friedman:
    methods: tuple
    blocks: tuple
    avg_ranks: tuple  # per method, 1 = best
    statistic: float
    p: float
    cd: float  # Nemenyi critical difference at alpha


def block_ranks(scores: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """[blocks, methods] -> ranks within each block, ties averaged (Demšar)."""
    s = -scores if higher_is_better else scores
    return np.vstack([_sps().rankdata(row) for row in s])


def nemenyi_q(k: int, alpha: float = 0.05) -> float:
    """q_alpha of the Nemenyi test: studentized range quantile / sqrt(2)."""
    return float(_sps().studentized_range.ppf(1 - alpha, k, np.inf) / math.sqrt(2))


def nemenyi_cd(k: int, n_blocks: int, alpha: float = 0.05) -> float:
    """CD = q_alpha * sqrt(k (k + 1) / (6 N)) (Demšar 2006, eq. after (3))."""
    return nemenyi_q(k, alpha) * math.sqrt(k * (k + 1) / (6.0 * n_blocks))


def friedman(scores: np.ndarray, methods, blocks, higher_is_better: bool,
             alpha: float = 0.05) -> Friedman:
    """scores: [blocks, methods], every method present in every block."""
    scores = np.asarray(scores, float)
    ranks = block_ranks(scores, higher_is_better)
    stat, p = _sps().friedmanchisquare(*scores.T)
    return Friedman(tuple(methods), tuple(blocks), tuple(ranks.mean(axis=0)), float(stat),
                    float(p), nemenyi_cd(len(methods), len(blocks), alpha))


def complete_blocks(table: dict, methods) -> tuple[list, list, np.ndarray]:
    """table: {(block, method): score}. Keeps the methods (in the order
    given) that have a score in every block; returns (methods, blocks,
    scores [blocks, methods]). The caller checks there are enough of each."""
    blocks = sorted({b for b, _ in table})
    kept = [m for m in methods if all((b, m) in table for b in blocks)]
    scores = np.array([[table[(b, m)] for m in kept] for b in blocks], float)
    return kept, blocks, scores
