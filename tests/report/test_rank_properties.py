"""Property-based tests of the Rank rule (docs/fidelity.md) against a counting definition."""
import math

from hypothesis import given, settings, strategies as st

from bench.report.numbers.ranks import mean_ranks, ordinal_ranks, rank_marks

RANK_METRICS = (("acc", True), ("ece", False), ("nll", False))  # the paper's Rank

# Few distinct values so that ties are common; NaN stands for a missing metric.
values = st.lists(st.sampled_from([0.1, 0.25, 0.5, 0.75, 0.9, float("nan")]), min_size=1,
                  max_size=8)
FAST = settings(max_examples=150, deadline=None)


def counted_rank(vals, i, higher_is_better):
    """1 + rows strictly better + earlier rows that tie (NaN: after every number)."""
    def better(a, b):  # a beats b
        if math.isnan(b):
            return not math.isnan(a)
        if math.isnan(a):
            return False
        return a > b if higher_is_better else a < b

    def tie(a, b):
        return (math.isnan(a) and math.isnan(b)) or a == b

    v = vals[i]
    return (1 + sum(better(w, v) for w in vals)
            + sum(tie(w, v) for w in vals[:i]))


@FAST
@given(values, st.booleans())
def test_ordinal_ranks_count_better_rows_and_earlier_ties(vals, hib):
    ranks = ordinal_ranks(vals, hib)
    assert ranks == [counted_rank(vals, i, hib) for i in range(len(vals))]
    assert sorted(ranks) == list(range(1, len(vals) + 1))  # a permutation of 1..n


@FAST
@given(st.lists(st.tuples(*[st.sampled_from([0.1, 0.5, 0.9])] * 3), min_size=1, max_size=7))
def test_mean_rank_is_the_mean_of_the_three_counted_ranks(triples):
    rows = [dict(zip(("acc", "ece", "nll"), t)) for t in triples]
    expected = [sum(counted_rank([r[m] for r in rows], i, hib) for m, hib in RANK_METRICS) / 3
                for i in range(len(rows))]
    got = mean_ranks(rows)
    assert got == expected
    n = len(rows)
    assert math.isclose(sum(got), n * (n + 1) / 2)  # each metric hands out 1..n once


@FAST
@given(st.lists(st.tuples(*[st.sampled_from([0.1, 0.5, 0.9])] * 3), min_size=1, max_size=7))
def test_a_row_best_on_every_metric_gets_rank_one(triples):
    rows = [dict(zip(("acc", "ece", "nll"), t)) for t in triples]
    i = len(rows) // 2
    rows.insert(i, {"acc": 1.0, "ece": 0.0, "nll": 0.0})
    assert mean_ranks(rows)[i] == 1.0


@FAST
@given(st.lists(st.sampled_from([1.0, 4 / 3, 5 / 3, 2.0, 7 / 3, 3.0]), min_size=1, max_size=8))
def test_marks_go_to_every_row_with_the_lowest_and_second_lowest_rank(ranks):
    marks = rank_marks(ranks)
    distinct = sorted(set(ranks))
    for r, mark in zip(ranks, marks):
        want = {0: "best", 1: "second"}.get(distinct.index(r))
        assert mark == want
