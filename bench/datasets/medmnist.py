"""MedMNIST v2/v3 2D subsets (PathMNIST is the paper's; the others come free).

Reads `<data-root>/<flag>.npz` (28 px) or `<flag>_<size>.npz` (64/128/224)
with numpy: medmnist's own Dataset classes assert the official split sizes,
which a small test file cannot meet. Class names, URLs and MD5s come from
`medmnist.INFO`. Labels are stored (N, 1); grey subsets are copied to three
channels. A size that is not an official one is resampled (bilinear) from
the largest official size not above it, e.g. 32 px for ConvNeXt from 28 px.
"""
from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

import numpy as np

from bench.core.errors import BenchError

from .base import DATASETS, SPLITS, DatasetBundle, Split, check_labels
from .cache import writes_allowed
from .filelist import check_options, default_root

OFFICIAL_SIZES = (28, 64, 128, 224)
# PathMNIST's official split sizes (medmnist.INFO["pathmnist"]["n_samples"]),
# the paper's: here so that a report or the GPU plan can read them without
# importing medmnist (tests/speed/test_gpuplan.py checks them against INFO).
PATHMNIST_PUBLISHED = {"train": 89996, "val": 10004, "test": 7180}
LEGACY_ROOT = Path.home() / ".medmnist"  # medmnist's own download folder, used if present

# Single-label 2D flags (name, classes, what). chestmnist is multi-label and
# does not fit the multi-class calibration protocol, so it is not offered.
FLAGS = {
    "pathmnist": (9, "colon pathology (the paper's PathMNIST)"),
    "dermamnist": (7, "dermatoscopy"),
    "octmnist": (4, "retinal OCT, grey"),
    "pneumoniamnist": (2, "chest X-ray pneumonia, grey"),
    "retinamnist": (5, "fundus, ordinal grades as classes"),
    "breastmnist": (2, "breast ultrasound, grey"),
    "bloodmnist": (8, "blood cell microscopy"),
    "tissuemnist": (8, "kidney cortex cells, grey"),
    "organamnist": (11, "abdominal CT axial, grey"),
    "organcmnist": (11, "abdominal CT coronal, grey"),
    "organsmnist": (11, "abdominal CT sagittal, grey"),
}
OPTIONS = {"file": "explicit .npz path instead of <data-root>/<flag>[_size].npz"}


def info(flag: str) -> dict:
    from medmnist.info import INFO  # lazy: importing medmnist pulls in torchvision

    return INFO[flag]


def file_size(image_size: int) -> int:
    """The official file to read for a requested training size."""
    if image_size in OFFICIAL_SIZES:
        return image_size
    return max([s for s in OFFICIAL_SIZES if s <= image_size] or [28])


def npz_name(flag: str, size: int) -> str:
    return f"{flag}.npz" if size == 28 else f"{flag}_{size}.npz"


def locate(flag: str, root: Path | None, size: int, download: bool, file=None) -> Path:
    if file:
        path = Path(file)
    else:
        path = Path(root or default_root("medmnist")) / npz_name(flag, size)
        legacy = LEGACY_ROOT / path.name
        if root is None and not path.is_file() and legacy.is_file():
            return legacy
    if path.is_file():
        return path
    suffix = "" if size == 28 else f"_{size}"
    meta = info(flag)
    url, md5 = meta[f"url{suffix}"], meta[f"MD5{suffix}"]
    if not download:
        raise BenchError(f"{flag}: {path} not found; rerun with --download or fetch {url} "
                         f"(md5 {md5}) to that path")
    if not writes_allowed():
        raise BenchError(f"{flag}: {path} not found, and --dry-run downloads nothing; run "
                         "once without --dry-run (with --download) to fetch it")
    # torchvision on demand (a download): `bench list` imports every adapter (the DATASETS registry)
    from torchvision.datasets.utils import download_url

    path.parent.mkdir(parents=True, exist_ok=True)
    download_url(url, root=str(path.parent), filename=path.name, md5=md5)
    return path


