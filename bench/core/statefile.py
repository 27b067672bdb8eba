"""A nested training state in one file that is data only: nothing in it is
ever unpickled, so a file planted in a shared results folder cannot run code.

A safetensors file, written and its tensors read by the `safetensors`
package (as bench.core.weightsfile's): tensors `t0`, `t1`, ... in the order
the state holds them; the header's `__metadata__` holds `format`, `skeleton`
(the state's structure as JSON, every tensor or numpy array replaced by its
number) and `sha256` (of the tensors' bytes in that order, which is how the
former hand-written writer laid them out: its files read the same), so a
cut, altered or foreign file is named (`Damaged`) instead of half-read. The
header is parsed here: `damage`, the dry run's look at a resume state
(bench.sweep.grid), reads it and the file's size only, without torch.

What a state may hold: None, bool, int, float (NaN and infinities too), str,
list, tuple, dict (any of these as keys), torch tensors (stored on the CPU,
contiguous) and numpy arrays and scalars of bool, integer, float or complex
dtype. Anything else is refused when saving, and decoding builds nothing else.
"""
from __future__ import annotations

import functools
import hashlib
import json
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

# torch is imported by the functions that write or read tensors, not here:
# bench.core loads without torch, and `damage` reads the header only
if TYPE_CHECKING:
    import torch

FORMAT = "bench-state/1"
MAX_HEADER = 64 << 20  # a state's header is kilobytes; more means a foreign file
NUMPY_KINDS = "biufc"  # never object, void or string arrays
CODES = ("F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL")


@functools.cache
def dtypes() -> frozenset:
    """The torch dtypes a state stores (those of CODES, the safetensors codes)."""
    # torch on demand: bench.core loads without it (a dry run reads a state's header only)
    import torch

    return frozenset({torch.float64, torch.float32, torch.float16, torch.bfloat16,
                      torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
                      torch.bool})


class Damaged(ValueError):
    """Not a whole state file of this format; the message says why in a few words."""


# ---------------------------------------------------------------- write --
def dumps(state) -> bytes:
    """`state` as the bytes of one state file."""
    # torch on demand: bench.core loads without it (a dry run reads a state's header only)
    from safetensors.torch import save

    tensors: list[torch.Tensor] = []
    skeleton = json.dumps(_encode(state, tensors), separators=(",", ":"))
    digest = hashlib.sha256()
    for t in tensors:
        digest.update(_raw(t))
    meta = {"format": FORMAT, "skeleton": skeleton, "sha256": digest.hexdigest()}
    return save({f"t{i}": t for i, t in enumerate(_unshared(tensors))}, metadata=meta)


def _raw(t: torch.Tensor):
    """A tensor's bytes as they lie in the file (a view, no copy)."""
    # torch on demand: bench.core loads without it (a dry run reads a state's header only)
    import torch

    return t.reshape(-1).view(torch.uint8).numpy().data


def _unshared(tensors: list) -> list:
    """The tensors, each one sharing memory with an earlier one copied: the
    package refuses to save shared memory (tied weights, one tensor held in
    two places) and the state keeps each occurrence."""
    seen, out = set(), []
    for t in tensors:
        ptr = t.untyped_storage().data_ptr() if t.numel() else 0
        out.append(t.clone() if ptr and ptr in seen else t)
        seen.add(ptr)
    return out


def _encode(obj, tensors: list):
    # torch on demand: bench.core loads without it (a dry run reads a state's header only)
    import torch

    if isinstance(obj, np.generic):  # before float: np.float64 is a float subclass
        return {"scalar": _array(np.asarray(obj), tensors)}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, torch.Tensor):
        if obj.layout != torch.strided or obj.dtype not in dtypes():
            raise TypeError(f"a {obj.dtype} {obj.layout} tensor cannot be stored in a state file")
        tensors.append(obj.detach().to("cpu").contiguous())
        return {"tensor": len(tensors) - 1}
    if isinstance(obj, np.ndarray):
        return {"array": _array(obj, tensors)}
    if isinstance(obj, list):
        return [_encode(v, tensors) for v in obj]
    if isinstance(obj, tuple):
        return {"tuple": [_encode(v, tensors) for v in obj]}
    if isinstance(obj, dict):
        out = {"dict": [[_encode(k, tensors), _encode(v, tensors)] for k, v in obj.items()]}
        if isinstance(obj, OrderedDict):  # a state_dict: its _metadata holds module versions
            out["ordered"] = _encode(getattr(obj, "_metadata", None), tensors)
        return out
    raise TypeError(f"a {type(obj).__name__} cannot be stored in a state file")


def _array(a: np.ndarray, tensors: list) -> list:
    if a.dtype.kind not in NUMPY_KINDS:
        raise TypeError(f"a numpy {a.dtype} array cannot be stored in a state file")
    # torch on demand: bench.core loads without it (a dry run reads a state's header only)
    import torch

    raw = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    tensors.append(torch.from_numpy(raw.copy()))
    return [len(tensors) - 1, a.dtype.str, list(a.shape)]


