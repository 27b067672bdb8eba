"""BatchEnsemble (Wen, Tran and Ba, ICLR 2020): M members share every
weight W of the network; member i has rank-one fast weights r_i, s_i and its
own bias, so its layer is W o (r_i s_i^T) (bench.train.ensembles). Every
conv and linear layer of the backbone gets them, and the classifier.

Training as the paper's: the batch is tiled M times so every member sees
every image, the loss is the mean of the members' cross-entropies. The
members' logits are the record's heads [N, M, K], so the plain row is the
ensemble's mean softmax and every measure, TS, the post-hoc calibrators,
shift and OOD mutual information read them as they read a multi-head model's.
"""
from dataclasses import dataclass

from bench.core.settings import ge, setting

from .base import METHODS, Method


def members_ce(logits, target):
    """Mean over members and images of each member's cross-entropy, [B, M, K]."""
    # torch on demand: `bench list` imports every method module (the METHODS registry)
    import torch.nn.functional as F

    return F.cross_entropy(logits.transpose(1, 2), target[:, None].expand(-1, logits.shape[1]))


class EnsembleInOne(Method):
    """An efficient ensemble: M members in one network, stored as heads, each
    trained by its own cross-entropy. A subclass names its members field and
    its architecture (`arch`)."""
    section = "multi-head"  # an ensemble in one model: beside D-Ens and the multi-head rows
    members_field = ""

    @property
    def heads(self) -> int:
        return getattr(self.params, self.members_field)

    def loss(self, logits, target):
        return members_ce(logits, target)


@dataclass(frozen=True)
class BatchEnsembleParams:
    # M = 4: Wen et al. 2020, Sec. 4 (ensemble size 4 in their CIFAR and
    # ImageNet image classification results)
    be_members: int = setting(4, "batchensemble: ensemble members (stored as heads)",
                              range=ge(2))


class BatchEnsemble(EnsembleInOne):
    display_name = "BatchEnsemble"
    Params = BatchEnsembleParams
    code = ("bench.train.ensembles:BatchEnsembleNet",)  # and the layers it builds
    members_field = "be_members"

    @property
    def arch(self) -> tuple:
        return ("batchensemble", self.params.be_members)


@METHODS.register("batchensemble", "BatchEnsemble: 4 members with rank-one fast weights on every "
                                   "conv/linear layer (Wen et al. 2020; --method extra)")
def batchensemble():
    return BatchEnsemble("batchensemble")
