"""`--fuse methods`: runs of different methods sharing an architecture trained
as one fused model give each run's own result; which runs group together."""
from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest

from bench.sweep import runstate
from bench.core import store
from bench.cli.main import build_parser, main
from bench.core.config import PROFILES
from bench.core.errors import BenchError
from bench.train.groups import fuse_groups, run_members
from bench.methods import create_method
from bench.train.experiment import make_experiment, run_seed
from exactutil import in_float64
from sweeputil import specs_for

pytestmark = pytest.mark.usefixtures("one_thread")

# Two seeds of mixup (it draws lambda and a permutation from each member's
# generator) beside same-seed members of other methods.
ONE_HEAD = [("sl1h", 0), ("ls", 0), ("mixup", 0), ("mixup", 1), ("dca", 1)]
TWO_HEADS = [("2hsl", 0), ("2hml", 0), ("2hml", 1)]


def _cfg(**kw):
    return dataclasses.replace(PROFILES["quick"], **{"cycles": 2, "epochs_per_cycle": 1, **kw})


@pytest.mark.parametrize("members", [ONE_HEAD, TWO_HEADS], ids=["1-head", "2-heads"])
def test_mixed_methods_fused_equal_each_run_alone(tiny, tmp_path, members, monkeypatch):
    """In float64 (exactutil: float32 kinks flip under reassociation), so the
    logits agree to float32 storage rounding, not to a kink's size."""
    in_float64(monkeypatch)
    cfg = _cfg()
    exps = {n: make_experiment(tiny, "smallcnn", create_method(n), cfg) for n, _ in members}
    got = run_members([(exps[n], create_method(n), s) for n, s in members], tiny,
                      tmp_path / "fused", progress=False)
    assert [g[0] for g in got] == ["done"] * len(members)
    logits = {}
    for (name, seed), (_, path) in zip(members, got):
        _, alone = run_seed(exps[name], tiny, create_method(name), seed, tmp_path / "alone",
                            progress=False)
        assert path.relative_to(tmp_path / "fused") == alone.relative_to(tmp_path / "alone")
        pf, pa = store.load_predictions(path), store.load_predictions(alone)
        for split in ("val_logits", "test_logits"):
            scale = np.abs(pa[split]).max()  # stored as float32: 8 eps of the scale
            np.testing.assert_allclose(pf[split], pa[split], rtol=0,
                                       atol=8 * np.finfo(np.float32).eps * scale)
        mf, ma = (store.read_json(p / "metrics.json") for p in (path, alone))
        assert mf["best_cycle"] == ma["best_cycle"]
        np.testing.assert_allclose(mf["cycle_val_auc"], ma["cycle_val_auc"], atol=1e-6)
        config = store.read_json(path / "config.json")
        assert config["method"] == name and config["seed"] == seed
        assert config["fused_group"] == [s for n, s in members if n == name]
        assert config["fused_members"] == [f"{n}/{s}" for n, s in members]
        logits[name, seed] = pf["test_logits"]
    # Same seed, same initial weights and batches: only the method differs,
    # and it shows, so the equalities above are not vacuous.
    first, other = members[0], next(m for m in members[1:] if m[1] == members[0][1])
    assert not np.allclose(logits[first], logits[other], atol=1e-3)


def test_members_that_cannot_step_together_are_refused(tiny, tmp_path):
    one, two = create_method("sl1h"), create_method("2hml")
    exp1 = make_experiment(tiny, "smallcnn", one, _cfg())
    with pytest.raises(BenchError, match=r"cannot fuse 2hml with sl1h: they differ in heads"):
        run_members([(exp1, one, 0), (make_experiment(tiny, "smallcnn", two, _cfg()), two, 0)],
                    tiny, tmp_path, progress=False)
    with pytest.raises(BenchError, match=r"cannot fuse sl1h with sl1h: they differ in train"):
        run_members([(exp1, one, 0),
                     (make_experiment(tiny, "smallcnn", one, _cfg(lr=0.05)), one, 1)],
                    tiny, tmp_path, progress=False)
    assert not any(tmp_path.iterdir())  # refused before anything was written


