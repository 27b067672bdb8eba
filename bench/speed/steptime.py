"""Time the harness's own training step and evaluation on synthetic data of a
given shape (random uint8 images, random labels), for bench.speed.gpuplan.

The timed code is the training loop's own step: the `step` of the stepper
bench.train.loop.run_loop drives (bench.train.loop.SingleStepper for a single
run, built as `bench run` builds it, so channels_last / compile / bf16 act
the same; bench.train.fused.FusedStepper for a group), with the per-step
cosine learning rate and the seeded batch order of the loop, and the
stepper's `predict` for evaluation.
Only what is timed is allocated: (warm-up + timed) x batch training images
and a capped evaluation set; the true split sizes enter only the projection.
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import torch
from torch._dynamo.utils import counters
from torch.utils.flop_counter import FlopCounterMode

from bench.train.backbones import build_model
from bench.core.config import TrainConfig
from bench.core.errors import BenchError
from bench.train.fused import FusedStepper
from bench.methods.base import create_method
from bench.core.schedule import cosine_lr
from bench.train.loop import SingleStepper, epoch_batches, graph_runner, normalise, sync


class OutOfBudget(BenchError):
    """The time budget ran out in the middle of a measurement."""


@dataclass(frozen=True)
class Job:
    """One measurement: a model of `heads` heads on images of `size` px, trained
    alone (path 'single') or as a fused group whose members run `methods`."""

    dataset: str
    backbone: str
    size: int
    classes: int
    heads: int
    path: str  # "single" | "fused"
    methods: tuple  # one method name per member
    variant: str
    cfg: TrainConfig

    @property
    def members(self) -> int:
        return len(self.methods)


def synthetic(n: int, size: int, classes: int, device, seed: int = 0):
    """Random uint8 images [n, 3, size, size] and labels, on the device."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 256, (n, 3, size, size), generator=g, dtype=torch.uint8)
    y = torch.randint(0, classes, (n,), generator=g)
    return x.to(device), y.to(device)


def member_methods(job: Job) -> list:
    """One set-up method per member; member s draws from seed s."""
    out = []
    for s, name in enumerate(job.methods):
        m = create_method(name)
        m.setup(job.classes, s)
        out.append(m)
    return out


def count_step_flops(model, x: torch.Tensor, y: torch.Tensor, method, bf16: bool = False) -> int:
    """FLOPs of one training step's forward + backward (the optimiser's
    elementwise update and the augmentation are not counted), by
    torch.utils.flop_counter on the real model and input."""
    model.train()
    with FlopCounterMode(display=False) as counter:
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = method.loss(model(x), y)
        loss.backward()
    model.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


def _steps(run_step, n_warmup: int, n_steps: int, device, deadline: float,
           on_ready=None) -> float:
    """Seconds for n_steps steps after n_warmup untimed ones (step 0, the
    first, has run already). The clock is checked between steps, so a slow
    measurement gives up at the deadline. `on_ready()`, if given, is called
    between warm-up and the timed steps (processes timed side by side wait
    there for each other)."""
    for i in range(1, n_warmup):
        run_step(i)
        if time.perf_counter() > deadline:
            raise OutOfBudget("budget ran out during warm-up")
    sync(device)
    if on_ready is not None:
        on_ready()
    t0 = time.perf_counter()
    for i in range(n_warmup, n_warmup + n_steps):
        run_step(i)
        if time.perf_counter() > deadline:
            raise OutOfBudget("budget ran out during timed steps")
    sync(device)
    return time.perf_counter() - t0


def _eval(fn, x: torch.Tensor, batch: int, device, deadline: float) -> float:
    """ms per evaluated image at the evaluation batch. The warm-up is a whole
    pass, so every batch shape (the last, smaller one too) is seen, and cuDNN's
    algorithm search, before the timed pass."""
    fn(x)
    if time.perf_counter() > deadline:
        raise OutOfBudget("budget ran out during evaluation warm-up")
    sync(device)
    t0 = time.perf_counter()
    fn(x)
    sync(device)
    return 1000.0 * (time.perf_counter() - t0) / len(x)


