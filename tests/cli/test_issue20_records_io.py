"""Fresh-machine faults: old records, edited records, unfinished runs in
failed_runs.csv, empty or kernel-filesystem paths, results.load on a bad path,
a closed stdout pipe, a full disk. Each test names its issue point."""
import json
import subprocess
import sys

import numpy as np
import pytest

from bench.cli.main import main
from bench.core import store

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
def test_issue_point7_empty_and_kernel_fs_paths_one_line_exit_2(argv, capsys, tmp_path,
                                                                 monkeypatch):
    """Issue point 7: '' would write into the current directory; /proc and /sys hold no files."""
    monkeypatch.chdir(tmp_path)
    flag = next(a for a in argv if a.startswith("--") and a != "--dry-run")
    value = argv[argv.index(flag) + 1]
    err = _one_line_exit_2(argv, capsys, flag)
    assert ("empty path" in err) if value == "" else (value in err and "kernel" in err)
    assert list(tmp_path.iterdir()) == []  # nothing written anywhere


# ---------------------------------------------- point 10: results.load --
def test_issue_point10_results_load_names_a_missing_or_file_path(tmp_path):
    import bench.results

    with pytest.raises(FileNotFoundError, match="'.*missing' does not exist"):
        bench.results.load(tmp_path / "missing")
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(NotADirectoryError, match="f.txt' is a file"):
        bench.results.load(tmp_path / "f.txt")


def test_issue_point10_empty_results_folder_keeps_the_documented_columns(tmp_path):
    import bench.results

    df = bench.results.load(tmp_path)
    assert len(df) == 0
    # the README's own line runs on an empty folder
    assert df.groupby(["method", "backbone"])["test_ece"].mean().empty
    assert {"test_acc", "val_nll", "n_params", "seed", "path"} <= set(df.columns)


# ------------------------------------------------ point 11: closed pipe --
@pytest.mark.parametrize("argv", [["list"], ["run", "--dry-run", "--seeds", "3"]])
def test_issue_point11_closed_stdout_pipe_is_quiet(argv, tmp_path):
    """Issue point 11: `bench list | head` must not end in a BrokenPipeError traceback.
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
