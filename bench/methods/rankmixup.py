"""RankMixup with the mixup ranking loss, MRL (Noh, Park, Lee and Ham, ICCV
2023), one head, as the authors' `RankMixup_MRL` computes it (github
cvlab-yonsei/RankMixup, calibrate/losses/rankmixup.py) on one mixed batch:

lam ~ Beta(a, a), x' = lam x + (1 - lam) x[perm], t' = lam onehot(y) +
(1 - lam) onehot(y[perm]) (float32, as theirs); with z, z' the logits of
x and x', d_n = relu(max_k z'_nk - max_k z_nk + margin) and s_n = 0 when
some entry of t'_n equals 1 exactly (a pair of one class, or lam = 1),
else 1. `rm_form` chooses how s and d meet:

  authors (default): their mask has shape [B] and d shape [B, 1], so the
      product broadcasts to [B, B] and its mean is
          loss = CE(z, y) + alpha * mean_n s_n * mean_n d_n;
      the max gives a tie's gradient to one entry (torch.max), as theirs;
  rows (what this harness ran before): the per-image product,
          loss = CE(z, y) + alpha * mean_n s_n d_n,
      with amax (a tie's gradient split between the tied entries).
Records made at `rows` keep their hash: the key is out of it at that
value (Spec.legacy), and bench/core/codepins.json counts this module as the
same version as the one before rm_form (at `rows` it computes what that did). The clean and the mixed batch go through the model as
one batch of 2B images (the method contract: one forward per step), where
the authors run two forwards: batch-norm statistics are taken over both
halves together (docs/methods.md).
"""
from __future__ import annotations

from dataclasses import dataclass

from bench.core.errors import BenchError
from bench.core.settings import ge, setting

from .base import METHODS, Method
from .mixup import Mixup


@dataclass(frozen=True)
class RankMixupParams:
    # the authors' CIFAR settings: configs/loss/mrl.yaml (margin 2, alpha 0.1)
    # and configs/model/resnet50_mixup.yaml (mixup_alpha 2); docs/methods.md
    rm_alpha: float = setting(0.1, "rankmixup: weight of the ranking term", range=ge(0))
    rm_margin: float = setting(2.0, "rankmixup: logit margin of the ranking term", range=ge(0))
    rm_mix_alpha: float = setting(2.0, "rankmixup: Beta(a, a) of the mixing weight; 0 = none",
                                  range=ge(0))
    # the released code by default; "rows" is the harness's earlier reading
    # (its records keep their hash: legacy)
    rm_form: str = setting(
        "authors", "rankmixup: authors (mean of the mask x mean of the ranking terms, their "
        "broadcast) | rows (mean of the masked per-image terms)", choices=("authors", "rows"),
        legacy="rows")
    # mixed batches per step: MRL takes one ([B] mixed top logits against [B]
    # clean ones). The authors' configs/model/*_mixup*.yaml ship 3 (commented
    # "1 mrl / 3 mndcg") and their train_cifar.sh / train_tiny.sh run MRL with
    # them; their loss then fails to broadcast for B > 1, so 3 is refused (check_params)
    rm_num_mixup: int = setting(
        1, "rankmixup: mixed batches per step; MRL takes only 1 (more is refused: the authors' "
        "loss cannot broadcast them)", range=ge(1), legacy=1)

    @property
    def alpha(self) -> float:
        """The Beta parameter under the name Mixup.draw reads."""
        return self.rm_mix_alpha


def mrl_loss(z, zm, y, y_perm, lam, rest, *, alpha: float, margin: float,
             form: str = "authors"):
    """CE(z, y) + alpha * the masked ranking term as `form` says (module
    text); lam, rest float32 scalars, z, zm [B, K] logits of the clean and
    mixed images."""
    # torch on demand: `bench list` imports every method module (the METHODS registry)
    import torch.nn.functional as F

    k = z.shape[1]
    t = lam * F.one_hot(y, k).float() + rest * F.one_hot(y_perm, k).float()
    keep = (t != 1.0).all(dim=1).to(z.dtype)
    ce = F.cross_entropy(z, y)
    if form == "rows":
        diff = zm.amax(dim=1) - z.amax(dim=1)
        return ce + alpha * (keep * F.relu(diff + margin)).mean()
    # mean over their [B, B] broadcast = mean(mask) * mean(d), without the B x B
    diff = zm.max(dim=1).values - z.max(dim=1).values
    return ce + alpha * keep.mean() * F.relu(diff + margin).mean()


class RankMixup(Mixup):
    """Mixup's draws (lam as float32 lam, 1 - lam; the pairing), its own batch and loss."""
    display_name = "RankMixup"
    Params = RankMixupParams
    released_train_size = 0  # not a method of the paper's released code
    # the model sees 2B images a step (clean, then mixed): fused only with
    # runs that do too (bench.train.groups.methods_key)
    batch_multiple = 2

    def check_params(self) -> None:
        super().check_params()
        if self.params.rm_num_mixup != 1:
            raise BenchError(
                f"--set rm_num_mixup={self.params.rm_num_mixup}: rankmixup's MRL takes 1 mixed "
                "batch a step (the authors' loss subtracts B clean top logits from "
                "rm_num_mixup x B mixed ones, which does not broadcast; their scripts' 3 fails "
                "there)")

    def staged_batch(self, x, y, draws):
        # torch on demand: `bench list` imports every method module (the METHODS registry)
        import torch

        lam, rest = draws["lam"].unbind()
        perm = draws["perm"]
        return torch.cat([x, lam * x + rest * x[perm]]), (y, y[perm], lam, rest)

    def loss(self, logits, target):
        y, y_perm, lam, rest = target
        z = logits[:, 0]
        b = len(y)
        p = self.params
        return mrl_loss(z[:b], z[b:], y, y_perm, lam, rest, alpha=p.rm_alpha,
                        margin=p.rm_margin, form=p.rm_form)


@METHODS.register("rankmixup", "CE + 0.1 x mixup ranking loss MRL (Noh et al. 2023; --method recent)")
def rankmixup() -> Method:
    return RankMixup("rankmixup")
