"""Corrupted test sets for `--eval shift`: built once per dataset, image size
and corruption recipe, seeded, cached with a digest.

The test split is read at 224 px (the size MedMNIST-C's corruptions were
designed for: MedMNIST's `<flag>_224.npz`, or a file dataset decoded at 224;
a MedMNIST flag without its 224 px file, and digits, are upsampled to 224
bilinearly, which the set's `source` says), each image is corrupted by
medmnistc at severities 1..5 (bench.datasets.corruptions), then resized to
the run's test size as the MedMNIST adapter resamples (bilinear, antialiased
when shrinking). Block 0 is the clean image through the same resize path,
so the set carries its own severity-0 baseline.

Cache: `<cache>/shift/<dataset>-<size>px-<key>.npy`, one uint8 array
[B, N, size, size, 3] (B = 1 + corruptions x 5), and beside it
`<...>.json`: the recipe (dataset, the source images' sha256, size,
corruption set and parameters, medmnistc's version, seed, SHIFT_VERSION),
its digest, the array's sha256 and the block names. `<key>` is the recipe's
digest; a set whose manifest is missing, whose recipe digest differs, or
whose array's sha256 differs from the manifest (damaged, edited) is set
aside and rebuilt; the sha256 (a full read) is recomputed only when the
array's size or mtime differ from the build's. A MedMNIST source file's
images digest is remembered in `<cache>/shift/sources.json` by (path, size,
mtime): each run's process finds a built set without decoding the test
split again. `<cache>` is BENCH_CACHE_DIR, else the data root's
.bench-cache (bench.datasets.cache.default_cache_dir), else the one under
BENCH_DATA_ROOT (./data).
"""
from __future__ import annotations

import functools
import hashlib
import multiprocessing as mp
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tabulate import tabulate
from tqdm import tqdm

from bench.core import files
from bench.core.errors import BenchError, warn_once

from . import corruptions as C
from .base import load_dataset
from .cache import damage, default_cache_dir, set_aside, writes_allowed
from .medmnist import FLAGS, locate, resize, to_rgb

SHIFT_VERSION = 1  # bump when building changes: every cached set is rebuilt
SEED = 0
CHUNK = 64  # images corrupted, then resized and written, at a time
CLEAN = "clean"


@dataclass(frozen=True)
class ShiftSet:
    path: Path
    images: np.ndarray  # uint8 [B, N, size, size, 3], memory-mapped
    labels: np.ndarray
    blocks: tuple  # (corruption, severity) per block; block 0 = (CLEAN, 0)
    digest: str  # sha256 of the array file
    meta: dict  # the manifest


def shift_dir(data_root=None) -> Path:
    if os.environ.get("BENCH_CACHE_DIR"):
        return Path(os.environ["BENCH_CACHE_DIR"]) / "shift"
    root = Path(data_root) if data_root else Path(os.environ.get("BENCH_DATA_ROOT", "data"))
    return default_cache_dir(root) / "shift"


# ---------------------------------------------------------------- source --
def source(dataset: str, data_root=None, options: tuple = ()) -> tuple:
    """(test images uint8 [N, 224, 224, 3], labels, how they were had)."""
    if dataset in FLAGS:
        return _medmnist_source(dataset, data_root, dict(options))

    opts = {k: v for k, v in dict(options).items() if k not in ("download", "progress")}
    bundle = load_dataset(dataset, data_root, image_size=C.DESIGNED_SIZE, **opts)
    how = "decoded at 224 px" if bundle.identity.get("files") else "the adapter at 224 px"
    if dataset == "digits":
        how = "8x8 digits upsampled to 224 px (bilinear)"
    return np.asarray(bundle.test.images), bundle.test.labels, how


def _medmnist_path(flag: str, data_root, options: dict, download: bool) -> Path:
    """`--data-opt file=`, else <flag>_224.npz, else the 28 px file."""
    if not options.get("file"):
        try:
            return locate(flag, data_root, C.DESIGNED_SIZE, False, None)
        except BenchError:
            pass
    return locate(flag, data_root, 28, download, options.get("file"))


