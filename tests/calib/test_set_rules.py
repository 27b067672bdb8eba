"""How sets are made beyond the score (issue 49, point 4): randomised APS and
RAPS in TorchCP's convention, the top label always in, the share of empty
sets; each against sets built here by loops from the formulas, and the
randomised sets' coverage over random splits against 1 - alpha. The
report's flags: tests/report/test_sets_report.py."""
from __future__ import annotations

import math

import numpy as np
import pytest

from bench.calib import conformal as CF
from bench.calib import measures as M


def dirichlet_data(rng, n, k):
    p = rng.dirichlet(np.full(k, 0.7), n)
    y = np.array([rng.choice(k, p=pi) for pi in p])
    return p, y


def loop_scores(p, u_of, lam=0.0, k_reg=0):
    """APS (+ RAPS' penalty) less u * p_k, class by class: the mass of the
    classes ranked at or above k (no ties in these probabilities)."""
    out = np.empty_like(p)
    for i in range(len(p)):
        for c in range(p.shape[1]):
            rank = int((p[i] > p[i, c]).sum()) + 1
            out[i, c] = (p[i][p[i] >= p[i, c]].sum() - u_of(i, c, rank) * p[i, c]
                         + lam * max(0, rank - k_reg))
    return out


@pytest.mark.parametrize("score,lam,k_reg", [("aps", 0.0, 0), ("raps", CF.RAPS.lam, CF.RAPS.k_reg)])
def test_randomised_sets_are_torchcps_formula(score, lam, k_reg):
    """TorchCP: calibration score of image i is S_i(y_i) - U_i p_iy; a test
    image's class ranked r gets S(k) - U_ir p_k, U from default_rng(seed),
    calibration first."""
    rng = np.random.default_rng(0)
    pc, yc = dirichlet_data(rng, 60, 8)
    pt, _ = dirichlet_data(rng, 40, 8)
    g = np.random.default_rng(11)
    ucal, utest = g.random(60), g.random((40, 8))
    cal = loop_scores(pc, lambda i, c, r: ucal[i], lam, k_reg)[np.arange(60), yc]
    q = np.sort(cal)[math.ceil(61 * 0.9) - 1]
    want = loop_scores(pt, lambda i, c, r: utest[i, r - 1], lam, k_reg) <= q
    got, got_q = CF.prediction_sets(pc, yc, pt, score, 0.1, CF.SetRule(randomize=True, seed=11))
    assert got_q == pytest.approx(q, abs=1e-12)
    assert np.array_equal(got, want)
    again, _ = CF.prediction_sets(pc, yc, pt, score, 0.1, CF.SetRule(randomize=True, seed=11))
    other, _ = CF.prediction_sets(pc, yc, pt, score, 0.1, CF.SetRule(randomize=True, seed=12))
    assert np.array_equal(got, again) and not np.array_equal(got, other)


def test_lac_is_not_randomised_and_the_default_is_deterministic():
    rng = np.random.default_rng(1)
    pc, yc = dirichlet_data(rng, 50, 5)
    pt, _ = dirichlet_data(rng, 30, 5)
    plain, _ = CF.prediction_sets(pc, yc, pt, "lac", 0.1)
    rand, _ = CF.prediction_sets(pc, yc, pt, "lac", 0.1, CF.SetRule(randomize=True))
    assert np.array_equal(plain, rand)
    assert np.array_equal(plain, (1 - pt) <= np.sort(1 - pc[np.arange(50), yc])[45])


def test_randomised_aps_covers_1_minus_alpha_over_random_splits():
    """Randomised APS' coverage is 1 - alpha up to 1/(n+1) in expectation
    over splits: 200 splits of 200 / 200 images, mean within 3 Monte Carlo
    standard errors."""
    rng = np.random.default_rng(2)
    p, y = dirichlet_data(rng, 400, 6)
    covs = []
    for split in range(200):
        idx = rng.permutation(400)
        c, t = idx[:200], idx[200:]
        sets, _ = CF.prediction_sets(p[c], y[c], p[t], "aps", 0.1,
                                     CF.SetRule(randomize=True, seed=split))
        covs.append(CF.coverage(sets, y[t]))
    se = np.std(covs) / math.sqrt(len(covs))
    assert abs(np.mean(covs) - 0.9) < 3 * se + 1 / 201


@pytest.mark.parametrize("score", ["lac", "aps", "raps"])
def test_top_label_sets_are_the_sets_with_the_argmax_added(score):
    rng = np.random.default_rng(3)
    pc, yc = dirichlet_data(rng, 40, 7)
    pt, _ = dirichlet_data(rng, 200, 7)
    plain, q = CF.prediction_sets(pc, yc, pt, score, 0.3)
    top, q_top = CF.prediction_sets(pc, yc, pt, score, 0.3, CF.SetRule(top_label=True))
    want = plain.copy()
    want[np.arange(200), pt.argmax(1)] = True
    assert q_top == q and np.array_equal(top, want)
    assert M.get("empty").fn(top, None) == 0.0


def test_empty_share_hand_worked():
    """LAC at a threshold no test score reaches: an image whose top class has
    p = .45 gets an empty set when q = 1 - .5."""
    sets = np.array([[True, False], [False, False], [False, False], [True, True]])
    assert M.get("empty").fn(sets, np.zeros(4, int)) == 0.5
    pc = np.array([[0.9, 0.1]] * 9 + [[0.5, 0.5]])
    got, q = CF.prediction_sets(pc, np.zeros(10, int), np.array([[0.45, 0.55 - 1e-9],
                                                                  [0.9, 0.1]]), "lac", 0.2)
    assert q == pytest.approx(0.1) and got.tolist() == [[False, False], [True, False]]
    assert CF.empty_share(got, None) == 0.5


def test_rule_text_names_only_what_is_set():
    assert CF.SetRule().text() == "" and CF.DETERMINISTIC == CF.SetRule()
    assert CF.SetRule(True, 3, True).text() == "randomized seed 3, top label"
