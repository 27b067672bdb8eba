"""Helpers shared by test_sweep.py and test_executors.py: tiny digits runs."""
from __future__ import annotations

import subprocess
import sys
import time

from bench.core import store
from bench.cli.main import build_parser
from bench.cli.commands import run_options
from bench.sweep.plan import resolve_run
from bench.sweep.grid import build_specs
from bench.sweep.options import RunOptions

TINY = ["--set", "cycles=1", "--set", "epochs_per_cycle=1", "--set", "image_size=16",
        "--set", "batch_size=64"]  # 16 steps a run (1,077 images, drop_last)


def run_args(results, *extra: str) -> RunOptions:
    """`bench run` options for tiny smallcnn runs on digits, as the command builds them."""
    return run_options(build_parser().parse_args(
        ["run", "--dataset", "digits", "--backbone", "smallcnn", "--results", str(results),
         "--no-progress", *TINY, *extra]))


def specs_for(args):
    """The specs of RunOptions (or of a parsed `bench run`, converted as the command does)."""
    opts = args if isinstance(args, RunOptions) else run_options(args)
    seeds, methods, cfg, datasets, backbones, per_method = resolve_run(opts)
    return build_specs(datasets, backbones, methods, per_method, seeds, cfg, opts)[0]


def bench_cmd(*argv: str) -> list[str]:
    return [sys.executable, "-m", "bench.cli", *argv]


def popen_bench(*argv: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(bench_cmd(*argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)


def wait_for(predicate, timeout: float = 120.0, every: float = 0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {predicate}")


def complete(specs) -> list:
    return [s for s in specs if store.is_complete(s.record)]
