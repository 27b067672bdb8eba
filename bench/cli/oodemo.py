"""`bench data ood-demo --out DIR [--tile PX]`: write the offline demo's
out-of-distribution set, tiles of scikit-learn's two sample photos, as PNGs
into DIR (bench.datasets.ood_demo: which photos, the grid, why they are out
of distribution for digits). `./run_all.sh --quick` evaluates its shift
demo on it with `--eval ood:DIR`. A second call writes nothing."""
from __future__ import annotations

from bench.core.store import require_writable_dir
from bench.datasets import ood_demo
from bench.datasets.ood_demo import DEFAULT_TILE


def add_parser(dsub) -> None:
    s = dsub.add_parser("ood-demo", help="write the offline demo's OOD set (tiles of "
                        "scikit-learn's two sample photos) as PNGs into --out")
    s.add_argument("--out", required=True, help="the folder to write the tiles into")
    s.add_argument("--tile", type=int, default=DEFAULT_TILE,
                   help=f"tile side in px (default {DEFAULT_TILE}: 80 tiles)")
    s.set_defaults(func=write)


def write(args) -> int:
    out = require_writable_dir(args.out, "--out")
    ood_demo.tiles(args.tile)  # a bad --tile: one line before anything is written
    done = ood_demo.write(out, args.tile)
    n = len(done["files"])
    print(f"ood-demo: {n} tiles ({args.tile} px) of scikit-learn's sample photos "
          f"({', '.join(p + '.jpg' for p in ood_demo.PHOTOS)}) in {out}: "
          f"{done['written']} written, {done['unchanged']} unchanged")
    return 0
