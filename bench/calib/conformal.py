"""Split conformal prediction sets from saved probabilities: the scores,
the calibration quantile and the sets (`bench report --sets`).

A score maps probabilities [N, K] to a non-conformity score per class
[N, K] (lower: the class fits the image better). Calibration takes the
scores of the true classes of the calibration split (the validation split)
and their ceil((n+1)(1-alpha))-th smallest value q; the set of an image is
every class whose score is <= q. Because a class is in its set exactly
when its score is <= q, the true class is in the set exactly when its
score is: with exchangeable calibration and test images, coverage is at
least 1 - alpha (Vovk et al. 2005; Angelopoulos and Bates 2021, Thm. 1),
and below 1 - alpha + 1/(n+1) when scores have no ties.

Scores (a registry: a plugin may add one with `SCORES.add`):
  lac   1 - p_k: the least ambiguous sets (Sadinle, Lei and Wasserman 2019;
        TorchCP's THR, MAPIE's "lac")
  aps   the probability mass of every class ranked at or above k (Romano,
        Sesia and Candes 2020), not randomised by default (see docs/reports.md,
        "Prediction sets")
  raps  aps + lam * max(0, rank_k - k_reg) (Angelopoulos, Bates, Malik and
        Jordan, ICLR 2021), RapsParams below

How the sets are made beyond the score, SetRule (`bench report
--sets-randomize`, `--sets-top-label`):
  randomize  APS and RAPS (scores declared `randomizable`) less U * p_k, as
             TorchCP does: U ~ Uniform[0, 1), one per calibration image (its
             true class's score) and one per test image *and class*, drawn
             from numpy's default_rng(seed), calibration images first, a
             test image's r-th draw going to its class ranked r (TorchCP
             draws in sorted order: the same draws give its sets).
  top_label  every set holds the top class (rank 1) too, so no set is empty.

Every function is pure numpy; ties in probability are ranked by class index
(a stable sort), the same way for calibration and test images.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from bench.core.errors import BenchError
from bench.core.registry import Registry

DEFAULT_ALPHA = 0.1  # the miscoverage of the conformal literature's tables (RAPS, Table 1)
# (n+1)(1-alpha) in floating point can land a hair above an integer (e.g.
# 1000 x 0.9 = 900.0000000000001) and ceil() would then ask one more score
_ROUND = 1e-9


@dataclass(frozen=True)
class RapsParams:
    """RAPS' regulariser. The RAPS paper tunes both on held-out data; these are
    the fixed values of its authors' ImageNet example (Angelopoulos and Bates,
    "A Gentle Introduction to Conformal Prediction", 2021, Sec. 2.1 notebook:
    lam_reg = 0.01, k_reg = 5): tuning would need a third split."""

    k_reg: int = 5
    lam: float = 0.01


RAPS = RapsParams()


@dataclass(frozen=True)
class SetRule:
    """How sets are made from a score (module text); the default is the
    deterministic sets, which may be empty."""

    randomize: bool = False
    seed: int = 0
    top_label: bool = False

    def text(self) -> str:
        """'' for the default, else what a cache key and a note name."""
        parts = ([f"randomized seed {self.seed}"] if self.randomize else []) + (
            ["top label"] if self.top_label else [])
        return ", ".join(parts)


DETERMINISTIC = SetRule()


@dataclass(frozen=True)
class Score:
    name: str
    fn: Callable[[np.ndarray], np.ndarray]  # probs [N, K] -> scores [N, K]
    head: str
    help: str = ""
    version: int = 1
    randomizable: bool = False  # SetRule.randomize subtracts U * p_k (APS, RAPS)

    def __post_init__(self):
        # where the code came from (bench.core.plugins.origin reads __module__):
        # `bench list` names the plugin that registered a score
        object.__setattr__(self, "__module__", self.fn.__module__)


SCORES = Registry("conformal score")


def check_alpha(alpha: float, flag: str = "--sets-alpha") -> float:
    if not isinstance(alpha, (int, float)) or not 0 < alpha < 1 or math.isnan(alpha):
        raise BenchError(f"{flag} {alpha}: a miscoverage level must be > 0 and < 1 "
                         "(e.g. 0.1 for 90% sets)")
    return float(alpha)


def ranks(probs: np.ndarray) -> np.ndarray:
    """[N, K] the 1-based rank of each class by decreasing probability (ties:
    the lower class index first)."""
    order = np.argsort(-probs, axis=1, kind="stable")
    out = np.empty_like(order)
    np.put_along_axis(out, order, np.arange(1, probs.shape[1] + 1)[None, :].repeat(len(probs), 0),
                      axis=1)
    return out


def lac_scores(probs: np.ndarray) -> np.ndarray:
    return 1.0 - np.asarray(probs, dtype=np.float64)


def aps_scores(probs: np.ndarray) -> np.ndarray:
    """The mass of the classes ranked at or above each class, itself included."""
    p = np.asarray(probs, dtype=np.float64)
    order = np.argsort(-p, axis=1, kind="stable")
    cum = np.cumsum(np.take_along_axis(p, order, axis=1), axis=1)
    out = np.empty_like(cum)
    np.put_along_axis(out, order, cum, axis=1)
    return out


def raps_scores(probs: np.ndarray, params: RapsParams = RAPS) -> np.ndarray:
    penalty = params.lam * np.maximum(0, ranks(np.asarray(probs)) - params.k_reg)
    return aps_scores(probs) + penalty


def register_score(name: str, fn, head: str, text: str, version: int = 1,
                   randomizable: bool = False) -> None:
    """Register `fn(probs [N, K]) -> scores [N, K]` (lower: more conforming) as
    conformal score `name` (bench.plugins.register_conformal_score); a taken
    name is an error. `randomizable`: --sets-randomize subtracts U * p_k."""
    SCORES.add(name, Score(name, fn, head, text, version, randomizable), text)


register_score("lac", lac_scores, "LAC", "1 - p_k (Sadinle et al. 2019; TorchCP's THR)")
register_score("aps", aps_scores, "APS", "mass ranked at or above k (Romano et al. 2020), "
               "not randomised unless --sets-randomize", randomizable=True)
register_score("raps", raps_scores, "RAPS", f"APS + {RAPS.lam} x max(0, rank - {RAPS.k_reg}) "
               "(Angelopoulos et al. 2021)", randomizable=True)


def quantile(cal_scores: np.ndarray, alpha: float) -> float:
    """The ceil((n+1)(1-alpha))-th smallest calibration score; +inf where that
    exceeds n (too few calibration images for 1 - alpha: every set is full)."""
    s = np.sort(np.asarray(cal_scores, dtype=np.float64))
    r = math.ceil((len(s) + 1) * (1.0 - alpha) - _ROUND)
    return float("inf") if r > len(s) else float(s[r - 1])


def true_scores(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return np.take_along_axis(scores, np.asarray(labels, dtype=np.int64)[:, None], axis=1)[:, 0]


def prediction_sets(cal_probs, cal_labels, test_probs, score: str = "lac",
                    alpha: float = DEFAULT_ALPHA,
                    rule: SetRule = DETERMINISTIC) -> tuple[np.ndarray, float]:
    """(sets [N_test, K] bool, q): the split-conformal sets of `score` at
    miscoverage `alpha`, calibrated on (cal_probs, cal_labels), made as
    `rule` says (module text)."""
    sc = SCORES.get(score)
    cal_probs, test_probs = np.asarray(cal_probs, np.float64), np.asarray(test_probs, np.float64)
    cal, test = true_scores(sc.fn(cal_probs), cal_labels), sc.fn(test_probs)
    if rule.randomize and sc.randomizable:
        rng = np.random.default_rng(rule.seed)
        cal = cal - rng.random(len(cal)) * true_scores(cal_probs, cal_labels)
        u = rng.random(test.shape)  # [image, rank]: the r-th draw goes to the class ranked r
        test = test - np.take_along_axis(u, ranks(test_probs) - 1, axis=1) * test_probs
    q = quantile(cal, check_alpha(alpha))
    sets = test <= q
    if rule.top_label:
        sets |= ranks(test_probs) == 1
    return sets, q


# ---------------------------------------------------- measures of sets --
# The set-size strata of RAPS' size-stratified coverage (Angelopoulos et al.
# 2021, Sec. 4: 0-1, 2-3, 4-10, 11-100, 101-1000).
STRATA = ((0, 1), (2, 3), (4, 10), (11, 100), (101, math.inf))  # the last: 101-1000 there


def covered(sets: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return np.take_along_axis(np.asarray(sets, bool),
                              np.asarray(labels, dtype=np.int64)[:, None], axis=1)[:, 0]


def coverage(sets: np.ndarray, labels: np.ndarray) -> float:
    """Share of images whose true class is in their set."""
    return float(np.mean(covered(sets, labels)))


def mean_size(sets: np.ndarray, labels: np.ndarray) -> float:
    """Mean number of classes per set."""
    return float(np.mean(np.asarray(sets, bool).sum(axis=1)))


def empty_share(sets: np.ndarray, labels: np.ndarray) -> float:
    """Share of images whose set is empty (LAC's, APS' and RAPS' sets can be:
    a confident wrong image's every score may lie above q)."""
    return float(np.mean(~np.asarray(sets, bool).any(axis=1)))


def stratum_coverages(sets: np.ndarray, labels: np.ndarray) -> dict:
    """(lo, hi) set-size stratum -> (coverage, images) of its non-empty strata."""
    sizes, hit = np.asarray(sets, bool).sum(axis=1), covered(sets, labels)
    out = {}
    for lo, hi in STRATA:
        m = (sizes >= lo) & (sizes <= hi)
        if m.any():
            out[(lo, hi)] = (float(hit[m].mean()), int(m.sum()))
    return out


def size_stratified_coverage(sets: np.ndarray, labels: np.ndarray) -> float:
    """The lowest coverage among the set-size strata that hold images: an
    adaptive method keeps it near the marginal coverage, a method that covers
    with large sets and misses with small ones does not."""
    return min(c for c, _ in stratum_coverages(sets, labels).values())
