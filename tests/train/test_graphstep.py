"""The graph-safe step (bench.train.graphstep) is bit for bit the per-step path
on the CPU: single runs and fused groups, every built-in method, augmentation
on and off, momentum, a ragged last batch, a diverging run."""
import copy
import dataclasses

import numpy as np
import pytest
import torch

from bench.core.config import PROFILES
from bench.methods import create_method
from bench.methods.base import Method
from bench.train import graphstep
from bench.train.backbones import build_model
from bench.train.fused import train_fused
from bench.train.loop import NonFiniteLoss, train
from tests.conftest import digits_subset

pytestmark = pytest.mark.usefixtures("one_thread")
ONE_HEAD = ["sl1h", "ls", "mbls", "mixup", "dca", "focal", "flsd53"]


def _cfg(**kw):
    return dataclasses.replace(PROFILES["quick"], **{"cycles": 2, "epochs_per_cycle": 1, **kw})


def _model(data, seed, heads):
    torch.manual_seed(seed)
    return build_model("smallcnn", data.image_size, heads, data.num_classes)[0]


def _method(name, seed, data):
    m = create_method(name)
    m.setup(data.num_classes, seed)
    return m


def _same(a, b):
    """Every number a run produces, bit for bit."""
    assert np.array_equal(a.test_logits, b.test_logits)
    assert np.array_equal(a.val_logits, b.val_logits)
    assert a.cycle_val_auc == b.cycle_val_auc and a.best_cycle == b.best_cycle
    assert a.history["epochs"] == b.history["epochs"]
    for k, v in a.state.items():
        assert torch.equal(v, b.state[k]), k


def _single(data, name, seed, **kw):
    heads = create_method(name).heads
    return train(_model(data, seed, heads), _method(name, seed, data), _cfg(**kw), data, seed,
                 progress=False)


@pytest.mark.parametrize("name", ONE_HEAD + ["2hsl", "2hml", "4hml"])
def test_single_run_is_bit_for_bit_the_per_step_path(tiny, name):
    _same(_single(tiny, name, 1, graph="true"), _single(tiny, name, 1, graph="false"))


@pytest.mark.parametrize("kw", [dict(augment=False), dict(momentum=0.9, weight_decay=1e-3),
                                dict(drop_last=False), dict(bf16=True)])
def test_switches_keep_the_step_bit_for_bit(tiny, kw):
    data = tiny
    if kw.get("drop_last") is False:  # 45 images: a ragged last batch of 5 is trained
        data = digits_subset(45, 40, 40)
        assert len(data.train.labels) % 8 == 5
    _same(_single(data, "mixup", 2, graph="true", **kw),
          _single(data, "mixup", 2, graph="false", **kw))


def _fused(data, names, **kw):
    heads = create_method(names[0]).heads
    seeds = list(range(len(names)))
    return train_fused([_model(data, s, heads) for s in seeds],
                       [_method(n, s, data) for s, n in enumerate(names)], _cfg(**kw), data,
                       seeds, progress=False)


@pytest.mark.parametrize("names", [["sl1h", "mixup", "dca", "ls", "mixup"], ["2hsl", "2hml"],
                                   ["4hml", "4hml", "4hml"]])
def test_fused_group_is_bit_for_bit_the_per_step_path(tiny, names):
    for a, b in zip(_fused(tiny, names, graph="true"), _fused(tiny, names, graph="false")):
        _same(a, b)


def test_the_comparison_can_fail(tiny):
    """A one-bit change of one staged learning rate shows in the results."""
    real = graphstep.draw_epoch

    def nudged(orders, lrs, *a, **k):
        lrs = list(lrs)
        lrs[3] = float(np.nextafter(np.float32(lrs[3]), np.float32(1)))
        return real(orders, lrs, *a, **k)
    graphstep.draw_epoch = nudged
    try:
        a = _single(tiny, "sl1h", 0, graph="true")
    finally:
        graphstep.draw_epoch = real
    with pytest.raises(AssertionError):
        _same(a, _single(tiny, "sl1h", 0, graph="false"))


