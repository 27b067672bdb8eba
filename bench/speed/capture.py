"""Can the whole training step be captured as one graph? The proof, case by case.

    python -m bench.speed.capture [--device cpu|cuda] [--backbone smallcnn] [--size 28]
                                  [--steps 6] [--cases all]

A step can be captured (one CUDA graph, replayed) only if it asks nothing of
the host: no host-to-device copy, no computation on host tensors, no scalar
read back, no host value that changes from step to step, and nothing that
stops a tracer. For every built-in method trained alone, and for fused groups
(the one-head methods mixed, the two-head methods, three 4HML seeds), this
runs the graph-safe step (bench.train.graphstep) and prints one line a case:

- breaks: graph breaks of the whole step (augmentation, forward, loss,
  gradients, optimiser) under torch._dynamo.explain, on the CPU;
- h2d, host ops, reads: host-to-device copies, operations on host tensors and
  scalar reads per step, counted by a TorchDispatchMode. On a CPU the step
  runs on the meta device for this (everything not on it is the host); on
  CUDA, on the card. `varying`: host values (Python numbers in operator
  calls) that differ between two consecutive steps: a capture would freeze them;
- host scalars: device operators whose only host tensors are 0-dim inputs
  (a kernel takes them by value: no copy, no sync; their values enter
  `varying`, as a capture freezes them too), and the 0-dim host tensors
  vmap makes of a Python number for them. Not a failure;
- device ops: operator calls on the device per step; kernels: those of them
  that are not views or aliases (launches, roughly: a view launches none);
- equal: after --steps steps, parameters, buffers and losses bit for bit those
  of the per-step path (bench.train.loop's SingleStepper.step /
  bench.train.fused's FusedStepper.step), cuDNN deterministic;
- replay (CUDA): the captured graph's replays bit for bit the graph-safe step
  run eagerly.

Exit 0 only if every case shows 0 breaks, 0 copies, 0 host ops, 0 reads,
0 varying and equal. The data are synthetic (random images and labels).

Compiled cases (`--compile-step`, or named in --cases; an inductor compile
each, so not in `all` by default): SL1H alone and the paper's one-head group
fused, with the step compiled whole as `compile_step=true` compiles it. Their
counts are those of the graph inductor lowers (bench.speed.graphops says how);
`graphs`: graphs compiled over the counted steps (1: no recompilation);
`equal` is `close` where every parameter, buffer and loss is within 1e-4
(relative; 1e-5 absolute near 0) of the per-step path's after --steps steps
(inductor rounds otherwise);
`replay` (CUDA) is still bit for bit the compiled step run uncaptured.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import sys
import traceback
from collections import Counter

import torch
from tabulate import tabulate
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from bench.core.config import PROFILES
from bench.core.device import check_device
from bench.core.errors import BenchError
from bench.methods import create_method, every_method
from bench.speed.steptime import synthetic
from bench.train.backbones import build_model, model_arch
from bench.train.fused import FusedStepper
from bench.train.graphstep import GraphRunner, compile_graph_step
from bench.train.loop import SingleStepper, epoch_batches

NUM_CLASSES = 9  # PathMNIST's: enough for 4 multi-loss heads
COPIES = {"aten._to_copy.default", "aten.copy_.default", "aten.copy.default"}
READS = {"aten._local_scalar_dense.default", "aten.item.default"}
SKIP_ON_META = {"aten._fused_sgd_.tensor_lr"}  # no meta kernel: counted, not run
# ops that only alias their input (no kernel): besides every overload torch
# marks is_view, these composite / alias-returning ones
ALIASES = {"aten.view", "aten._unsafe_view", "aten.alias", "aten.detach", "aten.reshape",
           "aten.lift_fresh", "aten._reshape_alias", "aten.t", "aten.expand",
           "aten.as_strided", "aten.squeeze", "aten.unsqueeze", "aten.permute",
           "aten.transpose", "aten.slice", "aten.select", "aten.split", "aten.unbind"}


def is_alias(func) -> bool:
    """An op that launches no kernel: a view or an alias of its input."""
    return bool(getattr(func, "is_view", False)) or str(func.overloadpacket) in ALIASES
# the paper's one-head methods (bench.speed.graphtime's group is 5 seeds of them);
# no dropout: on CUDA inductor draws its own masks, which would part from the eager ones
PAPER_ONE_HEAD = ("sl1h", "ls", "mbls", "mixup", "dca")
COMPILED = "compiled "  # a compiled case's name: this, then what it runs
CELLS = "cells "  # a cell group's case name: this, then its members
CLOSE, CLOSE_ABS = 1e-4, 1e-5  # a compiled case's tolerance against the per-step path


def cases() -> dict:
    """Case name -> the methods of its members (one member: a single run):
    every built-in training method (`--method all` and the method groups),
    then fused groups: the one-head methods mixed, 2hsl+2hml, 4hml x3."""
    names = every_method()
    out = {n: (n,) for n in names}
    # as bench.train.groups stacks them: one head and one batch of images a step
    # (RankMixup feeds clean and mixed images, 2B, and fuses only with its like)
    one = tuple(n for n in names if create_method(n).heads == 1
                and getattr(create_method(n), "batch_multiple", 1) == 1)
    for how in ("fused", CELLS.strip()):  # vmapped groups, then cell groups
        out[f"{how} {len(one)} one-head"] = one
        out[f"{how} 2hsl+2hml"] = ("2hsl", "2hml")
        out[f"{how} 4hml x3"] = ("4hml",) * 3
    return out


def group_kind(case: str) -> str:
    """A group case's model: `cells ...` a cell group (bench.train.cells), else vmapped."""
    return "cells" if case.removeprefix(COMPILED).startswith(CELLS) else "vmap"


