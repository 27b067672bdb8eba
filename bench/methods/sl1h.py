"""SL1H: the single-head, single-loss baseline (plain cross-entropy).

Like every method module, it imports torch inside the functions that compute
(a method is registered, listed and configured without torch)."""
from .base import METHODS, Method


class CrossEntropy(Method):
    def loss(self, logits, target):
        # torch on demand: `bench list` imports every method module (the METHODS registry)
        import torch.nn.functional as F

        return F.cross_entropy(logits[:, 0], target)


@METHODS.register("sl1h", "one head, plain cross-entropy (paper baseline)")
def sl1h() -> Method:
    return CrossEntropy("sl1h")
