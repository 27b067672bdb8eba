"""MC-Dropout (Gal and Ghahramani, ICML 2016): dropout before the
classifier, kept on at test time; T stochastic passes stored as the record's
heads [N, T, K] (bench.train.nets.MCDropoutNet), so the plain row is the MC
average of the T softmaxes and every measure, TS, the post-hoc calibrators,
shift and the heads' mutual information (OOD) read them unchanged.

Training is ordinary dropout training: the loss is the cross-entropy of
the first pass (one mask per image and step); the other passes cost one
linear layer each and are not used for the gradient.
"""
from dataclasses import dataclass

from bench.core.settings import Range, ge, setting

from .base import METHODS, Method


@dataclass(frozen=True)
class MCDropoutParams:
    # p = 0.5 before the last layer and T = 10 test passes: Gal and Ghahramani
    # 2016, Sec. 5 (their experiments average 10 stochastic forward passes)
    mc_p: float = setting(0.5, "mcdropout: dropout rate before the classifier",
                          range=Range(0, 1, low_open=True, high_open=True))
    mc_passes: int = setting(10, "mcdropout: stochastic passes at evaluation (stored as heads)",
                             range=ge(2))


class MCDropout(Method):
    display_name = "MC-Dropout"
    section = "baseline"  # one model, however many passes
    Params = MCDropoutParams
    code = ("bench.train.nets:MCDropoutNet",)  # with AlwaysDropout, which it uses

    @property
    def heads(self) -> int:
        return self.params.mc_passes

    @property
    def mc_dropout(self) -> float:
        """The dropout rate the model is built with (bench.train.backbones.build_model)."""
        return self.params.mc_p

    @property
    def arch(self) -> tuple:
        return ("mcdropout", self.params.mc_p)

    def loss(self, logits, target):
        # torch on demand: `bench list` imports every method module (the METHODS registry)
        import torch.nn.functional as F

        return F.cross_entropy(logits[:, 0], target)


@METHODS.register("mcdropout", "MC-Dropout: dropout 0.5 before the classifier, 10 test "
                               "passes as heads (Gal and Ghahramani 2016; --method extra)")
def mcdropout():
    return MCDropout("mcdropout")
