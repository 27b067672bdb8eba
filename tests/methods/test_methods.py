"""Single-head methods against hand-derived gradients (autograd vs closed
form), equivalences with CE, parameter errors, and a smoke test that trains
every registered method through the real runner."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bench.core.errors import BenchError
from bench.methods import EXTRA, METHODS, RECENT, create_method, training_methods
from bench.methods.dca import dca_penalty
from bench.methods.mixup import draw_lambda

B, K = 16, 5
pytestmark = pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")


def rand_case(seed=0, scale=3.0, b=B, k=K):
    g = torch.Generator().manual_seed(seed)
    z = (scale * torch.randn(b, 1, k, generator=g, dtype=torch.float64)).requires_grad_()
    y = torch.randint(0, k, (b,), generator=g)
    return z, y


def grad_of(method, z, target):
    (g,) = torch.autograd.grad(method.loss(z, target), z)
    return g[:, 0].numpy()


def np_probs(z):
    z = z.detach()[:, 0].numpy()
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def onehot(y, k=K):
    return np.eye(k)[y.numpy()]


# ------------------------------------------------------------ CE family --
def test_sl1h_gradient_is_p_minus_onehot():
    z, y = rand_case()
    np.testing.assert_allclose(grad_of(create_method("sl1h"), z, y),
                               (np_probs(z) - onehot(y)) / B, atol=1e-12)


def test_ls_value_and_gradient_closed_form():
    z, y = rand_case(1)
    eps = 0.05
    q = (1 - eps) * onehot(y) + eps / K
    p = np_probs(z)
    m = create_method("ls")
    assert m.params.epsilon == 0.05
    assert float(m.loss(z, y)) == pytest.approx(float(np.mean(-(q * np.log(p)).sum(1))), abs=1e-12)
    np.testing.assert_allclose(grad_of(m, z, y), (p - q) / B, atol=1e-12)


def test_ls_epsilon_zero_equals_ce():
    z, y = rand_case(2)
    m = create_method("ls", {"epsilon": "0"})
    assert float(m.loss(z, y)) == pytest.approx(float(F.cross_entropy(z[:, 0], y)), abs=1e-14)


def test_mbls_value_and_gradient_closed_form():
    z, y = rand_case(3, scale=6.0)  # large logits so some gaps exceed the margin
    margin, alpha = 6.0, 0.1
    zz = z.detach()[:, 0].numpy()
    gap = zz.max(1, keepdims=True) - zz - margin
    active = (gap > 0).astype(float)
    assert active.sum() > 0
    p = np_probs(z)
    expected = (p - onehot(y)) / B - alpha * active / (B * K)
    expected[np.arange(B), zz.argmax(1)] += alpha * active.sum(1) / (B * K)
    m = create_method("mbls")
    value = np.mean(-np.log(p[np.arange(B), y.numpy()])) + alpha * np.maximum(gap, 0).mean()
    assert float(m.loss(z, y)) == pytest.approx(value, abs=1e-12)
    np.testing.assert_allclose(grad_of(m, z, y), expected, atol=1e-12)


def test_mixup_loss_gradient_closed_form():
    z, y = rand_case(4)
    y_b, lam = y.flip(0), 0.3
    expected = (np_probs(z) - lam * onehot(y) - (1 - lam) * onehot(y_b)) / B
    np.testing.assert_allclose(grad_of(create_method("mixup"), z, (y, y_b, lam, 1 - lam)), expected,
                               atol=1e-12)


def test_mixup_alpha_zero_is_exactly_ce():
    x, y = torch.randn(B, 3, 4, 4), torch.randint(0, K, (B,))
    m = create_method("mixup", {"alpha": "0"})
    x2, target = m.batch(x, y, torch.Generator().manual_seed(0))
    assert torch.equal(x2, x) and target[2] == 1.0
    z, _ = rand_case(5)
    assert float(m.loss(z, target)) == pytest.approx(float(F.cross_entropy(z[:, 0], y)), abs=1e-14)


def test_mixup_alpha_to_zero_converges_to_ce():
    """Beta(a, a) -> {0, 1}: mixing a batch with its permutation becomes CE."""
    torch.manual_seed(0)
    net = torch.nn.Linear(12, K).double()
    x, y = torch.randn(B, 12, dtype=torch.float64), torch.randint(0, K, (B,))
    ce = float(F.cross_entropy(net(x), y))
    m, gen = create_method("mixup", {"alpha": "1e-4"}), torch.Generator().manual_seed(1)
    for _ in range(10):
        x2, target = m.batch(x, y, gen)
        assert float(m.loss(net(x2)[:, None], target)) == pytest.approx(ce, abs=1e-3)


def test_mixup_lambda_is_beta_distributed():
    from scipy import stats

    gen = torch.Generator().manual_seed(0)
    draws = [draw_lambda(0.2, gen) for _ in range(2000)]
    assert stats.kstest(draws, stats.beta(0.2, 0.2).cdf).pvalue > 1e-3


def test_dca_value_and_gradient_closed_form():
    z, y = rand_case(6)
    p = np_probs(z)
    c = p.argmax(1)
    conf, acc = p.max(1), (c == y.numpy()).astype(float)
    sign = np.sign(conf.mean() - acc.mean())
    dconf = conf[:, None] * (np.eye(K)[c] - p)  # d p_c / d z
    expected = (p - onehot(y)) / B + 5.0 * sign * dconf / B
    m = create_method("dca")
    value = np.mean(-np.log(p[np.arange(B), y.numpy()])) + 5 * abs(conf.mean() - acc.mean())
    assert float(m.loss(z, y)) == pytest.approx(value, abs=1e-12)
    assert float(dca_penalty(z[:, 0], y)) == pytest.approx(abs(conf.mean() - acc.mean()))
    np.testing.assert_allclose(grad_of(m, z, y), expected, atol=1e-12)


def focal_closed_form(p, y, gamma):
    """d/dz of -(1-p_y)^g log p_y, per sample, with gamma [B]."""
    py = p[np.arange(len(y)), y][:, None]
    g = np.asarray(gamma, dtype=float).reshape(-1, 1)
    dl_dpy = g * (1 - py) ** (g - 1) * np.log(py) - (1 - py) ** g / py
    return dl_dpy * py * (np.eye(p.shape[1])[y] - p) / len(y)


def test_focal_value_and_gradient_closed_form():
    z, y = rand_case(7)
    p, yy = np_probs(z), y.numpy()
    m = create_method("focal")
    assert m.params.gamma == 3.0
    py = p[np.arange(B), yy]
    assert float(m.loss(z, y)) == pytest.approx(np.mean(-(1 - py) ** 3 * np.log(py)), abs=1e-12)
    np.testing.assert_allclose(grad_of(m, z, y), focal_closed_form(p, yy, np.full(B, 3.0)),
                               atol=1e-12)


def test_focal_gamma_zero_equals_ce():
    z, y = rand_case(8)
    m = create_method("focal", {"gamma": "0"})
    assert float(m.loss(z, y)) == pytest.approx(float(F.cross_entropy(z[:, 0], y)), abs=1e-14)


def test_flsd53_picks_gamma_per_sample_and_gradient():
    z, y = rand_case(9, scale=2.0, b=64)
    p, yy = np_probs(z), y.numpy()
    gamma = np.where(p[np.arange(64), yy] < 0.2, 5.0, 3.0)
    assert 0 < (gamma == 5).sum() < 64  # both regimes occur
    m = create_method("flsd53")
    np.testing.assert_array_equal(m.gammas(z[:, 0], y).numpy(), gamma)
    np.testing.assert_allclose(grad_of(m, z, y), focal_closed_form(p, yy, gamma), atol=1e-12)


def test_flsd53_threshold_itself_takes_the_high_gamma():
    """Mukhoti et al. 2020: gamma 5 for p_y in [0, 0.2), 3 from 0.2 on. Five equal logits
    give p_y = 1/5, the same double as the threshold 0.2."""
    z = torch.zeros(3, 5, dtype=torch.float64)
    z[1, 0], z[2, 0] = -1e-9, 1e-9  # p_y just under / just over 0.2 for class 0
    y = torch.zeros(3, dtype=torch.long)
    assert float(F.softmax(z, dim=1)[0, 0]) == 0.2
    assert create_method("flsd53").gammas(z, y).tolist() == [3.0, 5.0, 3.0]


# the numeric bounds of every method: tests/methods/test_method_bounds.py
@pytest.mark.parametrize("name, key, value", [("mhml", "mh_loss", "bogus"), ("mhml", "heads", "0")])
def test_bad_hyper_parameters_are_one_line_errors(name, key, value):
    with pytest.raises(BenchError) as err:
        create_method(name, {key: value})
    assert value in str(err.value) and "\n" not in str(err.value)


# ------------------------------------------------------------ registry --
def test_training_methods_paper_order_and_listed():
    from bench.sweep.catalog import list_registries

    names = training_methods()
    assert names[:8] == ["sl1h", "ls", "mbls", "mixup", "dca", "2hsl", "2hml", "4hml"]
    assert set(names) == set(METHODS.names()) - {"mhml"} - set(EXTRA) - set(RECENT)  # --method extra, recent
    listing = list_registries()
    for name in METHODS.names():
        assert f"\n{name} " in listing


# --------------------------------------------------------------- smoke --
@pytest.fixture(scope="module")
def tiny_digits():
    from bench.datasets import load_dataset
    from bench.datasets.base import DatasetBundle, Split

    full = load_dataset("digits", image_size=12)
    cut = {s: Split(full.split(s).images[:40], full.split(s).labels[:40])
           for s in ("train", "val", "test")}
    return DatasetBundle("digits", full.classes, cut["train"], cut["val"], cut["test"],
                         "smallcnn", {**full.identity, "subset": 40})


@pytest.mark.parametrize("name", METHODS.names() + ["3hml", "3hsl"])
def test_every_method_trains_one_epoch(name, tiny_digits, tmp_path):
    """Real runner + trainer, 1 cycle of 1 epoch; finite [N, M, K] logits recorded."""
    from bench.core.config import TrainConfig
    from bench.train.experiment import make_experiment, run_seed
    from bench.core.store import load_predictions, read_json

    method = create_method(name)
    cfg = TrainConfig(cycles=1, epochs_per_cycle=1, batch_size=8)
    exp = make_experiment(tiny_digits, "smallcnn", method, cfg)
    status, path = run_seed(exp, tiny_digits, method, 0, tmp_path, device="cpu", progress=False)
    logits = load_predictions(path)["test_logits"]
    assert status == "done" and logits.shape == (40, method.heads, 10)
    assert np.isfinite(logits).all()
    assert read_json(path / "config.json")["method_params"] == method.params_dict()


def test_each_method_is_named_as_registered_with_frozen_params():
    import dataclasses

    from bench.methods import METHODS

    for name in METHODS.names():
        method = create_method(name)
        assert method.name == name
        if dataclasses.fields(method.params):
            field = dataclasses.fields(method.params)[0].name
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(method.params, field, 0)


def test_released_train_size_is_150_for_the_train_other_methods():
    """docs/fidelity.md, training image size: train_other.py (LS, MbLS, MixUp, DCA) trained at --im_size 150;
    train_PMH.py and every other baseline at the dataset's size."""
    from bench.methods import METHODS

    sizes = {name: create_method(name).released_train_size for name in METHODS.names()}
    assert sizes == {n: 150 if n in ("ls", "mbls", "mixup", "dca") else 0 for n in sizes}
