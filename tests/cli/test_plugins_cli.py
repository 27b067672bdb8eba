"""A method, a dataset and a backbone from a package outside the harness,
through the `bench` command: listed with their origin, trained by worker
processes (local pool, SLURM through submitit), reported under their own
name, and never reused once their code is edited. The example package in
examples/mhml-confpen is laid on sys.path as an installed distribution."""
import csv
import json
import sys
import textwrap

from bench.cli.main import main
from pluginutil import clean_plugins, confpen_site  # noqa: F401  (fixtures)

TINY = ["--profile", "quick", "--set", "cycles=1", "--set", "epochs_per_cycle=1",
        "--seeds", "1", "--no-progress"]
DIGITS = ["--dataset", "digits", "--backbone", "smallcnn", "--set", "image_size=12",
          "--set", "batch_size=64"]


def dry_run(results, *argv) -> dict:
    """method -> status of each run `bench run --dry-run --json` lists."""
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["run", *argv, "--results", str(results), "--dry-run", "--json"]) == 0
    rows = [json.loads(line) for line in buf.getvalue().splitlines() if line.strip()]
    return {r["method"]: r["status"] for r in rows}


def test_list_marks_each_entry_with_its_origin(confpen_site, capsys):
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    origin = "plugin mhml-confpen 0.1.0 (mhml_confpen)"
    for name in ("confpen", "stripes", "tinycnn"):
        (line,) = [row for row in lines if row.split()[:1] == [name]]
        assert origin in line, line
    (sl1h,) = [row for row in lines if row.split()[:1] == ["sl1h"]]
    assert sl1h.split()[1] == "built-in"


