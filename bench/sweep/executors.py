"""Where the runs of a sweep execute: `local` (a joblib pool, one process per
run, or per fused group with --fuse seeds|methods, pinned to a GPU slot) or
`slurm` (submitit job arrays).

An executor is `fn(specs, opts, on_outcome)` (`opts` an ExecutorOptions,
bench.sweep.executor_options): it trains every spec and calls
`on_outcome(outcome_dict)` as each run ends (status done | skipped | busy |
failed). Run failures never raise; only a broken executor does.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import multiprocessing
import os
import queue
import signal
import threading
import time
import uuid

import torch
from joblib import Parallel, delayed

from bench.core import store
from bench.core.errors import BenchError, disk_full_message, is_disk_full
from bench.core.outcomes import Outcome
from bench.core.registry import Registry
from bench.sweep import runstate, slurm
from bench.sweep.executor_options import ExecutorOptions
from bench.sweep.fusecap import group_limit
from bench.sweep.slurm import check_cluster, resources
from bench.sweep.worker import child_main, execute, execute_group
from bench.train.groups import FUSE_MODES, fuse_groups

EXECUTORS = Registry("executor")
LOCAL, INLINE = "local", "inline"


def check_options(opts) -> None:
    """Every executor option, one BenchError line each (`opts`: ExecutorOptions
    or any object with its fields, such as RunOptions)."""
    opts = ExecutorOptions.of(opts)
    EXECUTORS.get(opts.executor)
    _check_jobs(opts)
    for name in ("jobs_per_gpu", "time", "array_parallelism", "cpus_per_job"):
        value = getattr(opts, name)
        if value is not None and value < 1:
            raise BenchError(f"--{name.replace('_', '-')} {value}: must be at least 1")
    _check_fuse(opts)
    check_cluster(opts)
    if opts.gpus_per_job is not None and opts.gpus_per_job < 0:
        raise BenchError(f"--gpus-per-job {opts.gpus_per_job}: must be 0 or more")
    if opts.executor == "slurm":
        resources(opts)  # GPUs and CPUs against the partition, before anything is written


def _check_jobs(opts: ExecutorOptions) -> None:
    """--jobs N runs N at once; 0 means this process (the inline executor)."""
    if opts.jobs is None:
        return
    if opts.jobs < 0:
        raise BenchError(f"--jobs {opts.jobs}: must be at least 1, or 0 (one run after "
                         "another in this process, as --executor inline)")
    if opts.jobs == 0 and opts.executor not in (LOCAL, INLINE):
        raise BenchError(f"--jobs 0 runs in this process; it does not combine with "
                         f"--executor {opts.executor} (drop one of them)")


def executor_name(opts) -> str:
    """The executor that runs `opts`: --jobs 0 is the inline one."""
    opts = ExecutorOptions.of(opts)
    return INLINE if opts.jobs == 0 else opts.executor


def _check_fuse(opts: ExecutorOptions) -> None:
    mode, cap = opts.fuse, opts.fuse_max
    if mode is not None:
        FUSE_MODES.get(mode)  # one line listing the allowed values
        if opts.executor not in (LOCAL, INLINE):
            raise BenchError(f"--fuse {mode} with --executor {opts.executor}: fusing runs on "
                             "the local executor only (or inline); drop --fuse or use --executor "
                             "local")
    if cap is not None:
        if cap < 1:
            raise BenchError(f"--fuse-max {cap}: must be at least 1")
        if mode is None:
            modes = " or --fuse ".join(FUSE_MODES.names())
            raise BenchError(f"--fuse-max {cap}: only cuts fused groups; add --fuse {modes}")


# ------------------------------------------------------------------ local --
def visible_gpus(device: str | None) -> list[str]:
    """GPU ids this sweep may use: --device cuda:N pins one, --device cpu none,
    else CUDA_VISIBLE_DEVICES (ids or UUIDs) or every GPU torch sees."""
    if device == "cpu":
        return []
    if device and device.startswith("cuda:"):
        return [device.split(":", 1)[1]]
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip() and g.strip() != "-1"]
    return [str(i) for i in range(torch.cuda.device_count())]


def local_slots(gpus: list[str], jobs: int | None, jobs_per_gpu: int) -> list[str | None]:
    """One slot per concurrent run: a GPU id (repeated jobs_per_gpu times) or None (CPU)."""
    if not gpus:
        return [None] * (jobs or 1)
    slots = [g for _ in range(jobs_per_gpu) for g in gpus]  # spread before sharing
    return slots[:jobs] if jobs else slots


@EXECUTORS.register(INLINE, "this process, one run (or fused group) after another, so "
                    "breakpoint() and a debugger reach a plugin's code; also --jobs 0")
def run_inline(specs, opts: ExecutorOptions, on_outcome) -> None:
    """The pool's work without its processes: the same worker code, so the same
    records and hashes, and the same torch thread count as the pool's one slot
    (CPU sums depend on it). No output is redirected: a debugger has the terminal."""
    fuse = opts.fuse
    limit = group_limit(opts.fuse_max, visible_gpus(opts.device)) if fuse else None
    units = fuse_groups(specs, fuse, limit) if fuse else [[s] for s in specs]
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, os.cpu_count() or 1))  # as run_local's one slot
    try:
        for unit in units:
            for outcome in execute_group(unit) if fuse else [execute(unit[0])]:
                on_outcome(outcome)
    finally:
        torch.set_num_threads(before)


@EXECUTORS.register(LOCAL, "joblib pool on this machine, one process per run, pinned per GPU")
def run_local(specs, opts: ExecutorOptions, on_outcome) -> None:
    gpus = visible_gpus(opts.device)
    slots = local_slots(gpus, opts.jobs, opts.jobs_per_gpu)
    free: "queue.Queue[str | None]" = queue.Queue()
    for slot in slots:
        free.put(slot)
    threads = max(1, (os.cpu_count() or 1) // len(slots))  # cores shared out between slots

    fuse = opts.fuse
    units = fuse_groups(specs, fuse, group_limit(opts.fuse_max, gpus, opts.jobs_per_gpu)) \
        if fuse else [[s] for s in specs]

    def one(unit):
        if _STOP.is_set():
            return []
        slot = free.get()  # a thread only starts when a slot is free, so this never waits
        try:
            return _spawn_group(unit, slot, threads) if fuse else _spawn(unit[0], slot, threads)
        finally:
            free.put(slot)

    # Threads only wait on child processes; the processes do the work.
    pool = Parallel(n_jobs=len(slots), backend="threading", return_as="generator_unordered")
    _STOP.clear()
    try:
        with _interrupt_stops_children():
            for outcomes in pool(delayed(one)(unit) for unit in units):
                for outcome in outcomes:
                    on_outcome(outcome)
    except KeyboardInterrupt:
        stop_children()  # Ctrl-C: end the running seeds now, not when they finish
        raise


@contextlib.contextmanager
def _interrupt_stops_children():
    """Ctrl-C terminates the running children at once, wherever the main thread
    is: raised inside joblib's generator, KeyboardInterrupt was caught there
    and the pool waited for its running seeds to finish first (seen: 21 s)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum, frame):
        stop_children()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None
                      else signal.default_int_handler)


