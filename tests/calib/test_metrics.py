"""Metrics against independent computations: scikit-learn, torchmetrics,
and hand-worked ECE cases."""
import numpy as np
import pytest
import torch
from sklearn.metrics import log_loss, roc_auc_score

from bench.calib import metrics as M
from bench.calib.measures import functions as F


def random_probs(n=500, k=6, seed=0, sharp=3.0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * sharp
    labels = rng.integers(0, k, size=n)
    return M.softmax(logits).astype(np.float32), labels


def test_accuracy_counts_argmax_hits():
    probs = np.array([[0.9, 0.1], [0.4, 0.6], [0.7, 0.3]])
    assert F.accuracy(probs, np.array([0, 0, 0])) == pytest.approx(2 / 3)


def test_nll_matches_sklearn_log_loss_on_float32_probabilities():
    """One NLL for every float type: scikit-learn's log_loss of the float32
    probabilities (the released code's call: it clips at float32's eps)."""
    probs, labels = random_probs()
    p64 = probs.astype(np.float64)
    p64 /= p64.sum(1, keepdims=True)
    expected = log_loss(labels, p64.astype(np.float32), labels=range(6))
    assert F.nll(p64, labels) == pytest.approx(expected, rel=1e-6)
    # the same clip either way: float32 rounding of p is all that differs
    assert F.nll(p64, labels) == pytest.approx(F.nll(p64.astype(np.float32), labels), rel=1e-7)


def test_nll_clips_zero_probability_at_float32_eps():
    probs = np.array([[1.0, 0.0], [0.5, 0.5]])
    labels = np.array([1, 0])
    eps = float(np.finfo(np.float32).eps)
    assert F.nll(probs, labels) == pytest.approx((-np.log(eps) - np.log(0.5)) / 2, rel=1e-12)
    assert F.nll(probs, labels) == pytest.approx(log_loss(labels, probs.astype(np.float32)),
                                                 rel=1e-6)


def test_nll_clips_float32_like_sklearn():
    # saturated float32 softmax: p_y is exactly 0 for some samples
    logits = np.array([[60.0, 0.0, 0.0], [0.0, 60.0, 0.0], [2.0, 1.0, 0.0]], dtype=np.float32)
    probs = torch.softmax(torch.from_numpy(logits), 1).numpy()
    labels = np.array([1, 1, 0])
    assert probs[0, 1] < 1e-20
    assert F.nll(probs, labels) == pytest.approx(log_loss(labels, probs, labels=range(3)),
                                                 rel=1e-6)


def test_auc_matches_sklearn_including_ties():
    probs, labels = random_probs(k=5, seed=1)
    probs = np.round(probs, 2)  # force ties
    expected = roc_auc_score(labels, probs / probs.sum(1, keepdims=True), multi_class="ovr",
                             average="macro")
    ours = M.auc_ovr_macro(probs / probs.sum(1, keepdims=True), labels)
    assert ours == pytest.approx(expected, abs=1e-12)


def test_brier_by_hand():
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    labels = np.array([0, 1])
    expected = ((0.3 ** 2 + 0.2 ** 2 + 0.1 ** 2) + (0.1 ** 2 + 0.9 ** 2 + 0.8 ** 2)) / 2
    assert F.brier(probs, labels) == pytest.approx(expected)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("sharp", [0.5, 3.0, 30.0])
def test_ece_matches_torchmetrics(seed, sharp):
    import torchmetrics.classification as tm  # a test dependency (pyproject [test])
    probs, labels = random_probs(seed=seed, sharp=sharp)
    ref = tm.MulticlassCalibrationError(num_classes=6, n_bins=15, norm="l1")(
        torch.from_numpy(probs), torch.from_numpy(labels))
    assert F.ece(probs, labels) == pytest.approx(float(ref), abs=1e-6)


def test_ece_with_many_exact_ones_matches_torchmetrics():
    import torchmetrics.classification as tm  # a test dependency (pyproject [test])
    logits = np.array([[40.0, 0, 0], [0, 40.0, 0], [1.0, 0.5, 0], [0, 0, 40.0]] * 10,
                      dtype=np.float32)
    probs = torch.softmax(torch.from_numpy(logits), 1).numpy()
    labels = np.array([0, 2, 0, 2] * 10)
    assert (probs.max(1) == 1.0).sum() == 30  # float32 softmax saturates
    ref = tm.MulticlassCalibrationError(num_classes=3, n_bins=15, norm="l1")(
        torch.from_numpy(probs), torch.from_numpy(labels))
    assert F.ece(probs, labels) == pytest.approx(float(ref), abs=1e-7)


def test_ece_hand_worked_bin_edge_and_exact_one():
    # Three samples, float64, confidences 0.2 (= 3/15, a bin edge), 0.5, 1.0.
    # Bins are [k/15, (k+1)/15): 0.2 falls in bin 3 only if the edge equals it;
    # 1.0 is in a bin of its own. Each bin has one sample, so
    # ECE = (|a1 - 0.2| + |a2 - 0.5| + |a3 - 1.0|) / 3.
    probs = np.array([
        [0.2, 0.2, 0.2, 0.2, 0.2],            # top label 0, wrong (label 1)
        [0.5, 0.3, 0.2, 0.0, 0.0],            # top label 0, right
        [1.0, 0.0, 0.0, 0.0, 0.0],            # top label 0, wrong (label 2)
    ])
    labels = np.array([1, 0, 2])
    expected = (abs(0 - 0.2) + abs(1 - 0.5) + abs(0 - 1.0)) / 3
    # confidences are binned and averaged in float32, as torchmetrics does
    assert F.ece(probs, labels) == pytest.approx(expected, abs=1e-7)
    acc, conf, share = F.ece_bins(probs, labels)
    assert share[15] == pytest.approx(1 / 3) and conf[15] == 1.0  # the 1.0 bin
    assert share[7] == pytest.approx(1 / 3)  # 0.5 is in [7/15, 8/15)


def test_ece_bin_edge_grouping():
    # Two samples at exactly 2/15 and one just below must not share a bin:
    # edge inclusion decides the answer, so this fails if bins were (a, b].
    # torchmetrics bins float32 confidences, so the edge is a float32 one.
    edge = torch.linspace(0, 1, 16, dtype=torch.float32)[2].item()
    below = float(np.nextafter(np.float32(edge), np.float32(0)))
    k = 8  # enough classes that a top prob of ~0.133 is possible

    def row(top):
        rest = (1 - top) / (k - 1)
        return [top] + [rest] * (k - 1)

    labels = np.array([0, 1, 0])  # accuracies 1, 0, 1
    # bin 2 holds the two edge samples (acc 1/2, conf edge), bin 1 holds `below`
    expected = (2 * abs(0.5 - edge) + abs(1 - below)) / 3
    for dtype in (np.float32, np.float64):
        probs = np.array([row(edge), row(edge), row(below)], dtype=dtype)
        assert F.ece(probs, labels) == pytest.approx(expected, abs=1e-7)
        assert F.ece(probs, labels) == pytest.approx(tm_ece(probs, labels), abs=1e-7)


def test_ece_of_float64_probabilities_bins_like_torchmetrics():
    # 0.2 in float64 is below float32's 0.2 (the edge of bin 3): binning float64
    # confidences against float64 edges would put it in bin 3, torchmetrics in bin 2.
    probs = np.array([[0.0, 0.25, 0.25, 0.25, 0.25], [0.2] * 5])
    labels = np.array([0, 0])  # wrong, right
    expected = (abs(0 - 0.25) + abs(1 - 0.2)) / 2  # two bins of one sample each
    assert F.ece(probs, labels) == pytest.approx(expected, abs=1e-7)
    assert F.ece(probs, labels) == pytest.approx(tm_ece(probs, labels), abs=1e-7)


def tm_ece(probs, labels):
    from torchmetrics.functional.classification import multiclass_calibration_error

    return float(multiclass_calibration_error(torch.from_numpy(probs), torch.from_numpy(labels),
                                              num_classes=probs.shape[1], n_bins=15, norm="l1"))


def test_calibration_gap_sign():
    probs = np.array([[0.6, 0.4], [0.6, 0.4]])
    assert F.calibration_gap(probs, np.array([0, 0])) == pytest.approx(-0.4)  # under-confident
    assert F.calibration_gap(probs, np.array([1, 1])) == pytest.approx(0.6)  # over-confident


def test_head_probs_is_mean_of_head_softmaxes():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 3, 5)).astype(np.float32)
    expected = torch.softmax(torch.from_numpy(logits), -1).mean(1).numpy()
    np.testing.assert_allclose(M.head_probs(logits), expected, rtol=1e-6)


