"""Bring your own data, no code: a `csv` adapter and a `folder` adapter.

csv:    bench run --dataset csv --data-root IMAGES --data-opt train=train.csv
            [--data-opt test=test.csv] [--data-opt val=val.csv]
        Without test= the training list is split as folder data is (train
        alone: test N//5, val N//5 of the rest; with val=: test N//5 of train),
        stratified, seed 0, recorded in config.json (split, split_fraction,
        split_seed and the digest `files`).
        Each CSV has a header with an image path column (default `image`,
        relative to --data-root, default the CSV's folder) and a label column
        (default `label`): class names, or integers 0..K-1 with every class
        used (a gap, e.g. 0-3 and 7, is an error); `--data-opt classes=4` or
        `classes=cat,dog,eel` declares the classes instead (labels outside
        them are an error naming the file, row and label).
folder: bench run --dataset folder --data-root DIR
        DIR/<class>/*.jpg (split by the paper's Kvasir procedure: test N//5, val N//5
        of the rest), or DIR/{train,val,test}/<class>/*.jpg (val optional:
        then stratified N//5 of train; test optional when val/ is there:
        then stratified N//5 of train, as csv).
Either takes `--data-opt name=TEXT`, the dataset's title in reports (recorded
in config.json as `dataset_name`; not hashed, so renaming reuses the runs).
Missing validation sets are always carved out of train deterministically
(stratified, random_state 0). Default image size 224 (`--set image_size=N`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.core.errors import BenchError, warn_once

from .base import DATASETS, SPLITS
from .filelist import (SPLIT_SEED, FileIndex, carve_val, check_options, file_index, label_ids,
                       list_images, read_csv_rows, require_dir, split_pool, stratified_holdout,
                       to_bundle)

CSV_OPTIONS = {
    "train": "training CSV (required)", "val": "validation CSV (default: N//5 of train)",
    "test": "test CSV (default: split from train as folder data is: test N//5, val N//5)", "path_col": "image column (default image)",
    "label_col": "label column (default label)", "cache": "cache folder",
    "classes": "the classes: a count N (labels 0..N-1) or names a,b,c (default: from the labels)",
    "name": "display name in reports (default: csv); recorded, not part of the config hash",
}
FOLDER_OPTIONS = {"cache": "cache folder",
                  "classes": "class names a,b,c in label order (default: the sub-folders)",
                  "name": "display name in reports (default: folder); recorded, not hashed"}
HINT = "; or declare the classes with --data-opt classes=N or classes=name1,name2,..."


def declared_classes(text: str) -> list[str]:
    """--data-opt classes=4 -> ['0'..'3']; classes=cat,dog -> ['cat', 'dog']."""
    text = text.strip()
    names = [str(i) for i in range(int(text))] if text.isdigit() else \
        [c.strip() for c in text.split(",") if c.strip()]
    if len(names) < 2 or len(set(names)) != len(names):
        raise BenchError(f"--data-opt classes={text}: need a count of at least 2 or at least "
                         "2 distinct comma-separated names")
    return names


def class_names(rows: dict, files: dict) -> list[str]:
    """Classes inferred from the labels: sorted names, or integers 0..K-1. An
    integer class no row uses (a gap) is an error: it would silently add an
    empty class and change the model, ECE and NLL."""
    values = sorted({lab for r in rows.values() for _, lab in r})
    integers = sorted((v for v in values if v.lstrip("-").isdigit()), key=int)
    if integers and len(integers) < len(values):  # 0, 1, 2, dog: a typo, not a 4th class
        _non_integer(rows, files, integers)
    if not integers:
        return values
    present = {int(v) for v in values}
    missing = sorted(set(range(max(present) + 1)) - present)
    for split, r in rows.items():
        for row, (_, lab) in enumerate(r, 1):
            if missing and int(lab) > missing[0]:
                raise BenchError(f"{files[split]} row {row}: label {lab} leaves class(es) "
                                 f"{', '.join(map(str, missing))} without any image; integer "
                                 f"labels must be 0..K-1 with every class used{HINT}")
    return [str(i) for i in range(max(present) + 1)]


def _non_integer(rows: dict, files: dict, integers: list[str]) -> None:
    """Name the first label that is not an integer among integer labels."""
    shown = ", ".join(integers[:4]) + (", ..." if len(integers) > 4 else "")
    for split, r in rows.items():
        for row, (_, lab) in enumerate(r, 1):
            if not lab.lstrip("-").isdigit():
                raise BenchError(f"{files[split]} row {row}: label '{lab}' is not an integer "
                                 f"like the other labels ({shown}); use integers 0..K-1 or "
                                 f"class names throughout{HINT}")


def check_rows(rows: dict, files: dict) -> None:
    """Every row has a label; one file given as two splits is warned about
    (test numbers on training images measure fit, not generalisation)."""
    for split, r in rows.items():
        for row, (_, lab) in enumerate(r, 1):
            if not lab:
                raise BenchError(f"{files[split]} row {row}: empty label; every row needs a "
                                 "class name or index")
    seen: dict = {}
    for split in rows:
        same = seen.setdefault(Path(files[split]).resolve(), split)
        if same != split:
            warn_once(f"--data-opt {same}= and {split}= are the same file {files[split]}; "
                      f"its {split} numbers are measured on {same} images")


def _index(name, root, classes, splits, how, declared=None) -> FileIndex:
    """`how`: the split rule (text), or a dict of what the record keeps about it."""
    # Declared classes go into the run hash: an extra empty class changes the model
    # (inferred classes follow from the labels, already hashed).
    if len(classes) < 2:  # one class: ACC 1, ECE 0 and an undefined AUC, not a result
        raise BenchError(f"{name}: only one class ({', '.join(classes) or 'none'}) under "
                         f"{root}; a classifier needs at least 2 classes (add a class "
                         "sub-folder or rows with another label)")
    return FileIndex(name=name, root=Path(root), classes=classes,
                     paths={s: splits[s][0] for s in SPLITS},
                     labels={s: splits[s][1] for s in SPLITS},
                     identity={**(how if isinstance(how, dict) else {"split": how}),
                               **({"classes": classes} if declared else {})},
                     default_backbone="resnet50")


@file_index("csv")
def csv_index(data_root=None, **options) -> FileIndex:
    check_options("csv", options, CSV_OPTIONS)
    if not options.get("train"):
        raise BenchError("csv dataset: missing --data-opt train=FILE.csv (test= and val= "
                         "optional: without test= train is split as folder data is); "
                         "see docs/datasets.md")
    root = Path(data_root) if data_root else Path(options["train"]).parent
    cols = (options.get("path_col", "image"), options.get("label_col", "label"))
    rows = {s: read_csv_rows(options[s], cols) for s in SPLITS if options.get(s)}
    check_rows(rows, options)
    classes = declared_classes(options["classes"]) if options.get("classes") else \
        class_names(rows, options)
    splits = {s: ([str(root / p) for p, _ in r], label_ids([lab for _, lab in r], classes,
                                                         options[s], HINT))
              for s, r in rows.items()}
    if "test" not in rows:
        splits, how = _split_train(splits, options["train"], "user csv")
        return _index("csv", root, classes, splits, how, options.get("classes"))
    how = "user csv" + ("" if "val" in rows else "; val = stratified N//5 of train")
    return _index("csv", root, classes, carve_val(splits), how, options.get("classes"))


def _split_train(splits: dict, where: str, given: str) -> tuple[dict, dict]:
    """No test list: the training list alone is split as a folder of class
    folders is (`split_pool`); with a validation list, test is a stratified
    N//5 of train. Either way seeded and recorded (rule, fraction, seed; the
    file digest follows in to_bundle)."""
    paths, labels = splits["train"]
    if "val" not in splits:
        return split_pool(paths, labels, where)
    if len(labels) // 5 == 0:
        raise BenchError(f"{where}: {len(labels)} image(s) are too few to hold out a test "
                         "set (N//5); give at least 5 or a test list (--data-opt test=)")
    keep, out = map(np.sort, stratified_holdout(labels, len(labels) // 5))
    splits = {"train": ([paths[i] for i in keep], labels[keep]), "val": splits["val"],
              "test": ([paths[i] for i in out], labels[out])}
    return splits, {"split": f"{given}; test = stratified N//5 of train",
                    "split_fraction": 0.2, "split_seed": SPLIT_SEED}


@file_index("folder")
def folder_index(data_root=None, **options) -> FileIndex:
    check_options("folder", options, FOLDER_OPTIONS)
    hint = "pass --data-root DIR with one sub-folder per class (or train/, val/, test/)"
    if data_root is None:
        raise BenchError(f"folder dataset needs a data root: {hint}")
    root = require_dir(data_root, "folder", hint)
    # train/ with test/ or val/ is a split layout, never two classes 'train' and 'val'
    if (root / "train").is_dir() and ((root / "test").is_dir() or (root / "val").is_dir()):
        present = [s for s in SPLITS if (root / s).is_dir()]
        classes = _folder_classes([root / s for s in present], options.get("classes"))
        splits = {s: _scan(root / s, classes) for s in present}
        if "test" not in splits:  # as a csv dataset without a test list
            splits, how = _split_train(splits, f"folder {root / 'train'}", "train/val folders")
            return _index("folder", root, classes, splits, how, options.get("classes"))
        return _index("folder", root, classes, carve_val(splits), "train/val/test folders",
                      options.get("classes"))
    classes = _folder_classes([root], options.get("classes"))
    if not classes:
        raise BenchError(f"folder: {root} has no class sub-folders")
    paths, labels = _scan(root, classes)
    splits, how = split_pool(paths, labels, f"folder {root}")
    # Folder records keep the identity they always had (so their hash): the
    # rule text only; the seed and fraction are the same fixed ones.
    return _index("folder", root, classes, splits, how["split"], options.get("classes"))


def _folder_classes(folders: list[Path], declared: str | None) -> list[str]:
    """Sub-folder names (sorted), or the declared classes, which every sub-folder must be."""
    found = sorted({d.name for f in folders for d in f.iterdir()
                    if d.is_dir() and not d.name.startswith(".")})
    if not declared:
        return found
    classes = declared_classes(declared)
    extra = [name for name in found if name not in classes]
    if extra:
        raise BenchError(f"folder: sub-folder '{extra[0]}' is not one of the declared classes "
                         f"({', '.join(classes)}); add it to --data-opt classes=... or move it")
    return classes


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
        # a display name only: recorded in config.json, never in the run hash
        name = options.pop("name", "").strip()
        bundle = to_bundle(index_fn(data_root, **options), image_size, cache, progress)
        bundle.display_name = name
        return bundle
    return factory


DATASETS.add("csv", _factory(csv_index), "your images listed in CSVs (--data-opt train=, val=, "
             "test=), 224 px by default")
DATASETS.add("folder", _factory(folder_index), "your images in class folders (--data-root DIR), "
             "224 px by default")
