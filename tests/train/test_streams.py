"""fuse_as=streams: a fused group whose members keep their own models and loops,
their steps interleaved (bench/train/streams.py). On a CPU every member's
record must be the unfused run's, bit for bit."""
import dataclasses
import json

import numpy as np
import pytest
import torch

from bench.core import store
from bench.core.config import PROFILES
from bench.methods import create_method
from bench.train.experiment import make_experiment, run_seed
from bench.train.groups import fused_as, run_members
from bench.train.loop import NonFiniteLoss

pytestmark = pytest.mark.usefixtures("one_thread")


def _cfg(**kw):
    return dataclasses.replace(PROFILES["quick"], **{"cycles": 2, "epochs_per_cycle": 1,
                                                      "fuse_as": "streams", **kw})


def _same_record(a, b) -> None:
    pa, pb = store.load_predictions(a), store.load_predictions(b)
    assert sorted(pa) == sorted(pb)
    for key in pa:
        assert np.array_equal(pa[key], pb[key]), key
    ma, mb = (json.loads((p / "metrics.json").read_text()) for p in (a, b))
    for key in ("val", "test", "best_cycle", "cycle_val_auc", "steps", "history"):
        assert ma[key] == mb[key], key


@pytest.mark.parametrize("names", [("sl1h", "mixup", "dca"), ("mcdropout", "mcdropout")])
def test_a_streams_group_writes_the_records_of_its_runs_alone(tiny, tmp_path, names):
    """Mixed methods (mixup draws per step) and MC-Dropout (its dropout draws
    from the process-wide generator the members take turns with)."""
    members = []
    for seed, name in enumerate(names):
        method = create_method(name)
        exp = make_experiment(tiny, "smallcnn", method, _cfg())
        members.append((exp, method, seed))
    beats = []
    got = run_members(members, tiny, tmp_path / "group", progress=False,
                      on_step=lambda step, losses: beats.append((step, len(losses))))
    assert [g[0] for g in got] == ["done"] * len(names)
    for (exp, _, seed), (_, path) in zip(members, got):
        _, alone = run_seed(exp, tiny, create_method(exp.method), seed, tmp_path / "alone",
                            progress=False)
        _same_record(path, alone)
        config = store.read_json(path / "config.json")
        assert config["fused_as"] == "streams" and config["config_hash"] == exp.chash
        assert not store.state_path(path).exists()  # each member's own state, cleared
    # one heartbeat per round, every member's loss in it
    assert [b[0] for b in beats] == list(range(1, len(beats) + 1))
    assert {b[1] for b in beats} == {len(names)}
    # the members really differ, so the comparison is not vacuous
    a, b = (store.load_predictions(p)["test_logits"] for _, p in got[:2])
    assert not np.array_equal(a, b)


class _Diverging(type(create_method("sl1h"))):
    def loss(self, logits, target):
        return super().loss(logits, target) * float("nan")


def test_a_member_that_diverges_fails_alone(tiny, tmp_path):
    good, bad = create_method("sl1h"), _Diverging("sl1h")
    exp = make_experiment(tiny, "smallcnn", good, _cfg())
    members = [(exp, good, 0), (exp, bad, 1), (exp, create_method("sl1h"), 2)]
    with pytest.raises(NonFiniteLoss, match=r"non-finite loss .* step \d+"):
        run_members(members, tiny, tmp_path, progress=False)
    written = [store.is_complete(exp.record_dir(tmp_path, s)) for s in (0, 1, 2)]
    assert written == [True, False, True]


def test_auto_is_streams_on_cuda_and_cells_or_vmap_elsewhere():
    """Elsewhere a member with a batched form makes a cell group, one without
    (a layer bench.train.batched has no form of) a vmapped group."""
    from torch import nn
    from bench.train.backbones import build_model
    cfg = dataclasses.replace(PROFILES["quick"], fuse_as="auto")
    net = build_model("smallcnn", 12, 2, 10)[0]
    assert fused_as(cfg, "cuda", net) == "streams" and fused_as(cfg, "cuda:1") == "streams"
    assert fused_as(cfg, "cpu", net) == "cells" and fused_as(cfg, torch.device("cpu"), net) == "cells"
    assert fused_as(cfg, "cpu", nn.Sequential(nn.Conv1d(3, 4, 1))) == "vmap"
    assert fused_as(cfg, "cpu") == "vmap"  # no member to look at
    assert fused_as(dataclasses.replace(cfg, fuse_as="cells"), "cuda") == "cells"
    assert fused_as(dataclasses.replace(cfg, fuse_as="vmap"), "cuda") == "vmap"
    assert fused_as(dataclasses.replace(cfg, fuse_as="streams"), "cpu") == "streams"


class _Killed(Exception):
    pass


def test_a_streams_group_killed_mid_cycle_resumes_each_run_from_its_own_state(tiny, tmp_path):
    """Killed in the second cycle, each member has its own first-cycle state;
    the rerun (here as a group of one and a group of two, in another order)
    goes on from it and writes the records of the runs alone."""
    method = create_method("sl1h")
    exp = make_experiment(tiny, "smallcnn", method, _cfg())
    members = [(exp, create_method("sl1h"), s) for s in (0, 1, 2)]

    def kill(step, losses):
        if step == 8:  # 6 steps an epoch: inside cycle 2
            raise _Killed
    with pytest.raises(_Killed):
        run_members(members, tiny, tmp_path / "group", progress=False, on_step=kill)
    for s in (0, 1, 2):
        assert store.state_path(exp.record_dir(tmp_path / "group", s)).exists()
    rounds = []
    run_members(members[2:], tiny, tmp_path / "group", progress=False,
                on_step=lambda step, losses: rounds.append(len(losses)))
    run_members(members[1::-1], tiny, tmp_path / "group", progress=False,
                on_step=lambda step, losses: rounds.append(len(losses)))
    assert rounds == [1] * 6 + [2] * 6  # the second cycle only: each resumed
    for s in (0, 1, 2):
        _, alone = run_seed(exp, tiny, create_method("sl1h"), s, tmp_path / "alone",
                            progress=False)
        _same_record(exp.record_dir(tmp_path / "group", s), alone)
