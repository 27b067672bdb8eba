"""Per-head class weights of the multi-loss heads: which classes each head
favours, for several seeds, against a reference written here.

RULE is the grouping today's code follows by default: the released code's rule
(`released_groups`: Python's random.seed(seed); random.shuffle, then
np.array_split), docs/fidelity.md. The paper-text profile's rule (`numpy_groups`: a
numpy generator seeded with the run seed permutes the classes, then
np.array_split) is pinned by its own test below (class_groups=numpy).
"""
import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from bench.methods import create_method
from bench.methods.mhml import class_weights


def numpy_groups(k, m, seed):
    return np.array_split(np.random.default_rng(seed).permutation(k), m)


def released_groups(k, m, seed):
    classes = list(range(k))
    random.seed(seed)
    random.shuffle(classes)
    return np.array_split(np.array(classes), m)


RULE = released_groups


def weights_from(groups, k):
    m = len(groups)
    w = np.full((m, k), 1.0 / m)
    for head, group in enumerate(groups):
        w[head, group] = m
    return w


@pytest.mark.parametrize("name, k", [("2hml", 4), ("4hml", 9), ("4hml", 23), ("mhml", 10)])
def test_setup_weights_follow_the_seeded_rule(name, k):
    method = create_method(name)
    for seed in range(6):
        method.setup(k, seed)
        expected = weights_from(RULE(k, method.heads, seed), k)
        np.testing.assert_array_equal(method.weights.numpy(), expected.astype(np.float32))


@pytest.mark.parametrize("name, k", [("2hml", 4), ("4hml", 9), ("4hml", 23), ("mhml", 10)])
def test_paper_text_numpy_rule_weights_follow_numpy_groups(name, k):
    from bench.core.config import PROFILE_METHOD_SETS

    rule = PROFILE_METHOD_SETS["paper-text"]["class_groups"]
    assert rule == "numpy"
    method = create_method(name, {"class_groups": rule})
    for seed in range(6):
        method.setup(k, seed)
        expected = weights_from(numpy_groups(k, method.heads, seed), k)
        np.testing.assert_array_equal(method.weights.numpy(), expected.astype(np.float32))


def test_setup_weights_differ_across_seeds():
    method = create_method("4hml")
    seen = set()
    for seed in range(6):
        method.setup(9, seed)
        seen.add(method.weights.numpy().tobytes())
    assert len(seen) == 6  # 9 classes in 4 groups: 9!/(3!2!2!2!)/... many groupings


def test_single_loss_heads_weigh_every_class_one():
    method = create_method("2hsl")
    method.setup(5, 3)
    np.testing.assert_array_equal(method.weights.numpy(), np.ones((2, 5), np.float32))


@settings(max_examples=120, deadline=None)
@given(st.integers(1, 40).flatmap(lambda k: st.tuples(st.just(k), st.integers(1, k))),
       st.integers(0, 2**31 - 1))
def test_groups_partition_the_classes_for_every_k_and_m(km, seed):
    k, m = km
    w = class_weights(k, m, seed)
    assert w.shape == (m, k)
    own = w == m  # the classes a head favours
    if m > 1:
        assert np.all(own.sum(0) == 1)  # every class favoured by exactly one head
        assert np.all((w == m) | (w == 1.0 / m))
    sizes = own.sum(1)
    assert sizes.sum() == k
    assert sizes.max() - sizes.min() <= 1 and sizes.min() >= 1  # nearly equal, none empty
    assert list(sizes) == sorted(sizes, reverse=True)  # array_split puts the larger first
    np.testing.assert_array_equal(w, weights_from(RULE(k, m, seed), k))
