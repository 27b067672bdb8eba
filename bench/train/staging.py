"""An epoch's draws for the graph-safe step (bench.train.graphstep), made on
the host, stacked per batch length and staged on the device; the next
epoch's made on a worker thread while this one trains (`Ahead`).

**One derivation per epoch.** The draws themselves (batch order, each image's
augmentation op / magnitude / sign, a method's draws) are made step by step,
member by member, from each member's own generators, exactly as the per-step
path makes them (bench.train.loop.train_step). What they become on the
device (maskaug.derive's per-image fields: affine matrices, factors,
thresholds) is computed once for all of an epoch's images of one batch
length, not once per step: derive is elementwise, so each image's fields are
the same bits either way (tests/train/test_staging.py compares every staged
tensor with a per-step derivation). For a PathMNIST epoch (11,250 steps) that
is one call instead of 11,250, the bulk of the old staging time
(`python -m bench.speed.staging`, docs/speed.md).

**The next epoch ahead** (`stage_ahead`, a speed switch out of the hash: on
by default on CUDA). The next epoch's draws are made on a worker thread while
this epoch trains, from *copies* of the generators, so the run's own
generators are untouched until the point where the loop would have drawn
that epoch itself. There the copies' results are taken only if the run's
generators stand exactly where the copies started (and the batch orders
agree); the run's generators are then moved to where the copies ended, as
if it had drawn the epoch itself. So every random stream, the resume file
saved at a cycle end (bench.train.resume) and a resumed run see what they
see without it; anything unexpected (a draw in between) discards the copy's
work and the epoch is drawn in place, as without it.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch

from bench.core.config import TrainConfig
from bench.core.schedule import steps_per_epoch
from bench.train.augment import sample_params
from bench.train.maskaug import derive

# One worker for every run in the process (a streams group's members take turns):
# the host work of one epoch at a time, beside the thread that launches the steps.
_WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-stage")


def epoch_batches(n: int, batch_size: int, gen: torch.Generator,
                  drop_last: bool = False) -> list[torch.Tensor]:
    """A seeded permutation cut into batches (steps_per_epoch says which are kept)."""
    perm = torch.randperm(n, generator=gen)
    return list(perm.split(batch_size))[:steps_per_epoch(n, batch_size, drop_last)]


def wants_ahead(cfg: TrainConfig, device: torch.device) -> bool:
    """`stage_ahead=true`, or `auto` on CUDA (on a CPU the worker thread would
    take cores from the training step itself)."""
    return cfg.stage_ahead == "true" or (cfg.stage_ahead == "auto" and device.type == "cuda")


# ---------------------------------------------------------------- draws --
def epoch_draws(orders: list, methods: list, gens: list, aug_gens: list, cfg: TrainConfig,
                hw: tuple) -> dict:
    """{batch length: {field: host tensor [steps, ...]}}, full batches first:
    `idx` (every member's batch, concatenated), `aug.*` (maskaug.derive's
    per-image fields) and `m<s>.*` (member s's method draws)."""
    sizes = [len(i) for i in orders[0]]
    ops, mags, mdraws = [], [], []
    for idxs in zip(*orders):  # the draws, in the per-step path's order
        if cfg.augment:
            draws = [sample_params(len(i), g) for i, g in zip(idxs, aug_gens)]
            ops.append(torch.cat([d[0] for d in draws]))
            mags.append(torch.cat([d[1] for d in draws]))
        mdraws.append({f"m{s}.{k}": v for s, (m, i, g) in enumerate(zip(methods, idxs, gens))
                       for k, v in m.draw(len(i), g).items()})
    out = {}
    for n in dict.fromkeys(sizes):
        steps = [t for t, size in enumerate(sizes) if size == n]
        fields = {"idx": torch.cat([torch.stack([o[t] for t in steps]) for o in orders], dim=1)}
        if cfg.augment:  # one derivation for all of these steps' images
            aug = derive(torch.cat([ops[t] for t in steps]), torch.cat([mags[t] for t in steps]),
                         *hw)
            fields.update({f"aug.{k}": v.view(len(steps), -1, *v.shape[1:])
                           for k, v in aug.items()})
        fields.update({k: torch.stack([mdraws[t][k] for t in steps]) for k in mdraws[steps[0]]})
        out[n] = fields
    return out


def with_lrs(draws: dict, sizes: list, lrs: list) -> dict:
    """The epoch's draws with each step's learning rate (`lr`, float32) added."""
    out = {}
    for n, fields in draws.items():
        lr = torch.tensor([lr for lr, size in zip(lrs, sizes) if size == n], dtype=torch.float32)
        out[n] = {"idx": fields["idx"], "lr": lr, **fields}
    return out


def draw_epoch(orders: list, lrs: list, methods: list, gens: list, aug_gens: list,
               cfg: TrainConfig, hw: tuple) -> dict:
    """{batch length: {field: [steps, ...]}}: epoch_draws with the learning rates."""
    draws = epoch_draws(orders, methods, gens, aug_gens, cfg, hw)
    return with_lrs(draws, [len(i) for i in orders[0]], lrs)


# ---------------------------------------------------------------- device --
MEMBERS = "m*."  # a field every member has, stacked [steps, members, ...]


def by_member(fields: dict, members: int) -> dict:
    """Fields "m{s}.{name}" that every member has with one shape and dtype,
    stacked as one field "m*.{name}" [steps, members, ...]: read back with
    one index a step, not one per member (the same values)."""
    out = dict(fields)
    names = {k.split(".", 1)[1] for k in fields if k.startswith("m") and "." in k
             and k.split(".", 1)[0][1:].isdigit()}
    for name in sorted(names):
        keys = [f"m{s}.{name}" for s in range(members)]
        if members < 2 or any(k not in fields for k in keys):
            continue
        vals = [fields[k] for k in keys]
        if len({(tuple(v.shape), v.dtype) for v in vals}) == 1:
            out[MEMBERS + name] = torch.stack(vals, dim=1)
            for k in keys:
                del out[k]
    return out


class Stage:
    """Steps of one batch shape: their draws stacked in device buffers that keep
    their address from epoch to epoch (a captured graph reads them there), a
    step counter and a loss buffer [steps, members], all on the device."""

    def __init__(self, device: torch.device, members: int):
        self.device, self.members = device, members
        self.bufs: dict = {}
        self.counter = torch.zeros(1, dtype=torch.long, device=device)
        self.losses = None

    def load(self, stacked: dict) -> None:
        """Copy one batch length's fields (draw_epoch's) into the buffers."""
        stacked = by_member(stacked, self.members)
        if set(stacked) != set(self.bufs) or any(
                v.shape != self.bufs[k].shape for k, v in stacked.items()):
            self.bufs = {k: torch.empty(v.shape, dtype=v.dtype, device=self.device)
                         for k, v in stacked.items()}
            self.losses = torch.zeros(len(stacked["idx"]), self.members, device=self.device)
        blocking = self.device.type != "cuda"
        for k, v in stacked.items():  # one copy per field and epoch, queued, not waited for
            host = v if blocking or v.is_pinned() else v.pin_memory()
            self.bufs[k].copy_(host, non_blocking=not blocking)
        self.counter.zero_()

    def read(self) -> dict:
        """This step's row of every field (no host read: index_select at the counter)."""
        rows = {k: v.index_select(0, self.counter).squeeze(0) for k, v in self.bufs.items()}
        out = {k: v for k, v in rows.items() if not k.startswith(MEMBERS)}
        for k, v in rows.items():  # a field of every member: member s's row is a view
            if k.startswith(MEMBERS):
                out.update({f"m{s}.{k[len(MEMBERS):]}": v[s] for s in range(self.members)})
        return out

    def record(self, losses: torch.Tensor) -> None:
        self.losses.index_copy_(0, self.counter, losses.detach().float().view(1, -1))
        self.counter.add_(1)


# ----------------------------------------------------------------- ahead --
class Ahead:
    """The next epoch's draws of a stepper (its `gens`, `aug_gens`, `methods`,
    `cfg`), made on the worker thread from copies of its generators: `start()`
    once this epoch is drawn, `take(orders)` where the next is to be drawn."""

    def __init__(self, stepper, n: int, hw: tuple, pin: bool):
        self.st, self.n, self.hw, self.pin = stepper, n, hw, pin
        self.job = None
        self.started: list = []  # the generators' states the copies started from

    def _gens(self) -> list:
        return [*self.st.gens, *self.st.aug_gens]

    def start(self) -> None:
        self.started = [g.get_state() for g in self._gens()]
        copies = [torch.Generator() for _ in self.started]
        for g, state in zip(copies, self.started):
            g.set_state(state)
        self.job = _WORKER.submit(self._draw, copies)

    def _draw(self, copies: list):
        """On the worker: the next epoch's orders and draws from the copies."""
        st, k = self.st, len(self.st.gens)
        gens, aug_gens = copies[:k], copies[k:]
        orders = [epoch_batches(self.n, st.cfg.batch_size, g, st.cfg.drop_last) for g in gens]
        after_orders = [g.get_state() for g in gens]
        draws = epoch_draws(orders, st.methods, gens, aug_gens, st.cfg, self.hw)
        if self.pin:  # page-locked here, so the epoch's copies to the card are queued at once
            draws = {n: {f: v.pin_memory() for f, v in fields.items()}
                     for n, fields in draws.items()}
        return orders, after_orders, draws, [g.get_state() for g in copies]

    def take(self, orders: list) -> dict | None:
        """The drawn epoch if the stepper's generators stand where the copies
        did after the same batch orders (the generators then moved on as if
        drawn here), else None (nothing changed: draw the epoch in place)."""
        job, self.job = self.job, None
        if job is None:
            return None
        theirs, after_orders, draws, ended = job.result()
        k = len(self.st.gens)
        expected = after_orders + self.started[k:]
        same = (len(theirs) == len(orders)
                and all(len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))
                        for a, b in zip(theirs, orders))
                and all(torch.equal(g.get_state(), s) for g, s in zip(self._gens(), expected)))
        if not same:
            return None
        for g, state in zip(self._gens(), ended):
            g.set_state(state)
        return draws
