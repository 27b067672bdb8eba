"""The graph-safe step compiled whole by inductor (`compile_step=true`), of
a single run and of a vmapped group (bench.train.fused, through the same
GraphRunner): its first step's loss and gradients within 1e-4 (relative) of
the eager step's, its parameters after several steps close (docs/speed.md,
"The compiled step"). One inductor compile of a tiny smallcnn step each
(~15 s here)."""
import dataclasses

import pytest
import torch
from torch._dynamo.utils import counters

from bench.core.config import PROFILES
from bench.speed import capture
from bench.speed.steptime import synthetic
from bench.train.graphstep import GraphRunner

pytestmark = pytest.mark.usefixtures("one_thread")
STEPS = 4


def _runner(compiled: bool, names: tuple):
    cfg = dataclasses.replace(PROFILES["quick"], batch_size=8, graph="true",
                              compile_step=compiled)
    st = capture._members(names, "smallcnn", 16, cfg, "cpu")
    x, y = synthetic(STEPS * cfg.batch_size, 16, capture.NUM_CLASSES, "cpu")
    runner = GraphRunner(st, x, y, say=lambda text: None)
    (n, stage, _), = runner.stage_epoch(*capture._orders(st, len(y), cfg))
    return runner, n, stage


def _params(runner):
    return [p.detach().clone() for p in runner.gs.params.values()]


# one run with dropout (RNG in the step too); a group of two whose member 1
# draws a staged permutation and lambda (mixup): params stacked [member, ...]
@pytest.mark.parametrize("names", [("mcdropout",), ("sl1h", "sl1h")], ids=["single", "group"])
def test_compiled_step_matches_the_eager_step(names):
    eager, compiled = _runner(False, names), _runner(True, names)
    start = _params(eager[0])
    assert all(torch.equal(a, b) for a, b in zip(start, _params(compiled[0])))
    lr = eager[2].bufs["lr"][0]
    after, graphs = [], []
    for runner, n, stage in (eager, compiled):
        before = counters["stats"]["unique_graphs"]
        steps = []
        for i in range(STEPS):
            torch.manual_seed(100 + i)  # the same dropout draws for both
            runner.step(n, stage)
            steps.append(_params(runner))
        after.append(steps)
        graphs.append(counters["stats"]["unique_graphs"] - before)
    # the switch really compiles: dynamo traced a graph for the compiled runner
    # only (without this, eager against eager would pass every check below)
    assert graphs[0] == 0 and graphs[1] >= 1
    loss_e, loss_c = eager[2].losses[0], compiled[2].losses[0]
    assert torch.allclose(loss_c, loss_e, rtol=1e-4, atol=0)
    # first step, plain SGD (quick profile: no momentum, no decay): grad = (p0 - p1) / lr
    for p0, pe, pc in zip(start, after[0][0], after[1][0]):
        ge, gc = (p0 - pe) / lr, (p0 - pc) / lr
        for e, c in zip(ge.reshape(len(names), -1), gc.reshape(len(names), -1)):  # per member
            assert (c - e).norm() <= 1e-4 * e.norm() + 1e-6
    for pe, pc in zip(after[0][-1], after[1][-1]):
        assert torch.allclose(pc, pe, rtol=1e-4, atol=1e-5)
    assert torch.allclose(compiled[2].losses, eager[2].losses, rtol=1e-4)
