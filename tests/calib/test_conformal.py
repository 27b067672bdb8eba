"""Split conformal prediction sets (issue 41, "Prediction sets"): the scores
against brute-force loops written here, the quantile against hand-worked
ranks, the set measures on hand-made sets, and the coverage guarantee by
simulation: over many independent calibration / test draws of exchangeable
data, the mean coverage is the closed form 1 - floor((n+1) alpha) / (n+1)
(>= 1 - alpha) and the per-draw coverages scatter as the Beta-binomial law
of Angelopoulos and Bates (2021, Sec. 3.2) says."""
from __future__ import annotations

import math

import numpy as np
import pytest

from bench.calib import conformal as CF
from bench.calib import measures as M
from bench.core.errors import BenchError


def brute_aps(p: np.ndarray) -> np.ndarray:
    """Mass of the classes ranked at or above each class (ties: lower index first)."""
    n, k = p.shape
    out = np.zeros((n, k))
    for i in range(n):
        for c in range(k):
            out[i, c] = sum(p[i, j] for j in range(k)
                            if p[i, j] > p[i, c] or (p[i, j] == p[i, c] and j <= c))
    return out


def brute_rank(p: np.ndarray) -> np.ndarray:
    n, k = p.shape
    return np.array([[1 + sum(1 for j in range(k) if p[i, j] > p[i, c]
                              or (p[i, j] == p[i, c] and j < c)) for c in range(k)]
                     for i in range(n)])


def test_scores_against_loops():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(7), 30)
    p[0] = [0.3, 0.3, 0.1, 0.1, 0.1, 0.05, 0.05]  # ties, broken by class index
    np.testing.assert_allclose(CF.lac_scores(p), 1 - p)
    np.testing.assert_allclose(CF.aps_scores(p), brute_aps(p), atol=1e-12)
    np.testing.assert_array_equal(CF.ranks(p), brute_rank(p))
    lam, k_reg = CF.RAPS.lam, CF.RAPS.k_reg
    np.testing.assert_allclose(CF.raps_scores(p),
                               brute_aps(p) + lam * np.maximum(0, brute_rank(p) - k_reg),
                               atol=1e-12)
    np.testing.assert_allclose(CF.raps_scores(p, CF.RapsParams(k_reg=0, lam=0.0)), brute_aps(p))


def test_raps_paper_defaults_and_hand_example():
    assert (CF.RAPS.k_reg, CF.RAPS.lam) == (5, 0.01)
    p = np.array([[0.5, 0.2, 0.15, 0.1, 0.03, 0.02, 0.0]])
    # class 6 ranks 7th: mass 1.0, penalty 0.01 x (7 - 5)
    assert CF.raps_scores(p)[0, 6] == pytest.approx(1.0 + 0.02)
    assert CF.raps_scores(p, CF.RapsParams(k_reg=1, lam=0.5))[0, 1] == pytest.approx(0.7 + 0.5)


@pytest.mark.parametrize("n,alpha,rank", [(9, 0.1, 9), (19, 0.1, 18), (99, 0.1, 90),
                                          (999, 0.1, 900), (100, 0.05, 96), (4, 0.5, 3)])
def test_quantile_is_the_ceil_rank(n, alpha, rank):
    """ceil((n+1)(1-alpha)) by hand: 10 x 0.9 = 9, 20 x 0.9 = 18, 1000 x 0.9 = 900
    (which floating point puts a hair above 900), 101 x 0.95 = 95.95 -> 96."""
    scores = np.random.default_rng(1).permutation(np.arange(1, n + 1)) / 10
    assert CF.quantile(scores, alpha) == pytest.approx(rank / 10)


def test_too_few_calibration_images_give_full_sets():
    assert CF.quantile(np.arange(8) / 10, 0.1) == math.inf  # ceil(9 x 0.9) = 9 > 8
    sets, q = CF.prediction_sets(np.full((8, 3), 1 / 3), np.zeros(8, int),
                                 np.array([[0.9, 0.05, 0.05]]), "aps", 0.1)
    assert q == math.inf and sets.all()


def test_hand_worked_lac_sets():
    """Calibration p_y = .9 .8 .7 .6 .5 .4 .3 .2 .1 (scores .1 ... .9), alpha = 0.2:
    ceil(10 x 0.8) = 8th smallest score = 0.8: a class is in the set when p >= 0.2."""
    cal = np.array([[v, 1 - v] for v in (.9, .8, .7, .6, .5, .4, .3, .2, .1)])
    sets, q = CF.prediction_sets(cal, np.zeros(9, int),
                                 np.array([[0.85, 0.15], [0.5, 0.5], [0.1, 0.9]]), "lac", 0.2)
    assert q == pytest.approx(0.8)
    assert sets.tolist() == [[True, False], [True, True], [False, True]]


