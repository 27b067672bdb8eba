"""Does a training step make the CPU wait for the GPU? Count it.

    python -m bench.speed.syncs [--device cuda] [--backbone resnet18] [--size 28] [--steps 3]

At batch 8 the GPU stays busy only if the CPU can queue step k+1 while step k
runs. Any host-device synchronisation inside the step (a blocking copy, an
`.item()`, a boolean-mask index, `nonzero`) drains the queue every step. This
runs every training method for a few steps through the training loop's own
step (bench.speed.steptime: SingleStepper.step, FusedStepper.step for a 2-member group)
with CUDA's sync debug mode on, and counts the synchronisations it reports
per step. The trainer checks the loss once per epoch, outside the step, so the
expected count is 0 everywhere. On the CPU the steps still run (the plumbing
is checked) but there is nothing to count.
"""
from __future__ import annotations

import argparse
import sys
import warnings

import torch
from tabulate import tabulate

from bench.core.device import check_device, default_device
from bench.train.backbones import build_model, model_arch
from bench.core.config import PROFILES
from bench.core.errors import BenchError
from bench.core.registry import expand_names
from bench.methods import METHOD_GROUPS, METHODS, create_method, every_method
from bench.speed.steptime import Job, member_methods, stepper, synthetic

# CUDA's sync debug mode reports each synchronisation with this text. Its own
# one-time notice ("Synchronization debug mode is a prototype feature ...")
# is no synchronisation: on the H100 it was counted as one in the first method.
SYNC_WARNING = "called a synchronizing CUDA operation"
NUM_CLASSES = 9  # PathMNIST's: enough classes for 4 multi-loss heads
PATHS = {"single": 1, "fused x2": 2}  # row column -> members trained at once


def steps_of(name, backbone, size, n_steps, device, members=1):
    """run_step(i) for i < n_steps: the harness's own step (bench.speed.steptime's,
    as bench.speed.gpuplan times it) of one run, or of a fused group of `members` seeds."""
    job = Job("synthetic", backbone, size, NUM_CLASSES, create_method(name).heads,
              "single" if members == 1 else "fused", (name,) * members, "fp32",
              PROFILES["paper"])
    methods = member_methods(job)
    torch.manual_seed(0)
    # the method's own model (MC-Dropout's passes, an efficient ensemble's members)
    base = build_model(backbone, size, job.heads, NUM_CLASSES, arch=model_arch(methods[0]))[0]
    x, y = synthetic(n_steps * job.cfg.batch_size, size, NUM_CLASSES, device)
    return stepper(job, base, methods, x, y, device)[0]


def count(run_step, n_steps: int, device, sites: set | None = None) -> int | None:
    """Synchronisations CUDA reports over steps 1..n_steps-1 after step 0, a
    warm-up (first calls may sync while allocating or choosing kernels); None
    on CPU. `sites`, if given, collects 'file:line' of the Python code that synced."""
    run_step(0)
    if device.type != "cuda":
        for i in range(1, n_steps):
            run_step(i)
        return None
    torch.cuda.synchronize(device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for i in range(1, n_steps):
                run_step(i)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize(device)
    hits = [w for w in caught if is_sync(str(w.message))]
    if sites is not None:
        sites.update(f"{w.filename}:{w.lineno}" for w in hits)
    return len(hits)


def is_sync(message: str) -> bool:
    """Is this warning a synchronisation CUDA's sync debug mode reported?"""
    return SYNC_WARNING in message


def check(device="cpu", backbone="resnet18", size=28, steps=3, methods=None,
          sites: set | None = None, on_row=None) -> list[dict]:
    """One row per method: syncs per step of a single run and of a fused pair.
    `on_row(row)` sees each row as it is done (a killed check keeps its rows)."""
    device = torch.device(device)
    rows = []
    for name in methods or every_method():
        row = {"method": name}
        for path, members in PATHS.items():
            run_step = steps_of(name, backbone, size, steps + 1, device, members)
            n = count(run_step, steps + 1, device, sites)
            row[path] = "n/a (cpu)" if n is None else n / steps
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        allow_abbrev=False, prog="python -m bench.speed.syncs", description=__doc__.split("\n")[0])
    p.add_argument("--device", default=default_device())
    p.add_argument("--backbone", default="resnet18")
    p.add_argument("--size", type=int, default=28)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--methods", default="all",
                   help="comma list, 'all' (every built-in method, the method groups' too) or "
                        "a group ('extra')")
    a = p.parse_args(argv)
    sites: set = set()
    try:
        check_device(a.device)
        # every name checked before the first method runs
        methods = expand_names(a.methods or "all", every_method(), "method", METHODS,
                               aliases={g: list(n) for g, n in METHOD_GROUPS.items()})
        rows = check(a.device, a.backbone, a.size, a.steps, methods, sites,
                     on_row=lambda r: print("  ".join(f"{k} {v}" for k, v in r.items()),
                                            flush=True))
    except BenchError as err:
        print(f"bench.speed.syncs: error: {err}", file=sys.stderr)
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
