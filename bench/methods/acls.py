"""ACLS: adaptive and conditional label smoothing (Park, Noh, Oh and Ham,
ICCV 2023), one head: loss = NLL + alpha * R, as the authors' `ACLS`
class computes it (github cvlab-yonsei/ACLS, calibrate/losses/acls.py).

With z_n the logits of image n, m_n = max_k z_nk, the indicator
I_nk = 1[z_nk = m_n] (on detached values: ties all count) and margin M:

    R = lambda_pos * sum_nk I_nk relu(m_n - M)^2 / B
      + lambda_neg * sum_nk (1 - I_nk) relu(sg(m_n) - z_nk - M)^2 / (B (K-1))

sg = stop-gradient: the negative term pulls the other logits up towards
the (fixed) max, the positive term pulls a max logit above M down. The
max is the predicted class, not the label. m_n is taken with torch.max as
theirs: at a tie for the top every tied entry counts in the positive term,
and the whole of its gradient goes to the one entry torch.max returns.
Records made with amax (the gradient split between the ties; values the
same) keep their hash: bench/core/codepins.json counts the two as one
version, since they part only at an exact float tie for the top above M.
"""
from dataclasses import dataclass

from bench.core.settings import ge, setting

from .base import METHODS, Method


@dataclass(frozen=True)
class ACLSParams:
    # the authors' configs/loss/acls.yaml (their experiments' setting); the
    # paper's text read here states no value: docs/methods.md, "Recent
    # calibration losses"
    acls_alpha: float = setting(0.1, "acls: weight of the regulariser R", range=ge(0))
    acls_pos_lambda: float = setting(1.0, "acls: weight of R's max-logit term", range=ge(0))
    acls_neg_lambda: float = setting(0.1, "acls: weight of R's other-logit term", range=ge(0))
    acls_margin: float = setting(10.0, "acls: logit distance left unpenalised", range=ge(0))


def acls_regulariser(z, p: ACLSParams):
    """R of the module text on [B, K] logits."""
    # torch on demand: `bench list` imports every method module (the METHODS registry)
    import torch.nn.functional as F

    b, k = z.shape
    # torch.max, not amax: at a tie the gradient goes to the returned index
    # alone, as in the authors' get_reg (amax would split it between the ties)
    m = z.max(dim=1, keepdim=True).values
    top = (z.detach() == m.detach()).to(z.dtype)
    pos = top * F.relu(m - p.acls_margin).pow(2)
    neg = (1 - top) * F.relu(m.detach() - z - p.acls_margin).pow(2)
    return (p.acls_pos_lambda * pos.sum() / b
            + p.acls_neg_lambda * neg.sum() / (b * (k - 1.0)))


class ACLS(Method):
    display_name = "ACLS"
    Params = ACLSParams

    def loss(self, logits, target):
        # torch on demand: `bench list` imports every method module (the METHODS registry)
        import torch.nn.functional as F

        z = logits[:, 0]
        return F.cross_entropy(z, target) + self.params.acls_alpha * acls_regulariser(z, self.params)


@METHODS.register("acls", "NLL + 0.1 x ACLS regulariser, margin 10 (Park et al. 2023; --method recent)")
def acls() -> Method:
    return ACLS("acls")
