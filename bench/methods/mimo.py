"""MIMO, multi-input multi-output (Havasi et al., ICLR 2021): M subnetworks
share one network whose stem reads M images concatenated along channels
and whose M heads each classify their own image (bench.train.ensembles.MIMONet).

Training, as the authors' `baselines/cifar/mimo.py` (google/uncertainty-
baselines) builds a step from a batch of B images: with R batch
repetitions there are n = R * B rows; `main` is a random permutation of
the B indices each repeated R times; the first floor(n (1 - rho)) rows of
every member's index list are its own random permutation of those rows of
`main`, the rest are `main`'s (input repetition: there all M slots hold
one image). Row r's input is x[i_1r], ..., x[i_Mr] stacked channel-wise
(member-major), its targets y[i_1r], ..., y[i_Mr], and

    loss = (1 / n) sum_r sum_m CE(z_rm, y[i_mr])

(`mimo_loss` sum, the authors'; `mean` divides by M as TorchUncertainty's
MIMO routine does). The draws are a staged draw (`draw` / `staged_batch`),
from the run's method generator, so the graph-safe step and a resumed run
see the per-step path's numbers. At test time the model tiles one image M
times and the record keeps the M heads' logits [N, M, K]: the plain row is
the members' mean softmax, as for every multi-head model.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.core.settings import Range, ge, setting

from .base import METHODS
from .batchensemble import EnsembleInOne

if TYPE_CHECKING:  # annotations only: registering a method needs no torch
    import torch


@dataclass(frozen=True)
class MIMOParams:
    # M = 3, rho = 0, R = 4: the flag defaults of the authors' CIFAR script,
    # uncertainty-baselines baselines/cifar/mimo.py (ensemble_size 3,
    # input_repetition_probability 0.0, batch_repetitions 4); docs/methods.md
    mimo_members: int = setting(3, "mimo: subnetworks M (M images in, M heads; stored as heads)",
                                range=ge(2))
    mimo_rho: float = setting(0.0, "mimo: input repetition: fraction of a step's rows whose M "
                                   "slots hold one image", range=Range(0, 1))
    mimo_batch_reps: int = setting(4, "mimo: batch repetitions R: each image in R rows a step "
                                      "(R x batch rows)", range=ge(1))
    mimo_loss: str = setting("sum", "mimo: sum (the authors' code) | mean (TorchUncertainty) of "
                                    "the heads' cross-entropies", choices=("sum", "mean"))


def distinct_rows(rows: int, rho: float) -> int:
    """Rows whose members get independent images: floor(rows (1 - rho)), as
    the authors' code truncates it."""
    return int(rows * (1.0 - rho))


class MIMO(EnsembleInOne):
    display_name = "MIMO"
    Params = MIMOParams
    # the multi-head model it subclasses is part of what it runs
    code = ("bench.train.ensembles:MIMONet", "bench.train.nets:MultiHeadNet")
    members_field = "mimo_members"

    @property
    def arch(self) -> tuple:
        return ("mimo", self.params.mimo_members)

    @property
    def batch_multiple(self) -> int:
        """Rows the model sees a step per image of the batch (bench.train.groups,
        bench.sweep.fusecap): R."""
        return self.params.mimo_batch_reps

    def draw(self, n: int, gen: torch.Generator) -> dict:
        """`slots` [M, R n]: member m's image index in each row (module text)."""
        # torch on demand: `bench list` imports every method module (the METHODS registry)
        import torch

        p = self.params
        rows = n * p.mimo_batch_reps
        main = torch.arange(n).repeat(p.mimo_batch_reps)[torch.randperm(rows, generator=gen)]
        t = distinct_rows(rows, p.mimo_rho)
        slots = main.repeat(p.mimo_members, 1)
        for m in range(p.mimo_members):
            slots[m, :t] = main[:t][torch.randperm(t, generator=gen)]
        return {"slots": slots}

    def staged_batch(self, x, y, draws):
        """Inputs [R n, M C, H, W] (member m's image in channels m C .. m C + C - 1),
        targets [R n, M]."""
        slots = draws["slots"]
        m, rows = slots.shape
        flat = slots.reshape(-1)
        images = x.index_select(0, flat).unflatten(0, (m, rows))
        return images.transpose(0, 1).flatten(1, 2), y.index_select(0, flat).view(m, rows).t()

    def loss(self, logits, target):
        # torch on demand: `bench list` imports every method module (the METHODS registry)
        import torch.nn.functional as F

        ce = F.cross_entropy(logits.transpose(1, 2), target)  # mean over rows and heads
        return ce * logits.shape[1] if self.params.mimo_loss == "sum" else ce


@METHODS.register("mimo", "MIMO: 3 subnetworks, M images in through a widened stem, M heads "
                          "(Havasi et al. 2021; --method recent)")
def mimo():
    return MIMO("mimo")
