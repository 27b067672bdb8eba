"""What the executors (bench.sweep.executors, bench.sweep.slurm) take: one
frozen dataclass, `ExecutorOptions`, built from `bench run`'s options (the
command line defines the flags in bench.cli and takes their defaults from
here) or from `bench.api.run`'s keyword arguments.

Field names are the option names (`--jobs-per-gpu` -> `jobs_per_gpu`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class ExecutorOptions:
    """Where and how many runs execute at once; the local pool and SLURM arrays."""

    executor: str = "local"  # local | inline | slurm (bench.sweep.executors.EXECUTORS)
    device: str | None = None  # --device: picks the GPUs the local pool uses
    # local
    # parallel runs (CPU: default 1); with GPUs a cap on the slots; 0: inline
    jobs: int | None = None
    jobs_per_gpu: int = 1
    fuse: str | None = None  # seeds | methods (bench.train.groups.FUSE_MODES)
    fuse_max: int | None = None
    # slurm (through submitit)
    partition: str | None = None
    time: int = 120  # minutes per run
    gpus_per_job: int | None = None
    cpus_per_job: int | None = None
    array_parallelism: int = 16
    slurm_folder: str | None = None
    submitit_cluster: str = "slurm"  # slurm | local | debug

    @classmethod
    def of(cls, options) -> "ExecutorOptions":
        """The executor fields of a larger options object (RunOptions, or any
        object with these attributes); an ExecutorOptions is returned as is."""
        if type(options) is cls:
            return options
        return cls(**{f.name: getattr(options, f.name) for f in dataclasses.fields(cls)
                      if hasattr(options, f.name)})
