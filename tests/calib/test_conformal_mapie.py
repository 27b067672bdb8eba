"""Our conformal sets against MAPIE's (issue 41: "checked against TorchCP or
MAPIE on the same logits"). MAPIE's SplitConformalClassifier is given a
prefit classifier whose predict_proba is the probabilities themselves, so
both see the same numbers.

- LAC: equal sets.
- APS: MAPIE's calibration score is always the randomised one (it subtracts
  U x p_y, Romano et al.'s randomised APS); ours is not randomised. With
  MAPIE's score made deterministic (its own true-label cumulative mass, the
  subclass below) and include_last_label=False, the sets are equal except
  where ours is empty: MAPIE never returns an empty set and puts the top
  class there. With include_last_label=True (MAPIE's default) its set is
  ours plus the next class down, the one whose cumulative mass first
  passes the threshold.
- RAPS: MAPIE tunes k_reg and lambda on a split of the calibration set;
  ours keeps them fixed, so test_conformal.py checks RAPS against a loop.
"""
from __future__ import annotations

import numpy as np
import pytest
from mapie.classification import SplitConformalClassifier
from mapie.conformity_scores import APSConformityScore
from sklearn.base import BaseEstimator, ClassifierMixin

from bench.calib import conformal as CF

K, ALPHA = 6, 0.1


class Given(ClassifierMixin, BaseEstimator):
    """A 'classifier' whose probabilities are its input."""

    def fit(self, X, y=None):
        self.classes_ = np.arange(np.asarray(X).shape[1])
        return self

    def predict_proba(self, X):
        return np.asarray(X)

    def predict(self, X):
        return np.asarray(X).argmax(1)


class DeterministicAPS(APSConformityScore):
    """MAPIE's APS score without its random U x p_y."""

    def get_conformity_scores(self, y, y_pred, y_enc=None, **kwargs):
        scores, self.cutoff = self.get_true_label_cumsum_proba(y, y_pred, self.classes)
        return scores


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)

    def draw(n):
        p = rng.dirichlet(np.full(K, 0.5), n)
        q = p ** 2 / (p ** 2).sum(1, keepdims=True)
        return p, np.array([rng.choice(K, p=row) for row in q])

    return (*draw(300), *draw(500))


def mapie_sets(data, score, params=None):
    pc, yc, pt, _ = data
    m = SplitConformalClassifier(Given().fit(pc), confidence_level=1 - ALPHA,
                                 conformity_score=score, prefit=True).conformalize(pc, yc)
    return m.predict_set(pt, conformity_score_params=params)[1][:, :, 0]


def test_lac_sets_equal_mapie(data):
    pc, yc, pt, _ = data
    ours, _ = CF.prediction_sets(pc, yc, pt, "lac", ALPHA)
    np.testing.assert_array_equal(ours, mapie_sets(data, "lac"))


def test_aps_sets_equal_mapie_but_for_its_never_empty_rule(data):
    pc, yc, pt, _ = data
    ours, _ = CF.prediction_sets(pc, yc, pt, "aps", ALPHA)
    theirs = mapie_sets(data, DeterministicAPS(), {"include_last_label": False})
    empty = ~ours.any(1)
    assert empty.any() and (~empty).sum() > 400  # both cases are exercised
    np.testing.assert_array_equal(ours[~empty], theirs[~empty])
    top = np.eye(K, dtype=bool)[pt[empty].argmax(1)]
    np.testing.assert_array_equal(theirs[empty], top)


def test_aps_with_mapies_default_adds_the_crossing_class(data):
    pc, yc, pt, _ = data
    ours, _ = CF.prediction_sets(pc, yc, pt, "aps", ALPHA)
    theirs = mapie_sets(data, DeterministicAPS(), {"include_last_label": True})
    ranks = CF.ranks(pt)
    nxt = ranks == ours.sum(1, keepdims=True) + 1  # the class ranked just below our set
    np.testing.assert_array_equal(theirs, ours | nxt)
