"""`bench run --fuse-seeds`: a method's seeds trained in one process as one
fused model, with every sweep guarantee (same records, skip, locks, failures)."""
from __future__ import annotations

import numpy as np

from bench.sweep import runstate
from bench.core import store
from bench.cli.commands import run_options
from bench.cli.main import main
from bench.sweep.executors import fuse_groups
from sweeputil import specs_for

# The quick profile on digits, plus a large batch so a run is a few steps. 12 px,
# not 16: at 16 px this training amplifies last-bit differences ~1000x (a 1e-7
# nudge of the initial weights moves test logits by ~5e-4), so a 1e-4 fused vs
# unfused comparison would pass or fail with the thread count (docs/speed.md).
TINY = ["--dataset", "digits", "--backbone", "smallcnn", "--profile", "quick",
        "--set", "cycles=1", "--set", "epochs_per_cycle=1", "--set", "image_size=12",
        "--set", "batch_size=64", "--no-progress"]
METRICS = ("acc", "ece", "nll", "brier", "auc")


def _argv(results, *extra):
    return ["run", "--results", str(results), *TINY, *extra]


def _specs(results, *extra):
    from bench.cli.main import build_parser

    return specs_for(build_parser().parse_args(_argv(results, *extra)))


def _test_metrics(spec) -> dict:
    return store.read_json(spec.record / "metrics.json")["test"]


def test_fused_sweep_equals_unfused_and_rerun_trains_nothing(tmp_path, capsys):
    fused, alone = tmp_path / "fused", tmp_path / "alone"
    assert main(_argv(alone, "--seeds", "2")) == 0
    capsys.readouterr()
    assert main(_argv(fused, "--seeds", "2", "--fuse-seeds")) == 0
    out = capsys.readouterr().out
    assert "2 trained, 0 already done, 0 failed" in out
    for f, a in zip(_specs(fused, "--seeds", "2"), _specs(alone, "--seeds", "2")):
        assert f.record.relative_to(fused) == a.record.relative_to(alone)  # same hash, layout
        config = store.read_json(f.record / "config.json")
        assert config["fused_group"] == [0, 1]
        assert sorted(p.name for p in f.record.iterdir()) == \
            sorted(p.name for p in a.record.iterdir())
        got, want = _test_metrics(f), _test_metrics(a)
        for m in METRICS:
            assert abs(got[m] - want[m]) <= 1e-4, (f.seed, m, got[m], want[m])
        pf, pa = store.load_predictions(f.record), store.load_predictions(a.record)
        np.testing.assert_allclose(pf["test_logits"], pa["test_logits"], atol=1e-4)
        assert not runstate.lock_path(f.record).exists()
    stamps = [(s.record / "metrics.json").stat().st_mtime_ns for s in _specs(fused, "--seeds", "2")]
    assert main(_argv(fused, "--seeds", "2", "--fuse-seeds")) == 0
    assert "0 trained, 2 already done, 0 failed" in capsys.readouterr().out
    assert [(s.record / "metrics.json").stat().st_mtime_ns
            for s in _specs(fused, "--seeds", "2")] == stamps


def test_locked_seed_is_busy_and_the_rest_of_the_group_trains(tmp_path, capsys):
    seed0, seed1 = _specs(tmp_path, "--seeds", "2")
    assert runstate.acquire(seed1.record) is None  # this live test process holds seed 1
    try:
        assert main(_argv(tmp_path, "--seeds", "2", "--fuse-seeds")) == 0
    finally:
        runstate.release(seed1.record)
    out = capsys.readouterr().out
    assert "1 trained, 0 already done, 0 failed, 1 busy" in out
    assert store.is_complete(seed0.record) and not store.is_complete(seed1.record)
    assert store.read_json(seed0.record / "config.json")["fused_group"] == [0]
    assert main(_argv(tmp_path, "--seeds", "2", "--fuse-seeds")) == 0  # resumes seed 1 only
    assert "1 trained, 1 already done, 0 failed" in capsys.readouterr().out
    assert store.read_json(seed1.record / "config.json")["fused_group"] == [1]


def test_failing_group_fails_each_seed_with_the_reason(tmp_path, capsys):
    extra = ("--seeds", "2", "--set", "lr=1e30")
    assert main(_argv(tmp_path, *extra, "--fuse-seeds")) == 1
    out = capsys.readouterr().out
    assert "0 trained, 0 already done, 2 failed" in out
    for spec in _specs(tmp_path, *extra):
        failure = runstate.read_failure(spec.record)
        assert failure["reason"].startswith("non-finite loss")
        assert failure["last_step"] == int(failure["reason"].split("step ")[1].split(" ")[0])
        assert "FAILED" in runstate.log_path(spec.record).read_text()
        assert not store.is_complete(spec.record)
        assert not runstate.lock_path(spec.record).exists()


def test_groups_are_one_per_method_and_config(tmp_path):
    specs = _specs(tmp_path, "--seeds", "3", "--method", "sl1h,2hml")
    groups = fuse_groups(specs)
    assert [[s.seed for s in g] for g in groups] == [[0, 1, 2], [0, 1, 2]]
    assert [{s.method for s in g} for g in groups] == [{"sl1h"}, {"2hml"}]


def test_fusing_is_local_only(tmp_path, capsys):
    assert main(_argv(tmp_path, "--seeds", "2", "--fuse-seeds", "--executor", "slurm")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "local executor only" in err


def test_killed_group_fails_each_unfinished_seed_with_its_last_step(tmp_path):
    import json
    import os
    import signal
    import threading

    from bench.cli.main import build_parser
    from bench.sweep.run import run_sweep
    from sweeputil import wait_for

    args = build_parser().parse_args(_argv(tmp_path, "--seeds", "2", "--fuse-seeds",
                                           "--set", "epochs_per_cycle=40"))
    specs = specs_for(args)
    killed = {}

    def kill_once_training():
        progress = wait_for(lambda: runstate.read_progress(specs[1].record), timeout=240)
        lock = json.loads(runstate.lock_path(specs[0].record).read_text())
        killed.update(pid=lock["pid"], step=progress["step"])
        os.kill(lock["pid"], signal.SIGKILL)

    killer = threading.Thread(target=kill_once_training, daemon=True)
    killer.start()
    outcomes = run_sweep(specs, run_options(args), progress=False)
    killer.join(timeout=5)
    assert [o["status"] for o in outcomes] == ["failed", "failed"]
    for spec, o in zip(specs, outcomes):
        assert "SIGKILL" in o["reason"] and o["last_step"] >= killed["step"] >= 1
        assert runstate.read_failure(spec.record)["last_step"] == o["last_step"]
        assert not runstate.lock_path(spec.record).exists()
        assert not store.is_complete(spec.record)
