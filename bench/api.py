"""The harness from Python (a notebook, a script): `run` trains a grid as
`bench run` does and returns its runs as a pandas DataFrame; `report` builds
the report of `bench report` (bench.report.build), writes its files and
returns it, its data as DataFrames; `evaluate` is `bench eval` (evaluation
sets from kept weights), one row per record and set.

    import bench.api
    df = bench.api.run(method=["sl1h", "2hml"], dataset="digits", backbone="smallcnn",
                       seeds=1, profile="quick", overrides={"cycles": 1, "image_size": 16})
    df[["method", "seed", "status", "acc", "ece"]]
    rep = bench.api.report("results", "reports")
    rep.groups  # one row per table cell (dataset, backbone, row): means and stds

Both share the command line's code (bench.sweep.plan, bench.report.build)
and take its options by their dataclass field names (RunOptions,
ReportOptions: the same declarations the flags are built from,
bench.core.flags), with the same values, and fail with the same one-line
BenchError, before anything is trained or written. Plugins named in
`plugin=[...]`, and plugin modules this process has already imported, are
carried to every worker process.
"""
from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pandas as pd

from bench.core import plugins as plugin_routes
from bench.core import store
from bench.core.errors import BenchError
from bench.core.flags import from_keywords, signature
from bench.report import Report, ReportOptions, build
from bench.report.output import write_report
from bench.results import load as load_results
from bench.sweep.options import EvalOptions, RunOptions
from bench.sweep.runstate import live_holder

RUN_COLUMNS = ["dataset", "backbone", "method", "config_hash", "seed", "status", "reason",
               "record"]


# bench.api.run's positional arguments, in the order it has always taken them
RUN_POSITIONAL = ("method", "dataset", "backbone", "seeds", "profile", "overrides")


def run(*leading, **options) -> pd.DataFrame:
    """Train the grid method x dataset x backbone x seed (what is not done yet).

    Takes every `bench run` option by its RunOptions field name (`jobs_per_gpu`,
    `dry_run`, `overrides` for --set), and the first six positionally
    (RUN_POSITIONAL).
    Names are a comma string or a list ('paper', 'all' as in `bench run`);
    `seeds` an int N (0..N-1), 'A-B' or a list; `overrides` a dict of `--set`
    values, kept as given (the plan converts each to its field's type);
    `data_opts` a dict of `--data-opt` values. Returns one row per run: its
    keys, `status` (done, skipped, failed, busy; under `dry_run` what is on
    disk: done, missing, failed, running, damaged), `reason`, `record` (its
    folder), and for finished runs the metric columns of bench.results.load
    (acc, ece, ..., val_acc, ...: runs.csv's names)."""
    opts = from_keywords(RunOptions, "bench.api.run", options, leading, RUN_POSITIONAL)
    plugin_routes.load(list(opts.plugin))  # registered here; the grid carries them to the workers
    # start-up: `import bench.api` loads no torch; the planner and the sweep
    # (torch, the training code) load when run() runs
    from bench.sweep.codechange import plan_accepting
    from bench.sweep.executors import LOCAL, executor_name
    from bench.sweep.grid import run_status
    from bench.sweep.mainguard import require_guard
    from bench.sweep.plan import plan
    from bench.sweep.run import run_sweep

    if not opts.dry_run and executor_name(opts) == LOCAL:  # its workers re-import the script
        require_guard("bench.api.run")
    grid, _ = plan_accepting(opts, plan)  # the pins file names what it accepted
    if opts.dry_run:
        outcomes = {}
        for s in grid.specs:
            status, detail = run_status(s)
            outcomes[str(s.record)] = {"status": status, "reason": detail}
    else:
        outcomes = {o["record"]: o for o in run_sweep(grid.specs, opts,
                                                        progress=not opts.no_progress)}
    rows = [{"dataset": s.dataset, "backbone": s.backbone, "method": s.method,
             "config_hash": s.chash, "seed": s.seed,
             "status": outcomes.get(str(s.record), {}).get("status", "missing"),
             "reason": outcomes.get(str(s.record), {}).get("reason", ""),
             "record": str(s.record)} for s in grid.specs]
    return _with_metrics(pd.DataFrame(rows, columns=RUN_COLUMNS), opts.results)


