"""Several training processes side by side on one device: does it pay?

    python -m bench.speed.sidebyside [--device cuda] [--processes 1,2,3]
        [--dataset pathmnist] [--backbone resnet50] [--heads 4] [--members 5]
        [--variant bf16] [--steps 30] [--warmup 5] [--timeout-s 120] [--out FILE]

`bench run --jobs-per-gpu K` puts K runs (or fused groups) on one GPU, each in
its own process. At batch 8 one process leaves the GPU idle while its CPU
thread launches kernels; a second process can fill those gaps, so K processes
may train more images per second together than one does. This times exactly
that: for each K, K processes build the same job as bench.speed.gpuplan (synthetic
data of the real shapes, the harness's own step), warm up, wait for each
other, and time the same number of steps. The table gives each process's
ms/step, the images/s of all K together, and the ratio to K = 1.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from dataclasses import asdict

import torch
from tabulate import tabulate

from bench.core.device import check_device, default_device
from bench.core.errors import BenchError, choices_error
from bench.speed import gpuplan as G
from bench.speed.steptime import measure

VARIANTS = ("fp32", "bf16")


def make_job(dataset: str, backbone: str, heads: int, members: int, variant: str,
             image_size: int = 0):
    """The gpuplan job of that cell: one run (members 1) or a seed group."""
    if variant not in VARIANTS:
        raise choices_error("variant", variant, VARIANTS)
    s = G.Settings(device="cpu", datasets=(dataset,), backbones=(backbone,), heads=(heads,),
                   strategies=("single",) if members == 1 else ("seeds",),
                   seeds=max(members, 1), image_size=image_size)
    G.check(s)
    path = "single" if members == 1 else "fused"
    return next(j for j in G.plan(s) if j.path == path and j.variant == variant)


def _child(job, device, steps, warmup, threads, barrier, queue) -> None:
    """One process: build, warm up, wait for the others, time `steps` steps."""
    try:
        torch.set_num_threads(threads)
        m = measure(job, device, steps, warmup, job.cfg.batch_size, float("inf"),
                    flops=False, on_ready=lambda: barrier.wait(timeout=600))
        queue.put({"pid": os.getpid(), "ms_step": m["ms_step"]})
    except Exception as err:  # noqa: BLE001 - reported by the parent
        barrier.abort()  # the others must not wait for this one
        queue.put({"pid": os.getpid(), "error": f"{type(err).__name__}: {err}"})


def run_side_by_side(job, device: str, k: int, steps: int, warmup: int,
                     timeout_s: float) -> dict:
    """K processes timing `job` at once -> per-process ms/step and images/s of all."""
    ctx = mp.get_context("spawn")  # CUDA cannot be forked
    barrier, queue = ctx.Barrier(k), ctx.Queue()
    threads = max(1, (os.cpu_count() or 1) // k)  # as the local executor shares cores
    procs = [ctx.Process(target=_child, args=(job, device, steps, warmup, threads, barrier,
                                              queue)) for _ in range(k)]
    for p in procs:
        p.start()
    deadline, outs = time.monotonic() + timeout_s, []
    try:
        while len(outs) < k:
            outs.append(queue.get(timeout=max(0.1, deadline - time.monotonic())))
    except Exception:  # noqa: BLE001 - queue.Empty: a process hung or died
        outs.append({"error": f"no result within {timeout_s:.0f} s"})
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
    errors = [o["error"] for o in outs if "error" in o]
    if errors:
        return {"processes": k, "error": errors[0]}
    ms = [o["ms_step"] for o in outs]
    images = job.members * job.cfg.batch_size
    return {"processes": k, "ms_step": ms,
            "images_per_s": sum(1000.0 * images / t for t in ms)}


def table(rows: list) -> str:
    base = next((r["images_per_s"] for r in rows if r["processes"] == 1 and "error" not in r),
                None)
    out = []
    for r in rows:
        if "error" in r:
            out.append([r["processes"], "-", "-", "-", r["error"][:80]])
            continue
        ratio = "-" if base is None else f"{r['images_per_s'] / base:.2f}x"
        out.append([r["processes"], " ".join(f"{t:.2f}" for t in r["ms_step"]),
                    f"{r['images_per_s']:.0f}", ratio, ""])
    return tabulate(out, headers=["processes", "ms/step each", "img/s all", "vs 1", "error"])


def parse_args(argv=None):
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m bench.speed.sidebyside",
                                description=__doc__.split("\n")[0])
    p.add_argument("--device", default=default_device())
    p.add_argument("--processes", default="1,2,3", help="comma list of K")
    p.add_argument("--dataset", default="pathmnist")
    p.add_argument("--backbone", default="resnet50")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--members", type=int, default=5, help="1 = one run; more = a seed group")
    p.add_argument("--variant", default="bf16")
    p.add_argument("--image-size", type=int, default=0)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--timeout-s", type=float, default=120.0, help="per K")
    p.add_argument("--out", default="")
    return p.parse_args(argv)


def _processes(text: str) -> list[int]:
    try:
        ks = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        ks = []
    if not ks or min(ks) < 1:
        raise BenchError(f"--processes {text}: expected a comma list of ints >= 1, e.g. 1,2,3")
    return ks


def main(argv=None) -> int:
    a = parse_args(argv)
    try:
        ks = _processes(a.processes)
        check_device(a.device)
        job = make_job(a.dataset, a.backbone, a.heads, a.members, a.variant, a.image_size)
    except BenchError as err:
        print(f"bench.speed.sidebyside: error: {err}", file=sys.stderr)
        return 2
    print(f"{job.dataset} {job.size}px {job.backbone} {job.heads} heads, "
          f"{'one run' if job.members == 1 else f'fused x{job.members}'}, {job.variant}, "
          f"batch {job.cfg.batch_size}, {a.steps} timed steps after {a.warmup} warm-up, "
          f"device {a.device}, synthetic data of the real shapes", flush=True)
    rows = []
    for k in ks:
        rows.append(run_side_by_side(job, a.device, k, a.steps, a.warmup, a.timeout_s))
        print(f"K={k}: {rows[-1]}", flush=True)
        if a.out:
            with open(a.out, "w") as f:
                json.dump({"job": asdict(job), "rows": rows}, f, indent=1, default=str)
    print(table(rows))
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
