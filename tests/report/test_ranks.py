"""The Rank of docs/fidelity.md against the paper's printed tables.

Facts transcribed from Galdran et al. (MICCAI 2023): each block is one
backbone's ACC / ECE / NLL means and its printed Rank cell, and the mark the
paper put on it (\\ft = best, \\sd = second)."""
import math

import pytest

from bench.report.numbers.ranks import mean_ranks, ordinal_ranks, rank_marks

# Table 1 (Chaoyang), rows SL1H, LS, MbLS, MixUp, DCA, D-Ens, 2HSL, 2HML, 4HML.
CHAOYANG = {
    "ResNet50": [
        (80.71, 5.79, 53.46, 6.0, None), (74.81, 2.55, 64.27, 6.7, None),
        (75.02, 3.26, 63.86, 6.7, None), (76.00, 3.67, 62.72, 6.3, None),
        (76.17, 5.75, 62.13, 6.7, None), (82.19, 2.42, 46.64, 1.0, "best"),
        (80.97, 4.36, 51.42, 4.0, None), (80.28, 4.49, 51.86, 5.3, None),
        (81.13, 3.09, 49.44, 2.3, "second")],
    "ConvNeXt": [
        (81.91, 6.94, 50.98, 6.3, None), (79.59, 6.13, 55.65, 7.3, None),
        (79.53, 2.94, 53.44, 5.3, None), (79.95, 6.20, 55.58, 7.0, None),
        (78.28, 3.69, 57.78, 7.3, None), (82.98, 5.21, 46.08, 3.3, None),
        (81.94, 4.30, 46.71, 4.3, None), (81.97, 3.66, 45.96, 2.7, "second"),
        (82.17, 1.79, 44.73, 1.3, "best")],
    "Swin": [
        (83.09, 8.73, 52.75, 5.0, None), (79.76, 3.98, 55.37, 6.0, None),
        (80.24, 5.06, 54.18, 5.7, None), (80.25, 3.89, 54.62, 4.7, None),
        (79.12, 7.91, 59.91, 8.3, None), (83.50, 6.79, 44.80, 2.7, "best"),
        (82.90, 8.20, 54.19, 5.7, None), (82.79, 5.01, 46.12, 3.7, None),
        (82.89, 4.80, 46.70, 3.3, "second")],
}
# Table 2 (Kvasir), ConvNeXt: two rows share the second-best Rank, both marked.
KVASIR_CONVNEXT = [
    (90.02, 5.18, 35.59, 5.0, None), (88.24, 6.97, 42.09, 6.7, None),
    (88.62, 8.55, 43.07, 7.0, None), (87.58, 8.96, 48.88, 8.7, None),
    (85.27, 4.11, 46.78, 7.3, None), (90.76, 3.34, 29.74, 3.0, None),
    (90.21, 2.63, 28.69, 2.7, "second"), (89.92, 1.49, 28.15, 2.7, "second"),
    (90.10, 1.65, 28.01, 2.0, "best")]
# Appendix TS table (Chaoyang), ResNet50: SL1H, +TS, 2HSL, +TS, 4HML, +TS.
# The +TS rows repeat their method's ACC (ditto): ties go to the row above.
CHAOYANG_TS_RESNET = [
    (80.71, 5.79, 53.46, 4.7, None), (80.71, 2.15, 49.96, 2.7, "second"),
    (80.24, 5.81, 53.40, 5.3, None), (80.24, 2.00, 50.82, 3.7, None),
    (81.15, 4.03, 50.71, 2.7, "second"), (81.15, 2.67, 49.69, 2.0, "best")]

BLOCKS = {**{f"chaoyang-{k}": v for k, v in CHAOYANG.items()},
          "kvasir-convnext": KVASIR_CONVNEXT, "chaoyang-ts-resnet50": CHAOYANG_TS_RESNET}


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_rank_cells_match_the_paper(name):
    block = BLOCKS[name]
    rows = [{"acc": a, "ece": e, "nll": n} for a, e, n, _, _ in block]
    ranks = mean_ranks(rows)
    assert [f"{r:.1f}" for r in ranks] == [f"{p:.1f}" for _, _, _, p, _ in block]
    assert rank_marks(ranks) == [m for *_, m in block]


def test_hand_worked_ranks():
    # ACC 0.9, 0.8, 0.9 -> ranks 1, 3, 2 (the tie goes to the row listed first)
    assert ordinal_ranks([0.9, 0.8, 0.9], higher_is_better=True) == [1, 3, 2]
    assert ordinal_ranks([0.1, 0.3, 0.2], higher_is_better=False) == [1, 3, 2]
    # NaN is never best
    assert ordinal_ranks([math.nan, 0.5], higher_is_better=True) == [2, 1]
    rows = [{"acc": 0.9, "ece": 0.05, "nll": 0.3},   # ranks 1, 2, 2 -> 5/3
            {"acc": 0.8, "ece": 0.02, "nll": 0.2},   # ranks 2, 1, 1 -> 4/3
            {"acc": 0.7, "ece": 0.09, "nll": 0.9}]   # ranks 3, 3, 3 -> 3
    assert mean_ranks(rows) == pytest.approx([5 / 3, 4 / 3, 3.0])
    assert rank_marks(mean_ranks(rows)) == ["second", "best", None]


def test_marks_with_ties_at_the_top():
    assert rank_marks([2.0, 2.0, 3.0, 4.0]) == ["best", "best", "second", None]
    assert rank_marks([1 / 3 + 2 / 3, 1.0]) == ["best", "best"]  # float noise is not a tie-breaker
