"""What one training step of a paper backbone does, counted on the CPU without
running it: aten operations of the graph-safe step (bench.speed.capture's
counter, on the meta device) and FLOPs by torch's FlopCounterMode, split into
convolutions and matmuls (the released precision runs them differently:
TF32 convolutions, FP32 matmuls). Nothing is cached; a count takes about a
second per (backbone, size). bench.speed.projection turns them into time."""
from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from bench.core.config import PROFILES
from bench.speed.capture import count_ops
from bench.train.backbones import build_model

# torch's FlopCounterMode ignores `groups` in convolution_backward (a depthwise
# 7x7 convolution of ConvNeXt counts C times its FLOPs: 22.9 against 0.47
# GFLOP for 96 channels at 56 px, batch 8), so a backward convolution is taken
# as twice its forward (input and weight gradients), as for a dense layer.
CONV_BACKWARD = 2.0


def _flops(model, x, backward: bool) -> dict:
    """{"conv": FLOPs, "mm": FLOPs} of a forward (and backward) pass."""
    with FlopCounterMode(display=False) as fc:
        out = model(x)
        if backward:
            out.float().sum().backward()
    counts = {str(k): v for k, v in fc.get_flop_counts()["Global"].items()}
    conv = counts.pop("aten.convolution", 0) * (1 + CONV_BACKWARD * backward)
    counts.pop("aten.convolution_backward", None)
    return {"conv": conv, "mm": sum(counts.values())}


def count_step(backbone: str, size: int, classes: int = 9, batch: int = 8) -> dict:
    """ops: aten ops of one SL1H graph-safe step at batch 8 (augmentation,
    forward, loss, backward, SGD); conv/mm: FLOPs of its forward + backward;
    eval_conv/eval_mm: forward FLOPs per evaluated image."""
    torch.manual_seed(0)
    ops = count_ops(("sl1h",), backbone, size, PROFILES["paper"], "cpu")["kernels"]
    model = build_model(backbone, size, 1, classes)[0].to("meta")
    train = _flops(model, torch.empty(batch, 3, size, size, device="meta"), True)
    with torch.no_grad():
        model.eval()
        fwd = _flops(model, torch.empty(1, 3, size, size, device="meta"), False)
    return {"ops": ops, "conv": train["conv"], "mm": train["mm"],
            "eval_conv": fwd["conv"], "eval_mm": fwd["mm"]}
