"""dl2ce's bootstrap interval: the vectorised resampler (bench.calib.measures.debiased)
against the uncertainty-calibration package called on each resample, and a
small simulation where the plug-in ECE's interval misses the true value
almost always and dL2CE's covers it."""
import numpy as np
import pytest

from bench.calib.measures import intervals as C
from bench.calib import measures as M
from bench.calib.measures.debiased import _discrete, dl2ce_interval_resamples, dl2ce_resamples


def package_dl2ce(probs, labels) -> float:
    """The package's estimator on one resample, as documented (rows renormalised)."""
    import calibration

    p = np.asarray(probs, dtype=np.float64)
    p = p / p.sum(axis=1, keepdims=True)
    return float(calibration.get_top_calibration_error(p, np.asarray(labels, np.int64), p=2,
                                                       debias=True))


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def cases():
    rng = np.random.default_rng(3)
    z = rng.normal(size=(300, 10)) * 2
    yield "continuous float32", softmax(z).astype(np.float32), rng.integers(0, 10, 300)
    rows = np.array([[0.8, 0.1, 0.1], [0.6, 0.3, 0.1], [0.5, 0.25, 0.25]])
    yield "discrete", rows[rng.integers(0, 3, 200)], rng.integers(0, 3, 200)
    # 26 distinct rows among 100 samples: just above the package's N/4
    # threshold, so some resamples are discrete (< 25 distinct) and some not
    base = rng.dirichlet(np.ones(4), 26)
    pick = np.concatenate([np.arange(26), rng.integers(0, 26, 74)])
    yield "borderline", base[pick], rng.integers(0, 4, 100)
    yield "fewer samples than bins", softmax(z[:9]), rng.integers(0, 10, 9)


@pytest.mark.parametrize("name,probs,labels", list(cases()), ids=lambda v: v
                         if isinstance(v, str) else "")
def test_resamples_equal_the_package_on_every_resample(name, probs, labels):
    n = len(labels)
    idx = np.random.default_rng(7).integers(0, n, size=(60, n))
    got = dl2ce_resamples(probs, labels, idx)
    want = np.array([package_dl2ce(probs[i], labels[i]) for i in idx])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert (want > 0).any(), "a case where every value is 0 tests nothing"
    squared = dl2ce_resamples(probs, labels, idx, squared=True)  # before floor and root
    np.testing.assert_allclose(squared[want > 0], want[want > 0] ** 2, rtol=1e-9, atol=0)
    assert (squared[want == 0] <= 1e-15).all()
    if name == "borderline":  # both of the package's regimes were exercised
        p = probs / probs.sum(axis=1, keepdims=True)
        assert 0 < _discrete(p, C.multiplicities(idx)).sum() < len(idx)


def test_dl2ce_interval_recentres_the_squared_resamples_on_the_estimate():
    """The interval's values: each resample's debiased squared error, shifted
    so that their mean is the test set's own debiased squared error, floored
    at 0 and rooted (worked here from the per-resample values and the plain
    estimate, both checked against the package above)."""
    assert "dl2ce" in M.bootstrapped() and M.get("dl2ce").resample is dl2ce_interval_resamples
    probs, labels = next(c for c in cases())[1:]
    own = package_dl2ce(probs, labels)
    assert M.get("dl2ce")(probs, labels) == pytest.approx(own, abs=1e-12)
    idx = C.resample_indices(len(labels), 200, 5)
    squared = dl2ce_resamples(probs, labels, idx, squared=True)
    want = np.sqrt(np.maximum(squared - squared.mean() + own ** 2, 0))
    np.testing.assert_allclose(dl2ce_interval_resamples(probs, labels, idx), want, atol=1e-12)
    lo, hi = C.bootstrap_ci(probs, labels, {"dl2ce": M.get("dl2ce").resample})["dl2ce"]
    assert 0 <= lo <= own <= hi


# ---------------------------------------------------------------- coverage --
K, SIGNAL, TAU = 10, 3.0, 1.0015  # nearly calibrated: true ECE ~0.0006


def draw(n, rng):
    """Model probs softmax(TAU z), labels drawn from softmax(z), and the exact
    probability that each prediction is right."""
    z = rng.normal(size=(n, K))
    z[np.arange(n), rng.integers(0, K, n)] += SIGNAL
    q, p = softmax(z), softmax(TAU * z)
    labels = np.minimum((rng.random((n, 1)) > q.cumsum(axis=1)).sum(axis=1), K - 1)
    return p, labels, q[np.arange(n), p.argmax(axis=1)]


def population_values(n=1_000_000, bins=15):
    """The true ECE (15 equal-width bins) and dL2CE (15 equal-mass bins) from
    many draws, using the exact probability of being right (no label noise)."""
    p, _, right = draw(n, np.random.default_rng(99))
    conf = p.max(axis=1)
    gap = conf - right
    which = np.minimum((conf * bins).astype(int), bins - 1)
    ece = np.abs(np.bincount(which, weights=gap, minlength=bins)).sum() / n
    parts = np.array_split(gap[np.argsort(conf)], bins)
    return ece, np.sqrt(sum(len(g) * g.mean() ** 2 for g in parts) / n)


def test_dl2ce_interval_covers_where_the_plug_in_ece_interval_does_not():
    true_ece, true_dl2 = population_values()
    assert 0.0003 < true_ece < 0.001 and true_dl2 < 0.002  # nearly calibrated
    rng = np.random.default_rng(0)
    fns = {m: M.get(m).resample for m in ("ece", "dl2ce")}
    sets, covered = 30, {"ece": 0, "dl2ce": 0}
    for _ in range(sets):
        p, y, _ = draw(500, rng)
        ci = C.bootstrap_ci(p, y, fns, n_boot=300)
        covered["ece"] += ci["ece"][0] <= true_ece <= ci["ece"][1]
        covered["dl2ce"] += ci["dl2ce"][0] <= true_dl2 <= ci["dl2ce"][1]
    assert covered["ece"] <= 0.05 * sets, covered  # the plug-in is biased upwards
    assert covered["dl2ce"] >= 0.8 * sets, covered
