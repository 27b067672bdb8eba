"""Multi-head models (Galdran et al. 2023): 2HSL, 2HML, 4HML and MHML for any M.

M linear heads on one backbone; prediction p^mu = (1/M) sum_m softmax(z^m).
Training loss, `mh_loss`:
  paper    (eq. 2)  CE(p^mu, y) + sum_m mean_n w^m_{y_n} * CE(p^m_n, y_n)
  released (authors' code)  [CE(softmax(mean_m z^m), y)
                             + sum_m F.cross_entropy(z^m, y, weight=w^m)] / (M + 1)
where F.cross_entropy with weights is PyTorch's weighted mean
sum_n w_{y_n} l_n / sum_n w_{y_n}.
Weights (docs/fidelity.md, head weights): classes shuffled with the run seed and array_split into M
groups; head m weighs its own group M and every other class 1/M. Single-loss
variants (`Nhsl`) use weight 1 everywhere. `class_groups` names the shuffle:
"python" (released code: random.seed(seed); random.shuffle(classes)) or
"numpy" (np.random.default_rng(seed).permutation).
"""
from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

from typing import TYPE_CHECKING

import numpy as np

from bench.core.errors import BenchError
from bench.core.settings import ge, setting
from bench.core.transfer import h2d

from .base import METHODS, Method

if TYPE_CHECKING:  # the losses import torch when they run
    import torch

# `3hml`, `8hml`, `3hsl`: a fixed number of heads in the name.
PATTERN = re.compile(r"(\d+)h(ml|sl)")


# ------------------------------------------------------------------ weights --
def python_shuffle(num_classes: int, seed: int) -> list[int]:
    """The released code's order: random.seed(seed); random.shuffle(classes),
    on a private generator so the global `random` state is left alone."""
    classes = list(range(num_classes))
    random.Random(seed).shuffle(classes)
    return classes


def numpy_shuffle(num_classes: int, seed: int) -> list[int]:
    return list(np.random.default_rng(seed).permutation(num_classes))


CLASS_GROUPS = {"python": python_shuffle, "numpy": numpy_shuffle}


def class_groups(num_classes: int, heads: int, seed: int, rule: str = "python") -> list:
    """The M class groups of the heads: the shuffled classes, np.array_split."""
    return [list(map(int, g)) for g in
            np.array_split(CLASS_GROUPS[rule](num_classes, seed), heads)]


def class_weights(num_classes: int, heads: int, seed: int, multi_loss: bool = True,
                  rule: str = "python") -> np.ndarray:
    """[M, K] per-head class weights (paper §2.2; K=4, M=2 -> [2, .5, 2, .5] up to a shuffle)."""
    if not multi_loss:
        return np.ones((heads, num_classes))
    groups = class_groups(num_classes, heads, seed, rule)
    weights = np.full((heads, num_classes), 1.0 / heads)
    for m, group in enumerate(groups):
        weights[m, group] = float(heads)
    return weights


