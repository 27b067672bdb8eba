"""`bench check --results DIR`: verify every run record (checksums, readable
files) and name the damaged ones (the kept weights, model.safetensors, are checked with
the record's files; evaluation sets, evals.json and eval-<set>.npz, on their
own); exit status 1 when any is damaged. bench.core.recordcheck checks and
builds the tables; this module parses and prints.

A damaged record is left where it is: `bench run` moves it aside and
retrains it, `bench report` skips it.
"""
from __future__ import annotations


def add_parser(sub) -> None:
    p = sub.add_parser("check", help="verify every run record under --results; "
                       "name the damaged ones")
    p.add_argument("--results", default="results", help="run-record root")
    p.set_defaults(func=check)


def check(args) -> int:
    # start-up: `bench check --help` builds this module's parser; record checking
    # loads numpy and ~100 modules (0.16 s -> 0.47 s) only when the command runs
    from bench.core.recordcheck import check_results

    found = check_results(args.results)
    for text in found.lines():
        print(text)
    return 1 if found.bad else 0
