"""File-based datasets: an index of (path, label) per split, split rules, CSVs.

A file adapter first builds a `FileIndex` (cheap: no decoding), which
`bench data check` inspects, then `to_bundle` decodes it once through the
cache. Split rules are deterministic and never depend on the run seed.
"""
from __future__ import annotations

import csv
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.core.errors import BenchError, choices_error
from bench.core.registry import Registry

from .base import SPLITS, DatasetBundle, Split, check_labels
from .cache import BadImages, cached_images, default_cache_dir

SPLIT_SEED = 0  # the paper's random_state for every derived split
IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff")

# name -> index function(data_root, **options) -> FileIndex, for `bench data check`
# and the evaluation sets' test split
FILE_INDEXES = Registry("file index")


def file_index(name: str):
    """Decorator: register fn(data_root, **options) -> FileIndex as `name`'s index."""
    return FILE_INDEXES.register(name)


@dataclass
class FileIndex:
    name: str
    root: Path
    classes: list[str]
    paths: dict[str, list[str]]  # split -> absolute paths
    labels: dict[str, np.ndarray]  # split -> int64 labels
    default_size: int = 224
    default_backbone: str = "resnet50"
    identity: dict = field(default_factory=dict)  # how the split was made
    published: dict = field(default_factory=dict)  # split -> published image count
    # Published per-class counts of groups of splits, e.g. {"train+val": [...]}.
    published_classes: dict = field(default_factory=dict)


def default_root(subdir: str) -> Path:
    """Where a dataset lives when --data-root is not given: $BENCH_DATA_ROOT/<subdir>
    (BENCH_DATA_ROOT defaults to ./data)."""
    return Path(os.environ.get("BENCH_DATA_ROOT", "data")) / subdir


def check_options(dataset: str, options: dict, allowed: dict[str, str]) -> None:
    """Unknown --data-opt keys are a one-line error listing the valid ones."""
    for key in options:
        if key not in allowed:
            valid = [f"{k} ({v})" for k, v in allowed.items()] or ["none"]
            raise choices_error(f"--data-opt key for {dataset}", key, valid)


def require_dir(root: Path | None, dataset: str, hint: str) -> Path:
    if root is None or not Path(root).is_dir():
        raise BenchError(f"{dataset}: data root '{root}' is not a directory; {hint}")
    return Path(root)


def stratified_holdout(labels: np.ndarray, n_out: int, seed: int = SPLIT_SEED):
    """Indices (keep, out) with exactly n_out held out, stratified, as the paper:
    sklearn train_test_split(test_size=n_out, stratify=labels, random_state=0).
    Returned in scikit-learn's (shuffled) order: a second split of `keep`
    must see the rows in that order to reproduce the paper's data frames."""
    # scikit-learn on demand: `bench list` imports every adapter (the DATASETS registry)
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(labels))
    if n_out <= 0:
        return idx, idx[:0]
    try:
        keep, out = train_test_split(idx, test_size=n_out, stratify=labels, random_state=seed)
    except ValueError:  # a class with a single image cannot be stratified
        keep, out = train_test_split(idx, test_size=n_out, random_state=seed)
    return keep, out


