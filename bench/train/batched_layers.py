"""The members-as-channels layers of bench.train.batched: N members' parameters
stacked as nn.Parameters [N, ...], activations laid out [B, N*C, ...] (see
bench.train.batched for the design)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bench.core.errors import BenchError

CONV_MODES = ("grouped", "unfold")


def stacked(members: list, name: str) -> nn.Parameter | None:
    """The members' parameter `name` stacked [N, ...] (None where they have none)."""
    first = getattr(members[0], name)
    if first is None:
        return None
    return nn.Parameter(torch.stack([getattr(m, name).detach() for m in members]).clone(),
                        requires_grad=first.requires_grad)


def stack_buffer(module: nn.Module, members: list, name: str) -> None:
    first = getattr(members[0], name)
    value = None if first is None else torch.stack([getattr(m, name) for m in members]).clone()
    module.register_buffer(name, value)


def member_matmul(x: torch.Tensor, w: torch.Tensor, pattern: str) -> torch.Tensor:
    """One batched matmul over the member dim `n` (einsum lowers it to one bmm)."""
    return torch.einsum(pattern, x, w)


class BatchedConv2d(nn.Module):
    """N Conv2d(Cin, Cout, k, groups=g) members; weight [N, Cout, Cin/g, k, k]."""

    def __init__(self, members: list, conv: str):
        super().__init__()
        m = members[0]
        self.n, self.conv = len(members), conv
        self.cin, self.cout, self.groups = m.in_channels, m.out_channels, m.groups
        self.kernel, self.stride = m.kernel_size, m.stride
        self.padding, self.dilation = m.padding, m.dilation
        if isinstance(self.padding, str) or m.padding_mode != "zeros":
            raise BenchError(f"batched members: Conv2d padding {m.padding!r}/"
                             f"{m.padding_mode} has no batched form (numeric zero padding only)")
        self.weight, self.bias = stacked(members, "weight"), stacked(members, "bias")

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.cin

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernel == (1, 1) and self.groups == 1 and self.padding == (0, 0):
            return self._pointwise(x)
        if self.conv == "unfold" and not self.depthwise:
            return self._unfold(x)
        w = self.weight.flatten(0, 1)  # [N*Cout, Cin/g, k, k], a view
        b = None if self.bias is None else self.bias.flatten()
        return F.conv2d(x, w, b, self.stride, self.padding, self.dilation, self.n * self.groups)

    def _pointwise(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride != (1, 1):
            x = x[:, :, ::self.stride[0], ::self.stride[1]]
        b, _, h, w = x.shape
        xs = x.reshape(b, self.n, self.cin, h * w)
        out = member_matmul(xs, self.weight.flatten(2), "bnil,noi->bnol")
        return self._biased(out.reshape(b, self.n * self.cout, h, w))

    def _unfold(self, x: torch.Tensor) -> torch.Tensor:
        if self.groups != 1:
            raise BenchError("batched members: conv=unfold takes dense or depthwise "
                             f"convolutions, not groups={self.groups}")
        b, _, h, w = x.shape
        cols = F.unfold(x, self.kernel, self.dilation, self.padding, self.stride)
        cols = cols.view(b, self.n, -1, cols.shape[-1])  # [B, N, Cin*k*k, L]
        out = member_matmul(cols, self.weight.flatten(2), "bnil,noi->bnol")
        ho, wo = (_out_size(s, k, p, st, d) for s, k, p, st, d in
                  zip((h, w), self.kernel, self.padding, self.stride, self.dilation))
        return self._biased(out.reshape(b, self.n * self.cout, ho, wo))

    def _biased(self, out: torch.Tensor) -> torch.Tensor:
        return out if self.bias is None else out + self.bias.view(1, -1, 1, 1)


def _out_size(size: int, k: int, pad: int, stride: int, dil: int) -> int:
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


class BatchedLinear(nn.Module):
    """N Linear(Cin, Cout) members on [..., N*Cin]; weight [N, Cout, Cin]."""

    def __init__(self, members: list):
        super().__init__()
        self.n = len(members)
        self.cin, self.cout = members[0].in_features, members[0].out_features
        self.weight, self.bias = stacked(members, "weight"), stacked(members, "bias")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        xs = x.reshape(-1, self.n, self.cin)
        out = member_matmul(xs, self.weight, "lni,noi->lno")
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*lead, self.n * self.cout)


class BatchedBatchNorm2d(nn.Module):
    """N BatchNorm2d(C) members as one batch norm over N*C channels: each
    channel's statistics and gradients are its own, as alone."""

    def __init__(self, members: list):
        super().__init__()
        m = members[0]
        self.n, self.eps, self.momentum = len(members), m.eps, m.momentum
        self.track = m.track_running_stats
        self.weight, self.bias = stacked(members, "weight"), stacked(members, "bias")
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            stack_buffer(self, members, name)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # as nn.BatchNorm2d.forward: count the batch, momentum None = cumulative mean
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                momentum = 1.0 / float(self.num_batches_tracked[0])
        use_batch = self.training or self.running_mean is None
        flat = [None if t is None else t.view(-1) for t in
                (self.running_mean, self.running_var, self.weight, self.bias)]
        mean, var = flat[:2] if (not self.training or self.track) else (None, None)
        return F.batch_norm(x, mean, var, flat[2], flat[3], use_batch, momentum, self.eps)


class BatchedLayerNorm(nn.Module):
    """N LayerNorm(C) members over the last dim of [..., N*C] (channels_first:
    LayerNorm2d, over dim 1 of [B, N*C, H, W])."""

    def __init__(self, members: list, channels_first: bool = False):
        super().__init__()
        m = members[0]
        self.n, self.eps, self.shape = len(members), m.eps, tuple(m.normalized_shape)
        if len(self.shape) != 1:
            raise BenchError(f"batched members: LayerNorm over {self.shape} (one dim only)")
        self.channels_first = channels_first
        self.weight, self.bias = stacked(members, "weight"), stacked(members, "bias")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.channels_first:
            return self._last(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return self._last(x)

    def _last(self, x: torch.Tensor) -> torch.Tensor:
        xs = x.unflatten(-1, (self.n, self.shape[0]))
        y = F.layer_norm(xs, self.shape, None, None, self.eps)
        if self.weight is not None:
            y = torch.addcmul(self.bias, y, self.weight) if self.bias is not None \
                else y * self.weight
        return y.flatten(-2)


class BatchedDropPath(nn.Module):
    """Row-mode stochastic depth of N members: one [B, N] keep mask a call."""

    def __init__(self, p: float, n: int, channel_dim: int):
        super().__init__()
        self.p, self.n, self.channel_dim = p, n, channel_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        survival = 1.0 - self.p
        dim = self.channel_dim % x.dim()
        shape = [x.shape[0]] + [1] * (x.dim() - 1)
        shape[dim] = self.n
        noise = x.new_empty(shape).bernoulli_(survival)
        if survival > 0.0:
            noise.div_(survival)
        size = list(x.shape)
        return (x.unflatten(dim, (self.n, size[dim] // self.n))
                * noise.unsqueeze(dim + 1)).flatten(dim, dim + 1)