run.__signature__ = signature(RunOptions, RUN_POSITIONAL)


def _with_metrics(runs: pd.DataFrame, results: str) -> pd.DataFrame:
    """The runs, with the metric columns of every complete record among them."""
    complete = [r for r in runs["record"] if store.is_complete(Path(r))]
    if not complete:
        return runs
    frame = load_results(results, measures=False)
    frame = frame.assign(record=frame["path"].map(str))
    keys = ["dataset", "backbone", "method", "config_hash", "seed", "path"]
    metrics = frame[frame["record"].isin(complete)].drop(columns=keys)
    return runs.merge(metrics, on="record", how="left")


# ------------------------------------------------------------------ report --
def report(results_dir="results", out_dir="reports", **options) -> Report:
    """`bench report --results RESULTS_DIR --out OUT_DIR` with `options` as its
    flags, in this process: `metrics="ece,aece"`, `significance=True`,
    `no_plots=True`, `method=["sl1h", "2hml"]` (a list: a comma list), a dict
    for a repeatable KEY=VALUE flag (`label={"confpen": "CP (ours)"}`).
    Builds the report with bench.report.build, writes every file of the
    command to `out_dir` and returns the bench.report.Report: its DataFrames
    (`runs`, `groups`, `significance`, `friedman`, `table_cells()`), `paths`
    (the files written) and `text` (what the command prints). With
    `out_dir=None` nothing is written. Figures are Figure objects of their
    own: a notebook's matplotlib state is left alone."""
    opts = _report_options(options)
    opts.validate()
    out = store.require_writable_dir(out_dir, "--out") if out_dir is not None else None
    rep = build(results_dir, opts, cache_dir=out, live=live_holder)
    if out is not None:
        write_report(rep, out)  # whole or not at all, as `bench report` writes it
    return rep


def _report_options(values: dict) -> ReportOptions:
    """keyword arguments -> ReportOptions, named as its fields: a list is a
    comma list (a tuple for the repeatable --dataset, --backbone, --method),
    seeds as in bench.api.run, a dict KEY=VALUE items (ReportOptions brings
    each to its one form); progress bars off unless asked (no_progress=False)."""
    return from_keywords(ReportOptions, "bench.api.report", values)


_FIRST = (inspect.Parameter("results_dir", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                            default="results"),
          inspect.Parameter("out_dir", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                            default="reports"))
report.__signature__ = signature(ReportOptions, first=_FIRST)


# -------------------------------------------------------------------- eval --
EVAL_COLUMNS = ["record", "set", "status", "images", "seconds", "images_per_s", "why"]


def evaluate(*leading, **options) -> pd.DataFrame:
    """`bench eval`: evaluation sets for finished records from their kept
    weights, no retraining. Takes EvalOptions' fields (`results`, `evals`
    (or `eval`): 'shift', 'ood:kvasir', a list of them; `dataset`, `method`,
    `backbone`, `data_root`, `device`), `results` also first positionally.
    Returns one row per record and set: `status` is evaluated, already stored,
    no kept weights, damaged or failed (`why` says why)."""
    # start-up: `import bench.api` loads no torch; the evaluation code (torch)
    # loads when evaluate() runs
    from bench.sweep.evalrun import evaluate_results

    opts = from_keywords(EvalOptions, "bench.api.evaluate", options, leading, ("results",))
    rows = evaluate_results(opts, progress=not opts.no_progress)
    return pd.DataFrame([{**dataclasses.asdict(r), "images_per_s": r.images_per_s}
                         for r in rows], columns=EVAL_COLUMNS)


evaluate.__signature__ = signature(EvalOptions, ("results",))


__all__ = ["run", "report", "evaluate", "Report", "ReportOptions", "RunOptions", "BenchError"]
