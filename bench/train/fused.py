"""Several runs of one architecture (seeds, or methods) trained at once, as one fused model.

At batch 8 a GPU is mostly idle between kernel launches; training S seeds in
lock-step puts S x 8 images through every launch. The S models' parameters
and buffers are stacked along a new leading dimension (torch.func's
stack_module_state) and the model runs under vmap(functional_call), which
turns every convolution into one grouped convolution over the seeds.

Members may differ in method too (bench.train.groups: `--fuse methods`) as
long as they share the architecture (same head count) and training config.
A group runs in the same loop as a single run (bench.train.loop.run_loop),
through a FusedStepper instead of a SingleStepper. Each seed keeps
everything it has when trained alone (bench.train.loop.train): its own
initial weights, batch order and method draws (`seed`), augmentation draws
(`seed + AUG_STREAM`), and its own best-cycle checkpoint. The summed
loss has per-seed gradients (seeds share no parameter), and plain SGD is
elementwise, so a fused run equals the run alone up to floating-point
reassociation (tests/train/test_fused.py). Layers that draw from the global RNG
(dropout) would draw differently; the harness's backbones have none active.
"""
from __future__ import annotations

import copy

import numpy as np
import torch
from torch.func import functional_call, stack_module_state, vmap

from bench.train.augment import apply_ops, augment_batch, sample_params
from bench.train.cells import CellModel
from bench.train.seedvmap import member_losses
from bench.core.config import TrainConfig
from bench.core.errors import BenchError
from bench.train.nets import vmap_safe
from bench.train.protocol import to_model_size
from bench.core.transfer import h2d
from bench.train.loop import (AUG_STREAM, TrainResult, autocast, make_sgd, normalise, run_loop,
                              set_backends, set_lr)


class FusedModel:
    """S copies of one architecture with stacked parameters [S, ...]."""

    def __init__(self, models: list, device):
        if not models:
            raise BenchError("fused training needs at least one model")
        # own drop-path masks per member, batchable pooling, bf16-safe batch norm
        models = [vmap_safe(m).to(device) for m in models]
        self.params, self.buffers = stack_module_state(models)
        self.base = copy.deepcopy(models[0]).to("meta")  # architecture only
        self.size = len(models)
        self._compiled = None

    def compile(self, mode: str = "default") -> None:
        """torch.compile the training forward (vmap included; backward follows).
        With mode "reduce-overhead" the group's step runs from CUDA graphs.
        Evaluation stays eager, as for single runs. The stacked tensors are
        plain tensors, not Parameters, updated in place (SGD, BatchNorm's
        running statistics, checkpoint loads): marked as static addresses,
        CUDA graphs read them where they live instead of skipping the graph
        for "mutated inputs" or copying every member's weights each replay."""
        for t in (*self.params.values(), *self.buffers.values()):
            torch._dynamo.mark_static_address(t)
        self._compiled = torch.compile(self._forward, mode=mode)

    def __call__(self, x: torch.Tensor, shared_input: bool = False) -> torch.Tensor:
        """x [S, B, 3, H, W] (or [B, 3, H, W] with shared_input) -> [S, B, M, K]."""
        if self._compiled is not None and self.base.training and not shared_input:
            return self._compiled(self.params, self.buffers, x)
        return self._forward(self.params, self.buffers, x, shared_input)

    def _forward(self, params, buffers, x, shared_input: bool = False):
        def one(p, b, xi):
            return functional_call(self.base, (p, b), (xi,))
        in_dims = (0, 0, None if shared_input else 0)
        return vmap(one, in_dims=in_dims, randomness="different")(params, buffers, x)

    def train(self, mode: bool = True) -> None:
        self.base.train(mode)

    def snapshot(self, s: int) -> dict:
        return {k: v[s].detach().clone() for k, v in {**self.params, **self.buffers}.items()}

    @torch.no_grad()
    def load(self, s: int, state: dict) -> None:
        for k, v in {**self.params, **self.buffers}.items():
            v[s].copy_(state[k])


@torch.no_grad()
def predict_fused(fm: FusedModel, images: torch.Tensor, cfg: TrainConfig) -> np.ndarray:
    """Per-seed, per-head logits [S, N, M, K], evaluation mode, large batches:
    every member sees eval_batch_size images a call, as a run alone does (a
    call puts S x eval_batch_size images through the group; lower
    --set eval_batch_size=... where that does not fit)."""
    fm.train(False)
    chunk = cfg.eval_batch_size
    with autocast(images.device, cfg.bf16):
        out = [fm(normalise(images[i:i + chunk]), shared_input=True).float()
               for i in range(0, len(images), chunk)]
    return torch.cat(out, dim=1).cpu().numpy()


def _augment(xs: list, aug_gens: list, cfg: TrainConfig) -> torch.Tensor:
    """Every member's batch augmented with its own generator, concatenated
    [sum B, 3, H, W]. In batched mode all members' images go through one
    kernel call per op (the draws stay per member)."""
    if not cfg.augment:
        return torch.cat(xs)
    if cfg.augment_mode != "batched":
        return torch.cat([augment_batch(x, g, cfg.augment_mode) for x, g in zip(xs, aug_gens)])
    draws = [sample_params(len(x), g) for x, g in zip(xs, aug_gens)]
    ops = torch.cat([d[0] for d in draws])
    mags = torch.cat([d[1] for d in draws])
    return apply_ops(torch.cat(xs), ops, mags)


