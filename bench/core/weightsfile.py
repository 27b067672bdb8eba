"""A run's selected checkpoint as `model.safetensors` (bench run --keep-weights).

The file is a plain safetensors file of the model's state dict (every key as
`model.state_dict()` names it, tensors on the CPU, contiguous), so any
safetensors reader loads it; the harness reads it with `safetensors.torch`,
which builds tensors and nothing else: a weights file is data, never code.
A record lists the file's sha256 and size in metrics.json like its other
files (bench.core.store), and `load` checks them before it reads a byte of
tensors: a damaged or swapped file is named and never loaded.
"""
from __future__ import annotations

from pathlib import Path

from bench.core import store
from bench.core.errors import BenchError

FORMAT = "mhml-bench-weights/1"


def dumps(state: dict) -> bytes:
    """The state dict as the bytes of one safetensors file."""
    # safetensors.torch loads torch: bench.core stays torch-free (bench.api reads records)
    from safetensors.torch import save

    tensors = {k: v.detach().to("cpu").contiguous() for k, v in state.items()}
    return save(tensors, metadata={"format": FORMAT})


def load(path, expected: dict | None) -> dict:
    """The state dict in the file at `path`, after checking it against its
    recorded checksum `expected` ({sha256, size}); BenchError naming the file
    and why when it is missing, unrecorded or does not match."""
    path = Path(path)
    why = store.check_file(path.parent, path.name, {path.name: expected} if expected else {})
    if why:
        raise BenchError(f"{path}: {why}; the weights are not loaded (retrain the run with "
                         "--force --keep-weights)")
    # safetensors.torch loads torch: bench.core stays torch-free (bench.api reads records)
    from safetensors import SafetensorError
    from safetensors.torch import load as load_bytes

    try:
        return load_bytes(path.read_bytes())
    except (SafetensorError, ValueError, OSError) as err:
        raise BenchError(f"{path}: not a readable safetensors file ({err})") from None
