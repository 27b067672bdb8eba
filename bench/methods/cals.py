"""CALS: class-adaptive label smoothing by an augmented Lagrangian (Liu, Rony,
Galdran, Dolz and Ben Ayed, CVPR 2023), one head, as the authors' code
computes it (github by-liu/CALS: calibrate/lagrangian/aug_lagrangian_class.py
`AugLagrangianClass`, penalty.py `phr`, engine/distributed_lagrangian_trainer.py
for when the multipliers move). Its updates are driven by the loop's
validation hook (bench.methods.adaptive).

**Loss.** Logits z [B, K], margin m; one constraint per image and class,
normalised by the margin (their `normalize: True`):

    h_nk = (max_j z_nj - z_nk - m) / m

(-1 on the top class itself). With per-class multipliers lambda_k and
penalty parameters rho_k, the PHR penalty of x = lambda + rho h:

    P(h; lambda, rho) = (x^2 - lambda^2) / (2 rho)   if x >= 0
                        -lambda^2 / (2 rho)          otherwise

    loss = CE(z, y) + mean_nk P(h_nk; lambda_k, rho_k)

(a mean over images *and* classes; the gradient flows through the max too).

**Update, after every epoch** (their lambd_step 1), on the validation split
with the multipliers of the epoch just trained (N images):

    lambda_k <- clip(mean_n clip(max(lambda_k + rho_k h_nk, 0), lo, hi), lo, hi)

(P's derivative in h, clipped per image, averaged, clipped again; lo, hi =
lambd_min, lambd_max). The mean constraint c_k = mean_n h_nk is kept every
epoch; after every rho_step-th epoch (1-based epoch count over the whole
run) that has a previous epoch's c:

    rho_k <- clip(gamma rho_k if c_k > tau max(c_prev_k, 0) else rho_k, rho_min, rho_max)

Start: lambda_k = lambd_min, rho_k = rho_min. The harness's validation
logits are float32 (theirs ran under AMP) and its epoch count runs over
every cycle.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.core.errors import BenchError
from bench.core.settings import ge, gt, setting

from .adaptive import AdaptiveMethod
from .base import METHODS


@dataclass(frozen=True)
class CALSParams:
    # margin 10: the README's training commands (Tiny-ImageNet, ImageNet-LT:
    # `lag.margin=10`); the rest: configs/lag/aug_lagrangian_class.yaml
    # (penalty phr, lambd 1e-6..1e6 every epoch, rho 1, rho_step 10, gamma
    # 1.2, tao 0.9) and the class default rho_max = 10 (the config sets none)
    cals_margin: float = setting(10.0, "cals: logit distance to the max left unconstrained",
                                 range=gt(0))
    cals_lambda_min: float = setting(1e-6, "cals: multipliers' lower clip and start", range=ge(0))
    cals_lambda_max: float = setting(1e6, "cals: multipliers' upper clip", range=ge(0))
    cals_rho_min: float = setting(1.0, "cals: penalty parameter's start and lower clip",
                                  range=gt(0))
    cals_rho_max: float = setting(10.0, "cals: penalty parameter's upper clip", range=gt(0))
    cals_rho_step: int = setting(10, "cals: epochs between penalty-parameter updates "
                                 "(0: never)", range=ge(0))
    cals_gamma: float = setting(1.2, "cals: growth factor of a penalty parameter", range=ge(1))
    cals_tau: float = setting(0.9, "cals: constraint improvement expected between epochs",
                              range=ge(0))


def constraints(z, margin: float):
    """h [B, K] of the module text (torch or numpy)."""
    return (z.max(-1, keepdims=True) - z - margin) / margin if isinstance(z, np.ndarray) \
        else (z.amax(dim=-1, keepdim=True) - z - margin) / margin


def phr(h, lam, rho):
    """P(h; lambda, rho) elementwise (torch; lambda, rho broadcast over images)."""
    # torch on demand: `bench list` imports every method module (the METHODS registry)
    import torch

    x = lam + rho * h
    return torch.where(x >= 0, (x * x - lam * lam) / (2 * rho), -(lam * lam) / (2 * rho))


def cals_loss(z, y, lam, rho, margin: float):
    """CE + mean_nk P(h_nk; lambda_k, rho_k) on [B, K] logits."""
    # torch on demand: `bench list` imports every method module (the METHODS registry)
    import torch
    import torch.nn.functional as F

    # the penalty in at least float32 (bf16 logits under autocast), as CE is
    zf = z.to(torch.promote_types(z.dtype, torch.float32))
    return F.cross_entropy(z, y) + phr(constraints(zf, margin), lam.to(zf.dtype),
                                       rho.to(zf.dtype)).mean()


def next_multipliers(h: np.ndarray, state: dict, epoch: int, p: CALSParams) -> dict:
    """The update rule of the module text: h [N, K] of the validation split,
    `state` the current lambda, rho, c_prev, has_prev; -> the next state."""
    lam, rho = state["lambda"], state["rho"]
    grad = np.clip(np.maximum(lam + rho * h, 0.0), p.cals_lambda_min, p.cals_lambda_max)
    new_lam = np.clip(grad.mean(axis=0), p.cals_lambda_min, p.cals_lambda_max)
    c = h.mean(axis=0)
    new_rho = rho
    if p.cals_rho_step and (epoch + 1) % p.cals_rho_step == 0 and state["has_prev"][0]:
        grow = c > p.cals_tau * np.maximum(state["c_prev"], 0.0)
        new_rho = np.clip(np.where(grow, p.cals_gamma * rho, rho), p.cals_rho_min, p.cals_rho_max)
    return {"lambda": new_lam, "rho": new_rho, "c_prev": c, "has_prev": np.ones(1)}


class CALS(AdaptiveMethod):
    display_name = "CALS"
    Params = CALSParams

    def check_params(self) -> None:
        super().check_params()
        p = self.params
        for lo, hi, what in ((p.cals_lambda_min, p.cals_lambda_max, "cals_lambda"),
                             (p.cals_rho_min, p.cals_rho_max, "cals_rho")):
            if lo > hi:
                raise BenchError(f"cals: {what}_min={lo} must be at most {what}_max={hi}")

    def initial_state(self, num_classes: int) -> dict:
        p = self.params
        return {"lambda": np.full(num_classes, float(p.cals_lambda_min)),
                "rho": np.full(num_classes, float(p.cals_rho_min)),
                "c_prev": np.zeros(num_classes), "has_prev": np.zeros(1)}

    def update(self, logits, labels, epoch: int) -> dict:
        # the single head's logits in float64 (their constraints read logits, not probabilities)
        h = constraints(np.asarray(logits, dtype=np.float64)[:, 0], self.params.cals_margin)
        return next_multipliers(h, self.host_state(), epoch, self.params)

    def loss(self, logits, target):
        state = self.live(logits)
        return cals_loss(logits[:, 0], target, state["lambda"], state["rho"],
                         self.params.cals_margin)


@METHODS.register("cals", "CALS: CE + class-wise augmented-Lagrangian logit-margin penalty, "
                  "margin 10 (Liu et al. 2023; --method recent)")
def cals() -> CALS:
    return CALS("cals")