# Ctrl-C: no new run starts once _STOP is set; the running ones are terminated.
_STOP = threading.Event()
_LIVE: set = set()  # processes running a seed (or fused group) now
# re-entrant: the Ctrl-C handler may run on a thread that holds it (one slot)
_LIVE_LOCK = threading.RLock()


def stop_children(grace: float = 5.0) -> None:
    """SIGTERM every running child (it unwinds and runs its exit handlers:
    worker.child_main), then SIGKILL any still alive after `grace` seconds
    (stuck in native code), so Ctrl-C never waits for a run to finish."""
    with _LIVE_LOCK:
        _STOP.set()
        live = list(_LIVE)
    for proc in live:
        proc.terminate()
    deadline = time.monotonic() + grace  # one grace for all, not one per child
    for proc in live:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.exitcode is None:
            proc.kill()
            proc.join()


_CONTEXT = None
# Imported once by the fork server, so a run's process starts in milliseconds
# instead of re-importing torch; CUDA is never initialised there.
PRELOAD = ["bench.sweep.worker", "bench.train.experiment", "bench.methods", "bench.datasets",
           "sklearn.model_selection", "sklearn.datasets"]


def _context():
    global _CONTEXT
    if _CONTEXT is None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        _CONTEXT = ctx
    return _CONTEXT


def _pin(specs, slot: str | None):
    """On a GPU slot the run sees exactly one GPU (CUDA_VISIBLE_DEVICES), as cuda:0."""
    if slot is not None and specs[0].device and specs[0].device.startswith("cuda"):
        return [_with_device(s, "cuda") for s in specs]
    return specs


def _launch(payload: str, first, name: str, slot: str | None, threads: int):
    """Run worker.child_main(payload) in its own process; -> (report or None, process)."""
    report = runstate.side_file(first.record, f"outcome-{uuid.uuid4().hex[:8]}.json")
    log = runstate.log_path(first.record)
    log.parent.mkdir(parents=True, exist_ok=True)
    proc = _context().Process(target=child_main, name=name, daemon=False,
                              args=(payload, str(report), str(log), slot, threads,
                                    (os.getpid(), runstate.proc_start(os.getpid()))))
    with _LIVE_LOCK:
        if _STOP.is_set():
            return None, None
        proc.start()
        _LIVE.add(proc)
    try:
        proc.join()
        outcome = runstate.read_json(report)
    except KeyboardInterrupt:
        stop_children()  # Ctrl-C reached the thread waiting here (the main one with one slot)
        raise
    finally:
        with _LIVE_LOCK:
            _LIVE.discard(proc)
        report.unlink(missing_ok=True)  # never left behind, Ctrl-C included
    return outcome, proc


