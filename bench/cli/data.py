"""`bench data check` (`bench data shift`: bench.cli.datashift; `bench data
ood-demo`: bench.cli.oodemo), and the data
options shared with `bench run`.

`bench data check --dataset NAME [--data-root DIR] [--data-opt k=v]` prints
per-split, per-class counts next to the published totals and names every
missing or unreadable image by path (bench.datasets.check counts, decodes and
builds the tables; this module parses and prints). Exit status 1 when any
file is bad.
"""
from __future__ import annotations

from bench.cli.datashift import add_parser as add_shift
from bench.cli.fields import add_fields
from bench.cli.oodemo import add_parser as add_ood_demo
from bench.datasets import DATASETS
from bench.datasets.cache import check_data_paths as check_paths
from bench.sweep.options import RunOptions


def add_data_options(p) -> None:
    """Options every data-reading command takes (--data-root is added by the
    caller): --data-opt KEY=VALUE and --download, as RunOptions declares them."""
    add_fields(p, RunOptions, only=("data_opts", "download"))


def add_parser(sub) -> None:
    p = sub.add_parser("data", help="inspect datasets")
    dsub = p.add_subparsers(dest="data_command", required=True)
    c = dsub.add_parser("check", help="per-class counts; name every missing/unreadable image")
    c.add_argument("--dataset", required=True)
    c.add_argument("--data-root", default=None, help="where the dataset's files live")
    add_data_options(c)
    c.add_argument("--no-progress", action="store_true")
    c.set_defaults(func=check)
    add_shift(dsub, add_data_options)
    add_ood_demo(dsub)


def check_data_paths(args) -> None:
    """A data root or cache folder that is a file fails in one line
    (bench.datasets.cache.check_data_paths, as `bench run` checks them)."""
    check_paths(args.data_root, args.data_opts)


# ------------------------------------------------------------------ check --
def check(args) -> int:
    """Counts and bad files by bench.datasets.check; exit status 1 when any is bad."""
    # start-up: `bench data --help` builds this module's parser; the checker
    # only when `bench data check` runs
    from bench.datasets.check import check_dataset

    DATASETS.get(args.dataset)  # an unknown name before any path is looked at
    check_data_paths(args)
    found = check_dataset(args.dataset, args.data_root, args.data_opts, args.download,
                          progress=not args.no_progress)
    for text in found.lines():
        print(text)
    return 1 if found.bad else 0