def fused_step(fm, methods, opt, xs, ys, gens, aug_gens, cfg) -> torch.Tensor:
    """One SGD step of every member; returns the per-member losses [S]. Work
    that is the same for every member runs once over all of them (augmentation
    kernels, normalisation): at batch 8 each kernel launch counts."""
    x = to_model_size(_augment(xs, aug_gens, cfg), cfg.image_size)  # as train_step
    x = normalise(x).split([len(t) for t in xs])
    batches = [m.batch(xi, y, g) for m, xi, y, g in zip(methods, x, ys, gens)]
    with autocast(x[0].device, cfg.bf16):
        logits = fm(torch.stack([b[0] for b in batches]))
        losses = member_losses(methods, logits, [b[1] for b in batches])
    opt.zero_grad(set_to_none=True)
    losses.sum().backward()  # seeds share no parameter: per-seed gradients
    opt.step()
    return losses.detach()


def group_model(how: str, models: list, cfg: TrainConfig, device):
    """The group's stacked model: vmapped (FusedModel) or batched (a cell group,
    bench.train.cells.CellModel); the same interface."""
    if how == "cells":
        return CellModel(models, device, cfg.cell_conv)
    if how == "vmap":
        return FusedModel(models, device)
    raise BenchError(f"unknown group model '{how}'; choose from: cells, vmap")


class FusedStepper:
    """A fused group as the loop (bench.train.loop.run_loop) sees it: the
    group's model (`how`: cells or vmap) and fused_step. Member s keeps its
    seed's streams: batch order and method draws (`gens[s]`), augmentation
    (`aug_gens[s]`)."""

    def __init__(self, models: list, methods: list, cfg: TrainConfig, seeds: list[int],
                 device, how: str = "vmap"):
        self.device, self.methods, self.cfg = torch.device(device), methods, cfg
        self.gens = [torch.Generator().manual_seed(s) for s in seeds]
        self.aug_gens = [torch.Generator().manual_seed(s + AUG_STREAM) for s in seeds]
        set_backends(cfg, self.device)
        self.fm = group_model(how, models, cfg, self.device)
        if cfg.compile:
            self.fm.compile(cfg.compile_mode)
        self.opt = make_sgd(self.fm.params.values(), cfg)
        self.size, self.name = len(seeds), f"{how} x{len(seeds)}"

    def train_mode(self) -> None:
        self.fm.train(True)

    def normalise(self, x: torch.Tensor) -> torch.Tensor:
        return normalise(x)

    def functional(self):
        """(params, buffers, loss_fn) of the graph-safe step (bench.train.graphstep):
        the stacked tensors and fused_step's loss, summed over members."""
        fm, methods, cfg = self.fm, self.methods, self.cfg

        def loss_fn(params, buffers, batches):
            with autocast(self.device, cfg.bf16):
                logits = fm._forward(params, buffers, torch.stack([b[0] for b in batches]))
                losses = member_losses(methods, logits, [b[1] for b in batches])
            return losses.sum(), losses.detach()
        return fm.params, fm.buffers, loss_fn

    def step(self, x, y, idxs: tuple, lr: float) -> torch.Tensor:
        """One SGD step of every member at `lr`; member s trains on x[idxs[s]]."""
        set_lr(self.opt, lr)
        idx = h2d(torch.stack(idxs), self.device)  # one copy, one gather for all
        return fused_step(self.fm, self.methods, self.opt, list(x[idx]), list(y[idx]),
                          self.gens, self.aug_gens, self.cfg)

    def predict(self, images: torch.Tensor) -> np.ndarray:
        return predict_fused(self.fm, images, self.cfg)

    def snapshot(self, s: int) -> dict:
        return self.fm.snapshot(s)

    def load(self, s: int, state: dict) -> None:
        self.fm.load(s, state)

    def state_dict(self) -> dict:
        """What a resumed group needs (bench.train.resume): stacked weights, optimiser,
        every member's generators."""
        return {"params": self.fm.params, "buffers": self.fm.buffers,
                "opt": self.opt.state_dict(),
                "gens": [g.get_state() for g in (*self.gens, *self.aug_gens)]}

    @torch.no_grad()
    def load_state_dict(self, state: dict) -> None:
        # copied in place: the stacked tensors keep their addresses (optimiser,
        # torch.compile's static inputs)
        for name, ours in (("params", self.fm.params), ("buffers", self.fm.buffers)):
            for k, v in ours.items():
                v.copy_(state[name][k])
        self.opt.load_state_dict(state["opt"])
        for g, s in zip((*self.gens, *self.aug_gens), state["gens"], strict=True):
            g.set_state(s)


def train_fused(models: list, methods: list, cfg: TrainConfig, data, seeds: list[int],
                device="cpu", *, progress: bool = True, on_step=None,
                state=None, how: str = "vmap") -> list[TrainResult]:
    """Train models[s] with methods[s] under seeds[s], all at once, in the one
    training loop (bench.train.loop.run_loop). Returns one TrainResult per
    seed; train_seconds is the group's wall time shared equally. `state`:
    the group's bench.train.resume.CycleState (resumed from, saved each cycle).
    `how`: the group's model, vmap or cells (group_model)."""
    stepper = FusedStepper(models, methods, cfg, seeds, device, how)
    return run_loop(stepper, cfg, data, progress, on_step, state)
