"""Multi-head multi-loss: closed-form gradients (docs/fidelity.md, loss) against autograd,
the released-code variant against an independent numpy computation, the
class-weight scheme, name resolution and the M > K error."""
import numpy as np
import pytest
import torch

from bench.core.errors import BenchError
from bench.core.settings import specs
from bench.methods import create_method
from bench.methods.mhml import class_weights, mean_prob_ce, weighted_head_ce

K, B = 9, 12
pytestmark = pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")


def rand_logits(m, seed=0, b=B, k=K):
    g = torch.Generator().manual_seed(seed)
    z = (2.5 * torch.randn(b, m, k, generator=g, dtype=torch.float64)).requires_grad_()
    return z, torch.randint(0, k, (b,), generator=g)


def softmax_np(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def ready(name, k=K, seed=0, **overrides):
    method = create_method(name, {k_: str(v) for k_, v in overrides.items()})
    method.setup(k, seed)
    return method


@pytest.mark.parametrize("heads", [1, 2, 4, 7])
def test_ce_of_mean_prob_gradient_closed_form(heads):
    """d CE(p^mu, y) / d z^m = (p^m_y / sum_i p^i_y) (p^m - onehot(y))  (appendix)."""
    z, y = rand_logits(heads, seed=heads)
    (grad,) = torch.autograd.grad(mean_prob_ce(z, y), z)
    p = softmax_np(z.detach().numpy())  # [B, M, K]
    p_y = p[np.arange(B), :, y.numpy()]  # [B, M]
    share = p_y / p_y.sum(1, keepdims=True)
    expected = share[:, :, None] * (p - np.eye(K)[y.numpy()][:, None]) / B  # batch mean
    np.testing.assert_allclose(grad.numpy(), expected, atol=1e-12)


@pytest.mark.parametrize("heads", [1, 2, 4, 7])
def test_weighted_head_ce_gradient_closed_form(heads):
    """d wCE_m / d z^m = w^m_y (p^m - onehot(y)); other heads get no gradient."""
    z, y = rand_logits(heads, seed=10 + heads)
    w = torch.as_tensor(class_weights(K, heads, seed=3))
    p = softmax_np(z.detach().numpy())
    for m in range(heads):
        (grad,) = torch.autograd.grad(weighted_head_ce(z[:, m], y, w[m]), z)
        expected = np.zeros_like(p)
        wy = w[m].numpy()[y.numpy()][:, None]
        expected[:, m] = wy * (p[:, m] - np.eye(K)[y.numpy()]) / B
        np.testing.assert_allclose(grad.numpy(), expected, atol=1e-12)


@pytest.mark.parametrize("heads", [1, 2, 4, 7])
def test_paper_loss_total_gradient(heads):
    """Property 2 with the appendix's p^m: (w^m_y + p^m_y / sum_i p^i_y)(p^m - y)."""
    method = ready("mhml", heads=heads, seed=5, mh_loss="paper")
    z, y = rand_logits(heads, seed=20 + heads)
    (grad,) = torch.autograd.grad(method.loss(z, y), z)
    p = softmax_np(z.detach().numpy())
    yy = y.numpy()
    p_y = p[np.arange(B), :, yy]
    w_y = method.weights.numpy()[:, yy].T  # [B, M]
    factor = w_y + p_y / p_y.sum(1, keepdims=True)
    expected = factor[:, :, None] * (p - np.eye(K)[yy][:, None]) / B
    np.testing.assert_allclose(grad.numpy(), expected, atol=1e-6)  # weights are float32


@pytest.mark.parametrize("heads", [2, 4])
def test_paper_loss_value(heads):
    method = ready("mhml", heads=heads, mh_loss="paper")
    z, y = rand_logits(heads, seed=30)
    p, yy, w = softmax_np(z.detach().numpy()), y.numpy(), method.weights.numpy()
    ce_mu = -np.log(p.mean(1)[np.arange(B), yy]).mean()
    wce = sum(-(w[m, yy] * np.log(p[np.arange(B), m, yy])).mean() for m in range(heads))
    assert float(method.loss(z, y)) == pytest.approx(ce_mu + wce, rel=1e-6)


@pytest.mark.parametrize("heads", [1, 2, 4])
def test_released_loss_value(heads):
    """CE(softmax(mean logits)) + PyTorch weighted-mean CE per head, all / (M+1)."""
    method = ready("mhml", heads=heads, mh_loss="released")
    z, y = rand_logits(heads, seed=40)
    zz, yy, w = z.detach().numpy(), y.numpy(), method.weights.numpy()
    rows = np.arange(B)
    ce_mean_logits = -np.log(softmax_np(zz.mean(1))[rows, yy]).mean()
    per_head = [(w[m, yy] * -np.log(softmax_np(zz[:, m])[rows, yy])).sum() / w[m, yy].sum()
                for m in range(heads)]
    expected = (ce_mean_logits + sum(per_head)) / (heads + 1)
    assert float(method.loss(z, y)) == pytest.approx(expected, rel=1e-6)
    other = ready("mhml", heads=heads, mh_loss="paper")
    assert float(method.loss(z, y)) != pytest.approx(float(other.loss(z, y)))


def test_weights_paper_example_k4_m2():
    """K=4, M=2: [2, 1/2, 2, 1/2] and [1/2, 2, 1/2, 2] up to the seeded class shuffle."""
    for seed in range(5):
        w = class_weights(4, 2, seed, rule="numpy")
        perm = np.random.default_rng(seed).permutation(4)
        # undo the shuffle: classes perm[0], perm[1] go to head 0, perm[2], perm[3] to head 1
        np.testing.assert_array_equal(w[:, perm], [[2, 2, .5, .5], [.5, .5, 2, 2]])
        example = np.array([[2, .5, 2, .5], [.5, 2, .5, 2]])
        assert any(np.array_equal(w[:, q], example) for q in _perms(4))


def _perms(n):
    import itertools

    return [list(q) for q in itertools.permutations(range(n))]


@pytest.mark.parametrize("k, m", [(10, 3), (9, 4), (5, 5), (7, 1), (23, 4)])
def test_weights_scheme(k, m):
    w = class_weights(k, m, seed=1)
    own = w == m
    assert (own.sum(0) == 1).all()  # each class is specialised on by exactly one head
    sizes = own.sum(1) if m > 1 else np.array([k])
    assert sizes.max() - sizes.min() <= 1 and sizes.sum() == k  # array_split sizes
    if m > 1:
        assert np.all((w == m) | (w == 1 / m))
    np.testing.assert_array_equal(w, class_weights(k, m, seed=1))  # seeded
    assert any(not np.array_equal(w, class_weights(k, m, s)) for s in range(2, 8)) or m in (1, k)


def test_single_loss_weights_are_ones():
    method = ready("2hsl")
    np.testing.assert_array_equal(method.weights.numpy(), np.ones((2, K)))


def test_named_variants_and_resolver():
    assert [create_method(n).heads for n in ("2hsl", "2hml", "4hml", "mhml")] == [2, 2, 4, 4]
    assert create_method("mhml", {"heads": "7"}).heads == 7
    assert create_method("8hml").heads == 8 and create_method("3hsl").multi_loss is False
    # the released code's loss and groups made the published numbers (docs/fidelity.md)
    assert create_method("2hml").params.mh_loss == "released"
    assert create_method("2hml").params.class_groups == "python"
    with pytest.raises(BenchError, match="2hml has 2 heads"):
        create_method("2hml", {"heads": "3"})


def test_more_heads_than_classes_is_one_line_error():
    with pytest.raises(BenchError) as err:
        create_method("16hml").check(10)
    assert "16 heads" in str(err.value) and "10" in str(err.value) and "\n" not in str(err.value)
    create_method("16hsl").check(10)  # single-loss heads need no class groups


def test_cli_rejects_16hml_on_digits_before_training(tmp_path, capsys):
    from bench.cli.main import main

    rc = main(["run", "--method", "sl1h,16hml", "--dataset", "digits", "--seeds", "1",
               "--results", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "16hml: 16 heads" in err
    assert not any(tmp_path.iterdir())  # nothing trained, not even sl1h


def test_mh_loss_recorded_in_run_config_and_hash():
    from bench.core.config import TrainConfig
    from bench.datasets import load_dataset
    from bench.train.experiment import make_experiment

    bundle = load_dataset("digits")
    exps = {v: make_experiment(bundle, "smallcnn", create_method("4hml", {"mh_loss": v}),
                               TrainConfig()) for v in ("paper", "released")}
    for v, exp in exps.items():
        assert exp.payload()["method_params"] == {"heads": 4, "mh_loss": v,
                                                  "class_groups": "python"}
    assert exps["paper"].chash != exps["released"].chash


@pytest.mark.parametrize("mh_loss", ["paper", "released"])
def test_both_losses_pass_finite_difference_gradcheck(mh_loss):
    method = ready("mhml", heads=3, mh_loss=mh_loss)
    z, y = rand_logits(3, seed=50, b=4)
    assert torch.autograd.gradcheck(lambda t: method.loss(t, y), (z,))


def test_released_loss_hand_worked_example():
    """K=2, M=2, one sample of class 0, logits z^1 = [0, 0], z^2 = [ln 3, 0];
    head weights [2, 1/2] and [1/2, 2]. By hand: mean logits [ln3/2, 0] ->
    p_0 = sqrt3 / (sqrt3 + 1); head 1: p_0 = 1/2; head 2: p_0 = 3/4. PyTorch's
    weighted mean over one sample is the plain CE, so the loss is
    (-ln(sqrt3/(sqrt3+1)) - ln(1/2) - ln(3/4)) / 3."""
    import math

    method = create_method("2hml")
    method.weights = torch.tensor([[2.0, 0.5], [0.5, 2.0]], dtype=torch.float64)
    z = torch.tensor([[[0.0, 0.0], [math.log(3.0), 0.0]]], dtype=torch.float64)
    y = torch.tensor([0])
    s3 = math.sqrt(3.0)
    expected = (-math.log(s3 / (s3 + 1)) - math.log(0.5) - math.log(0.75)) / 3
    assert float(method.loss(z, y)) == pytest.approx(expected, rel=1e-12)
    # two samples: the per-head CE is sum_n w_{y_n} l_n / sum_n w_{y_n}, not a plain mean
    z2 = torch.zeros(2, 2, 2, dtype=torch.float64)
    z2[1, 0, 1] = math.log(3.0)  # sample 2 (class 1): head 1 gives p_1 = 3/4
    y2 = torch.tensor([0, 1])
    head1 = (2.0 * math.log(2) + 0.5 * -math.log(0.75)) / 2.5
    head2 = (0.5 * math.log(2) + 2.0 * math.log(2)) / 2.5
    # sample 1's mean logits are [0, 0] (p_0 = 1/2); sample 2's are [0, ln3/2],
    # so its class-1 probability is sqrt3/(sqrt3+1)
    mean_logits = (math.log(2) - math.log(s3 / (s3 + 1))) / 2
    expected2 = (mean_logits + head1 + head2) / 3
    assert float(method.loss(z2, y2)) == pytest.approx(expected2, rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 7, 42])
@pytest.mark.parametrize("k, m", [(4, 2), (9, 4), (23, 4), (10, 3)])
def test_class_groups_follow_python_random(seed, k, m):
    """The released rule: random.seed(seed); random.shuffle(classes); np.array_split."""
    import random

    from bench.methods.mhml import class_groups

    state = random.getstate()
    try:
        random.seed(seed)
        classes = list(range(k))
        random.shuffle(classes)
    finally:
        random.setstate(state)
    expected = [list(map(int, g)) for g in np.array_split(classes, m)]
    assert class_groups(k, m, seed, "python") == expected
    w = class_weights(k, m, seed)  # the default rule is the released one
    for head, group in enumerate(expected):
        assert (w[head, group] == m).all() and (np.delete(w[head], group) == 1 / m).all()
    numpy_groups = class_groups(k, m, seed, "numpy")
    assert numpy_groups == [list(map(int, g)) for g in
                            np.array_split(np.random.default_rng(seed).permutation(k), m)]


def test_class_groups_rule_is_checked():
    with pytest.raises(BenchError, match="class_groups 'bogus'"):
        create_method("2hml", {"class_groups": "bogus"})


def test_params_defaults_keys_and_ranges():
    import dataclasses
    import random

    from bench.methods.mhml import MultiHeadParams, class_groups

    p = create_method("mhml").params
    assert p == MultiHeadParams(heads=4, mh_loss="released", class_groups="python")
    assert create_method("mhml").heads == 4 and create_method("2hsl").heads == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.heads = 3
    # every parameter has a key row (bench list --keys, range checks), heads >= 1
    assert all(spec.help for spec in specs(MultiHeadParams).values())
    with pytest.raises(BenchError, match=r"^--set heads=0: must be >= 1"):
        create_method("mhml", {"heads": "0"})
    assert create_method("mhml", {"heads": "1"}).heads == 1
    # the default rule is the released one: Python's random, then array_split
    for seed in range(3):
        classes = list(range(10))
        random.Random(seed).shuffle(classes)
        assert class_groups(10, 3, seed) == [list(map(int, g))
                                             for g in np.array_split(classes, 3)]


def test_loss_before_setup_is_a_clear_error():
    method = create_method("4hml")
    with pytest.raises(RuntimeError, match=r"^4hml: call setup\(num_classes, seed\) before"):
        method.loss(torch.zeros(2, 4, 5), torch.tensor([0, 1]))


def test_multi_head_errors_name_the_fix():
    with pytest.raises(BenchError, match=r"^3hml has 3 heads, not heads=4; use --method 4hml "
                                         r"or mhml --set heads=M$"):
        create_method("3hml", {"heads": "4"})
    with pytest.raises(BenchError,
                       match=r"^unknown 4hml mh_loss 'nope'; choose from: paper, released$"):
        create_method("4hml", {"mh_loss": "nope"})
    with pytest.raises(BenchError, match=r"^unknown 4hml class_groups 'nope'; choose from: "):
        create_method("4hml", {"class_groups": "nope"})
    method = create_method("4hml")
    method.check(4)  # as many heads as classes is allowed (each head one class)
    with pytest.raises(BenchError, match=r"^4hml: 4 heads need at least 4 classes, the "
                                         r"dataset has 3; use at most 3 heads$"):
        method.check(3)
    create_method("4hsl").check(3)  # single-loss heads need no class groups


def test_named_multi_head_methods_are_registered_and_show_their_groups():
    from bench.methods import METHODS
    from bench.methods.mhml import class_groups

    for name, heads, single in (("2hsl", 2, True), ("2hml", 2, False), ("4hml", 4, False),
                                ("mhml", 4, False)):
        assert name in METHODS.names()  # listed by `bench list` and --method all
        method = create_method(name)
        assert (method.name, method.heads) == (name, heads)
        groups = method.head_groups(10, 3)
        assert groups == (None if single else class_groups(10, heads, 3))
