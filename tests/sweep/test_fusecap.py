"""Fused group sizes from free GPU memory (bench.train.memory, bench.sweep.fusecap)
and CUDA_DEVICE_MAX_CONNECTIONS for streams groups, with injected figures."""
import os
from types import SimpleNamespace

import torch

from bench.core.config import TrainConfig
from bench.sweep.fusecap import group_limit, spec_shape
from bench.train import memory
from bench.train.backbones import build_model
from bench.train.groups import connections_note, fuse_groups
from bench.train.streams import CONNECTIONS_VAR, raise_connections

GIB = 2**30


def test_runs_that_fit_hold_back_15_percent_and_never_go_below_one():
    assert memory.runs_that_fit(80 * GIB, 6 * GIB) == 11  # 68 GiB usable / 6
    assert memory.runs_that_fit(10 * GIB, 1 * GIB) == 8  # 8.5 -> 8
    assert memory.runs_that_fit(1 * GIB, 6 * GIB) == 1


def test_a_runs_bytes_by_the_documented_rule():
    shape = memory.RunShape("resnet50", 224, 4, batch=8, eval_batch=256)
    got = memory.run_bytes(shape, count=lambda *a: (2_000_000, 3_000_000, 100_000))
    by_hand = 16 * 2_000_000 + 3 * 4 * 3_000_000 + 3 * 4 * 100_000 * 32 + 256 * 2**20
    assert got == by_hand


def test_counted_on_the_meta_device_matches_a_real_model():
    params, acts, largest = memory.counted("smallcnn", 16, 2, 8, "torchvision", ())
    real, _ = build_model("smallcnn", 16, 2, memory.CLASSES)
    assert params == sum(p.numel() for p in real.parameters())
    _, acts32, largest32 = memory.counted("smallcnn", 32, 2, 8, "torchvision", ())
    assert 0 < largest <= acts and largest32 == 4 * largest  # the first conv's output: px^2
    assert 3.5 * acts < acts32 <= 4 * acts  # convolutions scale with px^2, heads do not


def _specs(n, size=224, backbone="resnet50", method="sl1h"):
    return [SimpleNamespace(dataset="kvasir", backbone=backbone, method=method,
                            method_overrides=(), train=TrainConfig(), sizes=(size, size, size),
                            chash="abc", results="r", device=None, seed=s) for s in range(n)]


def test_free_memory_cuts_the_groups_and_says_so():
    said = []
    per_run = {224: 5 * GIB, 28: GIB // 2}
    limit = group_limit(None, ["0"], 1, free=lambda gpu: 40 * GIB,
                        estimate=lambda shape: per_run[shape.size], say=said.append)
    groups = fuse_groups(_specs(25), "seeds", limit)
    assert [len(g) for g in groups] == [5] * 5  # 34 GiB / 5 GiB = 6 a group: 5 chunks of 5
    assert [len(g) for g in fuse_groups(_specs(25, 28), "seeds", limit)] == [25]  # 68 fit
    assert len(said) == 2 and "at most 6 runs" in said[0] and "224 px" in said[0]
    # two jobs on one GPU share its free memory
    half = group_limit(None, ["0"], 2, free=lambda gpu: 40 * GIB,
                       estimate=lambda shape: per_run[shape.size], say=said.append)
    # 17 GiB / 5 GiB: 3 a group, 25 in 9 balanced chunks
    assert [len(g) for g in fuse_groups(_specs(25), "seeds", half)] == [3] * 7 + [2] * 2


def test_the_users_fuse_max_wins_and_a_cpu_keeps_groups_whole():
    def never(*_):
        raise AssertionError("not asked")
    assert group_limit(8, ["0"], free=never, estimate=never) == 8
    assert group_limit(None, [], free=never, estimate=never) is None
    said = []
    assert group_limit(None, ["0"], free=lambda gpu: None, estimate=never,
                       say=said.append) is None
    assert "could not be read" in said[0]


def test_a_specs_shape():
    shape = spec_shape(_specs(1, 150, "swin_tiny")[0])
    assert (shape.backbone, shape.size, shape.heads, shape.batch, shape.eval_batch) == \
        ("swin_tiny", 150, 1, 8, 256)
    # RankMixup's step forwards clean and mixed images: 16 at batch 8
    assert spec_shape(_specs(1, 28, method="rankmixup")[0]).batch == 16


def test_connections_raised_only_where_unset_and_before_cuda_starts():
    env = {}
    assert "=32 set" in raise_connections(env, initialised=False) and env == {CONNECTIONS_VAR: "32"}
    env = {CONNECTIONS_VAR: "4"}
    assert raise_connections(env, initialised=False) is None and env[CONNECTIONS_VAR] == "4"
    env = {}
    assert "left at CUDA's default" in raise_connections(env, initialised=True) and env == {}


def test_only_a_streams_group_on_cuda_raises_them(monkeypatch):
    monkeypatch.setenv(CONNECTIONS_VAR, "")
    monkeypatch.delenv(CONNECTIONS_VAR)  # restored (to absent or the user's) afterwards
    assert connections_note(TrainConfig(), "cpu") is None
    assert connections_note(TrainConfig(fuse_as="vmap"), "cuda") is None
    assert CONNECTIONS_VAR not in os.environ
    if not torch.cuda.is_initialized():
        assert "=32 set" in connections_note(TrainConfig(), "cuda")
        assert os.environ[CONNECTIONS_VAR] == "32"
