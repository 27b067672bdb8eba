"""`bench eval --results DIR --eval SPEC [...]`: evaluation sets for finished
records from their kept weights, no retraining (bench.sweep.evalrun)."""
from __future__ import annotations

import sys

from bench.cli.fields import add_fields
from bench.cli.typed import options_from

HELP = "evaluate further sets (shift, ood:, site:) on finished records with kept weights"


def add_parser(sub) -> None:
    from bench.sweep.evalrun import EvalOptions

    p = sub.add_parser("eval", help=HELP)
    add_fields(p, EvalOptions)
    p.set_defaults(func=evaluate)


def evaluate(args) -> int:
    from bench.sweep.evalrun import DAMAGED, FAILED, EvalOptions, evaluate_results

    opts = options_from(EvalOptions, args)
    rows = evaluate_results(opts, progress=not opts.no_progress)
    print(summary(rows))
    bad = [r for r in rows if r.status in (DAMAGED, FAILED)]
    for r in bad:  # the table may scroll away or go to a file: each reason on stderr too
        print(f"bench eval: {r.record} {r.set}: {r.status}: {r.why}", file=sys.stderr)
    return 1 if bad else 0


def summary(rows) -> str:
    """The closing table (record, set, images, seconds, images/s, status), then counts."""
    from collections import Counter

    from tabulate import tabulate

    table = [[r.record, r.set, r.images or "", f"{r.seconds:.2f}" if r.seconds else "",
              f"{r.images_per_s:.0f}" if r.seconds else "",
              r.status + (f": {r.why}" if r.why else "")] for r in rows]
    counts = Counter(r.status for r in rows)
    tail = ", ".join(f"{n} {status}" for status, n in counts.items()) or "no complete record matched"
    head = ["record", "set", "images", "seconds", "images/s", "status"]
    return (tabulate(table, headers=head, tablefmt="github") + "\n" if table else "") + \
        f"{len({r.record for r in rows})} record(s): {tail}"
