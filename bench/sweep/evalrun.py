"""`bench eval`: evaluation sets for finished records, from their kept weights
(issue 33). `EvalOptions` (bench.sweep.options) declares its flags;
`evaluate_results(opts)` does the work and returns one `EvalRow` per record
and set; `summary_text(rows)` is the closing table the command prints.

Per record (complete, matching the filters):

  damaged         store.verify names a file (the kept weights included: a
                  checksum mismatch is named and the file never loaded)
  no weights      trained without --keep-weights: listed, never blocks the rest
  stored          the set is already stored on the same images (same digest)
  evaluated       the set was computed now and stored beside the record
  failed          the set could not be read or the model not rebuilt (why)

Nothing of the record itself changes: sets go to evals.json + eval-<set>.npz
(bench.core.evalfiles), never to metrics.json or predictions.npz.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from tabulate import tabulate
from tqdm import tqdm

from bench.core import store
from bench.core.config import parse_data_opts
from bench.core.device import check_device, default_device
from bench.core.errors import BenchError
from bench.core.record import Record
from bench.sweep.evals import check as check_evals
from bench.sweep.evals import check_sizes
from bench.sweep.options import EvalOptions
from bench.train.evaluate import (eval_data, evaluate_record, missing_sets, record_options,
                                  record_sets, train_config)

SKIPPED, STORED, EVALUATED, DAMAGED, FAILED = (
    "no kept weights", "already stored", "evaluated", "damaged", "failed")


@dataclass(frozen=True)
class EvalRow:
    record: str
    set: str
    status: str
    images: int = 0
    seconds: float = 0.0
    why: str = ""

    @property
    def images_per_s(self) -> float:
        return self.images / self.seconds if self.seconds > 0 else 0.0


def _names(values: tuple) -> set:
    return {n.strip() for v in values for n in str(v).split(",") if n.strip()}


def check(opts: EvalOptions) -> tuple:
    """Every flag checked before anything is read or written: (root, EvalSpecs)."""
    if not opts.evals:
        raise BenchError("bench eval needs at least one --eval SPEC: shift, ood:DATASET or "
                         "site:DATASET (a dataset name, or a path)")
    root = store.require_results_dir(opts.results)
    specs = check_evals(opts.evals)
    if opts.device is not None:
        check_device(opts.device, indexed=True)
    return root, specs


FILTERS = ("dataset", "method", "backbone")


def selected(root, opts: EvalOptions) -> list:
    """The keys of complete records under `root` passing the filters; a
    filter naming what no record under `root` has is refused (one line)."""
    keys = list(store.iter_seed_dirs(root))
    want = {f: _names(getattr(opts, f)) for f in FILTERS}
    for f, names in want.items():
        have = sorted({getattr(k, f) for k in keys})
        unknown = sorted(names - set(have))
        if unknown:
            raise BenchError(f"--{f} {unknown[0]}: no record under {root} has it; "
                             f"its records' {f}s: {', '.join(have) or 'none'}")
    return [k for k in keys if store.is_complete(k.path(root))
            and all(not names or getattr(k, f) in names for f, names in want.items())]


def evaluate_results(opts: EvalOptions, progress: bool = True) -> list[EvalRow]:
    """Evaluate every selected record's missing sets; one row per record and
    set. Every source is read (and every corrupted set built) before any
    record is evaluated: a set that cannot apply to the records (a site set
    of other classes, their own dataset as ood:) stops here in one line."""
    root, specs = check(opts)
    keys = selected(root, opts)
    _check_sizes(root, keys, specs)
    given = tuple(sorted(parse_data_opts(list(opts.data_opts)).items()))
    _prepare(_plans(root, keys, given, progress), specs, opts.data_root, progress)
    device = opts.device or default_device()
    rows: list[EvalRow] = []
    bar = tqdm(keys, desc="eval", unit="record", disable=not progress, dynamic_ncols=True)
    for key in bar:
        bar.set_postfix_str(key.label, refresh=False)
        rows += _one(key.path(root), root, specs, opts.data_root, given, device, progress)
    bar.close()
    return rows


def summary_text(rows: list[EvalRow]) -> str:
    """The closing table (record, set, images, seconds, images/s, status), then counts."""
    table = [[r.record, r.set, r.images or "", f"{r.seconds:.2f}" if r.seconds else "",
              f"{r.images_per_s:.0f}" if r.seconds else "",
              r.status + (f": {r.why}" if r.why else "")] for r in rows]
    counts = Counter(r.status for r in rows)
    tail = (", ".join(f"{n} {status}" for status, n in counts.items())
            or "no complete record matched")
    head = ["record", "set", "images", "seconds", "images/s", "status"]
    return (tabulate(table, headers=head, tablefmt="github") + "\n" if table else "") + \
        f"{len({r.record for r in rows})} record(s): {tail}"


def nothing_evaluated(rows: list[EvalRow]) -> str:
    """'' when some set was evaluated or already stored; else the one line that
    says why none was (no record matched, or none kept its weights)."""
    if any(r.status in (EVALUATED, STORED) for r in rows):
        return ""
    if not rows:
        return "nothing to evaluate: no complete record matched the filters"
    return (f"nothing to evaluate: none of {len({r.record for r in rows})} record(s) could be "
            "(train with --keep-weights to evaluate extra sets later)")


def failed(rows: list[EvalRow]) -> list[EvalRow]:
    """The rows of sets that could not be evaluated (a damaged record, a failure)."""
    return [r for r in rows if r.status in (DAMAGED, FAILED)]

def _check_sizes(root, keys, specs) -> None:
    """Each ood/site source's files at every test size the records read it at,
    before any set is built (a record whose config cannot be read is left to
    its own row)."""
    sizes = set()
    for key in keys:
        try:
            cfg = train_config(Record(key.path(root), root))
        except (BenchError, OSError, ValueError, TypeError):
            continue
        sizes.add(cfg.test_size or cfg.image_size)
    check_sizes(specs, sizes)


def _plans(root, keys, given: tuple, progress: bool) -> set:
    """(dataset, test size, classes, adapter options) of every record that
    will be evaluated (intact, kept weights); a --data-opt contradicting a
    record's own is refused here. A record whose config cannot be read is
    left to its own row."""
    plans = set()
    for key in keys:
        record = Record(key.path(root), root)
        if store.verify(record.path) or not record.has_weights:
            continue
        try:
            cfg = train_config(record)
        except (BenchError, OSError, ValueError, TypeError):
            continue
        plans.add((key.dataset, cfg.test_size or cfg.image_size,
                   tuple(record.config.get("classes") or []),
                   record_options(record, given, progress)))
    return plans


def _prepare(plans: set, specs, data_root, progress: bool) -> None:
    """Read every ood/site set, then build every corrupted set, once per plan
    (bench.sweep.evals.prepare does the same for bench run)."""
    for shift in (False, True):  # a set that cannot be read stops before minutes of corrupting
        for dataset, size, classes, options in sorted(plans):
            for spec in specs:
                if (spec.kind == "shift") == shift:
                    eval_data(spec, dataset, size, classes, data_root, options, progress)


def _one(path, root, specs, data_root, given, device, progress) -> list[EvalRow]:
    record = Record(path, root)
    label = record.key.label
    why = store.verify(path)  # the kept weights' checksum too: damaged ones are never loaded
    if why:
        return [EvalRow(label, s.name, DAMAGED, why=why) for s in specs]
    if not record.has_weights:
        return [EvalRow(label, s.name, SKIPPED, why="trained without --keep-weights")
                for s in specs]
    try:
        return _evaluate(record, specs, data_root, given, device, progress)
    except BenchError as err:
        return [EvalRow(label, s.name, FAILED, why=str(err)) for s in specs]


def _evaluate(record, specs, data_root, given, device, progress) -> list[EvalRow]:
    label = record.key.label
    sets = record_sets(record, specs, data_root, given, progress)
    todo = missing_sets(record, sets)
    rows = [EvalRow(label, d.spec.name, STORED) for d in sets
            if not any(d is t for t in todo)]
    if todo:
        done = evaluate_record(record, todo, device)
        rows += [EvalRow(label, name, EVALUATED, n, s) for name, n, s in done]
    return rows
