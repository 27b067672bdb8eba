"""Train one RunSpec in this process and say what happened, never raising for
the run's own failure: the sweep goes on and the failure is written down.

Used in-process by SLURM jobs (submitit), and through `child_main` by the
local executor, which gives every run a process of its own (pinned GPU,
memory freed at exit, a SIGKILL hits one run) or, with --fuse seeds|methods,
every fused group (`execute_group`).
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import threading
import time
import traceback

import torch
from tqdm import tqdm

from bench import methods  # create_method looked up at call time (tests swap it)
from bench.core import files, plugins, store
from bench.core.device import default_device
from bench.core.errors import BenchError, disk_full_message, is_disk_full
from bench.core.outcomes import Outcome
from bench.core.record import Record
from bench.core.schedule import steps_per_epoch
from bench.sweep import runstate
from bench.sweep.evals import worker_sets
from bench.sweep.grid import RunSpec, experiment_for
from bench.train import experiment  # run_seed looked up at call time (tests swap it)
from bench.train.groups import connections_note, member_name, run_members
from bench.train.loop import NonFiniteLoss
from bench.train.resume import say_to

HEARTBEAT_SECONDS = 1.0  # progress file (last step) at most this often
LOG_SECONDS = 30.0  # a "step i/n loss" line in the run's log at most this often


class RunLog:
    """log(text) appends timestamped lines to the run's own log file (.path)."""

    def __init__(self, record):
        self.record, self.path = record, runstate.log_path(record)

    def __call__(self, text: str) -> None:
        runstate.append_log(self.record, text)


class Heartbeat:
    """The trainer's on_step hook (bench.train.loop.run_loop) for one run or a
    fused group: counts steps, writes every record's progress file at most
    every HEARTBEAT_SECONDS and a "step i/n loss" log line at most every
    LOG_SECONDS, so a failed or killed run can say how far it got."""

    def __init__(self, records: list, total: int, logs: list, clock=time.monotonic):
        self._records, self._total, self._logs, self._clock = records, total, logs, clock
        # None: no beat yet, so the first step writes at once whatever the
        # clock reads (time.monotonic starts near 0 at boot)
        self.step, self._beat, self._said = 0, None, clock()

    def __call__(self, step: int, loss) -> None:
        self.step = step
        now = self._clock()
        if self._beat is None or now - self._beat >= HEARTBEAT_SECONDS:
            self._beat = now
            for record in self._records:
                runstate.write_progress(record, step, self._total)
        if now - self._said >= LOG_SECONDS:  # .tolist() syncs the GPU: only this often
            self._said = now
            # one per fused member, in order; a streams group passes one tensor per
            # member (each on its own stream: a log line may read the step before)
            parts = loss if isinstance(loss, (list, tuple)) else [loss]
            values = [v for part in parts for v in part.detach().reshape(-1).tolist()]
            for log, value in zip(self._logs, values):
                log(f"step {step}/{self._total} loss {value:.4f}")


def execute(spec: RunSpec) -> dict:
    """Train `spec` unless done or held by a live process; returns an outcome dict."""
    t0 = time.time()
    try:
        outs, held = _claim([spec], t0)
    except OSError as err:  # a full disk: even the lock cannot be written
        return Outcome.of(spec, "failed", reason=classify(err, spec), last_step=None, start=t0,
                          end=time.time(), log=str(runstate.log_path(spec.record))).to_dict()
    out = outs[spec.label]
    if not held:  # skipped or busy
        return out.but(end=time.time()).to_dict()
    log, ctx = RunLog(spec.record), {}
    try:
        log(f"start {spec.label} pid {os.getpid()} on {out.info['host']}, "
            f"CUDA_VISIBLE_DEVICES={out.info['cuda_visible_devices']}")
        result = _train(spec, log, ctx)
        _mark_done(spec, log, f"done in {time.time() - t0:.1f} s: {result}")
        return out.but(status="done", end=time.time(), steps=ctx["counter"].step).to_dict()
    except Exception as err:  # noqa: BLE001 - every failure is recorded, then the sweep goes on
        reason, last = classify(err, spec), _last_step(err, ctx.get("counter"))
        _mark_failed(spec, log, reason, last)
        return out.but(status="failed", reason=reason, last_step=last,
                       end=time.time()).to_dict()
    finally:
        runstate.release(spec.record)


def _mark_done(spec: RunSpec, log: "RunLog", message: str) -> None:
    """A complete record: an earlier attempt's failure and step are obsolete."""
    runstate.clear_failure(spec.record)
    runstate.clear_progress(spec.record)
    _best_effort(log, message)


def _best_effort(write, *args, **kwargs) -> None:
    """A log line or failure file that cannot be written (a full disk) must
    not hide the outcome: the sweep's summary still says what happened."""
    try:
        write(*args, **kwargs)
    except OSError:
        pass


def _mark_failed(spec: RunSpec, log: "RunLog", reason: str, last) -> None:
    """The run's log gets the traceback; failed.json the one-line reason."""
    _best_effort(log, f"FAILED at step {last}: {reason}\n{traceback.format_exc()}")
    _best_effort(runstate.write_failure, spec.record, reason, last, log=str(log.path),
                 pid=os.getpid())


