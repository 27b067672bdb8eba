"""`bench report` end to end on known records: CSV, groups, missing data,
failed runs, significance, Friedman/Nemenyi, errors."""
import csv
import math
import shutil
import statistics
import subprocess
import sys

import numpy as np
import pytest
from report_records import KNOWN, write_failures, write_known
from scipy import stats as sps

from bench.report.numbers import aggregate, configs
from bench.report.numbers import stats
from bench.cli.main import main
from bench.core.errors import BenchError


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    write_known(root)
    write_failures(root)
    out = tmp_path_factory.mktemp("reports")
    rc = main(["report", "--results", str(root), "--out", str(out), "--no-plots", "--no-ts",
               "--no-progress", "--significance", "--cost"])
    return root, out, rc


def _csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_tidy_csv_has_one_row_per_run(done):
    root, out, rc = done
    assert rc == 0
    rows = _csv(out / "runs.csv")
    assert len(rows) == sum(len(v["acc"]) for v in KNOWN.values()) == 23
    r = next(r for r in rows if (r["backbone"], r["method"], r["seed"]) == ("resnet50", "2hml", "1"))
    assert float(r["acc"]) == pytest.approx(0.82) and r["heads"] == "2"
    assert float(r["n_params"]) == 1_000_100


def test_groups_mean_population_std_and_n(done):
    rows = {(r["backbone"], r["row"]): r for r in _csv(done[1] / "groups.csv")}
    for (b, m), values in KNOWN.items():
        g = rows[(b, m)]
        for metric, v in values.items():
            assert float(g[f"{metric}_mean"]) == pytest.approx(statistics.fmean(v) / 100)
            assert float(g[f"{metric}_std"]) == pytest.approx(statistics.pstdev(v) / 100)
        assert (int(g["n"]), int(g["N"])) == (len(values["acc"]), 3)
    dens = rows[("resnet50", "dens")]
    assert dens["acc_std"] == "" and dens["n"] == "3"
    assert dens["variant"] == "dens" and {rows[k]["variant"] for k in KNOWN} == {"seeds"}
    assert float(dens["n_params"]) == 3_000_000  # an ensemble costs all its members
    assert float(dens["train_seconds"]) == 10 + 11 + 12


def test_failed_runs_listed_without_crashing(done):
    rows = _csv(done[1] / "failed_runs.csv")
    reasons = {(r["method"], r["seed"]): r["reason"] for r in rows}
    assert reasons[("ls", "2")] == "CUDA out of memory"
    assert reasons[("mixup", "0")] == "loss is NaN"
    assert any("unreadable" in r["reason"] for r in rows)
    assert ("sl1h", "0") not in reasons  # superseded: that run finished later (see below)
    md = (done[1] / "report.md").read_text()
    assert "CUDA out of memory" in md and "88.50 (2/3)" in md
    # Markdown marks: ResNet50 best 4HML 2.0, second D-Ens 2.3 (as in the LaTeX test)
    main_md = (done[1] / "tables" / "toy_main.md").read_text()
    line = next(ln for ln in main_md.splitlines() if ln.startswith("| 4HML"))
    assert "**_2.0_**" in line and "**2.7**" in line  # ResNet50 best, ConvNeXt second


def _paired_t_p(a, b):
    d = np.asarray(a, float) - np.asarray(b, float)
    if np.allclose(d, d[0]) and d[0] != 0:
        return 0.0
    t = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    return 2 * sps.t.sf(abs(t), len(d) - 1)


def test_significance_marks_follow_a_paired_t_test(done):
    rows = _csv(done[1] / "stats" / "paired_tests.csv")
    assert {r["test"] for r in rows} == {"paired t-test"}  # 3 seeds: t-test, not Wilcoxon
    for r in rows:
        b, m, metric = r["backbone"], r["row"], r["metric"]
        a, ref = KNOWN[(b, m)][metric], KNOWN[(b, "sl1h")][metric]
        ref = ref[:len(a)]  # paired by seed: only the seeds both have
        assert (r["significant"] == "True") == (_paired_t_p(a, ref) < 0.05), r
    tex = (done[1] / "tables" / "toy_main.tex").read_text()
    # ResNet50 LS ACC 78 vs 80, 81, 82: p = 0.013 -> marked; ECE 3 vs 6, 5, 4: p = 0.074 -> not
    assert r"78.00$^{*}$ & 3.00 &" in tex
    assert "paired t-test over seeds" in tex
    assert "Params (M) & Train (s) & Train (img/s) & Infer (ms)" in tex
    assert "1.00 & 11.0 & 185.0 & 0.500" in tex  # ResNet50 SL1H: 3 seeds' means