def measure(job: Job, device, n_steps: int, n_warmup: int, eval_n: int,
            deadline: float, flops: bool = True, on_ready=None) -> dict:
    """Time one job. Returns ms_step, eval_ms_image, the first (warm-up) step's
    seconds (compile time shows there) and, if asked, FLOPs per step of ONE
    member (a fused group does members x that)."""
    device = torch.device(device)
    cfg = job.cfg
    n_warmup = max(n_warmup, 1)  # step 0 is always run (and timed alone)
    counters["inductor"].clear()  # CUDA graphs skipped (and why) show up here
    torch.manual_seed(0)
    methods = member_methods(job)
    t_build = time.perf_counter()
    base, _ = build_model(job.backbone, job.size, job.heads, job.classes)
    n = (n_warmup + n_steps) * cfg.batch_size
    x, y = synthetic(n, job.size, job.classes, device)
    xv, _ = synthetic(eval_n, job.size, job.classes, device, seed=1)
    out = {"flops_step": None}
    if flops:
        m = copy.deepcopy(base).to(device)
        # the method's own batch transform, so its loss gets the target it expects
        xb, target = methods[0].batch(normalise(x[:cfg.batch_size]), y[:cfg.batch_size],
                                      torch.Generator().manual_seed(0))
        out["flops_step"] = count_step_flops(m, xb, target, methods[0], cfg.bf16)
        del m
    run_step, evaluate = stepper(job, base, methods, x, y, device)
    out["build_s"] = time.perf_counter() - t_build
    t_first = time.perf_counter()
    run_step(0)
    sync(device)
    out["first_step_s"] = time.perf_counter() - t_first
    if time.perf_counter() > deadline:
        raise OutOfBudget("budget ran out during the first step")
    secs = _steps(run_step, n_warmup, n_steps, device, deadline, on_ready)
    out["ms_step"] = 1000.0 * secs / n_steps
    out["timed_steps"], out["eval_images"] = n_steps, len(xv)
    out["eval_ms_image"] = _eval(evaluate, xv, cfg.eval_batch_size, device, deadline)
    # reduce-overhead asked for CUDA graphs; a skip means the timing is plain inductor
    out["cudagraph_skips"] = int(counters["inductor"]["cudagraph_skips"]) if cfg.compile else None
    return out


def stepper(job: Job, base, methods: list, x, y, device):
    """(run_step(i), evaluate(images)) of the job's path, through the stepper
    the training loop itself uses (bench.train.loop.SingleStepper for one run,
    bench.train.fused.FusedStepper for a group): step i is the loop's step on
    batch i of one seeded epoch over x, y at the loop's cosine lr (one long
    cycle, so the lr stays realistic). `base` is copied, not trained."""
    cfg = job.cfg
    if job.path == "single":
        st = SingleStepper(copy.deepcopy(base), methods[0], cfg, device, seed=0)
    else:
        st = FusedStepper([copy.deepcopy(base) for _ in methods], methods, cfg,
                          list(range(len(methods))), device)
    orders = [epoch_batches(len(y), cfg.batch_size, g, drop_last=True) for g in st.gens]
    lrs = [cosine_lr(i, 10_000, cfg.lr, cfg.eta_min) for i in range(len(orders[0]))]
    st.train_mode()
    runner = graph_runner(st, x, y)  # the loop's own choice: captured on CUDA by default
    if runner is not None:  # the timed steps are one staged epoch
        (n, stage, _), = runner.stage_epoch(orders, lrs)

        def run_step(i):
            runner.step(n, stage)
    else:
        def run_step(i):
            st.step(x, y, tuple(o[i] for o in orders), lrs[i])

    def evaluate(images):
        st.predict(images)
        st.train_mode()
    return run_step, evaluate
