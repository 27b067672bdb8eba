"""The paper's training loop, top to bottom (airbench-style, one file).

SGD (lr 1e-2, no momentum, no weight decay), batch 8, cosine annealing with
warm restarts stepped every iteration, validation macro OvR AUC at the end of
each cycle, best checkpoint kept for testing. Images stay uint8 tensors on
the device; augmentation (per-image draws, batched kernels, bench/train/augment.py)
and normalisation (one fused multiply-add) happen on batches; evaluation runs
in large batches. Speed switches (channels_last, torch.compile, bf16) are
TrainConfig fields; see docs/speed.md.

`run_loop` is the one cycle / epoch / checkpoint loop: single runs drive it
with a SingleStepper (plain model, never vmap), fused groups with
bench.train.fused.FusedStepper; its `on_step` hook serves both (sweep
heartbeats), and bench.speed.steptime times the stepper's `step`.
"""
from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm import tqdm

from bench.train import adapt
from bench.train.augment import augment_batch
from bench.core.config import TrainConfig
from bench.core.schedule import cosine_lr, steps_per_epoch
from bench.core.errors import BenchError
from bench.train.history import History
from bench.train.protocol import checkpoint_auc, set_deterministic, to_model_size
from bench.core.transfer import h2d
from bench.train.graphstep import (GraphRunner, eager_reason, finish, single_loss_fn, ticked,
                                   wants_graph)
from bench.train.resume import rng_state, say, set_rng_state
from bench.train.staging import epoch_batches

# ImageNet statistics on the 0..255 scale, so normalisation is one fused op.
MEAN255 = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255
STD255 = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255
# (x - mean) / std == x * SCALE + SHIFT: one addcmul kernel instead of two ops.
SCALE, SHIFT = 1.0 / STD255, -MEAN255 / STD255
# Augmentation draws get their own stream, so switching augmentation on/off or
# between modes leaves batch order and method draws unchanged.
AUG_STREAM = 0x9E3779B9


class NonFiniteLoss(BenchError):
    """Training diverged; the message says where."""


@dataclass
class TrainResult:
    val_logits: np.ndarray  # [N_val, M, K] at the best checkpoint
    test_logits: np.ndarray  # [N_test, M, K]
    best_cycle: int  # 1-based
    cycle_val_auc: list[float] = field(default_factory=list)
    train_seconds: float = 0.0
    train_images_per_s: float = 0.0
    steps: int = 0
    infer_ms_per_image: float = 0.0  # test-set prediction time / images
    history: dict = field(default_factory=dict)  # bench.train.history.History.member
    state: dict | None = None  # the selected checkpoint's state dict (--keep-weights, --eval)


# -------------------------------------------------------------------- data --
def to_device_images(images: np.ndarray, device: torch.device) -> torch.Tensor:
    """uint8 [N, H, W, 3] numpy -> uint8 [N, 3, H, W] tensor on the device."""
    return torch.from_numpy(images).permute(0, 3, 1, 2).contiguous().to(device)


_NORM_CACHE: dict = {}


def normalise(x: torch.Tensor, channels_last: bool = False) -> torch.Tensor:
    """uint8 [B,3,H,W] -> ImageNet-normalised float32, in one fused kernel."""
    if x.device not in _NORM_CACHE:
        _NORM_CACHE[x.device] = (SCALE.to(x.device), SHIFT.to(x.device))
    scale, shift = _NORM_CACHE[x.device]
    out = torch.addcmul(shift, x.float(), scale)
    return out.contiguous(memory_format=torch.channels_last) if channels_last else out


def autocast(device: torch.device, bf16: bool):
    """bf16 autocast when asked (CPU and CUDA both support it), else a no-op
    (also on the meta device, where bench.speed.capture counts a step's operations)."""
    if not bf16:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


# -------------------------------------------------------------- evaluation --
@torch.no_grad()
def predict_logits(model, images: torch.Tensor, batch_size: int, bf16: bool = False,
                   channels_last: bool = False) -> np.ndarray:
    """Per-head logits [N, M, K] in eval mode, in large batches (one copy to the
    host at the end, not one per batch)."""
    model.eval()
    with autocast(images.device, bf16):
        out = [model(normalise(images[i:i + batch_size], channels_last)).float()
               for i in range(0, len(images), batch_size)]
    return torch.cat(out).cpu().numpy()


# ------------------------------------------------------------------ train --
def train_step(model, method, opt, x, y, gen, cfg: TrainConfig,
               aug_gen: torch.Generator) -> torch.Tensor:
    if cfg.augment:
        x = augment_batch(x, aug_gen, cfg.augment_mode)
    x = to_model_size(x, cfg.image_size)  # augmented at augment_size, trained at image_size
    x, target = method.batch(normalise(x, cfg.channels_last), y, gen)
    with autocast(x.device, cfg.bf16):
        loss = method.loss(model(x), target)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.detach()


