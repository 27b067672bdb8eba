"""N models of one architecture as one module whose kernels do not grow with N.

`batch_members(models)` returns a BatchedModel: x [N, B, C, H, W] -> [N, B, ...],
each member's output as it alone computes it. The members' parameters are
stacked as nn.Parameters [N, ...] under the member's own names, so a plain
torch.optim.SGD over it updates every member elementwise as its own would.

Layout: "members as channels". A member's activation [B, C, ...] (or
channels-last [B, ..., C]) is held as [B, N*C, ...] (or [B, ..., N*C]), member
n's channels at n*C ... n*C + C-1. Layers that act per channel or per element
(ReLU, GELU, pooling, Flatten, Permute, dropout, residual sums) run unchanged
on it; the layers that mix channels run once over all members:
- k x k convolution: conv="grouped": one F.conv2d with groups = N*g (weight
  [N*Cout, Cin/g, k, k]); conv="unfold": F.unfold + one batched matmul over
  members, no convolution op at all. A depthwise convolution (ConvNeXt's 7x7,
  groups = C) stays one convolution with groups = N*C in both settings: alone it
  is already a groups = C convolution, one kernel over all channels, and its
  unfold form would hold k*k copies of the activation (49x at 224 px).
- 1x1 convolution and Linear: one einsum (a bmm) with weight [N, Cout, Cin].
- BatchNorm: one F.batch_norm over [B, N*C, H, W] with running statistics
  [N, C] viewed as [N*C]: per channel, so bit-identical to each member alone.
- LayerNorm: F.layer_norm over C of [..., N, C], then the stacked affine.
- Swin's shifted-window attention, patch merging (bench.train.batched_attn) and
  ConvNeXt's layer scale: batched over members.
- Stochastic depth (row mode): one draw of a [B, N] keep mask a step, from
  the global RNG: every member and sample independent with the probability it
  has alone; not the draws a member alone would make (one RNG stream serves all).
A module type with parameters and no batched form is refused naming it.
"""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models.convnext import CNBlock, ConvNeXt, LayerNorm2d
from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet
from torchvision.models.swin_transformer import SwinTransformer
from torchvision.ops.misc import MLP, Conv2dNormActivation, Permute
from torchvision.ops import StochasticDepth

from bench.core.errors import BenchError
from bench.train import batched_attn
from bench.train.batched_layers import (CONV_MODES, BatchedBatchNorm2d, BatchedConv2d, BatchedDropPath, BatchedLayerNorm, BatchedLinear,
                                         stack_buffer, stacked)
from bench.train.nets import MultiHeadNet