# ---------------------------------------------------------------- grouping --
TINY = ["--profile", "quick", "--set", "cycles=1", "--set", "epochs_per_cycle=1",
        "--set", "image_size=12", "--set", "batch_size=64", "--no-progress"]
ONE_HEAD_PAPER = ["sl1h", "ls", "mbls", "mixup", "dca"]


def _specs(results, *extra):
    return specs_for(build_parser().parse_args(["run", "--dataset", "digits", "--results",
                                                str(results), *TINY, *extra]))


def _members(group) -> list:
    return [(s.backbone, s.method, s.seed, s.train.lr) for s in group]


def test_paper_methods_group_by_head_count(tmp_path):
    specs = _specs(tmp_path, "--backbone", "smallcnn", "--method", "paper", "--seeds", "5")
    groups = fuse_groups(specs, "methods")
    lr = specs[0].train.lr
    assert [_members(g) for g in groups] == [
        [("smallcnn", m, s, lr) for m in ONE_HEAD_PAPER for s in range(5)],
        [("smallcnn", m, s, lr) for m in ("2hsl", "2hml") for s in range(5)],
        [("smallcnn", "4hml", s, lr) for s in range(5)],
    ]
    assert [len(g) for g in fuse_groups(specs, "seeds")] == [5] * 8
    # --fuse-max: balanced chunks in grid order, nothing lost or repeated
    capped = fuse_groups(specs, "methods", max_size=8)
    assert [len(g) for g in capped] == [7, 6, 6, 6, 5, 5, 5]
    assert [s for g in capped for s in g] == [s for g in groups for s in g]
    assert [len(g) for g in fuse_groups(specs, "seeds", max_size=2)] == [2, 2, 1] * 8
    assert fuse_groups(specs, "methods", max_size=25) == groups


def test_other_backbones_or_train_configs_never_share_a_group(tmp_path):
    specs = (_specs(tmp_path, "--backbone", "smallcnn,resnet18", "--method", "sl1h,ls,2hml",
                    "--seeds", "2")
             + _specs(tmp_path, "--backbone", "smallcnn", "--method", "sl1h,ls", "--seeds", "2",
                      "--set", "lr=0.05"))
    lr = PROFILES["quick"].lr

    def block(backbone, methods, rate):
        return [(backbone, m, s, rate) for m in methods for s in range(2)]

    assert [_members(g) for g in fuse_groups(specs, "methods")] == [
        block("smallcnn", ["sl1h", "ls"], lr), block("smallcnn", ["2hml"], lr),
        block("resnet18", ["sl1h", "ls"], lr), block("resnet18", ["2hml"], lr),
        block("smallcnn", ["sl1h", "ls"], 0.05)]


def test_released_sizes_split_methods_groups(tmp_path):
    """Chaoyang under the released protocol: LS/MbLS/MixUp/DCA train at 150 px,
    CE at 224, so one-head methods form two groups (same backbone, same config)."""
    from tests.datasets.test_datasets import write_chaoyang

    write_chaoyang(tmp_path / "cy", per_class_train=(5, 5, 5, 5))
    specs = specs_for(build_parser().parse_args(
        ["run", "--dataset", "chaoyang", "--data-root", str(tmp_path / "cy"), "--backbone",
         "resnet50", "--method", "paper", "--seeds", "2", "--results", str(tmp_path / "r"),
         "--no-progress", "--no-pretrained"]))  # sizes only: no ImageNet weights needed
    groups = fuse_groups(specs, "methods")
    got = [sorted({(s.method, s.sizes) for s in g}) for g in groups]
    small = (150, 150, 224)
    assert got == [[("sl1h", (224, 224, 224))],
                   sorted((m, small) for m in ("ls", "mbls", "mixup", "dca")),
                   [("2hml", (224, 224, 224)), ("2hsl", (224, 224, 224))],
                   [("4hml", (224, 224, 224))]]
    assert all(len(g) == 2 * len({s.method for s in g}) for g in groups)


