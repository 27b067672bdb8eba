"""AdaFocal (Ghosh, Schaaf and Gormley, NeurIPS 2022), one head: a focal loss
whose gamma is chosen per confidence bin and adapted after every epoch from
the validation split's calibration error in that bin, switching a bin to the
inverse-focal loss when its gamma would come near 0. As the authors' code
computes it (github 3mcloud/adafocal: losses/adafocal.py `AdaFocal`,
utils/train_utils.py, utils/metrics.py `adaECE_error_mukhoti`); the update
is driven by the loop's validation hook (bench.methods.adaptive).

**Loss.** B bins with inner edges e_1 <= ... <= e_{B-1} and gammas g_b. An
image with label probability p_y (the label's, not the top probability)
falls in bin b = #{i : e_i <= p_y} (so [e_b, e_{b+1}), the first bin open
below, the last open above); with s = sign(g_b):

    loss = mean_n -(1 - s p_y + 1e-20)^|g_b| log p_y

g_b > 0 is the focal loss, g_b < 0 the inverse focal (1 + p_y)^|g_b|; the
1e-20 is the authors' (it keeps the gradient finite at p_y = 1 when
|g_b| < 1). Their class sums over the batch; the harness takes the mean
(a factor of the batch size, as for dual focal; docs/methods.md).

**Update, after every epoch** (their update_gamma_every = -1). On the
validation split, r_n the top probability, a_n = 1[argmax = label], N images:
equal-mass edges E_0..E_B = the sorted r interpolated linearly at positions
i N / B (numpy.interp on 0..N-1, clamped at the ends); bin b holds the r_n
in (E_b, E_{b+1}] (so the smallest r, at E_0, is in none), and its gap
G_b = mean r - mean a over it (0 for an empty bin). `adafocal_precision`:

  float32 (default, the authors' utils/metrics.py): r = exp(max log_softmax)
      in float32, the membership tests in float32 (their float32 tensor
      against each edge, which torch rounds to float32), the bin means in
      float32; the edges themselves float64 (numpy.interp). Confidences
      that round to exactly 1.0 are tied and cross an edge together: with
      more than about N / B of them the top edges are all 1.0, those bins
      (1.0, 1.0] are empty, their gap is 0 and their gamma stops moving;
  float64 (what this harness ran before): r and the tests in float64, from
      the float32 logits.
Records made at float64 keep their hash: the key is out of it at that
value (Spec.legacy), and bench/core/codepins.json counts this module as the
same version as the one before the key (at float64 it computes what that did). Then, per bin:

    g' = g exp(lambda G_b)   if g > 0,   g exp(-lambda G_b)   otherwise
    if |g'| < S:  g' = -S if g' > 0 else S    (focal <-> inverse focal)
    g_b <- min(max(g', gamma_min), gamma_max)

and the loss's edges become e_i = E_i (i = 1..B-1). Before the first update
the bins are of equal width (e_i = i / B) and every g_b is gamma_init.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.core.errors import BenchError
from bench.core.settings import Range, ge, gt, setting

from .adaptive import AdaptiveMethod
from .base import METHODS


@dataclass(frozen=True)
class AdaFocalParams:
    # the authors' main.py defaults, their CIFAR-10 ResNet-50 run (the paper's
    # setting, Sec. 5: lambda 1, gamma in [-2, 20], S_th 0.2, 15 equal-mass bins)
    adafocal_bins: int = setting(15, "adafocal: equal-mass validation bins", range=ge(1))
    adafocal_lambda: float = setting(1.0, "adafocal: step of the gamma update", range=ge(0))
    # any real number each (a negative gamma is the inverse focal loss), so long
    # as min <= init <= max (check_params)
    adafocal_gamma_init: float = setting(1.0, "adafocal: every bin's gamma before any update",
                                         range=Range())
    adafocal_gamma_max: float = setting(20.0, "adafocal: gamma's upper clip", range=Range())
    adafocal_gamma_min: float = setting(-2.0, "adafocal: gamma's lower clip (< 0: inverse focal)",
                                        range=Range())
    adafocal_switch: float = setting(0.2, "adafocal: |gamma| below which a bin switches "
                                     "between focal and inverse focal", range=gt(0))
    # the released code by default; "float64" is the harness's earlier
    # statistics (its records keep their hash: legacy)
    adafocal_precision: str = setting(
        "float32", "adafocal: float32 (the authors': validation confidences and bin tests in "
        "float32) | float64", choices=("float32", "float64"), legacy="float64")


def adafocal_loss(z, y, gammas, inner_edges):
    """mean_n -(1 - s p_y + 1e-20)^|g| log p_y on [B, K] logits (module text):
    `gammas` [bins], `inner_edges` [bins - 1], tensors on z's device."""
    # torch on demand: `bench list` imports every method module (the METHODS registry)
    import torch
    import torch.nn.functional as F

    # at least float32 (bf16 logits under autocast): the bin is chosen from p_y
    z = z.to(torch.promote_types(z.dtype, torch.float32))
    logp_y = F.log_softmax(z, dim=1).gather(1, y[:, None]).squeeze(1)
    p_y = logp_y.exp()
    # the bin of each image in float64, as the authors compare Python floats
    b = torch.bucketize(p_y.detach().double(), inner_edges, right=True)
    g = gammas.index_select(0, b).to(z.dtype)
    return (-(1 - torch.sign(g) * p_y + 1e-20).pow(g.abs()) * logp_y).mean()


