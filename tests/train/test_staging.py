"""bench.train.staging: an epoch's derivation made once per batch length equals
the per-step derivation bit for bit, and drawing the next epoch ahead
(stage_ahead=true) changes no random stream, record or resume state: single
runs, vmapped groups, streams groups, a run killed mid-cycle and resumed."""
import dataclasses

import numpy as np
import pytest
import torch

from bench.core import store
from bench.core.config import PROFILES
from bench.methods import create_method
from bench.speed.staging import per_step_epoch
from bench.train import augment as A
from bench.train import staging
from bench.train.backbones import build_model
from bench.train.experiment import make_experiment, run_seed
from bench.train.fused import train_fused
from bench.train.loop import train
from bench.train.maskaug import derive
from bench.train.streams import train_streams

pytestmark = pytest.mark.usefixtures("one_thread")


def _epoch(n_images: int, members: int):
    cfg = dataclasses.replace(PROFILES["quick"], drop_last=False)
    gens = [torch.Generator().manual_seed(10 + s) for s in range(members)]
    aug_gens = [torch.Generator().manual_seed(20 + s) for s in range(members)]
    methods = [create_method("mixup") for _ in range(members)]  # draws of its own per step
    for s, m in enumerate(methods):
        m.setup(3, s)
    orders = [staging.epoch_batches(n_images, cfg.batch_size, g, False) for g in gens]
    lrs = [0.01 / (t + 1) for t in range(len(orders[0]))]
    return orders, lrs, methods, gens, aug_gens, cfg


def _every_op_magnitude_and_sign() -> set:
    """(op, magnitude) pairs the draws can make, from torchvision's bins as
    augment.OPS declares them: 0 for ops without one, both signs if signed."""
    out = set()
    for k, op in enumerate(A.OPS):
        mags = op.bins(A.NUM_BINS).double().tolist() if op.bins is not None else [0.0]
        out |= {(k, m) for m in mags} | ({(k, -m) for m in mags} if op.signed else set())
    return out


@pytest.mark.parametrize("hw", [(28, 28), (20, 28)])
def test_the_epochs_derivation_is_the_per_step_one_bit_for_bit(hw):
    """Two members, 12,003 images each: 1,501 steps (a ragged last one of 3),
    every op, magnitude and sign drawn; every staged tensor compared."""
    args = _epoch(12_003, members=2)
    drawn = per_step_epoch(*args, hw)
    got = staging.draw_epoch(*_epoch(12_003, members=2), hw)
    assert list(got) == [8, 3] and list(drawn) == [8, 3]
    for n in drawn:
        assert list(got[n]) == list(drawn[n])
        for k, v in drawn[n].items():
            assert v.dtype == got[n][k].dtype and torch.equal(v, got[n][k]), (n, k)
    # draws seen again from the same seeds: every (op, magnitude, sign) is among them
    _, _, _, _, aug_gens, _ = _epoch(12_003, members=2)
    pairs = set()
    for g in aug_gens:
        ops, mags = A.sample_params(12_003, g)
        pairs |= set(zip(ops.tolist(), mags.tolist()))
    assert pairs == _every_op_magnitude_and_sign()
    assert (got[8]["aug.rot"] >= 0).any() and (got[8]["aug.theta"] != 0).any()


@pytest.mark.parametrize("hw", [(28, 28), (20, 28)])
def test_an_images_fields_do_not_depend_on_its_place_in_a_vector(hw):
    """Every (op, magnitude, sign) the draws can make, derived as one vector
    (SIMD lanes, a scalar tail) and each alone: the same bits. Why deriving a
    whole epoch at once cannot move a bit, whatever the vector's length."""
    pairs = sorted(_every_op_magnitude_and_sign())
    ops = torch.tensor([k for k, _ in pairs])
    mags = torch.tensor([m for _, m in pairs], dtype=torch.float64)
    whole = derive(ops, mags, *hw)
    for i in range(len(pairs)):
        one = derive(ops[i:i + 1], mags[i:i + 1], *hw)
        assert all(torch.equal(v[0], whole[k][i]) for k, v in one.items()), pairs[i]


def test_the_comparison_sees_one_changed_bit():
    args = _epoch(800, members=1)
    got = staging.draw_epoch(*args, (16, 16))
    ref = per_step_epoch(*_epoch(800, members=1), (16, 16))
    assert torch.equal(got[8]["aug.theta"], ref[8]["aug.theta"])
    theta = got[8]["aug.theta"].clone()
    theta[3, 2, 1, 0] = float(np.nextafter(np.float32(theta[3, 2, 1, 0]), np.float32(9)))
    assert not torch.equal(theta, ref[8]["aug.theta"])