def test_local_executor_starts_one_process_per_capped_group(tmp_path, monkeypatch):
    from bench.sweep import executors
    from bench.sweep.executor_options import ExecutorOptions

    args = build_parser().parse_args(["run", "--dataset", "digits", "--results", str(tmp_path),
                                      *TINY, "--backbone", "smallcnn", "--method",
                                      "sl1h,ls,mixup", "--seeds", "2", "--fuse", "methods",
                                      "--fuse-max", "4"])
    started = []
    monkeypatch.setattr(executors, "_spawn_group", lambda unit, slot, threads: started.append(
        [(s.method, s.seed) for s in unit]) or [])
    executors.run_local(specs_for(args), ExecutorOptions.of(args), lambda outcome: None)
    assert sorted(started) == [[("ls", 1), ("mixup", 0), ("mixup", 1)],
                               [("sl1h", 0), ("sl1h", 1), ("ls", 0)]]


# -------------------------------------------------------------- bench run --
# Digits at 16 px (batch 64, one epoch, a near-chance model) amplifies rounding
# ~1000x even in a run alone: nudging the initial weights by a relative 1e-7
# moves sl1h/0's, mixup/0's, dca/1's and ls/0's test logits by 4-6e-4, more
# than any fusing error. At 12 px the same nudge moves most runs by ~1e-7 but
# can still flip a ReLU (mixup/1: 2e-5 to 3e-4 over six nudges, measured with
# the released drop_last), so checks there compare like with like where they can.
SWEEP = ["--backbone", "smallcnn", "--method", "sl1h,mixup", "--seeds", "2"]


def _argv(results, *extra):
    return ["run", "--dataset", "digits", "--results", str(results), *TINY, *SWEEP, *extra]


def _logits(path):
    return store.load_predictions(path)["test_logits"]


def _alone(spec, root) -> object:
    """The unfused sweep's run (worker._train calls run_seed), in this process."""
    from bench.sweep.grid import experiment_for

    method = create_method(spec.method, dict(spec.method_overrides))
    exp, bundle = experiment_for(spec, method)
    return run_seed(exp, bundle, method, spec.seed, root, progress=False)[1]


def _fused_here(group, root) -> list:
    """`group` trained as one fused group in this process, at the thread count
    the local executor gives its one slot (CPU sums depend on it): what the
    sweep's worker computes for that group, bit for bit."""
    import os

    import torch

    from bench.sweep.grid import experiment_for

    members = []
    for spec in group:
        method = create_method(spec.method, dict(spec.method_overrides))
        exp, bundle = experiment_for(spec, method)
        members.append((exp, method, spec.seed))
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    try:
        return [path for _, path in run_members(members, bundle, root, progress=False)]
    finally:
        torch.set_num_threads(before)


