"""Decode-once image cache: files -> one memory-mapped uint8 array on disk.

Image files (JPEG/PNG) are decoded *fully* (a truncated JPEG opens in PIL and
fails only on decode), converted to RGB, resized to the training size and
stored as one `.npy` array [N, S, S, 3] per (file list, size). The key hashes
every path with its byte size and mtime, so the cache is reused across runs
and seeds and rebuilt when any input changes. The array is written under a
temporary name and renamed when complete: a killed build never looks done.

Within `dry_run()` (bench run --dry-run) nothing is written: an existing
intact array is read, a missing one is not built (every image is still
decoded, so a bad one is named) and the split gets placeholder pixels (zeros
that take no memory: a dry run needs shapes and counts, never pixels), and
nothing is downloaded.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from PIL import Image, ImageFile
from tqdm import tqdm

from bench.core.config import parse_data_opts
from bench.core.errors import BenchError, warn_once
from bench.core.files import move_aside

_DRY_RUN = [False]  # innermost dry_run() block: nothing may be written
CACHE_VERSION = 1  # bump when decoding/resizing changes, so old caches are ignored
CACHE_DIRNAME = ".bench-cache"
RESAMPLE = Image.BILINEAR  # square resize, as the paper resized Kvasir to 512x512


class BadImages(BenchError):
    """Missing or undecodable image files; `.bad` lists (path, reason) pairs."""

    def __init__(self, bad: list[tuple[str, str]]):
        self.bad = bad
        shown = "; ".join(f"{p} ({why})" for p, why in bad[:5])
        more = f"; ... and {len(bad) - 5} more (run `bench data check`)" if len(bad) > 5 else ""
        super().__init__(f"{len(bad)} missing or unreadable image(s): {shown}{more}")


@contextmanager
def _full_open(path: str | Path):
    """The image, fully decoded: a truncated JPEG opens fine and fails only on load."""
    # A global LOAD_TRUNCATED_IMAGES=True set elsewhere would hide truncation.
    ImageFile.LOAD_TRUNCATED_IMAGES = False
    with Image.open(path) as img:
        img.load()
        yield img


def decode(path: str | Path, size: int) -> np.ndarray:
    """Fully decode one image to uint8 [size, size, 3]; raises OSError/ValueError."""
    with _full_open(path) as img:
        rgb = img.convert("RGB")
    if rgb.size != (size, size):
        rgb = rgb.resize((size, size), RESAMPLE)
    return np.asarray(rgb, dtype=np.uint8)


def _check_decodes(path: str) -> None:
    with _full_open(path):
        pass


def _attempt(fn, path: str):
    """(fn(path), None), or (None, why) for a missing or undecodable file."""
    if not os.path.exists(path):
        return None, "missing"
    try:
        return fn(path), None
    except (OSError, ValueError, SyntaxError) as err:  # PIL's decode errors
        return None, f"unreadable: {str(err).splitlines()[0][:80]}"


def _workers() -> int:
    # PIL releases the GIL while decoding; threads scale on many-core hosts.
    return max(1, min(8, os.cpu_count() or 1))


def _each(fn, paths: list[str], progress: bool, desc: str):
    """(index, value, why) per path, in order, fn run on a thread pool. Never
    stops at the first failure, so every bad file can be named."""
    with ThreadPoolExecutor(_workers()) as pool:
        results = pool.map(lambda p: _attempt(fn, p), paths)
        for i, (value, why) in enumerate(tqdm(results, total=len(paths), desc=desc, unit="img",
                                              disable=not progress, leave=False)):
            yield i, value, why


def decode_all(paths: list[str], size: int, out: np.ndarray, progress: bool = True,
               desc: str = "decode") -> list[tuple[str, str]]:
    """Decode every path into `out` [N, size, size, 3]; returns the (path, reason) bad list."""
    bad: list[tuple[str, str]] = []
    for i, img, why in _each(lambda p: decode(p, size), paths, progress, desc):
        if why is not None:
            bad.append((paths[i], why))
        else:
            out[i] = img
    return bad


def verify(paths: list[str], progress: bool = True) -> list[tuple[str, str]]:
    """(path, reason) for every missing or undecodable file (full decode, no resize)."""
    return [(paths[i], why) for i, _, why in _each(_check_decodes, paths, progress, "check")
            if why is not None]


def cache_key(paths: list[str], size: int) -> str:
    """Hash of (path, byte size, mtime) for every file, the size and the decoder version."""
    h = hashlib.sha256(json.dumps({"v": CACHE_VERSION, "size": size}).encode())
    for p in paths:
        try:
            st = os.stat(p)
            h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        except OSError:
            h.update(f"{p}\0missing\n".encode())
    return h.hexdigest()[:20]


def default_cache_dir(data_root: Path) -> Path:
    """<data-root>/.bench-cache when writable, else ~/.cache/mhml-bench."""
    env = os.environ.get("BENCH_CACHE_DIR")
    if env:
        return Path(env)
    local = Path(data_root) / CACHE_DIRNAME
    if os.access(data_root, os.W_OK) or local.is_dir():
        return local
    return Path.home() / ".cache" / "mhml-bench"


@contextmanager
def dry_run():
    """Within the block, loading a dataset writes nothing (see the module's text)."""
    _DRY_RUN.append(True)
    try:
        yield
    finally:
        _DRY_RUN.pop()


def writes_allowed() -> bool:
    return not _DRY_RUN[-1]


def _checked_placeholder(paths: list[str], size: int, progress: bool, desc: str) -> np.ndarray:
    """A dry run's split: every image decoded to check it, nothing kept or written."""
    bad = verify(paths, progress)
    if bad:
        raise BadImages(bad)
    return np.broadcast_to(np.zeros((1, 1, 1, 3), np.uint8), (len(paths), size, size, 3))


def cached_images(paths: list[str], size: int, cache_dir: Path, progress: bool = True,
                  desc: str = "decode") -> np.ndarray:
    """uint8 [N, size, size, 3], memory-mapped from the cache (built on first use).

    Copy-on-write mapping: writable for torch.from_numpy, never written back.

    Raises BadImages naming every missing/unreadable file before anything is
    trained; a failed build leaves no cache file behind."""
    cache_dir = check_cache_dir(cache_dir)
    final = cache_dir / f"{cache_key(paths, size)}.npy"
    if final.exists():
        why = damage(final, (len(paths), size, size, 3))
        if why is None:
            return np.load(final, mmap_mode="c", allow_pickle=False)
        if not writes_allowed():
            warn_once(f"image cache {final} is damaged ({why}); a real run sets it aside "
                      "and rebuilds it")
            return _checked_placeholder(paths, size, progress, desc)
        set_aside(final, why)  # then rebuilt below, from the image files
    if not writes_allowed():
        return _checked_placeholder(paths, size, progress, desc)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = final.with_suffix(f".tmp{os.getpid()}.npy")
    arr = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.uint8,
                                    shape=(len(paths), size, size, 3))
    try:
        bad = decode_all(paths, size, arr, progress=progress, desc=desc)
        arr.flush()
        del arr
        if bad:
            raise BadImages(bad)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()
    return np.load(final, mmap_mode="c", allow_pickle=False)


