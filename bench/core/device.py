"""Which device to run on, checking a --device value, and naming the device.

One place for the CLI, the trainer, the run records (bench.core.provenance)
and the speed tools (bench.speed.*), so they agree on the default, the error
and the name printed next to a timing.
"""
from __future__ import annotations

import platform

from bench.core.errors import BenchError, choices_error

DEVICES = ("cpu", "cuda")


def default_device() -> str:
    """cuda when a GPU is visible, else cpu."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def check_device(device: str) -> None:
    """One-line errors for a --device value: cpu, or cuda when one is visible."""
    import torch

    if device not in DEVICES:
        raise choices_error("device", device, DEVICES)
    if device == "cuda" and not torch.cuda.is_available():
        raise BenchError("--device cuda: no CUDA device is visible; use --device cpu")


def device_name(device) -> str:
    """The GPU's name for a CUDA device (as peak-FLOP tables match it), else
    'cpu (processor, N threads)'."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
