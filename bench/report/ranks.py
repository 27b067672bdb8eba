"""The paper's Rank (docs/fidelity.md), as pure functions.

Within one column block (one backbone), methods are ranked separately on
ACC (high is best), ECE and NLL (low is best): 1 = best, ties broken by the
order in which the rows appear. A method's Rank is the mean of its three
ranks. The best and second-best Rank values of a block are marked (every row
holding that value gets the mark, as the paper's Kvasir table does).
"""
from __future__ import annotations

import math
from typing import Sequence

# (metric, higher is better) in the paper's column order.
RANK_METRICS = (("acc", True), ("ece", False), ("nll", False))


def ordinal_ranks(values: Sequence[float], higher_is_better: bool) -> list[int]:
    """1 = best; equal values keep their order of appearance; NaN ranks last."""
    def key(i):
        v = values[i]
        if v is None or math.isnan(v):
            return (1, 0.0, i)
        return (0, -v if higher_is_better else v, i)

    order = sorted(range(len(values)), key=key)
    ranks = [0] * len(values)
    for position, i in enumerate(order, start=1):
        ranks[i] = position
    return ranks


def mean_ranks(rows: Sequence[dict], metrics=RANK_METRICS) -> list[float]:
    """rows: one dict per method (in table order) with the metric means.
    Returns each row's Rank = mean of its per-metric ranks."""
    per_metric = [ordinal_ranks([r[m] for r in rows], hib) for m, hib in metrics]
    return [sum(col[i] for col in per_metric) / len(metrics) for i in range(len(rows))]


def rank_marks(ranks: Sequence[float]) -> list[str | None]:
    """'best' for the lowest Rank value, 'second' for the next distinct one."""
    # Ranks are multiples of 1/len(metrics); rounding removes float noise.
    keys = [round(r, 9) for r in ranks]
    distinct = sorted(set(keys))
    marks = {v: m for v, m in zip(distinct, ("best", "second"))}
    return [marks.get(k) for k in keys]
