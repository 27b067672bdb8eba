"""The `--method recent` losses (issue 49): dual focal loss and ACLS against
hand-worked numbers and against straightforward per-image loops written
here following the authors' code's arithmetic (Linwei94/DualFocalLoss
dual_focal_loss.py; cvlab-yonsei/ACLS calibrate/losses/acls.py), values
and gradients; the group, kept out of `--method all`."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bench.core.errors import BenchError
from bench.methods import METHODS, RECENT, create_method, training_methods


def logits_of(p) -> torch.Tensor:
    """[B, K] probabilities -> [B, 1, K] logits whose softmax they are."""
    return torch.log(torch.tensor(p, dtype=torch.float64))[:, None, :]


def value(name, z, y, **overrides):
    return float(create_method(name, overrides or None).loss(z, torch.tensor(y)))


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(7)
    z = torch.tensor(rng.normal(0, 6, (12, 5)), dtype=torch.float64)
    z[3] = torch.tensor([15.0, 1.0, 1.0, -2.0, 0.0], dtype=torch.float64)  # a margin case
    y = torch.tensor(rng.integers(0, 5, 12))
    return z, y


# ----------------------------------------------------------- dual focal --
def test_dual_focal_hand_worked():
    # row 1: p_y 0.7, next below 0.2; row 2: nothing below p_y = 0.2 -> p_j = 0;
    # row 3: a tie at p_y = 0.4 is not "below" (strict), so p_j = 0.2
    p = [[0.7, 0.2, 0.1], [0.2, 0.5, 0.3], [0.4, 0.4, 0.2]]
    want = (0.5 ** 2 * -math.log(0.7) + 0.8 ** 2 * -math.log(0.2)
            + 0.8 ** 2 * -math.log(0.4)) / 3
    assert value("dualfocal", logits_of(p), [0, 0, 0], dfl_gamma=2.0) == pytest.approx(want, 1e-12)


def reference_dual_focal(z, y, gamma):
    """Per image: p_j = the largest p_k with p_k < p_y (0 if none), loss
    -(1 - p_y + p_j)^gamma log p_y, summed as the authors' default, / B."""
    total = 0
    for zn, yn in zip(z, y):
        p = torch.exp(zn - torch.logsumexp(zn, 0))
        below = [p[k] for k in range(len(p)) if p[k] < p[yn]]
        p_j = max(below) if below else torch.zeros((), dtype=z.dtype)
        total = total - (1 - p[yn] + p_j) ** gamma * torch.log(p[yn])
    return total / len(y)


@pytest.mark.parametrize("gamma", [0.0, 5.0])
def test_dual_focal_against_the_reference_loop(batch, gamma):
    z, y = batch
    a, b = z.clone().requires_grad_(), z.clone().requires_grad_()
    got = create_method("dualfocal", {"dfl_gamma": str(gamma)}).loss(a[:, None, :], y)
    want = reference_dual_focal(b, y, gamma)
    got.backward(), want.backward()
    assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-12)
    assert torch.allclose(a.grad, b.grad, rtol=1e-10, atol=1e-14)
    if gamma == 0:  # exponent 0: plain NLL
        assert float(got.detach()) == pytest.approx(float(torch.nn.functional.cross_entropy(z, y)), 1e-12)


# ----------------------------------------------------------------- ACLS --
def test_acls_hand_worked_value_and_gradient():
    # z = (12, 0, 3), M = 10: max term (12-10)^2 = 4; others relu(12-0-10)^2 = 4
    # and relu(12-3-10)^2 = 0, / (B (K-1)) = 2 -> R = 1*4 + 0.1*2 = 4.2
    z = torch.tensor([[[12.0, 0.0, 3.0]]], dtype=torch.float64, requires_grad=True)
    got = create_method("acls").loss(z, torch.tensor([1]))
    ce = -(0.0 - math.log(math.exp(12) + 1 + math.exp(3)))
    assert float(got.detach()) == pytest.approx(ce + 0.1 * 4.2, rel=1e-12)
    got.backward()
    p = torch.softmax(z.detach()[0, 0], 0)
    ce_grad = p - torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)
    # d(0.1 R)/dz: max 0.1*2*(12-10) = 0.4; z_1 (max held fixed) 0.1*0.1/2*2*2*(-1) = -0.02
    want = ce_grad + torch.tensor([0.4, -0.02, 0.0], dtype=torch.float64)
    assert torch.allclose(z.grad[0, 0], want, atol=1e-12)


