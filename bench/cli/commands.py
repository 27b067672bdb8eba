"""`bench list` (its tables: bench.sweep.catalog) and `bench run`."""
from __future__ import annotations

import argparse

from bench.cli.fields import add_fields
from bench.cli.typed import options_from
from bench.sweep.catalog import backbone_names, keys_table, list_registries
from bench.sweep.options import RunOptions


def add_parser(sub) -> None:
    lp = sub.add_parser("list", help="list registered methods, datasets, backbones, profiles, "
                        "measures, variants, OOD and conformal scores; --keys: every --set key")
    lp.add_argument("--keys", action="store_true",
                    help="every --set key with its type, default, allowed range and meaning")
    lp.add_argument("--backbones", metavar="PATTERN",
                    help="every backbone name matching PATTERN: 'timm', 'tv' (all of that "
                    "library's models) or a shell pattern such as 'timm:*vit*', 'tv:resnet*'")
    lp.set_defaults(func=lambda args: print(
        keys_table() if args.keys else backbone_names(args.backbones) if args.backbones
        else list_registries()) or 0)
    p = sub.add_parser("run", help="train a grid of methods x datasets x backbones x seeds")
    add_fields(p, RunOptions)  # every flag from its RunOptions field (bench.core.flags)
    p.set_defaults(func=run)


def run_options(args: argparse.Namespace) -> RunOptions:
    """A parsed `bench run` as RunOptions: what the planner, the executors
    and the loaders take."""
    return options_from(RunOptions, args)


def run(args) -> int:
    # here, not at the top: `bench list` and `bench --help` load neither torch
    # nor the report package (tests/cli/test_startup.py)
    from bench.report.render.summary import summary_table
    from bench.sweep import codechange
    from bench.sweep.plan import plan
    from bench.sweep.run import exit_code, run_sweep, summary_text

    opts = run_options(args)
    grid, accepted = codechange.plan_accepting(opts, plan)
    for line in [] if opts.json else accepted:
        print(line)
    specs, experiments, datasets = grid.specs, grid.experiments, grid.datasets
    if not opts.json:  # code edited since its records: say why runs train again, or reuse them
        for line in (codechange.code_changes(specs, experiments, opts.results)
                     + codechange.shared_line(codechange.shared_changes(specs, experiments))):
            print(line)
    if opts.dry_run:
        # start-up: see run()'s first imports (`bench list` shares this module)
        from bench.sweep.dryrun import dry_run_table, protocol_json, protocol_table, protocols
        from bench.datasets.cache import dry_run as no_writes

        with no_writes():  # the protocols see the dry run's data, written nowhere
            rows = protocols(specs, experiments)
        print(protocol_json(rows) if opts.json
              else f"{dry_run_table(rows)}\n\n{protocol_table(rows)}")
        if opts.executor == "slurm" and not opts.json:
            # start-up: see run()'s first imports (`bench list` shares this module)
            from bench.sweep.dryrun import sbatch_text

            print(f"\n{sbatch_text(rows, opts)}")
        return 0
    outcomes = run_sweep(specs, opts, progress=not opts.no_progress)
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
