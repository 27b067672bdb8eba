"""bench.api: a grid trained from Python on the local pool, returned as a
DataFrame; plugins reaching the worker processes; a dry run; the same
one-line errors as `bench run`; the report as files and DataFrames."""
import io
import json
import sys
import textwrap
from contextlib import redirect_stdout

import numpy as np
import pytest
from sklearn.metrics import accuracy_score

import bench.api as api
from bench.cli.main import main
from bench.core import store
from bench.core.errors import BenchError
from pluginutil import clean_plugins, confpen_site  # noqa: F401  (fixtures)

TINY = {"cycles": 1, "epochs_per_cycle": 1, "image_size": 16, "batch_size": 64}
GRID = dict(dataset="digits", backbone="smallcnn", seeds=1, profile="quick", overrides=TINY)
CLI_GRID = ["--dataset", "digits", "--backbone", "smallcnn", "--seeds", "1", "--profile",
            "quick", *[a for k, v in TINY.items() for a in ("--set", f"{k}={v}")]]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Two methods, one seed each, trained once through bench.api.run."""
    results = tmp_path_factory.mktemp("api") / "results"
    return results, api.run(method=["sl1h", "2hml"], results=results, tensorboard=True, **GRID)


def test_run_trains_the_grid_and_returns_one_row_per_run_with_its_metrics(trained):
    results, df = trained
    assert list(df["method"]) == ["sl1h", "2hml"] and list(df["status"]) == ["done", "done"]
    for _, row in df.iterrows():
        record = results / "digits/smallcnn" / row["method"] / row["config_hash"] / "seed0"
        assert row["record"] == str(record) and store.is_complete(record)
        assert len(list((record / "tensorboard").glob("events.out.tfevents.*"))) == 1
        # the metric column against the saved logits, by scikit-learn
        p = store.load_predictions(record)
        logits = p["test_logits"]  # [N, heads, K]: the heads' mean probability predicts
        z = logits - logits.max(-1, keepdims=True)
        prob = (np.exp(z) / np.exp(z).sum(-1, keepdims=True)).mean(1)
        assert row["acc"] == pytest.approx(accuracy_score(p["test_labels"], prob.argmax(1)))
    again = api.run(method="sl1h,2hml", results=results, **GRID)
    assert list(again["status"]) == ["skipped", "skipped"]
    assert list(again["acc"]) == pytest.approx(list(df["acc"]))


def test_a_dry_run_trains_nothing_and_plans_what_bench_run_plans(trained, tmp_path):
    results, df = trained
    plan = api.run(method=["sl1h", "2hml", "ls"], results=results, dry_run=True, **GRID)
    assert list(plan["status"]) == ["done", "done", "missing"]
    assert not (results / "digits/smallcnn/ls").exists()
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["run", "--method", "sl1h,2hml,ls", *CLI_GRID, "--results", str(results),
                     "--dry-run", "--json"]) == 0
    rows = [json.loads(line) for line in buf.getvalue().splitlines() if line.strip()]
    assert [r["config"] for r in rows] == list(plan["config_hash"])
    empty = api.run(method="sl1h", results=tmp_path / "fresh", dry_run=True, **GRID)
    assert list(empty["status"]) == ["missing"] and "acc" not in empty
    assert not list((tmp_path / "fresh").glob("*/*"))


def test_errors_are_the_command_lines_one_line_bench_errors(tmp_path, capsys):
    with pytest.raises(BenchError) as err:
        api.run(method="nope", results=tmp_path / "r", **GRID)
    assert main(["run", "--method", "nope", *CLI_GRID, "--results", str(tmp_path / "r")]) == 2
    line = capsys.readouterr().err.strip()
    assert line == f"bench: error: {err.value}" and "unknown method 'nope'" in line
    with pytest.raises(BenchError, match="unknown option jobz; allowed: .*jobs_per_gpu"):
        api.run(method="sl1h", results=tmp_path / "r", jobz=2, **GRID)
    with pytest.raises(BenchError, match="--set heads: not a key of sl1h; it belongs to"):
        api.run(method="sl1h", results=tmp_path / "r", **{**GRID, "overrides": {"heads": 3}})
    assert not (tmp_path / "r" / "digits").exists()


def test_a_plugin_named_in_plugins_reaches_the_workers(tmp_path, monkeypatch, clean_plugins):
    """The module sits in the current folder, on no path the pool's workers know."""
    (tmp_path / "apimethod.py").write_text(textwrap.dedent("""\
        '''CE under another name, registered from outside the harness.'''
        from bench.methods.sl1h import CrossEntropy
        from bench.plugins import register_method

        @register_method("apice", "CE from a module named in bench.api.run(plugin=...)")
        def factory():
            return CrossEntropy("apice")
        """))
    monkeypatch.chdir(tmp_path)
    df = api.run(method="apice", results=tmp_path / "r", plugin=["apimethod"], **GRID)
    assert list(df["status"]) == ["done"], df["reason"].tolist()
    code = json.loads((tmp_path / df["record"][0] / "config.json").read_text())["code"]
    assert code["method"]["origin"] == "plugin" and code["method"]["module"] == "apimethod"


