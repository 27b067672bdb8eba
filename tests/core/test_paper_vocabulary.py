"""The paper's vocabulary (bench.core.paper) against the paper's own tables as
bench/report/paper/published.csv transcribes them (row names and order read
from the LaTeX source, not from the vocabulary)."""
from pathlib import Path

import pandas as pd
import pytest

from bench.core import paper
from bench.calib import variants as V
from bench.report.paper.compare import TS_ROWS

PUBLISHED = Path(__file__).resolve().parents[2] / "bench" / "report" / "paper" / "published.csv"


@pytest.fixture(scope="module")
def published():
    return pd.read_csv(PUBLISHED, dtype=str, keep_default_na=False)


@pytest.mark.parametrize("table", ["chaoyang", "kvasir", "pathmnist_dispersion"])
def test_main_table_rows_in_the_papers_order(published, table):
    for _, block in published[published.table == table].groupby("backbone", sort=False):
        assert tuple(block.method) == paper.TABLE_METHODS


@pytest.mark.parametrize("table", ["chaoyang_ts", "kvasir_ts"])
def test_ts_table_rows_in_the_papers_order(published, table):
    for _, block in published[published.table == table].groupby("backbone", sort=False):
        assert tuple(zip(block.method, block.variant)) == TS_ROWS


def test_backbones_and_trained_methods(published):
    assert tuple(published[published.table == "chaoyang"].backbone.unique()) == \
        paper.PAPER_BACKBONES
    # the trained methods are the table's rows without the derived deep ensemble
    assert paper.PAPER_METHODS == tuple(m for m in paper.TABLE_METHODS if m != "dens")


def test_method_lists_name_registered_methods_and_backbones():
    from bench.methods import METHODS, PAPER_ORDER, training_methods
    from bench.train.backbones import BACKBONES

    assert all(m in METHODS for m in paper.PAPER_METHODS + paper.EXTRA_BASELINES)
    assert training_methods()[:len(PAPER_ORDER)] == list(PAPER_ORDER)
    assert all(b in BACKBONES for b in paper.PAPER_BACKBONES)
    assert set(paper.BACKBONE_ALIASES.values()) <= set(paper.PAPER_BACKBONES)


TEX = Path(__file__).resolve().parents[1] / "report" / "paper" / "paper_tables.tex"


def test_display_names_are_the_papers_printed_row_names():
    """Every bold row name of the paper's main tables (read from its LaTeX
    source) is the display name a report prints for that row."""
    import re

    from bench.report.render.tables import method_name

    printed = re.findall(r"^\s*\\textbf\{([^}]+)\}\s*&", TEX.read_text(), re.M)
    assert {"LS", "MbLS", "MixUp", "DCA", "D-Ens", "2HSL", "2HML", "4HML"} <= set(printed)
    for key in paper.TABLE_METHODS:
        name = method_name(key)
        assert name in printed, (key, name)
        assert paper.PRINTED_METHODS[name] == key


def test_variant_spellings_match_published_csv_and_row_keys(published):
    from bench.report.paper.compare import label

    assert set(published.variant) == {v.column for v in V.TABLE_VARIANTS}
    assert [label("4hml", v.column) for v in V.TABLE_VARIANTS] == \
        ["4hml", "4hml@ts-base", "4hml+ts"]
    assert V.get("ts-base") is V.TS_BASE
    assert [str(V.get(v)) for v in ("plain", "dens", "copied", "ts-base", "ts")] == \
        ["seeds", "dens", "copied", "ts-base", "ts"]
