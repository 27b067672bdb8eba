"""Every option of a grid of runs as one frozen dataclass, `RunOptions`:
what `bench run` parses and what `bench.api.run` takes as keyword arguments,
so both reach the same code (bench.sweep.plan) with the same checks.

Field names are the `bench run` option names (`--jobs-per-gpu` ->
`jobs_per_gpu`); repeatable options are tuples of KEY=VALUE strings. The
command line converts its parsed arguments (bench.cli.commands.run_options):
argparse objects stay in bench/cli.
"""
from __future__ import annotations

from dataclasses import dataclass

from bench.sweep.executor_options import ExecutorOptions


@dataclass(frozen=True)
class RunOptions(ExecutorOptions):
    """The grid (names, seeds, profile, --set), data, weights and output; the
    executor's fields (and their defaults) are ExecutorOptions'."""

    method: str = "sl1h"
    dataset: str = "digits"
    backbone: str | None = None
    seeds: str = "5"
    profile: str = "paper"
    overrides: tuple = ()  # --set KEY=VALUE
    results: str = "results"
    data_root: str | None = None
    data_opts: tuple = ()  # --data-opt KEY=VALUE
    download: bool = False
    pretrained: bool | None = None
    weights: str | None = None
    force: bool = False
    no_progress: bool = False
    dry_run: bool = False
    json: bool = False
    tensorboard: bool = False  # output only: never part of a config hash
    plugin: tuple = ()  # --plugin MODULE


def names_text(value) -> str:
    """'a,b' or ['a', 'b'] -> 'a,b' (the comma list `bench run` takes)."""
    if value is None or isinstance(value, str):
        return value
    return ",".join(str(v) for v in value)


def seeds_text(value) -> str:
    """5 -> '5' (seeds 0..4); [0, 3] -> '0,3'; [2] -> '2-2' (seed 2 alone:
    a bare '2' would mean seeds 0..1); '2-4' stays."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, (list, tuple)) and len(value) == 1:
        return f"{value[0]}-{value[0]}"
    return names_text(value)


def pairs(mapping) -> tuple:
    """{'lr': 0.1, 'nesterov': True} -> ('lr=0.1', 'nesterov=true') (--set strings)."""
    if mapping is None:
        return ()
    if isinstance(mapping, (list, tuple)):  # already KEY=VALUE strings
        return tuple(mapping)
    return tuple(f"{k}={str(v).lower() if isinstance(v, bool) else v}"
                 for k, v in mapping.items())
