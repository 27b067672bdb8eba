"""The paper's schedule as arithmetic: steps per epoch and the cosine-with-warm-restarts
learning rate (no torch; the speed projection and the sweep's progress use it too)."""
from __future__ import annotations

import math


def cosine_lr(step: int, steps_per_cycle: int, lr: float, eta_min: float) -> float:
    """lr of optimiser step `step` under CosineAnnealingWarmRestarts(T_0=steps_per_cycle)."""
    t = step % steps_per_cycle
    return eta_min + (lr - eta_min) * (1 + math.cos(math.pi * t / steps_per_cycle)) / 2


def steps_per_epoch(n: int, batch_size: int, drop_last: bool = False) -> int:
    """Batches an epoch trains. drop_last (the released loader): only full
    batches (at least one). Otherwise a trailing batch of one image is dropped
    (BatchNorm cannot train on one sample) unless it is the only one."""
    full, rest = divmod(n, batch_size)
    if drop_last and full:
        return full
    return full + (1 if rest > 1 or (rest == 1 and full == 0) else 0)
