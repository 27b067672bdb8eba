"""What produced a record: code version, packages, device, and the settings that
change the numbers without changing the config hash (torch threads, device
name, torch / CUDA / cuDNN versions), so a report can say when one table mixes them."""
from __future__ import annotations

import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from bench.core.device import device_name

PACKAGES = ("mhml-bench", "torch", "torchvision", "timm", "numpy", "scikit-learn")
REPO = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_state() -> dict:
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def versions() -> dict:
    out = {"python": sys.version.split()[0]}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def device_info(device: str) -> dict:
    # torch on demand: bench.core stays torch-free
    import torch

    # CPU reductions split work by thread count: 1 vs 2 threads gave different
    # accuracies for one config hash, so the count is recorded.
    info = {"device": str(device), "host": platform.node(), "threads": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads(), "cpu": cpu_name(),
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": cudnn_version()}
    if str(device).startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = device_name(device)
    return info


def cudnn_version():
    """cuDNN's version, or None where it is absent or cannot load (a CUDA
    build of torch on a machine with no GPU raises inside torch here)."""
    # torch on demand: bench.core stays torch-free
    import torch

    try:
        return torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except (RuntimeError, ValueError):
        return None


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# What changes the numbers of one config hash: (label, where in provenance).
NUMERIC_SETUP = (("torch threads", "threads"), ("device", "gpu"), ("CPU", "cpu"),
                 ("torch", "torch"), ("cuDNN", "cudnn"))


def mixed_setup(provenances: list[dict]) -> list[str]:
    """'torch threads 1, 2'-style texts for each setting that differs between the
    provenance dicts of one table's records (records that predate a field: 'unrecorded')."""
    out = []
    for label, key in NUMERIC_SETUP:
        if key == "gpu" and not any((p.get("device") or {}).get("gpu") for p in provenances):
            continue  # CPU runs: the CPU line says it
        seen = sorted({str((p.get("device") or {}).get(key, "unrecorded")) for p in provenances})
        if len(seen) > 1:
            out.append(f"{label} {', '.join(seen)}")
    return out


def provenance(device: str) -> dict:
    return {
        "git": git_state(),
        "versions": versions(),
        "device": device_info(device),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
