"""`bench data shift --dataset NAME [--size N,...]`: build the corrupted test
sets of `--eval shift` ahead of the runs (bench.datasets.shift.build_sets and
its built_table), with a progress bar and a closing table (size, corruption
set, blocks, images, MB, seconds, built or found in the cache, file)."""
from __future__ import annotations

from bench.core.config import load_kwargs
from bench.core.errors import BenchError
from bench.datasets import DATASETS
from bench.datasets.cache import check_data_paths


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
    """Checks the options, then each size's set by bench.datasets.shift.build_sets."""
    # start-up: `bench data --help` builds this module's parser; the shift builder,
    # the corruptions and the grid (torch, the training code) when `bench data shift` runs
    from bench.datasets import shift
    from bench.datasets.corruptions import registry
    from bench.sweep.grid import native_test_size

    DATASETS.get(args.dataset)
    if args.jobs < 1:
        raise BenchError(f"--jobs {args.jobs}: give 1 or more processes")
    check_data_paths(args.data_root, args.data_opts)
    registry()  # medmnistc and its libraries, or one line naming them
    options = tuple(sorted(load_kwargs(args.download, not args.no_progress,
                                       args.data_opts).items()))
    wanted = sizes(args.size, lambda: native_test_size(args.dataset, args.data_root, options))
    built = shift.build_sets(args.dataset, wanted, args.data_root, options,
                             progress=not args.no_progress, jobs=args.jobs)
    print(shift.built_table(built))
    return 0
