"""Staging time of one epoch of the graph-safe step: the per-step derivation
(maskaug.derive once per step, as graphstep did before bench.train.staging)
against the one per epoch, in one run, with their ratio.

    python -m bench.speed.staging [--device cpu] [--images 89996] [--size 28]
        [--method sl1h] [--members 1] [--repeat 1] [--threads 0]

Staging is the host's draws and derivations for every step of an epoch plus
the copy into the Stage's buffers (on CUDA the copies are queued and
synchronised before the clock stops). The defaults are a PathMNIST-shaped
epoch: 89,996 training images (synthetic: their pixels are never read while
staging, only their number and size), batch 8, drop_last false: 11,250 steps.
Both paths must stage the same bits (checked, exit status 1 otherwise).
"""
from __future__ import annotations

import argparse
import sys
import time

import torch

from bench.core.config import TrainConfig
from bench.core.device import check_device, device_name
from bench.core.errors import BenchError
from bench.methods import create_method
from bench.train.augment import sample_params
from bench.train.loop import sync
from bench.train.maskaug import derive
from bench.train.staging import Stage, draw_epoch, epoch_batches

CLASSES = 9  # PathMNIST's


def per_step_epoch(orders: list, lrs: list, methods: list, gens: list, aug_gens: list,
                   cfg: TrainConfig, hw: tuple) -> dict:
    """The staging before bench.train.staging: every step drawn and derived
    on its own (one derive call per step), then stacked per batch length.
    The reference the vectorised derivation is held to."""
    steps = []
    for t, idxs in enumerate(zip(*orders)):
        row = {"idx": torch.cat(idxs), "lr": torch.tensor(lrs[t], dtype=torch.float32)}
        if cfg.augment:
            draws = [sample_params(len(i), g) for i, g in zip(idxs, aug_gens)]
            aug = derive(torch.cat([d[0] for d in draws]), torch.cat([d[1] for d in draws]), *hw)
            row.update({f"aug.{k}": v for k, v in aug.items()})
        for s, (m, i, g) in enumerate(zip(methods, idxs, gens)):
            row.update({f"m{s}.{k}": v for k, v in m.draw(len(i), g).items()})
        steps.append(row)
    sizes = [len(i) for i in orders[0]]
    out = {}
    for n in dict.fromkeys(sizes):
        rows = [s for s, size in zip(steps, sizes) if size == n]
        out[n] = {k: torch.stack([s[k] for s in rows]) for k in rows[0]}
    return out


def setup(args, seed: int = 0):
    """(orders, lrs, methods, gens, aug_gens, cfg) of one epoch of `--members` runs."""
    cfg = TrainConfig(drop_last=False)
    gens = [torch.Generator().manual_seed(seed + s) for s in range(args.members)]
    aug_gens = [torch.Generator().manual_seed(seed + s + 1000) for s in range(args.members)]
    methods = []
    for s in range(args.members):
        method = create_method(args.method)
        method.setup(CLASSES, seed + s)
        methods.append(method)
    orders = [epoch_batches(args.images, cfg.batch_size, g, cfg.drop_last) for g in gens]
    lrs = [cfg.lr * (1 - t / len(orders[0])) for t in range(len(orders[0]))]
    return orders, lrs, methods, gens, aug_gens, cfg


def timed(draw, args, device: torch.device):
    """(seconds, staged buffers) of drawing and loading one epoch with `draw`."""
    orders, lrs, methods, gens, aug_gens, cfg = setup(args)
    sync(device)
    t0 = time.perf_counter()
    stages = {}
    for n, fields in draw(orders, lrs, methods, gens, aug_gens, cfg,
                          (args.size, args.size)).items():
        stages[n] = Stage(device, args.members)
        stages[n].load(fields)
    sync(device)
    return time.perf_counter() - t0, {n: s.bufs for n, s in stages.items()}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[n].keys() == b[n].keys() and all(torch.equal(a[n][k], b[n][k]) for k in a[n])
        for n in a)


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        allow_abbrev=False, prog="python -m bench.speed.staging", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--images", type=int, default=89_996)
    p.add_argument("--size", type=int, default=28)
    p.add_argument("--method", default="sl1h")
    p.add_argument("--members", type=int, default=1)
    p.add_argument("--repeat", type=int, default=1, help="best of N of each path")
    p.add_argument("--threads", type=int, default=0,
                   help="torch CPU threads (0: torch's default; 1 on a shared machine)")
    args = p.parse_args(argv)
    if min(args.images, args.size, args.members, args.repeat) < 1 or args.threads < 0:
        p.error("--images, --size, --members and --repeat: whole numbers >= 1; --threads >= 0")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        check_device(args.device)
        create_method(args.method)
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    old = [timed(per_step_epoch, args, device) for _ in range(args.repeat)]
    new = [timed(draw_epoch, args, device) for _ in range(args.repeat)]
    t_old, t_new = min(t for t, _ in old), min(t for t, _ in new)
    equal = same(old[0][1], new[0][1])
    steps = sum(len(b["idx"]) for b in new[0][1].values())
    print(f"{device_name(args.device)}, torch {torch.__version__}: {args.members} x "
          f"{args.method}, {args.images} images of {args.size} px, {steps} steps")
    print(f"staging per step (old): {t_old:.3f} s")
    print(f"staging per epoch (new): {t_new:.3f} s")
    print(f"ratio old/new: {t_old / t_new:.1f}x; staged bits equal: {equal}")
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
