"""Temperature scaling, the deep ensemble and the summary rows from run records,
checked against the test's own computations: T from a grid + golden-section
search over log T on the validation split only, metrics from scikit-learn and
torchmetrics. Validation and test logits differ, and so do ensemble members,
so a harness that fits T on test or averages logits gives other numbers."""
import numpy as np
import pytest
import torch
from scipy.special import log_softmax, softmax
from sklearn.metrics import accuracy_score, log_loss
from torchmetrics.classification import MulticlassCalibrationError

from bench.core.store import write_record
from variantutil import deep_ensemble, temperature_scaled
from bench.report.render.summary import summary_rows

K = 5


def sklearn_nll(probs, labels):
    return log_loss(labels, probs, labels=range(probs.shape[1]))


def tm_ece(probs, labels):
    return float(MulticlassCalibrationError(num_classes=probs.shape[1], n_bins=15, norm="l1")(
        torch.from_numpy(np.asarray(probs, dtype=np.float64)), torch.from_numpy(labels)))


def scored(probs, labels):
    return {"acc": accuracy_score(labels, probs.argmax(1)), "ece": tm_ece(probs, labels),
            "nll": sklearn_nll(probs, labels)}


def own_temperature(z, labels):
    """argmin_T mean -log softmax(z / T)_y: a grid over log T, then golden sections."""
    def nll(log_t):
        return -log_softmax(z / np.exp(log_t), axis=1)[np.arange(len(labels)), labels].mean()

    grid = np.linspace(-4, 4, 161)
    i = int(np.argmin([nll(g) for g in grid]))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    golden = (np.sqrt(5) - 1) / 2
    for _ in range(80):
        a, b = hi - golden * (hi - lo), lo + golden * (hi - lo)
        lo, hi = (lo, b) if nll(a) < nll(b) else (a, hi)
    return float(np.exp((lo + hi) / 2))


