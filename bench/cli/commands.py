"""`bench list` and `bench run`."""
from __future__ import annotations

import argparse
import dataclasses

from tabulate import tabulate

from bench.train.backbones import BACKBONES
from bench.core.config import PROFILE_METHOD_SETS, PROFILES, TrainConfig, field_types
from bench.core.settings import specs
from bench.cli.fields import add_fields
from bench.cli.typed import options_from
from bench.sweep.options import RunOptions


def add_parser(sub) -> None:
    lp = sub.add_parser("list", help="list registered methods, datasets, backbones, profiles, "
                        "measures, variants, OOD scores; --keys: every --set key")
    lp.add_argument("--keys", action="store_true",
                    help="every --set key with its type, default, allowed range and meaning")
    lp.set_defaults(func=lambda args: print(keys_table() if args.keys else list_registries())
                    or 0)
    p = sub.add_parser("run", help="train a grid of methods x datasets x backbones x seeds")
    add_fields(p, RunOptions)  # every flag from its RunOptions field (bench.core.flags)
    p.set_defaults(func=run)


def registries():
    from bench.calib.measures import MEASURES
    from bench.calib.ood import SCORES
    from bench.calib.variants import VARIANTS
    from bench.datasets import DATASETS
    from bench.methods import METHODS

    return {"methods": METHODS, "datasets": DATASETS, "backbones": BACKBONES,
            "measures (bench report --metrics; every table, CSV and bench.results.load)":
                MEASURES,
            "variants (how bench report turns saved logits into probabilities; "
            "--variants picks the post-hoc calibrators)": VARIANTS,
            "OOD scores (bench report --ood: a column group of each table)": SCORES}


def list_registries() -> str:
    blocks = []
    for title, reg in registries().items():
        # where each entry comes from: built-in or the plugin that registered it
        rows = [(name, reg.origin(name), desc) for name, desc in reg.describe()]
        blocks.append(f"{title}:\n" + tabulate(rows, tablefmt="plain"))
    profiles = [(name, _profile_text(cfg)) for name, cfg in PROFILES.items()]
    blocks.append("profiles:\n" + tabulate(profiles, tablefmt="plain"))
    blocks.append("--set keys (type, default, range, meaning): bench list --keys")
    return "\n\n".join(blocks)


def keys_table() -> str:
    """Every --set key: training keys (paper profile defaults), then method keys,
    each as its dataclass field declares it (bench.core.settings)."""
    from bench.methods import every_method, method_params

    rows = [_key_row(PROFILES["paper"], f, "all") for f in dataclasses.fields(TrainConfig)]
    seen: dict = {}
    for name in every_method() + ["mhml"]:
        params = method_params(name)
        for f in dataclasses.fields(params):
            row = _key_row(params, f, "")
            seen.setdefault(tuple(row[:6]), []).append(name)
    rows += [[*row, ", ".join(names)] for row, names in seen.items()]
    return tabulate(rows, headers=["key", "type", "default", "range", "hash", "meaning",
                                   "methods"], tablefmt="simple")


def _key_row(obj, f, methods: str) -> list:
    """key, type, default, what it accepts, whether the config hash sees it, meaning."""
    spec = specs(obj)[f.name]
    kind = field_types(obj)[f.name].__name__
    row = [f.name, kind, getattr(obj, f.name), spec.text(kind),
           "yes" if spec.in_hash else "no", spec.help]
    return row + [methods] if methods else row


def _profile_text(cfg: TrainConfig) -> str:
    """A profile's schedule, then every field it sets away from the paper profile."""
    base = PROFILES["paper"]
    diff = [f"{f.name}={getattr(cfg, f.name)}" for f in dataclasses.fields(cfg)
            if getattr(cfg, f.name) != getattr(base, f.name)]
    name = next(n for n, c in PROFILES.items() if c is cfg)
    diff += [f"{k}={v}" for k, v in PROFILE_METHOD_SETS.get(name, {}).items()]
    return (f"{cfg.cycles} cycles x {cfg.epochs_per_cycle} epochs, SGD lr {cfg.lr}, "
            f"momentum {cfg.momentum}, batch {cfg.batch_size}"
            + (f"; {', '.join(diff)}" if diff else ""))


def run_options(args: argparse.Namespace) -> RunOptions:
    """A parsed `bench run` as RunOptions: what the planner, the executors
    and the loaders take."""
    return options_from(RunOptions, args)


def run(args) -> int:
    # here, not at the top: `bench list` and `bench --help` load neither torch
    # nor the report package (tests/cli/test_startup.py)
    from bench.report.summary import summary_table
    from bench.sweep.plan import execute, plan
    from bench.sweep.run import exit_code, summary_text

    opts = run_options(args)
    grid = plan(opts)
    specs, experiments, datasets = grid.specs, grid.experiments, grid.datasets
    if not opts.json:  # a plugin edited since its records: say why its runs train again
        from bench.sweep.codechange import code_changes

        for line in code_changes(specs, experiments, opts.results):
            print(line)
    if opts.dry_run:
        from bench.sweep.dryrun import dry_run_table, protocol_json, protocol_table, protocols

        from bench.datasets.cache import dry_run as no_writes

        with no_writes():  # the protocols see the dry run's data, written nowhere
            rows = protocols(specs, experiments)
        print(protocol_json(rows) if opts.json
              else f"{dry_run_table(rows)}\n\n{protocol_table(rows)}")
        if opts.executor == "slurm" and not opts.json:
            from bench.sweep.dryrun import sbatch_text

            print(f"\n{sbatch_text(rows, opts)}")
        return 0
    outcomes = execute(grid, opts, progress=not opts.no_progress)
    complete = {o["record"] for o in outcomes if o["status"] in ("done", "skipped")}
    for dataset in datasets:
        records = [(experiments[s.chash], s.record) for s in specs
                   if s.dataset == dataset and str(s.record) in complete]
        if records:
            if len(datasets) > 1:
                print(f"\n{dataset}:")
            print(summary_table(records))
    print(summary_text(outcomes))
    print(f"records in {opts.results}/; per-run logs in <record>/../_sweep/seed<k>.log"
          + ("; TensorBoard event files in <record>/tensorboard/" if opts.tensorboard else ""))
    return exit_code(outcomes)
