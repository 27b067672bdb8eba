"""MixUp's batch transform replayed from the trainer's generator: the mixed
inputs and the targets must be exactly what lam and perm give."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy import stats

from bench.methods import create_method
from bench.methods.mixup import draw_lambda


def replay(gen_state, n, alpha):
    """The draws of one batch, in the documented order: lam's seed, then perm."""
    g = torch.Generator()
    g.set_state(gen_state)
    seed = int(torch.randint(0, 2**62, (1,), generator=g))
    lam = float(np.random.default_rng(seed).beta(alpha, alpha))
    return lam, torch.randperm(n, generator=g)


@pytest.mark.parametrize("seed", range(5))
def test_mixup_batch_is_lam_x_plus_one_minus_lam_x_perm(seed):
    method = create_method("mixup")
    x = torch.randn(16, 3, 8, 8, generator=torch.Generator().manual_seed(100 + seed))
    y = torch.arange(16) % 10
    gen = torch.Generator().manual_seed(seed)
    lam, perm = replay(gen.get_state(), 16, method.params.alpha)
    assert 0 < lam < 1 and not torch.equal(perm, torch.arange(16))
    x2, (y_a, y_b, lam2, rest2) = method.batch(x, y, gen)
    # lam and 1 - lam as float32 tensors (staged on the device by the graph-safe
    # step) give exactly the bits of the Python float lam the per-step path used
    assert lam2.dtype == torch.float32 and float(lam2) == float(np.float32(lam))
    assert float(rest2) == float(np.float32(1 - lam))
    assert torch.equal(x2, lam * x + (1 - lam) * x[perm])
    assert torch.equal(y_a, y) and torch.equal(y_b, y[perm])
    z = torch.randn(16, 1, 10)
    expected = lam * F.cross_entropy(z[:, 0], y) + (1 - lam) * F.cross_entropy(z[:, 0], y[perm])
    assert torch.equal(method.loss(z, (y_a, y_b, lam2, rest2)), expected)


def test_lambda_is_beta_alpha_alpha():
    gen = torch.Generator().manual_seed(0)
    lams = [draw_lambda(0.2, gen) for _ in range(2000)]
    assert stats.kstest(lams, "beta", args=(0.2, 0.2)).pvalue > 1e-3
    assert stats.kstest(lams, "beta", args=(0.4, 0.4)).pvalue < 1e-3  # the test can tell
    assert draw_lambda(0.0, gen) == 1.0


def test_paper_alpha_in_a_frozen_dataclass():
    import dataclasses

    params = create_method("mixup").params
    assert dataclasses.asdict(params) == {"alpha": 0.2}  # Beta(0.2, 0.2), the paper's value, docs/fidelity.md
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.alpha = 0.4
