"""Efficient ensembles whose members are stored as heads [B, M, K]:
BatchEnsemble (Wen, Tran and Ba, ICLR 2020), Packed-Ensembles (Laurent
et al., ICLR 2023) and MIMO (Havasi et al., ICLR 2021), each built from a
registered backbone's modules.

Written here rather than taken from TorchUncertainty (docs/architecture.md,
"Efficient ensembles": its package imports Lightning on `import`); each
layer is tested against the paper's equations (tests/train/test_ensembles.py).
"""
from __future__ import annotations

import torch
from torch import nn

from bench.core.errors import BenchError
from bench.train.nets import MultiHeadNet

# torchvision's Swin attention reads its qkv / proj weights as tensors
# (F.linear inside shifted_window_attention), never calling the modules: a
# BatchEnsemble wrapper there would never see its input, so those two stay
# shared by every member (docs/methods.md says so).
FUNCTIONAL_WEIGHTS = ("ShiftedWindowAttention", "ShiftedWindowAttentionV2")


def _per_member(v: torch.Tensor, members: int, ndim: int, channel_dim: int) -> torch.Tensor:
    """[M, C] -> a view that broadcasts against an input unflattened to
    [M, b, ...] of `ndim` + 1 dimensions, C at `channel_dim` (of the input)."""
    shape = [members] + [1] * ndim
    shape[channel_dim + 1 if channel_dim >= 0 else channel_dim] = v.shape[1]
    return v.view(shape)


class BatchEnsembleLayer(nn.Module):
    """One shared layer W with rank-one fast weights per member:
    member i computes ((x o s_i) W) o r_i + b_i, i.e. W o (r_i s_i^T)
    (Wen et al. 2020, eq. 3-4). The input is member-major, [M * b, ...]:
    the first b rows are member 0's. r, s start as N(1, 0.5) (the paper's
    random-sign/normal init as uncertainty-baselines and TorchUncertainty
    run it); the per-member bias starts as the layer's own bias."""

    def __init__(self, layer: nn.Module, members: int, channel_dim: int):
        super().__init__()
        self.layer, self.members, self.channel_dim = layer, members, channel_dim
        cin = layer.in_channels if isinstance(layer, nn.Conv2d) else layer.in_features
        cout = layer.out_channels if isinstance(layer, nn.Conv2d) else layer.out_features
        self.s = nn.Parameter(torch.empty(members, cin).normal_(1.0, 0.5))
        self.r = nn.Parameter(torch.empty(members, cout).normal_(1.0, 0.5))
        if layer.bias is not None:
            self.bias = nn.Parameter(layer.bias.detach().clone().expand(members, -1).clone())
            layer.register_parameter("bias", None)
        else:
            self.bias = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m, d = self.members, self.channel_dim
        xs = x.unflatten(0, (m, -1))
        xs = xs * _per_member(self.s, m, x.dim(), d)
        y = self.layer(xs.flatten(0, 1)).unflatten(0, (m, -1))
        y = y * _per_member(self.r, m, x.dim(), d)
        if self.bias is not None:
            y = y + _per_member(self.bias, m, x.dim(), d)
        return y.flatten(0, 1)


def batch_ensemble(module: nn.Module, members: int) -> nn.Module:
    """Every nn.Conv2d and nn.Linear in `module` wrapped as a BatchEnsembleLayer
    (in place; weights kept, so pretrained backbones keep theirs as W)."""
    for parent in list(module.modules()):
        if type(parent).__name__ in FUNCTIONAL_WEIGHTS or isinstance(parent, BatchEnsembleLayer):
            continue
        for attr, child in list(parent.named_children()):
            if type(child) is nn.Conv2d:
                setattr(parent, attr, BatchEnsembleLayer(child, members, channel_dim=1))
            elif type(child) is nn.Linear:
                setattr(parent, attr, BatchEnsembleLayer(child, members, channel_dim=-1))
    return module


