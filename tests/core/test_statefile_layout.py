"""A resume state is a safetensors file written by the safetensors package,
and a state laid out by the harness's former hand-written writer still reads.

The former layout is transcribed here from its description: the tensors
t0, t1, ... back to back in number order, the header's JSON with them first
and `__metadata__` last (compact separators), padded with spaces to a
multiple of 8, the metadata's sha256 over the tensor bytes as laid out."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import torch
from safetensors import safe_open

from bench.core import statefile


def former_layout(tensors: list[torch.Tensor], skeleton) -> bytes:
    raws = [t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() for t in tensors]
    codes = {torch.float32: "F32", torch.int64: "I64", torch.uint8: "U8"}
    header, at = {}, 0
    for i, (t, raw) in enumerate(zip(tensors, raws)):
        header[f"t{i}"] = {"dtype": codes[t.dtype], "shape": list(t.shape),
                           "data_offsets": [at, at + len(raw)]}
        at += len(raw)
    body = b"".join(raws)
    header["__metadata__"] = {"format": "bench-state/1", "sha256": hashlib.sha256(body).hexdigest(),
                              "skeleton": json.dumps(skeleton, separators=(",", ":"))}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + body


def test_a_state_in_the_former_layout_still_reads():
    w, steps = torch.arange(6, dtype=torch.float32).reshape(2, 3), torch.tensor([3, 4])
    rng = np.arange(5, dtype=np.uint32)
    skeleton = {"dict": [["w", {"tensor": 0}], ["steps", {"tensor": 1}],
                         ["rng", {"tuple": ["MT19937", {"array": [2, "<u4", [5]]}]}],
                         ["loop", {"dict": [["cycle", 1]]}]]}
    data = former_layout([w, steps, torch.from_numpy(rng.view(np.uint8))], skeleton)
    back = statefile.loads(data)
    assert torch.equal(back["w"], w) and torch.equal(back["steps"], steps)
    assert back["rng"][0] == "MT19937"
    np.testing.assert_array_equal(back["rng"][1], rng)
    assert back["loop"] == {"cycle": 1}


def test_a_state_is_what_the_package_reads_with_its_metadata(tmp_path):
    """The package's own reader: every tensor under its number, the format,
    and a digest that is the sha256 of the tensors' bytes in number order."""
    tensors = [torch.full((i + 1,), float(i)) for i in range(12)]  # t10 sorts before t2
    path = tmp_path / "state.safetensors"
    path.write_bytes(statefile.dumps({"t": tensors}))
    with safe_open(path, "pt") as f:
        meta = f.metadata()
        got = [f.get_tensor(f"t{i}") for i in range(12)]
    assert meta["format"] == statefile.FORMAT
    assert all(torch.equal(a, b) for a, b in zip(got, tensors))
    raw = b"".join(t.numpy().tobytes() for t in tensors)
    assert meta["sha256"] == hashlib.sha256(raw).hexdigest()


def test_one_tensor_held_twice_is_stored_twice_and_read_back_apart():
    """The package refuses shared memory; a state may hold one tensor in two
    places (tied weights) and views of one tensor."""
    w = torch.arange(6.0).reshape(2, 3)
    back = statefile.loads(statefile.dumps({"a": w, "b": w, "row": w[1]}))
    assert torch.equal(back["a"], w) and torch.equal(back["b"], w)
    assert torch.equal(back["row"], w[1])
    back["a"] += 1  # read back as separate, writable tensors
    assert torch.equal(back["b"], w)