# ----------------------------------------------------------- ahead --
def _cfg(**kw):
    return dataclasses.replace(PROFILES["quick"], **{"cycles": 2, "epochs_per_cycle": 2,
                                                      "graph": "true", **kw})


def _models(data, names):
    out = []
    for seed, name in enumerate(names):
        torch.manual_seed(seed)
        out.append(build_model("smallcnn", data.image_size, create_method(name).heads,
                               data.num_classes)[0])
    return out


def _methods(data, names):
    out = [create_method(n) for n in names]
    for seed, m in enumerate(out):
        m.setup(data.num_classes, seed)
    return out


def _train(how, data, names, ahead):
    cfg = _cfg(stage_ahead=ahead, momentum=0.9)
    models, methods, seeds = _models(data, names), _methods(data, names), list(range(len(names)))
    if how == "single":
        return [train(models[0], methods[0], cfg, data, 0, progress=False)]
    if how == "vmap":
        return train_fused(models, methods, cfg, data, seeds, progress=False)
    return train_streams(models, methods, cfg, data, seeds, progress=False)


@pytest.fixture
def takes(monkeypatch):
    """How many epochs were taken from a draw made ahead (so the comparison
    is not vacuous: each run's every epoch after its first)."""
    taken, real = [], staging.Ahead.take

    def take(self, orders):
        drawn = self.job is not None
        got = real(self, orders)
        if drawn:
            taken.append(got is not None)
        return got
    monkeypatch.setattr(staging.Ahead, "take", take)
    return taken


@pytest.mark.parametrize("how, names", [("single", ["mixup"]), ("vmap", ["sl1h", "mixup"]),
                                        ("streams", ["mixup", "dca", "mcdropout"])])
def test_drawing_ahead_changes_no_number(tiny, takes, how, names):
    ahead = _train(how, tiny, names, "true")
    assert takes == [True] * (3 * (1 if how == "vmap" else len(names)))
    for a, b in zip(ahead, _train(how, tiny, names, "false"), strict=True):
        assert np.array_equal(a.test_logits, b.test_logits)
        assert np.array_equal(a.val_logits, b.val_logits)
        assert a.cycle_val_auc == b.cycle_val_auc and a.history == b.history
        assert all(torch.equal(v, b.state[k]) for k, v in a.state.items())


def test_a_draw_in_between_discards_the_epoch_drawn_ahead():
    orders, lrs, methods, gens, aug_gens, cfg = _epoch(64, members=1)
    st = type("St", (), dict(gens=gens, aug_gens=aug_gens, methods=methods, cfg=cfg))
    ahead = staging.Ahead(st, 64, (12, 12), pin=False)
    ahead.start()
    torch.rand(1, generator=aug_gens[0])  # someone draws from a generator meanwhile
    before = [g.get_state() for g in (*gens, *aug_gens)]
    nxt = [staging.epoch_batches(64, cfg.batch_size, g, False) for g in gens]
    assert ahead.take(nxt) is None
    assert torch.equal(aug_gens[0].get_state(), before[1])  # left as it was


class Killed(Exception):
    pass


def test_a_run_drawing_ahead_killed_mid_cycle_resumes_bit_for_bit(tiny, tmp_path):
    """Killed two steps into cycle 2 (its first epoch drawn ahead, the next
    being drawn): the saved state is the one without drawing ahead."""
    per_epoch = len(tiny.train) // 8

    def run(ahead, root, kill_at=-1):
        exp = make_experiment(tiny, "smallcnn", create_method("mixup"),
                              _cfg(stage_ahead=ahead, momentum=0.9))

        def on_step(step, _loss):
            if step == kill_at:
                raise Killed
        return run_seed(exp, tiny, create_method("mixup"), 0, tmp_path / root,
                        progress=False, on_step=on_step)[1]
    whole = run("false", "whole")
    with pytest.raises(Killed):
        run("true", "cut", kill_at=2 * per_epoch + 2)
    resumed = run("true", "cut")
    pa, pb = store.load_predictions(resumed), store.load_predictions(whole)
    assert sorted(pa) == sorted(pb) and all(np.array_equal(pa[k], pb[k]) for k in pa)
    ma, mb = (store.read_json(p / "metrics.json") for p in (resumed, whole))
    for key in ("val", "test", "best_cycle", "cycle_val_auc", "steps", "history"):
        assert ma[key] == mb[key], key