# ----------------------------------------------------------------- read --
def loads(data: bytes):
    """The state written by `dumps`; Damaged for anything else."""
    try:
        header, body = _split(memoryview(data))
        meta = header.pop("__metadata__", None)
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise Damaged("not a state of this version")
        spans = [header[f"t{i}"]["data_offsets"] for i in range(len(header))]
        digest = hashlib.sha256()
        for begin, end in spans:
            digest.update(body[begin:end])
        if digest.hexdigest() != meta.get("sha256"):
            raise Damaged("contents changed since written (digest mismatch)")
        tensors = _tensors(bytes(data), header)
        return _decode(json.loads(meta["skeleton"]), tensors)
    except Damaged:
        raise
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError) as err:
        raise Damaged(f"malformed ({type(err).__name__})") from None


def _tensors(data: bytes, header: dict) -> list:
    """t0, t1, ... as the safetensors package reads them (it checks each
    tensor's bytes against its shape and that they tile the file)."""
    if any(e.get("dtype") not in CODES for e in header.values()):
        raise Damaged("malformed (a tensor of a dtype no state holds)")
    # safetensors.torch loads torch: only reading a state's tensors needs it
    from safetensors import SafetensorError
    from safetensors.torch import load

    try:
        named = load(data)
    except SafetensorError:
        raise Damaged("malformed (a tensor's bytes do not match its shape)") from None
    return [named[f"t{i}"] for i in range(len(header))]


def damage(path) -> str | None:
    """Why the file at `path` is not a whole state file, from its header and
    size alone (no tensor is read, the digest is not checked), or None."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            n = int.from_bytes(head, "little") if len(head) == 8 else 0
            head += f.read(n) if n <= MAX_HEADER else b""
            size = f.seek(0, 2)
        header, _ = _split(memoryview(head), size - len(head))
        if not isinstance(header.get("__metadata__"), dict) \
                or header["__metadata__"].get("format") != FORMAT:
            return "not a state of this version"
    except Damaged as err:
        return str(err)
    except (OSError, ValueError, TypeError, KeyError, IndexError, RecursionError) as err:
        return f"unreadable ({type(err).__name__})"
    return None


def _split(data: memoryview, more: int = 0) -> tuple[dict, memoryview]:
    """(header, tensor bytes) of a file's `data`; `more`: bytes of the file
    beyond `data` (damage() reads the header only)."""
    if len(data) < 8:
        raise Damaged(f"truncated: {len(data)} bytes, not even a header")
    n = int.from_bytes(data[:8], "little")
    if n > MAX_HEADER:
        raise Damaged("no state header")
    if len(data) < 8 + n:
        raise Damaged(f"truncated: {len(data)} bytes, the header alone needs {8 + n}")
    header = json.loads(bytes(data[8:8 + n]))
    if not isinstance(header, dict):
        raise Damaged("no state header")
    need = max([e["data_offsets"][1] for k, e in header.items() if k != "__metadata__"],
               default=0)
    if len(data) + more - 8 - n < need:
        raise Damaged(f"truncated: {len(data) + more} of {8 + n + need} bytes")
    return header, data[8 + n:]


def _decode(node, tensors: list):
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [_decode(v, tensors) for v in node]
    if not isinstance(node, dict) or len(node) not in (1, 2):
        raise Damaged("malformed (an unknown entry in the state's structure)")
    if "tensor" in node:
        return tensors[_index(node["tensor"], tensors)]
    if "array" in node or "scalar" in node:
        a = _numpy(node.get("array", node.get("scalar")), tensors)
        return a if "array" in node else a[()]
    if "tuple" in node:
        return tuple(_decode(v, tensors) for v in node["tuple"])
    if "dict" in node:
        return _dict(node, tensors)
    raise Damaged("malformed (an unknown entry in the state's structure)")


def _dict(node: dict, tensors: list) -> dict:
    pairs = [(_decode(k, tensors), _decode(v, tensors)) for k, v in node["dict"]]
    if "ordered" not in node:
        return dict(pairs)
    out = OrderedDict(pairs)
    meta = _decode(node["ordered"], tensors)
    if meta is not None:
        out._metadata = meta  # type: ignore[attr-defined]
    return out


def _index(i, tensors: list) -> int:
    if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(tensors):
        raise Damaged("malformed (a reference to a missing tensor)")
    return i


def _numpy(spec, tensors: list) -> np.ndarray:
    i, dtype, shape = spec
    dtype = np.dtype(dtype)
    if dtype.kind not in NUMPY_KINDS or dtype.hasobject:
        raise Damaged(f"malformed (a numpy {dtype} array)")
    # torch on demand: bench.core loads without it (a dry run reads a state's header only)
    import torch

    raw = tensors[_index(i, tensors)]
    if raw.dtype != torch.uint8 or raw.dim() != 1:
        raise Damaged("malformed (a numpy array's bytes)")
    return np.frombuffer(raw.numpy().tobytes(), dtype=dtype).reshape(shape).copy()
