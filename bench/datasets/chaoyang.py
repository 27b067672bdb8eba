"""Chaoyang colon histopathology (4 classes, 6,160 JPEGs, noisy labels).

Official layout (distributed on request by its authors):
    <root>/train/*.JPG, <root>/test/*.JPG,
    <root>/train.json, <root>/test.json   lists of {"name": "train/x.JPG", "label": k}
Test = the official test set (2,139). Validation: the user's split CSVs
(`image_id,label`, as published with the paper) when given, else a
deterministic stratified N//5 of the official train set (random_state 0),
which gives the paper's sizes 3,217 / 804.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bench.core.errors import BenchError

from .base import DATASETS, check_labels
from .filelist import (FileIndex, carve_val, check_options, default_root, file_index,
                       label_ids, read_csv_rows, require_dir, to_bundle)

CLASSES = ["normal", "serrated", "adenocarcinoma", "adenoma"]  # label 0..3 as in the json
# Official per-class counts (dataset README) and the paper's split sizes.
OFFICIAL = {"train+val": [1111, 842, 1404, 664], "test": [705, 321, 840, 273]}
PUBLISHED = {"train": 3217, "val": 804, "test": 2139}
OPTIONS = {
    "train_csv": "CSV image_id,label for training (with val_csv: the published split)",
    "val_csv": "CSV image_id,label for validation",
    "test_csv": "CSV image_id,label for testing (default: official test.json)",
    "cache": "cache folder (default <data-root>/.bench-cache)",
}
HINT = ("put the official folder (train/, test/, train.json, test.json) there or pass "
        "--data-root DIR; see docs/datasets.md")


def read_json_list(root: Path, name: str) -> tuple[list[str], np.ndarray]:
    path = root / name
    if not path.is_file():
        raise BenchError(f"chaoyang: {path} not found; {HINT}")
    try:
        entries = json.loads(path.read_text())
        paths = [str(root / e["name"]) for e in entries]
        labels = np.asarray([int(e["label"]) for e in entries], dtype=np.int64)
    except (ValueError, KeyError, TypeError) as err:
        raise BenchError(f"{path}: expected a JSON list of {{\"name\", \"label\"}} ({err})"
                         ) from None
    check_labels(labels, CLASSES, str(path))
    return paths, labels


def resolve_id(root: Path, image_id: str) -> str:
    """An image_id may be relative to the root ('train/x.JPG') or a bare file name."""
    for candidate in (root / image_id, root / "train" / image_id, root / "test" / image_id):
        if candidate.exists():
            return str(candidate)
    return str(root / image_id)  # reported as missing by the cache / data check


def read_split_csv(root: Path, path) -> tuple[list[str], np.ndarray]:
    rows = read_csv_rows(path, ("image_id", "label"))
    labels = label_ids([r[1] for r in rows], CLASSES, str(path))
    return [resolve_id(root, r[0]) for r in rows], labels


@file_index("chaoyang")
def index(data_root=None, **options) -> FileIndex:
    check_options("chaoyang", options, OPTIONS)
    root = require_dir(data_root or default_root("chaoyang"), "chaoyang", HINT)
    if bool(options.get("train_csv")) != bool(options.get("val_csv")):
        raise BenchError("chaoyang: give both train_csv and val_csv (or neither)")
    if options.get("test_csv"):
        test = read_split_csv(root, options["test_csv"])
    else:
        test = read_json_list(root, "test.json")
    if options.get("train_csv"):
        splits = {k: read_split_csv(root, options[f"{k}_csv"]) for k in ("train", "val")}
        how = "user csv"
    else:
        splits = carve_val({"train": read_json_list(root, "train.json")})
        how = "stratified N//5 of train.json, random_state 0"
    splits["test"] = test
    return FileIndex(
        name="chaoyang", root=root, classes=CLASSES,
        paths={k: v[0] for k, v in splits.items()}, labels={k: v[1] for k, v in splits.items()},
        identity={"split": how}, published=PUBLISHED, published_classes=OFFICIAL,
    )


@DATASETS.register("chaoyang", "Chaoyang colon histopathology, 4 classes, 224 px "
                   "(official train/test; val = user CSV or stratified 20%)")
def chaoyang(data_root=None, image_size: int = 0, download: bool = False, progress: bool = True,
             **options):
    if download:
        raise BenchError("chaoyang cannot be downloaded automatically; request it from its "
                         "authors (see docs/datasets.md) and pass --data-root DIR")
    cache = options.pop("cache", None)
    return to_bundle(index(data_root, **options), image_size, cache, progress)
