"""Post-hoc calibrators (bench/calib/posthoc.py) against closed forms, hand-worked
bins, scikit-learn applied by hand, brute-force search and a second fit of the
same objective by torch autograd."""
import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from sklearn.isotonic import IsotonicRegression

from bench.calib import posthoc as ph
from bench.calib.temperature import fit_temperature, scaled_probs
from bench.core.errors import BenchError
from bench.calib.measures.functions import ece, nll
from bench.calib.metrics import softmax

NAMES = sorted(ph.CALIBRATORS)


def draw(n, k, seed, scale=None, bias=None, spread=3.0):
    """Logits z and labels ~ softmax(scale * z + bias): a known miscalibration."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, spread, (n, k))
    s = z * (1.0 if scale is None else np.asarray(scale)) + (0.0 if bias is None else bias)
    u = rng.random((n, 1))
    return z, (u > softmax(s).cumsum(1)).sum(1).clip(max=k - 1)


def mirrored(n, seed, t_star):
    """K = 2 and symmetric: each sample also appears with its classes swapped."""
    z, y = draw(n, 2, seed, scale=1 / t_star)
    return np.vstack([z, z[:, ::-1]]), np.concatenate([y, 1 - y])


def overconfident(n=3000, k=5, seed=0):
    return draw(n, k, seed, scale=0.3, bias=np.linspace(-0.6, 0.6, k))


# ------------------------------------------------------- vector scaling --
def test_vector_recovers_known_scale_and_bias():
    a, c = np.array([0.5, 1.0, 1.5, 2.0]), np.array([0.3, -0.2, 0.1, -0.2])  # sum(c) = 0
    z, y = draw(20000, 4, 1, scale=a, bias=c, spread=2.0)
    fit = ph.fit_vector(z, y)
    np.testing.assert_allclose(fit.scale, a, atol=0.08)
    np.testing.assert_allclose(fit.bias, c, atol=0.05)
    assert abs(fit.bias.sum()) < 1e-9  # the shift softmax ignores stays at zero


def test_vector_with_two_symmetric_classes_is_temperature_scaling():
    z, y = mirrored(1500, 2, t_star=1.8)
    t = fit_temperature(z, y)
    fit = ph.fit_vector(z, y)
    np.testing.assert_allclose(fit.scale, [1 / t, 1 / t], rtol=1e-5)
    np.testing.assert_allclose(fit.bias, [0, 0], atol=1e-6)
    np.testing.assert_allclose(ph.apply_vector(z, fit), scaled_probs(z, t), atol=1e-6)


def autograd_fit(loss_fn, shapes):
    """Minimise loss_fn(*tensors) from zeros: gradients by torch autograd, steps by
    scipy's BFGS (torch.optim would import torch._dynamo, seconds per process)."""
    sizes = [int(np.prod(s)) for s in shapes]

    def value_and_grad(theta):
        parts = torch.from_numpy(theta).split(sizes)
        tensors = [t.reshape(s).requires_grad_() for t, s in zip(parts, shapes)]
        loss = loss_fn(*tensors)
        grads = torch.autograd.grad(loss, tensors)
        return loss.item(), torch.cat([g.reshape(-1) for g in grads]).numpy()

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only cost time
    try:
        res = minimize(value_and_grad, np.zeros(sum(sizes)), jac=True, method="BFGS",
                       options={"gtol": 1e-10, "maxiter": 5000})
    finally:
        torch.set_num_threads(threads)
    return [a.reshape(s) for a, s in zip(np.split(res.x, np.cumsum(sizes)[:-1]), shapes)]


def test_vector_matches_torch_autograd_fit():
    z, y = draw(2000, 4, 3, scale=[0.4, 0.7, 0.5, 1.2], bias=[0.5, 0, -0.2, -0.3])
    zt, yt = torch.from_numpy(z), torch.from_numpy(y)
    w, b = autograd_fit(lambda w, b: torch.nn.functional.cross_entropy(zt * w + b, yt),
                        [(4,), (4,)])
    fit = ph.fit_vector(z, y)
    np.testing.assert_allclose(fit.scale, w, atol=1e-5)
    np.testing.assert_allclose(fit.bias, b - b.mean(), atol=1e-5)
    z_test = draw(500, 4, 4)[0]
    np.testing.assert_allclose(ph.apply_vector(z_test, fit), softmax(z_test * w + b), atol=1e-6)


