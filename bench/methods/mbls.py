"""MbLS: margin-based label smoothing (Liu et al. 2022), one head.

loss = CE(z, y) + alpha * mean_{n,k} relu(max_j z_nj - z_nk - margin),
the mean taken over every (sample, class) entry, as the authors' LogitMarginL1.
"""
from dataclasses import dataclass

from bench.core.settings import ge, setting

from .base import METHODS, Method


@dataclass(frozen=True)
class MbLSParams:
    # the paper's value (docs/fidelity.md; released code default 10)
    margin: float = setting(6.0, "mbls: logit-distance margin", range=ge(0))
    alpha: float = setting(0.1, "mbls: weight of the margin penalty", range=ge(0))


def margin_penalty(z, margin: float):
    """mean relu(max_j z_j - z_k - margin) over samples and classes ([B, K] logits)."""
    # torch on demand: `bench list` imports every method module (the METHODS registry)
    import torch.nn.functional as F

    gap = z.max(dim=1, keepdim=True).values - z
    return F.relu(gap - margin).mean()


class MarginLabelSmoothing(Method):
    Params = MbLSParams
    released_train_size = 150  # train_other.py's --im_size default (docs/fidelity.md)

    def loss(self, logits, target):
        # torch on demand: `bench list` imports every method module (the METHODS registry)
        import torch.nn.functional as F

        z = logits[:, 0]
        return F.cross_entropy(z, target) + self.params.alpha * margin_penalty(z, self.params.margin)


@METHODS.register("mbls", "margin-based label smoothing, margin 6, alpha 0.1")
def mbls() -> Method:
    return MarginLabelSmoothing("mbls")
