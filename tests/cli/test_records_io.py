"""Fresh-machine faults: old records, edited records, unfinished runs in
failed_runs.csv, empty or kernel-filesystem paths, results.load on a bad path,
a closed stdout pipe, a full disk."""
import json
import subprocess
import sys

import numpy as np
import pytest

from bench.cli.main import main
from bench.core import store
from diskutil import full_disk_open

TINY = ["--profile", "quick", "--set", "cycles=1", "--set", "image_size=16",
        "--set", "epochs_per_cycle=1", "--no-progress"]


def _one_line_exit_2(argv, capsys, *names):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("bench: error:")
    assert all(n in err for n in names), err
    return err


# ------------------------------------------------- point 7: bad folders --
@pytest.mark.parametrize("argv", [
    ["run", "--dry-run", "--results", ""], ["run", "--dry-run", "--results", "/proc/x"],
    ["run", "--dry-run", "--results", "/sys/x"], ["report", "--out", ""],
    ["report", "--out", "/proc/x"], ["report", "--results", ""], ["check", "--results", ""]])
def test_empty_and_kernel_fs_paths_one_line_exit_2(argv, capsys, tmp_path,
                                                                 monkeypatch):
    """'' would write into the current directory; /proc and /sys hold no files."""
    monkeypatch.chdir(tmp_path)
    flag = next(a for a in argv if a.startswith("--") and a != "--dry-run")
    value = argv[argv.index(flag) + 1]
    err = _one_line_exit_2(argv, capsys, flag)
    assert ("empty path" in err) if value == "" else (value in err and "kernel" in err)
    assert list(tmp_path.iterdir()) == []  # nothing written anywhere


# ---------------------------------------------- point 10: results.load --
def test_results_load_names_a_missing_or_file_path(tmp_path):
    import bench.results

    with pytest.raises(FileNotFoundError, match="'.*missing' does not exist"):
        bench.results.load(tmp_path / "missing")
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(NotADirectoryError, match="f.txt' is a file"):
        bench.results.load(tmp_path / "f.txt")


def test_empty_results_folder_keeps_the_documented_columns(tmp_path):
    import bench.results

    df = bench.results.load(tmp_path)
    assert len(df) == 0
    # the README's own line runs on an empty folder
    assert df.groupby(["method", "backbone"])["ece"].mean().empty
    assert {"acc", "val_nll", "n_params", "seed", "path"} <= set(df.columns)


# ------------------------------------------------ point 11: closed pipe --
@pytest.mark.parametrize("argv", [["list"], ["run", "--dry-run", "--seeds", "3"]])
def test_closed_stdout_pipe_is_quiet(argv, tmp_path):
    """`bench list | head` must not end in a BrokenPipeError traceback.
    The pipe's reader is gone before bench starts, so every write meets a closed pipe."""
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)
    results = ["--results", str(tmp_path / "r")] if argv[0] == "run" else []
    try:
        proc = subprocess.run([sys.executable, "-m", "bench.cli.main", *argv, *results],
                              stdout=write_end, stderr=subprocess.PIPE, text=True,
                              timeout=600)
    finally:
        os.close(write_end)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.stderr == "" and proc.returncode == 141  # as a SIGPIPE'd Unix tool


