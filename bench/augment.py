"""TrivialAugmentWide drawn independently for every image of a uint8 batch.

torchvision's v2 transform applied to a whole batch tensor draws ONE
operation for the batch; the paper augments each image on its own, so we
loop over the images (cheap on CPU next to the model step, see DESIGN §2).
Randomness comes from torch's global RNG, which the trainer seeds.
"""
from __future__ import annotations

import torch
from torchvision.transforms import v2

_TA = v2.TrivialAugmentWide()


def augment_batch(x: torch.Tensor) -> torch.Tensor:
    """uint8 [B, 3, H, W] -> uint8 [B, 3, H, W], one random op per image."""
    return torch.stack([_TA(img) for img in x])
