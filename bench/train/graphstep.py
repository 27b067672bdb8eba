"""The graph-safe training step: a whole epoch's random numbers drawn at its
start, the step reading them on the device, captured as one CUDA graph.

At batch 8 a step is about a thousand small kernel launches, each queued by
Python: on a GPU the host is the bottleneck. This step takes every per-step
decision off the host:

- **Draws per epoch** (bench.train.staging). Batch order, each image's
  augmentation op / magnitude / sign, a method's draws (mixup's lambda and
  permutation) and the learning rate of every step are drawn or computed
  for the whole epoch from the same seeded generators, in the same order as
  the per-step path draws them (bench.train.loop.train_step), and copied to
  the device once (`Stage`); on CUDA the next epoch's on a worker thread
  while this one trains. The step reads row `counter` of each (a device
  tensor it increments itself).
- **Masks, not groups**: augmentation by bench.train.maskaug (every op on
  every image, chosen per image).
- **Tensors, not floats**: gradients by torch.func (no `.grad` fields to
  zero), one fused SGD update taking the staged lr as a tensor, the loss
  written into a device buffer that the loop checks once per epoch.

On the CPU the step is bit for bit the per-step path (the same kernels on the
same numbers; tests/train/test_graphstep.py), so a run's config hash and its
records do not depend on it. On CUDA, `GraphRunner` captures it once per batch
shape (torch.cuda.graph) after warm-up steps on a side stream and replays it;
where capture fails it says so in one line and steps eagerly.
"""
from __future__ import annotations

import torch
from torch.func import functional_call, grad_and_value

from bench.core.config import TrainConfig
from bench.train.maskaug import apply_masked
from bench.train.seedvmap import member_batches
from bench.train.protocol import to_model_size
from bench.train.staging import Ahead, Stage, draw_epoch, wants_ahead, with_lrs
from bench.methods.base import Method

WARMUP_STEPS = 3  # eager steps on a side stream before capture (cuDNN, allocator, lazy init)


def wants_graph(cfg: TrainConfig, device: torch.device) -> bool:
    """The user's choice: `graph=true`, or `auto` on CUDA (on the CPU both
    paths give the same numbers and the per-step path does less work)."""
    return cfg.graph == "true" or (cfg.graph == "auto" and device.type == "cuda")


def eager_reason(methods: list, cfg: TrainConfig) -> str | None:
    """What keeps a run that wants the graph-safe step on the per-step path
    (said in its log), or None."""
    if cfg.compile:
        return "compile=true (torch.compile's own graphs: compile_mode=reduce-overhead)"
    if cfg.augment and cfg.augment_mode != "batched":
        return f"augment_mode={cfg.augment_mode} (torchvision's transform draws inside the step)"
    for m in methods:
        if type(m).batch is not Method.batch and type(m).draw is Method.draw:
            return (f"method {m.name} draws in batch() (a method stages its draws with "
                    "draw() and staged_batch(); docs/methods.md)")
    return None


# ------------------------------------------------------------------ step --
class GraphStep:
    """The graph-safe step of a stepper (bench.train.loop.SingleStepper or
    bench.train.fused.FusedStepper): the stepper gives its functional model
    (`functional()` -> params, buffers, loss_fn) and its methods, generators,
    optimiser and config; this gives `step(stage)`."""

    def __init__(self, stepper, x: torch.Tensor, y: torch.Tensor):
        self.st, self.x, self.y, self.cfg = stepper, x, y, stepper.cfg
        self.params, self.buffers, self.loss_fn = stepper.functional()
        self.names = list(self.params)
        self.momentum = self._momentum_buffers()

    def _momentum_buffers(self) -> list:
        """SGD's own momentum buffers (in its state, so resume and state_dict see
        them), made before the first step: zeros give exactly the per-step
        path's first buffer (0 * momentum + grad = grad)."""
        if not self.cfg.momentum:
            return []
        opt = self.st.opt
        return [opt.state[p].setdefault("momentum_buffer", torch.zeros_like(p))
                for p in self.params.values()]

    def batches(self, d: dict) -> list:
        """Every member's (inputs, target) of this step, on the device."""
        idx = d["idx"]
        x, y = self.x.index_select(0, idx), self.y.index_select(0, idx)
        if self.cfg.augment:
            x = apply_masked(x, {k.removeprefix("aug."): v for k, v in d.items()
                                 if k.startswith("aug.")})
        x = self.st.normalise(to_model_size(x, self.cfg.image_size))
        size = self.st.size
        draws = [{k.split(".", 1)[1]: v for k, v in d.items() if k.startswith(f"m{s}.")}
                 for s in range(size)]
        return member_batches(self.st.methods, x.unflatten(0, (size, -1)),
                              y.unflatten(0, (size, -1)), draws)

    def step(self, stage: Stage) -> None:
        """One SGD step of every member on the stage's current row."""
        d = stage.read()
        grads, (_, losses) = grad_and_value(self.loss_fn, has_aux=True)(
            self.params, self.buffers, self.batches(d))
        sgd_update(list(self.params.values()), [grads[k] for k in self.names], self.momentum,
                   d["lr"], self.cfg)
        stage.record(losses)


