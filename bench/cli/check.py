"""`bench check --results DIR`: verify every run record (checksums, readable
files) and name the damaged ones; exit status 1 when any is damaged.

A damaged record is left where it is: `bench run` moves it aside and
retrains it, `bench report` skips it.
"""
from __future__ import annotations

from tabulate import tabulate

from bench.core import store


def add_parser(sub) -> None:
    p = sub.add_parser("check", help="verify every run record under --results; "
                       "name the damaged ones")
    p.add_argument("--results", default="results", help="run-record root")
    p.set_defaults(func=check)


def check(args) -> int:
    root = store.require_results_dir(args.results)
    keys = store.iter_seed_dirs(root)
    damaged = [(k.label, reason) for k in keys
               if (reason := store.verify(k.path(root))) is not None]
    if damaged:
        print(tabulate(damaged, headers=["damaged record", "reason"], tablefmt="github"))
    print(f"{len(keys)} record(s) under {root}: {len(keys) - len(damaged)} intact, "
          f"{len(damaged)} damaged" + ("; `bench run` with the same options moves them "
                                       "aside and retrains them" if damaged else ""))
    return 1 if damaged else 0
