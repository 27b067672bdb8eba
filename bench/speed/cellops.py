"""ATen ops of one training step of a batched model (bench.train.batched) at
N members: forward, cross-entropy loss, backward (SGD step with --sgd), views
and aliases left out (they launch no kernel). Counted on the meta device:
shapes only, no arithmetic, so N = 40 ResNet50 counts in seconds on a CPU.

    python -m bench.speed.cellops [--size 32] [--batch 2] [--members 1 5 10 40]

prints per backbone and conv setting the ops at each N, the growth per added
member, and the convolutions whose groups > 1 that are not depthwise (none
under conv=unfold: its k x k convolutions are unfold + batched matmul).
From N = 2 on the count does not grow with N; N = 1 has fewer ops, its
member-layout copies being views.
"""
from __future__ import annotations

import argparse
import dataclasses
from collections import Counter

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from bench.core.config import PROFILES
from bench.speed.capture import PAPER_ONE_HEAD, count_ops, is_alias
from bench.train.backbones import build_model
from bench.train.batched import CONV_MODES, batch_members

BACKBONES = ("resnet50", "convnext_tiny", "swin_tiny")
CONV_OPS = ("aten.convolution", "aten.convolution_backward")


class KernelOps(TorchDispatchMode):
    """Counts ATen ops by name, views and aliases left out; keeps each
    convolution's groups and whether it is depthwise, and the dtypes of the
    convolutions' and matmuls' inputs."""

    def __init__(self):
        super().__init__()
        self.ops, self.grouped, self.dtypes = Counter(), [], Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not is_alias(func):
            name = str(func.overloadpacket)
            self.ops[name] += 1
            if name in CONV_OPS:
                self._conv(name, args)
            if name in CONV_OPS or name in ("aten.mm", "aten.bmm", "aten.addmm", "aten.baddbmm"):
                self.dtypes[(name, tuple(str(a.dtype) for a in args[:3]
                                         if isinstance(a, torch.Tensor)))] += 1
        return func(*args, **kwargs)

    def _conv(self, name: str, args) -> None:
        x, w = (args[0], args[1]) if name == "aten.convolution" else (args[1], args[2])
        groups = args[8] if name == "aten.convolution" else args[9]
        if groups > 1:
            self.grouped.append((groups, groups == x.shape[1] and w.shape[1] == 1))

    @property
    def total(self) -> int:
        return sum(self.ops.values())


def step_ops(model, n: int, batch: int, size: int, classes: int, sgd: bool = False,
             device: str = "meta") -> KernelOps:
    """The ops of one training step of `model` (a BatchedModel of n members)."""
    x = torch.randn(n, batch, 3, size, size, device=device)
    y = torch.zeros(n * batch, dtype=torch.long, device=device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1) if sgd else None
    with KernelOps() as counter:
        out = model(x)
        loss = F.cross_entropy(out.reshape(n * batch, -1), y)
        loss.backward()
        if opt is not None:
            opt.step()
    return counter


def batched(backbone: str, n: int, size: int, conv: str, classes: int = 9):
    torch.manual_seed(0)
    with torch.device("meta"):
        models = [build_model(backbone, size, 1, classes)[0] for _ in range(n)]
    return batch_members(models, conv).train()


def group_step_ops(backbone: str, n: int, size: int, batch: int,
                   names: tuple = PAPER_ONE_HEAD, interleave: bool = False) -> int:
    """Kernels (views and aliases left out) of one graph-safe step of a cell
    group of n members of the methods `names`: augmentation, the batched
    forward, every member's loss, backward, SGD. On the meta device
    (bench.speed.capture.count_ops); n = 1 is the run alone. Members as a
    grid lists them, each method's seeds together (n = 40 of 5 methods: 8
    seeds each), or with `interleave` each member another method than the
    last (the worst case: no loss is shared, bench.train.seedloss)."""
    members = tuple(names[i % len(names)] if interleave else names[i * len(names) // n]
                    for i in range(n))
    cfg = dataclasses.replace(PROFILES["paper"], graph="true", pretrained=False,
                              batch_size=batch, augment_mode="batched")
    return count_ops(members, backbone, size, cfg, "cpu", "cells")["kernels"]


def print_group(args, ns: list) -> None:
    print(f"kernels of one cell-group step (graph-safe step: augmentation, forward, each "
          f"member's loss, backward, SGD; views left out), {args.size} px, batch "
          f"{args.batch} a member, the paper's one-head methods ({', '.join(PAPER_ONE_HEAD)}), "
          "each method's seeds together")
    print(f"{'backbone':15} " + " ".join(f"N={n:<6}" for n in ns) + " per added member")
    for backbone in args.backbones:
        counts = [group_step_ops(backbone, n, args.size, args.batch) for n in ns]
        first = next((i for i, n in enumerate(ns) if n >= 2), 0)
        grow = (counts[-1] - counts[first]) / max(ns[-1] - ns[first], 1)
        print(f"{backbone:15} " + " ".join(f"{c:<8}" for c in counts) + f" {grow:.2f}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.speed.cellops", description=__doc__,
                                 allow_abbrev=False)
    ap.add_argument("--size", type=int, default=32, help="image size (px)")
    ap.add_argument("--batch", type=int, default=2, help="images per member")
    ap.add_argument("--members", type=int, nargs="+", default=[1, 5, 10, 40])
    ap.add_argument("--backbones", nargs="+", default=list(BACKBONES))
    ap.add_argument("--sgd", action="store_true", help="count the SGD step too")
    ap.add_argument("--group", action="store_true", help="count the whole step of a cell "
                    "group (bench.train.cells) with its members' losses, instead of the model's")
    args = ap.parse_args(argv)
    ns = sorted(args.members)
    if args.group:
        return print_group(args, ns)
    print(f"ATen ops of one training step (views left out), {args.size} px, batch "
          f"{args.batch} a member{', SGD step included' if args.sgd else ''}")
    print(f"{'backbone':15} {'conv':8} " + " ".join(f"N={n:<6}" for n in ns)
          + " per member  grouped non-depthwise")
    for backbone in args.backbones:
        for conv in CONV_MODES:
            counts = [step_ops(batched(backbone, n, args.size, conv), n, args.batch,
                               args.size, 9, args.sgd) for n in ns]
            # N = 1 is its own case: its member layout copies are views
            # (one member's [B, 1, C, L] is already [B, C, L]), so the growth
            # is read from the first N >= 2
            first = next((i for i, n in enumerate(ns) if n >= 2), 0)
            grow = (counts[-1].total - counts[first].total) / max(ns[-1] - ns[first], 1)
            dense = sum(1 for _, dw in counts[-1].grouped if not dw)
            print(f"{backbone:15} {conv:8} " + " ".join(f"{c.total:<8}" for c in counts)
                  + f" {grow:<11.2f} {dense}")


if __name__ == "__main__":
    main()
