"""The report as a library: bench.report.build(results, ReportOptions) -> Report,
its DataFrames checked against numbers computed here from the records, and
Report.write against the files of `bench report`."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from report_records import KNOWN, write_failures, write_known
from scipy.stats import rankdata

from bench.cli.main import build_parser, main
from bench.cli.report import options_of
from bench.core.errors import BenchError
from bench.report import Report, ReportOptions, build
from bench.report.numbers.aggregate import CellData, cell_stats

FLAGS = dict(no_plots=True, no_ts=True, significance=True, cost=True)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    write_known(root)
    write_failures(root)
    return root


@pytest.fixture(scope="module")
def rep(records):
    return build(records, ReportOptions(no_progress=True, **FLAGS))


def _files(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_build_reads_and_writes_nothing_but_returns_the_report(records, rep, tmp_path,
                                                               monkeypatch):
    before = _files(records)
    monkeypatch.chdir(tmp_path)
    again = build(records, ReportOptions(no_progress=True, **FLAGS))
    assert isinstance(again, Report) and _files(records) == before
    assert list(tmp_path.iterdir()) == []  # no cache, no report folder
    assert [t.kind for t in rep.tables] == ["main", "std"]
    assert len(rep.runs) == sum(len(v["acc"]) for v in KNOWN.values())
    assert {f["reason"] for f in rep.failures} >= {"CUDA out of memory", "loss is NaN"}


def _recorded(records: Path) -> dict:
    """(backbone, method) -> metric -> per-seed test values, read from metrics.json."""
    out: dict = {}
    for f in sorted(records.glob("toy/*/*/abc123/seed*/metrics.json")):
        test = json.loads(f.read_text())["test"]
        backbone, method = f.parts[-5], f.parts[-4]
        for m in ("acc", "ece", "nll"):
            out.setdefault((backbone, method), {}).setdefault(m, []).append(test[m])
    return out


def test_groups_are_numpys_mean_and_population_std_of_the_records_bit_for_bit(records, rep):
    values = _recorded(records)
    groups = rep.groups.set_index(["backbone", "row"])
    assert set(values) == set(KNOWN)
    for key, per_metric in values.items():
        for m, v in per_metric.items():
            assert groups.loc[key, f"{m}_mean"] == np.mean(v)
            assert groups.loc[key, f"{m}_std"] == np.std(v, ddof=0)
        assert groups.loc[key, "n"] == len(per_metric["acc"])
    assert np.isnan(groups.loc[("resnet50", "dens"), "acc_std"])  # one number, no std


def test_main_table_cells_and_ranks_against_an_independent_ranking(records, rep):
    cells = rep.table_cells()
    main_ = cells[cells["kind"] == "main"]
    for (backbone, method), v in KNOWN.items():
        c = main_[(main_["backbone"] == backbone) & (main_["row"] == method)].iloc[0]
        assert c["acc_mean"] == pytest.approx(np.mean(v["acc"]) / 100)
        assert c["nll_std"] == pytest.approx(np.std(v["nll"]) / 100)
        assert (c["n"], c["N"]) == (len(v["acc"]), 3)
    for backbone, block in main_.groupby("backbone", sort=False):
        # scipy's ordinal ranks: 1 = best, ties in table order, on the printed numbers
        ranks = [rankdata(sign * np.round(block[f"{m}_mean"].to_numpy() * 100, 2),
                          method="ordinal") for m, sign in (("acc", -1), ("ece", 1), ("nll", 1))]
        assert block["rank"].tolist() == pytest.approx(list(np.mean(ranks, axis=0)))
        best = block.loc[block["rank"] == block["rank"].min(), "mark"]
        assert set(best) == {"best"}


def test_cell_stats_equal_numpy_bit_for_bit_on_random_values():
    rng = np.random.default_rng(7)
    cells = {}
    for i in range(300):
        n = int(rng.integers(2, 8))
        cells[("d", "b", f"r{i:03d}")] = CellData(
            "d", "b", f"r{i:03d}", "m", "h", tuple(range(n)),
            {"acc": list(rng.random(n) * rng.choice([1e-3, 1.0, 1e3]))}, {})
    stats = cell_stats(cells, ("acc",))
    for (key, g), (_, row) in zip(sorted(cells.items()), stats.iterrows()):
        assert row["acc_mean"] == np.mean(g.values["acc"])
        assert row["acc_std"] == np.std(g.values["acc"], ddof=0)


def test_write_gives_the_files_and_text_of_bench_report(records, tmp_path, capsys):
    argv = ["--no-plots", "--no-ts", "--significance", "--cost"]
    assert main(["report", "--results", str(records), "--out", str(tmp_path / "cli"),
                 "--no-progress", *argv]) == 0
    printed = capsys.readouterr().out
    rep = build(records, ReportOptions(no_progress=True, **FLAGS))
    written = rep.write(tmp_path / "lib")
    cli, lib = _files(tmp_path / "cli"), _files(tmp_path / "lib")
    assert list(cli) == list(lib)
    for name in cli:
        assert lib[name].replace(b"/lib", b"/cli") == cli[name], name
    assert [str(p).replace(str(tmp_path / "lib"), "") for p in written] == \
        [line.strip().replace(str(tmp_path / "cli"), "") for line in
         printed.splitlines()[-len(written):]]
    assert rep.text.replace("/lib", "/cli") + "\n" == printed
    assert tuple(written) == rep.paths


def test_the_options_defaults_are_the_commands():
    assert options_of(build_parser().parse_args(["report"])) == ReportOptions()


@pytest.mark.parametrize("options, message", [
    (dict(alpha=2.0), "--alpha 2.0: a significance level must be > 0 and < 1"),
    (dict(metrics="bogus"), "--metrics 'bogus': unknown bogus"),
    (dict(test="z"), "unknown --test 'z'; choose from: auto, ttest, wilcoxon"),
    (dict(compare="arxiv"), "unknown --compare 'arxiv'; choose from: paper"),
])
def test_bad_options_fail_in_one_line_before_any_record_is_read(tmp_path, options, message):
    with pytest.raises(BenchError, match=message) as err:
        build(tmp_path / "no-such-folder", ReportOptions(**options))
    assert "\n" not in str(err.value)


def test_figures_on_demand_are_their_own_not_pyplots(rep):
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    open_before = plt.get_fignums()
    binned, smooth = rep.reliability_figures("toy", "resnet50")
    cd = rep.cd_figure("rank")
    assert isinstance(binned, Figure) and isinstance(smooth, Figure) and isinstance(cd, Figure)
    assert plt.get_fignums() == open_before
    assert rep.cd_figure("no-such-metric") is None
    assert list(rep.friedman["metric"]) == ["rank", "acc", "ece", "nll"]
    assert isinstance(rep.significance, pd.DataFrame) and rep.significance["n"].min() >= 2
