"""Bring your own data, no code: a `csv` adapter and a `folder` adapter.

csv:    bench run --dataset csv --data-root IMAGES --data-opt train=train.csv
            --data-opt test=test.csv [--data-opt val=val.csv]
        Each CSV has a header with an image path column (default `image`,
        relative to --data-root, default the CSV's folder) and a label column
        (default `label`): class names, or integers 0..K-1.
folder: bench run --dataset folder --data-root DIR
        DIR/<class>/*.jpg (split by the paper's Kvasir procedure: test N//5, val N//5
        of the rest), or DIR/{train,val,test}/<class>/*.jpg (val optional:
        then stratified N//5 of train).
Missing validation sets are always carved out of train deterministically
(stratified, random_state 0). Default image size 224 (`--set image_size=N`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.core.errors import BenchError

from .base import DATASETS, SPLITS
from .filelist import (FileIndex, carve_val, check_options, file_index, label_ids, list_images,
                       paper_split, read_csv_rows, require_dir, to_bundle)

CSV_OPTIONS = {
    "train": "training CSV (required)", "val": "validation CSV (default: N//5 of train)",
    "test": "test CSV (required)", "path_col": "image column (default image)",
    "label_col": "label column (default label)", "cache": "cache folder",
}
FOLDER_OPTIONS = {"cache": "cache folder"}


def class_names(raw_labels: list[str]) -> list[str]:
    values = sorted(set(raw_labels))
    if all(v.lstrip("-").isdigit() for v in values):
        return [str(i) for i in range(max(int(v) for v in values) + 1)]
    return values


def _index(name, root, classes, splits, how) -> FileIndex:
    return FileIndex(name=name, root=Path(root), classes=classes,
                     paths={s: splits[s][0] for s in SPLITS},
                     labels={s: splits[s][1] for s in SPLITS},
                     identity={"split": how}, default_backbone="resnet50")


@file_index("csv")
def csv_index(data_root=None, **options) -> FileIndex:
    check_options("csv", options, CSV_OPTIONS)
    missing = [k for k in ("train", "test") if not options.get(k)]
    if missing:
        raise BenchError(f"csv dataset: missing --data-opt {missing[0]}=FILE.csv (needs train= "
                         "and test=, val= optional); see docs/datasets.md")
    root = Path(data_root) if data_root else Path(options["train"]).parent
    cols = (options.get("path_col", "image"), options.get("label_col", "label"))
    rows = {s: read_csv_rows(options[s], cols) for s in SPLITS if options.get(s)}
    classes = class_names([lab for r in rows.values() for _, lab in r])
    splits = {s: ([str(root / p) for p, _ in r], label_ids([lab for _, lab in r], classes,
                                                         options[s]))
              for s, r in rows.items()}
    how = "user csv" + ("" if "val" in rows else "; val = stratified N//5 of train")
    return _index("csv", root, classes, carve_val(splits), how)


@file_index("folder")
def folder_index(data_root=None, **options) -> FileIndex:
    check_options("folder", options, FOLDER_OPTIONS)
    hint = "pass --data-root DIR with one sub-folder per class (or train/, val/, test/)"
    if data_root is None:
        raise BenchError(f"folder dataset needs a data root: {hint}")
    root = require_dir(data_root, "folder", hint)
    if (root / "train").is_dir() and (root / "test").is_dir():
        present = [s for s in SPLITS if (root / s).is_dir()]
        classes = sorted({d.name for s in present for d in (root / s).iterdir() if d.is_dir()})
        splits = {s: _scan(root / s, classes) for s in present}
        return _index("folder", root, classes, carve_val(splits), "train/val/test folders")
    classes = sorted(d.name for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not classes:
        raise BenchError(f"folder: {root} has no class sub-folders")
    paths, labels = _scan(root, classes)
    idx = paper_split(labels)
    splits = {s: ([paths[i] for i in v], labels[v]) for s, v in idx.items()}
    return _index("folder", root, classes, splits, "paper: test N//5, val N//5 of rest")


def _scan(folder: Path, classes: list[str]) -> tuple[list[str], np.ndarray]:
    paths, labels = [], []
    for k, name in enumerate(classes):
        files = list_images(folder / name) if (folder / name).is_dir() else []
        paths += [str(p) for p in files]
        labels += [k] * len(files)
    if not paths:
        raise BenchError(f"folder: no images ({', '.join(('.jpg', '.png'))}, ...) under {folder}")
    return paths, np.asarray(labels, dtype=np.int64)


def _factory(index_fn):
    def factory(data_root=None, image_size: int = 0, download: bool = False,
                progress: bool = True, **options):
        cache = options.pop("cache", None)
        return to_bundle(index_fn(data_root, **options), image_size, cache, progress)
    return factory


DATASETS.add("csv", _factory(csv_index), "your images listed in CSVs (--data-opt train=, val=, "
             "test=), 224 px by default")
DATASETS.add("folder", _factory(folder_index), "your images in class folders (--data-root DIR), "
             "224 px by default")
