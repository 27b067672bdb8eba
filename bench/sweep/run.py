"""Run a grid through an executor: skip finished runs, one progress bar for the
sweep, the --eval sets before and after, TensorBoard files, and a closing
summary (done / skipped / busy / failed) with every failure's reason, last
step and log file."""
from __future__ import annotations

from tabulate import tabulate
from tqdm import tqdm

from bench.core import store
from bench.core.errors import says_disk_full
from bench.core.outcomes import FINAL, Outcome
from bench.core.statefile import damage
from bench.sweep import evals
from bench.sweep.executor_options import ExecutorOptions
from bench.sweep.executors import EXECUTORS, executor_name
from bench.sweep.tensorboard import write_events
from bench.train.resume import set_aside


def run_sweep(specs, opts, progress: bool = True) -> list[dict]:
    """Train what is missing; one outcome per spec, in completion order. With
    --eval every set is built or read once before any run trains, and the
    complete records' missing sets are evaluated after; with --tensorboard
    event files are written beside every finished record."""
    if opts.evals:  # a set that cannot be built stops the sweep before any run trains
        evals.prepare(specs, progress)
    outcomes, todo = _skip_complete(specs)
    bar = SweepBar(len(specs), outcomes, progress)
    try:
        EXECUTORS.get(executor_name(opts))(todo, ExecutorOptions.of(opts), bar.add)
    finally:
        bar.close()
    for line in evals.finish(outcomes, opts, progress):  # complete records: missing sets
        print(line)
    if opts.evals:
        print(evals.stored_line(outcomes, opts))
    if opts.tensorboard:
        _write_events(outcomes)
    return outcomes


def _skip_complete(specs) -> tuple[list[dict], list]:
    """(outcomes of the complete records, the specs left to train); damaged
    records and resume states are set aside first."""
    outcomes, todo = [], []
    for s in specs:  # one look at each record: a run finishing meanwhile is counted once
        set_aside_if_damaged(s)
        set_aside_damaged_state(s)
        if not s.force and store.is_complete(s.record):
            outcomes.append(Outcome.of(s, "skipped").to_dict())
        else:
            todo.append(s)
    return outcomes, todo


class SweepBar:
    """The sweep's one progress bar: its counts after each outcome, and each
    failure's line as it comes. `add` is the executors' on_outcome."""

    def __init__(self, total: int, outcomes: list, progress: bool):
        self.total, self.outcomes = total, outcomes
        self.bar = tqdm(total=total, initial=len(outcomes), desc="sweep", unit="run",
                        disable=not progress, dynamic_ncols=True)
        self.show()

    def show(self) -> None:
        c = count(self.outcomes)
        self.bar.set_postfix_str(f"done {c['done']}, failed {c['failed']}, skipped "
                                 f"{c['skipped']}, busy {c['busy']}, left "
                                 f"{self.total - len(self.outcomes)}", refresh=False)

    def add(self, outcome: dict) -> None:
        self.outcomes.append(outcome)
        self.show()
        self.bar.update()
        if outcome["status"] == "failed":
            self.bar.write(f"FAILED {outcome['label']}: {outcome['reason']} "
                           f"(last step {outcome.get('last_step')}; log {outcome.get('log')})")

    def close(self) -> None:
        self.bar.close()


def _write_events(outcomes: list) -> None:
    for o in outcomes:
        if o["status"] in ("done", "skipped"):
            write_events(o["record"])


def set_aside_if_damaged(spec) -> bool:
    """Move a damaged record (missing, unreadable or altered files) aside so its
    seed is retrained; the damaged copy is kept beside it, never deleted."""
    if not spec.record.exists():
        return False
    reason = store.verify(spec.record)
    if reason is None:
        return False
    moved = store.move_aside(spec.record)
    print(f"DAMAGED {spec.label}: {reason}; moved to {moved.name}, retraining", flush=True)
    return True


def set_aside_damaged_state(spec) -> bool:
    """A killed run's resume state that is not a whole state file (its header
    and size, bench.core.statefile.damage) is set aside here and said on the
    terminal; the run then trains from step 0. (What only reading it whole
    finds, a state saved for another run, its worker says in the run's log.)"""
    state = store.state_path(spec.record)
    if spec.force or store.is_complete(spec.record) or not state.exists():
        return False
    why = damage(state)
    if why is None:
        return False
    aside = set_aside(state)
    print(f"DAMAGED STATE {spec.label}: resume state {state.name} ({why}); set aside as "
          f"{aside.name}, training from step 0", flush=True)
    return True


def count(outcomes) -> dict:
    counts = dict.fromkeys(FINAL, 0)
    for o in outcomes:
        counts[Outcome.from_dict(o).status] += 1  # a status outside the set fails here
    return counts


def summary_text(outcomes) -> str:
    c = count(outcomes)
    lines = []
    bad = [o for o in outcomes if o["status"] in ("failed", "busy")]
    if bad:
        rows = [[o["label"], o["status"], o.get("reason", ""), o.get("last_step", ""),
                 o.get("log", "")] for o in bad]
        lines.append(tabulate(rows, headers=["run", "status", "reason", "last step", "log"],
                              tablefmt="github"))
    busy = f", {c['busy']} busy (held by another live sweep)" if c["busy"] else ""
    lines.append(f"{c['done']} trained, {c['skipped']} already done, {c['failed']} failed{busy}")
    return "\n".join(lines)


def exit_code(outcomes) -> int:
    """2 if a run failed on a full disk (as every command ends on one), else 1
    if any run failed, else 0; runs held by another live sweep are not failures."""
    failed = [o for o in outcomes if o["status"] == "failed"]
    if any(says_disk_full(o.get("reason", "")) for o in failed):
        return 2
    return 1 if failed else 0