def test_fuse_methods_sweep_equals_unfused_and_resumes_only_the_missing(tmp_path, capsys):
    fused = tmp_path / "fused"
    assert main(_argv(fused, "--fuse", "methods")) == 0
    assert "4 trained, 0 already done, 0 failed" in capsys.readouterr().out
    specs = _specs(fused, *SWEEP)
    alone = [_alone(s, tmp_path / "alone") for s in specs]
    everyone = ["sl1h/0", "sl1h/1", "mixup/0", "mixup/1"]
    for spec, path in zip(specs, alone):
        assert spec.record.relative_to(fused) == path.relative_to(tmp_path / "alone")
        np.testing.assert_allclose(_logits(spec.record), _logits(path), rtol=0, atol=1e-4)
        config = store.read_json(spec.record / "config.json")
        assert (config["fused_group"], config["fused_members"]) == ([0, 1], everyone)
        assert "fused with [sl1h/0, sl1h/1, mixup/0, mixup/1]" in \
            runstate.log_path(spec.record).read_text()
        assert not runstate.lock_path(spec.record).exists()
    stamps = [(s.record / "metrics.json").stat().st_mtime_ns for s in specs]
    assert main(_argv(fused, "--fuse", "methods")) == 0
    assert "0 trained, 4 already done, 0 failed" in capsys.readouterr().out
    assert [(s.record / "metrics.json").stat().st_mtime_ns for s in specs] == stamps
    # lose sl1h seed 0 and mixup seed 1: only those two train, as a group of two
    for i in (0, 3):
        shutil.rmtree(specs[i].record)
    assert main(_argv(fused, "--fuse", "methods")) == 0
    assert "2 trained, 2 already done, 0 failed" in capsys.readouterr().out
    # The retrained pair equals the same pair trained here bit for bit; against
    # each run alone it is only close: at 12 px and 16 steps a last-bit change
    # can flip a ReLU and move mixup/1's logits by ~3e-4 (a relative 1e-7 nudge
    # of the initial weights does as much in a run alone), and a group of two
    # at 2-3 threads lands on such a flip.
    pair = dict(zip((0, 3), _fused_here([specs[0], specs[3]], tmp_path / "pair")))
    for i, spec in enumerate(specs):
        config = store.read_json(spec.record / "config.json")
        if i in pair:
            np.testing.assert_array_equal(_logits(spec.record), _logits(pair[i]))
        np.testing.assert_allclose(_logits(spec.record), _logits(alone[i]), rtol=0,
                                   atol=1e-3 if i in pair else 1e-4)
        if i in (0, 3):
            assert config["fused_members"] == ["sl1h/0", "mixup/1"]
            assert config["fused_group"] == [spec.seed]
        else:
            assert (spec.record / "metrics.json").stat().st_mtime_ns == stamps[i]


def test_failing_mixed_group_fails_every_member(tmp_path, capsys):
    extra = ("--seeds", "1", "--set", "lr=1e30")
    assert main(_argv(tmp_path, "--fuse", "methods", *extra)) == 1
    assert "0 trained, 0 already done, 2 failed" in capsys.readouterr().out
    specs = _specs(tmp_path, *SWEEP, *extra)
    assert [s.method for s in specs] == ["sl1h", "mixup"]
    for spec in specs:
        assert runstate.read_failure(spec.record)["reason"].startswith("non-finite loss")
        assert not store.is_complete(spec.record)
        assert not runstate.lock_path(spec.record).exists()


@pytest.mark.parametrize("extra, needle", [
    (["--fuse", "methods", "--executor", "slurm"],
     "--fuse methods with --executor slurm: fusing runs on the local executor only"),
    (["--fuse", "method"], "unknown --fuse value 'method'; choose from: seeds, methods"),
    (["--fuse", "methods", "--fuse-max", "0"], "--fuse-max 0: must be at least 1"),
    (["--fuse-max", "4"],
     "--fuse-max 4: only cuts fused groups; add --fuse seeds or --fuse methods"),
])
def test_fuse_option_errors_are_one_line(tmp_path, capsys, extra, needle):
    assert main(_argv(tmp_path, *extra)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err
    assert not tmp_path.joinpath("digits").exists()


def test_a_group_failing_while_saving_keeps_the_members_it_saved(tmp_path, monkeypatch):
    """Members are saved one after another: if the second save fails (a full
    disk), the first member's record is complete and is reported done, not
    failed; only the unsaved member gets a failure file."""
    import bench.train.experiment
    from bench.sweep.worker import execute_group

    real, calls = bench.train.experiment.save_run, []

    def save_then_fail(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("[Errno 28] No space left on device")
        return real(*a, **k)

    monkeypatch.setattr(bench.train.experiment, "save_run", save_then_fail)
    specs = _specs(tmp_path, *SWEEP, "--seeds", "1")
    out = execute_group(specs)
    assert [o["status"] for o in out] == ["done", "failed"]
    assert "No space left on device" in out[1]["reason"]
    assert store.is_complete(specs[0].record) and runstate.read_failure(specs[0].record) is None
    assert not store.is_complete(specs[1].record)
    assert "No space left" in runstate.read_failure(specs[1].record)["reason"]
