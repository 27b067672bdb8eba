"""`tinycnn`: two convolutions and a global pool, for CPU demos.

A backbone factory takes (image_size, pretrained, weights, **options) and
returns a Backbone: the feature extractor (images -> [B, dim]) and its dim;
the harness adds one linear head per head of the method."""
from torch import nn

from bench.plugins import Backbone, BenchError, register_backbone


@register_backbone("tinycnn", "2 convolutions (16-32) + global average pool, CPU demo")
def tinycnn(image_size: int, pretrained: bool = False, weights=None, **_) -> Backbone:
    if pretrained or weights is not None:
        raise BenchError("backbone 'tinycnn' has no pretrained weights; drop --pretrained/--weights")
    features = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    return Backbone(features, 32, min_size=4)
