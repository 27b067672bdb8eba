"""The compiled step's operators, counted: a torch.compile backend for
bench.speed.capture's compiled cases.

Inductor's generated code runs its own kernels, which no TorchDispatchMode
sees, and dynamo does not compile under an active dispatch mode at all. So
the counter watches the graph inductor would lower instead: the step traced
by dynamo (fullgraph), functionalised and decomposed by AOTAutograd with
inductor's own decomposition table, then run operator by operator. On CUDA
that graph is run as traced, on the card. On a CPU the graph is traced on the
CPU, where host and device are one: each call also replays a copy of it on
the meta device (its device arguments and constant tensors moved there), so
that a copy, a scalar read or a host value in it stands out as in the eager
count. That retargeting would also move a tensor the step's own code put on
the host; the eager case of the same step counts those (0), so the compiled
case adds what compilation brings: its decompositions, and one graph for
every step (`graphs`: no recompilation as the step's inputs change).
"""
from __future__ import annotations

import copy

import torch
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd
from torch._inductor.decomposition import select_decomp_table
from torch.utils._pytree import tree_map

META = torch.device("meta")


class GraphOps:
    """backend(): a torch.compile backend that runs the decomposed graph
    eagerly; while `counter` (a bench.speed.capture.OpCounter) is set, each
    call is counted by it on the device `where` ("meta" on a CPU).
    `graphs`: how many graphs were compiled."""

    def __init__(self, where: str):
        self.where, self.counter, self.graphs = torch.device(where), None, 0

    def backend(self):
        return aot_autograd(fw_compiler=self._compiled, decompositions=select_decomp_table())

    def _compiled(self, gm: torch.fx.GraphModule, example_inputs):
        self.graphs += 1
        meta = []  # the graph's meta copy, made at its first counted call (not under
        # the compiler's fake tensor mode, which would copy its constants as fakes)

        def run(*args):
            if self.counter is None:
                return gm(*args)
            if self.where.type != "meta":  # traced on the device counted: counted there
                with self.counter:
                    return gm(*args)
            meta[:] = meta or [on_meta_device(gm)]
            inputs = tree_map(_to_meta, args)
            with self.counter:  # the meta replay, counted; then the real step
                meta[0](*inputs)
            return gm(*args)
        return make_boxed_func(run)


def on_meta_device(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of a graph traced on the CPU that runs on the meta device: every
    device argument of its operators and every constant tensor moved there."""
    gm = copy.deepcopy(gm)
    for node in gm.graph.nodes:
        node.args, node.kwargs = tree_map(_meta_device, (node.args, node.kwargs))
        if node.op == "get_attr":
            holder, _, name = node.target.rpartition(".")
            owner = gm.get_submodule(holder) if holder else gm
            value = getattr(owner, name)
            if isinstance(value, torch.Tensor):
                setattr(owner, name, _to_meta(value))
    gm.recompile()
    return gm


def _meta_device(a):
    return META if isinstance(a, torch.device) and a.type == "cpu" else a


def _to_meta(a):
    return a.to(META) if isinstance(a, torch.Tensor) else a