def _medmnist_source(flag: str, data_root, options: dict) -> tuple:
    """The test split only (a 224 px file holds ~16 GB of training images):
    `--data-opt file=`, else <flag>_224.npz, else the 28 px file upsampled."""
    path = _medmnist_path(flag, data_root, options, options.get("download", False))
    with np.load(path, allow_pickle=False) as z:
        images, labels = z["test_images"], z["test_labels"].reshape(-1).astype(np.int64)
    images = to_rgb(images, path, "test")
    how = f"{path.name} at 224 px"
    if images.shape[1] != C.DESIGNED_SIZE:
        how = f"{path.name} upsampled from {images.shape[1]} to 224 px (bilinear)"
        warn_once(f"shift: {flag}: {how}; MedMNIST-C corrupts the 224 px images "
                  f"({flag}_224.npz)")
    return resize(images, C.DESIGNED_SIZE), labels, how


# ---------------------------------------------------------------- recipe --
def source_digest(images: np.ndarray, labels: np.ndarray) -> str:
    h = hashlib.sha256(np.ascontiguousarray(images).data)
    h.update(np.asarray(labels, np.int64).tobytes())
    return h.hexdigest()


def recipe(dataset: str, size: int, images: np.ndarray, labels: np.ndarray, how: str,
           only=None) -> tuple[dict, dict]:
    """(recipe, corruption name -> medmnistc object)."""
    return recipe_of(dataset, size, source_digest(images, labels), len(labels), how, only)


def recipe_of(dataset: str, size: int, digest: str, n: int, how: str, only=None
              ) -> tuple[dict, dict]:
    name, chosen = C.corruptions(dataset, only)
    return {"dataset": dataset, "size": int(size), "source": how, "images": digest,
            "n": int(n), **C.recipe(name, chosen), "seed": SEED,
            "severities": list(C.SEVERITIES), "version": SHIFT_VERSION}, chosen


def recipe_digest(rec: dict) -> str:
    return files.json_sha256(rec, files.SPACED)


def blocks_of(chosen) -> tuple:
    return ((CLEAN, 0),) + tuple((c, s) for c in chosen for s in C.SEVERITIES)


# ------------------------------------------------------------------- get --
def get(dataset: str, size: int, data_root=None, options: tuple = (), only=None,
        build: bool = True, progress: bool = True, jobs: int = 1) -> ShiftSet:
    """The corrupted test set of `dataset` at `size` px: from the cache when
    whole and of the same recipe, else built (unless `build` is False: then
    one line saying how to build it)."""
    only = tuple(only) if only else None
    return _get(dataset, int(size), str(data_root) if data_root else None, tuple(options),
                only, build, progress, jobs)


@functools.lru_cache(maxsize=4)
def _get(dataset, size, data_root, options, only, build, progress, jobs) -> ShiftSet:
    folder = shift_dir(data_root)
    stamp = _source_stamp(dataset, data_root, options)
    known = _memo(folder).get(stamp) if stamp else None
    if isinstance(known, dict):  # the source file as last decoded: no decode, no hash
        rec, _ = recipe_of(dataset, size, known.get("images", ""), known.get("n", 0),
                           known.get("how", ""), only)
        found = _lookup(folder, dataset, size, rec)
        if found is not None:
            return found
    images, labels, how = source(dataset, data_root, options)
    rec, chosen = recipe(dataset, size, images, labels, how, only)
    if stamp:
        _remember(folder, stamp, {"images": rec["images"], "n": rec["n"], "how": how})
    found = _lookup(folder, dataset, size, rec)
    if found is not None:
        return found
    key = recipe_digest(rec)
    final = _final(folder, dataset, size, key)
    if not build or not writes_allowed():
        raise BenchError(f"shift: the corrupted {dataset} test set at {size} px is not built; "
                         f"build it with `bench data shift --dataset {dataset}` (or run "
                         "without --dry-run)")
    build_set(final, rec, key, images, labels, chosen, progress, jobs)
    found = _cached(final, key, rec)
    assert found is not None, final
    return found