def reference_acls(z, y, alpha=0.1, lam_pos=1.0, lam_neg=0.1, margin=10.0):
    """CE + alpha R with R as the authors' get_reg: the max logit's excess over
    the margin, and every other logit's distance to the detached max beyond it."""
    b, k = z.shape
    pos, neg = 0, 0
    for n in range(b):
        top = float(z[n].max())
        for c in range(k):
            if float(z[n, c]) == top:
                pos = pos + torch.clamp(z[n].max() - margin, min=0) ** 2
            else:
                neg = neg + torch.clamp(top - z[n, c] - margin, min=0) ** 2
    reg = lam_pos * pos / b + lam_neg * neg / (b * (k - 1))
    return torch.nn.functional.cross_entropy(z, y) + alpha * reg


def test_acls_against_the_reference_loop(batch):
    z, y = batch
    a, b = z.clone().requires_grad_(), z.clone().requires_grad_()
    got = create_method("acls").loss(a[:, None, :], y)
    want = reference_acls(b, y)
    got.backward(), want.backward()
    assert float(got.detach() - torch.nn.functional.cross_entropy(z, y)) > 0.01  # margins bite
    assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-12)
    assert torch.allclose(a.grad, b.grad, rtol=1e-10, atol=1e-14)


# ------------------------------------------------------------- exact ties --
def authors_dual_focal_sum(z, y, gamma):
    """DualFocalLoss.forward as their code has it (size_average=False: the sum):
    the mask `lt(p, p_y) * 1`, p_j the top of mask * p by torch.topk."""
    logp = torch.nn.functional.log_softmax(z, dim=1)
    p = logp.exp()
    logp_y = logp.gather(1, y.view(-1, 1)).view(-1)
    p_y = logp_y.exp()
    mask = torch.lt(p, p_y.reshape(p_y.shape[0], 1)) * 1
    p_j = torch.topk(mask * p, 1)[0].squeeze()
    return (-1 * (1 - p_y + p_j) ** gamma * logp_y).sum()


def authors_acls_reg(z, pos_lambda=1.0, neg_lambda=0.1, margin=10.0):
    """ACLS.get_reg as their code has it: the max by torch.max, repeated over
    the classes, the indicator on detached copies."""
    top = z.max(dim=1)[0].unsqueeze(dim=1).repeat(1, z.shape[1])
    indicator = (top.clone().detach() == z.clone().detach()).float()
    b, k = z.size()
    neg_dist = top.clone().detach() - z
    pos = indicator * torch.relu(top - margin) ** 2
    neg = (1.0 - indicator) * torch.relu(neg_dist - margin) ** 2
    return pos_lambda * (pos.sum() / (b * 1.0)) + neg_lambda * (neg.sum() / (b * (k - 1.0)))


