"""Dual focal loss (Tao, Dong and Xu, ICML 2023), one head.

With p the softmax of the logits, p_y the label's probability and p_j the
largest probability strictly below p_y (0 when no class is below it):

    DFL = mean_n -(1 - p_y + p_j)^gamma log p_y

as the authors' `DualFocalLoss.forward` computes it (github
Linwei94/DualFocalLoss, dual_focal_loss.py): p_j is the top of the
probabilities masked by `p < p_y` (strict), taken with torch.topk as
theirs (at a tie for p_j the gradient goes to the one entry topk returns),
with gradient through both p_y and p_j. Records made with amax (p_j's
gradient split between tied entries; values the same) keep their hash:
bench/core/codepins.json counts the two as one version, since they part
only at an exact float tie for p_j. Their class sums over the batch by default
(size_average=False); we take the mean like every loss of the harness (a
factor of the batch size, i.e. of the learning rate; docs/methods.md).
"""
from dataclasses import dataclass

from bench.core.settings import ge, setting

from .base import METHODS, Method


@dataclass(frozen=True)
class DualFocalParams:
    # gamma 5: see docs/methods.md ("Recent calibration losses") for its
    # source; the authors' class default is 0 (plain NLL plus the p_j term's 0 power).
    dfl_gamma: float = setting(5.0, "dualfocal: exponent of (1 - p_y + p_j)", range=ge(0))


def dual_focal_loss(z, y, gamma: float):
    """mean_n -(1 - p_y + p_j)^gamma log p_y on [B, K] logits (module text)."""
    # torch on demand: `bench list` imports every method module (the METHODS registry)
    import torch.nn.functional as F

    logp = F.log_softmax(z, dim=1)
    p = logp.exp()
    logp_y = logp.gather(1, y[:, None])
    p_y = logp_y.exp()
    # the classes strictly below the label's probability; a masked-out entry
    # counts 0, so a row with none below gives p_j = 0 as in the authors' topk.
    # topk, not amax: at a tie the gradient goes to the returned index alone,
    # as theirs (amax would split it between the tied entries)
    p_j = (p * (p < p_y).to(p.dtype)).topk(1, dim=1).values.squeeze(1)
    logp_y, p_y = logp_y.squeeze(1), p_y.squeeze(1)
    return (-(1 - p_y + p_j).pow(gamma) * logp_y).mean()


class DualFocal(Method):
    display_name = "DFL"
    Params = DualFocalParams

    def loss(self, logits, target):
        return dual_focal_loss(logits[:, 0], target, self.params.dfl_gamma)


@METHODS.register("dualfocal", "dual focal loss, gamma 5 (Tao et al. 2023; --method recent)")
def dualfocal() -> Method:
    return DualFocal("dualfocal")
