"""BatchEnsemble and Packed-Ensembles (issue 41) against the papers'
equations on toy batches: a BatchEnsemble layer is member i's layer with
weight W o (r_i s_i^T) (Wen et al. 2020, eq. 3-4), computed here as an
explicit loop over members; a packed network is M independent narrower
networks (Laurent et al. 2023), rebuilt here member by member from slices
of its grouped weights."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bench.core.errors import BenchError
from bench.train.backbone_checks import check_arch
from bench.train.backbones import build_model
from bench.train.ensembles import BatchEnsembleLayer, PackedNet

M = 3


def close(a, b):
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------- BatchEnsemble --
def effective(layer: BatchEnsembleLayer, i: int) -> nn.Module:
    """Member i's layer as a plain one: W o (r_i s_i^T) and bias b_i."""
    plain = copy.deepcopy(layer.layer)
    w = layer.layer.weight.detach()
    outer = torch.outer(layer.r[i].detach(), layer.s[i].detach())
    plain.weight = nn.Parameter(w * outer.view(*outer.shape, *[1] * (w.dim() - 2)))
    plain.bias = None if layer.bias is None else nn.Parameter(layer.bias[i].detach().clone())
    return plain


def test_batch_ensemble_layers_against_the_effective_weights():
    torch.manual_seed(0)
    conv = BatchEnsembleLayer(nn.Conv2d(4, 6, 3, padding=1, bias=True), M, channel_dim=1)
    lin = BatchEnsembleLayer(nn.Linear(5, 7), M, channel_dim=-1)
    with torch.no_grad():
        conv.bias.normal_()  # members' biases differ, as after training
    x, v = torch.randn(2, 4, 5, 5), torch.randn(2, 8, 5)  # Linear on [b, tokens, C] too
    got_c = conv(x.repeat(M, 1, 1, 1)).unflatten(0, (M, -1))
    got_l = lin(v.repeat(M, 1, 1)).unflatten(0, (M, -1))
    for i in range(M):
        w = conv.layer.weight * conv.r[i][:, None, None, None] * conv.s[i][None, :, None, None]
        close(got_c[i], F.conv2d(x, w, conv.bias[i], padding=1))
        close(got_l[i], v @ (lin.layer.weight * torch.outer(lin.r[i], lin.s[i])).T + lin.bias[i])
    # different inputs per member: row block i goes through member i only
    xs = torch.randn(M * 2, 4, 5, 5)
    out = conv(xs).unflatten(0, (M, -1))
    for i in range(M):
        close(out[i], effective(conv, i)(xs[2 * i:2 * i + 2]))


def test_fast_weights_start_as_the_papers_init():
    torch.manual_seed(0)
    layer = BatchEnsembleLayer(nn.Linear(400, 300), 50, channel_dim=-1)
    for v in (layer.r, layer.s):  # N(1, 0.5)
        assert v.mean().item() == pytest.approx(1.0, abs=0.02)
        assert v.std().item() == pytest.approx(0.5, abs=0.02)


def test_batch_ensemble_net_is_m_plain_networks():
    """smallcnn with every conv and the classifier as BatchEnsemble layers: in
    eval mode (batch norm shared, from running statistics) member i is the
    plain network with member i's effective weights."""
    torch.manual_seed(0)
    net, _ = build_model("smallcnn", 12, M, 4, arch=("batchensemble", M))
    layers = [m for m in net.modules() if isinstance(m, BatchEnsembleLayer)]
    assert len(layers) == 5  # 4 convs + the classifier
    net.eval()
    x = torch.rand(2, 3, 12, 12)
    with torch.no_grad():
        z = net(x)
        assert z.shape == (2, M, 4)
        for i in range(M):
            member = copy.deepcopy(net.backbone)
            for parent in list(member.modules()):
                for attr, child in list(parent.named_children()):
                    if isinstance(child, BatchEnsembleLayer):
                        setattr(parent, attr, effective(child, i))
            close(z[:, i], effective(net.head, i)(member(x)))
        assert not torch.allclose(z[:, 0], z[:, 1])


# ------------------------------------------------------- Packed-Ensembles --
def test_packed_conv_is_a_block_diagonal_conv():
    torch.manual_seed(0)
    net = PackedNet(type("B", (), {"features": nn.Sequential(nn.Conv2d(3, 4, 1), nn.Conv2d(
        4, 6, 3, padding=1)), "dim": 6, "weights": "random", "head_prefix": None})(),
        M, 5, alpha=3, gamma=1)
    conv = net.backbone[1]  # 12 -> 18 channels in 3 groups
    assert (conv.in_channels, conv.out_channels, conv.groups) == (12, 18, 3)
    dense = torch.zeros(18, 12, 3, 3)
    for g in range(3):
        dense[6 * g:6 * g + 6, 4 * g:4 * g + 4] = conv.weight[6 * g:6 * g + 6]
    x = torch.randn(2, 12, 5, 5)
    close(conv(x), F.conv2d(x, dense, conv.bias, padding=1))


