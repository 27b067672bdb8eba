"""`bench run`'s executor flags (local pool, fused groups, SLURM arrays); the
parsed values become a bench.sweep.executor_options.ExecutorOptions, whose
defaults these flags show."""
from __future__ import annotations

from bench.sweep.executor_options import ExecutorOptions

DEFAULT = ExecutorOptions()


def add_executor_options(p) -> None:
    p.add_argument("--executor", default=DEFAULT.executor,
                   help="local (a process per run) | inline (this process, one run after "
                        "another: breakpoint() and debuggers work) | slurm")
    p.add_argument("--jobs", type=int, default=DEFAULT.jobs,
                   help="parallel runs: on CPU (default 1); with GPUs, a cap on the GPU slots; "
                        "0 = --executor inline")
    p.add_argument("--jobs-per-gpu", type=int, default=DEFAULT.jobs_per_gpu,
                   help="runs sharing one GPU (local)")
    p.add_argument("--fuse", default=DEFAULT.fuse, metavar="{seeds,methods}",
                   help="train runs together in one process as one fused model (local executor; "
                        "pays on a GPU, slower on CPU): 'seeds' = the seeds of each method/config, "
                        "'methods' = every run with the same data, backbone, training config "
                        "and head count")
    p.add_argument("--fuse-seeds", dest="fuse", action="store_const", const="seeds",
                   help="alias of --fuse seeds")
    p.add_argument("--fuse-max", type=int, default=DEFAULT.fuse_max, metavar="N",
                   help="cut fused groups into balanced chunks of at most N runs (GPU memory)")
    g = p.add_argument_group("slurm (through submitit)")
    g.add_argument("--partition", default=DEFAULT.partition, help="SLURM partition")
    g.add_argument("--time", type=int, default=DEFAULT.time, help="time limit per run, minutes")
    g.add_argument("--gpus-per-job", type=int, default=DEFAULT.gpus_per_job,
                   help="GPUs per array task (default: 1 where the partition's nodes have "
                        "GPUs, per sinfo's GRES, else 0)")
    g.add_argument("--cpus-per-job", type=int, default=DEFAULT.cpus_per_job,
                   help="CPUs per array task (default: 4, at most the partition's CPUs per node)")
    g.add_argument("--array-parallelism", type=int, default=DEFAULT.array_parallelism,
                   help="most array tasks running at once")
    g.add_argument("--slurm-folder", default=DEFAULT.slurm_folder,
                   help="submitit logs (default RESULTS/_submitit)")
    g.add_argument("--submitit-cluster", default=DEFAULT.submitit_cluster,
                   help="slurm | local (same path on this machine, for testing) | debug")
