"""Packed-Ensembles (Laurent et al., ICLR 2023): M independent subnetworks
of the backbone, each alpha / M as wide, run as one network whose
convolutions have M x gamma groups (bench.train.ensembles.PackedNet). With
the defaults (alpha 2, M 4, gamma 1) the ensemble has about as many
parameters as the backbone alone. Built for conv / batch-norm backbones
(smallcnn, resnet18, resnet50), from scratch: the widths differ from any
pretrained checkpoint's.

Training as the paper's: every member sees every image, the loss is the
mean of the members' cross-entropies; the members' logits are the record's
heads [N, M, K], as for BatchEnsemble.
"""
from dataclasses import dataclass

from bench.core.settings import ge, setting

from .base import METHODS
from .batchensemble import EnsembleInOne


@dataclass(frozen=True)
class PackedParams:
    # alpha = 2, M = 4, gamma = 1: Laurent et al. 2023, Sec. 4 (their
    # ResNet-18/CIFAR setting "Packed-Ensembles (alpha=2, M=4, gamma=1)")
    pe_alpha: int = setting(2, "packed: width factor of the whole ensemble", range=ge(1))
    pe_members: int = setting(4, "packed: ensemble members (stored as heads)", range=ge(2))
    pe_gamma: int = setting(1, "packed: groups inside each member's convolutions", range=ge(1))


class Packed(EnsembleInOne):
    display_name = "Packed-Ens"
    Params = PackedParams
    members_field = "pe_members"

    @property
    def arch(self) -> tuple:
        p = self.params
        return ("packed", p.pe_members, p.pe_alpha, p.pe_gamma)


@METHODS.register("packed", "Packed-Ensembles: 4 members, alpha 2, gamma 1, grouped convolutions "
                            "(Laurent et al. 2023; conv/BN backbones; --method extra)")
def packed():
    return Packed("packed")
