"""`bench report --sets` on the records' shift and site sets (issue 41: "under
--shift and site: sets, where the guarantee breaks: the table shows by how
much"). Records of tests/evalrecords.py (the shifted logits are worse and
softer with severity) plus a site set written here; values against LAC sets
made in the test from the logits with scipy's softmax."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from evalrecords import CORRUPTIONS, K, SEEDS, SEVERITIES, record, shift_arrays, write
from scipy.special import softmax

from bench import results as R
from bench.cli.main import main
from bench.core import evalfiles
from bench.core.record import Record

ALPHA = 0.1
N_SITE = 50


def site_logits(method, seed):
    rng = np.random.default_rng(1000 + seed)
    y = np.arange(N_SITE) % K
    z = rng.normal(0, 1, (N_SITE, 2 if method == "2hml" else 1, K))
    z[np.arange(N_SITE), :, (y + 1) % K] += 2.0  # another site: sure of the wrong class
    return (4.0 * z).astype(np.float32), y.astype(np.int64)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    results = write(tmp_path_factory.mktemp("results"), ood=False)
    for method in ("sl1h", "2hml"):
        for seed in SEEDS:
            z, y = site_logits(method, seed)
            evalfiles.write(record(results, method, seed), "site-hosp2",
                            {"logits": z, "labels": y}, {"kind": "site"})
    out = tmp_path_factory.mktemp("out")
    assert main(["report", "--results", str(results), "--out", str(out), "--sets",
                 "--no-plots", "--no-progress"]) == 0
    return results, out


def lac(val_z, val_y, z, y, alpha=ALPHA) -> float:
    """Coverage of LAC sets (mean of the head softmaxes; threshold the
    ceil((n+1)(1-alpha))-th smallest validation 1 - p_y)."""
    pv = softmax(val_z.astype(np.float64), -1).mean(1)
    cal = np.sort(1 - pv[np.arange(len(val_y)), val_y])
    q = cal[math.ceil(round((len(cal) + 1) * (1 - alpha), 9)) - 1]
    p = softmax(z.astype(np.float64), -1).mean(1)
    return float(((1 - p) <= q)[np.arange(len(y)), y].mean())


def preds(results, method, seed):
    return Record(record(results, method, seed)).predictions


@pytest.mark.parametrize("method,seed", [("sl1h", 0), ("2hml", 1)])
def test_shift_coverage_against_sets_made_here(report, method, seed):
    results, out = report
    p = preds(results, method, seed)
    arrays = shift_arrays(method, seed)
    long = pd.read_csv(out / "sets" / "sets_shift_long.csv")
    mine = long[(long.method == method) & (long.seed == seed) & (long.variant == "plain")
                & (long.eval_set == "shift") & (long.score == "lac")
                & (long.measure == "coverage")]
    for i, c in enumerate(CORRUPTIONS):
        for j, s in enumerate(SEVERITIES):
            got = mine[(mine.corruption == c) & (mine.severity == s)]["value"]
            assert float(got.iloc[0]) == pytest.approx(
                lac(p["val_logits"], p["val_labels"], arrays["logits"][i, j], arrays["labels"]))


def test_clean_severity_is_the_test_split(report):
    """Severity 0 holds the test logits: its coverage is the in-distribution one."""
    _, out = report
    test = pd.read_csv(out / "sets" / "sets_long.csv")
    shifted = pd.read_csv(out / "sets" / "sets_shift_long.csv")
    a = test[test.measure == "coverage"].set_index(["method", "variant", "seed", "score"])
    b = shifted[(shifted.measure == "coverage") & (shifted.severity == 0)
                & (shifted.corruption == CORRUPTIONS[0])].set_index(
        ["method", "variant", "seed", "score"])
    joined = a["value"].to_frame("test").join(b["value"].to_frame("clean"), how="inner")
    assert len(joined) == len(a) and np.allclose(joined["test"], joined["clean"])


def test_site_coverage_and_table(report):
    results, out = report
    long = pd.read_csv(out / "sets" / "sets_shift_long.csv")
    site = long[(long.eval_set == "site-hosp2") & (long.variant == "plain")
                & (long.score == "lac") & (long.measure == "coverage")]
    assert site.corruption.isna().all() and site.severity.isna().all()
    for method in ("sl1h", "2hml"):
        for seed in SEEDS:
            p = preds(results, method, seed)
            z, y = site_logits(method, seed)
            got = site[(site.method == method) & (site.seed == seed)]["value"].iloc[0]
            assert got == pytest.approx(lac(p["val_logits"], p["val_labels"], z, y))
    assert site["value"].mean() < 1 - ALPHA  # another site: the guarantee does not hold
    md = (out / "tables" / "sets_site-hosp2_toy_resnet50.md").read_text()
    assert "LAC Cov" in md and "SL1H+TS" in md


def test_shift_table_shows_the_shortfall(report):
    _, out = report
    table = pd.read_csv(out / "sets" / "sets_shift_table.csv")
    cov = table[(table.eval_set == "shift") & (table.measure == "coverage")
                & (table.row == "2hml") & (table.score == "lac")]
    worst = cov[cov.severity == max(SEVERITIES)]
    assert float(worst["gap"].iloc[0]) == pytest.approx(float(worst["mean"].iloc[0]) - 0.9)
    long = pd.read_csv(out / "sets" / "sets_shift_long.csv")
    per_seed = long[(long.method == "2hml") & (long.variant == "plain") & (long.score == "lac")
                    & (long.measure == "coverage") & (long.severity == max(SEVERITIES))]
    assert float(worst["mean"].iloc[0]) == pytest.approx(per_seed["value"].mean())
    md = (out / "tables" / "sets_shift_toy_resnet50.md").read_text()
    line = next(row for row in md.splitlines() if row.startswith("| 2HML "))
    assert f"{float(worst['gap'].iloc[0]) * 100:+.1f}" in line
    # one block of columns per score (issue 49), each Method + severities + Δ
    heads = [line for line in md.splitlines() if line.startswith("| Method")]
    assert len(heads) == 3 and "LAC clean" in heads[0] and "RAPS Δ" in heads[2]
    assert all(h.count("|") == len(SEVERITIES) + 3 for h in heads)  # Method, severities, Δ
    assert md.count("Coverage (x100)") == 1  # the note once, under the last block


def test_results_frame_is_the_csv(report):
    results, out = report
    frame = R.sets(results, eval_sets=True)
    long = pd.read_csv(out / "sets" / "sets_shift_long.csv")
    assert len(frame) == len(long)
    assert set(frame.eval_set) == {"shift", "site-hosp2"}
    assert set(frame.variant) == {"plain", "ts", "dens"}
