"""The torch modules behind the backbones: the multi-head model, the small
CNN's layers, and the swaps that make a model fit for a fused group (vmap).

Kept apart from bench.train.backbones, which registers the backbones by name
without importing torch (`bench list` and `bench --help` start in a fraction
of a second; torch loads when a model is built).
"""
from __future__ import annotations

import torch
from torch import nn
from torchvision.models.convnext import LayerNorm2d
from torchvision.ops import StochasticDepth

from bench.core.errors import BenchError


class MultiHeadNet(nn.Module):
    """M classifier heads on shared features; forward returns [B, M, K]."""

    def __init__(self, backbone, heads: int, num_classes: int):
        super().__init__()
        self.backbone = backbone.features
        self.heads, self.num_classes = heads, num_classes
        if backbone.head_prefix is None:
            # One stacked linear layer == M independent linear heads, one matmul.
            self.head = nn.Linear(backbone.dim, heads * num_classes)
            self.per_head = None
        else:
            self.head = None
            self.per_head = nn.ModuleList(
                nn.Sequential(backbone.head_prefix(), nn.Linear(backbone.dim, num_classes))
                for _ in range(heads)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.backbone(x)
        if self.per_head is None:
            return self.head(f).view(-1, self.heads, self.num_classes)
        return torch.stack([h(f) for h in self.per_head], dim=1)


class AlwaysDropout(nn.Module):
    """Dropout that samples in eval mode too: MC-Dropout's stochastic passes
    (Gal and Ghahramani 2016) are dropout kept on at test time. Drawn out of
    place from the input's own shape, so under vmap(randomness="different")
    every fused member draws its own masks."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.dropout(x, self.p, training=True)


class MCDropoutNet(nn.Module):
    """One classifier after dropout on the features, run `passes` times with
    independent masks: forward returns [B, T, K], the T passes standing as
    heads, so every measure, TS and the heads' mutual information read them
    as they read a multi-head model's. Dropout acts after the features only,
    so the backbone runs once per image whatever T."""

    def __init__(self, backbone, passes: int, num_classes: int, p: float):
        super().__init__()
        self.backbone = backbone.features
        self.heads, self.num_classes = passes, num_classes
        self.prefix = backbone.head_prefix() if backbone.head_prefix else nn.Identity()
        self.drop = AlwaysDropout(p)
        self.head = nn.Linear(backbone.dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.prefix(self.backbone(x))
        f = f.unsqueeze(1).expand(-1, self.heads, f.shape[-1])  # [B, T, D], no copy
        return self.head(self.drop(f))


def conv_bn(cin: int, cout: int, stride: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


def smallcnn_features() -> nn.Sequential:
    """smallcnn's layers: 4 conv-bn-relu blocks (32-64-128-128), global pooling."""
    return nn.Sequential(
        conv_bn(3, 32, 1), conv_bn(32, 64, 2), conv_bn(64, 128, 2), conv_bn(128, 128, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    )


def max_drop_path(model: nn.Module) -> float:
    """The largest stochastic-depth rate in `model` (the configured rate: both
    libraries ramp it linearly over the blocks up to that value)."""
    rates = [float(getattr(m, "drop_prob", getattr(m, "p", 0.0))) for m in model.modules()
             if isinstance(m, (StochasticDepth, RowDropPath)) or type(m).__name__ == "DropPath"]
    return max(rates, default=0.0)


def scale_drop_path(model: nn.Module, rate: float) -> None:
    """Set the stochastic-depth rate to `rate`, keeping torchvision's linear ramp
    over the blocks (swin_t does not take the rate as an argument)."""
    mods = [m for m in model.modules() if isinstance(m, StochasticDepth)]
    top = max((m.p for m in mods), default=0.0)
    for m in mods:
        m.p = m.p / top * rate if top else rate


def drop_classifier(model: nn.Module, attr: str):
    """Replace the classifier by Identity; returns (feature dim, head prefix).
    ConvNeXt: every head gets a fresh LayerNorm2d + Flatten before its Linear,
    as the released code built it (the pretrained classifier norm is dropped)."""
    old = getattr(model, attr)
    setattr(model, attr, nn.Identity())
    if isinstance(old, nn.Linear):
        return old.in_features, None

    norm, linear = old[0], old[-1]
    return linear.in_features, lambda: nn.Sequential(
        LayerNorm2d(linear.in_features, eps=norm.eps), nn.Flatten(1))


def drop_last_linear(model: nn.Module, attrs: tuple, name: str) -> int:
    """Replace the last nn.Linear under the first of `attrs` that `model` has
    by Identity; returns its in_features (the heads' input). One-line error
    for a model whose classifier is no Linear (SqueezeNet's is a convolution)."""
    for attr in attrs:
        holder = getattr(model, attr, None)
        if not isinstance(holder, nn.Module):
            continue
        if isinstance(holder, nn.Linear):
            setattr(model, attr, nn.Identity())
            return holder.in_features
        found = [(n, m) for n, m in holder.named_modules() if isinstance(m, nn.Linear)]
        if found:
            path, linear = found[-1]
            parent = holder.get_submodule(path.rpartition(".")[0]) if "." in path else holder
            setattr(parent, path.rpartition(".")[2], nn.Identity())
            return linear.in_features
    raise BenchError(f"backbone '{name}': no Linear classifier under {', '.join(attrs)} to "
                     "replace by the heads; choose a model whose classifier is a Linear layer")


class RowDropPath(nn.Module):
    """torchvision's StochasticDepth(p, "row") drawn out of place, so that under
    vmap(randomness="different") every fused member draws its own masks: the
    same distribution (each sample kept with probability 1 - p, scaled by
    1 / (1 - p)). torchvision's version fills an unbatched tensor in place,
    which vmap refuses. timm's DropPath already draws from the batched input."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        survival = 1.0 - self.p
        mask = torch.bernoulli(x.new_full((x.shape[0],) + (1,) * (x.dim() - 1), survival))
        return x * mask.div_(survival) if survival > 0 else x * mask


def vmap_safe_drop_path(model: nn.Module) -> nn.Module:
    """Replace every torchvision StochasticDepth in `model` by RowDropPath (in place)."""
    for name, child in list(model.named_modules()):
        for attr, sub in list(child.named_children()):
            if isinstance(sub, StochasticDepth):
                if sub.mode != "row":
                    raise ValueError(f"{name}.{attr}: StochasticDepth mode {sub.mode!r}")
                setattr(child, attr, RowDropPath(sub.p))
    return model


class MeanPool2d(nn.Module):
    """Global average pooling as a mean over H and W. ATen computes
    AdaptiveAvgPool2d(1) exactly this way and then, for an input whose layout
    suggests channels_last (ConvNeXt's and Swin's permuted features), restrides
    its [N, C, 1, 1] output in place with as_strided_: the same values, but an
    op vmap has no batching rule for, so a fused group falls back to a
    member-by-member loop there. The mean alone gives identical numbers."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean((-2, -1), keepdim=True)


# Models whose pooling a fused group runs as MeanPool2d: where it was faster on
# an H100 (fused x5, bf16: ConvNeXt-T 1.16x at 32 px, 1.08x at 224 px; Swin-T
# 0.92x / 0.88x, so Swin keeps its pool; docs/speed.md).
POOL_AS_MEAN = ("ConvNeXt",)


def vmap_safe_pool(model: nn.Module) -> nn.Module:
    """Replace the AdaptiveAvgPool2d(1) of the models named in POOL_AS_MEAN by
    MeanPool2d (in place)."""
    for child in list(model.modules()):
        if type(child).__name__ not in POOL_AS_MEAN:
            continue
        for attr, sub in list(child.named_children()):
            if isinstance(sub, nn.AdaptiveAvgPool2d) and sub.output_size in (1, (1, 1)):
                setattr(child, attr, MeanPool2d())
    return model


class MixedBatchNorm2d(nn.BatchNorm2d):
    """BatchNorm2d that takes a bf16 input with fp32 statistics under vmap.
    Alone, cuDNN's batch norm accepts that mix (bf16 autocast leaves batch norm
    to it: fp32 statistics, bf16 output); vmap's batching rule does not ("Expected
    running_mean to have type BFloat16"). Normalising the input upcast to fp32
    (exact) and rounding the output back is what cuDNN computes."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        stats = self.running_mean
        if stats is not None and x.dtype != stats.dtype:
            return super().forward(x.to(stats.dtype)).to(x.dtype)
        return super().forward(x)


def vmap_safe(model: nn.Module) -> nn.Module:
    """`model` made ready for a fused group (bench.train.fused), in place: its
    own drop-path masks per member, pooling vmap can batch, batch norm that
    takes bf16 inputs."""
    vmap_safe_drop_path(model)
    vmap_safe_pool(model)
    for m in model.modules():
        if type(m) is nn.BatchNorm2d:
            m.__class__ = MixedBatchNorm2d
    return model
