"""Backbones (feature extractors) and the multi-head model on top of them.

A backbone factory returns a `Backbone`: a module mapping images [B,3,H,W] to
pooled features [B,D]. The method decides how many heads go on top; the
model always returns logits shaped [B, M, K].
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

import torch
from torch import nn

from bench.core.registry import Registry

if TYPE_CHECKING:
    from bench.train.weights import WeightsSpec

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


def create_backbone(name: str, image_size: int, pretrained: bool = False,
                    weights: Optional["WeightsSpec"] = None) -> Backbone:
    factory = BACKBONES.get(name)
    if weights is not None:
        return factory(image_size=image_size, pretrained=True, weights=weights)
    return factory(image_size=image_size, pretrained=pretrained)


def build_model(backbone: str, image_size: int, heads: int, num_classes: int,
                pretrained: bool = False, weights: Optional["WeightsSpec"] = None
                ) -> tuple[MultiHeadNet, Backbone]:
    bb = create_backbone(backbone, image_size, pretrained, weights)
    if image_size < bb.min_size:
        from bench.core.errors import BenchError

        raise BenchError(f"backbone '{backbone}' needs images of at least {bb.min_size} px, "
                         f"got {image_size}; use --set image_size={fit_size(backbone, image_size)}")
    return MultiHeadNet(bb, heads, num_classes), bb


# name -> (min size, multiple): the image size a backbone can take. ConvNeXt's
# stride-32 stem+downsamplings fail at 28 px (DESIGN §2), so PathMNIST uses 32.
SIZE_RULES = {"convnext_tiny": (32, 32), "swin_tiny": (28, 4), "resnet50": (8, 1),
              "smallcnn": (8, 1)}


def fit_size(backbone: str, size: int) -> int:
    """The smallest size >= `size` that `backbone` accepts."""
    low, multiple = SIZE_RULES.get(backbone, (1, 1))
    size = max(size, low)
    return -(-size // multiple) * multiple


def _conv_bn(cin: int, cout: int, stride: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


@BACKBONES.register("smallcnn", "4-layer CNN (32-64-128-128), CPU demo backbone, any size >= 8 px")
def smallcnn(image_size: int, pretrained: bool = False, weights=None) -> Backbone:
    if pretrained or weights is not None:
        from bench.core.errors import BenchError

        raise BenchError("backbone 'smallcnn' has no pretrained weights; drop --pretrained/--weights")
    features = nn.Sequential(
        _conv_bn(3, 32, 1), _conv_bn(32, 64, 2), _conv_bn(64, 128, 2), _conv_bn(128, 128, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    )
    return Backbone(features, 128, min_size=SIZE_RULES["smallcnn"][0])


def timm_backbone(model_name: str, image_size: int, pretrained: bool, weights=None,
                  **kwargs) -> Backbone:
    """Any timm model as a pooled-feature extractor (num_classes=0).

    Weights never come from timm's own download path: `--pretrained` reads
    the local Hugging Face / torch-hub cache and `--weights` a file, both as
    tensors only (see bench/train/weights.py)."""
    import timm

    from bench.train.weights import load_into, resolve_weights

    model = timm.create_model(model_name, pretrained=False, num_classes=0, **kwargs)
    if pretrained and weights is None:
        weights = resolve_weights(model_name, pretrained=True)
    if weights is not None:
        load_into(model, weights, model_name)
    return Backbone(model, model.num_features, weights=weights.label if weights else "random")


@BACKBONES.register("resnet18", "timm resnet18 (11M params), small CPU-friendly backbone")
def resnet18(image_size: int, pretrained: bool = False, weights=None) -> Backbone:
    return timm_backbone("resnet18", image_size, pretrained, weights)


@BACKBONES.register("resnet50", "timm resnet50 (25M params), the paper's ResNet50, any size >= 8 px")
def resnet50(image_size: int, pretrained: bool = False, weights=None) -> Backbone:
    bb = timm_backbone("resnet50", image_size, pretrained, weights)
    bb.min_size = SIZE_RULES["resnet50"][0]
    return bb


@BACKBONES.register("convnext_tiny", "timm convnext_tiny (28M), a fresh head LayerNorm per head; "
                    "sizes multiple of 32 (PathMNIST: 32 px)")
def convnext_tiny(image_size: int, pretrained: bool = False, weights=None) -> Backbone:
    bb = timm_backbone("convnext_tiny", image_size, pretrained, weights)
    model = bb.features
    # timm applies head.norm (LayerNorm over channels) after pooling. The
    # released code replaced the classifier and gave every head a NEW
    # LayerNorm2d (weight 1, bias 0) before its Linear; do the same, so
    # pretrained runs start from the same head as the paper's.
    eps = model.head.norm.eps
    model.head.norm = nn.Identity()
    bb.head_prefix = lambda: nn.LayerNorm(bb.dim, eps=eps)
    bb.min_size = SIZE_RULES["convnext_tiny"][0]
    return bb


@BACKBONES.register("swin_tiny", "timm swin_tiny_patch4_window7_224 (28M); img_size set to the "
                    "image size (windows clamped at 28/32 px)")
def swin_tiny(image_size: int, pretrained: bool = False, weights=None) -> Backbone:
    size = image_size or 224
    bb = timm_backbone("swin_tiny_patch4_window7_224", size, pretrained, weights,
                       img_size=size)
    bb.min_size = SIZE_RULES["swin_tiny"][0]
    return bb