# ---------------------------------------------------------- Dirichlet --
def torch_odir(z, y, reg):
    """The ODIR objective written again: mean NLL of softmax(W log p + b)
    + reg (sum of squared off-diagonal W / (K(K-1)) + sum b^2 / K)."""
    k = z.shape[1]
    x = torch.log_softmax(torch.from_numpy(z), dim=1)
    yt = torch.from_numpy(y)
    off = 1 - torch.eye(k, dtype=torch.float64)

    def loss(w, b):
        return (torch.nn.functional.cross_entropy(x @ w.T + b, yt)
                + reg * ((w * off) ** 2).sum() / (k * (k - 1)) + reg * (b ** 2).sum() / k)

    return autograd_fit(loss, [(k, k), (k,)])


@pytest.mark.parametrize("reg", [1e-3, 0.5])
def test_dirichlet_matches_torch_autograd_fit(reg):
    z, y = draw(1500, 4, 5, scale=[0.3, 0.8, 0.5, 0.4], bias=[0.4, -0.4, 0.2, -0.2])
    w, b = torch_odir(z, y, reg)
    fit = ph.fit_dirichlet(z, y, reg=reg)
    assert float(fit.reg) == reg
    np.testing.assert_allclose(fit.weights, w, atol=1e-5)
    np.testing.assert_allclose(fit.bias, b, atol=1e-5)
    z_test = draw(500, 4, 6)[0]
    expected = softmax(torch.log_softmax(torch.from_numpy(z_test), 1).numpy() @ w.T + b)
    np.testing.assert_allclose(ph.apply_dirichlet(z_test, fit), expected, atol=1e-6)


def test_dirichlet_with_huge_regularisation_is_temperature_scaling_for_two_classes():
    # reg -> inf: no off-diagonal, no intercept; W = diag(d) on log p. With two
    # symmetric classes d is one number and softmax(d log p) = softmax(z / T).
    z, y = mirrored(1500, 7, t_star=0.6)
    fit = ph.fit_dirichlet(z, y, reg=1e9)
    t = fit_temperature(z, y)
    assert np.abs(fit.weights - np.diag(np.diag(fit.weights))).max() < 1e-6
    assert np.abs(fit.bias).max() < 1e-6
    np.testing.assert_allclose(np.diag(fit.weights), [1 / t, 1 / t], rtol=1e-4)
    np.testing.assert_allclose(ph.apply_dirichlet(z, fit), scaled_probs(z, t), atol=1e-5)


def test_dirichlet_cross_validation_folds_and_choice():
    y = np.array([0] * 7 + [1] * 3 + [2] * 10)
    fold = ph._folds(y, 5)
    for c in range(3):  # each class spread over the folds in turn, no draw
        np.testing.assert_array_equal(fold[y == c], np.arange((y == c).sum()) % 5)
    # temperature-scaled data has no class-pair structure: CV keeps W nearly
    # diagonal (large reg); class-dependent scales and biases need a smaller one
    z, y = draw(1500, 6, 8, scale=0.5)
    assert float(ph.fit_dirichlet(z, y).reg) >= 10
    z, y = draw(1500, 4, 9, scale=[0.2, 1.5, 0.5, 1.0], bias=[1.0, -1.0, 0.5, -0.5])
    assert float(ph.fit_dirichlet(z, y).reg) <= 1


# -------------------------------------------------- histogram binning --
def logits_of(p):
    return np.log(np.asarray(p, dtype=np.float64))  # softmax(log p) = p


VAL_P = [[0.1, 0.3, 0.6], [0.2, 0.5, 0.3], [0.3, 0.1, 0.6],
         [0.5, 0.4, 0.1], [0.6, 0.2, 0.2], [0.7, 0.25, 0.05]]
VAL_Y = [2, 1, 0, 0, 1, 0]


def test_histogram_binning_hand_worked():
    # 6 samples, 3 equal-mass bins of two per class; the edges are the 3rd and
    # 5th sorted scores: class 0 [.3, .6] with frequencies 0, 1, 1/2; class 1
    # [.25, .4]: 1/2, 0, 1/2; class 2 [.2, .6]: 0, 0, 1/2
    fit = ph.fit_binning(logits_of(VAL_P), np.array(VAL_Y), n_bins=3)
    for k, (edges, values) in enumerate([([.3, .6], [0, 1, .5]), ([.25, .4], [.5, 0, .5]),
                                         ([.2, .6], [0, 0, .5])]):
        np.testing.assert_allclose(fit.edges[k], edges, rtol=1e-12)
        np.testing.assert_allclose(fit.values[k], values, rtol=1e-12)
    test = [[0.15, 0.35, 0.5], [0.4, 0.45, 0.15], [0.8, 0.12, 0.08], [0.05, 0.05, 0.9]]
    expected = [[3 / 6, 2 / 6, 1 / 6],  # every bin says 0: the validation class shares
                [2 / 3, 1 / 3, 0], [0.5, 0.5, 0], [0, 0.5, 0.5]]
    np.testing.assert_allclose(ph.apply_binning(logits_of(test), fit), expected, atol=1e-12)
    # the validation rows in their own bins; a score equal to an edge is in the upper bin
    own = [[0, 0, 1], [0, 1, 0], [.5, .25, .25], [2 / 3, 1 / 3, 0], [.5, .5, 0], [1, 0, 0]]
    np.testing.assert_allclose(ph.apply_binning(logits_of(VAL_P), fit), own, atol=1e-12)


