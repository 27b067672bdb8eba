"""The harness from Python (a notebook, a script): `run` trains a grid as
`bench run` does and returns its runs as a pandas DataFrame; `report` builds
the report of `bench report` (bench.report.build), writes its files and
returns it, its data as DataFrames.

    import bench.api
    df = bench.api.run(method=["sl1h", "2hml"], dataset="digits", backbone="smallcnn",
                       seeds=1, profile="quick", sets={"cycles": 1, "image_size": 16})
    df[["method", "seed", "status", "test_acc", "test_ece"]]
    rep = bench.api.report("results", "reports")
    rep.groups  # one row per table cell (dataset, backbone, row): means and stds

Both share the command line's code (bench.sweep.plan, bench.report.build),
so they take the same names and values and fail with the same one-line
BenchError, before anything is trained or written. Plugins named in
`plugins=[...]`, and plugin modules this process has already imported, are
carried to every worker process.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from bench.core import plugins as plugin_routes
from bench.core.errors import BenchError
from bench.report import Report, ReportOptions
from bench.sweep.options import RunOptions, names_text, pairs, seeds_text

RUN_COLUMNS = ["dataset", "backbone", "method", "config_hash", "seed", "status", "reason",
               "record"]


def run(method="sl1h", dataset="digits", backbone=None, seeds=5, profile="paper", sets=None,
        *, results="results", data_root=None, data=None, download=False, pretrained=None,
        weights=None, device=None, force=False, dry_run=False, executor="local", jobs=None,
        plugins=(), tensorboard=False, progress=False, **executor_options) -> pd.DataFrame:
    """Train the grid method x dataset x backbone x seed (what is not done yet).

    Names are a comma string or a list ('paper', 'all' as in `bench run`);
    `seeds` an int N (0..N-1), 'A-B' or a list; `sets` a dict of `--set`
    values; `data` a dict of `--data-opt` values; `executor_options` any other
    `bench run` executor option by its name (jobs_per_gpu, fuse, partition,
    time, ...). Returns one row per run: its keys, `status` (done, skipped,
    failed, busy; under `dry_run` what is on disk: done, missing, failed,
    running, damaged), `reason`, `record` (its folder), and for finished runs
    the metric columns of bench.results.load (test_acc, test_ece, ...)."""
    plugin_routes.load(list(plugins))  # registered here; the grid carries them to the workers
    opts = _options(method=names_text(method), dataset=names_text(dataset),
                    backbone=names_text(backbone), seeds=seeds_text(seeds), profile=profile,
                    overrides=pairs(sets), results=str(results), data_root=data_root,
                    data_opts=pairs(data), download=download, pretrained=pretrained,
                    weights=weights, device=device, force=force, no_progress=not progress,
                    dry_run=dry_run, tensorboard=tensorboard, plugin=tuple(plugins),
                    executor=executor, jobs=jobs, **executor_options)
    from bench.sweep.plan import execute, plan

    grid = plan(opts)
    if dry_run:
        from bench.sweep.grid import run_status

        outcomes = {}
        for s in grid.specs:
            status, detail = run_status(s)
            outcomes[str(s.record)] = {"status": status, "reason": detail}
    else:
        outcomes = {o["record"]: o for o in execute(grid, opts, progress=progress)}
    rows = [{"dataset": s.dataset, "backbone": s.backbone, "method": s.method,
             "config_hash": s.chash, "seed": s.seed,
             "status": outcomes.get(str(s.record), {}).get("status", "missing"),
             "reason": outcomes.get(str(s.record), {}).get("reason", ""),
             "record": str(s.record)} for s in grid.specs]
    return _with_metrics(pd.DataFrame(rows, columns=RUN_COLUMNS), opts.results)


def _options(**values) -> RunOptions:
    _check_names(RunOptions, "bench.api.run", values, hidden={"overrides", "data_opts", "plugin"})
    return RunOptions(**values)


def _check_names(cls, who: str, values: dict, hidden=frozenset()) -> None:
    """Keyword arguments that name no field of `cls`: one BenchError listing them."""
    known = {f.name for f in dataclasses.fields(cls)}
    bad = sorted(set(values) - known)
    if bad:
        raise BenchError(f"{who}: unknown option {', '.join(bad)}; allowed: "
                         f"{', '.join(sorted(known - set(hidden)))}")


def _with_metrics(runs: pd.DataFrame, results: str) -> pd.DataFrame:
    """The runs, with the metric columns of every complete record among them."""
    from bench.core import store
    from bench.results import load

    complete = [r for r in runs["record"] if store.is_complete(Path(r))]
    if not complete:
        return runs
    frame = load(results, measures=False)
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
    from bench.core import store
    from bench.report import build
    from bench.sweep.runstate import live_holder

    opts = _report_options(options)
    opts.validate()
    out = store.require_writable_dir(out_dir, "--out") if out_dir is not None else None
    rep = build(results_dir, opts, cache_dir=out, live=live_holder)
    if out is not None:
        from bench.report.output import write_report

        write_report(rep, out)  # whole or not at all, as `bench report` writes it
    return rep


def _report_options(values: dict) -> ReportOptions:
    """keyword arguments -> ReportOptions, spelled as `bench report` takes
    them: a list is a comma list (a tuple for the repeatable --dataset,
    --backbone, --method), seeds as in bench.api.run, a dict KEY=VALUE items;
    progress bars off unless asked (no_progress=False)."""
    _check_names(ReportOptions, "bench.api.report", values)
    repeatable = {f.name for f in dataclasses.fields(ReportOptions) if f.type.startswith("tuple")}
    out = {"no_progress": True}
    for key, value in values.items():
        if key == "seeds":
            value = seeds_text(value)
        elif key == "label" or isinstance(value, dict):
            value = pairs(value)
        elif key in repeatable and value is not None:
            value = (value,) if isinstance(value, str) else tuple(value)
        elif isinstance(value, (list, tuple)):
            value = names_text(value)
        out[key] = value
    return ReportOptions(**out)


__all__ = ["run", "report", "Report", "ReportOptions", "RunOptions", "BenchError"]
