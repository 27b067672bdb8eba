"""bench.train.batched: N members as one model, against each member run alone
(autograd through the members' own torchvision / bench modules is the
independent computation)."""
import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models.convnext import CNBlockConfig, ConvNeXt
from torchvision.models.resnet import Bottleneck, ResNet
from torchvision.models.swin_transformer import SwinTransformer

from bench.core.errors import BenchError
from bench.speed.cellops import KernelOps, batched, step_ops
from bench.train.backbones import Backbone
from bench.train.batched import BatchedBatchNorm2d, batch_members
from bench.train.nets import MultiHeadNet, drop_classifier, smallcnn_features

N, B, SIZE = 3, 2, 32


def heads_on(features: nn.Module, dim: int, prefix=None, heads: int = 2) -> MultiHeadNet:
    return MultiHeadNet(Backbone(features, dim, head_prefix=prefix), heads, 5)


def tiny(kind: str) -> nn.Module:
    """Small members of each backbone family, built by the same constructors."""
    if kind == "smallcnn":
        return heads_on(smallcnn_features(), 128)
    if kind == "resnet":
        model = ResNet(Bottleneck, [1, 1, 1, 1])
        return heads_on(model, drop_classifier(model, "fc")[0])
    if kind == "convnext":
        model = ConvNeXt([CNBlockConfig(8, 16, 1), CNBlockConfig(16, None, 2)],
                         stochastic_depth_prob=0.0)
        dim, prefix = drop_classifier(model, "classifier")
        return heads_on(model, dim, prefix)
    model = SwinTransformer([4, 4], 8, [2, 2], [2, 2], [2, 2], stochastic_depth_prob=0.0)
    return heads_on(model, drop_classifier(model, "head")[0])


def members(kind: str, dtype=torch.float32) -> list:
    torch.manual_seed(0)
    return [tiny(kind).to(dtype).train() for _ in range(N)]


def grads_alone(models, x):
    """Each member alone: output, input gradient, parameter gradients."""
    out = []
    for i, m in enumerate(models):
        xi = x[i].clone().requires_grad_(True)
        y = m(xi)
        (y * torch.arange(y.numel(), dtype=y.dtype).view(y.shape).sin()).sum().backward()
        out.append((y.detach(), xi.grad, {k: p.grad for k, p in m.named_parameters()}))
    return out


def grads_batched(bm, x):
    xb = x.clone().requires_grad_(True)
    y = bm(xb)
    w = torch.stack([torch.arange(y[0].numel(), dtype=y.dtype).view(y[0].shape).sin()] * N)
    (y * w).sum().backward()
    params = dict(bm.named_parameters())
    return [(y[i].detach(), xb.grad[i], {k.removeprefix("body."): p.grad[i]
                                         for k, p in params.items()}) for i in range(N)]


def close(a, b, rel):
    scale = b.abs().max().clamp_min(1e-30)
    return ((a - b).abs().max() / scale).item() <= rel


@pytest.mark.parametrize("conv", ["grouped", "unfold"])
@pytest.mark.parametrize("kind,dtype,rel", [
    ("smallcnn", torch.float32, 1e-5),  # 4 layers: float32 reassociation stays ~1e-7
    ("resnet", torch.float64, 1e-10),   # deep nets amplify float32 rounding (BN over 2x1x1
    ("convnext", torch.float64, 1e-10),  # values at 32 px): float64 shows the algebra is
    ("swin", torch.float64, 1e-10)])     # each member's own, 1e-16 eps x depth
def test_every_member_equals_itself_alone(kind, dtype, rel, conv):
    models = members(kind, dtype)
    bm = batch_members(copy.deepcopy(models), conv)
    x = torch.randn(N, B, 3, SIZE, SIZE, dtype=dtype)
    for (ya, ga, pa), (yb, gb, pb) in zip(grads_alone(models, x), grads_batched(bm, x)):
        assert close(yb, ya, rel) and close(gb, ga, rel)
        assert pa.keys() == pb.keys()
        assert all(close(pb[k], pa[k], rel) for k in pa), kind


