"""`bench check` as a library: every run record under a results root verified
(checksums, readable files, the kept weights with them), and each record's
evaluation files (evals.json, eval-<set>.npz) checked against their manifest;
`check_results` -> ResultsCheck, whose `lines` are what the command prints.

A damaged record is only named here: `bench run` moves it aside and retrains
it, `bench report` skips it. A damaged evaluation file leaves its record
intact and usable; only that set is not read.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tabulate import tabulate

from bench.core import evalfiles, store
from bench.core.evalfiles import MANIFEST, file_name


@dataclass(frozen=True)
class ResultsCheck:
    """What `bench check` found under one results root."""

    root: Path
    records: int  # record folders found, damaged or not
    damaged: list  # (record label, reason)
    eval_files: list  # (record label, damaged evaluation file, reason)

    @property
    def bad(self) -> bool:
        return bool(self.damaged or self.eval_files)

    def lines(self) -> list[str]:
        """The command's output, one print each: the damaged records' table, the
        count, then the damaged evaluation files' table and what that means."""
        out = []
        if self.damaged:
            out.append(tabulate(self.damaged, headers=["damaged record", "reason"],
                                tablefmt="github"))
        out.append(f"{self.records} record(s) under {self.root}: "
                   f"{self.records - len(self.damaged)} intact, {len(self.damaged)} damaged"
                   + ("; `bench run` with the same options moves them aside and retrains them"
                      if self.damaged else ""))
        if self.eval_files:
            out.append(tabulate(self.eval_files,
                                headers=["record", "damaged evaluation file", "reason"],
                                tablefmt="github"))
            out.append(f"{len(self.eval_files)} damaged evaluation file(s): their sets are not "
                       "read; `bench eval` with the same --eval evaluates them again from kept "
                       "weights")
        return out


def check_results(results) -> ResultsCheck:
    """Verify every record under `results` (a one-line error unless it is a
    folder of run records) and every record's evaluation files."""
    root = store.require_results_dir(results)
    keys = store.iter_seed_dirs(root)
    damaged = [(k.label, reason) for k in keys
               if (reason := store.verify(k.path(root))) is not None]
    return ResultsCheck(root, len(keys), damaged, eval_damage(root, keys))


def eval_damage(root, keys) -> list:
    """(record label, file, reason) of each evaluation file (evals.json,
    eval-<set>.npz) that does not match its record's manifest."""
    return [(k.label, what if what == MANIFEST else file_name(what), why) for k in keys
            if (k.path(root) / MANIFEST).exists()
            for what, why in evalfiles.check(k.path(root))]
