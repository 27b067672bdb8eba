"""A cell group's model: every member of one architecture as one batched
model (bench.train.batched), behind the interface of bench.train.fused's
FusedModel, so the one loop (bench.train.loop.run_loop) trains it through
the same FusedStepper (`fuse_as=cells`).

Under vmap (FusedModel) every convolution becomes a grouped one and the card
runs the groups one by one: its kernels a step grow with the members. Here the
members' activations are laid out as channels ([B, N*C, H, W]): each layer is
one operation over all members (one batch norm, one batched matmul for a
linear layer or 1x1 convolution, one grouped convolution or unfold + batched
matmul for k x k, `--set cell_conv`), so the ops a step do not grow with N
(`python -m bench.speed.cellops`). Each member's numbers are its own: the
layout never mixes members' channels (tests/train/test_cell_groups.py).

A model with a layer that has no batched form (an efficient ensemble's
layers, most timm models) cannot join: `batchable` says why, and
`fuse_as=auto` trains such a group vmapped instead.
"""
from __future__ import annotations

import copy

import torch
from torch.func import functional_call

from bench.core.errors import BenchError
from bench.train.batched import batch_members


def batchable(model) -> str | None:
    """None where `model` has a batched form, else why not (one line)."""
    try:  # on the meta device: the structure is converted, no weight is stacked
        batch_members([copy.deepcopy(model).to("meta")])
    except BenchError as e:
        return str(e)
    return None


class CellModel:
    """N members as one BatchedModel: x [N, B, 3, H, W] -> [N, B, M, K].
    `params` / `buffers` are the batched model's own stacked tensors [N, ...]
    (SGD over them is each member's SGD, elementwise)."""

    def __init__(self, models: list, device, conv: str = "grouped"):
        if not models:
            raise BenchError("a cell group needs at least one model")
        self.model = batch_members([m.to(device) for m in models], conv).to(device)
        self.params = dict(self.model.named_parameters())
        self.buffers = dict(self.model.named_buffers())
        self.size = len(models)
        self._compiled = None

    def compile(self, mode: str = "default") -> None:
        """torch.compile the training forward, as FusedModel.compile: the
        stacked tensors, updated in place, marked as static addresses."""
        for t in (*self.params.values(), *self.buffers.values()):
            torch._dynamo.mark_static_address(t)
        self._compiled = torch.compile(self._forward, mode=mode)

    def __call__(self, x: torch.Tensor, shared_input: bool = False) -> torch.Tensor:
        if self._compiled is not None and self.model.training and not shared_input:
            return self._compiled(self.params, self.buffers, x)
        return self._forward(self.params, self.buffers, x, shared_input)

    def _forward(self, params, buffers, x, shared_input: bool = False):
        return functional_call(self.model, (params, buffers), (x,),
                               {"shared_input": shared_input})

    def train(self, mode: bool = True) -> None:
        self.model.train(mode)

    def snapshot(self, s: int) -> dict:
        """Member s's state_dict, keys and shapes as its model alone has them."""
        return self.model.member_state_dict(s)

    def load(self, s: int, state: dict) -> None:
        self.model.load_member_state_dict(s, state)
