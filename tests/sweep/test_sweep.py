"""Grid expansion, dry runs, locks, failure isolation and resume of `bench run`."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading

import numpy as np
import pytest

from bench.sweep import runstate
from bench.core import store
from bench.cli.main import main
from bench.core.errors import BenchError
from bench.core.seeds import parse_seeds
from bench.core.registry import expand_names
from bench.sweep.run import exit_code, run_sweep, summary_text
from sweeputil import TINY, complete, popen_bench, run_args, specs_for, wait_for


# ------------------------------------------------------------------ grid --
def test_seeds_forms():
    assert parse_seeds("5") == [0, 1, 2, 3, 4]
    assert parse_seeds("2-4") == [2, 3, 4]
    assert parse_seeds("3,0,3") == [3, 0]
    for bad in ("0", "a", "4-x", "-1,2"):
        with pytest.raises(BenchError, match="--seeds"):
            parse_seeds(bad)


def test_names_expand_all_lists_and_reject_unknown():
    valid = ["sl1h", "ls", "4hml"]
    assert expand_names("all", valid, "method") == valid
    assert expand_names("4hml, sl1h,all", valid, "method") == ["4hml", "sl1h", "ls"]
    with pytest.raises(BenchError) as err:
        expand_names("sl1h,nope", valid, "method")
    msg = str(err.value)
    assert "'nope'" in msg and "sl1h, ls, 4hml, all" in msg and "\n" not in msg


def test_method_paper_is_exactly_the_papers_trained_rows(capsys, tmp_path):
    assert expand_names("paper,ls", ["sl1h", "ls", "4hml"], "method",
                        aliases={"paper": ["sl1h", "4hml"]}) == ["sl1h", "4hml", "ls"]
    assert main(["run", "--method", "paper", "--seeds", "1", "--profile", "quick",
                 "--results", str(tmp_path), "--dry-run"]) == 0
    status = capsys.readouterr().out.split("protocol per run:")[0]
    listed = [line.split("|")[3].strip() for line in status.splitlines()
              if line.startswith("| digits")]
    assert listed == ["sl1h", "ls", "mbls", "mixup", "dca", "2hsl", "2hml", "4hml"]


def test_grid_keys_and_changed_hyperparameter_gives_new_record(tmp_path):
    specs = specs_for(run_args(tmp_path, "--backbone", "smallcnn,resnet18", "--seeds", "0-1",
                               "--no-pretrained"))  # no ImageNet weights offline
    keys = [(s.backbone, s.method, s.seed) for s in specs]
    assert keys == [("smallcnn", "sl1h", 0), ("smallcnn", "sl1h", 1),
                    ("resnet18", "sl1h", 0), ("resnet18", "sl1h", 1)]
    assert len({s.record for s in specs}) == 4
    other = specs_for(run_args(tmp_path, "--seeds", "1", "--set", "lr=0.02"))[0]
    assert other.chash != specs[0].chash and other.record != specs[0].record


def _fake_record(spec):
    k = 10
    arrays = {"val_logits": np.zeros((3, 1, k)), "val_labels": np.arange(3),
              "test_logits": np.zeros((3, 1, k)), "test_labels": np.arange(3)}
    store.write_record(spec.record, {"seed": spec.seed}, {"test": {"acc": 1.0}}, arrays)


def test_dry_run_shows_done_running_failed_missing_and_trains_nothing(tmp_path, capsys):
    argv = ["run", "--dataset", "digits", "--backbone", "smallcnn", "--results", str(tmp_path),
            "--seeds", "4", *TINY]
    specs = specs_for(run_args(tmp_path, "--seeds", "4"))
    _fake_record(specs[0])
    assert runstate.acquire(specs[1].record) is None  # held by this live process
    runstate.write_failure(specs[2].record, "non-finite loss: boom", 17)
    assert main([*argv, "--dry-run"]) == 0
    out, protocol = capsys.readouterr().out.split("protocol per run:")
    lines = {int(line.split("|")[4]): line for line in out.splitlines() if "| digits" in line}
    assert "| done" in lines[0] and f"pid {os.getpid()}" in lines[1] and "running" in lines[1]
    assert "failed" in lines[2] and "boom (last step 17)" in lines[2] and "missing" in lines[3]
    assert "a real run would train 2" in out
    assert complete(specs) == [specs[0]]
    # the protocol table below it: the four seeds share one row (same protocol),
    # sizes train/val/test, steps per epoch
    rows = [line.split("|") for line in protocol.splitlines() if "| digits" in line]
    assert [r[4].strip() for r in rows] == ["0-3"]
    assert {r[5].strip() for r in rows} == {"16/16/16"}
    assert {r[11].strip() for r in rows} == {"16"}  # 1,077 // 64 (drop_last)


# ------------------------------------------------------------------ locks --
def test_lock_of_live_process_is_respected_and_dead_one_taken_over(tmp_path):
    record = tmp_path / "d" / "b" / "m" / "h" / "seed0"
    sleeper = subprocess.Popen(["sleep", "3600"])  # killed below; lives however slow the test
    try:
        holder = {"pid": sleeper.pid, "host": os.uname().nodename,
                  "start": runstate.proc_start(sleeper.pid)}
        runstate.lock_path(record).parent.mkdir(parents=True)
        runstate.lock_path(record).write_text(json.dumps(holder))
        assert f"pid {sleeper.pid}" in runstate.acquire(record)
        assert runstate.live_holder(record)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert runstate.live_holder(record) is None
    assert runstate.acquire(record) is None  # stale lock taken over
    assert json.loads(runstate.lock_path(record).read_text())["pid"] == os.getpid()
    runstate.release(record)
    assert not runstate.lock_path(record).exists()


# --------------------------------------------------------------- failures --
def test_sigkilled_run_and_nan_run_fail_alone_while_the_rest_finish(tmp_path):
    long_run = specs_for(run_args(tmp_path, "--seeds", "1", "--set", "epochs_per_cycle=40"))[0]
    nan_run = specs_for(run_args(tmp_path, "--seeds", "1", "--set", "lr=1e30"))[0]
    good = specs_for(run_args(tmp_path, "--seeds", "0-1"))
    killed = {}

    def kill_long_run_once_training():
        progress = wait_for(lambda: runstate.read_progress(long_run.record), timeout=240)
        lock = json.loads(runstate.lock_path(long_run.record).read_text())
        killed.update(pid=lock["pid"], step=progress["step"])
        os.kill(lock["pid"], signal.SIGKILL)

    killer = threading.Thread(target=kill_long_run_once_training, daemon=True)
    killer.start()
    outcomes = run_sweep([long_run, nan_run, *good], run_args(tmp_path, "--jobs", "2"),
                         progress=False)
    killer.join(timeout=5)
    by = {o["record"]: o for o in outcomes}
    dead, nan = by[str(long_run.record)], by[str(nan_run.record)]
    assert dead["status"] == "failed" and "SIGKILL" in dead["reason"]
    assert dead["last_step"] >= killed["step"] >= 1
    assert nan["status"] == "failed" and nan["reason"].startswith("non-finite loss")
    assert nan["last_step"] == int(nan["reason"].split("step ")[1].split(" ")[0])
    assert [by[str(s.record)]["status"] for s in good] == ["done", "done"]
    assert complete([long_run, nan_run, *good]) == good
    # failures are on disk with reason and last step, next to the run's log
    on_disk = runstate.read_failure(long_run.record)
    assert "SIGKILL" in on_disk["reason"] and on_disk["last_step"] == dead["last_step"]
    assert "non-finite" in runstate.read_failure(nan_run.record)["reason"]
    assert "FAILED" in runstate.log_path(nan_run.record).read_text()
    assert not runstate.lock_path(long_run.record).exists()
    text = summary_text(outcomes)
    assert "2 trained, 0 already done, 2 failed" in text and "SIGKILL" in text
    assert exit_code(outcomes) == 1


def test_cli_exits_nonzero_on_nan(tmp_path, capsys):
    argv = ["run", "--dataset", "digits", "--results", str(tmp_path), "--seeds", "1",
            "--no-progress", *TINY, "--set", "lr=1e30"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "non-finite loss" in out and "0 trained, 0 already done, 1 failed" in out
    spec = specs_for(run_args(tmp_path, "--seeds", "1", "--set", "lr=1e30"))[0]
    assert not store.is_complete(spec.record)
    assert "non-finite" in runstate.read_failure(spec.record)["reason"]


def test_out_of_memory_is_a_failure_that_keeps_the_batch_size(tmp_path, monkeypatch):
    import torch

    import bench.train.experiment
    from bench.sweep.worker import execute

    calls = []

    def oom_after_3_steps(exp, bundle, method, seed, results, **kw):
        calls.append(seed)
        for step in range(1, 4):  # three training steps report through the loop's hook
            kw["on_step"](step, torch.tensor(0.5))
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(bench.train.experiment, "run_seed", oom_after_3_steps)
    spec = specs_for(run_args(tmp_path, "--seeds", "1"))[0]
    out = execute(spec)
    assert len(calls) == 1  # tried once, never again with a smaller batch
    assert out["status"] == "failed" and out["last_step"] == 3
    assert "out of GPU memory at batch size 64 (never reduced" in out["reason"]
    assert runstate.read_failure(spec.record)["last_step"] == 3
    assert not runstate.lock_path(spec.record).exists()



def test_execute_reports_a_held_run_busy_and_a_finished_one_skipped(tmp_path, monkeypatch):
    import bench.train.experiment
    from bench.sweep.worker import execute

    monkeypatch.setattr(bench.train.experiment, "run_seed", lambda *a, **k: pytest.fail("trained"))
    spec = specs_for(run_args(tmp_path, "--seeds", "1"))[0]
    assert runstate.acquire(spec.record) is None  # this live process holds the run
    try:
        out = execute(spec)
    finally:
        runstate.release(spec.record)
    assert out["status"] == "busy" and out["reason"] == f"being trained by pid {os.getpid()} " \
        f"on {out['host']}" and out["end"] >= out["start"]
    assert runstate.read_failure(spec.record) is None
    store.write_record(spec.record, {}, {}, {})  # complete: metrics.json says done
    out = execute(spec)
    assert out["status"] == "skipped" and "reason" not in out
    assert not runstate.lock_path(spec.record).exists()

# ----------------------------------------------------------------- resume --
def test_sigkilled_sweep_reruns_only_missing_runs(tmp_path, capsys):
    argv = ["run", "--dataset", "digits", "--backbone", "smallcnn", "--results", str(tmp_path),
            "--seeds", "0-2", "--jobs", "2", "--no-progress", *TINY]
    specs = specs_for(run_args(tmp_path, "--seeds", "0-2"))
    sweep = popen_bench(*argv)

    def one_done_one_training():  # no sleep: the kill lands while a run is mid-training
        done = complete(specs)
        return done and any(runstate.read_progress(s.record) for s in specs if s not in done)

    wait_for(one_done_one_training, timeout=240, every=0.01)
    sweep.send_signal(signal.SIGKILL)
    sweep.wait()
    # the sweep's worker dies with it (it watches the sweep's pid): nothing keeps training
    wait_for(lambda: not any(runstate.live_holder(s.record) for s in specs), timeout=30)
    before = {s.record: (s.record / "metrics.json").stat().st_mtime_ns for s in complete(specs)}
    assert 1 <= len(before) < 3
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out
    trained = 3 - len(before)
    assert f"{trained} trained, {len(before)} already done, 0 failed" in out
    assert complete(specs) == specs
    for record, mtime in before.items():  # finished records were not retrained
        assert (record / "metrics.json").stat().st_mtime_ns == mtime


# -------------------------------------------------------------- run_all --
def _stub_repo(tmp_path, report_fails: bool):
    """run_all.sh beside a stub setup.sh and a stub bench that logs its calls
    (and, with report_fails, exits 2 on `bench report` after logging it)."""
    import shutil
    from pathlib import Path

    repo = tmp_path / "repo"
    (repo / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(Path(__file__).resolve().parents[2] / "run_all.sh", repo / "run_all.sh")
    (repo / "setup.sh").write_text("#!/bin/sh\necho setup >> calls.txt\n")
    fail = '[ "$1" = report ] && exit 2\n' if report_fails else ""
    (repo / ".venv" / "bin" / "bench").write_text(
        f"#!/bin/sh\necho \"$*\" >> calls.txt\n{fail}exit 0\n")
    for f in ("run_all.sh", "setup.sh", ".venv/bin/bench"):
        (repo / f).chmod(0o755)
    return repo


@pytest.mark.parametrize("report_fails", [False, True])
def test_run_all_calls_setup_then_the_grid_then_reports(tmp_path, report_fails):
    repo = _stub_repo(tmp_path, report_fails)
    env = {**os.environ, "JOBS": "3"}
    done = subprocess.run(["./run_all.sh", "--quick", "--no-progress"], cwd=repo, env=env)
    assert done.returncode == (2 if report_fails else 0)  # a failed report is not hidden
    calls = (repo / "calls.txt").read_text().splitlines()
    assert calls[0] == "setup"
    # the over-confident demo regime (docs/quickstart.md)
    # (grids/quick.toml: tests/cli/test_grid_file.py checks its runs)
    assert calls[1] == "run --grid grids/quick.toml --jobs 3 --results results --no-progress"
    assert calls[2] == "report --results results --out reports"
    # then the shift and OOD demo (tests/sweep/test_run_all_shift_demo.py)
    (repo / "calls.txt").unlink()
    done = subprocess.run(["./run_all.sh"], cwd=repo, env=env)
    assert done.returncode == (2 if report_fails else 0)
    calls = (repo / "calls.txt").read_text().splitlines()
    # grids/paper.toml, a dataset a call (tests/cli/test_grid_file.py checks its runs)
    assert calls[1:4] == [f"run --grid grids/paper.toml:{d} --results results"
                          for d in ("chaoyang", "kvasir", "pathmnist")]