def read_npz(path: Path, flag: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{split: (images uint8 [N,H,W,3], labels int64 [N])} with shape checks.
    A truncated or corrupt file (a partial download) is a one-line error."""
    try:
        return _read_npz(path, flag)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as err:
        raise BenchError(f"{path}: damaged or truncated ({type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else 'unreadable'}); "
                         "delete it and rerun with --download to fetch it again") from None


def _read_npz(path: Path, flag: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    with np.load(path, allow_pickle=False) as data:  # data, never code
        missing = [f"{s}_{k}" for s in SPLITS for k in ("images", "labels")
                   if f"{s}_{k}" not in data.files]
        if missing:
            raise BenchError(f"{path}: missing key(s) {missing}; found {sorted(data.files)}")
        out = {}
        for s in SPLITS:
            images, labels = data[f"{s}_images"], data[f"{s}_labels"]
            if labels.ndim == 2 and labels.shape[1] != 1:
                raise BenchError(f"{path}: {s}_labels has shape {labels.shape}; {flag} needs "
                                 "one label per image, shape (N, 1)")
            labels = labels.reshape(-1).astype(np.int64)
            check_labels(labels, class_names(flag), f"{path} {s}_labels")
            if len(images) != len(labels):
                raise BenchError(f"{path}: the {s} split has {len(images)} images "
                                 f"({s}_images) but {len(labels)} labels ({s}_labels); "
                                 "every image needs exactly one label (re-download with "
                                 "--download)")
            out[s] = (to_rgb(images, path, s), labels)
    return out


def to_rgb(images: np.ndarray, path: Path, split: str) -> np.ndarray:
    if images.ndim == 3:  # grey [N, H, W]
        images = np.repeat(images[..., None], 3, axis=-1)
    if images.ndim != 4 or images.shape[-1] not in (1, 3):
        raise BenchError(f"{path}: {split}_images has shape {images.shape}; expected "
                         "[N, H, W] or [N, H, W, 3]")
    if images.shape[-1] == 1:
        images = np.repeat(images, 3, axis=-1)
    return np.ascontiguousarray(images, dtype=np.uint8)


def resize(images: np.ndarray, size: int) -> np.ndarray:
    if images.shape[1] == size and images.shape[2] == size:
        return images
    # torch on demand: listing or checking a dataset needs no torch
    import torch
    import torch.nn.functional as F

    out = np.empty((len(images), size, size, 3), dtype=np.uint8)
    for i in range(0, len(images), 4096):  # chunks bound the float32 copy
        x = torch.from_numpy(images[i:i + 4096]).permute(0, 3, 1, 2).float()
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False,
                          antialias=size < images.shape[1])
        out[i:i + 4096] = x.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy()
    return out


def load_medmnist(flag: str, data_root=None, image_size: int = 0, download: bool = False,
                  progress: bool = True, **options) -> DatasetBundle:
    check_options(flag, options, OPTIONS)
    size = image_size or 28
    path = locate(flag, data_root, file_size(size), download, options.get("file"))
    splits = read_npz(path, flag)
    classes = class_names(flag)
    return DatasetBundle(
        name=flag, classes=classes,
        default_backbone="resnet50",
        identity={"file": path.name, "file_size": file_size(size), "size": size,
                  **{f"n_{s}": len(splits[s][1]) for s in SPLITS}},
        **{s: Split(resize(x, size), y) for s, (x, y) in splits.items()},
    )


def class_names(flag: str) -> list[str]:
    names = info(flag)["label"]  # {"0": name, ...}
    return [names[str(i)] for i in range(len(names))]


def published_counts(flag: str) -> dict[str, int]:
    return dict(info(flag)["n_samples"])


def _register(flag: str, n: int, what: str) -> None:
    def factory(data_root=None, image_size: int = 0, **options):
        return load_medmnist(flag, data_root, image_size, **options)

    DATASETS.add(flag, factory, f"MedMNIST {flag}: {what}, {n} classes, 28 px "
                 "(64/128/224 via --set image_size)")


for _flag, (_n, _what) in FLAGS.items():
    _register(_flag, _n, _what)
