"""Which runs train together as one fused model, and the records they write.

`bench run --fuse MODE` hands the local executor groups of runs instead of
single runs; one process trains each group in lock-step (bench.train.fused). Two
modes, one registry entry each:

- `seeds`: the seeds of one (dataset, backbone, method, config);
- `methods`: every run that can share each optimiser step: same dataset (and
  data options), backbone, initial weights, the same training config (one
  optimiser, one schedule, one batch order length) and the same number of
  heads (same architecture, so the parameters stack), at the same resolved
  image sizes (the released protocol trains LS/MbLS/MixUp/DCA at 150 px on
  Chaoyang and Kvasir, the rest at 224). That is an
  Experiment's payload without its method fields; the worker re-checks it
  on the rebuilt experiments (`check_lockstep`) before anything trains.

A member of a fused group gets exactly what its run alone gets (its own
method copy, its seed's class weights, initial weights, batch order and
method draws), so its record equals the unfused one within float tolerance.
"""
from __future__ import annotations

import copy
import hashlib
import math

from bench.core import store
from bench.core.config import config_hash
from bench.core.device import default_device
from bench.core.errors import BenchError
from bench.core.registry import Registry
from bench.methods import create_method
from bench.train import experiment  # save_run looked up at call time (tests swap it)
from bench.train.backbones import model_arch
from bench.train.cells import batchable
from bench.train.fused import train_fused
from bench.train.resume import CycleState
from bench.train.streams import raise_connections, train_streams

FUSE_MODES = Registry("--fuse value")
METHOD_FIELDS = ("method", "method_params")  # what may differ inside a group


@FUSE_MODES.register("seeds", "the seeds of one (dataset, backbone, method, config)")
def seeds_key(spec) -> tuple:
    return (spec.dataset, spec.backbone, spec.method, spec.chash, spec.results, spec.device)


@FUSE_MODES.register("methods", "every run with the same data, backbone, weights, "
                                "training config and head count")
def methods_key(spec) -> tuple:
    """The inputs an Experiment's payload minus METHOD_FIELDS is computed from
    (grid.experiment_for), plus the head count: cheap (no data or weights
    file is read) and never looser than the payload itself."""
    method = create_method(spec.method, dict(spec.method_overrides))
    # MC-Dropout's T passes are T "heads" of one linear layer, an efficient
    # ensemble's M members are not M linear heads either: only the same arch
    # (kind and structural values, Method.arch) stacks
    # a method that feeds the model more images than the batch (RankMixup:
    # clean and mixed, `batch_multiple` 2) stacks only with its like
    arch = (method.heads, model_arch(method), getattr(method, "batch_multiple", 1))
    return (spec.dataset, spec.backbone, spec.train, spec.sizes, spec.data_root,
            spec.load_options, spec.weights, arch, spec.results, spec.device)


def fuse_groups(specs, mode: str = "seeds", max_size=None) -> list[list]:
    """Specs grouped by the mode's key (first appearance and grid order kept),
    each group cut into balanced chunks of at most `max_size` members: a
    number, None (whole), or a function of the group (bench.sweep.fusecap:
    what fits in free GPU memory)."""
    key = FUSE_MODES.get(mode)
    groups: dict = {}
    for spec in specs:
        groups.setdefault(key(spec), []).append(spec)
    return [chunk for group in groups.values()
            for chunk in split_group(group, max_size(group) if callable(max_size) else max_size)]