def check_finite(losses: list, first_step: int, cycle: int, epoch: int, lr: float) -> None:
    """Raise NonFiniteLoss naming the first bad step. Checked once per epoch:
    a per-step `.item()` would stall the GPU queue every step. A step's loss
    may be a vector (one per fused seed); `losses` a list of them or a
    [steps, members] tensor (the graph-safe step's buffer)."""
    if len(losses) == 0:
        return
    ok = torch.isfinite(torch.stack(losses).reshape(len(losses), -1))
    if not bool(ok.all()):
        bad = int((~ok.all(dim=1)).nonzero()[0])
        value = losses[bad].reshape(-1)[~ok[bad]][0].item()
        raise NonFiniteLoss(
            f"non-finite loss ({value}) at cycle {cycle + 1}, epoch "
            f"{epoch + 1}, step {first_step + bad} (lr {lr}); lower --set lr=..."
        )


def prepare_model(model, cfg: TrainConfig, device: torch.device):
    """Move to the device; apply the speed-only switches. Returns (model, step_model).
    `cfg` is taken as checked: validate() ran where it was made (the plan's
    apply_overrides, a profile, the speed tools), before anything was written."""
    set_backends(cfg, device)
    model.to(device)
    if cfg.channels_last:
        model.to(memory_format=torch.channels_last)
    return model, (torch.compile(model, mode=cfg.compile_mode) if cfg.compile else model)


def make_sgd(params, cfg: TrainConfig) -> torch.optim.SGD:
    """The paper's optimiser under cfg (lr is reset every step by cosine_lr)."""
    return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum,
                           weight_decay=cfg.weight_decay)


@contextlib.contextmanager
def precision_scope(cfg: TrainConfig):
    """cfg.precision's matmul setting for the run, the previous one restored
    afterwards so that one run does not leak it into the next in the same
    process. "released" touches nothing (PyTorch's defaults: TF32 convolutions,
    FP32 matmuls); "tf32" and "bf16" allow TF32 matmuls (bf16's autocast is
    cfg.bf16, which precision=bf16 sets). On a CPU the TF32 flags do nothing."""
    if cfg.precision == "released":
        yield
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # TF32 matmuls on tensor cores
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def set_backends(cfg: TrainConfig, device: torch.device) -> None:
    """Process-wide backend switches (each run has its own process in a sweep)."""
    set_deterministic(cfg.deterministic)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = cfg.cudnn_benchmark and not cfg.deterministic


class SingleStepper:
    """One run as the loop sees it: the plain model (never vmap) and the paper's
    step (train_step). Its seed gives, as always: the global RNG (only layers
    that draw, e.g. dropout), batch order and method draws (`gens[0]`) and
    augmentation draws (`aug_gen`)."""

    def __init__(self, model, method, cfg: TrainConfig, device, seed: int):
        self.device, self.method, self.cfg = torch.device(device), method, cfg
        torch.manual_seed(seed)
        self.gens = [torch.Generator().manual_seed(seed)]
        self.aug_gen = torch.Generator().manual_seed(seed + AUG_STREAM)
        self.model, self.step_model = prepare_model(model, cfg, self.device)
        self.opt = make_sgd(self.model.parameters(), cfg)
        self.size, self.name = 1, f"seed {seed}"
        self.methods, self.aug_gens = [method], [self.aug_gen]  # the graph-safe step's view

    def train_mode(self) -> None:
        self.model.train()

    def normalise(self, x: torch.Tensor) -> torch.Tensor:
        return normalise(x, self.cfg.channels_last)

    def functional(self):
        """(params, buffers, loss_fn) of the graph-safe step (bench.train.graphstep):
        the model's own tensors, updated in place."""
        return (dict(self.model.named_parameters()), dict(self.model.named_buffers()),
                single_loss_fn(self.model, self.method, self.cfg, autocast))

    def step(self, x, y, idxs: tuple, lr: float) -> torch.Tensor:
        """One SGD step at learning rate `lr` on x[idxs[0]] (indices on the host)."""
        set_lr(self.opt, lr)
        idx = h2d(idxs[0], self.device)
        return train_step(self.step_model, self.method, self.opt, x[idx], y[idx],
                          self.gens[0], self.cfg, self.aug_gen)

    def predict(self, images: torch.Tensor) -> np.ndarray:
        """[1, N, M, K]: the member axis the loop shares with fused groups."""
        return predict(self.model, images, self.cfg)[None]

    def snapshot(self, s: int) -> dict:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def load(self, s: int, state: dict) -> None:
        self.model.load_state_dict(state)

    def state_dict(self) -> dict:
        """What a resumed run needs (bench.train.resume): weights, optimiser, own generators."""
        return {"model": self.model.state_dict(), "opt": self.opt.state_dict(),
                "gens": [g.get_state() for g in (*self.gens, self.aug_gen)]}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        for g, s in zip((*self.gens, self.aug_gen), state["gens"], strict=True):
            g.set_state(s)


