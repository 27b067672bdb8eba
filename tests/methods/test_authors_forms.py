"""The extra baselines as their authors ran them (issue 49, point 3): LS+MDCA's
smoothing and weighted MMCE as the authors' code computes them (the default),
the earlier formulas one named key away; Packed-Ensembles' gamma rule as
TorchUncertainty's packed ResNets. Each against numbers written here from
the formulas (loops, hand-worked values), and the record identities: the
new defaults hash apart from the records of the old formulas, which keep
theirs under the named option (hashes printed by the harness before this
change, commit 2e4bc89, through `bench.api.run(..., dry_run=True)`)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torchvision
from torch import nn

from bench import api
from bench.core.settings import recorded
from bench.methods import create_method
from bench.methods.mmce import mmce_weighted
from bench.train.backbones import build_model
from bench.train.evaluate import arch_of

# digits, profile quick, seed 0, at commit 2e4bc89 (the old formulas)
OLD = {"lsmdca": "be8e3d3f18ac", "mmce": "76f026390452", "packed": "64f3e01aabfa",
       "packed_gamma2": "29365d2c5fc0", "mdca": "4e0f8272b392", "flmdca": "3661c047aa62"}


def np_softmax(z):
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def authors_mmce(p, y, width=0.4):
    """The authors' MMCE_weighted step by step: the right and the wrong
    images' confidences, each pair sum a mean over its pair matrix, then
    divided again by (size^2 + 1e-5); 0 unless both groups are present."""
    r = p.max(1)
    right = [r[i] for i in range(len(y)) if p[i].argmax() == y[i]]
    wrong = [r[i] for i in range(len(y)) if p[i].argmax() != y[i]]
    if not right or not wrong:
        return 0.0
    m, n = len(right), len(wrong)

    def mean_pairs(u, v, wu, wv):
        return sum(wu(a) * wv(b) * math.exp(-abs(a - b) / width) for a in u for b in v) / (
            len(u) * len(v))

    cc = mean_pairs(right, right, lambda a: 1 - a, lambda b: 1 - b)
    ww = mean_pairs(wrong, wrong, lambda a: a, lambda b: b)
    cw = mean_pairs(right, wrong, lambda a: 1 - a, lambda b: b)
    err = cc / (m * m + 1e-5) + ww / (n * n + 1e-5) - 2 * cw / (m * n + 1e-5)
    return math.sqrt(err + 1e-10)


def as_z(p):
    return torch.log(torch.tensor(p, dtype=torch.float64))


# ---------------------------------------------------------------- LS+MDCA --
def test_lsmdca_smoothing_hand_worked():
    """K = 2, p = (.8, .2), label 0, alpha 0.1: the authors' target (.9, .1),
    torch's (.95, .05); MDCA = |.8 - 1| = .2 on both classes."""
    y = torch.tensor([0])
    z = as_z([[0.8, 0.2]])[:, None, :]
    authors = float(create_method("lsmdca").loss(z, y))
    torch_form = float(create_method("lsmdca", {"mdca_smoothing": "torch"}).loss(z, y))
    assert authors == pytest.approx(-(0.9 * math.log(0.8) + 0.1 * math.log(0.2)) + 0.2)
    assert torch_form == pytest.approx(-(0.95 * math.log(0.8) + 0.05 * math.log(0.2)) + 0.2)


def test_lsmdca_against_numpy_targets():
    rng = np.random.default_rng(5)
    z, y = rng.normal(0, 2, (12, 6)), rng.integers(0, 6, 12)
    p = np_softmax(z)
    mdca = np.mean([abs(p[:, c].mean() - np.mean(y == c)) for c in range(6)])
    for form, eps, q in (("authors", 0.1, np.where(np.eye(6)[y] > 0, 0.9, 0.1 / 5)),
                         ("authors", 0.3, np.where(np.eye(6)[y] > 0, 0.7, 0.3 / 5)),
                         ("torch", 0.1, 0.9 * np.eye(6)[y] + 0.1 / 6)):
        got = create_method("lsmdca", {"mdca_smoothing": form, "mdca_epsilon": str(eps)}).loss(
            torch.tensor(z)[:, None, :], torch.tensor(y))
        assert float(got) == pytest.approx(np.mean(-(q * np.log(p)).sum(1)) + mdca, abs=1e-12)


