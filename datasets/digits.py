"""scikit-learn's bundled digits: the offline demo dataset.

Real data (1,797 8x8 grey images, 10 classes) shipped inside scikit-learn,
so `run_all.sh --quick` works with no download. Images are scaled to uint8,
upsampled (bilinear) to 32x32 and copied to three channels. The 60/20/20
stratified split is fixed (random_state 0) and never depends on the run seed.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .base import DATASETS, DatasetBundle, Split

SPLIT_SEED = 0


def _to_rgb_uint8(images8: np.ndarray, size: int) -> np.ndarray:
    x = torch.from_numpy(images8.astype(np.float32) / 16.0).unsqueeze(1)  # [N,1,8,8]
    x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    x = (x.clamp(0, 1) * 255).round().to(torch.uint8)
    return x.repeat(1, 3, 1, 1).permute(0, 2, 3, 1).contiguous().numpy()


@DATASETS.register("digits", "scikit-learn digits, 1,797 images, 10 classes, 32 px (offline demo)")
def digits(data_root=None, image_size: int = 0, **_) -> DatasetBundle:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    raw = load_digits()
    size = image_size or 32
    images = _to_rgb_uint8(raw.images, size)
    labels = raw.target.astype(np.int64)
    idx = np.arange(len(labels))
    rest, test = train_test_split(idx, test_size=0.2, stratify=labels, random_state=SPLIT_SEED)
    train, val = train_test_split(rest, test_size=0.25, stratify=labels[rest],
                                  random_state=SPLIT_SEED)
    return DatasetBundle(
        name="digits",
        classes=[str(d) for d in range(10)],
        train=Split(images[train], labels[train]),
        val=Split(images[val], labels[val]),
        test=Split(images[test], labels[test]),
        default_backbone="smallcnn",
        identity={"source": "sklearn.load_digits", "size": size, "split_seed": SPLIT_SEED},
    )
