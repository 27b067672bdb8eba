"""`bench run --executor slurm` against a live slurmctld/slurmd (tests/slurmcluster.py):
real sbatch job arrays, what a user meets on a CPU-only partition, and the
faults: a cancelled task, a killed sweep, a preempted (signalled) task, two
sweeps of one grid. Tiny digits runs; tests/sweep/gate stops a task right
after its first saved cycle, so every fault lands at a known point."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from bench.core import store
from bench.sweep import runstate
from sweeputil import bench_cmd, run_args, specs_for, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]

GATE_CODE = Path(__file__).parent / "gate"
CYCLES = ["--set", "cycles=2", "--set", "epochs_per_cycle=1", "--set", "image_size=16",
          "--set", "batch_size=64"]


def _argv(results, seeds="1", *extra):
    return ["run", "--dataset", "digits", "--backbone", "smallcnn", "--results", str(results),
            "--seeds", seeds, "--no-progress", *CYCLES, "--executor", "slurm",
            "--partition", "debug", *extra]


def _env(gate: Path | None = None) -> dict:
    # the sweep asks squeue each second, not backing off to 30 s: a task's end is
    # seen within a second (this cluster is the tests' alone)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "BENCH_SLURM_POLL_MAX_S": "1"}
    if gate is not None:
        gate.mkdir(exist_ok=True)
        env.update(BENCH_TEST_GATE=str(gate),
                   PYTHONPATH=os.pathsep.join([str(GATE_CODE), env.get("PYTHONPATH", "")]))
    return env


def _bench(argv, env, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run(bench_cmd(*argv), env=env, capture_output=True, text=True,
                          timeout=timeout)


STARTED: list = []  # sweeps started by the running test, killed by pid if it fails


@pytest.fixture(autouse=True)
def _no_sweep_left():
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _start(argv, env) -> subprocess.Popen:
    proc = subprocess.Popen(bench_cmd(*argv), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    STARTED.append(proc)
    return proc


def _specs(results, seeds="1"):
    return specs_for(run_args(results, "--seeds", seeds, *CYCLES))


def _saved_first_cycle(gate: Path, spec) -> Path:
    return gate / f"{store.state_path(spec.record).name}.cycle1"


def _job_of(spec) -> str:
    return runstate.read_json(runstate.lock_path(spec.record))["slurm_job"]


def _state(job: str) -> str:
    return subprocess.run(["squeue", "--states=all", "--noheader", "--format=%T", "--jobs", job],
                          capture_output=True, text=True).stdout.strip()


def _reason(job: str) -> str:
    return subprocess.run(["squeue", "--states=all", "--noheader", "--format=%T %r", "--jobs",
                           job], capture_output=True, text=True).stdout.strip()


def _submitted_tasks(results) -> int:
    """Tasks submitted so far: submitit writes one <task id>_submitted.pkl per task."""
    return len(list((Path(results) / "_submitit").glob("*/*_submitted.pkl")))


def test_default_run_on_a_cpu_partition_trains_and_reports(tmp_path):
    """No --gpus-per-job / --cpus-per-job: the partition has no GPUs and 2 CPUs
    a node, so the array asks for none and at most 2; sacct has no database."""
    dry = _bench(_argv(tmp_path, "2", "--dry-run"), _env())
    assert dry.returncode == 0, dry.stderr
    assert "one job array of 2 tasks" in dry.stdout
    assert "--gpus-per-node=0" in dry.stdout and "--partition=debug" in dry.stdout
    assert f"--cpus-per-task={min(4, os.cpu_count())}" in dry.stdout
    done = _bench(_argv(tmp_path, "1"), _env())  # one of them trained: enough here
    assert done.returncode == 0, done.stderr
    assert "1 trained, 0 already done, 0 failed" in done.stdout
    assert "Traceback" not in done.stderr
    assert done.stderr.count("sacct") <= 1  # said once at most, not on every poll
    assert all(store.verify(s.record) is None for s in _specs(tmp_path, "1"))


@pytest.mark.parametrize("extra, option", [
    (["--gpus-per-job", "1"], "--gpus-per-job 1: partition debug has 0 GPUs"),
    (["--cpus-per-job", "999"], "--cpus-per-job 999: partition debug has"),
    (["--partition", "nope"], "--partition"),
    (["--submitit-cluster", "bogus"], "--submitit-cluster"),
])
def test_scheduler_errors_are_one_line_naming_the_option(tmp_path, extra, option):
    done = _bench(_argv(tmp_path / "r", "1", *extra), _env(), timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and option in lines[0], done.stderr
    assert not (tmp_path / "r").exists()  # nothing written


def test_scancelled_task_is_reported_and_the_rerun_resumes_only_it(tmp_path):
    gate = tmp_path / "gate"
    a, b = _specs(tmp_path, "2")
    sweep = _start(_argv(tmp_path, "2", "--cpus-per-job", "1"), _env(gate))
    for spec in (a, b):
        wait_for(lambda s=spec: _saved_first_cycle(gate, s).exists(), timeout=240)
    job = _job_of(b)
    subprocess.run(["scancel", job], check=True)
    wait_for(lambda: _state(job) == "CANCELLED", timeout=120)  # gone before the gate opens
    (gate / "open").touch()
    out, err = sweep.communicate(timeout=240)
    assert sweep.returncode == 1, err
    assert "1 trained, 0 already done, 1 failed" in out
    assert f"SLURM job {job} ended CANCELLED" in out and "Traceback" not in err
    assert store.state_path(b.record).exists() and not store.is_complete(b.record)

    dry = _bench(_argv(tmp_path, "2", "--dry-run"), _env())
    assert "resumes from its state saved at a cycle end" in dry.stdout
    assert "one job array of 1 tasks" in dry.stdout
    before = _submitted_tasks(tmp_path)
    again = _bench(_argv(tmp_path, "2", "--cpus-per-job", "1"), _env())
    assert again.returncode == 0, again.stderr
    assert "1 trained, 1 already done, 0 failed" in again.stdout
    assert _submitted_tasks(tmp_path) == before + 1  # only the cancelled run went again
    assert "resuming from the state saved" in runstate.log_path(b.record).read_text()
    assert not store.state_path(b.record).exists()
    _same_as_uninterrupted(b, tmp_path / "whole")


def _same_as_uninterrupted(spec, elsewhere) -> None:
    """The resumed SLURM run's predictions equal those of the same run trained
    uninterrupted by the local executor (one torch thread in both), bit for bit."""
    whole = _bench(["run", "--dataset", "digits", "--backbone", "smallcnn", "--results",
                    str(elsewhere), "--seeds", f"{spec.seed}-{spec.seed}", "--no-progress",
                    *CYCLES, "--jobs", str(os.cpu_count())], _env())  # 1 thread a run
    assert whole.returncode == 0, whole.stderr
    other = store.record_dir(elsewhere, spec.dataset, spec.backbone, spec.method, spec.chash,
                             spec.seed)
    got, want = store.load_predictions(spec.record), store.load_predictions(other)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def test_killed_sweep_leaves_jobs_running_and_the_rerun_skips_them(tmp_path):
    gate = tmp_path / "gate"
    specs = _specs(tmp_path, "2")
    sweep = _start(_argv(tmp_path, "2", "--cpus-per-job", "1"), _env(gate))
    for spec in specs:
        wait_for(lambda s=spec: _saved_first_cycle(gate, s).exists(), timeout=240)
    os.killpg(sweep.pid, signal.SIGKILL)
    sweep.wait()
    busy = _bench(_argv(tmp_path, "2", "--cpus-per-job", "1"), _env())
    assert busy.returncode == 0, busy.stderr
    assert "0 trained, 0 already done, 0 failed, 2 busy" in busy.stdout
    assert _submitted_tasks(tmp_path) == 2  # nothing submitted for runs held by live jobs
    (gate / "open").touch()
    wait_for(lambda: all(store.is_complete(s.record) for s in specs), timeout=240)
    again = _bench(_argv(tmp_path, "2", "--cpus-per-job", "1"), _env())
    assert "0 trained, 2 already done, 0 failed" in again.stdout


def test_signalled_task_checkpoints_requeues_and_resumes(tmp_path):
    """SIGUSR2 is what Slurm sends before a time limit (--signal=USR2@90) and on
    preemption: submitit requeues the task, which resumes from its saved cycle."""
    gate = tmp_path / "gate"
    (spec,) = _specs(tmp_path, "1")
    sweep = _start(_argv(tmp_path, "1", "--cpus-per-job", "1"), _env(gate))
    wait_for(lambda: _saved_first_cycle(gate, spec).exists(), timeout=240)
    job = _job_of(spec)
    subprocess.run(["scancel", "--signal=USR2", job], check=True)
    # Slurm holds a requeued job back (BeginTime, cred_expire + 1 s: 2 minutes); release
    # it sooner, but not within the second slurmd revoked the killed instance's
    # credential: a new one made in that same second counts as revoked too, and the
    # task then fails ("Job N already killed, do not launch batch job")
    wait_for(lambda: "BeginTime" in _reason(job), timeout=120)
    held = time.time()
    log = runstate.log_path(spec.record)

    def restarted() -> bool:
        # the requeue may set BeginTime again after a first release: release until it runs
        if time.time() >= held + 2 and "BeginTime" in _reason(job):
            subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"])
        return log.read_text().count("start ") == 2

    wait_for(restarted, timeout=240, every=0.5)  # requeued, restarted
    (gate / "open").touch()
    out, err = sweep.communicate(timeout=300)
    assert sweep.returncode == 0, err
    assert "1 trained, 0 already done, 0 failed" in out
    log = runstate.log_path(spec.record).read_text()
    assert log.count("start ") == 2 and "resuming from the state saved" in log
    assert not store.state_path(spec.record).exists()


def test_two_sweeps_of_one_grid_train_each_run_once(tmp_path):
    argv = _argv(tmp_path, "2", "--cpus-per-job", "1")
    first, second = (_start(argv, _env()) for _ in range(2))
    outs = [p.communicate(timeout=300) for p in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, outs
    trained = sum(int(out.split(" trained,")[0].rsplit("\n", 1)[-1]) for out, _ in outs)
    assert trained == 2
    for spec in _specs(tmp_path, "2"):
        assert runstate.log_path(spec.record).read_text().count("done in") == 1
        assert json.loads((spec.record / "metrics.json").read_text())["status"] == "done"