def set_lr(opt, lr: float) -> None:
    for group in opt.param_groups:
        group["lr"] = lr


def train(model, method, cfg: TrainConfig, data, seed: int, device="cpu", *,
          progress: bool = True, on_step=None, state=None) -> TrainResult:
    """Train `model` with `method` on `data` (a DatasetBundle) under `cfg`;
    `state` (bench.train.resume.CycleState), if given, is resumed from and saved."""
    stepper = SingleStepper(model, method, cfg, device, seed)
    return run_loop(stepper, cfg, data, progress, on_step, state)[0]


def run_loop(stepper, cfg: TrainConfig, data, progress: bool = True,
             on_step=None, state=None) -> list[TrainResult]:
    """The training loop of every run, alone (SingleStepper) or fused
    (bench.train.fused.FusedStepper): cycles of epochs of seeded batch orders
    (one per member), the cosine lr per step, a finite-loss check per epoch,
    validation and best checkpoint per cycle and member, then the test set.
    `on_step(step, loss)`, if given, is called after every step (sweep
    heartbeats); `loss` is the step's (per-member) loss tensor, still on the device.
    `state` (bench.train.resume.CycleState), if given, is saved at every cycle
    end, and a run that finds one starts after its last saved cycle."""
    with precision_scope(cfg):
        return finish(loop_steps(stepper, cfg, data, progress, on_step, state))


def device_splits(data, device: torch.device) -> dict:
    """The bundle's images (train, val, test) and training labels on the device."""
    xs = {s: to_device_images(data.split(s).images, device) for s in ("train", "val", "test")}
    return {**xs, "y_train": torch.from_numpy(data.train.labels).to(device)}


def loop_steps(stepper, cfg: TrainConfig, data, progress: bool = True, on_step=None,
               state=None, splits: dict | None = None):
    """run_loop as a generator: yields after every training step (its loss),
    returns the TrainResults. bench.train.streams interleaves several runs'
    generators; `splits` (device_splits), if given, is shared, not loaded again."""
    device = stepper.device
    xs = splits or device_splits(data, device)
    y_train = xs["y_train"]
    per_epoch = steps_per_epoch(len(y_train), cfg.batch_size, cfg.drop_last)
    cycle_steps = per_epoch * cfg.epochs_per_cycle
    best, aucs = [(-math.inf, None)] * stepper.size, [[] for _ in range(stepper.size)]
    start, step, seen, seconds = 0, 0, 0, 0.0
    history = History(stepper.size)
    adapt.start(stepper, data.num_classes)  # adaptive losses only (AdaFocal, CALS)
    saved = state.load() if state is not None else None
    if saved is not None:  # a killed run: go on after its last cycle end
        start, step, seen, seconds, best, aucs = restore(stepper, saved)
        history.load_state_dict(saved["history"])
        adapt.restore(stepper, saved)
    bar = tqdm(total=cycle_steps * cfg.cycles, initial=step, desc=stepper.name, leave=False,
               disable=not progress, unit="step")
    runner = graph_runner(stepper, xs["train"], y_train)
    for cycle in range(start, cfg.cycles):
        t0 = time.perf_counter()
        for epoch in range(cfg.epochs_per_cycle):
            stepper.train_mode()
            first = step
            orders = [epoch_batches(len(y_train), cfg.batch_size, g, cfg.drop_last)
                      for g in stepper.gens]
            lrs = [cosine_lr(step + t, cycle_steps, cfg.lr, cfg.eta_min)
                   for t in range(len(orders[0]))]

            def tick(loss):
                nonlocal step
                step += 1
                bar.update()
                if on_step is not None:
                    on_step(step, loss)
            more = cycle + 1 < cfg.cycles or epoch + 1 < cfg.epochs_per_cycle
            losses = yield from ticked(epoch_steps(stepper, runner, xs["train"], y_train,
                                                   orders, lrs, more), tick)
            seen += sum(len(i) for i in orders[0])
            check_finite(losses, first, cycle, epoch, cfg.lr)
            history.epoch(cycle, epoch, losses, lrs[-1] if lrs else cfg.lr)
            adapt.after_epoch(stepper, xs["val"], data.val.labels,
                              cycle * cfg.epochs_per_cycle + epoch)
            history.adapted(cycle, epoch, adapt.adaptive(stepper))
        sync(device)
        seconds += time.perf_counter() - t0
        val = stepper.predict(xs["val"])
        best = keep_best(stepper, val, data.val.labels, cycle, best, aucs, cfg.checkpoint_score)
        history.cycle(cycle, val, data.val.labels, aucs)
        bar.set_postfix(val_auc=" ".join(f"{a[-1]:.4f}" for a in aucs))
        if state is not None:
            state.save({"loop": {"cycle": cycle + 1, "step": step, "seen": seen,
                                 "seconds": seconds, "best": best, "aucs": aucs},
                        "stepper": stepper.state_dict(), "rng": rng_state(),
                        "history": history.state_dict(), **adapt.saved(stepper)})
    bar.close()
    results = _results(stepper, best, aucs, xs["test"], seconds, seen, step)
    for s, result in enumerate(results):
        result.history = history.member(s)
    return results