@pytest.mark.parametrize("gamma", [1, 2])
def test_packed_net_is_m_independent_networks(gamma):
    """Member i of the packed smallcnn is a smallcnn alpha / M as wide built
    from the i-th slice of every layer (gamma groups inside it), in train
    mode too: batch norm is per channel, so members never mix."""
    torch.manual_seed(0)
    alpha, m = 2, 4
    net, _ = build_model("smallcnn", 12, m, 5, arch=("packed", m, alpha, gamma))
    x = torch.rand(3, 3, 12, 12)
    z = net(x)
    assert z.shape == (3, m, 5)
    for i in range(m):
        member = copy.deepcopy(net.backbone)
        for parent in list(member.modules()):
            for attr, c in list(parent.named_children()):
                if isinstance(c, nn.Conv2d):
                    w = c.out_channels // m
                    new = nn.Conv2d(c.in_channels if c.groups == 1 else c.in_channels // m, w,
                                    c.kernel_size, c.stride, c.padding, bias=False,
                                    groups=max(1, c.groups // m))
                    new.weight = nn.Parameter(c.weight[w * i:w * (i + 1)])
                    setattr(parent, attr, new)
                elif isinstance(c, nn.BatchNorm2d):
                    w = c.num_features // m
                    new = nn.BatchNorm2d(w)
                    new.weight = nn.Parameter(c.weight[w * i:w * (i + 1)])
                    new.bias = nn.Parameter(c.bias[w * i:w * (i + 1)])
                    setattr(parent, attr, new)
        d = net.head.in_channels // m
        head = net.head.weight[5 * i:5 * (i + 1), :, 0]
        close(z[:, i], member(x) @ head.T + net.head.bias[5 * i:5 * (i + 1)])
        assert member[1][0].in_channels == 32 * alpha // m and d == 128 * alpha // m


def test_packed_has_about_the_backbones_parameters_and_refuses_what_it_cannot_pack():
    def count(arch, heads=1):
        return sum(p.numel() for p in build_model("smallcnn", 12, heads, 10, arch=arch)[0]
                   .parameters())

    # alpha^2 / M = 1: the convolutions hold exactly the backbone's weights
    assert abs(count(("packed", 4, 2, 1), 4) - count(())) / count(()) < 0.02
    assert count(("packed", 4, 2, 2), 4) < count(("packed", 4, 2, 1), 4)  # gamma halves convs
    with pytest.raises(BenchError, match="cannot be loaded"):
        PackedNet(type("B", (), {"weights": "imagenet", "head_prefix": None})(), 4, 5, 2, 1)
    for backbone, pre, text in (("convnext_tiny", False, "built only on the registered conv"),
                                ("smallcnn", True, "--no-pretrained")):
        with pytest.raises(BenchError, match=text) as err:
            check_arch(backbone, ("packed", 4, 2, 1), pre)
        assert "\n" not in str(err.value)
    check_arch("resnet50", ("packed", 4, 2, 1), False)
    check_arch("convnext_tiny", ("batchensemble", 4), True)  # BatchEnsemble keeps W
    with pytest.raises(BenchError, match="would mix"):
        build_model("timm:vit_tiny_patch16_224", 32, 4, 5, arch=("packed", 4, 2, 1))


# ----------------------------------------------------------------- fused --
@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("name", ["batchensemble", "packed"])
def test_fused_seeds_train_as_each_seed_alone(tiny, name):
    """The efficient ensembles under vmap (--fuse seeds / methods): the tiled
    batch and the grouped convolutions batch over members like any layer."""
    import dataclasses

    import numpy as np

    from bench.core.config import PROFILES
    from bench.methods import create_method
    from bench.train.backbones import model_arch
    from bench.train.fused import train_fused
    from bench.train.loop import train

    cfg = dataclasses.replace(PROFILES["quick"], cycles=1, epochs_per_cycle=1)
    method = create_method(name, {"be_members" if name == "batchensemble" else "pe_members": "2"})

    def model(seed):
        torch.manual_seed(seed)
        return build_model("smallcnn", tiny.image_size, 2, tiny.num_classes,
                           arch=model_arch(method))[0]

    alone = [train(model(s), copy.deepcopy(method), cfg, tiny, s, progress=False) for s in (0, 1)]
    fused = train_fused([model(s) for s in (0, 1)], [copy.deepcopy(method) for _ in (0, 1)], cfg,
                        tiny, [0, 1], progress=False)
    for a, f in zip(alone, fused):
        assert f.test_logits.shape[1] == 2
        np.testing.assert_allclose(f.test_logits, a.test_logits, rtol=1e-3, atol=1e-4)
    assert not np.allclose(fused[0].test_logits, fused[1].test_logits, atol=1e-2)
