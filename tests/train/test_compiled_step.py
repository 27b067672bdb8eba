"""The graph-safe step compiled whole by inductor (`compile_step=true`), of
a single run and of a vmapped group (bench.train.fused, through the same
GraphRunner): each step's loss and autograd gradients equal the eager
step's within float32 reordering (tolerances from eps, docs/testing.md), its
parameters after several steps close (docs/speed.md, "The compiled step").
One inductor compile of a tiny smallcnn step each."""
import dataclasses
import math

import pytest
import torch
from torch._dynamo.utils import counters

from bench.core.config import PROFILES
from bench.speed import capture
from bench.speed.steptime import synthetic
from bench.train import graphstep
from bench.train.graphstep import GraphRunner

pytestmark = pytest.mark.usefixtures("one_thread")
STEPS, BATCH, SIZE = 4, 8, 16
EPS = torch.finfo(torch.float32).eps
# Eager and inductor round the same sums in other orders (fused kernels, other
# reduction trees): a sum of n float32 terms reordered differs by about
# sqrt(n) eps relative to its scale (rounding errors as a random walk), and a
# value passes through LAYERS such sums forward and back. The widest sum of
# the step is a weight gradient's, over the batch's pixels. This holds away
# from a ReLU's kink: a pre-activation within rounding of 0 flips in one
# order only and moves a gradient by one pixel's share (~1/(BATCH*SIZE*SIZE),
# seen with 24 images); these 32 images (seed 0) put none there.
LAYERS = 8
GRAD_TOL = LAYERS * math.sqrt(BATCH * SIZE * SIZE) * EPS  # ~4.3e-5 relative


def _runner(compiled: bool, names: tuple):
    cfg = dataclasses.replace(PROFILES["quick"], batch_size=BATCH, graph="true",
                              compile_step=compiled)
    st = capture.group_stepper(names, "smallcnn", SIZE, cfg, "cpu")
    x, y = synthetic(STEPS * cfg.batch_size, SIZE, capture.NUM_CLASSES, "cpu")
    runner = GraphRunner(st, x, y, say=lambda text: None)
    (n, stage, _), = runner.stage_epoch(*capture.epoch_orders(st, len(y), cfg))
    return runner, n, stage


def _params(runner):
    return [p.detach().clone() for p in runner.gs.params.values()]


class _Stash:
    """Every step's gradients as autograd gave them to the SGD update, one list
    per step. The update is wrapped before the step is compiled, so inductor
    traces the copy into its graph too; the copy goes into fixed buffers (an
    in-place write dynamo keeps in the graph), not onto a growing list, whose
    length dynamo would guard and recompile the step for at every call."""

    def __init__(self, monkeypatch):
        self.buffers, self.steps, update = [], [], graphstep.sgd_update

        @torch.no_grad()
        def recording(params, grads, *rest):
            for b, g in zip(self.buffers, grads):
                b.copy_(g.detach())
            update(params, grads, *rest)
        monkeypatch.setattr(graphstep, "sgd_update", recording)

    def bind(self, runner) -> None:
        """Buffers shaped like the runner's parameters (as its gradients are)."""
        self.buffers = [torch.zeros_like(p) for p in runner.gs.params.values()]
        self.steps = []

    def keep(self) -> None:
        self.steps.append([b.clone() for b in self.buffers])


# one run with dropout (RNG in the step too); a group of two whose member 1
# draws a staged permutation and lambda (mixup): params stacked [member, ...]
@pytest.mark.parametrize("names", [("mcdropout",), ("sl1h", "sl1h")], ids=["single", "group"])
def test_compiled_step_matches_the_eager_step(names, monkeypatch):
    # dynamo's cache entries for GraphStep.step from earlier tests in this
    # process count towards its recompile limit (fullgraph fails at it)
    torch._dynamo.reset()
    stash = _Stash(monkeypatch)
    eager, compiled = _runner(False, names), _runner(True, names)
    assert all(torch.equal(a, b) for a, b in zip(_params(eager[0]), _params(compiled[0])))
    after, graphs, grads = [], [], []
    for runner, n, stage in (eager, compiled):
        before = counters["stats"]["unique_graphs"]
        stash.bind(runner)
        for i in range(STEPS):
            torch.manual_seed(100 + i)  # the same dropout draws for both
            runner.step(n, stage)
            stash.keep()
        after.append(_params(runner))
        grads.append(stash.steps)
        graphs.append(counters["stats"]["unique_graphs"] - before)
    # the switch really compiles, and once: dynamo traced one graph for the
    # compiled runner, reused at every step (a per-step guard would recompile
    # it each step), and none for the eager one (else eager against eager
    # would pass every check below)
    assert graphs == [0, 1]
    assert len(grads[0]) == len(grads[1]) == STEPS
    # a step's loss is a mean over the batch of a log-sum-exp of the last layer
    loss_e, loss_c = eager[2].losses, compiled[2].losses
    assert ((loss_c - loss_e).abs() <= GRAD_TOL * loss_e.abs()).all()
    # the first step starts from equal parameters: its gradients differ by
    # reordering alone (later steps also carry the earlier steps' differences)
    for ge, gc in zip(grads[0][0], grads[1][0]):
        for e, c in zip(ge.reshape(len(names), -1), gc.reshape(len(names), -1)):  # per member
            assert e.norm() > 0
            assert (c - e).norm() <= GRAD_TOL * e.norm()
    # parameters: SGD adds lr x gradient, a change far below the weights' scale
    for pe, pc in zip(*after):
        assert (pc - pe).norm() <= GRAD_TOL * pe.norm()