def test_acls_tie_gives_the_gradient_to_one_entry_as_theirs():
    # row 0: the top tied at 12 > M = 10; row 1: tied at 4 < M (no positive
    # term); row 2: no tie (the hand-worked case above)
    z = torch.tensor([[12.0, 12.0, 3.0], [4.0, 4.0, -7.0], [12.0, 0.0, 3.0]], dtype=torch.float64)
    y = torch.tensor([0, 1, 1])
    a, b = z.clone().requires_grad_(), z.clone().requires_grad_()
    create_method("acls").loss(a[:, None, :], y).backward()
    want = torch.nn.functional.cross_entropy(b, y) + 0.1 * authors_acls_reg(b)
    want.backward()
    assert torch.allclose(a.grad, b.grad, rtol=0, atol=1e-15)
    # by hand, row 0's share of 0.1 R: both tied entries count, 2 (12 - 10)^2,
    # / B = 3; its gradient 0.1 * 2 * 2 * 2 / 3 all to the one entry torch.max
    # returns (amax: half each); row 1 the neg term relu(4 - (-7) - 10)^2 only
    ce = z.clone().requires_grad_()
    torch.nn.functional.cross_entropy(ce, y).backward()
    reg = (a.grad - ce.grad)[0, :2]
    assert sorted(reg.tolist()) == pytest.approx([0.0, 0.8 / 3], abs=1e-15)


def test_dual_focal_tie_gives_the_gradient_to_one_entry_as_theirs():
    # label 0 on top; classes 1 and 2 tied just below it: p_j is either of them
    z = torch.tensor([[2.0, 1.0, 1.0, 0.0], [0.5, 3.0, 0.5, 0.5]], dtype=torch.float64)
    y = torch.tensor([0, 0])
    a, b = z.clone().requires_grad_(), z.clone().requires_grad_()
    create_method("dualfocal").loss(a[:, None, :], y).backward()
    (authors_dual_focal_sum(b, y, 5.0) / len(y)).backward()  # theirs sums; the harness: mean
    assert torch.allclose(a.grad, b.grad, rtol=0, atol=1e-15)
    # amax would split p_j's gradient evenly, leaving the tied logits'
    # gradients equal; one entry takes it all here
    assert abs(float(a.grad[0, 1] - a.grad[0, 2])) > 1e-3
    # row 1: p_y ties classes 2 and 3 at the bottom: none is below it, p_j = 0
    # (a masked entry), no gradient through p_j, so the two stay symmetric
    assert float(a.grad[1, 2]) == float(a.grad[1, 3])


# ------------------------------------------------------- declared values --
def test_defaults_names_and_a_bad_value():
    p = create_method("acls").params
    assert (p.acls_alpha, p.acls_pos_lambda, p.acls_neg_lambda, p.acls_margin) == (0.1, 1.0, 0.1, 10.0)
    assert create_method("dualfocal").params.dfl_gamma == 5.0
    assert {n: create_method(n).display() for n in RECENT} == {
        "dualfocal": "DFL", "acls": "ACLS", "rankmixup": "RankMixup", "mimo": "MIMO",
        "adafocal": "AdaFocal", "cals": "CALS"}
    p = create_method("rankmixup").params
    assert (p.rm_alpha, p.rm_margin, p.rm_mix_alpha, p.rm_form) == (0.1, 2.0, 2.0, "authors")
    assert all(create_method(n).heads == 1 for n in RECENT if n != "mimo")  # MIMO: M members
    with pytest.raises(BenchError) as err:
        create_method("acls", {"acls_margin": "-1"})
    assert "acls_margin" in str(err.value) and "\n" not in str(err.value)


def test_recent_group_is_out_of_all_and_resolves():
    from bench.core.registry import expand_names
    from bench.methods import METHOD_GROUPS

    assert not set(RECENT) & set(training_methods()) and all(n in METHODS for n in RECENT)
    assert expand_names("recent", training_methods(), "method", METHODS,
                        aliases=dict(METHOD_GROUPS)) == list(RECENT)