def test_set_measures_by_hand():
    sets = np.array([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [0, 1, 1, 1, 1],
                     [0, 0, 0, 0, 0]], bool)
    labels = np.array([0, 2, 1, 0, 3])
    # covered: yes, no, yes, no, no; sizes 1, 2, 3, 4, 0
    assert M.get("coverage").fn(sets, labels) == pytest.approx(2 / 5)
    assert M.get("setsize").fn(sets, labels) == pytest.approx(2.0)
    # strata 0-1: {size 1 covered, size 0 missed} 1/2; 2-3: 1/2; 4-10: 0/1
    assert CF.stratum_coverages(sets, labels) == {(0, 1): (0.5, 2), (2, 3): (0.5, 2),
                                                  (4, 10): (0.0, 1)}
    assert M.get("sscov").fn(sets, labels) == 0.0


def test_set_measures_stay_out_of_the_probability_tables():
    assert set(M.set_names()) == {"coverage", "setsize", "sscov", "empty"}
    assert not set(M.set_names()) & set(M.names())
    assert all(M.get(m).sets and not M.get(m).rank for m in M.set_names())


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_bad_alpha_is_one_line(alpha):
    with pytest.raises(BenchError, match="--sets-alpha .*> 0 and < 1"):
        CF.prediction_sets(np.full((5, 2), .5), np.zeros(5, int), np.full((1, 2), .5), "lac",
                           alpha)


def test_unknown_score_names_the_choices():
    with pytest.raises(BenchError, match="lac.*aps.*raps|aps.*lac"):
        CF.prediction_sets(np.full((5, 2), .5), np.zeros(5, int), np.full((1, 2), .5), "thr")


# ------------------------------------------------------------ the guarantee --
K, N_CAL, N_TEST, DRAWS = 5, 19, 100, 3000


def draw(rng, n_draws: int, n: int):
    """Exchangeable images of a miscalibrated model: its probabilities are a
    Dirichlet draw, the true class is drawn from their square (normalised),
    so a raw probability is no coverage by itself."""
    p = rng.dirichlet(np.full(K, 0.7), (n_draws, n))
    q = p ** 2 / (p ** 2).sum(-1, keepdims=True)
    u = rng.random((n_draws, n, 1))
    y = (q.cumsum(-1) < u).sum(-1).clip(0, K - 1)
    return p, y


@pytest.mark.parametrize("score", ["lac", "aps", "raps"])
def test_coverage_guarantee_by_simulation(score):
    """n = 19, alpha = 0.1: l = floor(20 x 0.1) = 2, so coverage given the
    calibration draw is Beta(18, 2): mean 0.9 = 1 - alpha exactly; one too
    few or too many calibration ranks would give 0.85 or 0.95."""
    alpha, rng = 0.1, np.random.default_rng(41)
    pc, yc = draw(rng, DRAWS, N_CAL)
    pt, yt = draw(rng, DRAWS, N_TEST)
    covs = np.array([M.get("coverage").fn(CF.prediction_sets(pc[d], yc[d], pt[d], score,
                                                             alpha)[0], yt[d])
                     for d in range(DRAWS)])
    lo = math.floor((N_CAL + 1) * alpha)
    a, b = N_CAL + 1 - lo, lo
    mean = a / (a + b)
    var_beta = a * b / ((a + b) ** 2 * (a + b + 1))
    var = var_beta + (mean * (1 - mean) - var_beta) / N_TEST  # beta-binomial, per draw
    se = math.sqrt(var / DRAWS)
    assert 1 - alpha <= mean <= 1 - alpha + 1 / (N_CAL + 1)
    assert covs.mean() >= 1 - alpha - 4 * se
    assert abs(covs.mean() - mean) <= 4 * se
    # the spread too: a quantile computed from the test draw would shrink it
    assert covs.std() == pytest.approx(math.sqrt(var), rel=0.1)


def test_a_plugin_score_makes_sets_and_a_taken_name_is_refused():
    """bench.plugins.register_conformal_score: a plugin's score 2 x (1 - p).
    By hand: true-class scores 0.6, 1.0, 0.8; alpha 0.5 takes the
    ceil(4 x 0.5) = 2nd smallest, 0.8, so a class is in the set when
    2 (1 - p) <= 0.8, p >= 0.6: LAC's sets with its quantile doubled."""
    from bench.plugins import register_conformal_score

    def doubled(probs):
        return 2.0 * (1.0 - np.asarray(probs, dtype=np.float64))

    register_conformal_score("test_lac2", doubled, "LAC2", "a plugin's score")
    try:
        cal = np.array([[0.7, 0.2, 0.1], [0.2, 0.5, 0.3], [0.1, 0.3, 0.6]])
        test = np.array([[0.45, 0.35, 0.2], [0.1, 0.2, 0.7]])
        labels = np.array([0, 1, 2])
        sets, q = CF.prediction_sets(cal, labels, test, score="test_lac2", alpha=0.5)
        lac_sets, lac_q = CF.prediction_sets(cal, labels, test, score="lac", alpha=0.5)
        assert q == pytest.approx(0.8) == pytest.approx(2 * lac_q)
        assert sets.tolist() == [[False, False, False], [False, False, True]]
        assert (sets == lac_sets).all()
        assert CF.SCORES.origin("test_lac2") != "built-in"  # this test module registered it
        with pytest.raises(BenchError, match="duplicate conformal score name 'lac'"):
            register_conformal_score("lac", doubled, "LAC", "again")
    finally:
        CF.SCORES._entries.pop("test_lac2")