def draws(seed, n, scale, t_star, heads=1, spread=1.0):
    """[n, heads, K] logits whose head mean z has labels ~ softmax(z / t_star)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, scale, (n, K))
    y = np.array([rng.choice(K, p=p) for p in softmax(z / t_star, axis=1)])
    noise = rng.normal(0, spread, (n, heads, K))
    return (z[:, None] + noise - noise.mean(1, keepdims=True)).astype(np.float32), y


def record(root, method, seed, val, test):
    path = root / "d" / "b" / method / "h" / f"seed{seed}"
    arrays = {"val_logits": val[0], "val_labels": val[1],
              "test_logits": test[0], "test_labels": test[1]}
    heads = val[0].shape[1]
    mean_probs = softmax(test[0].astype(np.float64), axis=2).mean(1)
    return write_record(path, {"method": method, "seed": seed, "heads": heads},
                        {"test": scored(mean_probs, test[1])}, arrays)


# ------------------------------------------------------ temperature scaling --
@pytest.mark.parametrize("heads", [1, 3])
def test_ts_fits_t_on_validation_only_and_scores_test(tmp_path, heads):
    val = draws(1, 600, 4.0, 2.5, heads)  # over-confident validation logits: T* = 2.5
    test = draws(2, 500, 2.0, 0.6, heads)  # test logits from another law (T* = 0.6)
    z_val = val[0].astype(np.float64).mean(1)  # paper appendix: head logits averaged first
    z_test = test[0].astype(np.float64).mean(1)
    t_val, t_test = own_temperature(z_val, val[1]), own_temperature(z_test, test[1])
    assert abs(np.log(t_val / t_test)) > 0.5  # fitting on test would give another T

    out = temperature_scaled(record(tmp_path, "m", 0, val, test))
    assert out["temperature"] == pytest.approx(t_val, rel=1e-3)
    expected = scored(softmax(z_test / t_val, axis=1), test[1])
    for key, value in expected.items():
        assert out["test"][key] == pytest.approx(value, abs=2e-5), key
    assert out["val"]["nll"] == pytest.approx(sklearn_nll(softmax(z_val / t_val, axis=1),
                                                          val[1]), abs=2e-6)


# ---------------------------------------------------------- deep ensemble --
def ensemble_members(tmp_path, n_members=3):
    labels_val = np.random.default_rng(10).integers(0, K, 400)
    labels_test = np.random.default_rng(11).integers(0, K, 300)
    paths, members = [], []
    for s in range(n_members):
        rng = np.random.default_rng(100 + s)
        # members differ in scale too, so mean of logits != mean of probabilities
        val = (rng.normal(0, 1 + 2 * s, (400, 1, K)).astype(np.float32), labels_val)
        test = (rng.normal(0, 1 + 2 * s, (300, 1, K)).astype(np.float32), labels_test)
        val[0][np.arange(400), 0, labels_val] += 2.0  # better than chance, so T is finite
        test[0][np.arange(300), 0, labels_test] += 2.0
        paths.append(record(tmp_path, "sl1h", s, val, test))
        members.append(test[0][:, 0].astype(np.float64))
    return paths, members, labels_test


def test_deep_ensemble_scores_the_mean_of_member_softmaxes(tmp_path):
    paths, members, labels = ensemble_members(tmp_path)
    probs = np.mean([softmax(z, axis=1) for z in members], axis=0)
    expected = scored(probs, labels)
    wrong = scored(softmax(np.mean(members, axis=0), axis=1), labels)  # mean of logits
    assert abs(wrong["nll"] - expected["nll"]) > 0.01 and abs(wrong["ece"] - expected["ece"]) > 0.01
    ens = deep_ensemble(paths)
    assert ens["members"] == 3
    for key, value in expected.items():
        assert ens["test"][key] == pytest.approx(value, abs=1e-5), key


# ---------------------------------------------------------------- summary --
class Exp:
    def __init__(self, method):
        self.method, self.backbone = method, "b"


def test_summary_rows_against_independent_numbers(tmp_path):
    paths, members, labels = ensemble_members(tmp_path, 2)
    exp = Exp("sl1h")  # one experiment, two seeds
    rows = summary_rows([(exp, p) for p in paths])
    assert [r[0] for r in rows] == ["SL1H", "SL1H+TS", "D-Ens"]
    per_seed = [scored(softmax(z, axis=1), labels) for z in members]
    for col, key in ((3, "acc"), (4, "ece"), (5, "nll")):
        vals = 100 * np.array([m[key] for m in per_seed])
        assert rows[0][col] == f"{vals.mean():.2f} ± {vals.std():.2f}"
    dens = scored(np.mean([softmax(z, axis=1) for z in members], axis=0), labels)
    assert rows[2][2:6] == [2, *(f"{100 * dens[k]:.2f}" for k in ("acc", "ece", "nll"))]
    # +ts: each seed's T from its own validation logits
    temps = []
    for p in paths:
        with np.load(p / "predictions.npz") as f:
            temps.append(own_temperature(f["val_logits"][:, 0].astype(np.float64),
                                         f["val_labels"]))
    assert float(rows[1][6]) == pytest.approx(np.mean(temps), abs=1.5e-3)
    nlls = 100 * np.array([sklearn_nll(softmax(z / t, axis=1), labels)
                           for z, t in zip(members, temps)])
    mean, std = (float(x) for x in rows[1][5].split(" ± "))
    assert mean == pytest.approx(nlls.mean(), abs=0.011) and std == pytest.approx(nlls.std(),
                                                                                  abs=0.011)


# ------------------------------------------------------ the search's edges --
def test_t_stops_at_the_documented_bounds():
    """Anti-correlated validation logits: NLL falls as T -> inf, and the search
    stops at exp(10). Separable ones: NLL falls as T -> 0; the gradient vanishes
    (and L-BFGS stops) before exp(-10), in a stable float range (no overflow)."""
    from bench.calib.temperature import fit_temperature

    rng = np.random.default_rng(3)
    z = rng.normal(0, 5, (200, K))
    assert fit_temperature(z, z.argmin(1)) == pytest.approx(np.exp(10), rel=1e-9)
    t = fit_temperature(z, z.argmax(1))
    assert np.exp(-10) <= t < 1e-3 and np.isfinite(t)


def test_t_falls_back_to_one_when_the_optimiser_does_worse(monkeypatch):
    import scipy.optimize

    from bench.calib.temperature import fit_temperature

    z, y = draws(4, 300, 4.0, 2.0)
    for bad in (np.inf, 1e9):  # diverged, or worse than T = 1
        monkeypatch.setattr(scipy.optimize, "minimize", lambda *a, bad=bad, **k:
                            scipy.optimize.OptimizeResult(x=np.array([1.5]), fun=bad))
        assert fit_temperature(z, y) == 1.0