def compiled_cases() -> dict:
    """The compiled cases: one run, and a vmapped group, with compile_step=true."""
    return {f"{COMPILED}sl1h": ("sl1h",),
            f"{COMPILED}fused {len(PAPER_ONE_HEAD)} one-head": PAPER_ONE_HEAD}


class OpCounter(TorchDispatchMode):
    """Classifies every operator call of a step by where its tensors live."""

    def __init__(self, device: str):
        super().__init__()
        self.device = device
        self.counts, self.signature, self.host_names = Counter(), [], Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func)
        leaves = tree_leaves((args, kwargs))
        out = None if self.device == "meta" and name in SKIP_ON_META else func(*args, **kwargs)
        # where the data live; a zero-element tensor holds none (an op's empty
        # placeholder output allocated on the host computes and copies nothing)
        where = {t.device.type for t in (*leaves, *tree_leaves(out))
                 if isinstance(t, torch.Tensor) and (t.numel() or t.device.type == self.device)}
        host = bool(where - {self.device})
        scalars = self._host_scalars(leaves, out)
        if name in READS:
            self.counts["reads"] += 1
        elif host and name in COPIES and self.device in where:
            self.counts["h2d"] += 1
        elif host and (scalars is not None or _from_numbers(leaves, out)):
            self.counts["host scalars"] += 1
        elif host:
            self.counts["host ops"] += 1
            self.host_names[f"{name} at {_caller()}"] += 1
        else:
            self.counts["device ops"] += 1
            self.counts["kernels"] += not is_alias(func)  # views and aliases launch none
        # a host scalar's value is a kernel argument a capture freezes, as a number is
        self.signature.append((name, tuple(repr(a) for a in leaves
                                           if not isinstance(a, torch.Tensor)), scalars))
        return out

    def _host_scalars(self, leaves, out):
        """The values of an op's 0-dim host tensor inputs when they are all the
        host holds (its outputs and other inputs on the device): a device kernel
        takes such a scalar by value, no copy and no sync. Else None."""
        mine = [t for t in leaves if isinstance(t, torch.Tensor) and t.numel()
                and t.device.type != self.device]
        outs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.numel()]
        if not mine or any(t.dim() for t in mine) or any(t.device.type != self.device
                                                          for t in outs):
            return None
        return tuple(t.item() for t in mine)


def _from_numbers(leaves, out) -> bool:
    """A 0-dim host tensor made from Python numbers alone (no tensor input):
    how vmap wraps a number in a loss's arithmetic (`sum()` of per-head
    losses starts at the int 0) before a device kernel takes it by value. A
    constant: a capture freezes it, and `varying` sees it if it changes."""
    outs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
    return (not any(isinstance(t, torch.Tensor) for t in leaves) and bool(outs)
            and all(t.dim() == 0 for t in outs))


def _caller() -> str:
    """The innermost frame outside torch's own files: where a host op is asked for."""
    for frame in reversed(traceback.extract_stack()[:-3]):
        if "/torch/" not in frame.filename and "/functorch/" not in frame.filename:
            where = "/".join(frame.filename.split("/")[-2:])
            return f"{where}:{frame.lineno} ({frame.name})"
    return "?"


def group_stepper(names: tuple, backbone: str, size: int, cfg, device, how: str = "vmap"):
    torch.manual_seed(0)
    first = create_method(names[0])  # the members share an architecture
    base = build_model(backbone, size, first.heads, NUM_CLASSES,
                       arch=model_arch(first))[0]
    methods = []
    for s, n in enumerate(names):
        m = create_method(n)
        m.setup(NUM_CLASSES, s)
        methods.append(m)
    if len(names) == 1:
        return SingleStepper(copy.deepcopy(base), methods[0], cfg, device, seed=0)
    return FusedStepper([copy.deepcopy(base) for _ in names], methods, cfg,
                        list(range(len(names))), device, how)


