"""`bench run --eval SPEC` and `--keep-weights` on the sweep's side (issue 33).

Three moments:

  check      before anything is written (bench.sweep.plan): every --eval
             value parses (bench.core.evalfiles.EvalSpec), an ood/site source
             is a registered dataset or an existing path, and `shift` finds
             medmnistc and its libraries; one line each.
  prepare    before the first run trains (bench.sweep.run.run_sweep): each
             corrupted test set the grid needs is built once, here, with its
             progress bar (local workers would otherwise build the same set
             side by side), and each ood/site set is read once, so a set that
             cannot be read (a site set of other classes) stops the sweep
             before hours of training rather than after each run.
  finish     after the sweep: records that were already complete get the
             sets they lack from their kept weights (no retraining); records
             without kept weights are named in one line.

The runs the sweep trains evaluate their sets in their own process, right
after training, with the selected checkpoint still in memory
(bench.sweep.worker -> bench.train.experiment.run_seed / groups.run_members).
"""
from __future__ import annotations

import os

from bench.core.device import default_device
from bench.core.errors import BenchError
from bench.core.evalfiles import parse_all
from bench.core.record import Record
from bench.datasets import DATASETS, corruptions
from bench.datasets.evalsets import check_present
from bench.datasets.medmnist import FLAGS
from bench.sweep.grid import load_bundle, load_options
from bench.train.evaluate import eval_data, evaluate_record, missing_sets, record_sets

NO_WEIGHTS = "no kept weights"


def check(texts) -> tuple:
    """The parsed --eval values (EvalSpec), every source checked; BenchError
    (one line) for the first bad one."""
    specs = parse_all(texts)
    for spec in specs:
        check_source(spec)
    if any(s.kind == "shift" for s in specs):
        # medmnistc and MagickWand / libGL importable, or one line naming them
        corruptions.registry()
    return specs


def check_source(spec) -> None:
    """An ood/site source must be a registered dataset whose test files are
    present, or an existing folder of images / readable CSV
    (bench.datasets.evalsets.check_present: nothing decoded or written)."""
    if spec.kind == "shift":
        return
    if spec.source not in DATASETS.names() and not (
            spec.is_path and os.path.exists(os.path.expanduser(spec.source))):
        raise BenchError(f"--eval {spec.text}: '{spec.source}' is neither a dataset "
                         f"({', '.join(DATASETS.names())}) nor an existing folder or CSV")
    check_present(spec)


def check_sizes(specs, sizes) -> None:
    """A MedMNIST ood/site source again at each test size the runs read it at
    (one file per size): after the grid is built, before any set is built or
    any run starts."""
    for spec in specs:
        if spec.kind == "shift" or spec.is_path or spec.source not in FLAGS:
            continue  # checked whole by check_source: one file set for every size
        for size in sorted({int(s) for s in sizes if s}):
            check_present(spec, size)


def spec_test_size(s) -> int:
    return s.sizes[2] if len(s.sizes) == 3 else s.train.test_size


def prepare(specs: list, progress: bool = True) -> None:
    """Build or read every set the grid's runs will evaluate, once per dataset
    and test size, before any run trains."""
    seen = set()
    for shift in (False, True):  # ood/site sets first: one that cannot be read stops the
        for s in specs:          # sweep before minutes of corrupting
            if not s.evals:
                continue
            size = spec_test_size(s)
            key = (shift, s.dataset, size, s.data_root, s.load_options, s.evals)
            if key in seen:
                continue
            seen.add(key)
            classes = load_bundle(s.dataset, 0, s.data_root, s.load_options).classes
            for spec in parse_all(s.evals):
                if (spec.kind == "shift") == shift:
                    eval_data(spec, s.dataset, size, classes, s.data_root, s.load_options,
                              progress)


def worker_sets(spec, exp, bundle) -> tuple:
    """The EvalData a worker evaluates after training `spec` (loaded before it
    trains: a set that cannot be read fails the run before its steps)."""
    return tuple(eval_data(e, spec.dataset, exp.train.test_size, bundle.classes,
                           spec.data_root, spec.load_options) for e in parse_all(spec.evals))


def finish(outcomes: list, opts, progress: bool = True) -> list[str]:
    """Evaluate the missing sets of records the sweep found complete; returns
    the lines to print (one for every record without kept weights together)."""
    specs = parse_all(opts.evals)
    if not specs:
        return []
    bare, lines = [], []
    device = opts.device or default_device()
    for o in outcomes:
        if o["status"] != "skipped":
            continue
        record = Record(o["record"], opts.results)
        todo = missing_sets(record, record_sets(record, specs, opts.data_root,
                                                load_options(opts), progress))
        if not todo:
            continue
        if not record.has_weights:
            bare.append(record.key.label)
            continue
        for name, n, seconds in evaluate_record(record, todo, device):
            lines.append(f"evaluated {record.key.label} {name}: {n} images in {seconds:.1f} s")
    if bare:
        names = ", ".join(s.name for s in specs)
        lines.append(f"--eval: {len(bare)} finished record(s) have {NO_WEIGHTS}, so {names} "
                     f"were not evaluated on them (first: {bare[0]}); retrain them with "
                     "--force --keep-weights")
    return lines


def stored_line(outcomes: list, opts) -> str:
    """After the sweep: which sets the complete records now hold, and the
    report that reads them ('' without --eval)."""
    specs = parse_all(opts.evals)
    complete = [o for o in outcomes if o["status"] in ("done", "skipped")]
    if not specs or not complete:
        return ""
    have = {s.name: 0 for s in specs}
    for o in complete:
        try:
            names = Record(o["record"], opts.results).evals
        except (BenchError, OSError, ValueError):
            continue
        for name in have:
            have[name] += name in names
    flags = [f for f, kind in (("--shift", "shift"), ("--ood", "ood"))
             if any(s.kind == kind for s in specs)]
    sets = ", ".join(f"{name} on {n}" for name, n in have.items())
    return (f"--eval: {sets} of {len(complete)} complete record(s) (evals.json beside each)"
            + (f"; their tables: bench report {' '.join(flags)}" if flags else ""))