class BatchEnsembleNet(nn.Module):
    """The backbone with BatchEnsemble layers and a BatchEnsemble classifier;
    the batch is tiled M times (member-major), so every member sees every
    image, in training and evaluation. forward returns [B, M, K]."""

    def __init__(self, backbone, members: int, num_classes: int):
        super().__init__()
        self.heads, self.num_classes = members, num_classes
        self.backbone = batch_ensemble(backbone.features, members)
        self.prefix = backbone.head_prefix() if backbone.head_prefix else nn.Identity()
        self.head = BatchEnsembleLayer(nn.Linear(backbone.dim, num_classes), members, -1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tiled = x.repeat(self.heads, *([1] * (x.dim() - 1)))
        z = self.head(self.prefix(self.backbone(tiled)))
        return z.unflatten(0, (self.heads, -1)).transpose(0, 1)


# --------------------------------------------------------- Packed-Ensembles --
# TorchUncertainty's PackedConv2d lowers gamma (to 1 at least) until every
# group reads at least this many input channels (its minimum_channels_per_group
# default, which its packed ResNets keep)
MIN_GROUP_CHANNELS = 64


def packed_gamma(cin: int, members: int, gamma: int, block_first: bool, rule: str) -> int:
    """The gamma a non-stem convolution of `cin` (widened) input channels gets:
    `rule` "every" keeps it; "torch-uncertainty" (TorchUncertainty's packed
    ResNets) uses 1 on each residual block's first convolution and lowers it
    while the groups do not divide cin or read fewer than MIN_GROUP_CHANNELS."""
    if rule == "every":
        return gamma
    g = 1 if block_first else gamma
    while g > 1 and (cin % (members * g) or cin // (members * g) < MIN_GROUP_CHANNELS):
        g -= 1
    return g


def _packed_conv(conv: nn.Conv2d, members: int, alpha: int, gamma: int, first: bool,
                 where: str) -> nn.Conv2d:
    """conv widened alpha times and cut into M * gamma groups (Laurent et al.
    2023, Sec. 3): member i owns the i-th M-th of the channels. The first
    layer reads the image whole (one group), its outputs cut by member."""
    if conv.groups != 1:
        raise BenchError(f"packed: {where} is a grouped convolution ({conv.groups} groups); "
                         "Packed-Ensembles is built here for dense conv / batch-norm backbones "
                         "(smallcnn, resnet18, resnet50)")
    groups = 1 if first else members * gamma
    cin = conv.in_channels if first else alpha * conv.in_channels
    cout = alpha * conv.out_channels
    if cin % groups or cout % (members * gamma):
        raise BenchError(f"packed: {where} has {conv.in_channels} -> {conv.out_channels} "
                         f"channels; x{alpha} they do not split into {members * gamma} groups "
                         "(pe_alpha x channels must be divisible by pe_members x pe_gamma)")
    return nn.Conv2d(cin, cout, conv.kernel_size, conv.stride, conv.padding, conv.dilation,
                     groups=groups, bias=conv.bias is not None, padding_mode=conv.padding_mode)


def packed(module: nn.Module, members: int, alpha: int, gamma: int,
           rule: str = "every") -> nn.Module:
    """Every conv / batch norm of `module` replaced (in place) by its packed
    form, fresh weights; refuses (one line) any other layer with parameters:
    a LayerNorm or Linear across channels would mix the members. `rule`:
    which convolutions get gamma (packed_gamma); a residual block is a module
    with a `downsample` attribute (torchvision's and timm's ResNet blocks)."""
    first = True
    for name, parent in list(module.named_modules()):
        block_first = hasattr(parent, "downsample")
        for attr, child in list(parent.named_children()):
            where = f"{name}.{attr}".lstrip(".")
            if type(child) is nn.Conv2d:
                g = packed_gamma(alpha * child.in_channels, members, gamma, block_first, rule)
                setattr(parent, attr, _packed_conv(child, members, alpha, g, first, where))
                first = block_first = False
            elif type(child) is nn.BatchNorm2d:
                setattr(parent, attr, nn.BatchNorm2d(
                    alpha * child.num_features, child.eps, child.momentum, child.affine,
                    child.track_running_stats))
            elif not list(child.children()) and any(True for _ in child.parameters()):
                raise BenchError(f"packed: {where} is a {type(child).__name__}, which would mix "
                                 "the members' channels; Packed-Ensembles is built here for "
                                 "conv / batch-norm backbones (smallcnn, resnet18, resnet50)")
    return module


class PackedNet(nn.Module):
    """Packed-Ensembles: M independent subnetworks of width alpha / M of the
    backbone's, run as one network of grouped convolutions; the classifier
    is M linear layers on the members' feature slices (one grouped 1x1
    convolution). forward returns [B, M, K]."""

    def __init__(self, backbone, members: int, num_classes: int, alpha: int, gamma: int,
                 rule: str = "every"):
        super().__init__()
        if backbone.weights != "random":
            raise BenchError("packed: the packed network's widths differ from the backbone's, so "
                             f"its weights ({backbone.weights}) cannot be loaded; train from scratch "
                             "(--no-pretrained, no --weights)")
        if backbone.head_prefix is not None:
            raise BenchError("packed: this backbone's head norm would mix the members; "
                             "use a conv / batch-norm backbone (smallcnn, resnet18, resnet50)")
        self.heads, self.num_classes = members, num_classes
        self.backbone = packed(backbone.features, members, alpha, gamma, rule)
        self.head = nn.Conv1d(alpha * backbone.dim, members * num_classes, 1, groups=members)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.backbone(x).flatten(1)  # [B, alpha * D], member-major channels
        return self.head(f.unsqueeze(-1)).view(-1, self.heads, self.num_classes)


# --------------------------------------------------------------------- MIMO --
def stem_conv(module: nn.Module, channels: int = 3) -> nn.Conv2d | None:
    """The convolution that reads the image: the one Conv2d (or subclass, e.g.
    timm's StdConv2d) of `module` taking `channels` input channels, ungrouped;
    None when there is none (a space-to-depth or linear stem) or several."""
    found = {id(m): m for m in module.modules()
             if isinstance(m, nn.Conv2d) and m.in_channels == channels}
    convs = list(found.values())
    return convs[0] if len(convs) == 1 and convs[0].groups == 1 else None


def checked_stem(module: nn.Module, name: str) -> nn.Conv2d:
    """stem_conv, or MIMO's one-line refusal of backbone `name`."""
    conv = stem_conv(module)
    if conv is None:
        raise BenchError(f"mimo: backbone '{name}' has no single ungrouped convolution reading "
                         "the 3 image channels to widen to M images; choose a backbone with a "
                         "convolutional stem")
    return conv


def widen_stem(module: nn.Module, members: int, pretrained: bool, name: str) -> int:
    """Widen the stem in place to read M images concatenated along channels
    (member-major: member m's channels are m*C .. m*C + C - 1); returns C.
    Pretrained: every member's slice is the stem's weight / M, so M copies of
    one image give exactly the pretrained stem's output. Random: He-normal
    over the widened fan-in (std sqrt(2 / (M C k h k w))), the initialiser of
    the authors' widened first convolution (uncertainty-baselines' MIMO
    networks: Keras he_normal)."""
    conv = checked_stem(module, name)
    w = conv.weight.detach()
    if pretrained:
        wide = w.repeat(1, members, 1, 1) / members
    else:
        wide = torch.empty(w.shape[0], w.shape[1] * members, *w.shape[2:], dtype=w.dtype)
        nn.init.kaiming_normal_(wide, mode="fan_in", nonlinearity="relu")
    conv.weight = nn.Parameter(wide)
    conv.in_channels = wide.shape[1]
    return w.shape[1]


class MIMONet(MultiHeadNet):
    """MIMO (Havasi et al., ICLR 2021): the backbone with its stem widened to
    M images and M linear heads, head m classifying image m. An input of C
    channels (evaluation: one image) is tiled M times along channels, so
    every member sees it; an input of M * C channels (training:
    bench.methods.mimo's staged batch) goes in as it is. forward returns
    [B, M, K]; its state dict is the multi-head model's, stem widened."""

    def __init__(self, backbone, members: int, num_classes: int, name: str = "backbone"):
        channels = widen_stem(backbone.features, members, backbone.weights != "random", name)
        super().__init__(backbone, members, num_classes)
        self.channels = channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] == self.channels:
            x = x.repeat(1, self.heads, 1, 1)
        return super().forward(x)
