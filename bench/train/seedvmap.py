"""Every member's loss and staged batch of a fused group, each method's seeds
as one vmapped call: the ops of a step grow with the group's methods, not its
runs.

Consecutive members that share a method (same class, equal non-tensor
settings; a grid lists a method's seeds together) differ
only in tensors: per-seed state (the multi-loss class weights), their
batch, draws and targets. Those are stacked and the method's own `loss`
(`staged_batch`) runs once
under torch.func.vmap on a copy of the first member, its tensor attributes
set to the member's slice. A method whose loss vmap cannot batch (a
data-dependent branch, a scalar read), or whose vmapped form asks the host
for a tensor (checked once on the meta device), is computed member by
member, as is a member whose method has no like in the group, and a method
whose call changes its own non-tensor attributes or adds one (state kept
across steps would stay on the copy).
"""
from __future__ import annotations

import copy
import weakref

import torch
from torch.func import vmap
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_unflatten

_UNBATCHABLE: set = set()  # (method class, "loss" | "staged_batch") vmap refused once
_CHECKED: set = set()  # (method class, "loss" | "staged_batch") found not to ask the host
_STATE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # first member -> stacked state


def _state(method) -> tuple[dict, dict]:
    """(tensor attributes, the rest) of a method instance."""
    tensors = {k: v for k, v in vars(method).items() if isinstance(v, torch.Tensor)}
    return tensors, {k: v for k, v in vars(method).items() if k not in tensors}


def _key(method) -> tuple:
    _, rest = _state(method)
    return (type(method), repr(sorted(rest.items(), key=lambda kv: kv[0])))


def _runs(methods: list) -> list[range]:
    """Consecutive members of one method, as ranges: a run's logits are then a
    slice (a view; an index list would be a host tensor copied every step)."""
    if torch.compiler.is_compiling():  # a compiled step: inductor fuses the members' kernels
        return [range(i, i + 1) for i in range(len(methods))]
    runs: list = []
    for i, m in enumerate(methods):
        if runs and _key(methods[runs[-1].start]) == _key(m):
            runs[-1] = range(runs[-1].start, i + 1)
        else:
            runs.append(range(i, i + 1))
    return runs


def _stack_targets(targets: list, like: torch.Tensor):
    """The members' targets (one pytree structure) stacked leaf by leaf; a
    non-tensor leaf equal in every member stays a constant, one that differs
    becomes a tensor of the logits' dtype (a Python float enters the loss's
    arithmetic at that precision). -> (stacked leaves, in_dims, spec) or None."""
    flat = [tree_flatten(t) for t in targets]
    spec = flat[0][1]
    if any(s != spec for _, s in flat):
        return None
    leaves, dims = [], []
    for column in zip(*(f for f, _ in flat)):
        if all(isinstance(v, torch.Tensor) for v in column):
            leaves.append(torch.stack(column))
            dims.append(0)
        elif all(v == column[0] for v in column):
            leaves.append(column[0])
            dims.append(None)
        elif all(isinstance(v, (int, float)) for v in column):
            leaves.append(torch.tensor(column, dtype=like.dtype, device=like.device))
            dims.append(0)
        else:
            return None
    return leaves, dims, spec


def _stacked_state(methods: list, device) -> tuple[list, list]:
    """The members' tensor attributes stacked [S, ...] on the logits' device,
    made once and kept while the members hold the same tensors (a per-step
    stack of host tensors would be a copy to the card every step)."""
    names = list(_state(methods[0])[0])
    key = (tuple(id(m) for m in methods), tuple(id(getattr(m, k)) for m in methods
                                                 for k in names), str(device))
    held = _STATE.get(methods[0])
    if held is None or held[0] != key:
        held = (key, names, [torch.stack([getattr(m, k) for m in methods]).to(device)
                             for k in names])
        _STATE[methods[0]] = held
    return held[1], held[2]


