"""`bench check --results DIR`: verify every run record (checksums, readable
files) and name the damaged ones (the kept weights, model.safetensors, are checked with
the record's files; evaluation sets, evals.json and eval-<set>.npz, on their
own); exit status 1 when any is damaged.

A damaged record is left where it is: `bench run` moves it aside and
retrains it, `bench report` skips it.
"""
from __future__ import annotations

from tabulate import tabulate

from bench.core import evalfiles, store


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
    sets = eval_damage(root, keys)
    return 1 if damaged or sets else 0


def eval_damage(root, keys) -> list:
    """Evaluation files (evals.json, eval-<set>.npz) that do not match their
    manifest, named per record; the record itself stays intact and usable."""
    from bench.core.evalfiles import MANIFEST, file_name

    rows = [(k.label, what if what == MANIFEST else file_name(what), why) for k in keys
            if (k.path(root) / MANIFEST).exists()
            for what, why in evalfiles.check(k.path(root))]
    if rows:
        print(tabulate(rows, headers=["record", "damaged evaluation file", "reason"],
                       tablefmt="github"))
        print(f"{len(rows)} damaged evaluation file(s): their sets are not read; `bench eval` "
              "with the same --eval evaluates them again from kept weights")
    return rows