def test_histogram_binning_merges_tied_scores_instead_of_leaving_empty_bins():
    s = np.array([0.2, 0.2, 0.2, 0.2, 0.5, 0.9])  # the cut after 2 falls inside the ties
    np.testing.assert_array_equal(ph._equal_mass_edges(s, 3), [0.5])
    z = np.zeros((4, 2))  # every score 0.5: one bin, the class shares
    fit = ph.fit_binning(z, np.array([0, 1, 1, 1]))
    assert [len(v) for v in fit.values] == [1, 1]
    np.testing.assert_allclose(ph.apply_binning(np.array([[3.0, -1.0]]), fit), [[0.25, 0.75]])


# ------------------------------------------------ isotonic regression --
def test_isotonic_equals_scikit_learn_applied_per_class():
    zv, yv = overconfident(800, 4, seed=10)
    zt = 2.0 * draw(400, 4, 11)[0]  # wider: scores beyond the validation range are clipped
    pv, pt = softmax(zv), softmax(zt)
    q = np.stack([IsotonicRegression(out_of_bounds="clip").fit(pv[:, k], yv == k)
                  .predict(pt[:, k]) for k in range(4)], axis=1)
    expected = q / q.sum(1, keepdims=True)
    np.testing.assert_allclose(ph.apply_isotonic(zt, ph.fit_isotonic(zv, yv)), expected,
                               atol=1e-12)


def test_isotonic_all_zero_row_gets_the_validation_class_shares():
    # every class's positives score >= .55 and it has negatives up to .4, so
    # each step function is 0 at 1/3
    p = [[.9, .05, .05], [.05, .9, .05], [.05, .05, .9], [.4, .55, .05],
         [.55, .4, .05], [.05, .55, .4], [.55, .05, .4]]
    y = np.array([0, 1, 2, 1, 0, 1, 0])
    out = ph.apply_isotonic(np.zeros((1, 3)), ph.fit_isotonic(logits_of(p), y))
    np.testing.assert_allclose(out, [[3 / 7, 3 / 7, 1 / 7]], atol=1e-12)


# ---------------------------------------- ensemble temperature scaling --
def test_ets_weights_match_a_brute_force_search_of_the_simplex():
    z, y = draw(3000, 5, 12, scale=0.25)
    noisy = np.random.default_rng(13).random(3000) < 0.3  # label noise: uniform part helps
    y = np.where(noisy, np.random.default_rng(14).integers(0, 5, 3000), y)
    fit = ph.fit_ets(z, y)
    assert float(fit.temperature) == fit_temperature(z, y)
    parts = np.stack([softmax(z / float(fit.temperature)), softmax(z), np.full(z.shape, 0.2)],
                     -1)[np.arange(len(y)), y]

    def search(lo_a, lo_b, width, step):  # every (a, b, 1 - a - b) >= 0 on a grid
        a, b = np.meshgrid(np.arange(lo_a, lo_a + width, step), np.arange(lo_b, lo_b + width, step))
        pts = np.stack([a.ravel(), b.ravel(), 1 - a.ravel() - b.ravel()], 1)
        pts = pts[(pts > -1e-12).all(1)].clip(0)
        losses = -np.log(parts @ pts.T).mean(0)
        return pts[np.argmin(losses)], losses.min()

    coarse, _ = search(0, 0, 1.0 + 1e-9, 0.02)
    best, best_loss = search(coarse[0] - 0.02, coarse[1] - 0.02, 0.04 + 1e-9, 0.001)
    own = -np.log(parts @ fit.weights).mean()
    assert own <= best_loss + 1e-12
    np.testing.assert_allclose(fit.weights, best, atol=2e-3)
    assert fit.weights[2] > 0.05  # the search found an interior optimum, not plain TS


# ------------------------------------------------ every calibrator --
@pytest.mark.parametrize("name", NAMES)
def test_calibrator_reduces_validation_nll_and_ece(name):
    z, y = overconfident()
    cal = ph.CALIBRATORS[name]
    probs = cal.apply(z, cal.fit(z, y))
    assert nll(probs, y) < nll(softmax(z), y) - 0.1
    assert ece(probs, y) < ece(softmax(z), y) / 2


