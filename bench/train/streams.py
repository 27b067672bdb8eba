"""A fused group trained as separate runs whose steps interleave (`fuse_as=streams`).

Once a run's step is one captured CUDA graph (bench.train.graphstep), the host
launches it in a few microseconds and one run at batch 8 leaves most of the
card idle. Stacking runs into one vmapped model (bench.train.fused) fills it,
but its grouped convolutions cost more than they save once launches are gone
(docs/speed.md). Here every member keeps its own plain model and its own
loop (bench.train.loop.loop_steps, a generator that yields after each step);
the driver advances the members round-robin, one step each, each inside its
own CUDA stream, so the card runs several members' graphs at once.

Each member is exactly the run alone: its SingleStepper, seeds, generators,
checkpoints, resume state (the run's own bench.train.resume.CycleState) and
device data shared read-only. Process-wide torch RNG state (what dropout and
drop-path draw from) is swapped in and out around each member's step, so on
a CPU a member's record is bit for bit the unfused run's
(tests/train/test_streams.py). On CUDA the members share the device's
generator (a captured graph reads it by offset), so a layer that draws on
the card (MC-Dropout) gets other, equally distributed, draws than alone.

A member that fails (a non-finite loss) stops alone: the others train on and
write their records, then the first failure is raised for the caller
(bench.sweep.worker marks the written records done and the rest failed).
"""
from __future__ import annotations

import contextlib
import os

import torch

from bench.core.config import TrainConfig
from bench.train.loop import (SingleStepper, TrainResult, device_splits, loop_steps,
                              precision_scope, sync)


# How many hardware work queues CUDA may spread a process's streams over: its
# default is 8, so a group of more than 8 members shares queues (work on a
# shared queue serialises); 32 is CUDA's maximum.
CONNECTIONS = 32
CONNECTIONS_VAR = "CUDA_DEVICE_MAX_CONNECTIONS"


def raise_connections(environ=os.environ, initialised=None) -> str | None:
    """Set CUDA_DEVICE_MAX_CONNECTIONS=32 for a streams group, where the
    process's CUDA has not started (the driver reads it then) and the user has
    not set it; -> the line for the run's log (not its hash: speed only), or
    None where it is the user's. `initialised`: torch.cuda.is_initialized()
    unless given (tests)."""
    if CONNECTIONS_VAR in environ:
        return None
    if torch.cuda.is_initialized() if initialised is None else initialised:
        return (f"{CONNECTIONS_VAR} left at CUDA's default (8): CUDA had started in this "
                "process before the streams group")
    environ[CONNECTIONS_VAR] = str(CONNECTIONS)
    return f"{CONNECTIONS_VAR}={CONNECTIONS} set for the streams group (CUDA's default: 8)"


def member_streams(device: torch.device, k: int) -> list:
    """One CUDA stream per member (each waiting for the data just copied on
    the current stream); no streams on a CPU."""
    if device.type != "cuda":
        return [None] * k
    current = torch.cuda.current_stream(device)
    streams = [torch.cuda.Stream(device) for _ in range(k)]
    for stream in streams:
        stream.wait_stream(current)
    return streams


def on_stream(stream):
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


def train_streams(models: list, methods: list, cfg: TrainConfig, data, seeds: list[int],
                  device="cpu", *, progress: bool = True, on_step=None,
                  states: list | None = None) -> list:
    """Train models[s] with methods[s] under seeds[s], their steps interleaved.
    Returns one TrainResult per member (train_seconds: the group's wall time
    shared equally, as for a vmapped group), or the exception a member failed
    with; `states`: each member's own CycleState (resumed from, saved each cycle).
    `on_step(step, losses)`: after each round, with the list of the members'
    loss tensors (each still on its own stream)."""
    device = torch.device(device)
    steppers, rngs = [], []
    for model, method, seed in zip(models, methods, seeds):
        steppers.append(SingleStepper(model, method, cfg, device, seed))
        rngs.append(torch.get_rng_state())  # each member's own, as its run alone has it
    splits = device_splits(data, device)
    states = states or [None] * len(steppers)
    loops = [loop_steps(st, cfg, data, progress and i == 0, None, state, splits)
             for i, (st, state) in enumerate(zip(steppers, states))]
    with precision_scope(cfg):
        out = drive(loops, member_streams(device, len(loops)), rngs, on_step)
    sync(device)  # every stream's work done before the shared data may be freed
    for result in out:
        if isinstance(result, TrainResult):
            share(result, len(out))
    return out


def drive(loops: list, streams: list, rngs: list, on_step=None) -> list:
    """Advance every member's loop one step in turn until all have ended;
    -> each loop's return value, or the exception it raised."""
    out: list = [None] * len(loops)
    live, step = list(range(len(loops))), 0
    while live:
        losses = []
        for i in list(live):
            torch.set_rng_state(rngs[i])
            try:
                with on_stream(streams[i]):
                    losses.append(next(loops[i]))
            except StopIteration as stop:
                out[i] = stop.value[0]
                live.remove(i)
            except Exception as err:  # noqa: BLE001 - one member's failure stops it alone
                out[i] = err
                live.remove(i)
            rngs[i] = torch.get_rng_state()
        if losses:
            step += 1
            if on_step is not None:
                on_step(step, losses)
    return out


def share(result: TrainResult, k: int) -> None:
    """A member's cycles took the group's wall time: its share is 1/k of it."""
    result.train_images_per_s *= k
    result.train_seconds /= k