# ------------------------------------- old records, edited records, unfinished --
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One finished tiny run (written by today's code), copied by each test."""
    root = tmp_path_factory.mktemp("trained")
    assert main(["run", "--seeds", "1", "--results", str(root), *TINY]) == 0
    return root


def _copy(trained, tmp_path):
    import shutil

    root = tmp_path / "results"
    shutil.copytree(trained, root)
    (key,) = store.iter_seed_dirs(root)
    return root, key.path(root)


def _as_earlier_versions_wrote_it(record) -> None:
    """metrics.json exactly as versions before checksums wrote it: no `files`
    entry, no digest, json.dump(indent=2, sort_keys=True)."""
    metrics = store.read_json(record / "metrics.json")
    for key in ("files", "digest"):
        metrics.pop(key, None)
    with open(record / "metrics.json", "w") as f:
        json.dump(metrics, f, indent=2, sort_keys=True, default=str)


def _report(root, out, capsys):
    capsys.readouterr()
    assert main(["report", "--results", str(root), "--out", str(out), "--no-plots",
                 "--no-progress"]) == 0
    import pandas as pd

    runs = pd.read_csv(out / "runs.csv")
    failed = pd.read_csv(out / "failed_runs.csv", dtype=str).fillna("")
    return runs, failed, capsys.readouterr().out


def test_pre_checksum_record_is_intact_to_every_command(trained, tmp_path, capsys):
    """Old records stay finished: check, report, dry run and a real rerun all take a record
    without checksums for intact, and none moves it aside."""
    root, record = _copy(trained, tmp_path)
    _as_earlier_versions_wrote_it(record)
    assert store.verify(record) is None
    stamp = (record / "metrics.json").stat().st_mtime_ns
    capsys.readouterr()
    assert main(["check", "--results", str(root)]) == 0
    assert "1 intact, 0 damaged" in capsys.readouterr().out
    runs, failed, _ = _report(root, tmp_path / "rep", capsys)
    assert len(runs) == 1 and runs["seed"].tolist() == [0] and failed.empty
    run = ["run", "--seeds", "1", "--results", str(root), *TINY]
    assert main([*run, "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])["status"] == "done"
    assert main(run) == 0
    assert "0 trained, 1 already done, 0 failed" in capsys.readouterr().out
    assert not [p for p in record.parent.iterdir() if "damaged" in p.name]  # not moved
    assert (record / "metrics.json").stat().st_mtime_ns == stamp  # never rewritten


def test_hand_edited_metrics_named_by_check_and_skipped_by_report(
        trained, tmp_path, capsys):
    """A valid but edited metrics.json (ACC 0.11, ECE 0.99) no longer passes as intact."""
    root, record = _copy(trained, tmp_path)
    metrics = store.read_json(record / "metrics.json")
    assert metrics["digest"] == store.metrics_digest(metrics)
    metrics["test"].update(acc=0.11, ece=0.99)
    (record / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True))
    capsys.readouterr()
    assert main(["check", "--results", str(root)]) == 1
    out = capsys.readouterr().out
    assert "metrics.json: contents changed since written (digest mismatch)" in out
    assert main(["report", "--results", str(root), "--out", str(tmp_path / "rep"),
                 "--no-plots", "--no-progress"]) == 2  # its only record is skipped
    assert "no finished run records" in capsys.readouterr().err


def test_digest_is_the_sha256_of_the_other_keys(tmp_path):
    """The digest recomputed by hand with hashlib over the canonical JSON of the rest."""
    import hashlib

    path = store.write_record(tmp_path / "d" / "b" / "m" / "h" / "seed0", {"a": 1},
                              {"test": {"acc": 0.5}, "best_cycle": 2}, {"v": np.ones(2)})
    metrics = json.loads((path / "metrics.json").read_text())
    body = {k: v for k, v in metrics.items() if k != "digest"}
    want = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())
    assert metrics["digest"] == want.hexdigest()
    assert store.verify(path) is None


def test_unfinished_runs_are_rows_of_failed_runs_csv(trained, tmp_path, capsys):
    """A seed folder without metrics.json and a run that left its lock and progress
    (SIGKILL, no failure file) are both rows of failed_runs.csv."""
    root, record = _copy(trained, tmp_path)
    empty = record.with_name("seed3")
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    sweep = record.parent / "_sweep"
    sweep.mkdir(exist_ok=True)
    # a trainer SIGKILLed at step 7 of 134: its pid is gone (a pid above pid_max)
    (sweep / "seed5.lock").write_text(json.dumps({"pid": 2**22 + 11, "host": "h",
                                                   "start": "1"}))
    import os
    os.utime(sweep / "seed5.lock", (1e9, 1e9))  # heartbeat long stale on any host
    (sweep / "seed5.progress.json").write_text(json.dumps({"step": 7, "total": 134}))
    _, failed, printed = _report(root, tmp_path / "rep", capsys)
    rows = {r["seed"]: r for r in failed.to_dict("records")}
    assert set(rows) == {"3", "5"}
    assert rows["3"]["reason"].startswith("incomplete: seed folder without metrics.json")
    assert rows["5"]["reason"].startswith("interrupted at step 7 of 134")
    assert rows["5"]["last_step"] == "7"
    assert "2 failed or unfinished runs" in printed


# ---------------------------------------------------- point 6: full disk --
def _disk_full(monkeypatch, keep=(".lock",)):
    """Every json.dump into a file fails as on a full disk (ENOSPC) once the
    file has been created, except files ending in `keep`; the real disk is
    never filled."""
    import errno

    real = json.dump

    def dump(obj, fp, *a, **k):
        if not str(getattr(fp, "name", "")).endswith(keep):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(obj, fp, *a, **k)
    monkeypatch.setattr(json, "dump", dump)


def _in_process_executor(monkeypatch):
    """The local executor's processes would not see the patched writer: run
    each spec in this process through the same worker entry point."""
    from bench.sweep import run as sweep_run
    from bench.sweep import worker

    class Inline:
        @staticmethod
        def get(name):
            return lambda specs, opts, on_outcome: [on_outcome(worker.execute(s))
                                                    for s in specs]
    monkeypatch.setattr(sweep_run, "EXECUTORS", Inline)


def test_full_disk_fails_the_run_in_one_line_and_keeps_records(
        trained, tmp_path, capsys, monkeypatch):
    """A disk that fills while seed 1 trains: the sweep ends with its closing
    summary (one line for the run), exit 2 (as every command on a full disk, issue
    35), no 0-byte temporaries, seed 0 kept."""
    root, seed0 = _copy(trained, tmp_path)
    stamp = (seed0 / "metrics.json").stat().st_mtime_ns
    _in_process_executor(monkeypatch)
    _disk_full(monkeypatch)
    capsys.readouterr()
    assert main(["run", "--seeds", "2", "--results", str(root), *TINY]) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert "0 trained, 1 already done, 1 failed" in out
    (failed,) = [line for line in out.splitlines() if "seed1" in line and "failed" in line]
    assert "disk full" in failed and "free space and rerun" in failed
    assert not [p for p in root.rglob(".*")], "a temporary was left behind"
    assert store.verify(seed0) is None
    assert (seed0 / "metrics.json").stat().st_mtime_ns == stamp


def test_a_run_that_cannot_even_take_its_lock_fails_in_one_line(
        tmp_path, monkeypatch):
    from bench.sweep import runstate, worker
    from bench.sweep.grid import RunSpec
    from bench.core.config import TrainConfig

    spec = RunSpec("digits", "smallcnn", "sl1h", (), TrainConfig(), 0, "abc", str(tmp_path))
    _disk_full(monkeypatch, keep=())
    out = worker.execute(spec)
    assert out["status"] == "failed" and out["reason"].startswith("disk full")
    assert not runstate.lock_path(spec.record).exists()  # no empty lock left to hold it
    assert not [p for p in tmp_path.rglob(".*")]


def test_died_run_on_a_full_disk_is_one_summary_line(tmp_path, monkeypatch):
    """The sweep records a run whose process ended without reporting; on a full
    disk that record cannot be written either: the reason says disk full."""
    from bench.sweep import executors
    from bench.sweep.grid import RunSpec
    from bench.core.config import TrainConfig

    spec = RunSpec("digits", "smallcnn", "sl1h", (), TrainConfig(), 0, "abc", str(tmp_path))
    _disk_full(monkeypatch, keep=())
    out = executors.died(spec, "process exited with code 0 before reporting", pid=1)
    assert out["status"] == "failed" and out["reason"].startswith("disk full")
    assert not [p for p in tmp_path.rglob(".*")]


@pytest.mark.parametrize("room", [0, 40])
def test_report_on_a_full_disk_is_one_line_exit_2(trained, tmp_path, capsys,
                                                  monkeypatch, room):
    """The disk fills while `bench report` writes its first CSV: one line, exit
    2, and the earlier report's files are still whole (never 0 bytes)."""
    import builtins

    root, _ = _copy(trained, tmp_path)
    out = tmp_path / "rep"
    argv = ["report", "--results", str(root), "--out", str(out), "--no-plots", "--no-progress"]
    assert main(argv) == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    monkeypatch.setattr(builtins, "open", full_disk_open(room))  # every file the report writes
    capsys.readouterr()
    assert main(argv) == 2
    monkeypatch.undo()
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("bench: error: disk full writing ")
    assert ".csv" in err and "free space and rerun" in err
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before  # no file emptied or cut short, no temporary left


def test_checksummed_record_without_digest_stays_intact(tmp_path):
    """Records of the versions between checksums and the digest have `files`
    but no `digest`: still intact; a damaged file in them is still named."""
    path = store.write_record(tmp_path / "d" / "b" / "m" / "h" / "seed0", {"a": 1},
                              {"test": {"acc": 0.5}}, {"v": np.ones(3)})
    metrics = store.read_json(path / "metrics.json")
    del metrics["digest"]
    (path / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True))
    assert store.verify(path) is None
    (path / "config.json").write_text('{"a": 2}')
    assert store.verify(path).startswith("config.json: ")
