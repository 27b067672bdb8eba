"""AdaFocal and CALS (issue 49, `--method recent`): each loss against a
hand-worked number and against a per-image reference loop written here from
the authors' code's arithmetic (3mcloud/adafocal losses/adafocal.py;
by-liu/CALS calibrate/lagrangian/aug_lagrangian_class.py, penalty.py `phr`),
values and gradients; each update rule against a hand-worked example."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bench.methods import create_method
from bench.methods.cals import next_multipliers


def logits_of(p) -> torch.Tensor:
    """[B, K] probabilities -> [B, 1, K] logits whose softmax they are."""
    return torch.log(torch.tensor(p, dtype=torch.float64))[:, None, :]


def with_state(name, state: dict, **overrides):
    m = create_method(name, {k: repr(v) for k, v in overrides.items()} or None)
    m.start(len(state.get("lambda", [0, 0, 0])), "cpu")
    m.load_adaptive_state({k: np.asarray(v, dtype=np.float64) for k, v in state.items()})
    return m


# ------------------------------------------------------------- AdaFocal --
def test_adafocal_loss_hand_worked():
    # 3 bins: [0, 0.3) gamma 2, [0.3, 0.6) gamma -1 (inverse focal), [0.6, 1] gamma 0.5;
    # p_y = 0.6 sits on an edge: the upper bin
    m = with_state("adafocal", {"gamma": [2.0, -1.0, 0.5], "edges": [0.3, 0.6]}, adafocal_bins=3)
    p = [[0.2, 0.8], [0.5, 0.5], [0.6, 0.4], [0.9, 0.1]]
    want = (0.8 ** 2 * -math.log(0.2) + 1.5 * -math.log(0.5)
            + 0.4 ** 0.5 * -math.log(0.6) + 0.1 ** 0.5 * -math.log(0.9)) / 4
    got = float(m.loss(logits_of(p), torch.tensor([0, 0, 0, 0])))
    assert got == pytest.approx(want, rel=1e-12)


def reference_adafocal(z, y, gammas, lowers, uppers):
    """The authors' arithmetic per image: walk the bins in order (the first
    bin open below, the last open above), sign and magnitude of its gamma,
    -(1 - s p + 1e-20)^|g| log p, summed, then / B."""
    total = 0
    for zn, yn in zip(z, y):
        logp = zn[yn] - torch.logsumexp(zn, 0)
        p = torch.exp(logp)
        for b in range(len(gammas)):
            if (b == 0 and p.item() < uppers[b]) or (b == len(gammas) - 1 and p.item() >= lowers[b]) \
                    or lowers[b] <= p.item() < uppers[b]:
                break
        g = gammas[b]
        s = 1.0 if g > 0 else (-1.0 if g < 0 else 0.0)
        total = total - (1 - s * p + 1e-20) ** abs(g) * logp
    return total / len(y)


def test_adafocal_loss_against_the_reference_loop():
    rng = np.random.default_rng(3)
    z = torch.tensor(rng.normal(0, 3, (16, 5)))
    y = torch.tensor(rng.integers(0, 5, 16))
    gammas = [3.0, -0.2, 1.5, -2.0, 20.0]
    edges = [0.05, 0.2, 0.2, 0.7]  # a repeated edge: an empty bin, as equal-mass bins give
    m = with_state("adafocal", {"gamma": gammas, "edges": edges}, adafocal_bins=5)
    a, b = z.clone().requires_grad_(), z.clone().requires_grad_()
    got = m.loss(a[:, None, :], y)
    want = reference_adafocal(b, y, gammas, [0.0] + edges, edges + [1.0])
    got.backward(), want.backward()
    assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-12)
    assert torch.allclose(a.grad, b.grad, rtol=1e-10, atol=1e-14)


def val_logits(conf, correct, k=4):
    """[N, 1, K] logits whose top probability is conf[n], on class 0; label 0
    when correct, else 1."""
    p = [[c] + [(1 - c) / (k - 1)] * (k - 1) for c in conf]
    return np.log(np.array(p))[:, None, :].astype(np.float32), np.array([0 if c else 1 for c in correct])


def test_adafocal_update_hand_worked():
    # 6 validation images, 3 equal-mass bins: edges = sorted confidences at
    # positions 0, 2, 4, 6 (clamped to the last) = 0.3, 0.5, 0.8, 0.9; bins
    # (0.3, 0.5] = {0.4 wrong, 0.5 right}, (0.5, 0.8] = {0.6, 0.8 right},
    # (0.8, 0.9] = {0.9 wrong}; 0.3 (on the lowest edge) in none.
    # gaps: 0.45 - 0.5 = -0.05, 0.7 - 1 = -0.3, 0.9 - 0 = 0.9
    z, y = val_logits([0.5, 0.9, 0.3, 0.8, 0.4, 0.6], [1, 0, 1, 1, 0, 1])
    m = with_state("adafocal", {"gamma": [1.0, 0.25, -1.0], "edges": [1 / 3, 2 / 3]},
                   adafocal_bins=3, adafocal_gamma_min=-0.3)
    m.on_validation(z, y, epoch=0)
    s = m.host_state()
    # bin 1: 1 e^-0.05; bin 2: 0.25 e^-0.3 = 0.185 < 0.2 switches to -0.2;
    # bin 3: -1 e^-0.9 = -0.407, clipped at gamma_min -0.3
    np.testing.assert_allclose(s["gamma"], [math.exp(-0.05), -0.2, -0.3], rtol=1e-6)
    np.testing.assert_allclose(s["edges"], [0.5, 0.8], rtol=1e-6)
    # a negative gamma moves the other way: -0.5 with gap -0.3 -> -0.5 e^0.3
    m = with_state("adafocal", {"gamma": [1.0, -0.5, 1.0], "edges": [1 / 3, 2 / 3]},
                   adafocal_bins=3)
    m.on_validation(z, y, epoch=0)
    assert m.host_state()["gamma"][1] == pytest.approx(-0.5 * math.exp(0.3), rel=1e-6)


# ----------------------------------------------------------------- CALS --
LAM, RHO = [0.5, 1.0, 2.0], [1.0, 2.0, 1.0]


def test_cals_loss_hand_worked():
    # margin 10; h = (max - z - 10) / 10: row 1 (-1, 0.2, 0.1), row 2 (-0.5, -1, -0.8).
    # PHR with x = lambda + rho h: (x^2 - lambda^2) / (2 rho) if x >= 0, else -lambda^2 / (2 rho)
    # row 1: x = -0.5, 1.4, 2.1 -> -0.125, 0.24, 0.205
    # row 2: x = 0 (>= 0), -1, 1.2 -> -0.125, -0.25, -1.28; mean of six: -1.335 / 6
    z = torch.tensor([[12.0, 0.0, 1.0], [0.0, 5.0, 3.0]], dtype=torch.float64)
    y = torch.tensor([0, 2])
    ce = ((math.log(math.exp(12) + 1 + math.e) - 12)
          + (math.log(1 + math.exp(5) + math.exp(3)) - 3)) / 2
    m = with_state("cals", {"lambda": LAM, "rho": RHO, "c_prev": [0, 0, 0], "has_prev": [0]})
    assert float(m.loss(z[:, None, :], y)) == pytest.approx(ce - 1.335 / 6, rel=1e-12)


def reference_cals(z, y, lam, rho, margin=10.0):
    """CE + the PHR penalty entry by entry, as penalty.py's `phr` branches."""
    ce = torch.nn.functional.cross_entropy(z, y)
    total, count = 0, 0
    for zn in z:
        top = max(zn)
        for k in range(len(zn)):
            h = (top - zn[k] - margin) / margin
            x = lam[k] + rho[k] * h
            total = total + ((x ** 2 - lam[k] ** 2) / (2 * rho[k]) if x >= 0
                             else -lam[k] ** 2 / (2 * rho[k]) + 0 * h)
            count += 1
    return ce + total / count


