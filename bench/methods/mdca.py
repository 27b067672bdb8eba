"""MDCA: multi-class difference in confidence and accuracy (Hebbalaguppe,
Prakash, Madan and Arora, CVPR 2022), one head, added to a classification
loss as the paper combines it:

    MDCA = (1/K) sum_k | mean_n p_nk - mean_n 1[y_n = k] |

over the training batch; loss = L_C + beta * MDCA with L_C the NLL
(`mdca`), the focal loss (`flmdca`) or label smoothing (`lsmdca`). Unlike
DCA's, every term is differentiable: the class frequencies are constants,
the gradient flows through the mean probabilities of every class.
"""
from dataclasses import dataclass

from bench.core.settings import Range, ge, setting

from .base import METHODS, Method
from .focal import focal_loss

# beta = 1 for every combination, gamma = 1 for FL+MDCA, alpha = 0.1 for
# LS+MDCA: the settings of the paper's rows "NLL+MDCA", "FL+MDCA",
# "LS+MDCA" (Hebbalaguppe et al. 2022, Sec. 4, implementation details)
BETA = setting(1.0, "mdca, flmdca, lsmdca: weight of the MDCA term", range=ge(0))


@dataclass(frozen=True)
class MDCAParams:
    mdca_beta: float = BETA


@dataclass(frozen=True)
class FLMDCAParams:
    mdca_beta: float = BETA
    mdca_gamma: float = setting(1.0, "flmdca: focal exponent of (1 - p_y)", range=ge(0))


@dataclass(frozen=True)
class LSMDCAParams:
    mdca_beta: float = BETA
    mdca_epsilon: float = setting(0.1, "lsmdca: label smoothing epsilon", range=Range(0, 1))


def mdca_penalty(z, y):
    """(1/K) sum_k |mean_n p_nk - share of the batch labelled k|, on [B, K] logits."""
    # torch on demand: `bench list` imports every method module (the METHODS registry)
    import torch.nn.functional as F

    k = z.shape[1]
    freq = F.one_hot(y, k).to(z.dtype).mean(0)
    return (F.softmax(z, dim=1).mean(0) - freq).abs().mean()


class NLLMDCA(Method):
    display_name = "NLL+MDCA"
    Params = MDCAParams

    def loss(self, logits, target):
        # torch on demand: `bench list` imports every method module (the METHODS registry)
        import torch.nn.functional as F

        z = logits[:, 0]
        return F.cross_entropy(z, target) + self.params.mdca_beta * mdca_penalty(z, target)


class FLMDCA(Method):
    display_name = "FL+MDCA"
    Params = FLMDCAParams

    def loss(self, logits, target):
        z, p = logits[:, 0], self.params
        return focal_loss(z, target, p.mdca_gamma) + p.mdca_beta * mdca_penalty(z, target)


class LSMDCA(Method):
    display_name = "LS+MDCA"
    Params = LSMDCAParams

    def loss(self, logits, target):
        # torch on demand: `bench list` imports every method module (the METHODS registry)
        import torch.nn.functional as F

        z, p = logits[:, 0], self.params
        return (F.cross_entropy(z, target, label_smoothing=p.mdca_epsilon)
                + p.mdca_beta * mdca_penalty(z, target))


@METHODS.register("mdca", "NLL + 1 x MDCA (Hebbalaguppe et al. 2022; --method extra)")
def mdca():
    return NLLMDCA("mdca")


@METHODS.register("flmdca", "focal loss (gamma 1) + 1 x MDCA (--method extra)")
def flmdca():
    return FLMDCA("flmdca")


@METHODS.register("lsmdca", "label smoothing (epsilon 0.1) + 1 x MDCA (--method extra)")
def lsmdca():
    return LSMDCA("lsmdca")