# ------------------------------------------------------------ RankMixup --
def test_rankmixup_hand_worked():
    # clean tops 3 and 1, mixed tops 2 and 4, margin 2: relu(2-3+2) = 1 and
    # relu(4-1+2) = 5; the second pair is of one class (t' has a 1).
    # authors: mean of the mask (1/2) x mean of the terms (3) = 1.5;
    # rows: the mean of the masked terms, (1 + 0) / 2; each times alpha 0.1
    z = torch.tensor([[3.0, 0.0], [1.0, 0.0], [2.0, 0.0], [4.0, 0.0]], dtype=torch.float64)
    y, y_perm = torch.tensor([0, 1]), torch.tensor([1, 1])
    lam, rest = torch.tensor(0.25), torch.tensor(0.75)
    ce = float(torch.nn.functional.cross_entropy(z[:2], y))
    # the gradient of the ranking term on the tops (column 0), clean rows 0-1
    # then mixed rows 2-3: authors 0.1 * 1/2 * 1/2 = 0.025 on every mixed top
    # and minus that on every clean one (the same-class pair's image too:
    # the mask scales all terms); rows 0.1 / 2 on the two-class pair's alone
    tops = {"authors": [-0.025, -0.025, 0.025, 0.025], "rows": [-0.05, 0.0, 0.05, 0.0]}
    for form, term in (("authors", 1.5), ("rows", 0.5)):
        m = create_method("rankmixup", {"rm_form": form})
        zz = z.clone().requires_grad_()
        got = m.loss(zz[:, None, :], (y, y_perm, lam, rest))
        assert float(got.detach()) == pytest.approx(ce + 0.1 * term, rel=1e-12), form
        got.backward()
        clean = z[:2].clone().requires_grad_()
        torch.nn.functional.cross_entropy(clean, y).backward()
        rank = zz.grad.clone()
        rank[:2] -= clean.grad
        assert rank[:, 0].tolist() == pytest.approx(tops[form], abs=1e-15), form
        assert rank[:, 1].tolist() == pytest.approx([0.0] * 4, abs=1e-15), form


def authors_mrl(inputs, targets, mixup, target_re, margin=2.0, alpha=0.1):
    """RankMixup_MRL.forward's arithmetic as their code has it (mask [B]
    times diff [B, 1], broadcast to [B, B]; torch.max for the tops)."""
    ce = torch.nn.functional.cross_entropy(inputs, targets)
    mask = (target_re == 1.0).sum(dim=1).reshape(1, -1)
    mask = mask.sum(dim=0) == 0.0
    diff = mixup.max(dim=1)[0].unsqueeze(dim=1) - inputs.max(dim=1)[0].unsqueeze(dim=1)
    return ce + alpha * (mask * torch.relu(diff + margin)).mean()


def reference_rows(z, zm, y, y_perm, lam, rest, margin=2.0, alpha=0.1):
    """The `rows` reading per image: the mixed target row in float32,
    skipped when an entry is exactly 1; relu(max z' - max z + margin)."""
    k = z.shape[1]
    total = 0
    for n in range(len(y)):
        t = [np.float32(lam) * np.float32(c == y[n])
             + np.float32(rest) * np.float32(c == y_perm[n]) for c in range(k)]
        if any(v == np.float32(1.0) for v in t):
            continue
        total = total + torch.clamp(zm[n].max() - z[n].max() + margin, min=0)
    return torch.nn.functional.cross_entropy(z, torch.tensor(y)) + alpha * total / len(y)