# ----------------------------------------------------- ahead of the runs --
@dataclass(frozen=True)
class Built:
    """One set `bench data shift` built or found: a row of its closing table."""

    dataset: str
    size: int
    set: ShiftSet
    seconds: float
    cached: bool  # found in the cache, not built


def build_sets(dataset: str, sizes, data_root=None, options: tuple = (), only=None,
               progress: bool = True, jobs: int = 1) -> list[Built]:
    """`dataset`'s set at each size, built where not cached (`bench data shift`)."""
    out = []
    for size in sizes:
        t0 = time.perf_counter()
        before = set(shift_dir(data_root).glob("*.npy"))
        s = get(dataset, size, data_root, options, only, build=True, progress=progress,
                jobs=jobs)
        out.append(Built(dataset, size, s, time.perf_counter() - t0, s.path in before))
    return out


def built_table(built: list[Built]) -> str:
    """Size, corruption set, blocks, images, MB, seconds, built or cached, file."""
    rows = [[b.dataset, b.size, b.set.meta["recipe"]["set"], len(b.set.blocks),
             int(b.set.images.shape[1]), f"{os.path.getsize(b.set.path) / 2**20:.1f}",
             f"{b.seconds:.1f}", "cached" if b.cached else "built", os.path.relpath(b.set.path)]
            for b in built]
    return tabulate(rows, headers=["dataset", "px", "corruption set", "blocks", "images",
                                   "MB", "seconds", "", "file"], tablefmt="github")

def _final(folder: Path, dataset: str, size: int, key: str) -> Path:
    return folder / f"{dataset}-{size}px-{key[:16]}.npy"


def _lookup(folder: Path, dataset: str, size: int, rec: dict) -> ShiftSet | None:
    key = recipe_digest(rec)
    return _cached(_final(folder, dataset, size, key), key, rec)


# A run reads its set in every worker process, and decoding a 224 px test
# split to hash it costs seconds to minutes (PathMNIST: 7,180 images, 1 GB).
# A MedMNIST file's digest is remembered by (path, size, mtime), so a lookup
# of a set already built decodes nothing; any other source is decoded.
MEMO = "sources.json"


def _source_stamp(dataset: str, data_root, options: tuple) -> str | None:
    if dataset not in FLAGS:
        return None
    opts = dict(options)
    try:
        path = _medmnist_path(dataset, data_root, opts, download=False)
        st = path.stat()
    except (BenchError, OSError):
        return None  # not there yet: source() downloads it or says so
    return f"{dataset}|{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"


def _memo(folder: Path) -> dict:
    memo = files.read_json(folder / MEMO, default=None)
    return memo if isinstance(memo, dict) else {}


def _remember(folder: Path, stamp: str, entry: dict) -> None:
    if not writes_allowed():
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        files.write_json(folder / MEMO, {**_memo(folder), stamp: entry})
    except OSError:  # a read-only cache: the next lookup decodes again
        pass


def _cached(final: Path, key: str, rec: dict) -> ShiftSet | None:
    manifest = files.read_json(final.with_suffix(".json"), default=None)
    if not final.exists():
        return None
    shape = (1 + len(rec["corruptions"]) * len(C.SEVERITIES), rec["n"], rec["size"],
             rec["size"], 3)
    why = damage(final, shape)
    if why is None and not (isinstance(manifest, dict) and manifest.get("recipe_digest") == key):
        why = "its manifest is missing or of another recipe (digest differs)"
    if why is None and not _unchanged(final, manifest) and files.sha256(final) != manifest.get(
            "sha256"):
        why = "contents changed since built (sha256 differs from its manifest)"
    if why is not None:
        if writes_allowed():
            set_aside(final, why)
        return None
    images = np.load(final, mmap_mode="r", allow_pickle=False)
    blocks = tuple((c, int(s)) for c, s in manifest["blocks"])
    return ShiftSet(final, images, np.asarray(manifest["labels"], np.int64), blocks,
                    manifest["sha256"], manifest)