def _spawn(spec, slot: str | None, threads: int) -> list[dict]:
    """[outcome] of one run in its own process ([] if Ctrl-C came before it started)."""
    (spec,) = _pin([spec], slot)
    t0 = time.time()
    outcome, proc = _launch(spec.to_json(), spec, f"bench {spec.label}", slot, threads)
    if proc is None:
        return []
    if outcome is None:
        outcome = ended_unreported(spec, _exit_reason(proc.exitcode), proc.pid, t0)
    return [{**outcome, "slot": slot}]


def _spawn_group(specs, slot: str | None, threads: int) -> list[dict]:
    """One process trains the runs of `specs` at once (worker.execute_group).
    If it dies without reporting, each run it left unfinished is failed."""
    specs = _pin(specs, slot)
    t0 = time.time()
    outcomes, proc = _launch(json.dumps([s.to_json() for s in specs]), specs[0],
                             f"bench {specs[0].label} fused x{len(specs)}", slot, threads)
    if proc is None:
        return []
    if outcomes is None:
        reason = _exit_reason(proc.exitcode)
        outcomes = [ended_unreported(s, reason, proc.pid, t0) for s in specs]
    return [{**o, "slot": slot} for o in outcomes]


def _with_device(spec, device):
    return dataclasses.replace(spec, device=device)


def _exit_reason(rc: int) -> str:
    if _STOP.is_set():
        return "interrupted (Ctrl-C); rerun to train it"
    if rc - 128 in (signal.SIGINT, signal.SIGTERM):  # worker.child_main's exit on them
        return f"process stopped by {signal.Signals(rc - 128).name}"
    if rc < 0:
        name = signal.Signals(-rc).name
        why = " (out-of-memory killer or a user)" if name == "SIGKILL" else ""
        return f"process killed by {name}{why}"
    return f"process exited with code {rc} before reporting (see the run's log)"


def ended_unreported(spec, reason: str, pid: int, started: float) -> dict:
    """The outcome of a run whose process ended without reporting: done if
    that process wrote its complete record (stopped between saving it and
    reporting, e.g. Ctrl-C), else died; an older record that a --force run was
    replacing does not count."""
    if store.written_since(spec.record, started):
        runstate.drop_lock_of(spec.record, pid=pid)
        return Outcome.of(spec, "done", pid=pid).to_dict()
    return died(spec, reason, pid=pid)


def died(spec, reason: str, pid=None, job=None) -> dict:
    """Record a run whose process ended without reporting (killed, crashed)."""
    progress = runstate.read_progress(spec.record) or {}
    last = progress.get("step", 0)
    try:
        runstate.write_failure(spec.record, reason, last,
                               log=str(runstate.log_path(spec.record)), pid=pid)
        runstate.append_log(spec.record, f"FAILED after step {last}: {reason}")
    except OSError as err:  # a full disk: the summary says so, in one line
        if not is_disk_full(err):
            raise
        reason = disk_full_message(err)
    runstate.drop_lock_of(spec.record, pid=pid, job=job)  # stale now; a rerun needs no wait
    return Outcome.of(spec, "failed", reason=reason, last_step=last, pid=pid,
                      log=str(runstate.log_path(spec.record))).to_dict()


# ------------------------------------------------------------------ slurm --
@EXECUTORS.register("slurm", "SLURM job arrays through submitit (--submitit-cluster local to test)")
def run_slurm(specs, opts: ExecutorOptions, on_outcome) -> None:
    """One job array for the runs (bench.sweep.slurm fits it to the partition);
    each task's outcome as it ends, a task lost without a result as failed."""
    try:
        # optional package: the import is the check
        import submitit
    except ImportError:
        raise BenchError("--executor slurm needs submitit: pip install submitit") from None

    todo = []
    for spec in specs:  # runs held by live jobs (an earlier, interrupted sweep) stay theirs
        holder = runstate.live_holder(spec.record)
        if holder:
            on_outcome(Outcome.of(spec, "busy", reason=f"being trained by {holder}").to_dict())
        else:
            todo.append(spec)
    if not todo:
        return
    specs = todo
    jobs = slurm.submit(specs, opts)
    by_job = {job.job_id: spec for job, spec in zip(jobs, specs)}

    def report(job, lost_state=None) -> None:
        spec = by_job[job.job_id]
        if lost_state is not None:
            limit = f" (time limit --time {opts.time})" if lost_state == "TIMEOUT" else ""
            outcome = died(spec, f"SLURM job {job.job_id} ended {lost_state}{limit} without "
                                 "a result; rerun to resume it", job=job.job_id)
        else:
            try:
                outcome = job.result()
            except Exception as err:  # noqa: BLE001 - job killed, timed out, node lost
                outcome = died(spec, slurm.job_failure(err, job, opts), job=job.job_id)
        on_outcome({**outcome, "job_id": job.job_id})

    if opts.submitit_cluster == "slurm":
        slurm.wait(jobs, report)  # squeue: works without an accounting database
    else:
        # a result file checked each second (submitit's default: every 10 s)
        for job in submitit.helpers.as_completed(jobs, poll_frequency=1):
            report(job)
