"""The extra calibration measures against independent implementations
(torchmetrics, the uncertainty-calibration package's own binning estimator)
and hand-worked values."""
import numpy as np
import pytest
import torch
from torchmetrics.classification import BinaryCalibrationError, MulticlassCalibrationError

from bench.calib import measures as registry
from bench.calib.measures import functions as F
from bench.calib.measures import intervals as C
from bench.calib.metrics import softmax


def random_probs(n=600, k=5, seed=0, sharp=2.5, float32=True):
    rng = np.random.default_rng(seed)
    probs = softmax(rng.normal(size=(n, k)) * sharp)
    labels = rng.integers(0, k, size=n)
    return (probs.astype(np.float32) if float32 else probs), labels


def torchmetrics_ece(probs, labels, n_bins, norm="l1"):
    k = probs.shape[1]
    m = MulticlassCalibrationError(num_classes=k, n_bins=n_bins, norm=norm)
    return float(m(torch.from_numpy(np.asarray(probs)), torch.from_numpy(labels)))


@pytest.mark.parametrize("n_bins", F.BIN_COUNTS)
def test_ece_at_every_bin_count_matches_torchmetrics_l1(n_bins):
    probs, labels = random_probs(seed=n_bins)
    assert registry.get(f"ece{n_bins}")(probs, labels) == pytest.approx(
        torchmetrics_ece(probs, labels, n_bins), abs=1e-6)


def test_ece_bin_counts_differ_so_the_measures_are_not_one_number():
    probs, _ = random_probs(seed=3)
    # labels drawn from the probabilities: bins are both over- and under-confident
    rng = np.random.default_rng(3)
    labels = np.array([rng.choice(5, p=q / q.sum()) for q in probs.astype(np.float64)])
    values = {registry.get(f"ece{n}")(probs, labels) for n in F.BIN_COUNTS}
    assert len(values) == len(F.BIN_COUNTS)


def test_classwise_ece_is_the_mean_of_torchmetrics_binary_errors():
    probs, labels = random_probs(seed=7)
    per_class = [float(BinaryCalibrationError(n_bins=15, norm="l1")(
        torch.from_numpy(probs[:, k]), torch.from_numpy((labels == k).astype(np.int64))))
        for k in range(probs.shape[1])]
    assert F.classwise_ece(probs, labels) == pytest.approx(np.mean(per_class), abs=1e-6)


def test_adaptive_ece_matches_uncertainty_calibration_equal_mass_plugin():
    import calibration

    probs, labels = random_probs(seed=11, float32=False)  # distinct confidences
    expected = calibration.get_ece_em(probs, labels, num_bins=15)
    assert F.adaptive_ece(probs, labels) == pytest.approx(expected, abs=1e-12)


def test_adaptive_ece_by_hand():
    # confidences 0.9, 0.8, 0.7, 0.6 (right, wrong, right, wrong), 2 bins of 2:
    # low bin {0.6 wrong, 0.7 right}: |0.5 - 0.65|; high {0.8 wrong, 0.9 right}: |0.5 - 0.85|
    probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.6, 0.4]])
    labels = np.array([0, 1, 0, 1])
    assert F.adaptive_ece(probs, labels, n_bins=2) == pytest.approx((0.15 + 0.35) / 2)


def test_aurc_by_hand():
    # confidences 0.6, 0.7, 0.9, 0.8 (given out of order): right, wrong, right, wrong.
    # Most confident first: 0.9 right, 0.8 wrong, 0.7 wrong, 0.6 right ->
    # risks 0, 1/2, 2/3, 2/4
    probs = np.array([[0.6, 0.4], [0.3, 0.7], [0.1, 0.9], [0.8, 0.2]])
    labels = np.array([0, 0, 1, 1])
    assert F.aurc(probs, labels) == pytest.approx((0 + 1 / 2 + 2 / 3 + 2 / 4) / 4)
    assert F.aurc(probs, probs.argmax(1)) == 0.0


