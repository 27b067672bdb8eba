"""The offline demo's out-of-distribution set: tiles of scikit-learn's two
sample photos (`sklearn.datasets.load_sample_images`: `china.jpg`, a
Chinese temple, and `flower.jpg`, a flower; 427 x 640 colour photos that ship
inside scikit-learn, so nothing is downloaded).

`write(out, tile=80)` cuts each photo into a grid of non-overlapping
`tile` x `tile` squares from its top-left corner (80 px: 5 rows x 8 columns,
40 tiles a photo, 80 in all) and writes them as PNGs named
`<photo>-r<row>c<col>.png` into `out`. The grid is fixed and PNG encoding is
lossless, so the pixels are the same on every call; a file already holding
the same bytes is left as it is (a second call writes nothing), one that
differs is replaced. `bench data ood-demo --out DIR` (bench.cli.oodemo) calls
it; `./run_all.sh --quick` then evaluates the shift demo's runs on it with
`--eval ood:DIR`.

Why it is out of distribution for digits: the digits are 8 x 8 grey
handwritten numerals (white strokes on black, upsampled); the tiles are
colour photographs of buildings, foliage and petals, no numeral in any of
them, and none of the ten classes applies.
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

from bench.core.errors import BenchError
from bench.core.files import write_atomic

PHOTOS = ("china", "flower")  # load_sample_images().filenames, in its order
DEFAULT_TILE = 80


def tiles(tile: int = DEFAULT_TILE) -> list[tuple[str, np.ndarray]]:
    """(name, uint8 [tile, tile, 3]) for every grid square of both photos."""
    # scikit-learn on demand: `bench data --help` imports this module (its --tile default)
    from sklearn.datasets import load_sample_images

    if not isinstance(tile, int) or isinstance(tile, bool) or not 8 <= tile <= 427:
        raise BenchError(f"--tile {tile}: give whole pixels from 8 to 427 (the photos are "
                         "427 x 640)")
    data = load_sample_images()
    out = []
    for path, image in zip(data.filenames, data.images):
        name = Path(path).stem
        rows, cols = image.shape[0] // tile, image.shape[1] // tile
        for r in range(rows):
            for c in range(cols):
                square = image[r * tile:(r + 1) * tile, c * tile:(c + 1) * tile]
                out.append((f"{name}-r{r}c{c}", np.ascontiguousarray(square, np.uint8)))
    return out


def png_bytes(image: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG", optimize=False)
    return buf.getvalue()


def write(out, tile: int = DEFAULT_TILE) -> dict:
    """Write the tiles into `out` (created); returns {'written': n,
    'unchanged': n, 'files': [paths]}. A tile file whose bytes already match
    is not rewritten, so a second call changes nothing on disk."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = unchanged = 0
    files = []
    for name, image in tiles(tile):
        data = png_bytes(image)
        path = out / f"{name}.png"
        files.append(path)
        if path.is_file() and path.read_bytes() == data:
            unchanged += 1
            continue
        write_atomic(path, lambda f, data=data: f.write(data), binary=True)
        written += 1
    return {"written": written, "unchanged": unchanged, "files": files}
