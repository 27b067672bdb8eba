"""Swin-T's layers for bench.train.batched: N members' shifted-window attention,
patch merging and blocks, in the members-as-channels layout [B, H, W, N*C].

The window attention folds the members into the batch ([N, B, H, W, C], one
copy in and one out): the windows' qkv and output projections are one
batched matmul each over the members' own weights [N, 3C, C] / [N, C, C], the
attention matmuls run over all members' windows at once, and every member
adds its own relative position bias; the shift mask is the same for all.
The arithmetic is torchvision's shifted_window_attention, step by step.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models.swin_transformer import (PatchMerging, ShiftedWindowAttention,
                                                 SwinTransformerBlock)

from bench.train.batched_layers import BatchedDropPath, BatchedLinear, stack_buffer, stacked


def convert(members: list, ctx) -> nn.Module | None:
    """The batched form of a Swin layer; None for any other module."""
    kind = type(members[0])
    if kind is ShiftedWindowAttention:
        return BatchedWindowAttention(members)
    if kind is PatchMerging:
        return BatchedPatchMerging(members, ctx)
    if kind is SwinTransformerBlock:
        return BatchedSwinBlock(members, ctx)
    return None


class BatchedSwinBlock(nn.Module):
    """SwinTransformerBlock: its layers batched, drop path over the last dim."""

    def __init__(self, members: list, ctx):
        super().__init__()
        m = members[0]
        self.norm1 = ctx.convert([x.norm1 for x in members])
        self.attn = ctx.convert([x.attn for x in members])
        self.stochastic_depth = BatchedDropPath(m.stochastic_depth.p, len(members), -1)
        self.norm2 = ctx.convert([x.norm2 for x in members])
        self.mlp = ctx.convert([x.mlp for x in members])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.stochastic_depth(self.attn(self.norm1(x)))
        x = x + self.stochastic_depth(self.mlp(self.norm2(x)))
        return x


class BatchedPatchMerging(nn.Module):
    """PatchMerging: each member's 2x2 neighbours side by side (torchvision's
    order x0, x1, x2, x3 = (h, w) offsets (0,0), (1,0), (0,1), (1,1)), then
    its norm and reduction."""

    def __init__(self, members: list, ctx):
        super().__init__()
        self.n = len(members)
        self.reduction = ctx.convert([x.reduction for x in members])  # torchvision's order
        self.norm = ctx.convert([x.norm for x in members])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, nc = x.shape
        x = F.pad(x, (0, 0, 0, w % 2, 0, h % 2))
        h2, w2 = (h + h % 2) // 2, (w + w % 2) // 2
        x = x.view(b, h2, 2, w2, 2, self.n, nc // self.n)
        x = x.permute(0, 1, 3, 5, 4, 2, 6).reshape(b, h2, w2, 4 * nc)
        return self.reduction(self.norm(x))


class BatchedWindowAttention(nn.Module):
    """ShiftedWindowAttention (Swin v1) of N members."""

    def __init__(self, members: list):
        super().__init__()
        m = members[0]
        self.n, self.heads = len(members), m.num_heads
        self.window_size, self.shift_size = list(m.window_size), list(m.shift_size)
        self.attention_dropout, self.dropout = m.attention_dropout, m.dropout
        self.qkv, self.proj = BatchedLinear([x.qkv for x in members]), \
            BatchedLinear([x.proj for x in members])
        self.relative_position_bias_table = stacked(members, "relative_position_bias_table")
        stack_buffer(self, members, "relative_position_index")

    def position_bias(self) -> torch.Tensor:
        """[N, 1, heads, T, T]: every member's own bias (torchvision's
        _get_relative_position_bias, per member)."""
        t = self.window_size[0] * self.window_size[1]
        bias = self.relative_position_bias_table[:, self.relative_position_index[0]]
        return bias.view(self.n, t, t, -1).permute(0, 3, 1, 2).unsqueeze(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, nc = x.shape
        n, c, ws = self.n, nc // self.n, self.window_size
        x = x.view(b, h, w, n, c).permute(3, 0, 1, 2, 4)  # [N, B, H, W, C]
        pad_r, pad_b = (ws[1] - w % ws[1]) % ws[1], (ws[0] - h % ws[0]) % ws[0]
        x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
        ph, pw = h + pad_b, w + pad_r
        shift = [0 if ws[0] >= ph else self.shift_size[0], 0 if ws[1] >= pw else self.shift_size[1]]
        if sum(shift) > 0:
            x = torch.roll(x, shifts=(-shift[0], -shift[1]), dims=(2, 3))
        nh, nw = ph // ws[0], pw // ws[1]
        t = ws[0] * ws[1]
        x = x.reshape(n, b, nh, ws[0], nw, ws[1], c).permute(0, 1, 2, 4, 3, 5, 6)
        x = x.reshape(n, b * nh * nw * t, c)  # every member's windows, one after another
        out = self._attend(x, b * nh * nw, t, c, shift, (ph, pw), nh * nw)
        out = out.view(n, b, nh, nw, ws[0], ws[1], c).permute(0, 1, 2, 4, 3, 5, 6)
        out = out.reshape(n, b, ph, pw, c)
        if sum(shift) > 0:
            out = torch.roll(out, shifts=(shift[0], shift[1]), dims=(2, 3))
        return out[:, :, :h, :w].permute(1, 2, 3, 0, 4).reshape(b, h, w, nc)

    def _attend(self, x, windows: int, t: int, c: int, shift, padded, num_windows):
        """x [N, windows*T, C] -> the same after attention and projection."""
        n, heads = self.n, self.heads
        qkv = self._linear(self.qkv, x)  # [N, windows*T, 3C]
        qkv = qkv.reshape(n * windows, t, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q * (c // heads) ** -0.5
        attn = q.matmul(k.transpose(-2, -1))  # [N*windows, heads, T, T]
        attn = attn.view(n, windows, heads, t, t) + self.position_bias()
        if sum(shift) > 0:
            mask = shift_mask(x, padded, self.window_size, shift, num_windows)
            attn = attn.view(-1, num_windows, heads, t, t) + mask.unsqueeze(1).unsqueeze(0)
        attn = F.softmax(attn.view(-1, heads, t, t), dim=-1)
        attn = F.dropout(attn, p=self.attention_dropout, training=self.training)
        out = attn.matmul(v).transpose(1, 2).reshape(n, windows * t, c)
        out = self._linear(self.proj, out)
        return F.dropout(out, p=self.dropout, training=self.training)

    @staticmethod
    def _linear(layer: BatchedLinear, x: torch.Tensor) -> torch.Tensor:
        """[N, L, Cin] -> [N, L, Cout] with member n's own weight: one bmm."""
        out = torch.einsum("nli,noi->nlo", x, layer.weight)
        return out if layer.bias is None else out + layer.bias.unsqueeze(1)


def shift_mask(x: torch.Tensor, padded, ws, shift, num_windows: int) -> torch.Tensor:
    """torchvision's shifted-window mask [nW, T, T] (0 or -100), shared by all members."""
    ph, pw = padded
    mask = x.new_zeros((ph, pw))
    h_slices = ((0, -ws[0]), (-ws[0], -shift[0]), (-shift[0], None))
    w_slices = ((0, -ws[1]), (-ws[1], -shift[1]), (-shift[1], None))
    count = 0
    for hs in h_slices:
        for wsl in w_slices:
            mask[hs[0]:hs[1], wsl[0]:wsl[1]] = count
            count += 1
    mask = mask.view(ph // ws[0], ws[0], pw // ws[1], ws[1])
    mask = mask.permute(0, 2, 1, 3).reshape(num_windows, ws[0] * ws[1])
    mask = mask.unsqueeze(1) - mask.unsqueeze(2)
    return mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
