"""Several runs of one architecture (seeds, or methods) trained at once, as one fused model.

At batch 8 a GPU is mostly idle between kernel launches; training S seeds in
lock-step puts S x 8 images through every launch. The S models' parameters
and buffers are stacked along a new leading dimension (torch.func's
stack_module_state) and the model runs under vmap(functional_call), which
turns every convolution into one grouped convolution over the seeds.

Members may differ in method too (bench.train.groups: `--fuse methods`) as
long as they share the architecture (same head count) and training config.
Each seed keeps everything it has when trained alone (bench.train.loop.train):
its own initial weights, batch order and method draws (`seed`), augmentation
draws (`seed + AUG_STREAM`), and its own best-cycle checkpoint. The summed
loss has per-seed gradients (seeds share no parameter), and plain SGD is
elementwise, so a fused run equals the run alone up to floating-point
reassociation (tests/test_fused.py). Layers that draw from the global RNG
(dropout) would draw differently; the harness's backbones have none active.
"""
from __future__ import annotations

import copy
import math
import time

import numpy as np
import torch
from torch.func import functional_call, stack_module_state, vmap
from tqdm import tqdm

from bench.train.augment import apply_ops, augment_batch, sample_params
from bench.core.config import TrainConfig
from bench.core.errors import BenchError
from bench.train.backbones import vmap_safe_drop_path
from bench.train.protocol import checkpoint_auc, to_model_size
from bench.core.transfer import h2d
from bench.train.loop import (AUG_STREAM, TrainResult, autocast, check_finite, cosine_lr,
                      epoch_batches, make_sgd, normalise, set_backends, steps_per_epoch,
                      sync, to_device_images, val_score)


class FusedModel:
    """S copies of one architecture with stacked parameters [S, ...]."""

    def __init__(self, models: list, device):
        if not models:
            raise BenchError("fused training needs at least one model")
        # every member draws its own drop-path masks under vmap (backbones.RowDropPath)
        models = [vmap_safe_drop_path(m).to(device) for m in models]
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
    """Per-seed, per-head logits [S, N, M, K], evaluation mode, large batches.
    A call puts eval_batch_size images through the group in total (each member
    sees eval_batch_size // S), so 25 members at 224 px fit where one run does."""
    fm.train(False)
    chunk = max(1, cfg.eval_batch_size // fm.size)
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
        losses = torch.stack([m.loss(logits[s], b[1]) for s, (m, b)
                              in enumerate(zip(methods, batches))])
    opt.zero_grad(set_to_none=True)
    losses.sum().backward()  # seeds share no parameter: per-seed gradients
    opt.step()
    return losses.detach()


def train_fused(models: list, methods: list, cfg: TrainConfig, data, seeds: list[int],
                device="cpu", progress: bool = True, on_step=None) -> list[TrainResult]:
    """Train models[s] with methods[s] under seeds[s], all at once. Returns one
    TrainResult per seed; train_seconds is the group's wall time shared equally.
    `on_step(step)`, if given, is called after every step (sweep heartbeats)."""
    device = torch.device(device)
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    aug_gens = [torch.Generator().manual_seed(s + AUG_STREAM) for s in seeds]
    set_backends(cfg, device)
    fm = FusedModel(models, device)
    if cfg.compile:
        fm.compile(cfg.compile_mode)
    xs = {s: to_device_images(data.split(s).images, device) for s in ("train", "val", "test")}
    y_train = torch.from_numpy(data.train.labels).to(device)
    opt = make_sgd(fm.params.values(), cfg)
    cycle_steps = steps_per_epoch(len(y_train), cfg.batch_size, cfg.drop_last) * cfg.epochs_per_cycle
    best = [(-math.inf, None)] * len(seeds)
    aucs, step, seen, seconds = [[] for _ in seeds], 0, 0, 0.0
    bar = tqdm(total=cycle_steps * cfg.cycles, desc=f"fused x{len(seeds)}", leave=False,
               disable=not progress, unit="step")
    for cycle in range(cfg.cycles):
        t0 = time.perf_counter()
        for epoch in range(cfg.epochs_per_cycle):
            fm.train(True)
            losses, first = [], step
            orders = [epoch_batches(len(y_train), cfg.batch_size, g, cfg.drop_last) for g in gens]
            for idxs in zip(*orders):
                for group in opt.param_groups:
                    group["lr"] = cosine_lr(step, cycle_steps, cfg.lr, cfg.eta_min)
                idx = h2d(torch.stack(idxs), device)  # one copy, one gather for all
                losses.append(fused_step(fm, methods, opt, list(xs["train"][idx]),
                                         list(y_train[idx]), gens, aug_gens, cfg))
                step, seen = step + 1, seen + idx.shape[1]
                bar.update()
                if on_step is not None:
                    on_step(step)
            check_finite(losses, first, cycle, epoch, cfg.lr)
        sync(device)
        seconds += time.perf_counter() - t0
        best = _keep_best(fm, predict_fused(fm, xs["val"], cfg), data.val.labels, cycle,
                          best, aucs, cfg.checkpoint_score)
        bar.set_postfix(val_auc=" ".join(f"{a[-1]:.3f}" for a in aucs))
    bar.close()
    return _results(fm, best, aucs, xs, cfg, seconds, seen, step)


def _keep_best(fm, val_logits, val_labels, cycle, best, aucs, rule="released"):
    """Per member: keep the checkpoint with the best validation AUC, and its
    validation logits, under train()'s rule (strictly better wins; NaN never)."""
    out = list(best)
    for s in range(fm.size):
        auc = checkpoint_auc(val_logits[s], val_labels, rule)
        aucs[s].append(auc)
        if out[s][1] is None or val_score(auc) > out[s][0]:
            out[s] = (val_score(auc), (cycle + 1, fm.snapshot(s), val_logits[s]))
    return out


def _results(fm, best, aucs, xs, cfg, seconds, seen, steps) -> list[TrainResult]:
    for s, (_, (_, state, _)) in enumerate(best):
        fm.load(s, state)
    val = [b[1][2] for b in best]  # kept with each member's best checkpoint
    t0 = time.perf_counter()
    test = predict_fused(fm, xs["test"], cfg)
    infer_ms = 1000 * (time.perf_counter() - t0) / max(test.shape[0] * test.shape[1], 1)
    share = seconds / fm.size  # the group's wall time, shared equally
    return [TrainResult(val_logits=val[s], test_logits=test[s], best_cycle=best[s][1][0],
                        cycle_val_auc=aucs[s], train_seconds=share,
                        train_images_per_s=seen / max(share, 1e-9), steps=steps,
                        infer_ms_per_image=infer_ms)
            for s in range(fm.size)]
