"""The dataset-adapter contract.

An adapter returns uint8 images [N, H, W, 3] and int64 labels [N] for the
train / val / test splits, class names and a default image size. It never
downloads silently; a missing file is a one-line BenchError saying where to
put it or how to fetch it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.core.errors import BenchError
from bench.core.registry import Registry

DATASETS = Registry("dataset")

SPLITS = ("train", "val", "test")


@dataclass
class Split:
    images: np.ndarray  # uint8 [N, H, W, 3]
    labels: np.ndarray  # int64 [N]

    def __post_init__(self):
        if self.images.dtype != np.uint8 or self.images.ndim != 4 or self.images.shape[-1] != 3:
            raise BenchError(
                f"images must be uint8 [N, H, W, 3], got {self.images.dtype} {self.images.shape}"
            )
        self.labels = np.asarray(self.labels, dtype=np.int64).reshape(-1)
        if len(self.labels) != len(self.images):
            raise BenchError(f"{len(self.images)} images but {len(self.labels)} labels")

    def __len__(self) -> int:
        return len(self.labels)


@dataclass
class DatasetBundle:
    name: str
    classes: list[str]
    train: Split
    val: Split
    test: Split
    default_backbone: str = "resnet50"
    # Everything that identifies the data (file, split, size) for the run hash.
    identity: dict = field(default_factory=dict)
    # How reports title the dataset (`--data-opt name=...` of csv / folder):
    # recorded in config.json as `dataset_name`, not part of the run hash.
    display_name: str = ""
    # The adapter options it was loaded with (--data-opt, no download or
    # progress switch): config.json's `data_options`, so that an evaluation
    # set made later (`bench eval`) is built from the record's own splits.
    options: dict = field(default_factory=dict)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def image_size(self) -> int:
        return int(self.train.images.shape[1])

    def split(self, name: str) -> Split:
        return getattr(self, name)

    def check_labels(self) -> None:
        for name in SPLITS:
            check_labels(self.split(name).labels, self.classes, f"{self.name} {name} split")


def check_labels(labels, classes: list[str], source: str, hint: str = "") -> None:
    """The one label validator (adapters call it on every file they read, so
    `bench data check` and `bench run` accept the same labels): each label is
    an index of the declared `classes`. The error names the file (`source`),
    the row (1-based, header excluded) and the label."""
    labels = np.asarray(labels).reshape(-1)
    bad = np.flatnonzero((labels < 0) | (labels >= len(classes)))
    if len(bad):
        i, k = int(bad[0]), len(classes)
        shown = ", ".join(map(str, classes[:4])) + (", ..." if k > 4 else "")
        raise BenchError(f"{source} row {i + 1}: label {labels[i]} is not one of the {k} "
                         f"declared classes 0..{k - 1} ({shown}){hint}")


def load_dataset(name: str, data_root: str | Path | None = None, image_size: int = 0,
                 **options) -> DatasetBundle:
    """Look up an adapter by name and load its splits."""
    factory = DATASETS.get(name)
    bundle = factory(data_root=Path(data_root) if data_root else None,
                     image_size=image_size, **options)
    bundle.options = {k: str(v) for k, v in sorted(options.items())
                      if k not in ("download", "progress")}
    bundle.check_labels()
    return bundle
