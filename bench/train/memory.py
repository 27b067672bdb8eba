"""How much GPU memory one run of a fused group takes, estimated before any
run starts, and how many such runs fit in a GPU's free memory: the group
size `bench run --fuse` cuts to when `--fuse-max` is not given
(bench.sweep.fusecap; docs/sweeps.md, "Fused groups").

The estimate is a rule, not a measurement (no GPU was at hand when it was
written; docs/speed.md says which figures are measured):

    per run = 16 B x parameters          (float32 weights, gradients, momentum,
                                          one update temporary)
            + 3 x the training batch's activations
                                         (outputs kept for backward, their
                                          gradients, a captured graph's pool)
            + 3 x the largest activation of an evaluation batch
                                         (no_grad: a few layers live at once)
            + 256 MiB                    (cuDNN workspace, staged epoch fields,
                                          the allocator's rounding)
    runs    = floor(free x (1 - 0.15) / per run), at least 1

the 15% held back for the group's shared images on the card, CUDA's own use
and fragmentation. Parameters and activations are counted on the meta device
(no memory, no weights read): the model built as the run builds it, one
forward of a batch of the run's size; activations are the outputs of its leaf
modules, in float32.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

from bench.train.backbones import build_model

BYTES_PER_PARAM = 16
ACTIVATION_COPIES = 3
EVAL_COPIES = 3
FIXED_PER_RUN = 256 * 2**20
RESERVE = 0.15
CLASSES = 10  # a placeholder: the heads' few parameters barely depend on it


@dataclass(frozen=True)
class RunShape:
    """What a run's memory depends on."""
    backbone: str
    size: int  # training px
    heads: int
    batch: int
    eval_batch: int
    impl: str = "torchvision"
    arch: tuple = ()


@lru_cache(maxsize=None)
def counted(backbone: str, size: int, heads: int, batch: int, impl: str,
            arch: tuple) -> tuple[int, int, int]:
    """(parameters, activation elements of one training batch, elements of
    its largest activation), from one forward on the meta device."""
    seen = [0, 0]

    def hook(_module, _inputs, out):
        if isinstance(out, torch.Tensor):
            seen[0] += out.numel()
            seen[1] = max(seen[1], out.numel())
    with torch.device("meta"):
        model, _ = build_model(backbone, size, heads, CLASSES, impl=impl, arch=arch)
        params = sum(p.numel() for p in model.parameters())
        hooks = [m.register_forward_hook(hook) for m in model.modules()
                 if next(m.children(), None) is None]
        model.train()
        model(torch.empty(batch, 3, size, size))
    for h in hooks:
        h.remove()
    return params, seen[0], seen[1]


def run_bytes(shape: RunShape, count=counted) -> int:
    """The module's rule for one run (`count`: counted, or a stand-in)."""
    params, acts, largest = count(shape.backbone, shape.size, shape.heads, shape.batch,
                                  shape.impl, shape.arch)
    eval_largest = largest * shape.eval_batch // shape.batch
    return (BYTES_PER_PARAM * params + ACTIVATION_COPIES * 4 * acts
            + EVAL_COPIES * 4 * eval_largest + FIXED_PER_RUN)


def runs_that_fit(free_bytes: int, per_run: int, reserve: float = RESERVE) -> int:
    """How many runs of `per_run` bytes fit in `free_bytes`, some held back; at least 1."""
    return max(1, int(free_bytes * (1 - reserve)) // max(per_run, 1))