@pytest.mark.parametrize("name", NAMES)
def test_probabilities_are_valid_and_heads_are_averaged_first(name):
    z, y = overconfident(600, 4, seed=15)
    cal = ph.CALIBRATORS[name]
    params = cal.fit(z, y)
    extreme = draw(300, 4, 16, spread=60.0)[0]  # softmax saturates at 0 and 1
    for test in (z, extreme):
        probs = cal.apply(test, params)
        assert probs.dtype == np.float64 and probs.shape == test.shape
        assert np.all(probs >= 0) and np.all(np.isfinite(probs))
        assert np.abs(probs.sum(1) - 1).max() <= 1e-12
    noise = np.random.default_rng(17).normal(0, 1, (600, 3, 4))
    heads = z[:, None] + noise - noise.mean(1, keepdims=True)  # mean over heads: z again
    np.testing.assert_allclose(cal.apply(heads, cal.fit(heads, y)), cal.apply(z, params),
                               atol=1e-9)


@pytest.mark.parametrize("name", NAMES)
def test_same_input_gives_bit_identical_output(name):
    z, y = overconfident(500, 4, seed=18)
    z_copy, y_copy = z.copy(), y.copy()
    cal = ph.CALIBRATORS[name]
    first, second = cal.fit(z, y), cal.fit(z.copy(), y.copy())
    for field in first.__dataclass_fields__:
        a, b = getattr(first, field), getattr(second, field)
        for u, v in zip(a if isinstance(a, tuple) else [a], b if isinstance(b, tuple) else [b]):
            assert u.tobytes() == v.tobytes()
            assert not u.flags.writeable
    assert cal.apply(z, first).tobytes() == cal.apply(z, second).tobytes()
    np.testing.assert_array_equal(z, z_copy)  # inputs untouched
    np.testing.assert_array_equal(y, y_copy)


def bad_inputs():
    z, y = overconfident(50, 4, seed=20)
    nan = z.copy()
    nan[3, 1] = np.nan
    return [("nan logits", nan, y, "nan at row 3, class 1"),
            ("inf logits", np.where(np.arange(4) == 2, np.inf, z), y, "inf at row 0, class 2"),
            ("label out of range", z, np.where(np.arange(50) == 7, 9, y), "label 9 at row 7"),
            ("negative label", z, np.where(np.arange(50) == 4, -1, y), "label -1 at row 4"),
            ("lengths differ", z, y[:-1], "got shape (49,)"),
            ("one class", z, np.full(50, 2), "only class 2"),
            ("float labels", z, y.astype(float), "got dtype float64"),
            ("one column", z[:, :1], y * 0, "shape (50, 1)"),
            ("no rows", z[:0], y[:0], "shape (0, 4)")]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case", bad_inputs(), ids=lambda c: c[0])
def test_bad_input_is_one_line_naming_the_value(name, case):
    _, z, y, needle = case
    with pytest.raises(BenchError) as err:
        ph.CALIBRATORS[name].fit(z, y)
    message = str(err.value)
    assert needle in message and message.startswith(f"{name}: ") and "\n" not in message


@pytest.mark.parametrize("name", NAMES)
def test_bad_test_logits_are_refused(name):
    z, y = overconfident(50, 4, seed=21)
    cal = ph.CALIBRATORS[name]
    params = cal.fit(z, y)
    bad = z.copy()
    bad[2, 0] = np.nan
    with pytest.raises(BenchError, match="test logits hold nan at row 2, class 0"):
        cal.apply(bad, params)
    if name != "ets":  # defined for any K
        with pytest.raises(BenchError, match="test logits have 5 classes, the calibrator "
                                             "was fitted on 4"):
            cal.apply(np.zeros((3, 5)), params)


def test_bad_settings_are_refused():
    z, y = overconfident(50, 4, seed=22)
    with pytest.raises(BenchError, match="reg must be a finite number > 0.*got 0"):
        ph.fit_dirichlet(z, y, reg=0.0)
    with pytest.raises(BenchError, match="n_folds must be an integer >= 2, got 1"):
        ph.fit_dirichlet(z, y, n_folds=1)
    with pytest.raises(BenchError, match="n_bins must be an integer >= 1, got 2.5"):
        ph.fit_binning(z, y, n_bins=2.5)


def test_table_names_each_calibrator_once_with_a_one_line_title():
    assert list(ph.CALIBRATORS) == ["vs", "dirichlet", "hb", "iso", "ets"]
    for cal in ph.CALIBRATORS.values():
        assert cal.title and "\n" not in cal.title and cal.version >= 1
        assert cal.fit.__module__ == cal.apply.__module__ == "bench.calib.posthoc"
