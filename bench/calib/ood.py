"""Out-of-distribution detection from saved logits: scores and their metrics.

Pure functions, numpy in and floats out. A *score* is a confidence: higher
means "more in-distribution". Each is computed from the per-head
probabilities [N, M, K] of one record's logits (the plain variant's
probabilities are their mean, paper eq. 1). SCORES is a registry: a plugin
adds one with register_score (bench.plugins); the built-ins:

    msp      maximum softmax probability, max_k p_k (Hendrycks and Gimpel 2017)
    entropy  minus the predictive entropy, -H(p) = sum_k p_k log p_k
    mi       minus the heads' disagreement: the mutual information between
             the head index and the prediction, MI = H(mean_m p_m) - mean_m H(p_m)
             (the ensemble decomposition of Depeweg et al. 2018 / Lakshminarayanan
             et al. 2017 applied to the M heads); 0 when every head says the
             same, > 0 when they disagree; only for multi-head models

A *metric* compares the scores of in-distribution samples (the record's test
split) with those of out-of-distribution samples (another dataset's test
images), in-distribution being the positive class, as in ODIN (Liang et al.
2018) and OpenOOD:

    auroc     area under the ROC curve (scikit-learn's roc_auc_score); the same
              whichever class is called positive
    aupr_in   average precision with in-distribution positive (scikit-learn's
              average_precision_score on the scores)
    aupr_out  average precision with out-of-distribution positive (on -score)
    fpr95     the share of OOD samples taken as in-distribution at the
              threshold that keeps 95% of the in-distribution samples (the
              first point of scikit-learn's roc_curve whose TPR >= 0.95)

Natural logarithms; p log p is 0 at p = 0.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from bench.core.errors import BenchError
from bench.core.registry import Registry
from bench.calib.metrics import softmax

TPR_LEVEL = 0.95


@dataclass(frozen=True)
class Score:
    name: str
    fn: Callable[[np.ndarray], np.ndarray]  # per-head probabilities [N, M, K] -> [N]
    head: str  # table head
    multi_head: bool  # needs M > 1 heads
    help: str
    version: int = 1  # bump when fn changes: the OOD report's cached values are recomputed

    def __post_init__(self):
        # where the code came from (bench.core.plugins.origin reads __module__)
        object.__setattr__(self, "__module__", self.fn.__module__)


# name -> Score; a plugin adds one with register_score (bench.plugins), and it
# becomes a column group of every `bench report --ood` table
SCORES = Registry("OOD score")


def register_score(name: str, fn, head: str, help: str, multi_head: bool = False,
                   version: int = 1) -> Score:
    """Register `fn(per_head_probs [N, M, K]) -> [N]` confidences (higher: more
    in-distribution) as OOD score `name`; a taken name is an error."""
    score = Score(name, fn, head, multi_head, help, version)
    SCORES.add(name, score, help)
    return score


def all_scores() -> list[Score]:
    """Every registered score, in registration order (the tables' column order)."""
    return [SCORES.get(n) for n in SCORES.names()]


def scores_key() -> str:
    """The registered scores and versions, for a cache key."""
    return ",".join(f"{s.name}{s.version}" for s in all_scores())


@dataclass(frozen=True)
class Metric:
    name: str
    head: str
    higher: bool  # higher is better
    help: str


METRICS = (
    Metric("auroc", "AUROC", True, "area under the ROC curve, in-distribution positive"),
    Metric("aupr_in", "AUPR-In", True, "average precision, in-distribution positive"),
    Metric("aupr_out", "AUPR-Out", True, "average precision, out-of-distribution positive"),
    Metric("fpr95", "FPR95", False, "share of OOD samples accepted at 95% in-distribution TPR"),
)


def _entropy(p: np.ndarray) -> np.ndarray:
    """H(p) along the last axis, with 0 log 0 = 0."""
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=-1)


def head_softmax(logits: np.ndarray) -> np.ndarray:
    """[N, M, K] logits -> [N, M, K] per-head probabilities (float64)."""
    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim != 3:
        raise BenchError(f"OOD scores need per-head logits [N, M, K], got shape {logits.shape}")
    return softmax(logits, axis=-1)


def mutual_information(per_head: np.ndarray) -> np.ndarray:
    """[N, M, K] per-head probabilities -> [N] MI = H(mean) - mean H (>= 0 up to rounding)."""
    per_head = np.asarray(per_head, dtype=np.float64)
    return _entropy(per_head.mean(axis=1)) - _entropy(per_head).mean(axis=1)


def _msp(per_head: np.ndarray) -> np.ndarray:
    return per_head.mean(axis=1).max(axis=1)


def _neg_entropy(per_head: np.ndarray) -> np.ndarray:
    return -_entropy(per_head.mean(axis=1))


def _neg_mi(per_head: np.ndarray) -> np.ndarray:
    return -mutual_information(per_head)


register_score("msp", _msp, "MSP", "maximum softmax probability of the mean prediction")
register_score("entropy", _neg_entropy, "Entropy", "minus the entropy of the mean prediction")
register_score("mi", _neg_mi, "MI", "minus the mutual information between heads and "
               "prediction (the heads' disagreement)", multi_head=True)


def scores(logits: np.ndarray) -> dict[str, np.ndarray]:
    """score name -> [N] confidences of per-head logits [N, M, K] (a multi-head
    score such as MI only for M > 1)."""
    per_head = head_softmax(logits)
    return {s.name: s.fn(per_head) for s in all_scores()
            if per_head.shape[1] > 1 or not s.multi_head}


def fpr_at_tpr(score_in: np.ndarray, score_out: np.ndarray, level: float = TPR_LEVEL) -> float:
    """FPR at the first ROC point whose TPR reaches `level` (in-distribution positive)."""
    # scikit-learn on demand: `bench list` and `import bench.api` load bench.calib, not sklearn
    from sklearn.metrics import roc_curve

    y, s = _stack(score_in, score_out)
    # every threshold: the default drops collinear points, and the first point
    # reaching the level may be one of them (its FPR is then overstated)
    fpr, tpr, _ = roc_curve(y, s, drop_intermediate=False)
    return float(fpr[np.searchsorted(tpr, level, side="left")])


def detection(score_in: np.ndarray, score_out: np.ndarray) -> dict[str, float]:
    """metric -> value (a fraction) of one score on in- and out-of-distribution samples."""
    # scikit-learn on demand: `bench list` and `import bench.api` load bench.calib, not sklearn
    from sklearn.metrics import average_precision_score, roc_auc_score

    y, s = _stack(score_in, score_out)
    return {"auroc": float(roc_auc_score(y, s)),
            "aupr_in": float(average_precision_score(y, s)),
            "aupr_out": float(average_precision_score(1 - y, -s)),
            "fpr95": fpr_at_tpr(score_in, score_out)}


def _stack(score_in, score_out) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(score_in, np.float64).ravel(), np.asarray(score_out, np.float64).ravel()
    if len(a) == 0 or len(b) == 0:
        raise BenchError(f"OOD detection needs samples on both sides ({len(a)} in-distribution, "
                         f"{len(b)} out-of-distribution)")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise BenchError("OOD scores hold a NaN or infinite value (non-finite logits)")
    return np.r_[np.ones(len(a), np.int64), np.zeros(len(b), np.int64)], np.r_[a, b]


def evaluate(logits_in: np.ndarray, logits_out: np.ndarray) -> dict[str, dict[str, float]]:
    """score -> metric -> value, for every score both logit sets allow."""
    s_in, s_out = scores(logits_in), scores(logits_out)
    return {name: detection(s_in[name], s_out[name]) for name in s_in if name in s_out}
