"""Issue 35: the last bad inputs and faults that got through, each one line
and exit status 2 (130 for Ctrl-C), checked before anything is written.

Point 3: a caption with unpaired braces; 4: a flag whose package cannot be
imported; 5: a full disk (bench run exits 2; bench report swaps its folder in
whole); 6: Ctrl-C while a command starts; 7: a report with no intact record
names every failed run and writes failed_runs.csv; 9: a warning said once."""
from __future__ import annotations

import builtins
import errno
import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from report_records import write_known

from bench.cli.main import main
from bench.core import store
from sweeputil import bench_cmd

REPORT = ["--no-plots", "--no-progress"]
TINY_RUN = ["--dataset", "digits", "--backbone", "smallcnn", "--seeds", "1", "--profile",
            "quick", "--set", "cycles=1", "--set", "epochs_per_cycle=1", "--set",
            "image_size=12", "--set", "batch_size=64", "--no-progress"]


def one_line(capsys, code: int, argv) -> str:
    got = main(argv)
    err = capsys.readouterr().err.strip()
    assert got == code, err
    assert "\n" not in err and err.startswith("bench: error: ") and "Traceback" not in err, err
    return err


def tree(root) -> dict:
    """Every file and folder under root with its size and mtime (hidden ones too)."""
    return {str(p.relative_to(root)): (p.is_dir(), p.stat().st_size if p.is_file() else 0,
                                       p.stat().st_mtime_ns) for p in root.rglob("*")}


# ---------------------------------------------------------------- point 3 --
def test_point3_caption_with_unbalanced_braces_is_one_line_exit_2_nothing_written(
        tmp_path, capsys):
    runs, out = write_known(tmp_path / "runs"), tmp_path / "rep"
    caption = r"Results on {dataset} \textbf{bold} {unbalanced"
    err = one_line(capsys, 2, ["report", "--results", str(runs), "--out", str(out),
                               "--caption-main", caption, *REPORT])
    assert f"--caption-main '{caption}': unbalanced braces (1 {{ never closed)" in err
    assert not out.exists()
    err = one_line(capsys, 2, ["report", "--results", str(runs), "--out", str(out),
                               "--caption-ts", r"a } b {", *REPORT])
    assert "the } at character 3 closes nothing" in err and not out.exists()
    # paired braces pass: a format string (doubled braces) and plain LaTeX
    fmt, raw = r"Results on \textbf{{{dataset}}} over {n} seeds", r"\{lit\} \frac{1}{2} {dataset}"
    assert main(["report", "--results", str(runs), "--out", str(out), "--caption-std", fmt,
                 "--caption-ts", raw, *REPORT]) == 0
    assert r"Results on \textbf{toy} over 3 seeds" in (out / "tables" / "toy_std.tex").read_text()
    assert r"\{lit\} \frac{1}{2} toy" in (out / "tables" / "toy_ts.tex").read_text()


# ---------------------------------------------------------------- point 4 --
def test_point4_tensorboard_that_cannot_be_imported_stops_before_training(
        tmp_path, capsys, monkeypatch):
    """tensorboard's folder is there (find_spec sees it) but its writer cannot
    be imported, as without protobuf: one line, nothing trained or written."""
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    results = tmp_path / "r"
    err = one_line(capsys, 2, ["run", *TINY_RUN, "--results", str(results), "--tensorboard"])
    assert err.startswith("bench: error: --tensorboard needs the tensorboard package, which "
                          "cannot be imported here (")
    assert "pip install tensorboard" in err and not results.exists()


def test_point4_slurm_without_submitit_stops_before_anything_is_touched(
        tmp_path, capsys, monkeypatch):
    """A damaged record would have been moved aside before the executor found
    submitit missing; now nothing is touched."""
    from sweeputil import run_args, specs_for

    results = tmp_path / "r"
    (spec,) = specs_for(run_args(results, "--seeds", "1", "--profile", "quick", "--set",
                                 "image_size=12"))
    store.write_record(spec.record, {"seed": 0}, {"test": {"acc": 0.5}}, {"v": [1.0]})
    (spec.record / "predictions.npz").write_bytes(b"cut")  # damaged: a run would move it
    before = tree(results)
    monkeypatch.setitem(sys.modules, "submitit", None)
    capsys.readouterr()
    err = one_line(capsys, 2, ["run", *TINY_RUN, "--results", str(results), "--executor",
                               "slurm", "--submitit-cluster", "local"])
    assert err.startswith("bench: error: --executor slurm needs the submitit package")
    assert tree(results) == before


# ---------------------------------------------------------------- point 5 --
def _in_process(monkeypatch):
    """Runs in this process (the pool's would not see the patched writer)."""
    from bench.sweep import run as sweep_run
    from bench.sweep import worker

    class Inline:
        @staticmethod
        def get(name):
            return lambda specs, opts, on_outcome: [on_outcome(worker.execute(s))
                                                    for s in specs]
    monkeypatch.setattr(sweep_run, "EXECUTORS", Inline)


