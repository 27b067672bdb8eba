"""MDCA: multi-class difference in confidence and accuracy (Hebbalaguppe,
Prakash, Madan and Arora, CVPR 2022), one head, added to a classification
loss as the paper combines it:

    MDCA = (1/K) sum_k | mean_n p_nk - mean_n 1[y_n = k] |

over the training batch; loss = L_C + beta * MDCA with L_C the NLL
(`mdca`), the focal loss (`flmdca`) or label smoothing (`lsmdca`). Unlike
DCA's, every term is differentiable: the class frequencies are constants,
the gradient flows through the mean probabilities of every class.

LS+MDCA's smoothing, `mdca_smoothing`:
  authors (default; the MDCA repository's LabelSmoothingLoss): target
      1 - alpha on the label and alpha / (K - 1) on each other class;
  torch (Mueller et al. 2019, F.cross_entropy's label_smoothing, what this
      harness ran before): (1 - eps) onehot + eps / K.
Both are mean_n -sum_k q_nk log p_nk; at alpha = eps they differ by
eps / (K (K - 1)) of target mass per class. Records made at `torch` keep
their hash (the key is out of it at that value, Spec.legacy).
"""
from dataclasses import dataclass

from bench.core.errors import BenchError
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
    mdca_epsilon: float = setting(0.1, "lsmdca: label smoothing epsilon (the authors' alpha)",
                                  range=Range(0, 1))
    # the released code by default, as the paper's methods; "torch" is the
    # harness's earlier formula (its records keep their hash: legacy)
    mdca_smoothing: str = setting(
        "authors", "lsmdca: authors (1-eps on the label, eps/(K-1) elsewhere) | torch "
        "((1-eps) onehot + eps/K)", choices=("authors", "torch"), legacy="torch")


def smoothed_ce(z, y, eps: float, form: str):
    """mean_n -sum_k q_nk log softmax(z)_nk with q as `form` says (module text)."""
    # torch on demand: `bench list` imports every method module (the METHODS registry)
    import torch.nn.functional as F

    if form == "torch":
        return F.cross_entropy(z, y, label_smoothing=eps)
    k = z.shape[1]
    q = F.one_hot(y, k).to(z.dtype) * (1 - eps - eps / (k - 1)) + eps / (k - 1)
    return -(q * F.log_softmax(z, dim=1)).sum(1).mean()


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

    def check(self, num_classes: int) -> None:
        if num_classes < 2 and self.params.mdca_smoothing == "authors":
            raise BenchError("lsmdca: the authors' smoothing spreads alpha over K - 1 other "
                             "classes; it needs at least 2 classes")

    def loss(self, logits, target):
        z, p = logits[:, 0], self.params
        return (smoothed_ce(z, target, p.mdca_epsilon, p.mdca_smoothing)
                + p.mdca_beta * mdca_penalty(z, target))


@METHODS.register("mdca", "NLL + 1 x MDCA (Hebbalaguppe et al. 2022; --method extra)")
def mdca():
    return NLLMDCA("mdca")


@METHODS.register("flmdca", "focal loss (gamma 1) + 1 x MDCA (--method extra)")
def flmdca():
    return FLMDCA("flmdca")


@METHODS.register("lsmdca", "label smoothing (alpha 0.1, the authors' form) + 1 x MDCA "
                            "(--method extra)")
def lsmdca():
    return LSMDCA("lsmdca")