def graph_runner(stepper, x: torch.Tensor, y: torch.Tensor):
    """The stepper's GraphRunner (bench.train.graphstep), or None for the
    per-step path; a run that asked for the graph step and cannot have it
    says why in one line (its log, in a sweep)."""
    if not wants_graph(stepper.cfg, stepper.device):
        return None
    reason = eager_reason(stepper.methods, stepper.cfg)
    if reason is None:
        return GraphRunner(stepper, x, y, say)
    say(f"training step per step, not graph-safe: {reason}")
    return None


def epoch_steps(stepper, runner, x, y, orders: list, lrs: list, more: bool = False):
    """One epoch's steps, a generator yielding each step's loss: through the
    graph runner, or one stepper.step per batch. Returns the step losses (a
    list of [members] tensors): what check_finite and History read. `more`:
    another epoch follows (the graph runner may draw it meanwhile)."""
    if runner is not None:
        return (yield from runner.epoch_steps(orders, lrs, more))
    losses = []
    for idxs, lr in zip(zip(*orders), lrs):
        losses.append(stepper.step(x, y, idxs, lr))
        yield losses[-1]
    return losses


def restore(stepper, saved: dict) -> tuple:
    """Put the stepper and every generator back as they were at the saved cycle
    end; -> the loop's (first cycle to run, step, seen, seconds, best, aucs)."""
    stepper.load_state_dict(saved["stepper"])
    set_rng_state(saved["rng"])
    loop = saved["loop"]
    return loop["cycle"], loop["step"], loop["seen"], loop["seconds"], loop["best"], loop["aucs"]


def keep_best(stepper, val_logits, val_labels, cycle: int, best: list, aucs: list,
              rule: str = "released") -> list:
    """Per member: keep the checkpoint with the best validation AUC (scored by
    `rule`, TrainConfig.checkpoint_score) and its validation logits (no second
    pass at the end). Strictly better wins, so ties keep the earlier cycle; a
    NaN AUC never wins."""
    out = list(best)
    for s in range(stepper.size):
        auc = checkpoint_auc(val_logits[s], val_labels, rule)
        aucs[s].append(auc)
        if out[s][1] is None or val_score(auc) > out[s][0]:
            out[s] = (val_score(auc), (cycle + 1, stepper.snapshot(s), val_logits[s]))
    return out


def _results(stepper, best, aucs, x_test, seconds, seen, steps) -> list[TrainResult]:
    """Each member back at its best checkpoint, then the test set; a group's
    wall time is shared equally among its members."""
    for s, (_, (_, state, _)) in enumerate(best):
        stepper.load(s, state)
    sync(stepper.device)
    t0 = time.perf_counter()
    test = stepper.predict(x_test)
    sync(stepper.device)
    infer_ms = 1000 * (time.perf_counter() - t0) / max(test.shape[0] * test.shape[1], 1)
    share = seconds / stepper.size
    return [TrainResult(val_logits=b[2], test_logits=test[s], best_cycle=b[0],
                        cycle_val_auc=aucs[s], train_seconds=share,
                        train_images_per_s=seen / max(share, 1e-9), steps=steps,
                        infer_ms_per_image=infer_ms, state=b[1])
            for s, (_, b) in enumerate(best)]


def predict(model, images: torch.Tensor, cfg: TrainConfig) -> np.ndarray:
    return predict_logits(model, images, cfg.eval_batch_size, cfg.bf16, cfg.channels_last)


def val_score(auc: float) -> float:
    """A cycle's checkpoint score: its validation AUC, and a NaN AUC never wins."""
    return auc if auc == auc else -math.inf


def sync(device: torch.device) -> None:
    """Wait for the device (before reading a timer); nothing to wait for on CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