def _unchanged(final: Path, manifest: dict) -> bool:
    """Whether the array file has the size and mtime it had when built (then
    its sha256, a full read of up to tens of GB, is not recomputed)."""
    st = final.stat()
    return [st.st_size, st.st_mtime_ns] == manifest.get("stat")


# ----------------------------------------------------------------- build --
def build_set(final: Path, rec: dict, key: str, images, labels, chosen: dict,
              progress: bool = True, jobs: int = 1) -> Path:
    """Corrupt, resize and write the whole set, then its manifest."""
    final.parent.mkdir(parents=True, exist_ok=True)
    blocks = blocks_of(chosen)
    size, n = rec["size"], len(labels)
    tmp = final.with_name(f".{final.stem}.tmp{os.getpid()}.npy")
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.uint8,
                                    shape=(len(blocks), n, size, size, 3))
    t0 = time.perf_counter()
    try:
        out[0] = resize(np.asarray(images), size)  # the clean block
        tasks = [(b, c, s, i) for b, (c, s) in enumerate(blocks) if b
                 for i in range(0, n, CHUNK)]
        bar = tqdm(total=len(tasks) * CHUNK, desc=f"shift {rec['dataset']} {size}px",
                   unit="img", disable=not progress, leave=False)
        if jobs > 1 and len(tasks) > 1:
            _build_parallel(tmp, tasks, images, rec, chosen, jobs, bar)
        else:
            for b, c, s, i in tasks:
                out[b, i:i + CHUNK] = corrupted_chunk(images, i, c, s, chosen[c], size)
                bar.update(CHUNK)
        bar.close()
        out.flush()
        del out
        sha = files.sha256(tmp)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()
    st = final.stat()
    files.write_json(final.with_suffix(".json"), {
        "recipe": rec, "recipe_digest": key, "sha256": sha, "stat": [st.st_size, st.st_mtime_ns],
        "blocks": [list(b) for b in blocks],
        "labels": [int(v) for v in labels], "seconds": round(time.perf_counter() - t0, 1),
        "jobs": jobs})
    return final


def corrupted_chunk(images, start: int, corruption: str, severity: int, corruptor,
                    size: int) -> np.ndarray:
    """Images start..start+CHUNK corrupted at 224 px, resized to `size`."""
    part = [C.corrupt(images[i], corruptor, corruption, severity, SEED, i)
            for i in range(start, min(start + CHUNK, len(images)))]
    return resize(np.stack(part), size)


def _build_parallel(tmp: Path, tasks: list, images, rec: dict, chosen: dict, jobs: int,
                    bar) -> None:
    """The tasks on `jobs` processes, each writing its chunks into the array file."""
    src = tmp.with_name(tmp.name + ".src.npy")
    np.save(src, np.asarray(images))  # the workers map it instead of receiving copies
    try:
        with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as pool:
            futures = [pool.submit(_work, str(tmp), str(src), rec["dataset"], tuple(chosen),
                                   rec["size"], task) for task in tasks]
            for f in as_completed(futures):
                f.result()
                bar.update(CHUNK)
    finally:
        src.unlink(missing_ok=True)


def _work(tmp: str, src: str, dataset: str, only: tuple, size: int, task: tuple) -> None:
    """One task of _build_parallel: (block, corruption, severity, first image)."""
    b, corruption, severity, start = task
    images = np.load(src, mmap_mode="r", allow_pickle=False)
    _, chosen = C.corruptions(dataset, only)
    out = np.load(tmp, mmap_mode="r+", allow_pickle=False)
    out[b, start:start + CHUNK] = corrupted_chunk(images, start, corruption, severity,
                                                  chosen[corruption], size)
    out.flush()