def test_batch_norm_is_exactly_each_member_alone():
    torch.manual_seed(0)
    bns = [nn.BatchNorm2d(6) for _ in range(N)]
    for bn in bns:
        nn.init.normal_(bn.weight), nn.init.normal_(bn.bias)
    bb = BatchedBatchNorm2d(copy.deepcopy(bns))
    x = torch.randn(4, N * 6, 5, 5) * 3 + 1
    xb = x.clone().requires_grad_(True)
    gy = torch.randn_like(x)
    bb(xb).backward(gy)
    yb = bb(x.detach())  # second call: running statistics updated twice
    for i, bn in enumerate(bns):
        mine = x[:, 6 * i:6 * i + 6].contiguous()  # as a member alone holds it
        xi = mine.clone().requires_grad_(True)
        bn(xi).backward(gy[:, 6 * i:6 * i + 6].contiguous())
        assert torch.equal(bn(mine), yb[:, 6 * i:6 * i + 6])
        assert torch.equal(xi.grad, xb.grad[:, 6 * i:6 * i + 6])
        assert torch.equal(bn.weight.grad, bb.weight.grad[i])
        assert torch.equal(bn.bias.grad, bb.bias.grad[i])
        assert torch.equal(bn.running_mean, bb.running_mean[i])
        assert torch.equal(bn.running_var, bb.running_var[i])
        assert torch.equal(bn.num_batches_tracked, bb.num_batches_tracked[i])


@pytest.mark.parametrize("kind", ["convnext", "swin"])
def test_member_state_dict_round_trip(kind):
    models = members(kind)
    bm = batch_members(models)
    for i, m in enumerate(models):
        mine, ref = bm.member_state_dict(i), m.state_dict()
        assert list(mine) == list(ref)
        assert all(torch.equal(mine[k], ref[k]) for k in ref)
    other = tiny(kind).state_dict()
    bm.load_member_state_dict(1, other)
    assert all(torch.equal(bm.member_state_dict(1)[k], v) for k, v in other.items())
    assert all(torch.equal(bm.member_state_dict(0)[k], v) for k, v in models[0].state_dict().items())
    with pytest.raises(BenchError, match="keys differ"):
        bm.load_member_state_dict(0, {"nope": torch.zeros(1)})


def test_sgd_over_the_batched_model_is_each_members_sgd():
    models = members("smallcnn")
    bm = batch_members(copy.deepcopy(models))
    x, y = torch.randn(N, B, 3, 16, 16), torch.randint(0, 5, (N, B))
    opt = torch.optim.SGD(bm.parameters(), lr=0.1)
    out = bm(x)
    sum(F.cross_entropy(out[i, :, 0], y[i]) for i in range(N)).backward()
    opt.step()
    for i, m in enumerate(models):
        o = torch.optim.SGD(m.parameters(), lr=0.1)
        F.cross_entropy(m(x[i])[:, 0], y[i]).backward()
        o.step()
        assert all(close(bm.member_state_dict(i)[k], v, 1e-5) for k, v in m.state_dict().items())


@pytest.mark.parametrize("backbone", ["resnet50", "convnext_tiny", "swin_tiny"])
@pytest.mark.parametrize("conv", ["grouped", "unfold"])
def test_step_ops_do_not_grow_with_members(backbone, conv):
    """The real backbones, counted on the meta device (shapes only). N = 1 is
    its own case (its layout copies are views), so N = 2 against N = 5."""
    two, five = (step_ops(batched(backbone, n, SIZE, conv), n, B, SIZE, 9) for n in (2, 5))
    assert two.ops == five.ops
    dense = [g for g, depthwise in five.grouped if not depthwise]
    assert (dense == []) == (conv == "unfold")  # grouped: the stem at least


@pytest.mark.parametrize("conv", ["grouped", "unfold"])
def test_bf16_autocast_runs_convolutions_and_matmuls_in_bf16(conv):
    bm = batch_members(members("convnext"), conv)
    x = torch.randn(N, B, 3, SIZE, SIZE)
    with KernelOps() as ops:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = bm(x)
        y.float().sum().backward()
    assert ops.dtypes, "no convolution or matmul seen"
    assert {d for _, dtypes in ops.dtypes for d in dtypes} == {"torch.bfloat16"}, ops.dtypes


def test_unknown_layers_and_modes_are_refused():
    with pytest.raises(BenchError, match="no batched form of LSTM"):
        batch_members([nn.Sequential(nn.LSTM(2, 2)) for _ in range(2)])
    with pytest.raises(BenchError, match="unknown cell_conv 'x'"):
        batch_members([smallcnn_features()], conv="x")
    with pytest.raises(BenchError, match="differ in architecture"):
        batch_members([nn.Sequential(nn.ReLU()), nn.Sequential(nn.GELU())])

