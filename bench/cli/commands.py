"""`bench list` (its tables: bench.sweep.catalog) and `bench run` (its parser;
running it: bench.cli.runcmd)."""
from __future__ import annotations

import argparse
import dataclasses

from bench.cli.fields import add_fields
from bench.cli.typed import options_from
from bench.core import plugins
from bench.sweep.gridfile import GridOptions, grid_options, keys_text
from bench.sweep.options import RunOptions


def add_parser(sub) -> None:
    lp = sub.add_parser("list", help="list registered methods, datasets, backbones, profiles, "
                        "measures, variants, OOD and conformal scores; --keys: every --set key")
    lp.add_argument("--keys", action="store_true",
                    help="every --set key with its type, default, allowed range and meaning, then "
                    "every key of a --grid file beside its flag")
    lp.add_argument("--backbones", metavar="PATTERN",
                    help="every backbone name matching PATTERN: 'timm', 'tv' (all of that "
                    "library's models) or a shell pattern such as 'timm:*vit*', 'tv:resnet*'")
    lp.set_defaults(func=list_command)
    p = sub.add_parser("run", help="train a grid of methods x datasets x backbones x seeds")
    # every flag from its RunOptions field (bench.core.flags); one not given
    # sets nothing, so a --grid file's value can stand in for it
    add_fields(p, RunOptions, given_only=True)
    add_fields(p, GridOptions)
    # named, not imported: the planner, the sweep and the report summary load
    # when `bench run` runs (bench.cli.main resolves "module:function")
    p.set_defaults(func="bench.cli.runcmd:run")


def list_command(args) -> int:
    """`bench list`: the registries, --keys or --backbones PATTERN."""
    # start-up: `bench run --help` builds this module's parsers; the registries
    # (every method, dataset and measure module) load when `bench list` runs
    from bench.sweep import catalog

    print(f"{catalog.keys_table()}\n\n{keys_text()}" if args.keys else catalog.backbone_names(args.backbones)
          if args.backbones else catalog.list_registries())
    return 0


def run_options(args: argparse.Namespace) -> RunOptions:
    """A parsed `bench run` as RunOptions: what the planner, the executors
    and the loaders take."""
    return grid_run(args)[0]


def grid_run(args: argparse.Namespace) -> tuple[RunOptions, dict]:
    """(RunOptions, {field: value} asked for) of a parsed `bench run`: the
    --grid file's values overridden by each flag given (a flag's absence
    leaves no attribute: add_fields(given_only=True)); a plugin the file
    names is loaded here, as bench.cli.main loads the command line's."""
    given = options_from(RunOptions, args)
    named = [f.name for f in dataclasses.fields(RunOptions)
             if getattr(args, f.name, []) != []]  # --plugin's default is []
    spec = getattr(args, "grid", None)
    opts, asked = grid_options(spec, {name: getattr(given, name) for name in named})
    if spec and opts.plugin != given.plugin:
        plugins.load(opts.plugin)
    return opts, asked