# ------------------------------------------------------------------- MMCE --
def test_mmce_authors_form_against_the_step_by_step_reference():
    """Random batches, and batches where every image is right or every one
    wrong (the authors' term is then 0): equal to 1e-12."""
    rng = np.random.default_rng(7)
    worst = 0.0
    for trial in range(30):
        b, k = int(rng.integers(2, 20)), int(rng.integers(2, 6))
        z = rng.normal(0, 1 + trial % 3, (b, k))
        y = rng.integers(0, k, b)
        if trial % 10 == 0:
            y = z.argmax(1)  # all right
        elif trial % 10 == 1:
            y = (z.argmax(1) + 1) % k  # all wrong
        got = float(mmce_weighted(torch.tensor(z), torch.tensor(y), 0.4, "authors"))
        worst = max(worst, abs(got - authors_mmce(np_softmax(z), y)))
    assert worst < 1e-12


def test_mmce_forms_hand_worked_and_the_default():
    """One right (r = .8) and one wrong (r = .6) image: the paper's
    .04 + .36 - .24 e^-.5 (under the root); the authors' divides each term
    once more by size^2 + 1e-5 (here 1 + 1e-5). One right image alone: the
    paper's .2, the authors' 0."""
    two_z, two_y = as_z([[0.8, 0.2], [0.6, 0.4]]), torch.tensor([0, 1])
    sq = 0.04 + 0.36 - 0.24 * math.exp(-0.5)
    assert float(mmce_weighted(two_z, two_y, 0.4, "paper")) == pytest.approx(math.sqrt(sq))
    assert float(mmce_weighted(two_z, two_y, 0.4, "authors")) == pytest.approx(
        math.sqrt(sq / (1 + 1e-5) + 1e-10), abs=1e-12)
    one_z, one_y = as_z([[0.8, 0.2]]), torch.tensor([0])
    assert float(mmce_weighted(one_z, one_y, 0.4, "paper")) == pytest.approx(0.2, abs=1e-6)
    assert float(mmce_weighted(one_z, one_y, 0.4, "authors")) == 0.0
    nll = -(math.log(0.8) + math.log(0.4)) / 2
    assert float(create_method("mmce").loss(two_z[:, None, :], two_y)) == pytest.approx(
        nll + 2.0 * math.sqrt(sq / (1 + 1e-5) + 1e-10))


def test_mmce_authors_gradient_is_finite_and_zero_without_both_groups():
    z = torch.tensor([[2.0, 0.0], [1.0, 0.5]], dtype=torch.float64, requires_grad=True)
    mmce_weighted(z, torch.tensor([0, 0]), 0.4, "authors").backward()
    assert torch.equal(z.grad, torch.zeros_like(z))
    z.grad = None
    mmce_weighted(z, torch.tensor([0, 1]), 0.4, "authors").backward()
    assert torch.isfinite(z.grad).all() and (z.grad.abs() > 0).any()


# ------------------------------------------------------- Packed, gamma rule --
def hand_count(alpha, m, gamma, k, tu: bool) -> int:
    """Parameters of a packed torchvision ResNet-18, counted from its layer
    list: stem 1 group; under TorchUncertainty's rule each block's conv1 at
    gamma 1 and gamma lowered until groups read >= 64 channels."""
    total, first = 0, True
    for name, mod in torchvision.models.resnet18().named_modules():
        if isinstance(mod, nn.Conv2d):
            cin, cout = mod.in_channels * (1 if first else alpha), mod.out_channels * alpha
            g = 1 if (tu and name.endswith(".conv1")) else gamma
            while tu and g > 1 and cin // (m * g) < 64:
                g -= 1
            groups = 1 if first else m * g
            total += cin // groups * cout * mod.kernel_size[0] * mod.kernel_size[1]
            first = False
        elif isinstance(mod, nn.BatchNorm2d):
            total += 2 * alpha * mod.num_features
    return total + alpha * 512 * k + m * k  # the M linear heads on alpha * 512 / M features each


