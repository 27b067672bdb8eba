"""A nested training state in one file that is data only: nothing in it is
ever unpickled, so a file planted in a shared results folder cannot run code.

The file is in the safetensors layout (the `safetensors` package reads it,
but the harness needs no such package): 8 bytes of little-endian header
length, a JSON header naming each tensor's dtype, shape and byte range, then
the raw bytes. The header's `__metadata__` holds `format`, `skeleton` (the
state's structure as JSON, every tensor or numpy array replaced by its name)
and `sha256` (of the tensor bytes), so a cut, altered or foreign file is told
from a whole one and named (`Damaged`) instead of half-read.

What a state may hold: None, bool, int, float (NaN and infinities too), str,
list, tuple, dict (any of these as keys), torch tensors (stored on the CPU,
contiguous) and numpy arrays and scalars of bool, integer, float or complex
dtype. Anything else is refused when saving, and decoding builds nothing else.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

# torch is imported by the functions that write or read tensors, not here:
# bench.core loads without torch, and `damage`, the dry run's look at a
# resume state (bench.sweep.grid), reads the header only and needs none
if TYPE_CHECKING:
    import torch

FORMAT = "bench-state/1"
MAX_HEADER = 64 << 20  # a state's header is kilobytes; more means a foreign file
NUMPY_KINDS = "biufc"  # never object, void or string arrays


@functools.cache
def dtypes() -> dict:
    """The header's dtype code -> the torch dtype (the safetensors codes)."""
    # torch on demand: bench.core loads without it (a dry run reads a state's header only)
    import torch

    return {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
            "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
            "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}


@functools.cache
def codes() -> dict:
    """The torch dtype -> its header code."""
    return {dtype: code for code, dtype in dtypes().items()}


class Damaged(ValueError):
    """Not a whole state file of this format; the message says why in a few words."""


# ---------------------------------------------------------------- write --
def dumps(state) -> bytearray:
    """`state` as the bytes of one state file (tensor bytes copied once)."""
    # torch on demand: bench.core loads without it (a dry run reads a state's header only)
    import torch

    tensors: list[torch.Tensor] = []
    skeleton = json.dumps(_encode(state, tensors), separators=(",", ":"))
    raws = [t.reshape(-1).view(torch.uint8).numpy() for t in tensors]  # views, no copies
    digest, header, offset = hashlib.sha256(), {}, 0
    for i, (t, raw) in enumerate(zip(tensors, raws)):
        digest.update(raw)
        header[f"t{i}"] = {"dtype": codes()[t.dtype], "shape": list(t.shape),
                           "data_offsets": [offset, offset + raw.nbytes]}
        offset += raw.nbytes
    header["__metadata__"] = {"format": FORMAT, "skeleton": skeleton,
                              "sha256": digest.hexdigest()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # tensor bytes 8-aligned, as the safetensors package pads
    out = bytearray(8 + len(text) + offset)
    out[:8], out[8:8 + len(text)] = len(text).to_bytes(8, "little"), text
    at = 8 + len(text)
    for raw in raws:
        out[at:at + raw.nbytes] = raw.data
        at += raw.nbytes
    return out


def _encode(obj, tensors: list):
    # torch on demand: bench.core loads without it (a dry run reads a state's header only)
    import torch

    if isinstance(obj, np.generic):  # before float: np.float64 is a float subclass
        return {"scalar": _array(np.asarray(obj), tensors)}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, torch.Tensor):
        if obj.layout != torch.strided or obj.dtype not in codes():
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
        if hashlib.sha256(body).hexdigest() != meta.get("sha256"):
            raise Damaged("contents changed since written (digest mismatch)")
        tensors = [_tensor(header.get(f"t{i}"), body) for i in range(len(header))]
        return _decode(json.loads(meta["skeleton"]), tensors)
    except Damaged:
        raise
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError) as err:
        raise Damaged(f"malformed ({type(err).__name__})") from None


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


def _tensor(entry: dict, body: memoryview) -> torch.Tensor:
    # torch on demand: bench.core loads without it (a dry run reads a state's header only)
    import torch

    dtype = dtypes()[entry["dtype"]]
    shape = [int(s) for s in entry["shape"]]
    begin, end = (int(o) for o in entry["data_offsets"])
    itemsize = torch.empty((), dtype=dtype).element_size()
    if min(shape, default=0) < 0 or not 0 <= begin <= end <= len(body) \
            or end - begin != math.prod(shape) * itemsize:
        raise Damaged("malformed (a tensor's bytes do not match its shape)")
    if begin == end:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(body[begin:end]), dtype=dtype).reshape(shape)


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