# ------------------------------------------------------------------- losses --
def mean_prob_ce(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """mean_n -log p^mu_{y_n} with p^mu the mean of head softmaxes ([B, M, K] logits)."""
    # torch on demand: `bench list` imports every method module (the METHODS registry)
    import torch
    import torch.nn.functional as F

    logp = F.log_softmax(logits, dim=-1)
    log_mu = torch.logsumexp(logp, dim=1) - math.log(logits.shape[1])  # stable log-mean-exp
    return F.nll_loss(log_mu, y)


def weighted_head_ce(z: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Paper's wCE of one head: mean_n -w_{y_n} log p_{y_n} ([B, K] logits, [K] weights)."""
    # torch on demand: `bench list` imports every method module (the METHODS registry)
    import torch.nn.functional as F

    logp_y = F.log_softmax(z, dim=-1).gather(1, y[:, None]).squeeze(1)
    return -(w[y] * logp_y).mean()


def paper_loss(logits, y, weights):
    """Eq. 2: CE(p^mu, y) + sum_m wCE_m(p^m, y)."""
    heads = sum(weighted_head_ce(logits[:, m], y, weights[m]) for m in range(logits.shape[1]))
    return mean_prob_ce(logits, y) + heads


def released_loss(logits, y, weights):
    """Released code: CE on the mean of logits, PyTorch weighted-mean CE per head, / (M+1)."""
    # torch on demand: `bench list` imports every method module (the METHODS registry)
    import torch.nn.functional as F

    m_heads = logits.shape[1]
    heads = sum(F.cross_entropy(logits[:, m], y, weight=weights[m]) for m in range(m_heads))
    return (F.cross_entropy(logits.mean(dim=1), y) + heads) / (m_heads + 1)


MH_LOSSES = {"paper": paper_loss, "released": released_loss}


@dataclass(frozen=True)
class MultiHeadParams:
    # 4 heads is the paper's best model (4HML, Tables 1-2)
    heads: int = setting(4, "multi-head: number of heads M (<= classes)", range=ge(1))
    # "released" made the published numbers; docs/fidelity.md
    mh_loss: str = setting("released", "multi-head loss: released (authors' code) | paper (eq. 2)",
                           choices=tuple(MH_LOSSES))
    # the shuffle that draws each head's classes (docs/fidelity.md)
    class_groups: str = setting("python", "multi-head class-group shuffle: python (released) | "
                                "numpy", choices=tuple(CLASS_GROUPS))


# ------------------------------------------------------------------- method --
class MultiHead(Method):
    """M heads with per-head weighted CE (multi-loss) or plain CE (single-loss)."""

    Params = MultiHeadParams
    section = "multi-head"  # display name: the registered one in capitals (4HML, 3HSL)
    multi_loss = True
    weights = None  # [M, K] class weights, drawn by setup()

    def check_params(self):
        super().check_params()  # heads, mh_loss and class_groups as declared
        name, p = self.name, self.params
        fixed = PATTERN.fullmatch(name)
        if fixed and int(fixed.group(1)) != p.heads:
            raise BenchError(f"{name} has {fixed.group(1)} heads, not heads={p.heads}; "
                             f"use --method {p.heads}h{fixed.group(2)} or mhml --set heads=M")

    @property
    def heads(self) -> int:
        return self.params.heads

    def check(self, num_classes: int) -> None:
        # Multi-loss heads specialise on disjoint class groups: M <= K (paper §2.2).
        if self.multi_loss and self.heads > num_classes:
            raise BenchError(f"{self.name}: {self.heads} heads need at least {self.heads} "
                             f"classes, the dataset has {num_classes}; use at most "
                             f"{num_classes} heads")

    def setup(self, num_classes: int, seed: int) -> None:
        # torch on demand: `bench list` imports every method module (the METHODS registry)
        import torch

        self.check(num_classes)
        self.weights = torch.as_tensor(
            class_weights(num_classes, self.heads, seed, self.multi_loss, self.params.class_groups),
            dtype=torch.float32)

    def head_groups(self, num_classes: int, seed: int) -> list | None:
        """Each head's own class group (None for single-loss heads): for --dry-run."""
        if not self.multi_loss:
            return None
        return class_groups(num_classes, self.heads, seed, self.params.class_groups)

    def loss(self, logits, target):
        if self.weights is None:
            raise RuntimeError(f"{self.name}: call setup(num_classes, seed) before loss()")
        if (self.weights.device, self.weights.dtype) != (logits.device, logits.dtype):
            # moved once, not copied every step: a run's logits keep one device
            # and dtype (bf16 autocast is on or off for the whole run)
            self.weights = h2d(self.weights, logits.device).to(logits.dtype)
        return MH_LOSSES[self.params.mh_loss](logits, target, self.weights)


class MultiHeadSingleLoss(MultiHead):
    """Every head on plain CE (weights 1): the paper's 2HSL ablation."""

    multi_loss = False


def multi_head(name: str, heads: int, single_loss: bool = False) -> Method:
    cls = MultiHeadSingleLoss if single_loss else MultiHead
    return cls(name, MultiHeadParams(heads=heads))


@METHODS.register("2hsl", "2 heads, every head plain CE (weights 1)")
def hsl2() -> Method:
    return multi_head("2hsl", 2, single_loss=True)


@METHODS.register("2hml", "2 heads, multi-loss class weights")
def hml2() -> Method:
    return multi_head("2hml", 2)


@METHODS.register("4hml", "4 heads, multi-loss class weights (paper's best)")
def hml4() -> Method:
    return multi_head("4hml", 4)


@METHODS.register("mhml", "M heads, multi-loss: --set heads=M, or names like 3hml, 8hml (3hsl)")
def mhml() -> Method:
    return multi_head("mhml", 4)


def _resolve(name: str):
    """'8hml' -> multi_head(name='8hml', heads=8); '3hsl' -> single-loss, 3 heads."""
    hit = PATTERN.fullmatch(name)
    if hit is None:
        return None
    return multi_head, {"name": name, "heads": int(hit.group(1)),
                        "single_loss": hit.group(2) == "sl"}


METHODS.add_resolver(_resolve)
