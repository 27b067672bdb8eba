"""The `--method extra` loss baselines (issue 41): MDCA (+ FL, + LS), Brier and
weighted MMCE against hand-worked numbers and against numpy computations
written here from the papers' formulas (double loops over pairs for MMCE);
the group name, kept out of `--method all`."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bench.core.errors import BenchError
from bench.methods import EXTRA, METHODS, create_method, training_methods

LOSSES = ("mdca", "flmdca", "lsmdca", "brier", "mmce")  # the loss-only ones of the group


def as_logits(p) -> torch.Tensor:
    """[B, K] probabilities -> [B, 1, K] logits whose softmax they are."""
    return torch.log(torch.tensor(p, dtype=torch.float64))[:, None, :]


P = [[0.8, 0.2], [0.6, 0.4]]
Y = [0, 1]


def np_softmax(z):
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def np_mdca(p, y):
    k = p.shape[1]
    return np.mean([abs(p[:, c].mean() - np.mean(y == c)) for c in range(k)])


def np_mmce_weighted(p, y, width=0.4):
    """Kumar et al. 2018, weighted MMCE, as sums over pairs."""
    r, pred = p.max(1), p.argmax(1)
    right = [i for i in range(len(y)) if pred[i] == y[i]]
    wrong = [i for i in range(len(y)) if pred[i] != y[i]]
    k = lambda a, b: math.exp(-abs(r[a] - r[b]) / width)  # noqa: E731
    total = 0.0
    if right:
        total += sum((1 - r[i]) * (1 - r[j]) * k(i, j) for i in right for j in right) / len(
            right) ** 2
    if wrong:
        total += sum(r[i] * r[j] * k(i, j) for i in wrong for j in wrong) / len(wrong) ** 2
    if right and wrong:
        total -= 2 * sum((1 - r[i]) * r[j] * k(i, j) for i in right for j in wrong) / (
            len(right) * len(wrong))
    return math.sqrt(max(total, 0.0))


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(3)
    z = rng.normal(0, 2, (16, 5))
    y = rng.integers(0, 5, 16)
    return z, y


def loss(name, z, y, **overrides):
    m = create_method(name, overrides or None)
    return float(m.loss(torch.tensor(z, dtype=torch.float64)[:, None, :], torch.tensor(y)))


# ------------------------------------------------------------- hand-worked --
def test_mdca_hand_worked():
    """mean p = (.7, .3), class shares (.5, .5): (|.2| + |-.2|) / 2 = .2; the
    NLL is -(log .8 + log .4) / 2."""
    nll = -(math.log(0.8) + math.log(0.4)) / 2
    got = float(create_method("mdca").loss(as_logits(P), torch.tensor(Y)))
    assert got == pytest.approx(nll + 1.0 * 0.2)


def test_brier_hand_worked():
    """(.2^2 + .2^2 + .6^2 + .6^2) / 2 = .4"""
    got = float(create_method("brier").loss(as_logits(P), torch.tensor(Y)))
    assert got == pytest.approx(0.4)


def test_mmce_hand_worked():
    """The paper's formula. One right image (r = .8): MMCE_w^2 = (1 - .8)^2 k(.8, .8) = .04;
    with a wrong one (r = .6, predicted 0, label 1) beside it:
    .04 + .36 - 2 x .2 x .6 x exp(-.2 / .4)."""
    from bench.methods.mmce import mmce_weighted

    one = mmce_weighted(torch.log(torch.tensor([[0.8, 0.2]], dtype=torch.float64)),
                        torch.tensor([0]), 0.4, "paper")
    assert float(one) == pytest.approx(0.2, abs=1e-6)
    two = mmce_weighted(torch.log(torch.tensor([[0.8, 0.2], [0.6, 0.4]], dtype=torch.float64)),
                        torch.tensor([0, 1]), 0.4, "paper")
    assert float(two) == pytest.approx(math.sqrt(0.04 + 0.36 - 0.24 * math.exp(-0.5)), abs=1e-6)


# ---------------------------------------------- against numpy, toy batch --
def test_mdca_family_against_numpy(batch):
    z, y = batch
    p = np_softmax(z)
    nll = -np.log(p[np.arange(len(y)), y]).mean()
    m = np_mdca(p, y)
    assert loss("mdca", z, y) == pytest.approx(nll + m)
    assert loss("mdca", z, y, mdca_beta="3") == pytest.approx(nll + 3 * m)
    p_y = p[np.arange(len(y)), y]
    assert loss("flmdca", z, y) == pytest.approx(np.mean(-(1 - p_y) * np.log(p_y)) + m)
    q = 0.9 * np.eye(5)[y] + 0.1 / 5  # the torch form; the authors': test_authors_forms.py
    assert loss("lsmdca", z, y, mdca_smoothing="torch") == pytest.approx(
        np.mean(-(q * np.log(p)).sum(1)) + m)


def test_brier_against_numpy(batch):
    z, y = batch
    p = np_softmax(z)
    assert loss("brier", z, y) == pytest.approx(np.mean(((p - np.eye(5)[y]) ** 2).sum(1)))


def test_mmce_against_numpy(batch):
    z, y = batch
    p = np_softmax(z)
    assert 0 < (p.argmax(1) == y).sum() < len(y)  # both groups present
    nll = -np.log(p[np.arange(len(y)), y]).mean()
    # the paper's formula; the authors' code (the default): test_authors_forms.py
    assert loss("mmce", z, y, mmce_form="paper") == pytest.approx(
        nll + 2.0 * np_mmce_weighted(p, y), abs=1e-5)
    assert loss("mmce", z, y, mmce_width="0.1", mmce_lambda="1", mmce_form="paper") == \
        pytest.approx(nll + np_mmce_weighted(p, y, 0.1), abs=1e-5)


def test_mdca_and_mmce_gradients_are_finite_and_reach_every_logit(batch):
    z, y = batch
    for name in LOSSES:
        t = torch.tensor(z, dtype=torch.float64, requires_grad=True)
        create_method(name).loss(t[:, None, :], torch.tensor(y)).backward()
        assert torch.isfinite(t.grad).all() and (t.grad.abs() > 0).any(), name


# -------------------------------------------------------------- defaults --
def test_defaults_are_the_papers():
    assert create_method("mdca").params.mdca_beta == 1.0
    assert (create_method("flmdca").params.mdca_gamma, create_method("flmdca").params.mdca_beta) \
        == (1.0, 1.0)
    assert create_method("lsmdca").params.mdca_epsilon == 0.1
    p = create_method("mmce").params
    assert (p.mmce_lambda, p.mmce_width) == (2.0, 0.4)
    names = {n: create_method(n).display() for n in EXTRA}
    assert names == {"mdca": "NLL+MDCA", "flmdca": "FL+MDCA", "lsmdca": "LS+MDCA",
                     "brier": "Brier", "mmce": "MMCE", "mcdropout": "MC-Dropout",
                     "batchensemble": "BatchEnsemble", "packed": "Packed-Ens"}
    assert all(create_method(n).heads == 1 for n in LOSSES)


def test_bad_value_is_one_line():
    with pytest.raises(BenchError) as err:
        create_method("mmce", {"mmce_width": "0"})
    assert "mmce_width" in str(err.value) and "\n" not in str(err.value)


# ----------------------------------------------------------------- group --
def test_extra_group_is_out_of_all_and_resolves():
    from bench.core.registry import expand_names
    from bench.methods import METHOD_GROUPS

    assert not set(EXTRA) & set(training_methods())
    assert training_methods() == ["sl1h", "ls", "mbls", "mixup", "dca", "2hsl", "2hml", "4hml",
                                  "focal", "flsd53"]
    assert all(n in METHODS for n in EXTRA)
    assert expand_names("extra", training_methods(), "method", METHODS,
                        aliases=dict(METHOD_GROUPS)) == list(EXTRA)


def test_dry_run_of_the_group(capsys):
    from bench.cli.main import main

    assert main(["run", "--method", "extra", "--dataset", "digits", "--profile", "quick",
                 "--seeds", "1", "--dry-run", "--results", "/tmp/never-written-41"]) == 0
    out = capsys.readouterr().out
    for text in ("mdca_beta=1.0 mdca_gamma=1.0", "mdca_beta=1.0 mdca_epsilon=0.1",
                 "mmce_lambda=2.0 mmce_width=0.4", "mc_p=0.5 mc_passes=10", "be_members=4",
                 "pe_alpha=2 pe_members=4 pe_gamma=1", "8 runs"):
        assert text in out
