"""Confidence penalty (Pereyra et al., "Regularizing neural networks by
penalizing confident output distributions", ICLR workshop 2017).

loss = CE(z, y) - beta * H(softmax(z)),   H(p) = -sum_k p_k log p_k,

averaged over the batch: low-entropy (over-confident) predictions cost more.
"""
from dataclasses import dataclass

import torch.nn.functional as F

from bench.plugins import Method, ge, register_method, setting


@dataclass(frozen=True)
class ConfPenParams:
    beta: float = setting(0.1, "confpen: weight of the entropy penalty", range=ge(0))


class ConfidencePenalty(Method):
    """One head; logits arrive shaped [B, M=1, K]."""

    Params = ConfPenParams
    display_name = "CP"  # its row in report tables; one head: among the baselines

    def loss(self, logits, target):
        z = logits[:, 0]
        log_p = F.log_softmax(z, dim=1)
        entropy = -(log_p.exp() * log_p).sum(dim=1).mean()
        return F.cross_entropy(z, target) - self.params.beta * entropy


@register_method("confpen", "confidence penalty: CE - beta x entropy(softmax), beta 0.1 "
                            "(Pereyra et al. 2017)")
def confpen() -> Method:
    return ConfidencePenalty("confpen")
