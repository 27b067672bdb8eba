"""The paper's Rank (docs/fidelity.md), as pure functions.

Within one column block (one backbone), methods are ranked separately on
ACC (high is best), ECE and NLL (low is best): 1 = best, ties broken by the
order in which the rows appear. A method's Rank is the mean of its three
ranks. The best and second-best Rank values of a block are marked (every row
holding that value gets the mark, as the paper's Kvasir table does).
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd
from bench.calib import measures as M

def _ranks(values: pd.Series, higher_is_better: bool) -> pd.Series:
    """1 = best; method="first": equal values rank in their order of
    appearance; NaN (or None) ranks last."""
    return values.astype(float).rank(method="first", ascending=not higher_is_better,
                                      na_option="bottom")


def ordinal_ranks(values: Sequence[float], higher_is_better: bool) -> list[int]:
    """The ranks of one column (see _ranks), as ints."""
    return [int(r) for r in _ranks(pd.Series(list(values), dtype=object), higher_is_better)]


def mean_ranks(rows: Sequence[dict], metrics=None) -> list[float]:
    """rows: one dict per method (in table order) with the metric means;
    metrics: (metric, higher is better) pairs, by default the paper's
    (bench.calib.measures). Returns each row's Rank = mean of its per-metric ranks."""
    if metrics is None:
        metrics = M.rank_of(M.paper())
    if not rows:
        return []
    frame = pd.DataFrame([{m: r[m] for m, _ in metrics} for r in rows], dtype=object)
    ranks = pd.DataFrame({m: _ranks(frame[m], hib) for m, hib in metrics})
    return [float(v) for v in ranks.sum(axis=1) / len(metrics)]


def rank_marks(ranks: Sequence[float]) -> list[str | None]:
    """'best' for the lowest Rank value, 'second' for the next distinct one."""
    # Ranks are multiples of 1/len(metrics); rounding removes float noise.
    keys = [round(r, 9) for r in ranks]
    distinct = sorted(set(keys))
    marks = {v: m for v, m in zip(distinct, ("best", "second"))}
    return [marks.get(k) for k in keys]
