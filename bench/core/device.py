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
    # torch on demand: bench.core stays torch-free
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def check_device(device: str, indexed: bool = False) -> None:
    """One-line errors for a --device value: cpu, or cuda when one is visible
    (`indexed`: also cuda:N, N below the number of visible GPUs)."""
    # torch on demand: bench.core stays torch-free
    import torch

    kind, sep, index = device.partition(":")
    if device not in DEVICES and not (indexed and kind == "cuda" and index.isdigit()):
        raise choices_error("device", device, DEVICES + (("cuda:N",) if indexed else ()))
    if kind == "cuda" and not torch.cuda.is_available():
        raise BenchError(f"--device {device}: no CUDA device is visible; use --device cpu")
    if sep and int(index) >= torch.cuda.device_count():
        raise BenchError(f"--device {device}: only {torch.cuda.device_count()} CUDA device(s) "
                         f"are visible (cuda:0..cuda:{torch.cuda.device_count() - 1})")


def device_name(device) -> str:
    """The GPU's name for a CUDA device (as peak-FLOP tables match it), else
    'cpu (processor, N threads)'."""
    # torch on demand: bench.core stays torch-free
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