class BatchedCNBlock(nn.Module):
    """ConvNeXt's block: its layers batched, the layer scale [N, C, 1, 1]."""

    def __init__(self, members: list, ctx: "Batcher"):
        super().__init__()
        self.n = len(members)
        self.block = ctx.convert([m.block for m in members])
        self.layer_scale = stacked(members, "layer_scale")
        self.stochastic_depth = BatchedDropPath(members[0].stochastic_depth.p, self.n, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result = self.layer_scale.flatten(0, 1) * self.block(x)
        result = self.stochastic_depth(result)
        result += x
        return result


class BatchedMultiHead(nn.Module):
    """bench.train.nets.MultiHeadNet of N members -> [N, B, M, K]."""

    def __init__(self, members: list, ctx: "Batcher"):
        super().__init__()
        m = members[0]
        self.n, self.heads, self.num_classes = len(members), m.heads, m.num_classes
        self.backbone = ctx.convert([x.backbone for x in members])
        self.head = None if m.head is None else ctx.convert([x.head for x in members])
        self.per_head = None if m.per_head is None else \
            ctx.convert([x.per_head for x in members])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.backbone(x)
        b = f.shape[0]
        if self.per_head is None:  # [B, N*M*K]
            out = self.head(f).view(b, self.n, self.heads, self.num_classes)
        else:  # M x [B, N*K]
            out = torch.stack([h(f) for h in self.per_head], dim=1)
            return out.view(b, self.heads, self.n, self.num_classes).permute(2, 0, 1, 3)
        return out.transpose(0, 1)


# Module types that commute with the members-as-channels layout: no parameters
# of their own, acting per element, per channel or on spatial dims only (their
# children are converted). Anything else needs a converter below.
def _passthrough() -> tuple:
    return (nn.Sequential, nn.ModuleList, nn.Identity, nn.ReLU, nn.GELU, nn.SiLU, nn.Dropout,
            nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.Flatten, Permute, MLP,
            Conv2dNormActivation, ResNet, Bottleneck, BasicBlock, ConvNeXt, SwinTransformer)


class Batcher:
    """Builds the batched counterpart of N members' module trees, by type."""

    def __init__(self, n: int, conv: str):
        if conv not in CONV_MODES:
            raise BenchError(f"unknown cell_conv '{conv}'; choose from: {', '.join(CONV_MODES)}")
        self.n, self.conv = n, conv
        self.passthrough = _passthrough()

    def convert(self, members: list) -> nn.Module:
        m = members[0]
        if m is None:  # an absent child (ResNet's downsample)
            return None
        kinds = {type(x) for x in members}
        if len(kinds) != 1:
            raise BenchError(f"batched members differ in architecture: {sorted(map(str, kinds))}")
        if type(m) is nn.Conv2d:
            return BatchedConv2d(members, self.conv)
        if type(m) is nn.Linear:
            return BatchedLinear(members)
        if type(m) is nn.BatchNorm2d or type(m).__name__ == "MixedBatchNorm2d":
            return BatchedBatchNorm2d(members)
        if type(m) in (nn.LayerNorm, LayerNorm2d):
            return BatchedLayerNorm(members, channels_first=type(m) is LayerNorm2d)
        if type(m) is CNBlock:
            return BatchedCNBlock(members, self)
        if type(m) is MultiHeadNet:
            return BatchedMultiHead(members, self)
        if type(m) is StochasticDepth and m.p == 0.0:
            return nn.Identity()
        special = batched_attn.convert(members, self)
        if special is not None:
            return special
        if isinstance(m, self.passthrough) and not any(True for _ in m.named_parameters(
                recurse=False)) and not any(True for _ in m.named_buffers(recurse=False)):
            return self._children(members)
        raise BenchError(f"batched members: no batched form of {type(m).__name__} "
                         "(known: the torchvision ResNet, ConvNeXt and Swin layers, smallcnn's)")

    def _children(self, members: list) -> nn.Module:
        out = copy.copy(members[0])  # same class and attributes, new children below
        out._modules = {name: self.convert([m._modules[name] for m in members])
                        for name in members[0]._modules}
        out._parameters, out._buffers = {}, {}
        return out


class BatchedModel(nn.Module):
    """N members as one module: forward(x [N, B, C, H, W]) -> [N, B, ...]."""

    def __init__(self, models: list, conv: str = "grouped"):
        super().__init__()
        if not models:
            raise BenchError("batched members: at least one model")
        self.n, self.conv = len(models), conv
        self.body = Batcher(self.n, conv).convert(list(models))
        self.train(models[0].training)

    def forward(self, x: torch.Tensor, shared_input: bool = False) -> torch.Tensor:
        """x [N, B, C, H, W] (or [B, C, H, W] with shared_input: every member the same)."""
        if shared_input:
            xs = x.repeat(1, self.n, *([1] * (x.dim() - 2)))
        else:
            xs = x.transpose(0, 1).flatten(1, 2)  # [B, N*C, H, W]
        out = self.body(xs)
        if isinstance(self.body, BatchedMultiHead):
            return out
        return out.unflatten(1, (self.n, -1)).transpose(0, 1)

    def member_state_dict(self, i: int) -> dict:
        """Member i's state_dict, keys and shapes as its own model has them."""
        return {k.removeprefix("body."): v[i].detach().clone()
                for k, v in self.state_dict().items()}

    @torch.no_grad()
    def load_member_state_dict(self, i: int, state: dict) -> None:
        ours = self.state_dict()
        keys = {k.removeprefix("body.") for k in ours}
        if keys != set(state):
            raise BenchError(f"member state: keys differ ({sorted(keys ^ set(state))[:3]} ...)")
        for k, v in ours.items():
            v[i].copy_(state[k.removeprefix("body.")])


def batch_members(models: list, conv: str = "grouped") -> BatchedModel:
    """N models of one architecture as one BatchedModel (module docstring)."""
    return BatchedModel(models, conv)
