"""Property-based checks of ECE against torchmetrics and of NLL by hand,
on random inputs with ties, confidences on bin edges and saturated rows."""
import numpy as np
import torch
from hypothesis import example, given, settings, strategies as st
from torchmetrics.functional.classification import multiclass_calibration_error

from bench.calib.measures import functions as M

FAST = settings(max_examples=80, deadline=None)
# Confidences on the 15-bin edges, exactly 1 (its own bin), 1/K-like ties, and
# arbitrary values.
EDGES = [k / 15 for k in range(16)]
conf = st.one_of(st.sampled_from(EDGES + [0.5, 1.0]), st.floats(0.0, 1.0))


@st.composite
def prob_rows(draw, dtype=np.float64):
    k = draw(st.integers(2, 6))
    n = draw(st.integers(1, 40))
    rows, labels = [], []
    for _ in range(n):
        c = draw(conf)
        top = draw(st.integers(0, k - 1))
        row = np.full(k, (1.0 - c) / (k - 1))
        row[top] = c
        if draw(st.booleans()):  # a tie for the top probability
            row = np.full(k, 1.0 / k)
        rows.append(row)
        labels.append(draw(st.integers(0, k - 1)))
    return np.array(rows, dtype=dtype), np.array(labels)


def _torchmetrics_ece(probs, labels) -> float:
    return float(multiclass_calibration_error(
        torch.from_numpy(probs), torch.from_numpy(labels), num_classes=probs.shape[1],
        n_bins=15, norm="l1"))


@FAST
@given(prob_rows(np.float32))
def test_ece_matches_torchmetrics_float32(data):
    probs, labels = data
    assert abs(M.ece(probs, labels) - _torchmetrics_ece(probs, labels)) <= 1e-6


@FAST
@given(prob_rows(np.float64))
@example((np.tile([0.0, 1 / 3, 1 / 3, 1 / 3], (40, 1)), np.zeros(40, dtype=np.int64)))
def test_ece_matches_torchmetrics_float64(data):
    probs, labels = data
    # torchmetrics bins float32 confidences and sums in float32: a few float32
    # ulps apart (hypothesis found 1.19e-7 = 4 ulps at ECE 1/3, 40 rows of
    # [0, 1/3, 1/3, 1/3]); tables print ECE x100 to 2 decimals (1e-4)
    assert abs(M.ece(probs, labels) - _torchmetrics_ece(probs, labels)) <= 1e-6


@FAST
@given(prob_rows(np.float64))
def test_nll_by_hand(data):
    probs, labels = data
    # p_y clipped to float32's eps whatever the float type, as log_loss clips
    # float32 probabilities (docs/fidelity.md): checked by hand, in float64
    eps = float(np.finfo(np.float32).eps)
    p_y = [min(max(float(p[y]), eps), 1 - eps) for p, y in zip(probs, labels)]
    expected = -sum(np.log(p) for p in p_y) / len(p_y)
    assert abs(M.nll(probs, labels) - expected) <= 1e-9 * max(1.0, expected)


@FAST
@given(prob_rows(np.float64))
def test_accuracy_and_gap_by_counting(data):
    probs, labels = data
    hits = [int(np.argmax(p) == y) for p, y in zip(probs, labels)]
    assert M.accuracy(probs, labels) == sum(hits) / len(hits)
    gap = np.mean([max(p) for p in probs]) - sum(hits) / len(hits)
    assert abs(M.calibration_gap(probs, labels) - gap) <= 1e-12
