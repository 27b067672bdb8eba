"""`bench report --sets` (issue 41, "Prediction sets"): the table, CSVs,
figure and bench.results.sets; values against sets computed here from the
records' logits with scipy's softmax and a sort (no bench code); the TS rows
calibrated after TS; D-Ens; a bad --sets-alpha is one line, exit 2, nothing
written; the LaTeX fits its page."""
from __future__ import annotations

import math
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
from report_records import write_known
from scipy.special import softmax

from bench import results as R
from bench.cli.main import main
from bench.core.record import Record
from bench.core.store import record_dir

ALPHA = 0.2


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    results = write_known(tmp_path_factory.mktemp("results"))
    out = tmp_path_factory.mktemp("out")
    assert main(["report", "--results", str(results), "--out", str(out), "--sets",
                 "--sets-alpha", str(ALPHA), "--metrics", "ece,aece,brier", "--no-progress",
                 "--variants", "vs"]) == 0
    return results, out


def hand_lac(pv, yv, pt, yt, alpha):
    """(coverage, mean size, share of empty sets) of LAC sets: the
    ceil((n+1)(1-alpha))-th smallest 1 - p_y of the validation split as the
    threshold."""
    cal = np.sort(1 - pv[np.arange(len(yv)), yv])
    r = math.ceil(round((len(cal) + 1) * (1 - alpha), 9))
    sets = (1 - pt) <= cal[r - 1]
    return sets[np.arange(len(yt)), yt].mean(), sets.sum(1).mean(), (sets.sum(1) == 0).mean()


def hand_aps(pv, yv, pt, yt, alpha):
    def mass(p):  # mass of the classes at or above each one (no ties here)
        return np.array([[p[i][p[i] >= p[i, c]].sum() for c in range(p.shape[1])]
                         for i in range(len(p))])

    cal = np.sort(mass(pv)[np.arange(len(yv)), yv])
    r = math.ceil(round((len(cal) + 1) * (1 - alpha), 9))
    sets = mass(pt) <= cal[r - 1]
    return sets[np.arange(len(yt)), yt].mean(), sets.sum(1).mean(), (sets.sum(1) == 0).mean()


def probs(results, method, seed, backbone="resnet50"):
    p = Record(record_dir(results, "toy", backbone, method, "abc123", seed)).predictions
    mean = lambda z: softmax(z.astype(np.float64), -1).mean(1)  # noqa: E731 (paper eq. 1)
    return mean(p["val_logits"]), p["val_labels"], mean(p["test_logits"]), p["test_labels"]


@pytest.mark.parametrize("method,seed", [("2hml", 0), ("4hml", 2), ("ls", 1)])
@pytest.mark.parametrize("score,hand", [("lac", hand_lac), ("aps", hand_aps)])
def test_values_against_sets_made_here(report, method, seed, score, hand):
    results, out = report
    long = pd.read_csv(out / "sets" / "sets_long.csv")
    mine = long[(long.backbone == "resnet50") & (long.method == method) & (long.seed == seed)
                & (long.variant == "plain") & (long.score == score)].set_index("measure")["value"]
    cov, size, empty = hand(*probs(results, method, seed), ALPHA)
    assert mine["coverage"] == pytest.approx(cov)
    assert mine["setsize"] == pytest.approx(size)
    assert mine["empty"] == pytest.approx(empty)


def test_rows_scores_and_frame(report):
    results, out = report
    long = pd.read_csv(out / "sets" / "sets_long.csv")
    assert set(long.score) == {"lac", "aps", "raps"}
    assert set(long.measure) == {"coverage", "setsize", "sscov", "empty"}
    assert (long[long.measure == "empty"].value > 0).any()  # LAC's sets can be empty here
    assert set(long.variant) == {"plain", "ts", "vs", "dens"}
    assert (long.alpha == ALPHA).all()
    assert long[long.variant == "dens"].seed.isna().all()
    # bench.results gives the same frame
    frame = R.sets(results, alpha=ALPHA, variants="vs")
    pd.testing.assert_frame_equal(frame.reset_index(drop=True),
                                  long.astype({"seed": "Int64"}).reset_index(drop=True),
                                  check_dtype=False)
    table = pd.read_csv(out / "sets" / "sets_table.csv")
    cov = table[table.measure == "coverage"]
    np.testing.assert_allclose(cov["gap"], cov["mean"] - (1 - ALPHA))


