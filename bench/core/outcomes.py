"""How a run ended, typed: the sweep's `Outcome` and the report's `Failure`,
each with a closed set of statuses.

An outcome crosses processes as JSON (a worker's report file, a SLURM job's
result) and a failure becomes a failed_runs.csv row, so each has the one
place that builds that dict (`Outcome.to_dict`, `Failure.to_row`);
`Outcome.from_dict` reads one back and checks its status.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal, get_args

from bench.core.errors import BenchError

# done: trained now; skipped: its record was already complete; failed: it raised
# or its process died; busy: another live process trains it; running: locked by
# this process, not ended yet (never what a sweep counts)
Status = Literal["done", "skipped", "failed", "busy", "running"]
STATUSES: tuple[str, ...] = get_args(Status)
FINAL = ("done", "skipped", "busy", "failed")  # the ends a sweep counts

# failed: the sweep's failure file; not-done: a metrics.json not marked done;
# damaged: a record whose files fail their checksums; incomplete: a seed folder
# without metrics.json; interrupted: a lock or progress file left behind
FailureKind = Literal["failed", "not-done", "damaged", "incomplete", "interrupted"]
FAILURE_KINDS: tuple[str, ...] = get_args(FailureKind)


def _check(value: str, allowed: tuple, what: str) -> None:
    if value not in allowed:
        raise BenchError(f"{what} {value!r}: not one of {', '.join(allowed)}")


@dataclass(frozen=True)
class Outcome:
    """One run's end as the sweep reports it. `reason` is kept for a failed or
    busy run, `last_step` for a failed one; `info` is what the worker and the
    executor add (pid, host, start/end times, steps, log, slot, SLURM job)."""

    label: str
    record: str
    status: Status
    reason: str = ""
    last_step: object = None
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        _check(self.status, STATUSES, "run status")

    @classmethod
    def of(cls, spec, status: Status, **more) -> "Outcome":
        """The outcome of a RunSpec; `more` fills reason, last_step and info."""
        return cls(spec.label, str(spec.record), status).but(**more)

    def but(self, **changes) -> "Outcome":
        """A copy with fields changed; names that are not fields go into info."""
        names = {f.name for f in dataclasses.fields(self)} - {"info"}
        info = {k: v for k, v in changes.items() if k not in names}
        return dataclasses.replace(self, info={**self.info, **info},
                                   **{k: v for k, v in changes.items() if k in names})

    def to_dict(self) -> dict:
        d = {"label": self.label, "record": self.record, **self.info, "status": self.status}
        if self.status in ("failed", "busy"):
            d["reason"] = self.reason
        if self.status == "failed":
            d["last_step"] = self.last_step
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Outcome":
        return cls(d["label"], d["record"], d["status"]).but(
            **{k: v for k, v in d.items() if k not in ("label", "record", "status")})


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