def carve_val(splits: dict) -> dict:
    """Fill a missing validation split with a stratified N//5 of train."""
    if "val" in splits:
        return splits
    paths, labels = splits["train"]
    keep, out = map(np.sort, stratified_holdout(labels, len(labels) // 5))
    splits["train"] = ([paths[i] for i in keep], labels[keep])
    splits["val"] = ([paths[i] for i in out], labels[out])
    return splits


POOL_SPLIT = "paper: test N//5, val N//5 of rest"  # how one pool of images is split


def split_pool(paths: list[str], labels: np.ndarray, where: str) -> tuple[dict, dict]:
    """One pool of images (a folder of class folders, or a lone training CSV)
    -> train/val/test by `paper_split`, and what the record keeps about it:
    the rule (each holdout is N//5, a fraction 0.2 rounded down) and its seed;
    `to_bundle` adds the digest of the resulting file lists (`files`)."""
    if len(labels) // 5 == 0:  # an empty test set has no metrics
        raise BenchError(f"{where}: {len(labels)} image(s) are too few to split into "
                         "train/val/test (test and val are N//5 each); give at least 5")
    idx = paper_split(labels)
    splits = {s: ([paths[i] for i in v], labels[v]) for s, v in idx.items()}
    return splits, {"split": POOL_SPLIT, "split_fraction": 0.2, "split_seed": SPLIT_SEED}


def paper_split(labels: np.ndarray) -> dict[str, np.ndarray]:
    """The paper's Kvasir procedure: test = stratified N//5 of all, then
    val = a stratified N//5 (N = all images) taken from the rest, train = what
    remains (random_state 0). Both holdouts have N//5 images, as in the
    released prepare_endo_data.py and the published split CSVs."""
    rest, test = stratified_holdout(labels, len(labels) // 5)
    keep, val = stratified_holdout(labels[rest], len(labels) // 5)
    return {"train": np.sort(rest[keep]), "val": np.sort(rest[val]), "test": np.sort(test)}


def read_csv_dicts(path: str | Path, columns, missing: str = "") -> list[dict[str, str]]:
    """Rows of a CSV as {column: stripped value} for `columns`, which the header
    must name. `missing` replaces the message for a file that does not exist."""
    path = Path(path)
    if not path.is_file():
        raise BenchError(missing or f"split CSV '{path}' does not exist")
    # utf-8-sig: a CSV saved by Excel starts with a byte-order mark that would
    # otherwise become part of the first column's name ('\ufeffimage')
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        absent = [c for c in columns if c not in (reader.fieldnames or [])]
        if absent:
            raise BenchError(f"{path}: missing column(s) {absent}; "
                             f"found {reader.fieldnames}, expected {list(columns)}")
        rows = [{c: (row[c] or "").strip() for c in columns} for row in reader]
    if not rows:
        raise BenchError(f"{path}: no rows below the header; list one image per row "
                         f"({', '.join(columns)})")
    return rows


def read_csv_rows(path: str | Path, columns: tuple[str, str]) -> list[tuple[str, str]]:
    """(image, label) pairs from a CSV with a header naming `columns`."""
    return [(row[columns[0]], row[columns[1]]) for row in read_csv_dicts(path, columns)]


def label_ids(raw: list[str], classes: list[str], where: str, hint: str = "") -> np.ndarray:
    """Labels given as class names or class indices -> int64 indices, checked
    against the declared classes (base.check_labels)."""
    lookup = {c: i for i, c in enumerate(classes)}
    out = []
    for row, value in enumerate(raw, 1):
        if value in lookup:
            out.append(lookup[value])
        elif value.lstrip("-").isdigit():
            out.append(int(value))
        else:
            raise BenchError(f"{where} row {row}: label '{value}' is neither a class name "
                             f"({', '.join(classes[:4])}...) nor a class index{hint}")
    out = np.asarray(out, dtype=np.int64)
    check_labels(out, classes, where, hint)
    return out


def list_images(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*")
                  if p.suffix.lower() in IMAGE_EXTS and p.is_file())


def to_bundle(index: FileIndex, image_size: int, cache_dir=None,
              progress: bool = True) -> DatasetBundle:
    """Decode every split once through the memory-mapped cache."""
    size = image_size or index.default_size
    cache_dir = Path(cache_dir) if cache_dir else default_cache_dir(index.root)
    splits, bad = {}, []
    for name in SPLITS:
        try:
            images = cached_images(index.paths[name], size, cache_dir, progress=progress,
                                   desc=f"{index.name} {name}")
        except BadImages as err:  # keep going so every bad file is named at once
            bad += err.bad
            continue
        splits[name] = Split(images, index.labels[name])
    if bad:
        raise BadImages(bad)
    return DatasetBundle(
        name=index.name, classes=index.classes, default_backbone=index.default_backbone,
        identity={"size": size, **index.identity, "files": files_digest(index),
                  **{f"n_{s}": len(index.paths[s]) for s in SPLITS}},
        **splits,
    )


def files_digest(index: FileIndex) -> str:
    """Hash of the relative file list and labels of every split: the run hash
    changes with the split but not with where the data root is mounted."""
    h = hashlib.sha256()
    for name in SPLITS:
        for path, label in zip(index.paths[name], index.labels[name]):
            rel = os.path.relpath(path, index.root)
            h.update(f"{name}\0{rel}\0{int(label)}\n".encode())
    return h.hexdigest()[:16]