def mixed_batch(batch, form, seed=5):
    """(method, logits [2B, 1, K] to backpropagate, a detached copy, the
    loss's target, the float32 mixed target rows t') of one drawn step."""
    z, y = batch
    m = create_method("rankmixup", {"rm_form": form})
    d = m.draw(len(y), torch.Generator().manual_seed(seed))
    x = torch.randn(len(y), 3, dtype=torch.float64)
    xs, target = m.staged_batch(x, y, d)
    assert xs.shape[0] == 2 * len(y)
    assert torch.allclose(xs[len(y):], float(d["lam"][0]) * x
                          + float(d["lam"][1]) * x[d["perm"]], atol=1e-6)
    onehot = torch.nn.functional.one_hot(y, z.shape[1]).float()
    t_re = d["lam"][0] * onehot + d["lam"][1] * onehot[d["perm"]]  # theirs: float32
    zz = torch.cat([z, z.flip(0) * 0.5]).float().requires_grad_()
    return m, zz, zz.detach().clone().requires_grad_(), target, t_re


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_rankmixup_equals_the_authors_loss(batch, seed):
    """Float32 as theirs: equal to 1e-6 (a few float32 eps of the loss's
    scale, ~10) in value and gradient, on steps with same-class pairs."""
    m, zz, ref, target, t_re = mixed_batch(batch, "authors", seed)
    b = len(batch[1])
    pairs = int((t_re == 1.0).any(dim=1).sum())
    assert 0 < pairs < b  # some same-class pairs, not all: where the readings differ
    got = m.loss(zz[:, None, :], target)
    want = authors_mrl(ref[:b], batch[1], ref[b:], t_re)
    got.backward(), want.backward()
    assert abs(float(got) - float(want)) <= 1e-6
    assert torch.allclose(zz.grad, ref.grad, rtol=0, atol=1e-6)
    rows = create_method("rankmixup", {"rm_form": "rows"}).loss(zz[:, None, :], target)
    assert abs(float(rows) - float(want)) > 1e-4  # the test can tell the readings apart


def test_rankmixup_rows_against_the_reference_loop(batch):
    m, zz, ref, target, _ = mixed_batch(batch, "rows")
    zz, ref = (t.detach().double().requires_grad_() for t in (zz, ref))
    z, y = batch
    got = m.loss(zz[:, None, :], target)
    _, y_perm, lam, rest = target
    want = reference_rows(ref[:len(y)], ref[len(y):], y.tolist(), y_perm.tolist(),
                          float(lam), float(rest))
    got.backward(), want.backward()
    assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-12)
    assert torch.allclose(zz.grad, ref.grad, atol=1e-14)


def test_rankmixup_tie_gives_the_gradient_to_one_entry():
    """A clean row with two tied top logits: torch.max (theirs, `authors`)
    gives the whole gradient of its top to one of them, amax (`rows`) half to each."""
    z = torch.tensor([[2.0, 2.0, 0.0], [0.0, 1.0, 3.0],
                      [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    target = (torch.tensor([0, 2]), torch.tensor([1, 0]), torch.tensor(0.5), torch.tensor(0.5))
    grads = {}
    for form in ("authors", "rows"):
        zz = z.clone().requires_grad_()
        create_method("rankmixup", {"rm_form": form}).loss(zz[:, None, :], target).backward()
        ce = z[:2].clone().requires_grad_()
        torch.nn.functional.cross_entropy(ce, target[0]).backward()
        grads[form] = (zz.grad[0, :2] - ce.grad[0, :2]).tolist()  # the ranking term's part
    # d/dz of -alpha * mean_n d_n: -0.1 / 2 on the top of row 0
    assert sorted(grads["authors"]) == pytest.approx([-0.05, 0.0], abs=1e-15)
    assert grads["rows"] == pytest.approx([-0.025, -0.025], abs=1e-15)


def test_rankmixup_num_mixup_is_one():
    assert create_method("rankmixup").params.rm_num_mixup == 1
    with pytest.raises(BenchError) as err:
        create_method("rankmixup", {"rm_num_mixup": "3"})
    assert "rm_num_mixup=3" in str(err.value) and "\n" not in str(err.value)


def test_rankmixup_fuses_only_with_its_like():
    """Its step feeds the model 2B images: `--fuse methods` must not stack it
    with a B-image method (torch.stack would fail), while mixup and sl1h still go together."""
    from types import SimpleNamespace

    from bench.train.groups import methods_key

    def key(method):
        return methods_key(SimpleNamespace(
            method=method, method_overrides=(), dataset="d", backbone="b", train=1, sizes=2,
            data_root="r", load_options=3, weights=None, results="x", device="cpu"))

    assert key("rankmixup") != key("sl1h") == key("mixup") == key("dualfocal")
