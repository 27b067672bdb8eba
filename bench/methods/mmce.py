"""MMCE: maximum mean calibration error (Kumar, Sarawagi and Jain, ICML
2018), weighted form, one head: loss = NLL + lambda * MMCE_w.

With r_i the confidence (top probability) of image i of the batch, C the
images predicted right (m_c of them) and W the wrong ones (m_w), and the
Laplacian kernel k(r, r') = exp(-|r - r'| / width):

    MMCE_w^2 = sum_{i,j in C} (1 - r_i)(1 - r_j) k / m_c^2
             + sum_{i,j in W} r_i r_j k / m_w^2
             - 2 sum_{i in C, j in W} (1 - r_i) r_j k / (m_c m_w)

(the paper's eq. for the weighted estimate: each group's term is
normalised by its own size, so a batch with few mistakes still weighs
them). A batch without a right (or wrong) image drops the terms of that
group. MMCE_w is the square root (of at least 0: rounding can take the
estimate a hair below 0).
"""
from dataclasses import dataclass

from bench.core.settings import ge, gt, setting

from .base import METHODS, Method


@dataclass(frozen=True)
class MMCEParams:
    # lambda: Kumar et al. tune it per dataset; 2 is the MMCE baseline of
    # Mukhoti et al. 2020 (Table 1 setup), who compare against this loss.
    mmce_lambda: float = setting(2.0, "mmce: weight of the MMCE term", range=ge(0))
    # the kernel width of Kumar et al. 2018 (Sec. 4: Laplacian, width 0.4)
    mmce_width: float = setting(0.4, "mmce: width of the Laplacian kernel", range=gt(0))


def mmce_weighted(z, y, width: float = 0.4):
    """The weighted MMCE of a [B, K] batch of logits (see the module text)."""
    # torch on demand: `bench list` imports every method module (the METHODS registry)
    import torch
    import torch.nn.functional as F

    conf, pred = F.softmax(z, dim=1).max(dim=1)
    right = pred.eq(y).to(z.dtype)
    wrong = 1 - right
    kernel = torch.exp(-(conf[:, None] - conf[None, :]).abs() / width)
    a = (1 - conf) * right  # the right images' 1 - r, 0 elsewhere
    b = conf * wrong  # the wrong images' r, 0 elsewhere
    m_c, m_w = right.sum().clamp(min=1), wrong.sum().clamp(min=1)
    sq = (a @ kernel @ a / m_c ** 2 + b @ kernel @ b / m_w ** 2
          - 2 * (a @ kernel @ b) / (m_c * m_w))
    return sq.clamp(min=0).add(1e-12).sqrt()  # 1e-12: a finite gradient at 0


class MMCE(Method):
    display_name = "MMCE"
    Params = MMCEParams

    def loss(self, logits, target):
        # torch on demand: `bench list` imports every method module (the METHODS registry)
        import torch.nn.functional as F

        z, p = logits[:, 0], self.params
        return F.cross_entropy(z, target) + p.mmce_lambda * mmce_weighted(z, target,
                                                                          p.mmce_width)


@METHODS.register("mmce", "NLL + 2 x weighted MMCE, Laplacian kernel 0.4 (Kumar et al. 2018; "
                          "--method extra)")
def mmce():
    return MMCE("mmce")
