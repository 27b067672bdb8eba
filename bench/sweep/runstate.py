"""Side files of a run that is not (yet) a record: lock, progress, failure, log.

They live next to the seed directories, in <config-hash>/_sweep/, so they
never look like records (`iter_records` wants <hash>/seed<k>/metrics.json)
and are never moved by a record's atomic rename:

    _sweep/seed<k>.lock           pid, host and process start time of the trainer
    _sweep/seed<k>.progress.json  last optimiser step (heartbeat, <= 1 per second)
    _sweep/seed<k>.failed.json    reason and last step of the latest failure
    _sweep/seed<k>.log            one log per run, appended by every attempt

A lock whose process is gone (SIGKILL, reboot) is stale and taken over; on
another host (SLURM) liveness cannot be checked, so a lock is stale there once
its heartbeat is older than STALE_SECONDS.
"""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from bench.core import files
from bench.core.record import read_side
from bench.core.store import side_file  # the side folder's one home (and executors' use)

STALE_SECONDS = float(os.environ.get("BENCH_STALE_LOCK_SECONDS", 30 * 60))
FRESH_EMPTY_SECONDS = 60.0  # a lock still being written is treated as live this long


def lock_path(record) -> Path:
    return side_file(record, "lock")


def log_path(record) -> Path:
    return side_file(record, "log")


def append_log(record, text: str) -> None:
    """Timestamped lines appended to the run's own log file."""
    path = log_path(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    with open(path, "a") as f:
        f.write("".join(f"[{stamp}] {line}\n" for line in text.rstrip().splitlines()))


# ------------------------------------------------------------------- json --
def read_json(path) -> dict | None:
    """A small json side file, or None if missing or half-written."""
    return files.read_json(path, default=None)


# ------------------------------------------------------------------- lock --
def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (Linux only)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def proc_start(pid: int) -> str | None:
    """Kernel start time of `pid` (guards against a recycled pid), Linux only."""
    fields = _proc_stat(pid)
    return fields[19] if fields else None


def pid_alive(pid: int, start: str | None) -> bool:
    if start is not None and Path("/proc/self/stat").exists():
        fields = _proc_stat(pid)  # a zombie (state Z) is dead, only not yet reaped
        return bool(fields) and fields[0] not in ("Z", "X") and fields[19] == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def holder_alive(holder: dict | None, path: Path) -> bool:
    try:
        age = time.time() - path.stat().st_mtime
    except OSError:
        return False
    if not holder:  # being created right now, or garbage left by a crash
        return age < FRESH_EMPTY_SECONDS
    if holder.get("slurm_job") and holder["slurm_job"] == slurm_job_id():
        return False  # our own SLURM task before it was requeued (time limit, preemption)
    if holder.get("host") == socket.gethostname():
        return pid_alive(int(holder["pid"]), holder.get("start"))
    return age < STALE_SECONDS


def describe(holder: dict | None) -> str:
    if not holder:
        return "lock being created"
    job = f", job {holder['slurm_job']}" if holder.get("slurm_job") else ""
    return f"pid {holder.get('pid')} on {holder.get('host')}{job}"


def live_holder(record) -> str | None:
    """Who trains `record` right now, or None."""
    path = lock_path(record)
    if not path.exists():
        return None
    holder = read_json(path)
    return describe(holder) if holder_alive(holder, path) else None


def acquire(record) -> str | None:
    """Take the run's lock for this process: None on success, else who holds it."""
    path = lock_path(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    me = {"pid": os.getpid(), "host": socket.gethostname(), "start": proc_start(os.getpid()),
          "since": time.time(), "slurm_job": slurm_job_id()}
    for _ in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder, seen = _read_lock(path)
            if holder_alive(holder, path):
                return describe(holder)
            _remove_stale(path, seen)
            continue
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(me, f)
        except BaseException:
            path.unlink(missing_ok=True)  # an empty lock would hold the run for a minute
            raise
        return None
    return describe(read_json(path))


def _read_lock(path: Path) -> tuple[dict | None, tuple | None]:
    """(holder, identity) of a lock file, both from one open file: the
    identity (device, inode, ctime) tells this file from a lock created
    after it, even one with the same contents (an empty one)."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            text = f.read()
    except OSError:
        return None, None
    try:
        holder = json.loads(text) if text else None
    except ValueError:  # half-written
        holder = None
    return (holder if isinstance(holder, dict) else None), (st.st_dev, st.st_ino, st.st_ctime_ns)


def _identity(path: Path) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_ctime_ns)


def _remove_stale(path: Path, seen: tuple | None) -> None:
    """Remove a dead holder's lock file `seen` (its identity), unless it was
    replaced meanwhile. Racers that all found the same dead lock take turns
    under a takeover guard (O_EXCL), and each removes the lock only if it is
    still that same file: so a lock one racer took after removing the dead
    one is never removed by another (two runs would train at once)."""
    if seen is None:
        return
    guard = path.with_name(f".{path.name}.takeover")
    deadline = time.monotonic() + 2.0  # a takeover takes microseconds
    while True:
        try:
            os.close(os.open(guard, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            break
        except FileExistsError:
            try:
                # its taker died between two system calls: the guard is garbage
                if time.time() - guard.stat().st_mtime > FRESH_EMPTY_SECONDS:
                    guard.unlink(missing_ok=True)
            except OSError:
                pass
            if time.monotonic() > deadline:
                return
            time.sleep(0.002)
    try:
        if _identity(path) == seen:
            path.unlink(missing_ok=True)
    finally:
        guard.unlink(missing_ok=True)


def slurm_job_id() -> str | None:
    """The id submitit and squeue show: '<array>_<task>' for array tasks."""
    env = os.environ
    if env.get("SLURM_ARRAY_JOB_ID") and env.get("SLURM_ARRAY_TASK_ID"):
        return f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
    return env.get("SLURM_JOB_ID")


def drop_lock_of(record, pid=None, job=None) -> None:
    """Remove the lock left by a process (or SLURM job) known to be dead."""
    path = lock_path(record)
    holder, seen = _read_lock(path)
    if holder and ((pid is not None and holder.get("pid") == pid)
                   or (job is not None and holder.get("slurm_job") == job)):
        _remove_stale(path, seen)  # not a lock another process has taken since


def release(record) -> None:
    path = lock_path(record)
    holder = read_json(path)
    if holder and holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname():
        path.unlink(missing_ok=True)


# -------------------------------------------------------------- progress --
def write_progress(record, step: int, total: int) -> None:
    files.write_json(side_file(record, "progress.json"), {"step": step, "total": total,
                                                          "time": time.time()})
    try:
        os.utime(lock_path(record))  # heartbeat for holders on other hosts
    except OSError:
        pass


def read_progress(record) -> dict | None:
    return read_side(record, "progress.json")


def clear_progress(record) -> None:
    side_file(record, "progress.json").unlink(missing_ok=True)


# --------------------------------------------------------------- failure --
def write_failure(record, reason: str, last_step, **extra) -> None:
    files.write_json(side_file(record, "failed.json"),
                     {"reason": reason, "last_step": last_step, "time": time.time(), **extra})


def read_failure(record) -> dict | None:
    return read_json(side_file(record, "failed.json"))


def clear_failure(record) -> None:
    side_file(record, "failed.json").unlink(missing_ok=True)