def test_debiased_l2_by_hand():
    # 30 samples at confidence 0.9 and 30 at 0.6 (equal-mass bins keep them
    # apart); accuracy 0.7 and 0.6: sum_b (n_b/N) [(conf - acc)^2 - acc(1-acc)/(n_b-1)]
    conf = np.r_[np.full(30, 0.9), np.full(30, 0.6)]
    correct = np.r_[np.arange(30) < 21, np.arange(30) < 18]
    probs = np.stack([conf, 1 - conf], axis=1)
    labels = np.where(correct, 0, 1)
    high = 0.2 ** 2 - 0.7 * 0.3 / 29
    low = 0.0 - 0.6 * 0.4 / 29
    expected = np.sqrt(max(0.5 * high + 0.5 * low, 0.0))
    assert F.debiased_l2(probs, labels) == pytest.approx(expected, rel=1e-9)


def test_smooth_ece_of_one_confidence_is_its_gap():
    # every sample at confidence 0.8, accuracy 0.5: the smoothed residual is
    # 0.3 everywhere, so smECE = |0.8 - 0.5|
    probs = np.tile([0.8, 0.2], (200, 1))
    labels = (np.arange(200) % 2).astype(np.int64)
    assert F.smooth_ece(probs, labels) == pytest.approx(0.3, abs=2e-3)


def test_smooth_ece_of_a_calibrated_model_is_small_and_of_an_overconfident_one_large():
    rng = np.random.default_rng(5)
    conf = rng.uniform(0.5, 1.0, 4000)
    right = rng.uniform(size=4000) < conf
    probs = np.stack([conf, 1 - conf], 1)
    labels = np.where(right, 0, 1)
    assert F.smooth_ece(probs, labels) < 0.03
    over = np.stack([np.sqrt(conf), 1 - np.sqrt(conf)], 1)
    assert F.smooth_ece(over, labels) > 0.08


def test_the_registry_holds_every_measure_once():
    probs, labels = random_probs(n=200)
    out = registry.compute(probs, labels)
    assert list(out) == ["acc", "ece", "nll", "brier", "auc", "gap", "aece", "cwece", "dl2ce",
                         "smece", "aurc", "ece5", "ece10", "ece15", "ece20", "ece30"]
    assert out["brier"] == pytest.approx(F.brier(probs, labels))
    assert registry.stored() == ("acc", "ece", "nll", "brier", "auc", "gap")
    assert registry.paper() == ("acc", "ece", "nll")
    assert registry.bootstrapped() == ("acc", "ece", "nll", "dl2ce")


def test_bootstrap_resample_values_match_direct_computation():
    probs, labels = random_probs(n=300, seed=2)
    idx = np.random.default_rng(9).integers(0, 300, size=(5, 300))
    assert (C.resample_indices(300, 5, 9) == idx).all()
    res = {m: registry.get(m).resample(probs, labels, idx) for m in registry.bootstrapped()}
    for r in range(5):
        p, y = probs[idx[r]], labels[idx[r]]
        assert res["acc"][r] == pytest.approx(F.accuracy(p, y), abs=1e-12)
        assert res["nll"][r] == pytest.approx(F.nll(p, y), abs=1e-12)
        assert res["ece"][r] == pytest.approx(torchmetrics_ece(p, y, 15), abs=1e-6)
    # dl2ce's resampler is checked against the package in tests/calib/test_debiased.py


def test_bootstrap_interval_is_reproducible_and_covers_the_estimate():
    probs, labels = random_probs(n=400, seed=4)
    fns = {m: registry.get(m).resample for m in registry.bootstrapped()}
    a = C.bootstrap_ci(probs, labels, fns, n_boot=200)
    assert a == C.bootstrap_ci(probs, labels, fns, n_boot=200)
    assert a != C.bootstrap_ci(probs, labels, fns, n_boot=200, seed=1)
    for m, fn in (("acc", F.accuracy), ("ece", F.ece), ("nll", F.nll),
                  ("dl2ce", F.debiased_l2)):
        lo, hi = a[m]
        assert lo < fn(probs, labels) < hi


def test_seed_interval_is_students_t():
    # values 1, 2, 3: mean 2, s = 1, t_{0.975, 2} = 4.30265272975
    lo, hi = C.seed_interval([1.0, 2.0, 3.0])
    half = 4.30265272975 / np.sqrt(3)
    assert (lo, hi) == pytest.approx((2 - half, 2 + half), rel=1e-9)
    assert C.seed_interval([0.5]) is None
