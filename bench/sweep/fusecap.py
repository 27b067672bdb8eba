"""`--fuse` without `--fuse-max` on GPUs: every fused group cut to as many
runs as one GPU's free memory holds, by bench.train.memory's estimate for
the group's runs (backbone, training size, heads, batch); an explicit
`--fuse-max N` wins. On a CPU, or where the free memory cannot be read,
groups stay whole, as before. The sweep says each size it chose in one line.
"""
from __future__ import annotations

import os
import subprocess
import sys

from bench.methods import create_method
from bench.train.backbones import model_arch
from bench.train.memory import RunShape, run_bytes, runs_that_fit

GIB = 2**30


def free_memory(gpu: str) -> int | None:
    """Free bytes on GPU `gpu` (as CUDA_VISIBLE_DEVICES names it), asked in a
    short child process: the sweep's own process must not start CUDA (a
    context here would hold memory on the card for the whole sweep). None if
    it cannot be read."""
    code = "import torch; print(torch.cuda.mem_get_info()[0])"
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, "CUDA_VISIBLE_DEVICES": gpu}, timeout=120)
        return int(done.stdout.split()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def spec_shape(spec) -> RunShape:
    """What a grid run's memory depends on (bench.sweep.grid.RunSpec)."""
    method = create_method(spec.method, dict(spec.method_overrides))
    t = spec.train
    size = spec.sizes[1] if spec.sizes else (t.image_size or 224)  # unknown: the larger size
    # a method that feeds more images a step than the batch (RankMixup: clean and
    # mixed, 2B) keeps that many activations
    batch = t.batch_size * getattr(method, "batch_multiple", 1)
    return RunShape(spec.backbone, size, method.heads, batch, t.eval_batch_size,
                    t.backbone_impl, model_arch(method))


def group_limit(fuse_max: int | None, gpus: list, jobs_per_gpu: int = 1, free=free_memory,
                estimate=run_bytes, say=lambda text: print(f"bench: {text}", file=sys.stderr)):
    """fuse_groups' `max_size`: the user's --fuse-max; else on GPUs a function
    group -> runs that fit in one GPU's free memory (shared by `jobs_per_gpu`
    runs at once); else None (groups whole). `free(gpu)` and `estimate(shape)`
    are the module's functions or stand-ins (tests)."""
    if fuse_max is not None or not gpus:
        return fuse_max
    total = free(gpus[0])
    if total is None:
        say(f"fused groups kept whole: the free memory of GPU {gpus[0]} could not be read "
            "(--fuse-max N cuts them)")
        return None
    share, chosen = total // max(jobs_per_gpu, 1), {}

    def limit(group: list) -> int:
        shape = spec_shape(group[0])
        if shape not in chosen:
            per_run = estimate(shape)
            chosen[shape] = runs_that_fit(share, per_run)
            say(f"fused groups of {shape.backbone} at {shape.size} px, {shape.heads} head(s): "
                f"at most {chosen[shape]} runs ({share / GIB:.1f} GiB free per job on GPU "
                f"{gpus[0]}, about {per_run / GIB:.2f} GiB a run); --fuse-max N to choose")
        return chosen[shape]
    return limit