def test_sets_after_ts_are_calibrated_on_scaled_validation_probs(report):
    """The +TS row: the validation-fitted temperature (bench.calib.temperature,
    tested on its own in tests/calib/test_calibration.py: here only an input)
    applied to the head-averaged logits of both splits, then LAC by hand."""
    from bench.calib.temperature import fit_temperature

    results, out = report
    p = Record(record_dir(results, "toy", "resnet50", "4hml", "abc123", 0)).predictions
    t = fit_temperature(p["val_logits"], p["val_labels"])
    assert abs(t - 1) > 0.05  # TS moves these probabilities
    pv = softmax(p["val_logits"].astype(np.float64).mean(1) / t, -1)
    pt = softmax(p["test_logits"].astype(np.float64).mean(1) / t, -1)
    cov, size, _ = hand_lac(pv, p["val_labels"], pt, p["test_labels"], ALPHA)
    long = pd.read_csv(out / "sets" / "sets_long.csv")
    mine = long[(long.backbone == "resnet50") & (long.method == "4hml") & (long.seed == 0)
                & (long.variant == "ts") & (long.score == "lac")].set_index("measure")["value"]
    assert (mine["coverage"], mine["setsize"]) == (pytest.approx(cov), pytest.approx(size))


def test_table_markdown_and_figure(report):
    _, out = report
    md = (out / "tables" / "sets_toy_resnet50.md").read_text()
    head = md.splitlines()[0]
    for h in ("LAC Cov", "APS Size↓", "RAPS SSC↑", "LAC Empty↓"):
        assert h in head
    rows = [line.split("|")[1].strip() for line in md.splitlines()[2:] if line.startswith("|")]
    assert rows[:3] == ["SL1H", "SL1H+TS", "SL1H+VS"] and "D-Ens" in rows
    assert "alpha = 0.2 (target coverage 80%)" in md
    for stem in ("sets_toy_resnet50", "sets_toy_convnext_tiny"):
        assert (out / "figures" / f"{stem}.png").stat().st_size > 0
        assert (out / "tables" / f"{stem}.tex").exists()
    assert "sets_toy_resnet50" in (out / "tables" / "all_tables.tex").read_text()
    assert "conformal prediction sets" in (out / "report.md").read_text()


@pytest.mark.parametrize("value", ["0", "1.5", "nan"])
def test_bad_sets_alpha_is_one_line_and_writes_nothing(tmp_path, capsys, value):
    results = write_known(tmp_path / "results")
    out = tmp_path / "out"
    assert main(["report", "--results", str(results), "--out", str(out), "--sets",
                 "--sets-alpha", value, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--sets-alpha" in err and "> 0 and < 1" in err
    assert not out.exists()


def test_latex_fits_its_page(report):
    assert shutil.which("pdflatex"), "pdflatex missing: ./setup.sh installs it"
    _, out = report
    tex = out / "tables"
    subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error",
                    "sets_toy_resnet50_doc.tex"], cwd=tex, capture_output=True, timeout=120,
                   check=True)
    log = (tex / "sets_toy_resnet50_doc.log").read_text(errors="replace")
    assert not [float(x) for x in re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide", log)
                if float(x) > 1.0]


def test_randomised_top_label_report(report, tmp_path):
    """--sets-randomize --sets-seed --sets-top-label (issue 49): no empty set,
    the note says how the sets were made, LAC's coverage is the default's or
    more (its sets only gain the top class), and bench.results agrees."""
    results, out = report
    mine = tmp_path / "out"
    assert main(["report", "--results", str(results), "--out", str(mine), "--sets",
                 "--sets-alpha", str(ALPHA), "--no-progress", "--no-plots", "--variants", "vs",
                 "--metrics", "ece,aece,brier", "--sets-randomize", "--sets-seed", "3",
                 "--sets-top-label"]) == 0
    long = pd.read_csv(mine / "sets" / "sets_long.csv")
    assert (long[long.measure == "empty"].value == 0).all()
    md = (mine / "tables" / "sets_toy_resnet50.md").read_text()
    assert "randomised as TorchCP" in md and "seed 3" in md and "holds the top class" in md
    base = pd.read_csv(out / "sets" / "sets_long.csv")
    keys = ["backbone", "method", "variant", "seed", "score", "measure"]
    both = base.merge(long, on=keys, suffixes=("", "_new"))
    lac = both[(both.score == "lac") & (both.measure == "coverage")]
    assert len(lac) and (lac.value_new >= lac.value - 1e-12).all()
    assert "not randomised" in (out / "tables" / "sets_toy_resnet50.md").read_text()
    frame = R.sets(results, alpha=ALPHA, variants="vs", randomize=True, seed=3, top_label=True)
    assert np.allclose(frame.value.to_numpy(), long.value.to_numpy())
