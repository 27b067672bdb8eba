"""scikit-learn's bundled digits: the offline demo dataset.

Real data (1,797 8x8 grey images, 10 classes) shipped inside scikit-learn,
so `run_all.sh --quick` works with no download. Images are scaled to uint8,
upsampled (bilinear) to 32x32 and copied to three channels. The 60/20/20
stratified split is fixed (random_state 0) and never depends on the run seed.

`--data-opt label_noise=P` replaces a share P of the *training* labels with
another class drawn uniformly (symmetric noise; validation and test stay
clean). The flipped images are fixed (drawn from SPLIT_SEED, not the run
seed), so every run and method sees the same noisy set, and the noise rate is
part of the dataset identity (records of different rates never mix).
`--data-opt train_per_class=N` keeps N training images of each class (a fixed
subset, also part of the identity): a small-data regime. docs/quickstart.md
says what each does to calibration on this data. `--data-opt test_per_class=N`
keeps N test images of each class the same way (a fixed subset drawn from
SPLIT_SEED, part of the identity): a small test split, so that the shift
demo's corrupted set (`--eval shift`, 66 blocks of the test split) builds in
about a minute (docs/quickstart.md, "Shift and OOD").
"""
from __future__ import annotations

import numpy as np

from bench.core.errors import BenchError

from .base import DATASETS, DatasetBundle, Split
from .filelist import check_options

SPLIT_SEED = 0
OPTIONS = {"label_noise": "share of training labels flipped to another class, 0 <= P < 1",
           "train_per_class": "keep N training images per class (a small-data regime)",
           "test_per_class": "keep N test images per class (a small test split: the shift demo)"}


def noise_rate(text) -> float:
    try:
        rate = float(text)
    except (TypeError, ValueError):
        rate = float("nan")
    if not 0.0 <= rate < 1.0:  # NaN fails too
        raise BenchError(f"--data-opt label_noise={text}: expected a share 0 <= P < 1 "
                         "(e.g. label_noise=0.3)")
    return rate


def per_class(text, key: str = "train_per_class") -> int:
    try:
        n = int(text)
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise BenchError(f"--data-opt {key}={text}: expected a whole number >= 1 "
                         f"(e.g. {key}=20)")
    return n


def subsample(idx: np.ndarray, labels: np.ndarray, n: int, seed: int) -> np.ndarray:
    """The first `n` of each class in a fixed permutation of `idx` (order kept)."""
    perm = np.random.default_rng(seed).permutation(idx)
    keep = np.concatenate([perm[labels[perm] == c][:n] for c in np.unique(labels[idx])])
    return np.sort(keep)


def flip_labels(labels: np.ndarray, rate: float, num_classes: int, seed: int) -> np.ndarray:
    """Each label, with probability `rate`, replaced by one of the other classes
    (uniform): labels + an offset in 1..K-1, mod K."""
    rng = np.random.default_rng(seed)
    flip = rng.random(len(labels)) < rate
    offset = rng.integers(1, num_classes, len(labels))
    return np.where(flip, (labels + offset) % num_classes, labels)


def _to_rgb_uint8(images8: np.ndarray, size: int) -> np.ndarray:
    # torch on demand: `bench list` imports every adapter (the DATASETS registry)
    import torch
    import torch.nn.functional as F

    x = torch.from_numpy(images8.astype(np.float32) / 16.0).unsqueeze(1)  # [N,1,8,8]
    x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    x = (x.clamp(0, 1) * 255).round().to(torch.uint8)
    return x.repeat(1, 3, 1, 1).permute(0, 2, 3, 1).contiguous().numpy()


@DATASETS.register("digits", "scikit-learn digits, 1,797 images, 10 classes, 32 px (offline demo)")
def digits(data_root=None, image_size: int = 0, download: bool = False, progress: bool = True,
           **options) -> DatasetBundle:
    # scikit-learn on demand: `bench list` imports every adapter (the DATASETS registry)
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    check_options("digits", options, OPTIONS)
    rate = noise_rate(options.get("label_noise", 0))
    raw = load_digits()
    size = image_size or 32
    images = _to_rgb_uint8(raw.images, size)
    labels = raw.target.astype(np.int64)
    idx = np.arange(len(labels))
    rest, test = train_test_split(idx, test_size=0.2, stratify=labels, random_state=SPLIT_SEED)
    train, val = train_test_split(rest, test_size=0.25, stratify=labels[rest],
                                  random_state=SPLIT_SEED)
    n_per_class = per_class(options["train_per_class"]) if "train_per_class" in options else 0
    if n_per_class:
        train = subsample(train, labels, n_per_class, SPLIT_SEED)
    n_test = per_class(options["test_per_class"], "test_per_class") \
        if "test_per_class" in options else 0
    if n_test:
        test = subsample(test, labels, n_test, SPLIT_SEED)
    return DatasetBundle(
        name="digits",
        classes=[str(d) for d in range(10)],
        train=Split(images[train], flip_labels(labels[train], rate, 10, SPLIT_SEED)
                    if rate else labels[train]),
        val=Split(images[val], labels[val]),
        test=Split(images[test], labels[test]),
        default_backbone="smallcnn",
        identity={"source": "sklearn.load_digits", "size": size, "split_seed": SPLIT_SEED,
                  **({"label_noise": rate} if rate else {}),
                  **({"train_per_class": n_per_class} if n_per_class else {}),
                  **({"test_per_class": n_test} if n_test else {})},
    )