def check_cache_dir(cache_dir) -> Path:
    """The cache folder, or a one-line error when that path is a file."""
    cache_dir = Path(cache_dir)
    if cache_dir.exists() and not cache_dir.is_dir():
        raise BenchError(f"image cache folder {cache_dir} is a file, not a folder; point "
                         "BENCH_CACHE_DIR (or --data-opt cache=) at a folder, or move that file")
    return cache_dir


def damage(path: Path, shape: tuple | None = None) -> str | None:
    """Why a cache array cannot be used (truncated, not an .npy, wrong shape),
    or None. Reads the header only: the size a complete file must have."""
    try:
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                    else np.lib.format.read_array_header_2_0)
            found, _, dtype = read(fh)
            need = fh.tell() + int(np.prod(found)) * dtype.itemsize
        size = path.stat().st_size
    except (OSError, ValueError):  # numpy's message quotes raw bytes: not for a terminal
        return "unreadable: not a complete .npy array"
    if size < need:
        return f"truncated: {size} of {need} bytes"
    if shape is not None and (tuple(found) != tuple(shape) or dtype != np.uint8):
        return f"holds {dtype} {tuple(found)}, expected uint8 {tuple(shape)}"
    return None


def set_aside(path: Path, why: str) -> Path:
    """Rename a damaged cache file out of the way (kept for inspection, never
    read again) and say so in one line; the next use rebuilds it."""
    aside = move_aside(path)
    print(f"bench: warning: cache file {path} was damaged ({why}); moved to {aside.name}, "
          "rebuilt", file=sys.stderr)
    return aside


def check_cache(cache_dir) -> list[tuple[str, str]]:
    """(path, why) for every damaged array in a cache folder, each set aside."""
    cache_dir = check_cache_dir(cache_dir)
    if not cache_dir.is_dir():
        return []
    bad = [(p, damage(p)) for p in sorted(cache_dir.glob("*.npy")) if ".tmp" not in p.name]
    for path, why in bad:
        if why is not None:
            set_aside(path, why)
    return [(str(p), why) for p, why in bad if why is not None]


def check_data_paths(data_root, data_opts) -> None:
    """A data root or cache folder that is a file fails here in one line, before
    an adapter tries to read or download into it."""
    roots = [("--data-root", data_root),
             ("BENCH_DATA_ROOT", os.environ.get("BENCH_DATA_ROOT"))]
    for name, root in roots:
        if root and Path(root).exists() and not Path(root).is_dir():
            raise BenchError(f"{name} {root} is a file; give the folder that holds the "
                             "dataset's files")
    for cache in (os.environ.get("BENCH_CACHE_DIR"), parse_data_opts(data_opts).get("cache")):
        if cache:
            check_cache_dir(cache)