def equal_mass_gaps(conf: np.ndarray, correct: np.ndarray, bins: int):
    """(edges [bins + 1] float64, gaps [bins]) of the validation split
    (module text); membership and means in conf's own precision."""
    n = len(conf)
    edges = np.interp(np.linspace(0, n, bins + 1), np.arange(n), np.sort(conf))
    cut = edges.astype(conf.dtype)  # float32 conf: the edge rounded, as torch compares
    gaps = np.zeros(bins)
    for b in range(bins):
        inside = (conf > cut[b]) & (conf <= cut[b + 1])
        if inside.any():
            gaps[b] = float(conf[inside].mean()) - float(correct[inside].mean())
    return edges, gaps


def confidences(logits: np.ndarray, labels: np.ndarray, precision: str):
    """(r, a) of the validation logits [N, M, K] in `precision` (module text)."""
    if precision == "float64":
        prob = softmax64(logits)
        return prob.max(axis=1), (prob.argmax(axis=1) == labels).astype(np.float64)
    # torch on demand: `bench list` imports every method module (the METHODS registry)
    import torch

    z = torch.from_numpy(np.ascontiguousarray(np.asarray(logits, dtype=np.float32)[:, 0]))
    logp, pred = z.log_softmax(dim=1).max(dim=1)
    return logp.exp().numpy(), (pred.numpy() == labels).astype(np.float32)


def next_gammas(gammas: np.ndarray, gaps: np.ndarray, p: AdaFocalParams) -> np.ndarray:
    """The update rule of the module text, per bin."""
    out = np.empty_like(gammas)
    for b, (g, gap) in enumerate(zip(gammas, gaps)):
        g2 = g * np.exp(p.adafocal_lambda * gap) if g > 0 else g * np.exp(-p.adafocal_lambda * gap)
        if abs(g2) < p.adafocal_switch:
            g2 = -p.adafocal_switch if g2 > 0 else p.adafocal_switch
        out[b] = min(max(g2, p.adafocal_gamma_min), p.adafocal_gamma_max)
    return out


def softmax64(logits: np.ndarray) -> np.ndarray:
    """Mean over heads of the softmax [N, K], in float64 (the prediction)."""
    z = np.asarray(logits, dtype=np.float64)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).mean(axis=1)


class AdaFocal(AdaptiveMethod):
    display_name = "AdaFocal"
    Params = AdaFocalParams

    def check_params(self) -> None:
        super().check_params()
        p = self.params
        if not p.adafocal_gamma_min <= p.adafocal_gamma_init <= p.adafocal_gamma_max:
            raise BenchError(f"adafocal: adafocal_gamma_init={p.adafocal_gamma_init} must lie in "
                             f"[adafocal_gamma_min, adafocal_gamma_max] = "
                             f"[{p.adafocal_gamma_min}, {p.adafocal_gamma_max}]")

    def initial_state(self, num_classes: int) -> dict:
        n = self.params.adafocal_bins
        return {"gamma": np.full(n, float(self.params.adafocal_gamma_init)),
                "edges": np.arange(1, n) / n}

    def update(self, logits, labels, epoch: int) -> dict:
        conf, correct = confidences(logits, labels, self.params.adafocal_precision)
        edges, gaps = equal_mass_gaps(conf, correct, self.params.adafocal_bins)
        gammas = next_gammas(self.host_state()["gamma"], gaps, self.params)
        return {"gamma": gammas, "edges": edges[1:-1]}

    def loss(self, logits, target):
        state = self.live(logits)
        return adafocal_loss(logits[:, 0], target, state["gamma"], state["edges"])


@METHODS.register("adafocal", "AdaFocal: per-bin focal gamma adapted on validation "
                  "(Ghosh et al. 2022; --method recent)")
def adafocal() -> AdaFocal:
    return AdaFocal("adafocal")
