"""`bench run` once its flags are parsed (bench.cli.commands builds its parser
and names this module's `run` as the command's function, imported by
bench.cli.main when the command runs: `bench list` and `bench run --help`
load none of the planner, the sweep or the report summary)."""
from __future__ import annotations

from bench.cli.commands import grid_run
from bench.datasets.cache import dry_run as no_writes
from bench.report.render.summary import summary_table
from bench.sweep import codechange
from bench.sweep.gridfile import save_grid
from bench.sweep.dryrun import dry_run_table, protocol_json, protocol_table, protocols, sbatch_text
from bench.sweep.options import RunOptions
from bench.sweep.plan import plan
from bench.sweep.run import exit_code, run_sweep, summary_text


def run(args) -> int:
    """`bench run` with its parsed flags: plan (every check), then the dry run's
    tables or the sweep and its summary; -> the exit status."""
    opts, asked = grid_run(args)
    grid, accepted = codechange.plan_accepting(opts, plan)
    if args.save_grid:  # every check passed: the grid is one --grid reads back
        save_grid(args.save_grid, opts, asked)
    for line in [] if opts.json else accepted:
        print(line)
    specs, experiments, datasets = grid.specs, grid.experiments, grid.datasets
    if not opts.json:  # code edited since its records: say why runs train again, or reuse them
        for line in (codechange.code_changes(specs, experiments, opts.results)
                     + codechange.shared_line(codechange.shared_changes(specs, experiments))):
            print(line)
    if opts.dry_run:
        with no_writes():  # the protocols see the dry run's data, written nowhere
            rows = protocols(specs, experiments)
        print(protocol_json(rows) if opts.json
              else f"{dry_run_table(rows)}\n\n{protocol_table(rows)}")
        if opts.executor == "slurm" and not opts.json:
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
