"""Packed-Ensembles (Laurent et al., ICLR 2023): M independent subnetworks
of the backbone, each alpha / M as wide, run as one network whose
convolutions have M x gamma groups (bench.train.ensembles.PackedNet). With
the defaults (alpha 2, M 4, gamma 1) the ensemble has about as many
parameters as the backbone alone. Built for conv / batch-norm backbones
(smallcnn, resnet18, resnet50), from scratch: the widths differ from any
pretrained checkpoint's.

With gamma > 1, `pe_gamma_rule` says which convolutions get it:
`torch-uncertainty` (default; TorchUncertainty's packed ResNets, the
paper's authors' library) keeps gamma = 1 on each residual block's first
convolution and lowers it (to 1 at least) until each group reads at least
64 input channels; `every` (what this harness built before) gives every
convolution after the stem M x gamma groups. At gamma = 1 both build the
same network, and the key stays out of the hash (so does `every`, whose
records keep their hash: Spec.legacy).

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
    pe_gamma_rule: str = setting(
        "torch-uncertainty", "packed, gamma > 1: torch-uncertainty (1 on each block's first conv, "
        "groups of >= 64 channels) | every (every conv after the stem)",
        choices=("torch-uncertainty", "every"), legacy="every")


class Packed(EnsembleInOne):
    display_name = "Packed-Ens"
    Params = PackedParams
    code = ("bench.train.ensembles:PackedNet",)  # and the grouped layers it builds
    members_field = "pe_members"

    @property
    def arch(self) -> tuple:
        p = self.params
        rule = (p.pe_gamma_rule,) if p.pe_gamma > 1 else ()  # moot at gamma 1
        return ("packed", p.pe_members, p.pe_alpha, p.pe_gamma, *rule)

    def params_dict(self) -> dict:
        """As Method's, less the gamma rule at gamma 1 (both rules build the
        same network there: the default's hash is the one it always had)."""
        out = super().params_dict()
        if self.params.pe_gamma == 1:
            out.pop("pe_gamma_rule", None)
        return out


@METHODS.register("packed", "Packed-Ensembles: 4 members, alpha 2, gamma 1, grouped convolutions "
                            "(Laurent et al. 2023; conv/BN backbones; --method extra)")
def packed():
    return Packed("packed")
