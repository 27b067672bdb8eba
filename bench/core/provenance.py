"""What produced a record: code version, packages, device."""
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
    import torch

    info = {"device": str(device), "host": platform.node(), "threads": torch.get_num_threads()}
    if str(device).startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = device_name(device)
    return info


def provenance(device: str) -> dict:
    return {
        "git": git_state(),
        "versions": versions(),
        "device": device_info(device),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
