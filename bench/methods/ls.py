"""LS: label smoothing (Mueller et al. 2019), one head.

Target q = (1 - eps) * onehot(y) + eps / K; loss = mean_n -sum_k q_k log p_k,
i.e. PyTorch's `label_smoothing` argument.
"""
from dataclasses import dataclass

from bench.core.settings import Range, setting

from .base import METHODS, Method


@dataclass(frozen=True)
class LSParams:
    # the paper's runs (docs/fidelity.md; released code default 0.1)
    epsilon: float = setting(0.05, "ls: label smoothing epsilon", range=Range(0, 1))


class LabelSmoothing(Method):
    Params = LSParams
    released_train_size = 150  # train_other.py's --im_size default (docs/fidelity.md)

    def loss(self, logits, target):
        # torch on demand: `bench list` imports every method module (the METHODS registry)
        import torch.nn.functional as F

        return F.cross_entropy(logits[:, 0], target, label_smoothing=self.params.epsilon)


@METHODS.register("ls", "label smoothing, epsilon 0.05")
def ls() -> Method:
    return LabelSmoothing("ls")