def seeds_call(methods: list, attr: str, lead: torch.Tensor, rest: list):
    """methods[i].<attr>(lead[i], *rest[i]) for every member under one vmap
    (`lead` [R, ...] a slice of the group's tensor: its gradient flows back
    as one slice, not R selects); -> the output with a leading member dim,
    or None where vmap cannot batch it (the caller then loops)."""
    first = methods[0]
    stacked = _stack_targets(rest, lead)
    if (type(first), attr) in _UNBATCHABLE or stacked is None:
        return None
    leaves, dims, spec = stacked
    names, state = _stacked_state(methods, lead.device)
    template = copy.copy(first)

    def one(z, st, *flat):
        for k, v in zip(names, st):
            setattr(template, k, v)
        return getattr(template, attr)(z, *tree_unflatten(list(flat), spec))
    call = vmap(one, in_dims=(0, 0, *dims))
    before = _plain(template)
    try:
        if (type(first), attr) not in _CHECKED:
            if _asks_host(call, lead, state, leaves):
                raise RuntimeError("asks the host")
            _CHECKED.add((type(first), attr))
        out = call(lead, state, *leaves)
    except Exception:  # noqa: BLE001 - no batching rule, a branch on values: loop instead
        out = None
    if out is None or _plain(template) != before:
        # a method that keeps state of its own (a counter, a new attribute) would
        # keep it on the copy: it runs on its members instead, every step
        _UNBATCHABLE.add((type(first), attr))
        return None
    return out


def _plain(method) -> dict:
    """A method's non-tensor attributes by identity, and which attributes it has."""
    return {k: (isinstance(v, torch.Tensor) or id(v)) for k, v in vars(method).items()}


class _HostWork(TorchDispatchMode):
    """Sees an op that computes on, or copies from, a host tensor while the
    step's tensors are on the meta device: under vmap a Python number can
    become a host tensor copied to the device (`sum()` of per-head losses
    starts at the int 0), which a run alone never asks for and a captured
    CUDA graph cannot hold. 0-dim host inputs of a device op are scalars
    passed by value, and a 0-dim host tensor made from Python numbers alone is
    a constant (what vmap makes of the int 0 that `sum()` starts at): allowed."""

    def __init__(self):
        super().__init__()
        self.seen = False

    def __torch_dispatch__(self, func, types, inputs=(), kwargs=None):
        out = func(*inputs, **(kwargs or {}))
        ins = [t for t in tree_flatten((inputs, kwargs))[0] if isinstance(t, torch.Tensor)]
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        host = [t for t in ins if t.device.type != "meta" and t.numel()]
        if not ins and all(t.dim() == 0 for t in outs):
            return out  # a Python number wrapped as a 0-dim host tensor: a constant
        if any(t.dim() for t in host) or any(t.device.type != "meta" for t in outs) or (
                host and func in (torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default)):
            self.seen = True
        return out


def _asks_host(call, lead, state, leaves) -> bool:
    """The vmapped call run once on the meta device (shapes only)."""
    meta = lambda v: v.detach().to("meta") if isinstance(v, torch.Tensor) else v  # noqa: E731
    args = (meta(lead), [meta(t) for t in state], *[meta(v) for v in leaves])
    with torch.no_grad(), _HostWork() as mode:
        call(*args)
    return mode.seen


def member_losses(methods: list, logits: torch.Tensor, targets: list) -> torch.Tensor:
    """[S] losses: member s's method's loss on logits[s] and targets[s], in order."""
    pieces = []
    for run in _runs(methods):
        got = seeds_call(methods[run.start:run.stop], "loss", logits[run.start:run.stop],
                         [(targets[i],) for i in run]) if len(run) > 1 else None
        pieces.append(got if got is not None else torch.stack(
            [methods[i].loss(logits[i], targets[i]) for i in run]))
    return pieces[0] if len(pieces) == 1 else torch.cat(pieces)


def member_batches(methods: list, x: torch.Tensor, y: torch.Tensor, draws: list) -> list:
    """Every member's staged_batch(x[s], y[s], draws[s]) (x [S, B, ...], y
    [S, B]), a method's seeds under one vmap; -> [(inputs, target)] per member."""
    out: list = []
    for run in _runs(methods):
        got = seeds_call(methods[run.start:run.stop], "staged_batch", x[run.start:run.stop],
                         [(y[i], draws[i]) for i in run]) if len(run) > 1 else None
        if got is None:
            out += [methods[i].staged_batch(x[i], y[i], draws[i]) for i in run]
        else:  # one member's slice of every output leaf
            leaves, spec = tree_flatten(got)
            out += [tree_unflatten([v[j] for v in leaves], spec) for j in range(len(run))]
    return out