def test_point5_full_disk_ends_bench_run_with_exit_2(tmp_path, capsys, monkeypatch):
    results = tmp_path / "r"
    _in_process(monkeypatch)
    real = json.dump

    def dump(obj, fp, *a, **k):  # every JSON file but the lock: the disk is full
        if not str(getattr(fp, "name", "")).endswith(".lock"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(obj, fp, *a, **k)
    monkeypatch.setattr(json, "dump", dump)
    assert main(["run", *TINY_RUN, "--results", str(results)]) == 2
    out = capsys.readouterr().out
    assert "0 trained, 0 already done, 1 failed" in out and "disk full" in out


def _fill_disk_at_first_table(monkeypatch):
    """The disk fills when the first LaTeX table is written (after the CSVs)."""
    real = builtins.open

    def opener(path, mode="r", *args, **kwargs):
        if "w" in mode and ".tex." in os.path.basename(str(path)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(path, mode, *args, **kwargs)
    monkeypatch.setattr(builtins, "open", opener)


def test_point5_failed_report_leaves_the_previous_one_untouched(tmp_path, capsys, monkeypatch):
    runs, out = write_known(tmp_path / "runs"), tmp_path / "rep"
    (tmp_path / "rep").mkdir()
    (out / "paper.tex").write_text("my own file")  # a user's file beside the report
    assert main(["report", "--results", str(runs), "--out", str(out), *REPORT]) == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    _fill_disk_at_first_table(monkeypatch)
    capsys.readouterr()  # the second report differs: more columns in every CSV and table
    err = one_line(capsys, 2, ["report", "--results", str(runs), "--out", str(out),
                               "--metrics", "ece,nll,brier", *REPORT])
    assert "disk full writing" in err
    monkeypatch.undo()
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["paper.tex", "runs.csv", "groups.csv", "failed_runs.csv", "cache", "stats",
         "tables", "report.md"])  # no staging folder left either
    # a first report that fails leaves no folder that looks finished
    _fill_disk_at_first_table(monkeypatch)
    one_line(capsys, 2, ["report", "--results", str(runs), "--out", str(tmp_path / "new" / "rep"),
                         *REPORT])
    assert not (tmp_path / "new").exists()
    monkeypatch.undo()
    # and one that works replaces the report's files, keeping the user's
    assert main(["report", "--results", str(runs), "--out", str(out), "--metrics",
                 "ece,nll,brier", *REPORT]) == 0
    assert "brier" in (out / "groups.csv").read_text().splitlines()[0]
    assert (out / "paper.tex").read_text() == "my own file"
    assert f"  {out / 'runs.csv'}" in capsys.readouterr().out  # the final paths, not staging


# ---------------------------------------------------------------- point 6 --
def _loading(pid: int, library: str) -> bool:
    """Has process `pid` mapped `library` (a compiled extension being imported)?"""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return library in f.read()
    except OSError:
        return False


@pytest.mark.parametrize("argv, library", [(["run", "--dry-run", *TINY_RUN], "libtorch"),
                                           (["report", *REPORT], "pandas/_libs")])
def test_point6_ctrl_c_during_start_up_is_one_line_exit_130(tmp_path, argv, library):
    """SIGINT while the command is still importing its heavy libraries (torch,
    pandas: seconds on a loaded machine), to the whole process group as a
    terminal's Ctrl-C; the moment is seen in /proc, not guessed from a clock."""
    proc = subprocess.Popen(bench_cmd(*argv, "--results", str(tmp_path / "r")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 300
        while not _loading(proc.pid, library) and proc.poll() is None:
            assert time.monotonic() < deadline, f"{library} never started loading"
            time.sleep(0.002)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert err.splitlines() == ["bench: interrupted; finished seeds are saved, rerun to continue"]
    assert out == "" and not (tmp_path / "r").exists()


# ---------------------------------------------------------------- point 7 --
def test_point7_report_without_an_intact_record_names_each_and_writes_failed_runs(
        tmp_path, capsys):
    runs, out = tmp_path / "runs", tmp_path / "rep"
    records = []
    for seed in (0, 1):  # one damaged record, one run left unfinished (no metrics.json)
        path = store.record_dir(runs, "toy", "resnet50", "sl1h", "abc123", seed)
        store.write_record(path, {"seed": seed}, {"test": {"acc": 0.5}}, {"v": [1.0]})
        records.append(path)
    (records[0] / "predictions.npz").write_bytes(b"cut")
    (records[1] / "metrics.json").unlink()
    err = one_line(capsys, 2, ["report", "--results", str(runs), "--out", str(out), *REPORT])
    assert "2 failed or unfinished runs: " in err
    assert "toy/resnet50/sl1h seed 0 (damaged: predictions.npz" in err
    assert "toy/resnet50/sl1h seed 1 (incomplete: seed folder without metrics.json" in err
    assert err.endswith(f"; listed in {out / 'failed_runs.csv'}")
    failed = pd.read_csv(out / "failed_runs.csv", dtype=str)
    assert sorted(failed["seed"]) == ["0", "1"] and sorted(p.name for p in out.iterdir()) == [
        "failed_runs.csv"]


# ---------------------------------------------------------------- point 9 --
def test_point9_same_file_warning_is_said_once(tmp_path, capsys):
    """train= and test= the same CSV; the dataset is loaded at two sizes (its
    default backbone's, then the run's) and for two methods."""
    from PIL import Image
    import numpy as np

    rows = ["image,label"]
    for i in range(12):
        Image.fromarray(np.full((8, 8, 3), 20 * i, np.uint8)).save(tmp_path / f"{i}.png")
        rows.append(f"{i}.png,{'ab'[i % 2]}")
    csv = tmp_path / "train.csv"
    csv.write_text("\n".join(rows) + "\n")
    assert main(["run", "--dry-run", "--dataset", "csv", "--data-opt", f"train={csv}",
                 "--data-opt", f"test={csv}", "--method", "sl1h,ls", "--seeds", "1",
                 "--set", "image_size=16", "--results", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err
    assert err.count("bench: warning: ") == 1, err
    assert f"--data-opt train= and test= are the same file {csv}" in err