def test_cals_loss_against_the_reference_loop():
    rng = np.random.default_rng(5)
    z = torch.tensor(rng.normal(0, 8, (10, 3)))
    y = torch.tensor(rng.integers(0, 3, 10))
    m = with_state("cals", {"lambda": LAM, "rho": RHO, "c_prev": [0, 0, 0], "has_prev": [0]})
    a, b = z.clone().requires_grad_(), z.clone().requires_grad_()
    got, want = m.loss(a[:, None, :], y), reference_cals(b, y, LAM, RHO)
    got.backward(), want.backward()
    assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-12)
    assert torch.allclose(a.grad, b.grad, rtol=1e-10, atol=1e-14)


H = np.array([[-1.0, 0.2, 0.1], [-0.5, -1.0, -0.8], [-1.0, 2.0, 0.3]])
PREV = {"lambda": np.array(LAM), "rho": np.array(RHO), "c_prev": np.array([-0.5, 0.3, -0.2]),
        "has_prev": np.ones(1)}


def test_cals_update_hand_worked():
    p = create_method("cals").params
    # lambda: x = lambda + rho h clipped below at 0, then to [1e-6, 1e6], averaged:
    # class 0: x = -0.5, 0, -0.5 -> all 1e-6; class 1: 1.4, -1 -> 1e-6, 5;
    # class 2: 2.1, 1.2, 2.3. Mean constraints c = (-2.5/3, 0.4, -0.4/3).
    new = next_multipliers(H, PREV, epoch=9, p=p)  # the 10th epoch: rho may move
    np.testing.assert_allclose(new["lambda"], [1e-6, (6.4 + 1e-6) / 3, 5.6 / 3], rtol=1e-12)
    np.testing.assert_allclose(new["c_prev"], [-2.5 / 3, 0.4, -0.4 / 3], rtol=1e-12)
    # rho grows by 1.2 where c > 0.9 max(c_prev, 0) = (0, 0.27, 0): class 1 only
    np.testing.assert_allclose(new["rho"], [1.0, 2.4, 1.0], rtol=1e-12)
    assert list(next_multipliers(H, PREV, epoch=8, p=p)["rho"]) == RHO  # not a 10th epoch
    first = {**PREV, "has_prev": np.zeros(1)}
    assert list(next_multipliers(H, first, epoch=9, p=p)["rho"]) == RHO  # no previous c
    capped = create_method("cals", {"cals_rho_max": "2.2"}).params
    np.testing.assert_allclose(next_multipliers(H, PREV, 9, capped)["rho"], [1.0, 2.2, 1.0])