@torch.no_grad()
def sgd_update(params: list, grads: list, momentum: list, lr: torch.Tensor,
               cfg: TrainConfig) -> None:
    """torch.optim.SGD's step (no nesterov, no dampening) with the lr a device
    tensor, bit for bit: weight decay and momentum by SGD's own per-tensor
    formulas (constants, so graph-safe; the fused kernel's momentum rounds
    differently on tensors shorter than a vector register), then p - lr * g by
    the fused kernel, which gives the bits of p.add_(g, alpha=-lr). The fused
    kernel pairs elements by position in memory, so a gradient laid out
    otherwise than its parameter (torch.func gives a vmapped Linear's weight
    gradient transposed) is copied to the parameter's layout first."""
    grads = [g if g.stride() == p.stride() else torch.empty_like(p).copy_(g)
             for p, g in zip(params, grads)]
    grads = _decay_and_momentum(params, grads, momentum, cfg)
    if torch.compiler.is_compiling():
        # the fused kernel has no fake kernel (torch.compile cannot trace it);
        # traced, p - lr * g is inductor's own elementwise code: equal up to
        # the last bit (docs/speed.md, "The compiled step")
        for p, g in zip(params, grads):
            p.sub_(g * lr)
        return
    torch._fused_sgd_(params, grads, [], weight_decay=0.0, momentum=0.0, lr=lr, dampening=0.0,
                      nesterov=False, maximize=False, is_first_step=False)


def _decay_and_momentum(params: list, grads: list, momentum: list, cfg: TrainConfig) -> list:
    """SGD's weight decay and momentum (its per-tensor formulas); -> the step's directions."""
    if cfg.weight_decay:
        grads = torch._foreach_add(grads, params, alpha=cfg.weight_decay)
    if momentum:
        torch._foreach_mul_(momentum, cfg.momentum)
        torch._foreach_add_(momentum, grads, alpha=1.0)
        grads = momentum
    return grads


def single_loss_fn(model, method, cfg: TrainConfig, autocast):
    """loss_fn(params, buffers, batches) -> (loss, losses [1]) of one plain model."""
    def loss_fn(params, buffers, batches):
        (x, target), = batches
        with autocast(x.device, cfg.bf16):
            loss = method.loss(functional_call(model, (params, buffers), (x,)), target)
        return loss, loss.detach().view(1)
    return loss_fn


