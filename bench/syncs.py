"""Does a training step make the CPU wait for the GPU? Count it.

    python -m bench.syncs [--device cuda] [--backbone resnet18] [--size 28] [--steps 3]

At batch 8 the GPU stays busy only if the CPU can queue step k+1 while step k
runs. Any host-device synchronisation inside the step (a blocking copy, an
`.item()`, a boolean-mask index, `nonzero`) drains the queue every step. This
runs every training method for a few steps through the harness's real step
(bench.trainer.train_step, and bench.fused.fused_step for a 2-member group)
with CUDA's sync debug mode on, and counts the synchronisations it reports
per step. The trainer checks the loss once per epoch, outside the step, so the
expected count is 0 everywhere. On the CPU the steps still run (the plumbing
is checked) but there is nothing to count.
"""
from __future__ import annotations

import argparse
import copy
import sys
import warnings

import torch
from tabulate import tabulate

from .backbones import build_model
from .config import PROFILES
from .errors import BenchError
from .fused import FusedModel, fused_step
from .methods import create_method, training_methods
from .trainer import AUG_STREAM, epoch_batches, prepare_model, train_step
from .transfer import h2d

NUM_CLASSES = 9  # PathMNIST's: enough classes for 4 multi-loss heads


def _batches(n_images: int, steps: int, gen):
    """`steps` batches of 8 indices (as the trainer cuts them), cycling epochs."""
    out = []
    while len(out) < steps:
        out += epoch_batches(n_images, 8, gen)
    return out[:steps]


def _setup(name, backbone, size, seed, device):
    method = create_method(name)
    method.setup(NUM_CLASSES, seed)
    torch.manual_seed(seed)
    model = build_model(backbone, size, method.heads, NUM_CLASSES)[0]
    return method, model


def single_steps(name, backbone, size, steps, device, data):
    """One run's step, exactly as bench.trainer.train takes it."""
    cfg = PROFILES["paper"]
    method, model = _setup(name, backbone, size, 0, device)
    model, step_model = prepare_model(model, cfg, device)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr)
    gen, aug_gen = torch.Generator().manual_seed(0), torch.Generator().manual_seed(AUG_STREAM)
    x, y = data
    model.train()

    def step(idx):
        idx = h2d(idx, device)
        return train_step(step_model, method, opt, x[idx], y[idx], gen, cfg, aug_gen)

    return step, _batches(len(y), steps, gen)


def fused_steps(name, backbone, size, steps, device, data):
    """A fused group of two seeds, exactly as bench.fused.train_fused steps it."""
    cfg = PROFILES["paper"]
    pairs = [_setup(name, backbone, size, s, device) for s in (0, 1)]
    methods = [copy.deepcopy(m) for m, _ in pairs]
    fm = FusedModel([m for _, m in pairs], device)
    opt = torch.optim.SGD(fm.params.values(), lr=cfg.lr)
    gens = [torch.Generator().manual_seed(s) for s in (0, 1)]
    aug_gens = [torch.Generator().manual_seed(s + AUG_STREAM) for s in (0, 1)]
    x, y = data
    fm.train(True)

    def step(idxs):
        idx = h2d(torch.stack(idxs), device)
        return fused_step(fm, methods, opt, list(x[idx]), list(y[idx]), gens, aug_gens, cfg)

    return step, list(zip(*(_batches(len(y), steps, g) for g in gens)))


def count(step, batches, device, sites: set | None = None) -> int | None:
    """Synchronisations CUDA reports over `batches` after one warm-up step
    (first calls may sync while allocating or choosing kernels); None on CPU.
    `sites`, if given, collects 'file:line' of the Python code that synced."""
    step(batches[0])
    if device.type != "cuda":
        for b in batches[1:]:
            step(b)
        return None
    torch.cuda.synchronize(device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for b in batches[1:]:
                step(b)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize(device)
    hits = [w for w in caught if "synchroniz" in str(w.message)]
    if sites is not None:
        sites.update(f"{w.filename}:{w.lineno}" for w in hits)
    return len(hits)


def check(device="cpu", backbone="resnet18", size=28, steps=3, methods=None,
          sites: set | None = None, on_row=None) -> list[dict]:
    """One row per method: syncs per step of a single run and of a fused pair.
    `on_row(row)` sees each row as it is done (a killed check keeps its rows)."""
    device = torch.device(device)
    gen = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (64, 3, size, size), dtype=torch.uint8, generator=gen)
    labels = torch.randint(0, NUM_CLASSES, (64,), generator=gen)
    data = (images.to(device), labels.to(device))
    rows = []
    for name in methods or training_methods():
        row = {"method": name}
        for path, build in (("single", single_steps), ("fused x2", fused_steps)):
            step, batches = build(name, backbone, size, steps + 1, device, data)
            n = count(step, batches, device, sites)
            row[path] = "n/a (cpu)" if n is None else n / steps
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.syncs", description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--backbone", default="resnet18")
    p.add_argument("--size", type=int, default=28)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--methods", default="", help="comma list (default: every training method)")
    a = p.parse_args(argv)
    methods = [m for m in a.methods.split(",") if m] or None
    sites: set = set()
    try:
        if a.device.startswith("cuda") and not torch.cuda.is_available():
            raise BenchError(f"--device {a.device}: no CUDA device is visible; use --device cpu")
        rows = check(a.device, a.backbone, a.size, a.steps, methods, sites,
                     on_row=lambda r: print("  ".join(f"{k} {v}" for k, v in r.items()),
                                            flush=True))
    except BenchError as err:
        print(f"bench.syncs: error: {err}", file=sys.stderr)
        return 2
    print(f"host-device synchronisations per training step ({a.device}, {a.backbone}, "
          f"{a.size} px, batch 8, {a.steps} steps after a warm-up step)")
    print(tabulate(rows, headers="keys", tablefmt="github"))
    bad = [r["method"] for r in rows if any(isinstance(v, float) and v > 0 for v in r.values())]
    if bad:
        print(f"steps that synchronise: {', '.join(bad)}")
        print("where (Python lines that synced):\n  " + "\n  ".join(sorted(sites)))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