def test_the_example_plugin_imported_by_the_caller_trains_on_the_pool(confpen_site, tmp_path):
    import importlib

    importlib.import_module("mhml_confpen")  # as a notebook would; no plugin=
    df = api.run(method="confpen", results=tmp_path / "r", **GRID)
    assert list(df["status"]) == ["done"], df["reason"].tolist()
    assert 0 <= df["ece"][0] <= 1
    config = json.loads((tmp_path / df["record"][0] / "config.json").read_text())
    assert config["code"]["method"]["distribution"] == "mhml-confpen"


def test_report_returns_the_written_files_and_its_tables_as_dataframes(trained, tmp_path):
    results, df = trained
    rep = api.report(results, tmp_path / "rep", no_plots=True, no_ts=True)
    assert tmp_path / "rep" / "runs.csv" in rep.paths
    assert all(p.exists() for p in rep.paths)
    assert any(p.suffix == ".tex" for p in rep.paths)
    assert sorted(rep.runs["method"]) == ["2hml", "sl1h"]
    acc = rep.runs.set_index("method")["acc"]  # runs.csv: the test set's, as fractions
    cells = rep.groups.set_index("row")
    for _, row in df.iterrows():
        assert acc[row["method"]] == pytest.approx(row["acc"], abs=1e-9)
        # one seed: the table cell's mean is that run's accuracy
        assert cells.loc[row["method"], "acc_mean"] == pytest.approx(row["acc"], abs=1e-9)
    with pytest.raises(BenchError, match="--metrics 'bogus': unknown bogus"):
        api.report(results, tmp_path / "bad", metrics="bogus")
    assert sys.modules["bench.api"] is api


def test_report_keywords_are_spelled_as_the_command_takes_them(trained, tmp_path):
    """Lists, ints and dicts become the flags `bench report` would get (a
    tuple was once handed on as is, and --metrics / --seeds failed on it)."""
    from bench.cli.main import build_parser
    from bench.cli.report import options_of

    results, _ = trained
    kwargs = dict(metrics=["ece", "aece"], seeds=[0], method=["sl1h", "2hml"],
                  order=["sl1h", "2hml"], label={"sl1h": "Base"}, dataset="digits")
    flags = ["report", "--metrics", "ece,aece", "--seeds", "0-0", "--method", "sl1h",
             "--method", "2hml", "--order", "sl1h,2hml", "--label", "sl1h=Base",
             "--dataset", "digits", "--no-progress"]
    assert api._report_options(kwargs) == options_of(build_parser().parse_args(flags))
    rep = api.report(results, None, no_plots=True, **kwargs)
    assert sorted(rep.runs["method"]) == ["2hml", "sl1h"]
    assert {"ece_mean", "aece_mean"} <= set(rep.groups.columns)
    cells = rep.table_cells()
    assert set(cells.loc[cells["method"] == "sl1h", "label"]) == {"Base", "Base+TS"}
