"""The images of an evaluation set beyond the test split (`--eval`), at a run's
test size: `load_eval(spec, ...) -> EvalData`.

    shift          the run's own test split corrupted by MedMNIST-C
                   (bench.datasets.shift, cached), block 0 clean
    ood:NAME       the test split of the registered dataset NAME (its default
                   data root, or BENCH_DATA_ROOT), labels unused
    ood:PATH       every image under the folder PATH (recursively), or the
                   images a CSV lists (column `image`, paths relative to it)
    site:NAME      the test split of NAME, whose classes must be the run's
                   (by name; their order may differ)
    site:PATH      a folder of class folders named as the run's classes, or a
                   CSV of image,label (class names or indices)

Images are decoded once per size through the image cache
(bench.datasets.cache) for paths, or by the dataset's adapter for names.
Each set carries a sha256 of its images and labels (`images_sha256`): the
stored logits say exactly what they were computed on.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.core.errors import BenchError
from bench.core.evalfiles import EvalSpec

from . import corruptions, shift
from .base import DATASETS, load_dataset
from .cache import cached_images, default_cache_dir
from .filelist import FILE_INDEXES, default_root, label_ids, list_images, read_csv_dicts
from .medmnist import (FLAGS, OFFICIAL_SIZES, class_names, file_size, locate, npz_name, resize,
                       to_rgb)


@dataclass
class EvalData:
    spec: EvalSpec
    images: np.ndarray  # uint8 [..., N, H, W, 3] (shift: [B, N, H, W, 3])
    labels: np.ndarray | None  # int64 [N] in the run's classes (ood: None)
    meta: dict  # what the manifest records of the set
    extra_arrays: dict = field(default_factory=dict)  # shift: each block's name and severity


def digest(images: np.ndarray, labels=None) -> str:
    h = hashlib.sha256()
    for block in images.reshape(-1, *images.shape[-3:]):
        h.update(np.ascontiguousarray(block).data)
    if labels is not None:
        h.update(np.asarray(labels, np.int64).tobytes())
    return h.hexdigest()


def load_eval(spec: EvalSpec, dataset: str, size: int, classes: list[str], *, data_root=None,
              options: tuple = (), build: bool = True, progress: bool = True,
              jobs: int = 1) -> EvalData:
    """The images of `spec` for a run of `dataset` tested at `size` px."""
    if spec.kind == "shift":
        return _shift(spec, dataset, size, data_root, options, build, progress, jobs)
    if not spec.is_path and spec.source == dataset:
        why = ("its test split is the record's own" if spec.kind == "site"
               else "it is not out of distribution")
        raise BenchError(f"--eval {spec.text}: that is the run's own dataset; {why}")
    if spec.is_path:
        images, labels, names, source = _from_path(spec, size)
    else:
        images, labels, names, source = _from_dataset(spec.source, size)
    if spec.kind == "site":
        labels = _to_run_classes(spec, labels, names, classes)
    else:
        labels = None
    meta = {"source": source, "size": int(size), "n": int(len(images)),
            "images_sha256": digest(images, labels)}
    return EvalData(spec, images, labels, meta)


def check_present(spec: EvalSpec, size: int | None = None) -> None:
    """The files an ood/site source will read are there, checked cheaply (no
    image decoded, nothing written), so a missing one stops a command before
    a corrupted set is built or a run trains: a registered dataset's test
    files as its adapter finds them (a MedMNIST flag's .npz at the size a run
    reads, `size`, or at any official size when unknown; a file dataset's
    folder, lists and test images), a folder's images, a CSV's rows and the
    images it lists. BenchError naming the source and what is missing."""
    if spec.kind == "shift":
        return
    try:
        if spec.is_path:
            _check_path(spec)
        else:
            _check_dataset(spec, size)
    except BenchError as err:
        text = str(err)
        prefix = f"--eval {spec.text}: "
        raise BenchError(text if text.startswith(prefix) else prefix + text) from None


def _check_dataset(spec: EvalSpec, size: int | None) -> None:
    name = spec.source
    if name in FLAGS:
        sizes = [file_size(size)] if size else list(OFFICIAL_SIZES)
        for s in sizes:
            try:
                locate(name, None, s, False)
                return
            except BenchError:
                continue
        first = sizes[0]
        path = default_root("medmnist") / npz_name(name, first)
        raise BenchError(f"--eval {spec.text}: {path} not found (the {name} test split "
                         f"{'at ' + str(first) + ' px ' if size else ''}is read from "
                         f"$BENCH_DATA_ROOT/medmnist, default data/medmnist); fetch it with "
                         f"`bench data check --dataset {name} --download`, or drop the --eval")
    if name in FILE_INDEXES:
        index = FILE_INDEXES.get(name)(None)
        test = index.paths.get("test") or []
        missing = [p for p in test if not os.path.isfile(p)]
        if not test:
            raise BenchError(f"{name} at {index.root} has no test images")
        if missing:
            raise BenchError(f"{len(missing)} of the {len(test)} test images of {name} are "
                             f"missing (first: {missing[0]}); `bench data check --dataset "
                             f"{name}` names them all")


def _check_path(spec: EvalSpec) -> None:
    path = Path(spec.source).expanduser()
    if not path.exists():
        raise BenchError(f"{path} does not exist; give a folder of images or a CSV listing them")
    if path.is_file():
        if path.suffix.lower() != ".csv":
            raise BenchError(f"{path} is a file but not a .csv")
        cols = ("image", "label") if spec.kind == "site" else ("image",)
        rows = read_csv_dicts(path, cols)
        missing = [r["image"] for r in rows
                   if not os.path.isfile(path.parent / r["image"])]
        if missing:
            raise BenchError(f"{path}: {len(missing)} of the {len(rows)} listed images are "
                             f"missing (first: {path.parent / missing[0]})")
        return
    if not path.is_dir():
        raise BenchError(f"{path} is neither a folder nor a CSV")
    if spec.kind == "site":
        found = [d for d in sorted(path.iterdir()) if d.is_dir() and list_images(d)]
        if not found:
            raise BenchError(f"no class folder with images (.jpg, .png, ...) under {path}; a "
                             "site folder holds one folder per class, named as the classes")
    elif not list_images(path):
        raise BenchError(f"no images (.jpg, .png, ...) under {path}")


def _shift(spec, dataset, size, data_root, options, build, progress, jobs) -> EvalData:
    s = shift.get(dataset, size, data_root, options, build=build, progress=progress, jobs=jobs)
    rec = s.meta["recipe"]
    meta = {"source": f"MedMNIST-C {rec['set']} set via medmnistc {rec['medmnistc']}",
            "built_from": rec["source"], "size": int(size), "n": int(len(s.labels)),
            "set": rec["set"], "set_sha256": s.digest, "recipe_digest": s.meta["recipe_digest"],
            # the test split it corrupts: sha256 of its images (at 224 px) and labels
            "test_sha256": rec["images"],
            "designed_size": corruptions.DESIGNED_SIZE}
    extra = {"corruption": np.array([c for c, _ in s.blocks]),
             "severity": np.array([v for _, v in s.blocks], np.int64)}
    return EvalData(spec, s.images, s.labels, meta, extra)


# ------------------------------------------------------- by dataset name --
def _from_dataset(name: str, size: int) -> tuple:
    """(images, labels, class names, source text) of a registered dataset's test split."""
    if name not in DATASETS:
        raise BenchError(f"--eval: unknown dataset '{name}' (and no such path); choose from: "
                         f"{', '.join(DATASETS.names())}, or give a folder or CSV path")
    if name in FLAGS:  # the test split alone: the other splits are not read
        path = locate(name, None, file_size(size), False)
        with np.load(path, allow_pickle=False) as z:
            images, labels = z["test_images"], z["test_labels"].reshape(-1).astype(np.int64)
        return (resize(to_rgb(images, path, "test"), size), labels, class_names(name),
                f"{name} test split ({path.name})")

    if name in FILE_INDEXES:  # the test split alone is decoded (Kvasir's 10,662 images: a fifth)
        index = FILE_INDEXES.get(name)(None)
        images = cached_images(index.paths["test"], size, default_cache_dir(index.root),
                               progress=False, desc=f"{name} test")
        return (np.asarray(images), index.labels["test"], list(index.classes),
                f"{name} test split")
    bundle = load_dataset(name, None, image_size=size)
    return (np.asarray(bundle.test.images), bundle.test.labels, list(bundle.classes),
            f"{name} test split")


