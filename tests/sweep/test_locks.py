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


def test_a_lock_replaced_after_it_was_judged_stale_is_kept(record):
    """A racer judged the dead holder's lock stale; before it removes it, another
    racer removed it and took the run with a lock of the same contents. The
    first must leave that new lock alone (it did not: two runs trained)."""
    dead = {"pid": 2**22 + 7, "host": socket.gethostname(), "start": "1"}
    path = write_lock(record, dead)
    holder, seen = runstate._read_lock(path)
    assert holder == dead and not runstate.holder_alive(holder, path)
    with open(path):  # held open: the new file cannot reuse its inode number
        path.unlink()
        write_lock(record, dead)  # a new file, same bytes
    runstate._remove_stale(path, seen)
    assert path.exists()
    runstate._remove_stale(path, runstate._read_lock(path)[1])  # the file it judged: removed
    assert not path.exists() and not list(path.parent.glob(".*"))  # nor a guard left


RACE_MANY = """
import json, multiprocessing as mp, socket, sys, time
from pathlib import Path
from bench.sweep import runstate

def racer(record, go, wins, done):
    go.wait()
    wins.put(int(runstate.acquire(record) is None))
    done.wait()  # a winner holds its lock until every racer has tried

root, trials, n = Path(sys.argv[1]), int(sys.argv[2]), 6
ctx = mp.get_context("fork")  # cheap racers, so many trials fit in seconds
bad = 0
for i in range(trials):
    record = root / f"d/b/m/h{i}/seed0"
    lock = runstate.lock_path(record)
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(json.dumps({"pid": 2**22 + 7, "host": socket.gethostname(), "start": "1"}))
    go, done, wins = ctx.Event(), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=racer, args=(record, go, wins, done)) for _ in range(n)]
    for p in procs:
        p.start()
    go.set()
    count = sum(wins.get() for _ in range(n))  # waits for every racer, at any speed
    done.set()
    for p in procs:
        p.join()
    bad += count != 1
print(bad)
"""


def test_many_racers_on_a_dead_holders_lock_one_winner_each_time(tmp_path):
    """The race above, 100 times: before the takeover guard about 1 trial in 27
    had two winners (measured: 11 of 300)."""
    out = subprocess.run([sys.executable, "-c", RACE_MANY, str(tmp_path), "100"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0", f"trials with other than one winner: {out.stdout}"