@pytest.mark.usefixtures("one_thread")
def test_packed_resnet18_parameters_follow_torch_uncertainty():
    """alpha 2, M 4, gamma 2, 10 classes: 8,191,144 (TorchUncertainty's 8.19 M),
    5,627,048 under the old rule (every conv grouped)."""
    def count(*arch):
        model, _ = build_model("resnet18", 32, 4, 10, arch=("packed", 4, 2, *arch))
        return sum(p.numel() for p in model.parameters())

    assert count(2, "torch-uncertainty") == hand_count(2, 4, 2, 10, True) == 8_191_144
    assert count(2, "every") == hand_count(2, 4, 2, 10, False) == 5_627_048
    assert count(1, "torch-uncertainty") == count(1, "every") == hand_count(2, 4, 1, 10, True)


# --------------------------------------------------------------- identity --
def hashes(tmp_path, method, **sets):
    runs = api.run(method=method, dataset="digits", seeds=1, results=str(tmp_path),
                   dry_run=True, profile="quick", overrides=sets or None)
    return dict(zip(runs["method"], runs["config_hash"]))


def test_new_defaults_hash_apart_and_old_records_are_the_named_option(tmp_path):
    now = hashes(tmp_path, "lsmdca,mmce,packed,mdca,flmdca")
    assert now["lsmdca"] != OLD["lsmdca"] and now["mmce"] != OLD["mmce"]
    assert {k: now[k] for k in ("packed", "mdca", "flmdca")} == {
        k: OLD[k] for k in ("packed", "mdca", "flmdca")}
    old = hashes(tmp_path, "lsmdca,mmce", mdca_smoothing="torch", mmce_form="paper")
    assert old == {"lsmdca": OLD["lsmdca"], "mmce": OLD["mmce"]}
    assert hashes(tmp_path, "packed", pe_gamma="2", pe_gamma_rule="every") == {
        "packed": OLD["packed_gamma2"]}
    assert hashes(tmp_path, "packed", pe_gamma="2")["packed"] != OLD["packed_gamma2"]
    assert hashes(tmp_path, "packed", pe_gamma_rule="every") == {"packed": OLD["packed"]}


def test_a_record_without_the_key_reads_as_the_old_formula():
    """config.json of a record made before the keys existed: its model is
    rebuilt, and its parameters read, as the named option."""
    stored = {"pe_alpha": 2, "pe_members": 4, "pe_gamma": 2}
    assert arch_of({"method": "packed", "method_params": stored}) == ("packed", 4, 2, 2, "every")
    params = recorded(create_method("lsmdca").params, {"mdca_beta": 1.0, "mdca_epsilon": 0.1})
    assert params.mdca_smoothing == "torch"
    assert recorded(create_method("mmce").params, {}).mmce_form == "paper"
    new = create_method("mmce").params
    assert recorded(new, {"mmce_form": "authors"}).mmce_form == "authors"


def test_the_report_shows_an_old_record_as_the_named_option():
    """runs.csv's param_ columns and --config's ambiguity message read
    config.json: an old record lacks the key and shows its legacy value."""
    from bench.report.numbers.frame import settings

    old = settings({"method": "lsmdca", "method_params": {"mdca_beta": 1.0,
                                                          "mdca_epsilon": 0.1}})
    new = settings({"method": "lsmdca", "method_params": {
        "mdca_beta": 1.0, "mdca_epsilon": 0.1, "mdca_smoothing": "authors"}})
    assert (old["param_mdca_smoothing"], new["param_mdca_smoothing"]) == ("torch", "authors")
    assert "param_mmce_form" not in settings({"method": "sl1h", "method_params": {}})
    plugin = settings({"method": "not-loaded", "method_params": {"beta": 2.0}})
    assert plugin["param_beta"] == 2.0
