"""Host-to-device copies that do not stall the GPU queue.

A plain `cpu_tensor.to("cuda")` is a blocking copy: PyTorch waits for the
stream to drain before it returns, so every small per-step copy (batch
indices, per-image augmentation parameters, a mixup permutation) would make
the CPU wait for the GPU to finish all queued work. At batch 8 the GPU only
keeps busy if the CPU can queue the next step's kernels while the current one
runs, so those copies go through pinned memory with non_blocking=True: the
copy is queued on the stream like a kernel, in order, and the pinned buffer is
not reused before it completes (PyTorch's host allocator records the stream).
On the CPU this is a plain `.to`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importers (the methods) load without torch
    import torch


def h2d(t: torch.Tensor, device) -> torch.Tensor:
    """`t.to(device)` without a host-device synchronisation on CUDA."""
    # torch on demand: the methods import this module, and `bench list` the methods
    import torch

    device = torch.device(device)
    if device.type != "cuda" or t.device.type != "cpu":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)
