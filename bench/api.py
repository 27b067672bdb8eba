"""The harness from Python (a notebook, a script): `run` trains a grid as
`bench run` does and returns its runs as a pandas DataFrame; `report` builds
the reports of `bench report` and returns the files written and its tables'
data as DataFrames.

    import bench.api
    df = bench.api.run(method=["sl1h", "2hml"], dataset="digits", backbone="smallcnn",
                       seeds=1, profile="quick", sets={"cycles": 1, "image_size": 16})
    df[["method", "seed", "status", "test_acc", "test_ece"]]
    rep = bench.api.report("results", "reports")
    rep.groups  # one row per table cell (dataset, backbone, row): means and stds

Both share the command line's code (bench.sweep.plan, the `bench report`
command), so they take the same names and values and fail with the same
one-line BenchError, before anything is trained or written. Plugins named in
`plugins=[...]`, and plugin modules this process has already imported, are
carried to every worker process.
"""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.core import plugins as plugin_routes
from bench.core.errors import BenchError
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
    known = {f.name for f in dataclasses.fields(RunOptions)}
    bad = sorted(set(values) - known)
    if bad:
        raise BenchError(f"bench.api.run: unknown option {', '.join(bad)}; allowed: "
                         f"{', '.join(sorted(known - {'overrides', 'data_opts', 'plugin'}))}")
    return RunOptions(**values)


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
@dataclass(frozen=True)
class Report:
    """What `report` wrote: every file, the text `bench report` printed, and
    its tidy data (runs.csv: one row per run; groups.csv: one row per table
    cell) as DataFrames."""

    paths: tuple
    text: str
    runs: pd.DataFrame
    groups: pd.DataFrame


def report(results_dir="results", out_dir="reports", **options) -> Report:
    """`bench report --results RESULTS_DIR --out OUT_DIR` with `options` as its
    flags: `metrics="ece,aece"`, `significance=True`, `no_plots=True`,
    `method=["sl1h", "2hml"]` (a list: a comma list), a dict for a repeatable
    KEY=VALUE flag. The command runs in a fresh process (with this process's
    plugins), so its figures never touch a notebook's matplotlib state."""
    argv = ["report", "--results", str(results_dir), "--out", str(out_dir), "--no-progress"]
    for key, value in options.items():
        argv += _flag(key, value)
    carried = plugin_routes.carried()
    for module, _ in carried:
        argv += ["--plugin", module]
    env = dict(os.environ)
    paths = [p for _, p in carried if p]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    done = subprocess.run([sys.executable, "-m", "bench.cli", *argv], capture_output=True,
                          text=True, env=env)
    if done.returncode != 0:
        lines = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()
        raise BenchError(lines[-1].removeprefix("bench: error: "))
    out = Path(out_dir)
    return Report(tuple(_written(done.stdout)), done.stdout, pd.read_csv(out / "runs.csv"),
                  pd.read_csv(out / "groups.csv"))


def _flag(key: str, value) -> list[str]:
    flag = "--" + key.replace("_", "-")
    if value is True:
        return [flag]
    if value is False or value is None:
        return []
    if isinstance(value, dict):
        return [a for k, v in value.items() for a in (flag, f"{k}={v}")]
    return [flag, names_text(value) if isinstance(value, (list, tuple)) else str(value)]


def _written(stdout: str) -> list[Path]:
    """The file list `bench report` prints last ('N runs, M tables, K files:')."""
    lines = stdout.splitlines()
    start = max((i for i, line in enumerate(lines) if line.endswith(" files:")), default=None)
    if start is None:
        return []
    return [Path(line.strip()) for line in lines[start + 1:] if line.startswith("  ")]


__all__ = ["run", "report", "Report", "RunOptions", "BenchError"]