def _prepare(spec: RunSpec):
    """Rebuild a spec's method, experiment and data in this process, checking
    the hash still matches the sweep's; -> (method, exp, bundle, device, steps)."""
    # this process (a fork of the pool's server, a SLURM task) resolves the
    # names itself: the sweep's plugins first, and any entry point
    plugins.load_carried(spec.plugins)
    method = methods.create_method(spec.method, dict(spec.method_overrides))
    exp, bundle = experiment_for(spec, method)
    if exp.chash != spec.chash:
        raise BenchError(f"config hash {exp.chash} differs from the sweep's {spec.chash} "
                         f"(dataset files or code changed since the grid was built)")
    device = spec.device or default_device()
    cfg = exp.train
    total = steps_per_epoch(len(bundle.train), cfg.batch_size, cfg.drop_last) * cfg.epochs
    return method, exp, bundle, device, total


def _train(spec: RunSpec, log: RunLog, ctx: dict) -> str:
    method, exp, bundle, device, total = _prepare(spec)
    sets = worker_sets(spec, exp, bundle)  # read before training: a bad set fails at step 0
    log(f"device {device}, {total} steps, batch size {exp.train.batch_size}")
    beat = ctx["counter"] = Heartbeat([spec.record], total, [log])
    with say_to(log):  # "resuming ..." only once a saved state has loaded, or why not
        _, path = experiment.run_seed(exp, bundle, method, spec.seed, spec.results,
                                      device=device, force=True, progress=False, on_step=beat,
                                      keep_weights=spec.keep_weights, evals=sets)
    test = Record(path).stored("test")
    return f"test acc {test['acc']:.4f} ece {test['ece']:.4f} nll {test['nll']:.4f}"


def execute_group(specs: list[RunSpec]) -> list[dict]:
    """`execute` for a fused group (seeds of one config, or runs of several
    methods sharing an architecture; bench.train.groups), trained at once: the
    same outcome per run, in order. Finished runs are skipped and runs locked
    by a live process are busy; the rest are locked, trained together, and
    all fail with one reason if the group fails."""
    t0 = time.time()
    outs, held = _claim(specs, t0)
    logs = [RunLog(s.record) for s in held]
    ctx: dict = {}
    try:
        if held:
            result = _train_group(held, logs, ctx)
            for spec, log in zip(held, logs):
                _mark_done(spec, log, f"done in {time.time() - t0:.1f} s (fused): {result}")
                outs[spec.label] = outs[spec.label].but(status="done", steps=_steps(ctx))
    except Exception as err:  # noqa: BLE001 - every member's failure is recorded
        reason = classify(err, held[0])
        last = _last_step(err, ctx.get("counter")) or _steps(ctx)
        for spec, log in zip(held, logs):
            if store.written_since(spec.record, t0):  # saved before a later member's save failed
                _mark_done(spec, log, f"done in {time.time() - t0:.1f} s (fused; the group "
                           f"then failed: {reason})")
                outs[spec.label] = outs[spec.label].but(status="done", steps=_steps(ctx))
                continue
            _mark_failed(spec, log, reason, last)
            outs[spec.label] = outs[spec.label].but(status="failed", reason=reason,
                                                    last_step=last)
    finally:
        for spec in held:
            runstate.release(spec.record)
    end = time.time()
    return [outs[s.label].but(end=end).to_dict() for s in specs]


def _steps(ctx: dict) -> int:
    return ctx["counter"].step if "counter" in ctx else 0