def test_plugin_method_trains_on_the_pool_is_reported_and_edits_are_never_reused(
        confpen_site, tmp_path, capsys):
    results, out = tmp_path / "results", tmp_path / "reports"
    argv = ["--method", "sl1h,confpen", *DIGITS, *TINY]
    assert main(["run", *argv, "--results", str(results)]) == 0
    assert "2 trained, 0 already done, 0 failed" in capsys.readouterr().out
    (record,) = results.glob("digits/smallcnn/confpen/*/seed0")
    code = json.loads((record / "config.json").read_text())["code"]
    assert code["method"]["distribution"] == "mhml-confpen" and code["method"]["version"] == "0.1.0"
    assert code["backbone"]["origin"] == code["dataset"]["origin"] == "built-in"

    assert main(["report", "--results", str(results), "--out", str(out), "--no-plots",
                 "--no-progress"]) == 0
    with open(out / "runs.csv") as f:
        methods = sorted(row["method"] for row in csv.DictReader(f))
    assert methods == ["confpen", "sl1h"]
    table = (out / "tables" / "digits_main.md").read_text()
    labels = [ln.split("|")[1].strip() for ln in table.splitlines()[2:] if ln.startswith("|")]
    assert labels == ["SL1H", "CP"]  # its display name, among the single-head baselines
    assert "\\midrule\n\\midrule" not in (out / "tables" / "digits_main.tex").read_text()

    assert dry_run(results, *argv) == {"sl1h": "done", "confpen": "done"}
    method = confpen_site / "mhml_confpen" / "method.py"
    method.write_text(method.read_text().replace("- self.params.beta", "+ self.params.beta"))
    assert dry_run(results, *argv) == {"sl1h": "done", "confpen": "missing"}

    # retrained under a new hash; the old record stays, and the report will
    # not pick between the two silently: the digests tell them apart
    assert main(["run", *argv, "--results", str(results)]) == 0
    assert "1 trained, 1 already done, 0 failed" in capsys.readouterr().out
    assert len(list(results.glob("digits/smallcnn/confpen/*/seed0"))) == 2
    assert main(["report", "--results", str(results), "--out", str(out), "--no-plots",
                 "--no-progress"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "has records of 2 configs" in line and line.count("method_sha256=") == 2


def test_plugin_dataset_and_backbone_train_through_bench_run(confpen_site, tmp_path, capsys):
    results = tmp_path / "results"
    argv = ["run", "--method", "confpen", "--dataset", "stripes", "--backbone", "tinycnn",
            *TINY, "--results", str(results)]
    assert main(argv) == 0
    assert "1 trained, 0 already done, 0 failed" in capsys.readouterr().out
    (record,) = results.glob("stripes/tinycnn/confpen/*/seed0")
    config = json.loads((record / "config.json").read_text())
    assert {role: c["modules"] for role, c in config["code"].items()} == {
        "method": ["mhml_confpen.method"], "dataset": ["mhml_confpen.data"],
        "backbone": ["mhml_confpen.backbone"]}
    assert set(config["plugin_code"]) == {"method", "dataset", "backbone"}
    metrics = json.loads((record / "metrics.json").read_text())
    assert 0.0 <= metrics["test"]["acc"] <= 1.0 and metrics["steps"] > 0
    assert [len(metrics["history"][k]) for k in ("epochs", "cycles")] == [1, 1]


def _ce_module(folder, name: str, method: str):
    (folder / f"{name}.py").write_text(textwrap.dedent(f"""
        from bench.plugins import register_method
        from bench.methods.sl1h import CrossEntropy

        @register_method("{method}", "CE from a module named on the command line")
        def factory():
            return CrossEntropy("{method}")
        """))


def test_a_plugin_option_module_reaches_the_worker_processes(tmp_path, monkeypatch, capsys,
                                                             clean_plugins):
    """The module sits in the current folder, on no path the pool's processes
    know: the grid carries it (the bug: 'unknown method' inside every worker)."""
    _ce_module(tmp_path, "mymethod", "myce")
    monkeypatch.chdir(tmp_path)
    argv = ["run", "--plugin", "mymethod", "--method", "myce", *DIGITS, *TINY,
            "--results", str(tmp_path / "results")]
    assert main(argv) == 0
    assert "1 trained, 0 already done, 0 failed" in capsys.readouterr().out
    (record,) = (tmp_path / "results").glob("digits/smallcnn/myce/*/seed0")
    origin = json.loads((record / "config.json").read_text())["code"]["method"]
    assert origin["origin"] == "plugin" and origin["module"] == "mymethod"


def test_a_method_a_script_registered_itself_reaches_the_workers(tmp_path, monkeypatch,
                                                                 capsys, clean_plugins):
    """`import mymethod; main([...])` in a script or notebook, no --plugin:
    the grid carries the module that defines the run's plugin code."""
    import importlib

    _ce_module(tmp_path, "scriptmethod", "scriptce")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("scriptmethod")
    argv = ["run", "--method", "scriptce", *DIGITS, *TINY, "--results", str(tmp_path / "r")]
    assert main(argv) == 0
    assert "1 trained, 0 already done, 0 failed" in capsys.readouterr().out


def test_a_plugin_trains_through_submitit(confpen_site, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    argv = ["run", "--method", "confpen", "--dataset", "stripes", "--backbone", "tinycnn",
            *TINY, "--results", str(tmp_path / "results"), "--executor", "slurm",
            "--submitit-cluster", "local", "--gpus-per-job", "0", "--time", "5"]
    assert main(argv) == 0
    assert "1 trained, 0 already done, 0 failed" in capsys.readouterr().out


def test_plugin_failures_and_unknown_names_are_one_line_exit_2(tmp_path, monkeypatch, capsys,
                                                               clean_plugins):
    (tmp_path / "badplug.py").write_text("raise ImportError('needs torch 9')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("BENCH_PLUGINS", "badplug")
    assert main(["list"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["bench: error: plugin 'badplug' (BENCH_PLUGINS) failed to import: "
                   "ImportError: needs torch 9"]
    monkeypatch.delenv("BENCH_PLUGINS")
    assert main(["run", "--method", "mymethod", "--results", str(tmp_path / "r")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "unknown method 'mymethod'" in line and "--plugin MODULE" in line
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


def test_bench_command_in_a_fresh_process_loads_the_entry_point(confpen_site):
    """The console script itself (not only main() in this process)."""
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(confpen_site), *sys.path])}
    out = subprocess.run([sys.executable, "-m", "bench.cli", "list"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "plugin mhml-confpen 0.1.0 (mhml_confpen)" in out.stdout
