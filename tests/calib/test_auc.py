"""The checkpoint AUC (bench.calib.metrics.auc_ovr_macro) against
scikit-learn's roc_auc_score(multi_class="ovr", average="macro")."""
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from bench.calib.metrics import auc_ovr_macro, softmax


def _case(seed):
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(20, 300)), int(rng.integers(3, 10))  # 2: sklearn binary
    logits = rng.normal(size=(n, k))
    if seed % 2:
        logits = np.round(logits, 1)  # many ties
    labels = np.concatenate([np.arange(k), rng.integers(0, k, n - k)])  # every class present
    return softmax(logits), labels


@pytest.mark.parametrize("seed", range(40))
def test_matches_sklearn_ovr_macro(seed):
    probs, labels = _case(seed)
    expected = roc_auc_score(labels, probs, multi_class="ovr", average="macro")
    # Not bit-identical: sklearn integrates the ROC curve, we sum ranks
    # (Mann-Whitney); they differ by a few ulps (docs/architecture.md).
    assert auc_ovr_macro(probs, labels) == pytest.approx(expected, abs=1e-12)


def test_absent_class_is_skipped_where_sklearn_raises():
    """A class missing from the labels has no AUC: it is left out of the
    macro mean over the classes present; one class present only gives NaN."""
    probs, labels = _case(3)
    labels = np.where(labels == 0, 1, labels)
    present = sorted(set(labels))
    expected = np.mean([roc_auc_score(labels == c, probs[:, c]) for c in present])
    assert auc_ovr_macro(probs, labels) == pytest.approx(expected, abs=1e-12)
    assert np.isnan(auc_ovr_macro(probs, np.ones_like(labels)))
