"""A cell group (fuse_as=cells: every member one batched model,
bench.train.cells) against each member trained alone by the one loop
(bench.train.loop.train, autograd through the member's own modules: the
independent computation)."""
import copy
import dataclasses

import numpy as np
import pytest
import torch

from bench.core.config import PROFILES
from bench.core.errors import BenchError
from bench.methods import create_method
from bench.train.backbones import build_model
from bench.train.cells import CellModel, batchable
from bench.train.fused import FusedStepper, train_fused
from bench.train.groups import fused_as
from bench.train.loop import SingleStepper, to_device_images, train
from exactutil import in_float64

pytestmark = pytest.mark.usefixtures("one_thread")
EPS = torch.finfo(torch.float32).eps


def _model(bundle, seed, heads=2, backbone="smallcnn"):
    torch.manual_seed(seed)  # as experiment.run_seed: initial weights from the seed
    return build_model(backbone, bundle.image_size, heads, bundle.num_classes)[0]


def _cfg(**kw):
    return dataclasses.replace(PROFILES["quick"], **{"cycles": 2, "epochs_per_cycle": 1, **kw})


def _method(bundle, name, seed):
    method = create_method(name)
    method.setup(bundle.num_classes, seed)  # as experiment.run_seed: per-seed class weights
    return method


def rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


# members differing in method, seed or both; one architecture (1 head)
MIXED = [("sl1h", 0), ("mixup", 0), ("ls", 1), ("mbls", 2), ("dca", 1)]


@pytest.mark.parametrize("conv", ["grouped", "unfold"])
def test_cell_group_run_equals_runs_alone(tiny, conv, monkeypatch):
    """The whole loop (2 cycles: augmentation, method draws, validation,
    best-cycle choice, test predictions) in float64, within 1e-9 relative of
    each run alone: a cell group's members are its runs."""
    in_float64(monkeypatch)
    cfg = _cfg(cell_conv=conv)
    models = [_model(tiny, s, create_method(m).heads).double() for m, s in MIXED]
    alone = [train(copy.deepcopy(net), _method(tiny, m, s), cfg, tiny, s, progress=False)
             for net, (m, s) in zip(models, MIXED)]
    cell = train_fused(models, [_method(tiny, m, s) for m, s in MIXED], cfg, tiny,
                       [s for _, s in MIXED], progress=False, how="cells")
    for a, c in zip(alone, cell):
        assert rel(c.test_logits, a.test_logits) <= 1e-9
        assert rel(c.val_logits, a.val_logits) <= 1e-9
        assert c.best_cycle == a.best_cycle and c.steps == a.steps
    assert not np.allclose(cell[0].test_logits, cell[1].test_logits, atol=1e-2)


def _steps(stepper, x, y, orders, lr=0.05) -> list:
    return [stepper.step(x, y, idxs, lr) for idxs in orders]


def _batches(bundle, n_steps: int, members: int):
    x = to_device_images(bundle.train.images, torch.device("cpu"))
    y = torch.from_numpy(bundle.train.labels)
    gen = torch.Generator().manual_seed(7)
    return x, y, [tuple(torch.randperm(len(y), generator=gen)[:8] for _ in range(members))
                  for _ in range(n_steps)]


def _pair(bundle, method, seeds, dtype=torch.float32):
    """The cell group of `seeds` and each seed's run alone (SingleStepper, the
    run alone's step), from the same initial weights."""
    cfg, heads = _cfg(augment=False), create_method(method).heads
    cell = FusedStepper([_model(bundle, s, heads).to(dtype) for s in seeds],
                        [_method(bundle, method, s) for s in seeds], cfg, seeds, "cpu",
                        how="cells")
    alone = [SingleStepper(_model(bundle, s, heads).to(dtype), _method(bundle, method, s), cfg,
                           "cpu", s) for s in seeds]
    return cell, alone


PAPER = ["sl1h", "2hml", "4hml", "mixup", "ls", "mbls", "dca"]
SEEDS = [0, 1, 2]


@pytest.mark.parametrize("method", PAPER)
def test_first_step_loss_and_gradients_equal_each_run_alone(tiny, method):
    """float32: the first step's loss and every parameter's gradient within
    1e-5 relative (84 eps: a smallcnn gradient sums up to 3 x 3 x 64 x 12 x
    12 products, reassociated by the batched layout)."""
    cell, alone = _pair(tiny, method, SEEDS)
    x, y, orders = _batches(tiny, 1, len(SEEDS))
    losses = _steps(cell, x, y, orders)[0]
    grads = {k.removeprefix("body."): p.grad for k, p in cell.fm.params.items()}
    for k, one in enumerate(alone):
        loss = _steps(one, x, y, [o[k:k + 1] for o in orders])[0]
        assert rel(losses[k], loss) <= 1e-5
        mine = {name: g[k] for name, g in grads.items()}
        for name, p in one.model.named_parameters():
            assert rel(mine[name], p.grad) <= 1e-5, (method, k, name)


@pytest.mark.parametrize("method", PAPER)
def test_every_member_after_20_steps_equals_its_run_alone(tiny, method, monkeypatch):
    """Parameters and batch-norm statistics after 20 SGD steps (momentum,
    weight decay), member by member, in float64 (in_float64): 1e-10 relative
    (eps64 x 5e5, room for 20 steps' growth). In float32 the first step is
    the test (above): measured here, 4hml seed 2 flips a kink at step 12."""
    in_float64(monkeypatch)
    cell, alone = _pair(tiny, method, SEEDS, torch.float64)
    x, y, orders = _batches(tiny, 20, len(SEEDS))
    _steps(cell, x, y, orders)
    for k, one in enumerate(alone):
        _steps(one, x, y, [o[k:k + 1] for o in orders])
        mine, ref = cell.snapshot(k), one.snapshot(0)
        assert list(mine) == list(ref)
        for name, v in ref.items():
            assert rel(mine[name], v) <= 1e-10, (method, k, name, rel(mine[name], v))
    first = "backbone.0.0.weight"  # the members really differ: the check is not vacuous
    assert rel(cell.snapshot(0)[first], cell.snapshot(1)[first]) > 1e-2