def epoch_orders(stepper, n: int, cfg):
    orders = [epoch_batches(n, cfg.batch_size, g, drop_last=True) for g in stepper.gens]
    return orders, [cfg.lr * (1 - 0.01 * i) for i in range(len(orders[0]))]


def count_ops(names, backbone, size, cfg, device: str, how: str = "vmap") -> dict:
    """Per-step operator counts of the graph-safe step (the third of three:
    the first two warm caches up), and host values that changed from the
    second step to the third. Compiled (cfg.compile_step): those of its
    decomposed graph (bench.speed.graphops), traced on `device` itself."""
    where = "meta" if device == "cpu" else device
    ops = None
    if cfg.compile_step:
        from bench.speed.graphops import GraphOps  # lazy: AOTAutograd, inductor's tables (s)
        ops = GraphOps(where)
    on = device if ops else where
    st = group_stepper(names, backbone, size, dataclasses.replace(cfg, compile_step=False), on, how)
    x = torch.zeros(4 * cfg.batch_size, 3, size, size, dtype=torch.uint8, device=on)
    y = torch.zeros(4 * cfg.batch_size, dtype=torch.long, device=on)
    runner = GraphRunner(st, x, y, say=lambda text: None)
    runner.capture = False  # count the step itself, not a replay
    if ops:
        runner.gs.step = compile_graph_step(runner.gs, ops.backend())
    (n, stage, _), = runner.stage_epoch(*epoch_orders(st, len(y), cfg))
    counters = []
    for _ in range(3):
        c = OpCounter(where)
        if ops:  # no dispatch mode around a compiled call: dynamo would not compile under it
            ops.counter = c
            runner.step(n, stage)
        else:
            with c:
                runner.step(n, stage)
        counters.append(c)
    varying = sum(a != b for a, b in zip(counters[1].signature, counters[2].signature))
    varying += abs(len(counters[1].signature) - len(counters[2].signature))
    return {**{k: counters[2].counts[k] for k in ("h2d", "host ops", "host scalars", "reads",
                                                 "device ops", "kernels")},
            "varying": varying, "host_names": dict(counters[2].host_names),
            "graphs": ops.graphs if ops else "-"}


def graph_breaks(names, backbone, size, cfg, how: str = "vmap") -> int:
    """Graph breaks of one whole graph-safe step under torch._dynamo.explain (CPU)."""
    # compile_step off: explain traces the very code a compile_step run compiles
    st = group_stepper(names, backbone, size, dataclasses.replace(cfg, compile_step=False), "cpu",
                  how)
    x, y = synthetic(4 * cfg.batch_size, size, NUM_CLASSES, "cpu")
    runner = GraphRunner(st, x, y, say=lambda text: None)
    (n, stage, _), = runner.stage_epoch(*epoch_orders(st, len(y), cfg))
    runner.step(n, stage)  # lazy state (class weights on the device, kernels) first
    torch._dynamo.reset()
    return torch._dynamo.explain(runner.gs.step)(stage).graph_break_count


def _state(st) -> list:
    if isinstance(st, SingleStepper):
        return [t.detach().clone() for t in st.model.state_dict().values()]
    return [t.detach().clone() for t in (*st.fm.params.values(), *st.fm.buffers.values())]


def equal_to_per_step(names, backbone, size, cfg, device: str, steps: int,
                      how: str = "vmap") -> dict:
    """`steps` steps of the per-step path, of the graph-safe step and (CUDA)
    of its captured replay from the same start. -> {"equal": the graph-safe
    step's tensors bit for bit the per-step path's (compiled: "close" where
    within CLOSE), "replay": (CUDA) the replay's bit for bit the graph-safe
    step's, else None}."""
    x, y = synthetic(steps * cfg.batch_size, size, NUM_CLASSES, device)
    ref = group_stepper(names, backbone, size, cfg, device, how)
    deterministic_cudnn()
    ref.train_mode()
    orders, lrs = epoch_orders(ref, len(y), cfg)
    losses = [ref.step(x, y, idxs, lr) for idxs, lr in zip(zip(*orders), lrs)]
    want = _state(ref) + [torch.stack(losses).reshape(len(losses), -1).float()]
    got = {}
    for capture in ([False, True] if device != "cpu" else [False]):
        st = group_stepper(names, backbone, size, cfg, device, how)
        deterministic_cudnn()
        st.train_mode()
        runner = GraphRunner(st, x, y, say=lambda text: print(text, file=sys.stderr))
        runner.capture = capture
        losses = runner.run_epoch(*epoch_orders(st, len(y), cfg), tick=lambda loss: None)
        got[capture] = _state(st) + [torch.stack(losses)] if not capture or runner.kernels() \
            else None  # capture failed: nothing was replayed
    same = (lambda a, b: a is not None and all(torch.equal(u, v) for u, v in zip(a, b)))
    equal = same(got[False], want)
    if cfg.compile_step and not equal and close(got[False], want):
        equal = "close"
    return {"equal": equal,
            "replay": same(got[True], got[False]) if True in got else None}


