"""A live single-node Slurm cluster for the tests: munged, slurmctld and slurmd
on this machine, every file (key, slurm.conf, state, spool, logs, pids) in one
temporary folder, no accounting database (as on many small clusters).

`start(folder)` installs Debian's `slurm-wlm` and `munge` with apt-get where
they are missing (root only), starts the three daemons in the foreground as
children of this process, and waits until `sinfo` shows the node idle;
`Cluster.stop()` cancels every job, waits for the queue to empty and stops the
daemons by the pids in their pid files (and the pids it started), never by
name. The daemons also get SIGTERM when this process dies (PR_SET_PDEATHSIG),
so a killed test session leaves none running.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("slurm-wlm", "munge")
PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo", "squeue", "scancel", "scontrol")
PARTITION = "debug"


class Unavailable(Exception):
    """This machine cannot run the cluster (no root, no apt); the message says why."""


def _sbin_path() -> str:
    """Daemons live in /usr/sbin, which a non-login PATH may lack."""
    parts = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(parts + [p for p in ("/usr/sbin", "/sbin") if p not in parts])


def install() -> None:
    """apt-get install the packages where a program is missing (root only)."""
    os.environ["PATH"] = _sbin_path()
    if all(shutil.which(p) for p in PROGRAMS):
        return
    if os.geteuid() != 0:
        raise Unavailable("SLURM tests skipped: slurm-wlm/munge are not installed and "
                          "installing them needs root")
    if not shutil.which("apt-get"):
        raise Unavailable("SLURM tests skipped: slurm-wlm/munge are not installed and "
                          "this machine has no apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"],
                ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES]):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.strip()[-500:]}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _memory_mb() -> int:
    with open("/proc/meminfo") as f:
        kb = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
    return max(256, kb // 1024 - 512)  # leave the system some room


def slurm_conf(folder: Path, host: str, cpus: int, memory_mb: int, socket_path: Path) -> str:
    """Addresses are 127.0.0.1: a fresh CI machine's hostname may not resolve."""
    ports = f"SlurmctldPort={_free_port()}\nSlurmdPort={_free_port()}"
    return f"""\
ClusterName=benchtest
SlurmctldHost={host}(127.0.0.1)
{ports}
AuthType=auth/munge
AuthInfo=socket={socket_path}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldTimeout=30
SlurmdTimeout=30
KillWait=5
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def _die_with_parent() -> None:
    """In the daemon's child process: SIGTERM when the test session dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class Cluster:
    folder: Path
    conf: Path
    env: dict
    procs: list = field(default_factory=list)  # (name, Popen, pid file)

    def run(self, *cmd: str, check: bool = True) -> str:
        done = subprocess.run(list(cmd), env=self.env, capture_output=True, text=True)
        if check and done.returncode:
            raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()}")
        return done.stdout

    def queue(self) -> list[str]:
        """squeue's job ids (array tasks as <job>_<task>), every state."""
        return self.run("squeue", "--noheader", "--format=%i").split()

    def stop(self) -> None:
        """Cancel every job, let the queue drain, stop the daemons by pid."""
        if any(name == "slurmctld" and p.poll() is None for name, p, _ in self.procs):
            self.run("scancel", "--user", str(os.geteuid()), check=False)
            end = time.monotonic() + 30
            while time.monotonic() < end and self.queue():
                time.sleep(0.5)
        for name, proc, pid_file in reversed(self.procs):
            pids = {proc.pid}
            try:
                pids.add(int(pid_file.read_text().split()[0]))
            except (OSError, ValueError, IndexError):
                pass
            for pid in pids:
                if pid == proc.pid and proc.poll() is not None:
                    continue
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self.procs.clear()


def _start(cluster: Cluster, name: str, cmd: list[str], pid_file: Path) -> None:
    log = open(cluster.folder / f"{name}.out", "w")
    proc = subprocess.Popen(cmd, env=cluster.env, stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=_die_with_parent)
    cluster.procs.append((name, proc, pid_file))


def _wait_idle(cluster: Cluster, host: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    state = ""
    while time.monotonic() < end:
        for name, proc, _ in cluster.procs:
            if proc.poll() is not None:
                out = (cluster.folder / f"{name}.out").read_text()[-800:]
                raise RuntimeError(f"{name} exited with {proc.returncode}: {out}")
        state = cluster.run("sinfo", "--noheader", "--nodes", host, "--format=%T",
                            check=False).strip()
        if state == "idle":
            return
        time.sleep(0.3)
    raise RuntimeError(f"node {host} not idle after {timeout:.0f} s (sinfo: {state!r}); "
                       f"see {cluster.folder}")


def start(folder: Path) -> Cluster:
    """Install where missing, configure and start the cluster in `folder`."""
    install()
    if os.geteuid() != 0:
        raise Unavailable("SLURM tests skipped: starting slurmctld/slurmd/munged needs root")
    folder = Path(folder)
    for sub in ("state", "spool", "munge"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(folder / "munge", 0o700)
    key, sock = folder / "munge" / "munge.key", folder / "munge" / "munge.socket"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    host = socket.gethostname().split(".")[0]
    conf = folder / "slurm.conf"
    conf.write_text(slurm_conf(folder, host, os.cpu_count() or 1, _memory_mb(), sock))
    env = {**os.environ, "SLURM_CONF": str(conf), "PATH": _sbin_path()}
    cluster = Cluster(folder, conf, env)
    try:
        _start(cluster, "munged", ["munged", "--foreground", "--force", f"--key-file={key}",
                                   f"--socket={sock}", f"--pid-file={folder}/munged.pid",
                                   f"--log-file={folder}/munged.log",
                                   f"--seed-file={folder}/munge/seed"], folder / "munged.pid")
        end = time.monotonic() + 20
        while not sock.exists() and time.monotonic() < end:
            time.sleep(0.1)
        _start(cluster, "slurmctld", ["slurmctld", "-D", "-i", "-f", str(conf)],
               folder / "slurmctld.pid")
        _start(cluster, "slurmd", ["slurmd", "-D", "-f", str(conf)], folder / "slurmd.pid")
        _wait_idle(cluster, host)
    except BaseException:
        cluster.stop()
        raise
    return cluster
