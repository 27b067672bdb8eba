"""The width a library backbone really gives, measured (bench.train.backbones
puts the heads on it)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from bench.core.errors import BenchError

if TYPE_CHECKING:
    from torch import nn


def pooled_width(model: nn.Module, image_size: int, name: str) -> int:
    """The width of the features `model` gives one image of `image_size` px
    (224 when 0), measured: timm's `num_features` is the width before the
    head, which is not what comes out where a head layer follows the pool
    (MobileNetV3's conv_head: 288 -> 1,024). One blank image in eval mode,
    no grad; every module's mode and the global RNG are left as they were,
    so the model built is the one built without the measurement."""
    # torch on demand: `bench list` imports this module (the BACKBONES registry)
    import torch

    modes = [(m, m.training) for m in model.modules()]
    size = image_size or 224
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            out = model.eval()(torch.zeros(1, 3, size, size))
    finally:
        for m, mode in modes:
            m.training = mode
    if not isinstance(out, torch.Tensor) or out.dim() != 2:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise BenchError(f"backbone '{name}' gives {got} for one {size} px image, not one "
                         "feature vector per image, so no head can go on it; choose another "
                         "model")
    return int(out.shape[1])
