"""What the executors (bench.sweep.executors, bench.sweep.slurm) take: one
frozen dataclass, `ExecutorOptions`, built from `bench run`'s options or
from `bench.api.run`'s keyword arguments.

Each field declares its flag (bench.core.flags: help, spelling, kind); the
command line builds `bench run`'s executor flags from these declarations
(bench/cli/fields.py). Field names are the option names (`--jobs-per-gpu` ->
`jobs_per_gpu`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from bench.core.flags import Options, option

SLURM = "slurm (through submitit)"  # the --help section of the SLURM flags
ON_SLURM = ("executor", "slurm")  # what each of those flags needs (bench.core.flags.check_needs)


@dataclass(frozen=True)
class ExecutorOptions(Options):
    """Where and how many runs execute at once; the local pool and SLURM arrays."""

    # local | inline | slurm (bench.sweep.executors.EXECUTORS)
    executor: str = option(
        "local", "local (a process per run) | inline (this process, one run after another: "
        "breakpoint() and debuggers work) | slurm")
    # picks the GPUs the local pool uses
    device: str | None = option(None, "cpu | cuda | cuda:N (default: cuda if present)")
    # local
    # parallel runs (CPU: default 1); with GPUs a cap on the slots; 0: inline
    jobs: int | None = option(
        None, "parallel runs: on CPU (default 1); with GPUs, a cap on the GPU slots; "
        "0 = --executor inline")
    jobs_per_gpu: int = option(1, "runs sharing one GPU (local)")
    # seeds | methods (bench.train.groups.FUSE_MODES)
    fuse: str | None = option(
        None, "train runs together in one process as one fused model (local executor; "
        "pays on a GPU, slower on CPU): 'seeds' = the seeds of each method/config, "
        "'methods' = every run with the same data, backbone, training config and head count",
        metavar="{seeds,methods}", consts=(("--fuse-seeds", "seeds", "alias of --fuse seeds"),))
    fuse_max: int | None = option(
        None, "cut fused groups into balanced chunks of at most N runs (GPU memory)",
        metavar="N")  # without --fuse: refused by bench.sweep.executors
    # slurm (through submitit)
    partition: str | None = option(None, "SLURM partition", group=SLURM, needs=ON_SLURM)
    time: int = option(120, "time limit per run, minutes", group=SLURM, needs=ON_SLURM)
    gpus_per_job: int | None = option(
        None, "GPUs per array task (default: 1 where the partition's nodes have GPUs, per "
        "sinfo's GRES, else 0)", group=SLURM, needs=ON_SLURM)
    cpus_per_job: int | None = option(
        None, "CPUs per array task (default: 4, at most the partition's CPUs per node)",
        group=SLURM, needs=ON_SLURM)
    array_parallelism: int = option(16, "most array tasks running at once", group=SLURM,
                                    needs=ON_SLURM)
    slurm_folder: str | None = option(None, "submitit logs (default RESULTS/_submitit)",
                                      group=SLURM, needs=ON_SLURM)
    # slurm | local | debug
    submitit_cluster: str = option(
        "slurm", "slurm | local (same path on this machine, for testing) | debug", group=SLURM,
        needs=ON_SLURM)

    @classmethod
    def of(cls, options) -> "ExecutorOptions":
        """The executor fields of a larger options object (RunOptions, or any
        object with these attributes); an ExecutorOptions is returned as is."""
        if type(options) is cls:
            return options
        return cls(**{f.name: getattr(options, f.name) for f in dataclasses.fields(cls)
                      if hasattr(options, f.name)})
