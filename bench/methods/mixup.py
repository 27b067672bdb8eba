"""MixUp (Zhang et al. 2018; for calibration Thulasidasan et al. 2019), one head.

lam ~ Beta(alpha, alpha), x' = lam x + (1 - lam) x[perm]; the loss is the
convex mix of the two CE terms: lam CE(z, y) + (1 - lam) CE(z, y[perm]).
alpha = 0 means no mixing (lam = 1), as in the released code.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from bench.core.settings import ge, setting
from bench.core.transfer import h2d

from .base import METHODS, Method

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class MixupParams:
    # Beta(0.2, 0.2), the paper's value (docs/fidelity.md; released code default 0.4)
    alpha: float = setting(0.2, "mixup: Beta(alpha, alpha) mixing; 0 = no mixing", range=ge(0))


def draw_lambda(alpha: float, gen: torch.Generator) -> float:
    """One Beta(alpha, alpha) draw, reproducible from the trainer's generator."""
    if alpha == 0:
        return 1.0
    # torch on demand: `bench list` imports every method module (the METHODS registry)
    import torch

    # numpy has the Beta sampler; seed it from the torch generator so the
    # whole run stays a function of the run seed.
    seed = int(torch.randint(0, 2**62, (1,), generator=gen))
    return float(np.random.default_rng(seed).beta(alpha, alpha))


class Mixup(Method):
    Params = MixupParams
    released_train_size = 150  # train_other.py's --im_size default (docs/fidelity.md)

    def draw(self, n, gen):
        """lam and the pairing permutation, in that order from `gen`. lam and
        1 - lam are taken in float64 (a Python float's arithmetic) and rounded
        to float32 once: what multiplying a float32 tensor by the Python float
        does, so a staged step and a per-step one compute the same bits."""
        # torch on demand: `bench list` imports every method module (the METHODS registry)
        import torch

        lam = draw_lambda(self.params.alpha, gen)
        return {"lam": torch.tensor([lam, 1.0 - lam], dtype=torch.float64).float(),
                "perm": torch.randperm(n, generator=gen)}

    def staged_batch(self, x, y, draws):
        lam, rest = draws["lam"].unbind()
        perm = draws["perm"]
        return lam * x + rest * x[perm], (y, y[perm], lam, rest)

    def loss(self, logits, target):
        # torch on demand: `bench list` imports every method module (the METHODS registry)
        import torch.nn.functional as F

        y_a, y_b, lam, rest = target
        z = logits[:, 0]
        return lam * F.cross_entropy(z, y_a) + rest * F.cross_entropy(z, y_b)


@METHODS.register("mixup", "mixup, Beta(0.2, 0.2), convex mix of the two CE terms")
def mixup() -> Method:
    return Mixup("mixup")
