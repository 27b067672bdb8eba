"""A run's state at each cycle end, so a killed run resumes where it stopped.

At every cycle end the loop (bench.train.loop.run_loop) hands a CycleState
everything the rest of the run depends on: the model's weights and buffers,
the optimiser, the position in the schedule (cycle, step, images seen), every
random generator (torch's global one, numpy's, Python's, CUDA's, and the
stepper's own: batch order and method draws, augmentation draws), the best
checkpoint so far with its score and validation logits, and every cycle's AUC.
A run restarted from that state takes exactly the steps the uninterrupted run
would have taken, so on CPU its record is the same bit for bit
(tests/train/test_resume.py); only the timing fields differ.

The file lives beside the record, `<config-hash>/_sweep/seed<k>.state.pt`
(bench.core.store.state_path), never inside a record folder, so nothing that
reads records sees it. It is written to a temporary name and renamed, so a
run killed while saving keeps the previous cycle's state, and deleted once
the record is complete. A state saved under another key (config hash, seeds,
members) is ignored: the run starts from its first step.
"""
from __future__ import annotations

import io
import pickle
import random
from pathlib import Path

import numpy as np
import torch

from bench.core.files import write_atomic


def rng_state() -> dict:
    """Every process-wide generator a run may draw from."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
            "python": random.getstate(), "cuda": cuda}


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class CycleState:
    """The saved state of one run (or one fused group) at `path`, under `key`
    (what must match for the state to be reused: config hash and seeds)."""

    def __init__(self, path, key: str):
        self.path, self.key = Path(path), key
        self.resumed_cycle = 0  # cycles restored by load(); 0 = started afresh

    def load(self) -> dict | None:
        """The saved state, or None when there is none, it is unreadable or it
        belongs to another key (then the run starts afresh)."""
        try:
            state = torch.load(self.path, map_location="cpu", weights_only=False)
        except (OSError, EOFError, RuntimeError, ValueError, pickle.UnpicklingError):
            return None
        if not isinstance(state, dict) or state.get("key") != self.key:
            return None
        self.resumed_cycle = int(state["loop"]["cycle"])
        return state

    def save(self, state: dict) -> None:
        """Write atomically: a temporary file, fsync, rename over the old state."""
        write_atomic(self.path, lambda f: f.write(self._serialised(state)), binary=True,
                     durable=True)

    def _serialised(self, state: dict) -> memoryview:
        # In memory first: torch's zip writer turns a short write on a full
        # disk into "RuntimeError: unexpected pos"; a plain file write raises
        # OSError(ENOSPC), which the sweep reports as "disk full" in one line.
        buf = io.BytesIO()
        torch.save({**state, "key": self.key}, buf)
        return buf.getbuffer()

    def clear(self) -> None:
        """The record is complete: the state is no longer needed."""
        self.path.unlink(missing_ok=True)