def test_choose_test():
    assert stats.choose_test(5) == "ttest" and stats.choose_test(6) == "wilcoxon"
    assert stats.paired_test([1, 2], [1, 2]).p == 1.0
    assert stats.paired_test([1], [2]) is None
    with pytest.raises(BenchError, match="unknown significance test 'z'"):
        stats.choose_test(5, "z")


def test_nemenyi_matches_demsar_table():
    # Demšar (2006) Table 5(a), q_0.05 for k = 2..10
    table = [1.960, 2.343, 2.569, 2.728, 2.850, 2.949, 3.031, 3.102, 3.164]
    assert [stats.nemenyi_q(k) for k in range(2, 11)] == pytest.approx(table, abs=2e-3)
    assert stats.nemenyi_cd(4, 14) == pytest.approx(2.569 * math.sqrt(4 * 5 / (6 * 14)), rel=1e-3)


def test_friedman_hand_formula():
    scores = np.array([[0.9, 0.8, 0.7], [0.85, 0.86, 0.6], [0.7, 0.6, 0.5], [0.9, 0.7, 0.8]])
    f = stats.friedman(scores, ["a", "b", "c"], range(4), higher_is_better=True)
    r = np.array([[1, 2, 3], [2, 1, 3], [1, 2, 3], [1, 3, 2]]).mean(axis=0)
    assert f.avg_ranks == pytest.approx(r)
    n, k = 4, 3
    chi2 = 12 * n / (k * (k + 1)) * (np.sum(r ** 2) - k * (k + 1) ** 2 / 4)
    assert f.statistic == pytest.approx(chi2)


def test_config_choice_is_never_silent(tmp_path):
    """Two configs of one method stop the report unless
    --config chooses; the choice is noted."""
    write_known(tmp_path)
    runs = aggregate.load_runs(tmp_path)
    other = runs[0].path.parent.parent / "zzz999" / "seed0"
    other.parent.mkdir()
    shutil.copytree(runs[0].path, other)
    with pytest.raises(BenchError, match=r"has records of 2 configs: abc123 \(3 seeds\); "
                                         r"zzz999 \(1 seeds\); choose with --config"):
        configs.select_configs(aggregate.load_runs(tmp_path))
    kept, notes = configs.select_configs(aggregate.load_runs(tmp_path), config="zzz")
    cell = (runs[0].backbone, runs[0].method)
    assert [r.chash for r in kept if (r.backbone, r.method) == cell] == ["zzz999"]
    assert len(kept) == len(runs) - 3 + 1  # other cells keep their only config
    assert notes == [f"toy/{cell[0]}/{cell[1]}: using config zzz999 (1 seeds, chosen by "
                     f"--config), ignoring abc123 (3 seeds)"]


def test_no_records_is_one_line_error(tmp_path, capsys):
    (tmp_path / "none").mkdir()  # a folder without records (a missing one: test_flags_exact)
    assert main(["report", "--results", str(tmp_path / "none"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("bench: error: no finished run records") and "\n" not in err


def test_one_sl1h_seed_gives_no_dens_row_but_a_note(tmp_path):
    write_known(tmp_path)
    runs = [r for r in aggregate.load_runs(tmp_path)
            if not (r.backbone == "resnet50" and r.method == "sl1h" and r.seed > 0)]
    groups, notes = aggregate.build_cells(runs, with_ts=False)
    assert ("toy", "resnet50", "dens") not in groups
    assert groups[("toy", "convnext_tiny", "dens")].seeds == (0, 1, 2)
    assert notes == ["toy/resnet50: D-Ens needs >= 2 sl1h seeds, found 1"]
    with pytest.raises(BenchError, match="at least 2 sl1h seeds, got 1"):
        aggregate.ensemble_cell([r for r in runs if r.method == "sl1h"][:1])


def test_report_parser_imports_no_plotting_or_scipy_stats():
    """Every `bench` command builds the report parser: matplotlib and
    scipy.stats (~2 s together) must load only when a report needs them."""
    code = ("import sys, argparse, bench.cli.report as r\n"
            "r.add_parser(argparse.ArgumentParser().add_subparsers())\n"
            "print(' '.join(m for m in ('matplotlib', 'scipy.stats') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == ""