def close(got: list, want: list) -> bool:
    """Every element within CLOSE (relative) or CLOSE_ABS of its reference's
    (the absolute floor for values near 0: a bias after a few steps)."""
    return all(torch.allclose(g.double(), w.double(), rtol=CLOSE, atol=CLOSE_ABS)
               for g, w in zip(got, want, strict=True))


def deterministic_cudnn() -> None:
    """cuDNN's algorithm fixed and deterministic, so that two runs of the same
    step compute the same bits on CUDA (set after a stepper is built: building
    one applies its config's backend switches)."""
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True


def check_case(name, names, s) -> dict:
    cfg = dataclasses.replace(PROFILES["paper"], graph="true", pretrained=False,
                              cudnn_benchmark=False, compile_step=name.startswith(COMPILED))
    row, how = {"case": name, "members": len(names), "graphs": "-"}, group_kind(name)
    row["breaks"] = "-" if s.no_explain else graph_breaks(names, s.backbone, s.size, cfg, how)
    row.update(count_ops(names, s.backbone, s.size, cfg, s.device, how))
    row.update(equal_to_per_step(names, s.backbone, s.size, cfg, s.device, s.steps, how))
    if row["replay"] is None:
        del row["replay"]
    row["ok"] = (row["equal"] is True or (cfg.compile_step and row["equal"] == "close")) \
        and row.get("replay", True) and row["breaks"] in (0, "-") \
        and row["graphs"] in (1, "-") \
        and not any(row[k] for k in ("h2d", "host ops", "reads", "varying"))
    return row


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        allow_abbrev=False, prog="python -m bench.speed.capture", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--backbone", default="smallcnn")
    p.add_argument("--size", type=int, default=28)
    p.add_argument("--steps", type=int, default=6, help="steps compared bit for bit (>= 5 on "
                   "CUDA: 3 warm-up steps, then the capture's replays)")
    p.add_argument("--cases", default="all", help="comma list of case names, or all")
    p.add_argument("--compile-step", action="store_true", help="add the compiled cases ("
                   + ", ".join(compiled_cases()) + "): an inductor compile each, slow")
    p.add_argument("--no-explain", action="store_true", help="leave out the graph-break count "
                   "(a CPU trace of every case: the CPU proof's part, slow on a GPU machine)")
    return p.parse_args(argv)


def choose(s) -> list:
    """The case names to run: --cases (all: every eager case), then with
    --compile-step the compiled cases too."""
    known = {**cases(), **compiled_cases()}
    chosen = list(cases()) if s.cases == "all" else s.cases.split(",")
    if s.compile_step:
        chosen = list(dict.fromkeys(chosen + list(compiled_cases())))
    bad = [c for c in chosen if c not in known]
    if bad:
        raise BenchError(f"--cases {','.join(bad)}: unknown; allowed: all, {', '.join(known)}")
    return chosen


def main(argv=None) -> int:
    s = parse_args(argv)
    try:
        check_device(s.device)
        known, chosen = {**cases(), **compiled_cases()}, choose(s)
        if s.steps < 2 or (s.device != "cpu" and s.steps < 5):
            raise BenchError(f"--steps must be >= 2 (>= 5 on CUDA), got {s.steps}")
    except BenchError as err:
        print(f"capture: {err}", file=sys.stderr)
        return 2
    rows = [check_case(c, known[c], s) for c in chosen]
    print(f"graph-safe step, {s.backbone} at {s.size} px, device {s.device}, torch "
          f"{torch.__version__} (synthetic data)")
    names = {r["case"]: r.pop("host_names") for r in rows}
    print(tabulate(rows, headers="keys"))
    for case, ops in names.items():  # what a failing count is made of
        if ops:
            print(f"host ops in {case}: " + ", ".join(f"{k} x{v}" for k, v in ops.items()))
    bad = [r["case"] for r in rows if not r["ok"]]
    print(f"{len(rows) - len(bad)} of {len(rows)} cases capturable and bit-equal"
          + (f" (compiled: within {CLOSE:g} / {CLOSE_ABS:g})" if any(r["graphs"] != "-" for r in rows) else "")
          + (f"; failing: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