# ---------------------------------------------------------------- runner --
class GraphRunner:
    """A stepper's epochs through the graph-safe step: draw and stage the
    epoch, then per step the step itself (CPU) or its CUDA graph's replay,
    captured per batch shape after WARMUP_STEPS eager steps on a side stream
    (those are real training steps). `say(text)`: where a failed capture is
    reported (the run's log in a sweep)."""

    def __init__(self, stepper, x: torch.Tensor, y: torch.Tensor, say):
        self.st, self.gs, self.say = stepper, GraphStep(stepper, x, y), say
        self.hw = tuple(x.shape[-2:])
        self.capture = stepper.device.type == "cuda"
        self.ahead = (Ahead(stepper, len(y), self.hw, pin=self.capture)
                      if wants_ahead(stepper.cfg, stepper.device) else None)
        self.stages: dict = {}  # batch length -> Stage
        self.graphs: dict = {}  # batch length -> CUDAGraph, or None once capture failed
        self.warm: dict = {}  # batch length -> eager warm-up steps taken
        if stepper.cfg.compile_step:  # one inductor graph; captured like the eager step
            self.gs.step = compile_graph_step(self.gs)

    def run_epoch(self, orders: list, lrs: list, tick, more: bool = False) -> list:
        """Train one epoch; `tick(loss_row)` after each step. Returns the
        epoch's step losses, one [members] row each (copies: the buffers are
        reused), as the per-step path returns them. `more`: another epoch
        follows (drawn meanwhile under stage_ahead)."""
        return finish(ticked(self.epoch_steps(orders, lrs, more), tick))

    def epoch_steps(self, orders: list, lrs: list, more: bool = False):
        """run_epoch as a generator: yields each step's loss row (a view of a
        reused buffer) and returns the epoch's losses, so that several runs'
        steps can interleave (bench.train.streams)."""
        out = []
        staged = self.stage_epoch(orders, lrs)
        if more and self.ahead is not None:  # this epoch's draws made: the next one's now
            self.ahead.start()
        for n, stage, count in staged:
            for i in range(count):
                self.step(n, stage)
                yield stage.losses[i]
            out.append(stage.losses.clone())
        return list(torch.cat(out).unbind(0))

    def stage_epoch(self, orders: list, lrs: list) -> list:
        """Draw and stage an epoch: [(batch length, its Stage, its steps)], full
        batches first, then a ragged last one (drop_last=false)."""
        st = self.st
        drawn = self.ahead.take(orders) if self.ahead is not None else None
        if drawn is None:
            steps = draw_epoch(orders, lrs, st.methods, st.gens, st.aug_gens, st.cfg, self.hw)
        else:
            steps = with_lrs(drawn, [len(i) for i in orders[0]], lrs)
        out = []
        for n, fields in steps.items():
            stage = self.stages.setdefault(n, Stage(st.device, st.size))
            stage.load(fields)
            out.append((n, stage, len(fields["idx"])))
        return out

    def step(self, n: int, stage: Stage) -> None:
        """The stage's next step: eager (CPU, a failed capture), an eager
        warm-up on a side stream, or the captured graph's replay."""
        if not self.capture or self.graphs.get(n, False) is None:
            self.gs.step(stage)
        elif n not in self.graphs and self.warm.get(n, 0) < WARMUP_STEPS:
            self._side_stream_step(stage)
            self.warm[n] = self.warm.get(n, 0) + 1
        else:
            if n not in self.graphs:
                self.graphs[n] = self._capture(stage)
            if self.graphs[n] is None:
                self.gs.step(stage)
            else:
                self.graphs[n].replay()

    def _side_stream_step(self, stage: Stage) -> None:
        side = torch.cuda.Stream(self.st.device)
        side.wait_stream(torch.cuda.current_stream(self.st.device))
        with torch.cuda.stream(side):
            self.gs.step(stage)
        torch.cuda.current_stream(self.st.device).wait_stream(side)

    def _capture(self, stage: Stage):
        """The step as a CUDA graph (recorded, not run), or None with one line said."""
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self.gs.step(stage)
        except Exception as err:  # noqa: BLE001 - any failure falls back to stepping
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            self.say(f"CUDA graph capture failed ({type(err).__name__}: {first}); "
                     "training on with the graph-safe step, uncaptured")
            return None
        return graph

    def kernels(self) -> dict:
        """Captured graphs by batch length (bench.speed.capture counts their nodes)."""
        return {n: g for n, g in self.graphs.items() if g is not None}


def compile_graph_step(gs: GraphStep, backend="inductor"):
    """gs.step compiled whole, fullgraph. Before the first call the step's
    batches are made once, eagerly (that changes no state): they make the
    lazy device constants of normalise and the augmentation, which dynamo
    would otherwise trace missing (a host-to-device copy in that graph) and
    then compile the step a second time at the next call. Static shapes: a
    CUDA graph has them, and dynamo would otherwise make a size symbolic once
    a process has compiled the step at two sizes (two cases of
    bench.speed.capture), which dropout under grad cannot trace."""
    compiled = torch.compile(gs.step, fullgraph=True, dynamic=False, backend=backend)
    made = []

    def step(stage: Stage) -> None:
        if not made:
            gs.batches(stage.read())
            made.append(True)
        compiled(stage)
    return step


def ticked(steps, tick):
    """Pass each loss a step generator yields to `tick`, then yield it on;
    return what the generator returns."""
    while True:
        try:
            loss = next(steps)
        except StopIteration as stop:
            return stop.value
        tick(loss)
        yield loss


def finish(steps):
    """Run a step generator to its end; -> its return value."""
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value