def _claim(specs: list[RunSpec], t0: float) -> tuple[dict[str, Outcome], list[RunSpec]]:
    """Lock every unfinished run: (label -> outcome so far, runs now held).
    A run finished meanwhile is skipped; one held by a live process is busy."""
    outs, held, host = {}, [], socket.gethostname()
    for spec in specs:
        out = outs[spec.label] = Outcome.of(
            spec, "skipped", pid=os.getpid(), host=host, start=t0,
            log=str(runstate.log_path(spec.record)),
            cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"))
        if store.is_complete(spec.record) and not spec.force:
            continue
        holder = runstate.acquire(spec.record)
        if holder:
            outs[spec.label] = out.but(status="busy", reason=f"being trained by {holder}")
        elif store.is_complete(spec.record) and not spec.force:
            runstate.release(spec.record)  # finished while we waited
        else:
            outs[spec.label] = out.but(status="running")
            held.append(spec)
            runstate.clear_progress(spec.record)  # a killed attempt's step is stale
    return outs, held


def _train_group(specs: list[RunSpec], logs: list, ctx: dict) -> str:
    # Each member's own method, experiment and hash check. Members share the
    # data inputs (fusegroups keys), so grid.bundle_for's cache loads it once;
    # run_members checks the data identities (check_lockstep) before training.
    prepared = [_prepare(spec) for spec in specs]
    _, exp, bundle, device, total = prepared[0]
    # members share data and sizes (fusegroups keys), so one load of each set serves all
    sets = worker_sets(specs[0], exp, bundle)
    members = [(p[1], p[0], spec.seed) for p, spec in zip(prepared, specs)]
    names = ", ".join(member_name(e, s) for e, _, s in members)
    for log, spec in zip(logs, specs):
        log(f"start {spec.label} pid {os.getpid()} fused with [{names}], device {device}, "
            f"{total} steps, batch size {exp.train.batch_size}")
    note = connections_note(exp.train, device)
    for log in logs if note else ():
        log(note)
    beat = ctx["counter"] = Heartbeat([spec.record for spec in specs], total, logs)
    with say_to(lambda text: [log(text) for log in logs]):
        done = run_members(members, bundle, specs[0].results, device=device, force=True,
                           progress=False, on_step=beat, keep_weights=specs[0].keep_weights,
                           evals=sets)
    tests = [Record(path).stored("test") for _, path in done]
    return "test acc " + " ".join(f"{t['acc']:.4f}" for t in tests)


def classify(err: BaseException, spec: RunSpec) -> str:
    """One line saying why a run failed. Out-of-memory never shrinks the batch."""
    first = (str(err).strip().splitlines() or [""])[0]
    if isinstance(err, NonFiniteLoss):
        return first if first.startswith("non-finite loss") else f"non-finite loss: {first}"
    if _is_oom(err):
        return (f"out of GPU memory at batch size {spec.train.batch_size} (never reduced: "
                f"use a larger GPU, a smaller image size or --jobs-per-gpu 1): {first[:120]}")
    if isinstance(err, BenchError):
        return first
    if is_disk_full(err):
        return disk_full_message(err)
    return f"{type(err).__name__}: {first}"


def _is_oom(err: BaseException) -> bool:
    oom = getattr(torch.cuda, "OutOfMemoryError", ())
    return isinstance(err, oom) or (isinstance(err, RuntimeError)
                                    and "out of memory" in str(err).lower())


def _last_step(err: BaseException, counter) -> int | None:
    """The trainer names the step of a non-finite loss; otherwise our count."""
    hit = re.search(r"\bstep (\d+)", str(err)) if isinstance(err, NonFiniteLoss) else None
    if hit:
        return int(hit.group(1))
    return counter.step if counter is not None else None


def _die_with_sweep(pid: int, start: str | None, every: float = 0.5) -> None:
    """SIGKILL this run as soon as the sweep that started it is gone, so a killed
    sweep leaves no orphan training (its lock goes stale and a rerun takes over).
    A watcher thread, because our parent is the fork server, which outlives the
    sweep while any of its children do (PR_SET_PDEATHSIG would never fire)."""
    def watch():
        while runstate.pid_alive(pid, start):
            time.sleep(every)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="watch-sweep", daemon=True).start()


def _stop_on_signal() -> None:
    """SIGINT (the terminal's Ctrl-C reaches every process of its group) or
    SIGTERM (bench.sweep.executors.stop_children) unwinds the run like an
    exception, so its exit handlers still run (lock released, multiprocessing
    finalizers); the process exits 128 + the signal. Further signals are
    ignored while it unwinds: the sweep's SIGTERM right after the terminal's
    SIGINT once cut a run short before its finalizers ran (the sweep
    SIGKILLs a run that has not ended after a grace period)."""
    def handler(signum, frame):
        for sig in (signal.SIGINT, signal.SIGTERM):
            # a no-op, not SIG_IGN: a signal already pending when this ran
            # would then raise "OSError: Signal 15 ignored due to race
            # condition" in the middle of the unwinding (seen in runs' logs)
            signal.signal(sig, lambda *_: None)
        raise SystemExit(128 + signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)


def child_main(spec_json: str, report: str, log: str, gpu: str | None, threads: int,
               sweep: tuple[int, str | None]) -> None:
    """Entry point of a local run's own process (forked from a server that has
    torch imported but never initialised CUDA, so pinning here still works)."""
    _stop_on_signal()
    _die_with_sweep(*sweep)
    # tqdm's default lock is a multiprocessing RLock: a named semaphore that a
    # forkserver child registers with the sweep's resource tracker, which warned
    # "leaked semaphore objects" whenever a run was killed before its exit
    # handlers ran. This process draws no bars for other processes.
    tqdm.set_lock(threading.RLock())
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)  # library output (warnings, tracebacks) goes to the run's log
    os.dup2(fd, 2)
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu  # read when CUDA initialises: not yet
    # Runs side by side must not oversubscribe the cores: measured on a busy
    # 2-core machine, two runs with 2 torch threads each stepped ~10x slower.
    torch.set_num_threads(threads)
    payload = json.loads(spec_json)
    if isinstance(payload, list):  # a fused group (--fuse seeds|methods)
        outcome = execute_group([RunSpec.from_json(t) for t in payload])
    else:
        outcome = execute(RunSpec.from_json(spec_json))
    try:
        files.write_json(report, outcome, indent=None, sort_keys=False, default=None)
    except OSError:  # a full disk: the sweep reports the run as died, and why
        pass  # (write_json leaves no temporary behind)
