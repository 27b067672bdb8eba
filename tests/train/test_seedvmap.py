"""bench.train.seedvmap: a method's seeds' losses and staged batches as one
vmapped call, against each member's own call (the independent computation:
the method's loss on its own logits, autograd through it)."""
import pytest
import torch

from bench.methods import create_method
from bench.methods.base import Method
from bench.train import seedvmap
from bench.train.seedvmap import member_batches, member_losses

K, S, B = 9, 5, 8
EPS = torch.finfo(torch.float32).eps
PAPER = ["sl1h", "ls", "mbls", "mixup", "dca", "2hsl", "2hml", "4hml"]


def _members(name: str) -> list:
    out = []
    for s in range(S):
        m = create_method(name)
        m.setup(K, s)  # per-seed state: the multi-loss class weights
        out.append(m)
    return out


def _targets(methods):
    x, y = torch.randn(B, 3, 4, 4), torch.randint(0, K, (B,))
    return [m.batch(x, y, torch.Generator().manual_seed(s))[1] for s, m in enumerate(methods)]


@pytest.mark.parametrize("name", PAPER)
def test_seeds_losses_and_logit_gradients_equal_each_member_alone(name):
    """Gradients bit for bit; the loss itself within 2 eps relative (vmap's
    batched mean over the batch may round the last bit otherwise)."""
    methods = _members(name)
    targets = _targets(methods)
    torch.manual_seed(0)
    z = torch.randn(S, B, methods[0].heads, K, requires_grad=True)
    want = torch.stack([m.loss(z[s], t) for s, (m, t) in enumerate(zip(methods, targets))])
    g_want, = torch.autograd.grad(want.sum(), z)
    got = member_losses(methods, z, targets)
    g_got, = torch.autograd.grad(got.sum(), z)
    assert torch.equal(g_got, g_want)
    assert ((got - want).abs() <= 2 * EPS * want.abs()).all()
    assert (type(methods[0]), "loss") in seedvmap._CHECKED  # vmapped, not looped
    assert len(set(want.tolist())) == S  # the seeds differ: not one loss S times


def test_staged_batches_equal_each_members_own():
    methods = _members("mixup")
    x, y = torch.randn(S, B, 3, 4, 4), torch.randint(0, K, (S, B))
    gens = [torch.Generator().manual_seed(s) for s in range(S)]
    draws = [m.draw(B, g) for m, g in zip(methods, gens)]
    got = member_batches(methods, x, y, draws)
    for s, m in enumerate(methods):
        xs, target = m.staged_batch(x[s], y[s], draws[s])
        assert torch.equal(got[s][0], xs)
        assert all(torch.equal(a, b) for a, b in zip(got[s][1], target))


class _Reads(Method):
    """A loss vmap cannot batch: it reads a value back to the host."""

    def loss(self, logits, target):
        scale = float(logits.detach().abs().max().item() > 0)
        return scale * torch.nn.functional.cross_entropy(logits[:, 0], target)


class _HostTensor(Method):
    """A loss that computes on a host tensor of its own (a 1-d one)."""

    def loss(self, logits, target):
        w = torch.ones(logits.shape[-1])  # made on the host every call
        return torch.nn.functional.cross_entropy(logits[:, 0], target, weight=w.to(logits))


@pytest.mark.parametrize("cls", [_Reads, _HostTensor])
def test_a_loss_vmap_cannot_batch_or_that_asks_the_host_is_looped(cls):
    methods = [cls(f"x{s}") for s in range(S)]
    for m in methods:
        m.name = "x"  # one method: only a tensor would differ
    z = torch.randn(S, B, 1, K)
    y = torch.randint(0, K, (S, B))
    got = member_losses(methods, z, list(y))
    want = torch.stack([m.loss(z[s], y[s]) for s, m in enumerate(methods)])
    assert torch.equal(got, want)
    assert (cls, "loss") in seedvmap._UNBATCHABLE


class _Counts(Method):
    """A loss that keeps state of its own across calls (a Python counter)."""

    calls = 0

    def loss(self, logits, target):
        self.calls += 1
        return torch.nn.functional.cross_entropy(logits[:, 0], target)


def test_a_loss_that_keeps_its_own_state_runs_on_each_member():
    methods = [_Counts("c") for _ in range(S)]
    z, y = torch.randn(S, B, 1, K), torch.randint(0, K, (S, B))
    for step in (1, 2):
        got = member_losses(methods, z, list(y))
        assert [m.calls for m in methods] == [step] * S  # the members' own counters
    want = torch.stack([torch.nn.functional.cross_entropy(z[s, :, 0], y[s]) for s in range(S)])
    assert torch.equal(got, want)
    assert (_Counts, "loss") in seedvmap._UNBATCHABLE


def test_members_of_different_methods_each_keep_their_own_loss():
    methods = _members("sl1h")[:2] + _members("ls")[:2] + _members("sl1h")[:1]
    targets = [torch.randint(0, K, (B,)) for _ in methods]
    z = torch.randn(len(methods), B, 1, K)
    got = member_losses(methods, z, targets)
    want = torch.stack([m.loss(z[s], t) for s, (m, t) in enumerate(zip(methods, targets))])
    assert ((got - want).abs() <= 2 * EPS * want.abs()).all()
