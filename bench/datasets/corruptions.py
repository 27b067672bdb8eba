"""MedMNIST-C's image corruptions, through the `medmnistc` package itself.

Each dataset gets one corruption set (Di Salvo, Doerrich and Ledig 2024,
`medmnistc.corruptions.registry.CORRUPTIONS_DS`), every corruption at its
5 severities, applied by medmnistc's own `apply(PIL image, severity - 1)` to
a 224 px RGB image (the size MedMNIST-C's corruptions were designed for):

    pathmnist, chaoyang        MedMNIST-C's PathMNIST set (11): pixelate, JPEG,
                               defocus and motion blur, brightness and contrast
                               up/down, saturation, stain deposit, bubbles
                               (Chaoyang is colon pathology, as PathMNIST)
    dermamnist, bloodmnist, ...  each MedMNIST flag its own MedMNIST-C set
    anything else (kvasir,     'general': the 13 ImageNet-C-style corruptions of
    digits, csv, folder, ...)  MedMNIST-C's DermaMNIST set (RGB camera images):
                               pixelate, JPEG, Gaussian / speckle / impulse /
                               shot noise, defocus / motion / zoom blur,
                               brightness and contrast up/down; its two
                               dermatoscopy artefacts (black corner, characters)
                               left out

Randomness (noise, the motion-blur angle, stain and bubble positions) comes
from `random`, `numpy.random` and the corruption's `rng`; all three are
seeded per image from (seed, corruption, severity, image index), so an
image's corrupted copy does not depend on the order or the process that made
it (MedMNIST-C's DatasetManager seeds once per dataset and draws in order).

One compatibility shim: medmnistc 0.1.0's motion blur decodes ImageMagick's
PNG with `np.fromstring(bytes, np.uint8)`, a form numpy 2.3 removed; its
module is given a numpy whose `fromstring` reads bytes as `frombuffer`
does (the same array). Nothing else of medmnistc is changed.
"""
from __future__ import annotations

import hashlib
import random
from importlib import metadata

import numpy as np
from PIL import Image

from bench.core.errors import BenchError

DESIGNED_SIZE = 224
SEVERITIES = (1, 2, 3, 4, 5)
GENERAL = "general"
GENERAL_FROM = "dermamnist"
GENERAL_LEFT_OUT = ("black_corner", "characters")
SET_OF = {"chaoyang": "pathmnist"}  # datasets that borrow a MedMNIST-C set
INSTALL = ("pip install medmnistc (./setup.sh does), and ImageMagick's MagickWand library "
           "(Debian: apt-get install libmagickwand-6.q16-6; ./setup.sh does)")


class _NumpyFromstring:
    """numpy, with `fromstring(bytes, dtype)` read as `frombuffer` (removed in numpy 2.3)."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def fromstring(string, dtype=float, count=-1, sep=""):
        if sep == "" and isinstance(string, (bytes, bytearray, memoryview)):
            return np.frombuffer(string, dtype=dtype, count=count)
        return np.fromstring(string, dtype=dtype, count=count, sep=sep)


def registry() -> dict:
    """medmnistc's CORRUPTIONS_DS (one line naming what to install when it cannot load)."""
    try:
        # optional package: the import is the check (a missing one is this one-line error)
        import medmnistc.corruptions.filter as filt
        from medmnistc.corruptions.registry import CORRUPTIONS_DS
    except ImportError as err:  # the package, wand's MagickWand library, or cv2's libGL
        why = (str(err).strip().splitlines() or [type(err).__name__])[0][:100]
        raise BenchError(f"--eval shift needs the medmnistc package and its libraries, "
                         f"which cannot be imported here ({why}); {INSTALL}") from None
    filt.np = _NumpyFromstring()
    return CORRUPTIONS_DS


def version() -> str:
    try:
        return metadata.version("medmnistc")
    except metadata.PackageNotFoundError:
        return "?"


def set_name(dataset: str) -> str:
    """The MedMNIST-C set a dataset is corrupted with (see the module's table)."""
    name = SET_OF.get(dataset, dataset)
    # optional package: its caller, corruptions(), ran registry() first, which checks it
    from medmnistc.corruptions.registry import CORRUPTIONS_DS

    return name if name in CORRUPTIONS_DS else GENERAL


def corruptions(dataset: str, only=None) -> tuple[str, dict]:
    """(set name, corruption name -> medmnistc corruption object) for `dataset`;
    `only`: a subset of the set's names, in the set's order."""
    reg = registry()
    name = set_name(dataset)
    if name == GENERAL:
        chosen = {k: c for k, c in reg[GENERAL_FROM].items() if k not in GENERAL_LEFT_OUT}
    else:
        chosen = dict(reg[name])
    if only:
        unknown = [c for c in only if c not in chosen]
        if unknown:
            raise BenchError(f"shift: corruption '{unknown[0]}' is not in the {name} set of "
                             f"{dataset}; choose from {', '.join(chosen)}")
        chosen = {k: c for k, c in chosen.items() if k in set(only)}
    return name, chosen


def recipe(name: str, chosen: dict) -> dict:
    """What defines the corruptions (for a cache key): set, names, parameters, version."""
    return {"set": name, "medmnistc": version(),
            "corruptions": {k: [type(c).__name__, _plain(c.severity_params)]
                            for k, c in chosen.items()}}


def _plain(value):
    """Parameters as JSON values (zoom blur's are numpy arrays)."""
    if isinstance(value, np.ndarray):
        return [round(float(v), 10) for v in value.ravel()]
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return round(float(value), 10)
    return value.item() if isinstance(value, np.generic) else value


def image_seed(seed: int, corruption: str, severity: int, index: int) -> int:
    """A 32-bit seed of its own for one image's corrupted copy."""
    text = f"{seed}:{corruption}:{severity}:{index}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:4], "little")


def corrupt(image: np.ndarray, corruptor, corruption: str, severity: int, seed: int,
            index: int) -> np.ndarray:
    """medmnistc's `apply` on one uint8 [224, 224, 3] image at `severity` (1..5),
    with every random source seeded for (seed, corruption, severity, index)."""
    if severity not in SEVERITIES:
        raise BenchError(f"shift: severity {severity}; MedMNIST-C has 1..5")
    s = image_seed(seed, corruption, severity, index)
    random.seed(s)
    np.random.seed(s)
    corruptor.rng = np.random.default_rng(s)  # impulse noise draws from it
    out = corruptor.apply(Image.fromarray(np.asarray(image, np.uint8)).convert("RGB"),
                          severity - 1)
    out = np.asarray(out)
    if out.ndim == 2:  # a grey result: three equal channels, as the run's images
        out = np.repeat(out[..., None], 3, axis=-1)
    if out.shape != image.shape:
        raise BenchError(f"shift: {corruption} at severity {severity} returned shape "
                         f"{out.shape} for a {image.shape} image")
    return np.clip(out, 0, 255).astype(np.uint8)
