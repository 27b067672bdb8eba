"""Backbones (feature extractors) and the multi-head model on top of them.

A backbone factory returns a `Backbone`: a module mapping images [B,3,H,W] to
pooled features [B,D]. The method decides how many heads go on top; the
model always returns logits shaped [B, M, K].
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import nn

from .registry import Registry

BACKBONES = Registry("backbone")


@dataclass
class Backbone:
    features: nn.Module  # images -> pooled features [B, dim]
    dim: int
    # Built once per head, before its linear layer (ConvNeXt's head LayerNorm
    # is kept per head, as the released code did). None = plain linear heads.
    head_prefix: Optional[Callable[[], nn.Module]] = None
    weights: str = "random"  # provenance: which initial weights were loaded
    min_size: int = 1  # images smaller than this are rejected / rounded up


class MultiHeadNet(nn.Module):
    """M classifier heads on shared features; forward returns [B, M, K]."""

    def __init__(self, backbone: Backbone, heads: int, num_classes: int):
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


def create_backbone(name: str, image_size: int, pretrained: bool = False) -> Backbone:
    return BACKBONES.get(name)(image_size=image_size, pretrained=pretrained)


def build_model(backbone: str, image_size: int, heads: int, num_classes: int,
                pretrained: bool = False) -> tuple[MultiHeadNet, Backbone]:
    bb = create_backbone(backbone, image_size, pretrained)
    return MultiHeadNet(bb, heads, num_classes), bb


def _conv_bn(cin: int, cout: int, stride: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


@BACKBONES.register("smallcnn", "4-layer CNN (32-64-128-128), CPU demo backbone, any size >= 8 px")
def smallcnn(image_size: int, pretrained: bool = False) -> Backbone:
    if pretrained:
        from .errors import BenchError

        raise BenchError("backbone 'smallcnn' has no pretrained weights; drop --pretrained")
    features = nn.Sequential(
        _conv_bn(3, 32, 1), _conv_bn(32, 64, 2), _conv_bn(64, 128, 2), _conv_bn(128, 128, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    )
    return Backbone(features, 128, min_size=8)


def timm_backbone(model_name: str, image_size: int, pretrained: bool, **kwargs) -> Backbone:
    """Any timm model as a pooled-feature extractor (num_classes=0)."""
    import timm

    model = timm.create_model(model_name, pretrained=pretrained, num_classes=0, **kwargs)
    weights = f"timm:{model_name}:imagenet" if pretrained else "random"
    return Backbone(model, model.num_features, weights=weights)


@BACKBONES.register("resnet18", "timm resnet18 (11M params), small CPU-friendly backbone")
def resnet18(image_size: int, pretrained: bool = False) -> Backbone:
    return timm_backbone("resnet18", image_size, pretrained)
