"""`bench data shift --dataset NAME [--size N,...]`: build the corrupted test
sets of `--eval shift` ahead of the runs (bench.datasets.shift), with a
progress bar and a closing table (size, corruption set, blocks, images, MB,
seconds, built or found in the cache, file)."""
from __future__ import annotations

import os
import time

from bench.core.errors import BenchError


def add_parser(dsub, add_data_options) -> None:
    s = dsub.add_parser("shift", help="build the corrupted test sets of --eval shift ahead "
                        "(MedMNIST-C through medmnistc; cached)")
    s.add_argument("--dataset", required=True)
    s.add_argument("--size", default=None, metavar="N[,N...]",
                   help="the runs' test size(s) in px (default: the dataset's own size)")
    s.add_argument("--data-root", default=None, help="where the dataset's files live")
    s.add_argument("--jobs", type=int, default=1, help="processes corrupting at once")
    add_data_options(s)
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(func=build)


def sizes(text, default) -> list[int]:
    """--size as ints in 8..1024 (one line naming a bad value)."""
    if text is None:
        return [default()]
    out = []
    for part in str(text).split(","):
        try:
            n = int(part)
        except ValueError:
            n = 0
        if not 8 <= n <= 1024:
            raise BenchError(f"--size {part.strip()}: give whole pixels from 8 to 1024 "
                             "(a comma list for several)")
        out.append(n)
    return out


def build(args) -> int:
    from tabulate import tabulate

    from bench.sweep.plan import check_data_paths
    from bench.core.config import load_kwargs
    from bench.datasets import DATASETS
    from bench.datasets import shift
    from bench.datasets.corruptions import registry

    DATASETS.get(args.dataset)
    if args.jobs < 1:
        raise BenchError(f"--jobs {args.jobs}: give 1 or more processes")
    check_data_paths(args.data_root, args.data_opts)
    registry()  # medmnistc and its libraries, or one line naming them
    options = tuple(sorted(load_kwargs(args.download, not args.no_progress,
                                       args.data_opts).items()))
    rows = []
    for size in sizes(args.size, lambda: _native(args.dataset, args.data_root, options)):
        t0 = time.perf_counter()
        before = set(shift.shift_dir(args.data_root).glob("*.npy"))
        s = shift.get(args.dataset, size, args.data_root, options, build=True,
                      progress=not args.no_progress, jobs=args.jobs)
        rec = s.meta["recipe"]
        rows.append([args.dataset, size, rec["set"], len(s.blocks), int(s.images.shape[1]),
                     f"{os.path.getsize(s.path) / 2**20:.1f}", f"{time.perf_counter() - t0:.1f}",
                     "cached" if s.path in before else "built", os.path.relpath(s.path)])
    print(tabulate(rows, headers=["dataset", "px", "corruption set", "blocks", "images",
                                  "MB", "seconds", "", "file"], tablefmt="github"))
    return 0


def _native(dataset: str, data_root, options) -> int:
    """The dataset's own test size (what a run at its default size tests at)."""
    from bench.sweep.grid import load_bundle

    return int(load_bundle(dataset, 0, data_root, options).test.images.shape[1])

