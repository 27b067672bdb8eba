"""Brier loss: the multiclass Brier score as the training loss (Brier 1950;
a calibration baseline in Mukhoti et al., NeurIPS 2020), one head:

    loss = mean_n sum_k (p_nk - 1[y_n = k])^2

a proper scoring rule, bounded (at most 2), so it punishes a confident
mistake far less than the NLL does. No hyper-parameter.
"""
from .base import METHODS, Method


def brier_loss(z, y):
    # torch on demand: `bench list` imports every method module (the METHODS registry)
    import torch.nn.functional as F

    return (F.softmax(z, dim=1) - F.one_hot(y, z.shape[1]).to(z.dtype)).pow(2).sum(1).mean()


class Brier(Method):
    display_name = "Brier"

    def loss(self, logits, target):
        return brier_loss(logits[:, 0], target)


@METHODS.register("brier", "Brier score as the loss (Brier 1950; --method extra)")
def brier():
    return Brier("brier")
