"""OOD scores and metrics (bench.calib.ood) against hand-worked cases and
independent computations (pairwise AUROC, a threshold scan for FPR95)."""
from __future__ import annotations

import numpy as np
import pytest

from bench.calib import ood
from bench.core.errors import BenchError


def pairwise_auroc(a, b) -> float:
    """P(score_in > score_out) + 0.5 P(tie), over every pair."""
    a, b = np.asarray(a)[:, None], np.asarray(b)[None, :]
    return float(((a > b) + 0.5 * (a == b)).mean())


def scan_fpr(a, b, level=0.95) -> float:
    """Lowest FPR over thresholds t (accept score >= t) with TPR >= level."""
    best = 1.0
    for t in np.unique(np.r_[a, b]):
        if np.mean(a >= t) >= level:
            best = min(best, float(np.mean(b >= t)))
    return best


def test_hand_worked_case():
    s_in, s_out = [0.9, 0.8, 0.7, 0.6], [0.75, 0.5, 0.4]
    d = ood.detection(s_in, s_out)
    assert d["auroc"] == pytest.approx(10 / 12)  # 0.7 and 0.6 lose to 0.75
    assert d["fpr95"] == pytest.approx(1 / 3)  # all four kept: threshold 0.6 lets 0.75 in
    # AUPR-In: ranks 0.9 (in), 0.8 (in), 0.75 (out), 0.7 (in), 0.6 (in): precisions at each
    # in-sample 1, 1, 3/4, 4/5, mean over the 4 in-samples
    assert d["aupr_in"] == pytest.approx((1 + 1 + 3 / 4 + 4 / 5) / 4)
    # AUPR-Out on -score: 0.4 (out), 0.5 (out), 0.6, 0.7, 0.75 (out): 1, 1, 3/5
    assert d["aupr_out"] == pytest.approx((1 + 1 + 3 / 5) / 3)


def test_fpr95_takes_the_first_point_reaching_the_level_even_on_a_straight_segment():
    # 18 of 20 in-distribution scores above every OOD one (TPR 0.9 at FPR 0), then
    # two ties of one in- and one OOD sample: the ROC goes (0, .9) -> (.1, .95) ->
    # (.2, 1) on one straight line. roc_curve's default drops the middle point,
    # which would give FPR95 = 0.2; the threshold 5 keeps 19/20 and lets 1/10 in.
    s_in = np.r_[np.arange(10.0, 28.0), 5.0, 4.0]
    s_out = np.r_[5.0, 4.0, np.arange(-8.0, 0.0)]
    assert scan_fpr(s_in, s_out) == pytest.approx(0.1)
    assert ood.fpr_at_tpr(s_in, s_out) == pytest.approx(0.1)


@pytest.mark.parametrize("seed", range(6))
def test_against_independent_computations(seed):
    from sklearn.metrics import average_precision_score

    rng = np.random.default_rng(seed)
    s_in = np.round(rng.normal(1.0, 1.0, 60), 1)  # rounded: ties on purpose
    s_out = np.round(rng.normal(0.0, 1.0, 45), 1)
    d = ood.detection(s_in, s_out)
    assert d["auroc"] == pytest.approx(pairwise_auroc(s_in, s_out), abs=1e-12)
    assert d["fpr95"] == pytest.approx(scan_fpr(s_in, s_out), abs=1e-12)
    y = np.r_[np.ones(60), np.zeros(45)]
    assert d["aupr_in"] == pytest.approx(average_precision_score(y, np.r_[s_in, s_out]))
    assert d["aupr_out"] == pytest.approx(average_precision_score(1 - y, -np.r_[s_in, s_out]))


def test_mutual_information_zero_for_identical_heads_positive_for_disagreeing():
    rng = np.random.default_rng(0)
    one = rng.normal(size=(30, 1, 5))
    same = np.repeat(one, 4, axis=1)
    assert np.abs(ood.mutual_information(ood.head_softmax(same))).max() < 1e-12
    differ = same + rng.normal(scale=2.0, size=same.shape)
    mi = ood.mutual_information(ood.head_softmax(differ))
    assert (mi > 1e-6).all()
    # two confident heads naming different classes: H(mean) = log 2, each H = 0
    logits = np.array([[[50.0, 0.0], [0.0, 50.0]]])
    assert ood.mutual_information(ood.head_softmax(logits))[0] == pytest.approx(np.log(2))


def test_scores_of_a_single_head_have_no_mi_and_match_hand_values():
    logits = np.log(np.array([[[0.5, 0.25, 0.25]]]))
    s = ood.scores(logits)
    assert set(s) == {"msp", "entropy"}
    assert s["msp"][0] == pytest.approx(0.5)
    assert s["entropy"][0] == pytest.approx(-(1.5 * np.log(2)))  # -H = sum p log p
    two = ood.scores(np.repeat(logits, 2, axis=1))
    assert two["mi"][0] == pytest.approx(0.0, abs=1e-12)


def test_evaluate_and_bad_input():
    rng = np.random.default_rng(1)
    inside = rng.normal(size=(20, 2, 4)) * 4
    outside = rng.normal(size=(15, 2, 4)) * 0.1  # flat: uncertain
    res = ood.evaluate(inside, outside)
    assert set(res) == {"msp", "entropy", "mi"} and res["msp"]["auroc"] > 0.8
    assert set(ood.evaluate(inside[:, :1], outside)) == {"msp", "entropy"}  # one head: no MI
    with pytest.raises(BenchError, match="both sides"):
        ood.detection([], [0.1])
    with pytest.raises(BenchError, match="NaN"):
        ood.detection([np.nan, 0.2], [0.1])
    with pytest.raises(BenchError, match=r"\[N, M, K\]"):
        ood.scores(np.zeros((3, 4)))


def test_a_plugin_score_is_computed_and_a_taken_name_refused():
    from bench.plugins import register_ood_score

    def energy(per_head):
        return np.log(per_head.mean(axis=1)).max(axis=1)

    register_ood_score("test_energy", energy, "Energy", "a plugin's score")
    try:
        logits = np.random.default_rng(0).normal(size=(5, 2, 3))
        s = ood.scores(logits)
        assert list(s) == ["msp", "entropy", "mi", "test_energy"]
        assert ood.SCORES.origin("test_energy") != "built-in"  # this test module registered it
        assert "test_energy1" in ood.scores_key()
        with pytest.raises(BenchError, match="duplicate OOD score name 'msp'"):
            register_ood_score("msp", energy, "MSP", "again")
    finally:
        ood.SCORES._entries.pop("test_energy")
