"""AdaFocal's per-epoch update against the authors' arithmetic, transcribed
here from github 3mcloud/adafocal: utils/metrics.py
(`test_classification_net_adafocal`: the confidences; `adaECE_error_mukhoti`:
the equal-mass bins and their gaps) and losses/adafocal.py
(`update_bin_stats`: the gamma rule), on validation sets where many
confidences are exactly 1.0 in float32. There their top edges are all 1.0,
the bins (1.0, 1.0] are empty and those gammas stop moving; the harness's
earlier float64 statistics (`adafocal_precision=float64`) keep them moving."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bench.methods import create_method

BINS, N, K = 15, 600, 10


def authors_update(gammas, logits, labels, lamda=1.0, switch=0.2, gmin=-2.0, gmax=20.0):
    """(next gammas, next inner edges) as their code computes them, float32
    logits [N, K] on the CPU."""
    log_conf, predictions = torch.max(F.log_softmax(logits, dim=1), dim=1)
    confs = log_conf.exp().numpy().tolist()
    confidences = torch.FloatTensor(confs)
    accuracies = torch.FloatTensor(predictions.numpy().tolist()).eq(
        torch.FloatTensor(labels.tolist()))
    npt = len(confidences)
    edges = np.interp(np.linspace(0, npt, BINS + 1), np.arange(npt), np.sort(confidences))
    _, bounds = np.histogram(confidences, edges)
    gaps = []
    for lower, upper in zip(bounds[:-1], bounds[1:]):
        in_bin = confidences.gt(lower.item()) * confidences.le(upper.item())
        if in_bin.float().mean().item() > 0:
            acc, conf = accuracies[in_bin].float().mean(), confidences[in_bin].mean()
        else:
            acc, conf = torch.zeros(1), torch.zeros(1)
        gaps.append(conf.item() - acc.item())
    out = []
    for g, gap in zip(gammas, gaps):
        nxt = g * math.exp(lamda * gap) if g > 0 else g * math.exp(-lamda * gap)
        if abs(nxt) < switch:
            nxt = -switch if nxt > 0 else switch
        out.append(max(min(nxt, gmax), gmin))
    return np.array(out), np.array(bounds[1:-1])


def validation_set(share_at_one: float, seed: int):
    """float32 logits [N, K] and labels: `share_at_one` of the images with a
    top logit 20..25 above the rest (confidence 1 - 1e-8..1e-10: exactly 1.0
    in float32, below 1 in float64), 90% of them right; the rest spread."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 1.5, (N, K))
    z[:, 0] += rng.uniform(0, 4, N)
    labels = np.where(rng.random(N) < 0.7, 0, rng.integers(0, K, N))
    top = rng.permutation(N)[:round(share_at_one * N)]
    z[top] = rng.normal(0, 0.1, (len(top), K))
    z[top, 0] += rng.uniform(20, 25, len(top))
    labels[top] = np.where(rng.random(len(top)) < 0.9, 0, 1)
    return z.astype(np.float32), labels


def harness_chain(precision: str, sets) -> list:
    m = create_method("adafocal", {"adafocal_precision": precision})
    m.start(K, "cpu")
    out = []
    for epoch, (z, y) in enumerate(sets):
        m.on_validation(z[:, None, :], y, epoch)
        out.append({k: v.copy() for k, v in m.host_state().items()})  # CPU: views
    return out


@pytest.mark.parametrize("share", [0.002, 0.03, 0.1, 0.3])
def test_adafocal_update_equals_the_authors_with_confidences_at_one(share):
    sets = [validation_set(share, seed) for seed in range(4)]
    ones = (torch.from_numpy(sets[0][0]).log_softmax(1).max(1)[0].exp() == 1.0).sum()
    assert int(ones) == round(share * N)  # the construction gives exact float32 ties at 1.0
    gammas, got = np.ones(BINS), harness_chain("float32", sets)
    old = harness_chain("float64", sets)
    for (z, y), state, legacy in zip(sets, got, old):
        prev = gammas
        gammas, edges = authors_update(list(gammas), torch.from_numpy(z), y)
        np.testing.assert_array_equal(state["edges"], edges)  # the same float32 sort, interp
        # float32 bin means (numpy's and torch's sums may round apart): a few
        # float32 eps of the gap, through exp, relative on gamma
        np.testing.assert_allclose(state["gamma"], gammas, rtol=1e-6, atol=0)
        # bin b >= 1 is (E_b, E_b+1]: empty, its gamma unmoved, where E_b = 1.0
        stuck = edges == 1.0
        assert stuck.any() == (share * N > N / BINS)
        assert np.array_equal(gammas[1:][stuck], prev[1:][stuck])
    # the earlier float64 statistics: apart where the top edges are ties at
    # 1.0 (the test can fail), else only by the means' rounding here
    apart = np.abs(old[-1]["gamma"] - got[-1]["gamma"]).max()
    assert apart > 1e-2 if share * N > N / BINS else apart < 1e-5


def test_float64_is_the_legacy_reading_out_of_the_hash():
    default, legacy = (create_method("adafocal", o) for o in
                       (None, {"adafocal_precision": "float64"}))
    assert default.params.adafocal_precision == "float32"
    assert "adafocal_precision" in default.params_dict()
    assert "adafocal_precision" not in legacy.params_dict()
