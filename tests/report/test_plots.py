"""Reliability diagrams and the critical-difference diagram."""
import csv

import numpy as np
import pytest
from report_records import N_TEST, write_known

from bench.report.numbers import aggregate
from bench.report.plotting import plots
from bench.cli.main import main
from bench.report.plotting.figures import reliability_panels


def test_reliability_data_hand_example():
    # confidences 0.95 (right), 0.95 (wrong), 0.50 (right), 1.0 (right, extra bin)
    probs = np.array([[0.95, 0.05], [0.95, 0.05], [0.50, 0.50], [1.0, 0.0]])
    labels = np.array([0, 1, 0, 0])
    d = plots.reliability_data(probs, labels)
    assert len(d["acc"]) == 15 and d["share"].sum() == pytest.approx(1.0)
    assert d["share"][7] == pytest.approx(0.25) and d["acc"][7] == 1.0  # 0.5 in [7/15, 8/15)
    # last bin [14/15, 1) merged with the confidence-1.0 bin: 3 samples, 2 right
    assert d["share"][14] == pytest.approx(0.75)
    assert d["acc"][14] == pytest.approx(2 / 3)
    assert d["conf"][14] == pytest.approx((0.95 + 0.95 + 1.0) / 3)
    # ECE by hand: bins {0.5: |1-0.5|*1/4}, {0.95, 0.95: |0.5-0.95|*2/4}, {1.0: |1-1|*1/4}
    assert d["ece"] == pytest.approx(0.5 / 4 + 0.45 / 2)
    assert d["gap"] == pytest.approx((0.95 + 0.95 + 0.5 + 1.0) / 4 - 0.75)


def test_cliques():
    assert plots.cliques([1.0, 1.5, 2.2, 3.5], cd=1.3) == [(0, 2), (2, 3)]
    assert plots.cliques([1.0, 3.0, 5.0], cd=1.0) == []


def test_report_figures(tmp_path):
    root, out = tmp_path / "results", tmp_path / "reports"
    write_known(root)
    assert main(["report", "--results", str(root), "--out", str(out), "--no-ts",
                 "--no-progress"]) == 0
    figs = out / "figures"
    for stem in ["reliability_toy_resnet50", "reliability_toy_convnext_tiny", "cd_rank", "cd_nll"]:
        png, pdf = figs / f"{stem}.png", figs / f"{stem}.pdf"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", stem
        assert pdf.read_bytes()[:5] == b"%PDF-", stem
    with open(out / "stats" / "friedman.csv") as f:
        rows = {r["metric"]: r for r in csv.DictReader(f)}
    assert int(rows["rank"]["blocks"]) == 2 and int(rows["rank"]["methods"]) == 5
    assert "![reliability_toy_resnet50](figures/reliability_toy_resnet50.png)" in \
        (out / "report.md").read_text()

    # what the panels hold: pooled = every seed's test set, D-Ens included;
    # per seed = that seed only, no D-Ens (it exists only across seeds)
    runs = [r for r in aggregate.load_runs(root) if r.backbone == "convnext_tiny"]
    pooled = reliability_panels(runs)
    assert [p[0] for p in pooled] == ["SL1H", "LS", "D-Ens", "2HML", "4HML"]
    assert [len(p[2]) for p in pooled] == [3 * N_TEST, 2 * N_TEST, N_TEST, 3 * N_TEST, 3 * N_TEST]
    seed2 = reliability_panels(runs, seed=2)
    assert [p[0] for p in seed2] == ["SL1H", "2HML", "4HML"]  # LS has no seed 2
    assert all(len(p[2]) == N_TEST for p in seed2)
