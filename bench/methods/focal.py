"""Focal loss (Lin et al. 2017) and adaptive focal loss FLSD-53 (Mukhoti et
al. 2020), one head; extra baselines the released code also had.

FL = mean_n -(1 - p_y)^gamma log p_y. FLSD-53 picks gamma per sample:
5 when p_y < 0.2, else 3 (chosen on detached p_y, as Mukhoti et al.).
"""
from dataclasses import dataclass

from bench.core.settings import Range, ge, setting

from .base import METHODS, Method


@dataclass(frozen=True)
class FocalParams:
    # the released code's FL baseline
    gamma: float = setting(3.0, "focal: exponent of (1 - p_y)", range=ge(0))


@dataclass(frozen=True)
class AdaptiveFocalParams:
    # FLSD-53: 5 when p_y < 0.2, else 3 (Mukhoti et al. 2020 §5)
    gamma_low: float = setting(5.0, "flsd53: focal exponent when p_y < threshold",
                               range=ge(0))
    gamma_high: float = setting(3.0, "flsd53: focal exponent otherwise", range=ge(0))
    threshold: float = setting(0.2, "flsd53: p_y where the exponent switches",
                               range=Range(0, 1))


def focal_loss(z, y, gamma):
    """mean_n -(1 - p_y)^gamma log p_y; gamma a float or a [B] tensor."""
    # torch on demand: `bench list` imports every method module (the METHODS registry)
    import torch.nn.functional as F

    logp = F.log_softmax(z, dim=1).gather(1, y[:, None]).squeeze(1)
    return (-(1 - logp.exp()).pow(gamma) * logp).mean()


class Focal(Method):
    display_name = "FL"
    Params = FocalParams

    def loss(self, logits, target):
        return focal_loss(logits[:, 0], target, self.params.gamma)


class AdaptiveFocal(Method):
    display_name = "FLSD"
    Params = AdaptiveFocalParams

    def gammas(self, z, y):
        # torch on demand: `bench list` imports every method module (the METHODS registry)
        import torch
        import torch.nn.functional as F

        with torch.no_grad():
            p_y = F.softmax(z, dim=1).gather(1, y[:, None]).squeeze(1)
        p = self.params
        return torch.where(p_y < p.threshold, p.gamma_low, p.gamma_high).to(z.dtype)

    def loss(self, logits, target):
        z = logits[:, 0]
        return focal_loss(z, target, self.gammas(z, target))


@METHODS.register("focal", "focal loss, gamma 3 (extra baseline of the released code)")
def focal() -> Method:
    return Focal("focal")


@METHODS.register("flsd53", "adaptive focal loss FLSD-53: gamma 5 if p_y < 0.2 else 3")
def flsd53() -> Method:
    return AdaptiveFocal("flsd53")
