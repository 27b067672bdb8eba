"""How a run failed, typed: the report's `Failure`, with a closed set of kinds.

A failure becomes a failed_runs.csv row and a line of the report; `to_row`
is the one place that builds that row, whichever finder found the failure
(the sweep's failure files, damaged records, runs that stopped unannounced).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from bench.core.errors import BenchError

# failed: the sweep's failure file; not-done: a metrics.json not marked done;
# damaged: a record whose files fail their checksums; incomplete: a seed folder
# without metrics.json; interrupted: a lock or progress file left behind
FailureKind = Literal["failed", "not-done", "damaged", "incomplete", "interrupted"]
FAILURE_KINDS: tuple[str, ...] = get_args(FailureKind)


def _check(value: str, allowed: tuple, what: str) -> None:
    if value not in allowed:
        raise BenchError(f"{what} {value!r}: not one of {', '.join(allowed)}")


# failed_runs.csv's columns, in its order
FAILURE_COLUMNS = ("dataset", "backbone", "method", "seed", "reason", "last_step", "path",
                   "config_hash")


@dataclass(frozen=True)
class Failure:
    """A failed or unfinished run, as bench report lists it. `seed` and
    `last_step` are as found (a failure file may hold text)."""

    kind: FailureKind
    dataset: str
    backbone: str
    method: str
    config_hash: str
    seed: object
    reason: str
    path: str
    last_step: object = ""

    def __post_init__(self):
        _check(self.kind, FAILURE_KINDS, "failure kind")

    def to_row(self) -> dict:
        """The failed_runs.csv row (and what the report's text lists)."""
        return {k: getattr(self, k) for k in FAILURE_COLUMNS}
