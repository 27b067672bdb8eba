"""Run locks (bench.sweep.runstate): reused pids, stale locks from another
host, half-written locks, and several processes racing for one run."""
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from bench.sweep import runstate
from sweeputil import wait_for


@pytest.fixture
def record(tmp_path):
    return tmp_path / "d" / "b" / "m" / "h" / "seed0"


def write_lock(record, holder, age: float = 0.0):
    path = runstate.lock_path(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(holder) if holder is not None else "")
    stamp = time.time() - age
    os.utime(path, (stamp, stamp))
    return path


def mine_now(record) -> bool:
    return json.loads(runstate.lock_path(record).read_text())["pid"] == os.getpid()


def test_reused_pid_is_a_dead_holder(record):
    # pid alive (our own), but started at another time: the holder died and the
    # pid was recycled, so the lock is stale
    me = runstate.proc_start(os.getpid())
    write_lock(record, {"pid": os.getpid(), "host": socket.gethostname(), "start": str(int(me) - 5)})
    assert runstate.live_holder(record) is None
    assert runstate.acquire(record) is None and mine_now(record)


def test_live_pid_with_matching_start_is_respected(record):
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        write_lock(record, {"pid": sleeper.pid, "host": socket.gethostname(),
                            "start": runstate.proc_start(sleeper.pid)})
        assert runstate.acquire(record) == f"pid {sleeper.pid} on {socket.gethostname()}"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_zombie_holder_is_dead(record):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = runstate.proc_start(child.pid)
    wait_for(lambda: (runstate._proc_stat(child.pid) or ["Z"])[0] == "Z", timeout=30)
    try:  # exited but not reaped: its pid still exists, in state Z
        write_lock(record, {"pid": child.pid, "host": socket.gethostname(), "start": start})
        assert runstate.live_holder(record) is None
    finally:
        child.wait()


def test_lock_from_another_host_is_live_until_its_heartbeat_is_stale(record):
    holder = {"pid": 1, "host": "node-elsewhere", "slurm_job": "77_3"}
    write_lock(record, holder, age=runstate.STALE_SECONDS - 60)
    assert runstate.acquire(record) == "pid 1 on node-elsewhere, job 77_3"
    write_lock(record, holder, age=runstate.STALE_SECONDS + 60)
    assert runstate.live_holder(record) is None
    assert runstate.acquire(record) is None and mine_now(record)


def test_empty_lock_is_live_while_fresh_then_taken_over(record):
    write_lock(record, None, age=1)
    assert runstate.acquire(record) == "lock being created"
    write_lock(record, None, age=runstate.FRESH_EMPTY_SECONDS + 1)
    assert runstate.acquire(record) is None and mine_now(record)


def test_release_leaves_another_process_lock_alone(record):
    other = {"pid": os.getpid() + 1, "host": socket.gethostname(), "start": None}
    path = write_lock(record, other)
    runstate.release(record)
    assert path.exists()
    runstate.drop_lock_of(record, pid=os.getpid() + 2)  # someone else's pid: kept
    assert path.exists()
    runstate.drop_lock_of(record, pid=os.getpid() + 1)
    assert not path.exists()


RACER = """
import sys, time, pathlib
from bench.sweep import runstate
record, go, out = map(pathlib.Path, sys.argv[1:4])
out.with_suffix(".ready").touch()
while not go.exists():
    time.sleep(0.001)
got = runstate.acquire(record)
out.write_text("won" if got is None else "lost")
while not (go.parent / "done").exists():  # a winner holds the lock until all have tried
    time.sleep(0.01)
"""


@pytest.mark.parametrize("stale_first", [False, True])
def test_racing_processes_exactly_one_wins(tmp_path, record, stale_first):
    if stale_first:  # a SIGKILLed holder's lock: every racer tries to take it over
        write_lock(record, {"pid": 2**22 + 7, "host": socket.gethostname(), "start": "1"})
    n = 6
    go = tmp_path / "go"
    outs = [tmp_path / f"out{i}" for i in range(n)]
    procs = [subprocess.Popen([sys.executable, "-c", RACER, str(record), str(go), str(o)])
             for o in outs]
    try:
        wait_for(lambda: all(o.with_suffix(".ready").exists() for o in outs), timeout=120)
        go.touch()  # all are polling for it: they call acquire within a millisecond
        wait_for(lambda: all(o.exists() and o.read_text() for o in outs), timeout=120)
        results = sorted(o.read_text() for o in outs)
        assert results == ["lost"] * (n - 1) + ["won"]
        winner = procs[[o.read_text() for o in outs].index("won")].pid
        assert json.loads(runstate.lock_path(record).read_text())["pid"] == winner
        assert not list(runstate.lock_path(record).parent.glob(".*stale*"))  # no litter
    finally:
        (tmp_path / "done").touch()
        for p in procs:
            p.wait(timeout=60)
