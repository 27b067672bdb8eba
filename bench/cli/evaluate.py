"""`bench eval --results DIR --eval SPEC [...]`: evaluation sets for finished
records from their kept weights, no retraining (bench.sweep.evalrun evaluates
and builds the closing table; this module parses and prints)."""
from __future__ import annotations

import sys

from bench.cli.fields import add_fields
from bench.cli.typed import options_from
from bench.sweep.options import EvalOptions

HELP = "evaluate further sets (shift, ood:, site:) on finished records with kept weights"


def add_parser(sub) -> None:
    p = sub.add_parser("eval", help=HELP)
    add_fields(p, EvalOptions)
    p.set_defaults(func=evaluate)


def evaluate(args) -> int:
    # start-up: `bench --help` builds this module's parser; the evaluation code
    # (torch) only when `bench eval` runs
    from bench.sweep.evalrun import evaluate_results, failed, nothing_evaluated, summary_text

    opts = options_from(EvalOptions, args)
    rows = evaluate_results(opts, progress=not opts.no_progress)
    print(summary_text(rows))
    bad = failed(rows)
    for r in bad:  # the table may scroll away or go to a file: each reason on stderr too
        print(f"bench eval: {r.record} {r.set}: {r.status}: {r.why}", file=sys.stderr)
    idle = "" if bad else nothing_evaluated(rows)  # a bad row's line already says why
    if idle:  # a script must not read "nothing happened" as success
        print(f"bench eval: {idle}", file=sys.stderr)
    return 1 if bad or idle else 0
