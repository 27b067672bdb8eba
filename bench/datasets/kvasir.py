"""HyperKvasir labeled images (23 classes, 10,662 JPEGs).

Layout of the official `hyper-kvasir-labeled-images.zip`, extracted:
    <root>/image-labels.csv   columns "Video file","Organ","Finding","Classification"
    <root>/<organ>/<classification>/<finding>/<Video file>.jpg   (any nesting works)
Class = Finding, sorted names -> 0..22. Default split = the paper's: test =
stratified N//5 of all images, validation = a stratified N//5 drawn from the rest,
train = the remainder (scikit-learn train_test_split, random_state 0).
User split CSVs (image_id,label) override it. The paper resized images to
512x512 once beforehand; here the decode-once cache resizes straight to the
training size (224).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.core.errors import BenchError

from .base import DATASETS
from .filelist import (FileIndex, check_options, default_root, file_index, label_ids,
                       list_images, paper_split, read_csv_dicts, read_csv_rows, require_dir,
                       to_bundle)

COLUMNS = ("Video file", "Organ", "Finding", "Classification")
PUBLISHED = {"train": 6398, "val": 2132, "test": 2132}  # the paper's procedure on 10,662
OPTIONS = {
    "train_csv": "CSV image_id,label (image_id = file stem or path under the root)",
    "val_csv": "CSV image_id,label for validation",
    "test_csv": "CSV image_id,label for testing",
    "cache": "cache folder (default <data-root>/.bench-cache)",
}
HINT = ("extract hyper-kvasir-labeled-images.zip there (image-labels.csv + class folders) "
        "or pass --data-root DIR; see docs/datasets.md")


def read_labels(root: Path) -> list[dict]:
    path = root / "image-labels.csv"
    return read_csv_dicts(path, COLUMNS, missing=f"kvasir: {path} not found; {HINT}")


def expected_path(root: Path, row: dict) -> str:
    """Where the official tree keeps an image ('Lower GI' -> lower-gi-tract/...)."""
    organ = row["Organ"].lower().replace(" gi", "-gi-tract").replace(" ", "-")
    return str(root / organ / row["Classification"] / row["Finding"] / f"{row['Video file']}.jpg")


def find_files(root: Path) -> dict[str, str]:
    """file stem -> path for every image under the root (the tree's nesting varies)."""
    return {p.stem: str(p) for p in list_images(root) if ".bench-cache" not in p.parts}


def resolve(root: Path, files: dict[str, str], image_id: str, row: dict | None = None) -> str:
    stem = Path(image_id).stem
    if stem in files:
        return files[stem]
    if (root / image_id).is_file():
        return str(root / image_id)
    return expected_path(root, row) if row else str(root / image_id)


def user_splits(root, files, classes, options) -> dict:
    out = {}
    for split in ("train", "val", "test"):
        rows = read_csv_rows(options[f"{split}_csv"], ("image_id", "label"))
        out[split] = ([resolve(root, files, r[0]) for r in rows],
                      label_ids([r[1] for r in rows], classes, options[f"{split}_csv"]))
    return out


@file_index("kvasir")
def index(data_root=None, **options) -> FileIndex:
    check_options("kvasir", options, OPTIONS)
    root = require_dir(data_root or default_root("hyper-kvasir/labeled-images"), "kvasir", HINT)
    rows = read_labels(root)
    classes = sorted({r["Finding"] for r in rows})
    files = find_files(root)
    given = [k for k in ("train_csv", "val_csv", "test_csv") if options.get(k)]
    if given and len(given) != 3:
        raise BenchError(f"kvasir: give train_csv, val_csv and test_csv together (got {given})")
    if given:
        splits, how = user_splits(root, files, classes, options), "user csv"
    else:
        paths = [resolve(root, files, r["Video file"], r) for r in rows]
        labels = np.asarray([classes.index(r["Finding"]) for r in rows], dtype=np.int64)
        idx = paper_split(labels)
        splits = {k: ([paths[i] for i in v], labels[v]) for k, v in idx.items()}
        how = "paper: stratified test N//5, val N//5 (of all) from the rest, random_state 0"
    return FileIndex(
        name="kvasir", root=root, classes=classes,
        paths={k: v[0] for k, v in splits.items()}, labels={k: v[1] for k, v in splits.items()},
        identity={"split": how}, published=PUBLISHED,
    )


@DATASETS.register("kvasir", "HyperKvasir labeled images, 23 classes (Finding), 224 px, "
                   "paper split test N//5 / val N//5 of rest")
def kvasir(data_root=None, image_size: int = 0, download: bool = False, progress: bool = True,
           **options):
    if download:
        raise BenchError("kvasir: download hyper-kvasir-labeled-images.zip from "
                         "https://datasets.simula.no/hyper-kvasir/ (see docs/datasets.md) and "
                         "pass --data-root DIR")
    cache = options.pop("cache", None)
    return to_bundle(index(data_root, **options), image_size, cache, progress)
