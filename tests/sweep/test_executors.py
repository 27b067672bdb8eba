"""Local GPU-slot pinning and the submitit (SLURM) path."""
from __future__ import annotations

import pytest

from bench.sweep import runstate
from bench.core import store
from bench.cli.main import main
from bench.core.errors import BenchError
from bench.sweep.executors import check_options, local_slots, visible_gpus
from bench.sweep.run import run_sweep
from sweeputil import TINY, complete, run_args, specs_for


def test_visible_gpus_from_env_and_device(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 5")
    assert visible_gpus(None) == ["2", "5"]
    assert visible_gpus("cuda") == ["2", "5"]
    assert visible_gpus("cuda:1") == ["1"]
    assert visible_gpus("cpu") == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus(None) == []


def test_slots_per_gpu_and_cpu_jobs():
    assert local_slots(["0", "1"], None, 1) == ["0", "1"]
    assert local_slots(["0", "1"], None, 2) == ["0", "1", "0", "1"]  # spread, then share
    assert local_slots(["0", "1"], 3, 2) == ["0", "1", "0"]  # --jobs caps the slots
    assert local_slots([], None, 1) == [None]
    assert local_slots([], 3, 1) == [None, None, None]


def test_bad_executor_options_are_one_line_errors(tmp_path):
    with pytest.raises(BenchError, match="unknown executor 'pbs'.*local, slurm"):
        check_options(run_args(tmp_path, "--executor", "pbs"))
    with pytest.raises(BenchError, match="--jobs-per-gpu 0: must be at least 1"):
        check_options(run_args(tmp_path, "--jobs-per-gpu", "0"))


def test_executor_options_one_set_of_defaults_from_cli_api_and_dataclass(tmp_path):
    """The flags (bench.cli), RunOptions (bench.api) and ExecutorOptions agree,
    and each flag lands in its typed field."""
    from bench.cli.commands import run_options
    from bench.cli.main import build_parser
    from bench.sweep.executor_options import ExecutorOptions
    from bench.sweep.options import RunOptions

    plain = build_parser().parse_args(["run"])
    assert ExecutorOptions.of(plain) == ExecutorOptions() == ExecutorOptions.of(RunOptions())
    args = build_parser().parse_args(
        ["run", "--jobs", "3", "--jobs-per-gpu", "2", "--fuse-seeds", "--fuse-max", "4",
         "--executor", "slurm", "--partition", "gpu", "--time", "7", "--gpus-per-job", "0",
         "--cpus-per-job", "2", "--array-parallelism", "5", "--slurm-folder", "f",
         "--submitit-cluster", "local", "--device", "cpu"])
    assert ExecutorOptions.of(args) == ExecutorOptions(
        executor="slurm", device="cpu", jobs=3, jobs_per_gpu=2, fuse="seeds", fuse_max=4,
        partition="gpu", time=7, gpus_per_job=0, cpus_per_job=2, array_parallelism=5,
        slurm_folder="f", submitit_cluster="local")
    assert ExecutorOptions.of(run_options(args)) == ExecutorOptions.of(args)


def test_fake_gpus_one_run_per_slot_pinned(tmp_path, monkeypatch):
    """CUDA_VISIBLE_DEVICES=0,1 on a CPU machine: each run's process must see
    exactly one of the two ids, and a GPU never runs two runs at once."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    specs = specs_for(run_args(tmp_path, "--seeds", "4"))
    outcomes = run_sweep(specs, run_args(tmp_path), progress=False)
    assert [o["status"] for o in outcomes] == ["done"] * 4
    for o in outcomes:
        assert o["cuda_visible_devices"] == o["slot"]  # what the run's process saw
        assert f"CUDA_VISIBLE_DEVICES={o['slot']}" in runstate.log_path(o["record"]).read_text()
    assert {o["slot"] for o in outcomes} == {"0", "1"}
    assert len({o["pid"] for o in outcomes}) == 4  # every run had a process of its own
    for gpu in ("0", "1"):
        spans = sorted((o["start"], o["end"]) for o in outcomes if o["slot"] == gpu)
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
    starts = sorted(o["start"] for o in outcomes)
    ends = sorted(o["end"] for o in outcomes)
    assert starts[1] < ends[0]  # two runs did overlap: both slots were used at once
    assert complete(specs) == specs


def test_submitit_local_executor_runs_a_two_run_grid_and_resumes(tmp_path, capsys,
                                                                 monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # two jobs side by side on a small machine
    argv = ["run", "--dataset", "digits", "--backbone", "smallcnn", "--results", str(tmp_path),
            "--seeds", "2", "--no-progress", *TINY, "--executor", "slurm",
            "--submitit-cluster", "local", "--gpus-per-job", "0", "--time", "5"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "2 trained, 0 already done, 0 failed" in out
    specs = specs_for(run_args(tmp_path, "--seeds", "2"))
    assert complete(specs) == specs
    assert len(_job_folders(tmp_path)) == 2  # one submitit job per run
    # its pickles' folder is this user's alone (a shared disk cannot swap one)
    assert (tmp_path / "_submitit").stat().st_mode & 0o777 == 0o700
    for spec in specs:
        config = store.read_json(spec.record / "config.json")
        assert config["seed"] == spec.seed and config["config_hash"] == spec.chash
    assert main(argv) == 0  # resumable the same way: nothing is submitted again
    assert "0 trained, 2 already done, 0 failed" in capsys.readouterr().out
    assert len(_job_folders(tmp_path)) == 2


def _job_folders(root) -> list:
    """Per-job folders (RESULTS/_submitit/<job id>); '%j' holds submission pickles."""
    return [p for p in (root / "_submitit").iterdir() if p.is_dir() and p.name != "%j"]