def test_divergence_still_names_its_first_bad_step(tiny):
    with pytest.raises(NonFiniteLoss, match=r"non-finite loss .* step \d+") as graph:
        _single(tiny, "sl1h", 0, graph="true", lr=1e12)
    with pytest.raises(NonFiniteLoss) as eager:
        _single(tiny, "sl1h", 0, graph="false", lr=1e12)
    assert str(graph.value) == str(eager.value)


class DrawsInBatch(Method):
    """A plugin-style method that draws in batch(), the old way."""

    def batch(self, x, y, gen):
        noise = torch.rand(len(y), generator=gen).to(x.device)
        return x + noise.view(-1, 1, 1, 1), y

    def loss(self, logits, target):
        return torch.nn.functional.cross_entropy(logits[:, 0], target)


def test_a_method_that_draws_in_batch_trains_per_step_and_says_why(tiny, capsys):
    m = DrawsInBatch("noisy")
    reason = graphstep.eager_reason([m], _cfg(graph="true"))
    assert "method noisy draws in batch()" in reason
    a = train(_model(tiny, 0, 1), m, _cfg(graph="true"), tiny, 0, progress=False)
    assert "not graph-safe: method noisy draws in batch()" in capsys.readouterr().err
    b = train(_model(tiny, 0, 1), copy.deepcopy(m), _cfg(graph="false"), tiny, 0, progress=False)
    _same(a, b)


@pytest.mark.parametrize("kw, why", [(dict(), None), (dict(compile=True), "compile=true"),
                                     (dict(augment_mode="per_image"), "augment_mode=per_image")])
def test_eager_reasons(kw, why):
    reason = graphstep.eager_reason([create_method("sl1h")], _cfg(**{"graph": "true", **kw}))
    assert reason is None if why is None else why in reason


@pytest.mark.parametrize("graph, device, wanted", [
    ("false", "cuda", False), ("false", "cpu", False), ("auto", "cpu", False),
    ("auto", "cuda", True), ("true", "cpu", True), ("true", "cuda", True)])
def test_who_wants_the_graph_step(graph, device, wanted):
    assert graphstep.wants_graph(_cfg(graph=graph), torch.device(device)) is wanted


@pytest.mark.parametrize("momentum, wd", [(0.0, 0.0), (0.9, 0.0), (0.9, 1e-3), (0.0, 5e-4)])
def test_sgd_update_is_torch_sgd_for_every_tensor_length(momentum, wd):
    """Tensors of 1..40 elements (a vector register's tail) and a long one, five
    steps at changing learning rates, against torch.optim.SGD itself."""
    gen = torch.Generator().manual_seed(0)
    shapes = [(n,) for n in range(1, 41)] + [(3, 1001)]
    ref = [torch.randn(s, generator=gen).requires_grad_() for s in shapes]
    ours = [p.detach().clone() for p in ref]
    opt = torch.optim.SGD(ref, lr=0.01, momentum=momentum, weight_decay=wd)
    cfg = _cfg(momentum=momentum, weight_decay=wd)
    bufs = [torch.zeros_like(p) for p in ours] if momentum else []
    for lr in (0.01, 0.0093, 0.0071, 0.0012, 3e-5):
        grads = [torch.randn(s, generator=gen) * 5 for s in shapes]
        for p, g in zip(ref, grads):
            p.grad = g.clone()
        opt.param_groups[0]["lr"] = lr
        opt.step()
        # the last gradient laid out transposed, as torch.func gives a vmapped Linear's
        theirs = [g.clone() for g in grads[:-1]] + [grads[-1].t().contiguous().t()]
        graphstep.sgd_update(ours, theirs, bufs,
                             torch.tensor(lr, dtype=torch.float32), cfg)
    assert all(torch.equal(a.detach(), b) for a, b in zip(ref, ours))