# ----------------------------------------------------------------- paths --
def _from_path(spec: EvalSpec, size: int) -> tuple:
    """(images, labels or None, class names or None, source text) of a folder or CSV."""
    path = Path(spec.source).expanduser()
    if not path.exists():
        raise BenchError(f"--eval {spec.text}: {path} does not exist; give a folder of images "
                         "or a CSV listing them")
    labels = names = None
    if path.is_file():
        if path.suffix.lower() != ".csv":
            raise BenchError(f"--eval {spec.text}: {path} is a file but not a .csv")
        cols = ("image", "label") if spec.kind == "site" else ("image",)
        rows = read_csv_dicts(path, cols)
        paths = [str((path.parent / r["image"]).resolve()) for r in rows]
        raw = [r["label"] for r in rows] if spec.kind == "site" else None
        root = path.parent
    else:
        root = path
        if spec.kind == "site":
            names = sorted(p.name for p in path.iterdir() if p.is_dir())
            found = [(str(f), k) for k, n in enumerate(names) for f in list_images(path / n)]
            paths, labels = [p for p, _ in found], np.asarray([k for _, k in found], np.int64)
        else:
            paths = [str(p) for p in list_images(path)]
        raw = None
    if not paths:
        raise BenchError(f"--eval {spec.text}: no images (.jpg, .png, ...) under {path}")
    images = cached_images(paths, size, default_cache_dir(root), progress=False,
                           desc=f"eval {spec.name}")
    if raw is not None:
        labels, names = raw, None  # names or indices, mapped by _to_run_classes
    return np.asarray(images), labels, names, str(path)


def _to_run_classes(spec: EvalSpec, labels, names, classes: list[str]) -> np.ndarray:
    """A site set's labels as indices of the run's classes."""
    if names is None:  # a CSV's raw labels: class names or the run's indices
        return label_ids([str(v) for v in labels], classes, f"--eval {spec.text}")
    foreign = [n for n in names if n not in classes]
    if foreign:
        raise BenchError(f"--eval {spec.text}: class '{foreign[0]}' is not one of the run's "
                         f"classes ({', '.join(classes)}); a site set must have the same classes")
    remap = np.asarray([classes.index(n) for n in names], np.int64)
    return remap[np.asarray(labels, np.int64)]
