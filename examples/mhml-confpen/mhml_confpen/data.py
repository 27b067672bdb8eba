"""`stripes`: a synthetic 3-class image dataset (horizontal, vertical or
diagonal stripes under noise), generated from a fixed seed; no files needed.

A dataset adapter is a function (data_root, image_size, **options) ->
DatasetBundle with uint8 [N, H, W, 3] images and int labels per split."""
import numpy as np

from bench.plugins import DatasetBundle, Split, register_dataset

CLASSES = ["horizontal", "vertical", "diagonal"]
SEED = 0


def _images(n: int, size: int, rng) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.integers(0, len(CLASSES), n)
    yy, xx = np.mgrid[0:size, 0:size]
    period = rng.integers(3, 6, n)[:, None, None]
    phase = rng.integers(0, 6, n)[:, None, None]
    coord = np.where(labels[:, None, None] == 0, yy, np.where(labels[:, None, None] == 1,
                                                              xx, xx + yy))
    stripes = ((coord + phase) // period) % 2
    noisy = stripes * 160 + rng.normal(48, 40, stripes.shape)
    grey = np.clip(noisy, 0, 255).astype(np.uint8)
    return np.repeat(grey[..., None], 3, axis=3), labels


@register_dataset("stripes", "synthetic stripes (horizontal, vertical, diagonal), 3 classes, "
                             "16 px, 300/90/90 images")
def stripes(data_root=None, image_size: int = 0, **options) -> DatasetBundle:
    size = image_size or 16
    rng = np.random.default_rng(SEED)
    splits = [Split(*_images(n, size, rng)) for n in (300, 90, 90)]
    return DatasetBundle(name="stripes", classes=list(CLASSES), train=splits[0],
                         val=splits[1], test=splits[2], default_backbone="tinycnn",
                         identity={"generator": "stripes", "seed": SEED, "size": size})