def test_cals_update_reads_the_validation_logits():
    z = np.array([[12.0, 0.0, 1.0], [0.0, 5.0, 3.0]], dtype=np.float32)[:, None, :]
    m = with_state("cals", {k: v for k, v in PREV.items()})
    m.on_validation(z, np.array([0, 2]), epoch=0)
    # h rows (-1, 0.2, 0.1), (-0.5, -1, -0.8): class 1 x = 1.4, -1 -> (1.4 + 1e-6) / 2
    np.testing.assert_allclose(m.host_state()["lambda"], [1e-6, (1.4 + 1e-6) / 2, 1.65], rtol=1e-6)


@pytest.mark.parametrize("name", ["adafocal", "cals"])
def test_bf16_logits_give_the_float32_loss_of_their_values(name):
    # under bf16 autocast the loss is computed from the bf16 logits in float32
    # (AdaFocal picks each image's bin from p_y: bf16 would move images across edges)
    z = torch.tensor(np.random.default_rng(1).normal(0, 4, (8, 1, 5)), dtype=torch.float32)
    y = torch.arange(8) % 5
    zb = z.bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = create_method(name).loss(zb, y)
    assert got.dtype == torch.float32
    assert float(got) == pytest.approx(float(create_method(name).loss(zb.float(), y)), rel=1e-6)
