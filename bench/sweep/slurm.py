"""The SLURM executor: one submitit job array per sweep, fitted to the partition.

What a cluster user meets, each handled here:
- GPUs and CPUs follow the partition: `sinfo` says how many GPUs (GRES) and
  CPUs its nodes have; by default an array task asks for one GPU where there
  are GPUs and none where there are not, and for at most the node's CPUs; an
  explicit request the partition cannot meet is one line naming the option.
- a scheduler refusal (`sbatch: error: ...`) is one line naming the option at
  fault, never submitit's traceback;
- with no accounting database `sacct` fails on every poll: submitit's
  "Bypassing sacct error" warning is said once, not on every poll;
- time limit and preemption: Slurm signals the task (SIGUSR2, `signal_delay_s`
  before the limit), submitit calls `SlurmTask.checkpoint` and requeues the
  same task, which resumes from its run's last saved cycle end
  (bench.train.resume); nothing else needs saving at that moment;
- submitit's files are pickles (each task unpickles its call, the sweep each
  task's result): their folder is made readable and writable by this user
  alone, so on a shared disk (group-writable results) nobody else can swap
  one and run code as this user (docs/architecture.md, "Files read back").
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import torch

from bench.core.errors import BenchError, choices_error
from bench.sweep.worker import execute

CLUSTERS = ("slurm", "local", "debug")  # submitit's AutoExecutor clusters we support
DEFAULT_CPUS = 4
SIGNAL_DELAY_S = 90  # SIGUSR2 this long before the time limit: time to requeue


def check_cluster(opts) -> None:
    if opts.submitit_cluster not in CLUSTERS:
        raise choices_error("--submitit-cluster", opts.submitit_cluster, CLUSTERS)


# ------------------------------------------------------------- partition --
def gpu_count(gres: str) -> int:
    """GPUs per node in a sinfo GRES field: 'gpu:a100:4(S:0-1),shard:8' -> 4, '(null)' -> 0."""
    return sum(int(n) for n in re.findall(r"(?:^|,)gpu(?::[^:,(]+)?:(\d+)", gres))


def partition_info(partition: str | None) -> dict:
    """{'name', 'gpus', 'cpus'} of `partition` (None: the cluster's default) from sinfo;
    one-line errors when sinfo is missing or the partition unknown."""
    if not shutil.which("sinfo"):
        raise BenchError("--executor slurm: sinfo not found; run on a SLURM login node or use "
                         "--submitit-cluster local")
    done = subprocess.run(["sinfo", "--noheader", "--format=%P|%G|%c"], capture_output=True,
                          text=True)
    if done.returncode:
        raise BenchError(f"--executor slurm: sinfo failed: {_first(done.stderr)}")
    rows: dict = {}
    for line in done.stdout.split("\n"):
        if line.count("|") == 2:
            name, gres, cpus = line.strip().split("|")
            row = rows.setdefault(name.rstrip("*"), {"name": name.rstrip("*"), "gpus": 0,
                                                      "cpus": 0, "default": name.endswith("*")})
            row["gpus"] = max(row["gpus"], gpu_count(gres))
            row["cpus"] = max(row["cpus"], int(re.sub(r"\D", "", cpus) or 0))
    if partition is None:
        found = [r for r in rows.values() if r["default"]]
        if not found:
            raise BenchError("--partition: this cluster has no default partition; name one of "
                             + ", ".join(rows))
        return found[0]
    if partition not in rows:
        raise choices_error("--partition", partition, list(rows))
    return rows[partition]


def resources(opts) -> dict:
    """gpus_per_node and cpus_per_task for the array: asked, or fitted to the partition."""
    gpus, cpus = opts.gpus_per_job, opts.cpus_per_job
    if opts.submitit_cluster != "slurm":
        return {"gpus_per_node": gpus or 0, "cpus_per_task": cpus or DEFAULT_CPUS}
    part = partition_info(opts.partition)
    where = f"partition {part['name']} has {part['gpus']} GPUs per node (sinfo GRES)"
    if gpus is None:
        gpus = 1 if part["gpus"] else 0
    elif gpus > part["gpus"]:
        raise BenchError(f"--gpus-per-job {gpus}: {where}; use --gpus-per-job "
                         f"{part['gpus']} or a GPU partition (--partition)")
    if cpus is None:
        cpus = min(DEFAULT_CPUS, part["cpus"]) or DEFAULT_CPUS
    elif part["cpus"] and cpus > part["cpus"]:
        raise BenchError(f"--cpus-per-job {cpus}: partition {part['name']} has "
                         f"{part['cpus']} CPUs per node; use --cpus-per-job {part['cpus']} "
                         "or less")
    return {"gpus_per_node": gpus, "cpus_per_task": cpus}


def parameters(opts) -> dict:
    """submitit's update_parameters for one array."""
    params = {"timeout_min": opts.time, **resources(opts), "tasks_per_node": 1, "nodes": 1,
              "name": "bench", "slurm_array_parallelism": opts.array_parallelism,
              "slurm_signal_delay_s": signal_delay(opts.time)}
    if opts.partition:
        params["slurm_partition"] = opts.partition
    return params


def signal_delay(minutes: int) -> int:
    """Seconds before the limit that SIGUSR2 comes: 90, but at most a quarter
    of a short limit (`--time 1` would otherwise be signalled at its start)."""
    return min(SIGNAL_DELAY_S, max(10, minutes * 60 // 4))


def sbatch_lines(opts, n: int) -> list[str]:
    """The #SBATCH lines an array of `n` runs would get (for --dry-run)."""
    # optional package (submitit): `bench run` checks it first (plan.check_packages)
    from submitit.slurm.slurm import _make_sbatch_string  # what submitit writes itself

    params = parameters(opts)
    plain = {k.removeprefix("slurm_"): v for k, v in params.items()}
    plain["time"] = plain.pop("timeout_min")
    plain["job_name"] = plain.pop("name")
    plain["ntasks_per_node"] = plain.pop("tasks_per_node")
    plain["array_parallelism"] = plain.pop("array_parallelism")
    text = _make_sbatch_string(command="python -m submitit.core._submit", folder="FOLDER",
                               map_count=n, **plain)
    return [line.removeprefix("#SBATCH ") for line in text.splitlines()
            if line.startswith("#SBATCH") and "FOLDER" not in line]


# ---------------------------------------------------------------- errors --
OPTION_OF = [  # a phrase of sbatch's error -> the option that sets it
    ("partition", "--partition"), ("gres", "--gpus-per-job"), ("gpu", "--gpus-per-job"),
    ("time limit", "--time"), ("cpu", "--cpus-per-job"),
    ("node configuration", "--cpus-per-job / --gpus-per-job"),
]


def _first(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error:" in ln]
    return (errors or lines or [""])[0][:200]


def scheduler_error(err: BaseException, opts) -> BenchError:
    """One line naming the option at fault for a refused submission."""
    reason = _first(err)
    low = reason.lower()
    option = next((o for phrase, o in OPTION_OF if phrase in low),
                  "--partition, --time, --gpus-per-job or --cpus-per-job")
    return BenchError(f"SLURM refused the job array ({reason}); check {option}")


class OnceFilter(logging.Filter):
    """Let submitit's 'Bypassing sacct error' through once: clusters without an
    accounting database fail it on every poll, and the status still comes."""

    said = False

    def filter(self, record: logging.LogRecord) -> bool:
        if "Bypassing sacct error" not in record.getMessage():
            return True
        if OnceFilter.said:
            return False
        OnceFilter.said = True
        record.msg, record.args = ("sacct failed (no accounting database?); job states come "
                                   "from squeue and result files instead"), ()
        return True


def quiet_sacct() -> None:
    log = logging.getLogger("submitit")
    if not any(isinstance(f, OnceFilter) for f in log.filters):
        log.addFilter(OnceFilter())


# ----------------------------------------------------------------- task --
class SlurmTask:
    """One array task: worker.execute(spec). On SIGUSR2 (time limit near,
    preemption) submitit calls checkpoint() and requeues this same task; the
    requeued task resumes its run from the last saved cycle end."""

    def __call__(self, spec):
        # the task's CPUs, not the node's: tasks side by side must not oversubscribe
        if os.environ.get("SLURM_CPUS_PER_TASK"):
            torch.set_num_threads(int(os.environ["SLURM_CPUS_PER_TASK"]))
        return execute(spec)

    def checkpoint(self, spec):
        # optional package (submitit): bench run checks it first (plan.check_packages)
        import submitit

        return submitit.helpers.DelayedSubmission(self, spec)


def job_failure(err: BaseException, job, opts) -> str:
    """One line for a job that ended without a result."""
    text = _first(err)
    if "TIMEOUT" in str(err) or "time limit" in str(err).lower():
        return f"SLURM job {job.job_id} hit its time limit (--time {opts.time}): {text}"
    return f"SLURM job {job.job_id} failed: {text}"


def submit(specs, opts):
    """Submit one array; -> the submitit jobs (one per spec, in order)."""
    # optional package (submitit): bench run checks it first (plan.check_packages)
    import submitit

    quiet_sacct()
    folder = private_folder(Path(opts.slurm_folder or Path(specs[0].results) / "_submitit"))
    params = parameters(opts)
    executor = submitit.AutoExecutor(folder=folder / "%j", cluster=opts.submitit_cluster)
    executor.update_parameters(**params)
    try:
        return executor.map_array(SlurmTask(), specs)
    except Exception as err:  # noqa: BLE001 - sbatch's refusal, as one line
        raise scheduler_error(err, opts) from None


def private_folder(folder: Path) -> Path:
    """`folder`, made if missing, with mode 0700; one line if another user owns it."""
    folder.mkdir(parents=True, exist_ok=True)
    if folder.stat().st_uid != os.getuid():
        raise BenchError(f"--slurm-folder {folder}: owned by another user; submitit's pickles "
                         "need a folder only you can write (give --slurm-folder DIR)")
    folder.chmod(0o700)
    return folder


# ------------------------------------------------------------------ wait --
LIVE_STATES = {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD",
               "REQUEUE_FED", "RESIZING", "SUSPENDED", "SIGNALING", "STAGE_OUT", "STOPPED"}


def queue_states(array_ids: set[str]) -> dict[str, str] | None:
    """'<array>_<task>' -> state from squeue (every state it still lists), or
    None if squeue failed (then nothing is judged lost this round)."""
    done = subprocess.run(["squeue", "--array", "--noheader", "--states=all",
                           "--format=%i|%T", "--jobs", ",".join(sorted(array_ids))],
                          capture_output=True, text=True)
    if done.returncode:
        return None
    return dict(line.split("|", 1) for line in done.stdout.split() if "|" in line)


def lost(job, states: dict | None) -> str | None:
    """The state of a task that ended without a result (scancel, time limit
    without requeue, node failure), or None while it may still report."""
    if states is None or job.paths.result_pickle.exists():
        return None
    state = states.get(job.job_id, "GONE")
    return None if state in LIVE_STATES else state


def wait(jobs: list, on_job, poll: float = 1.0, most: float | None = None) -> None:
    """Call on_job(job, lost_state) as each task ends: lost_state is None when
    it left a result (or an error) for submitit to read. Job states come from
    squeue, so clusters without accounting (sacct) work too; the poll slows
    down from `poll` to `most` seconds while nothing ends (30 s, or
    BENCH_SLURM_POLL_MAX_S: the live tests' cluster answers squeue at once)."""
    if most is None:
        most = float(os.environ.get("BENCH_SLURM_POLL_MAX_S") or 30.0)
    pending, delay = list(jobs), poll
    arrays = {j.job_id.split("_")[0] for j in jobs}
    while pending:
        states = queue_states(arrays)
        ended = [(j, lost(j, states)) for j in pending]
        ended = [(j, s) for j, s in ended if s is not None or j.paths.result_pickle.exists()]
        for job, state in ended:
            pending.remove(job)
            on_job(job, state)
        delay = poll if ended else min(most, delay * 1.5)
        if pending:
            time.sleep(delay)
