"""DCA: difference between confidence and accuracy (Liang et al. 2020), one head.

loss = CE(z, y) + beta * |mean_n max_k p_nk - mean_n [argmax_k p_nk == y_n]|.
Accuracy is piecewise constant, so the gradient flows through the confidences.
"""
from dataclasses import dataclass

from bench.core.settings import ge, setting

from .base import METHODS, Method


@dataclass(frozen=True)
class DCAParams:
    # the paper's value (docs/fidelity.md); the CE term has weight 1
    beta: float = setting(5.0, "dca: weight of |mean confidence - accuracy|", range=ge(0))


def dca_penalty(z, y):
    """|mean confidence - batch accuracy| on [B, K] logits."""
    # torch on demand: `bench list` imports every method module (the METHODS registry)
    import torch.nn.functional as F

    conf, pred = F.softmax(z, dim=1).max(dim=1)
    return (conf.mean() - pred.eq(y).float().mean()).abs()


class DCA(Method):
    Params = DCAParams
    released_train_size = 150  # train_other.py's --im_size default (docs/fidelity.md)

    def loss(self, logits, target):
        # torch on demand: `bench list` imports every method module (the METHODS registry)
        import torch.nn.functional as F

        z = logits[:, 0]
        return F.cross_entropy(z, target) + self.params.beta * dca_penalty(z, target)


@METHODS.register("dca", "CE + 5 x |mean confidence - batch accuracy|")
def dca() -> Method:
    return DCA("dca")