def split_group(group: list, max_size: int | None) -> list[list]:
    """ceil(n / max_size) contiguous chunks whose sizes differ by at most one
    (25 at most 8 -> 7, 6, 6, 6): equal-sized groups use the GPU evenly."""
    if not max_size or len(group) <= max_size:
        return [group]
    n = math.ceil(len(group) / max_size)
    size, extra = divmod(len(group), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(group[start:end])
        start = end
    return out


# ------------------------------------------------------------- lock-step --
def lockstep_key(exp) -> tuple:
    """What must be equal for runs to share every step: the payload without
    the method fields (data, backbone, heads, hashed training config, weights)
    and the whole TrainConfig (speed switches are outside the hash but are
    still one loop)."""
    payload = {k: v for k, v in exp.payload().items() if k not in METHOD_FIELDS}
    return config_hash(payload), exp.train


def check_lockstep(exps) -> None:
    """One-line BenchError naming the first member that cannot be fused with the first."""
    first = lockstep_key(exps[0])
    for exp in exps[1:]:
        if lockstep_key(exp) != first:
            a, b = exps[0].payload(), exp.payload()
            diff = sorted(k for k in set(a) | set(b)
                          if k not in METHOD_FIELDS and a.get(k) != b.get(k)) or ["train"]
            raise BenchError(f"cannot fuse {exp.method} with {exps[0].method}: they differ in "
                             f"{', '.join(diff)} (fused runs need one architecture and one "
                             "training config)")


def member_name(exp, seed: int) -> str:
    return f"{exp.method}/{seed}"


def group_fields(exp, members: list) -> dict:
    """config.json fields of one member: `fused_group`, the seeds of its own
    config trained with it (as with --fuse seeds), and, when the group mixes
    configs, `fused_members`: every member as 'method/seed', in order."""
    fields = {"fused_group": [s for e, s in members if e.chash == exp.chash]}
    if len({e.chash for e, _ in members}) > 1:
        fields["fused_members"] = [member_name(e, s) for e, s in members]
    return fields


# ---------------------------------------------------------- run records --
def run_members(members: list, bundle, results, *, device: str | None = None,
                force: bool = False, progress: bool = True, on_step=None,
                keep_weights: bool = False, evals: tuple = ()) -> list[tuple[str, object]]:
    """bench.train.experiment.run_seed for every (Experiment, Method, seed) member, trained at
    once (TrainConfig.fuse_as: one vmapped model, or one model per run on its
    own stream): the same records (each member's own hash and directory) plus
    the group fields. Complete records are skipped unless `force`; returns
    ('done' | 'skipped', record path) per member, in order. `keep_weights` and
    `evals` as for run_seed. A streams member that fails stops alone: the
    others' records are written, then its error is raised."""
    paths = [exp.record_dir(results, seed) for exp, _, seed in members]
    todo = [i for i, p in enumerate(paths) if force or not store.is_complete(p)]
    if not todo:
        return [("skipped", p) for p in paths]
    check_lockstep([members[i][0] for i in todo])
    device = device or default_device()
    # A copy per member: setup() stores per-seed state (class weights) on it.
    methods = [copy.deepcopy(members[i][1]) for i in todo]
    built = [experiment.init_model(members[i][0], bundle, m, members[i][2])  # run_seed's order
             for i, m in zip(todo, methods)]
    exps, seeds = [members[i][0] for i in todo], [members[i][2] for i in todo]
    trained = list(zip(exps, seeds))
    how = fused_as(exps[0].train, device, built[0][0])
    states = member_states([paths[i] for i in todo], trained, how)
    out = TRAIN_TOGETHER[how]([model for model, _ in built], methods, exps[0].train, bundle,
                              seeds, device, progress, on_step, states=states)
    ok = [k for k, result in enumerate(out) if not isinstance(result, BaseException)]
    for k in ok:
        (model, bb), i = built[k], todo[k]
        experiment.save_run(paths[i], exps[k], bundle, seeds[k], out[k],
                            experiment.n_params(model), bb.weights, device,
                            keep_weights=keep_weights, **group_fields(exps[k], trained),
                            **({"fused_as": how} if how != "vmap" else {}))
    # a complete record needs no state: each streams member's own, the group's once all are
    done_states = [states[k] for k in ok] if how == "streams" else \
        states if len(ok) == len(out) else []
    for state in done_states:
        state.clear()
    for k in ok:
        experiment.evaluate_trained(paths[todo[k]], built[k][0], out[k], exps[k].train, evals,
                                    device)
    if len(ok) < len(out):
        raise next(r for r in out if isinstance(r, BaseException))
    done = set(todo)
    return [("done" if i in done else "skipped", p) for i, p in enumerate(paths)]


def fused_as(cfg, device, model=None) -> str:
    """TrainConfig.fuse_as resolved: `auto` is streams on CUDA (where one run's
    captured step leaves the card idle); elsewhere a cell group (one batched
    model, bench.train.cells) where `model`, a member, has a batched form, and
    vmap where it has not (an efficient ensemble's layers, most timm models)."""
    if cfg.fuse_as != "auto":
        return cfg.fuse_as
    if str(device).startswith("cuda"):
        return "streams"
    return "cells" if model is not None and batchable(model) is None else "vmap"


def connections_note(cfg, device) -> str | None:
    """A group that will train as streams on CUDA raises the card's hardware
    queues (bench.train.streams.raise_connections) before CUDA starts; -> the
    line for its members' logs, or None."""
    if fused_as(cfg, device) != "streams" or not str(device).startswith("cuda"):
        return None
    return raise_connections()


def member_states(paths: list, trained: list, how: str) -> list:
    """A streams group's members resume as runs alone do, each from its own
    state (so a run killed alone resumes in a group and back); a vmapped group
    has one state for all."""
    if how == "streams":
        return [CycleState(store.state_path(p), exp.key(seed).run_id)
                for p, (exp, seed) in zip(paths, trained)]
    return [group_state(paths[0], trained, how)]


def _train_vmap(models, methods, cfg, data, seeds, device, progress, on_step, *, states: list):
    return train_fused(models, methods, cfg, data, seeds, device, progress=progress,
                       on_step=on_step, state=states[0])  # one state for the stacked model


def _train_cells(models, methods, cfg, data, seeds, device, progress, on_step, *, states: list):
    return train_fused(models, methods, cfg, data, seeds, device, progress=progress,
                       on_step=on_step, state=states[0], how="cells")


def _train_streams(models, methods, cfg, data, seeds, device, progress, on_step, *,
                   states: list):
    return train_streams(models, methods, cfg, data, seeds, device, progress=progress,
                         on_step=on_step, states=states)  # each run its own


# fuse_as -> train(models, methods, cfg, data, seeds, device, progress, on_step,
# states=member_states(...)): one TrainResult (or a streams member's error) per member
TRAIN_TOGETHER = {"cells": _train_cells, "vmap": _train_vmap, "streams": _train_streams}


def group_state(first_record, trained: list, how: str = "vmap"):
    """The group's cycle-end state (bench.train.resume), beside its first member's
    record; its key names every member (and a cell group's model, whose
    tensors are laid out as the vmapped group's are not), so only the same
    group resumes it."""
    key = " ".join(exp.key(seed).run_id for exp, seed in trained)
    if how != "vmap":
        key = f"{how}: {key}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return CycleState(store.state_path(first_record, digest), key)
