"""`bench list` (its tables: bench.sweep.catalog) and `bench run` (its parser;
running it: bench.cli.runcmd)."""
from __future__ import annotations

import argparse

from bench.cli.fields import add_fields
from bench.cli.typed import options_from
from bench.sweep.options import RunOptions


def add_parser(sub) -> None:
    lp = sub.add_parser("list", help="list registered methods, datasets, backbones, profiles, "
                        "measures, variants, OOD and conformal scores; --keys: every --set key")
    lp.add_argument("--keys", action="store_true",
                    help="every --set key with its type, default, allowed range and meaning")
    lp.add_argument("--backbones", metavar="PATTERN",
                    help="every backbone name matching PATTERN: 'timm', 'tv' (all of that "
                    "library's models) or a shell pattern such as 'timm:*vit*', 'tv:resnet*'")
    lp.set_defaults(func=list_command)
    p = sub.add_parser("run", help="train a grid of methods x datasets x backbones x seeds")
    add_fields(p, RunOptions)  # every flag from its RunOptions field (bench.core.flags)
    # named, not imported: the planner, the sweep and the report summary load
    # when `bench run` runs (bench.cli.main resolves "module:function")
    p.set_defaults(func="bench.cli.runcmd:run")


def list_command(args) -> int:
    """`bench list`: the registries, --keys or --backbones PATTERN."""
    # start-up: `bench run --help` builds this module's parsers; the registries
    # (every method, dataset and measure module) load when `bench list` runs
    from bench.sweep import catalog

    print(catalog.keys_table() if args.keys else catalog.backbone_names(args.backbones)
          if args.backbones else catalog.list_registries())
    return 0


def run_options(args: argparse.Namespace) -> RunOptions:
    """A parsed `bench run` as RunOptions: what the planner, the executors
    and the loaders take."""
    return options_from(RunOptions, args)