def test_softmax_over_the_last_axis_of_any_rank_and_large_logits():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 3, 5)) * 3
    expected = torch.softmax(torch.from_numpy(logits), -1).numpy()
    np.testing.assert_allclose(M.softmax(logits), expected, rtol=1e-12)
    big = np.array([[800.0, 799.0, 0.0]])  # exp(800) overflows without the max shift
    np.testing.assert_allclose(M.softmax(big), torch.softmax(torch.from_numpy(big), -1).numpy())


def test_auc_skips_only_classes_without_both_positives_and_negatives():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(1)
    probs = rng.dirichlet(np.ones(4), size=12)
    labels = np.array([0] * 5 + [1] * 6 + [2])  # class 2: one positive; class 3: none
    expected = np.mean([roc_auc_score(labels == k, probs[:, k]) for k in (0, 1, 2)])
    assert M.auc_ovr_macro(probs, labels) == pytest.approx(expected, abs=1e-12)
    assert np.isnan(M.auc_ovr_macro(probs, np.zeros(12, dtype=int)))  # one class only


def test_stored_measures_names_and_values():
    from bench.calib.measures import stored_values

    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.5, 0.4, 0.1]])
    labels = np.array([0, 2, 1])
    got = stored_values(probs, labels)
    assert set(got) == {"acc", "ece", "nll", "brier", "auc", "gap"}
    assert got["acc"] == pytest.approx(2 / 3)
    assert got["nll"] == pytest.approx(-(np.log(0.7) + np.log(0.8) + np.log(0.4)) / 3)
    assert got["brier"] == pytest.approx((0.09 + 0.04 + 0.01 + 0.01 + 0.01 + 0.04
                                          + 0.25 + 0.36 + 0.01) / 3)
    assert got["gap"] == pytest.approx((0.7 + 0.8 + 0.5) / 3 - 2 / 3)
    assert got["ece"] == pytest.approx(F.ece(probs, labels))
