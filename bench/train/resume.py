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

The file lives beside the record, `<config-hash>/_sweep/seed<k>.state.safetensors`
(bench.core.store.state_path), never inside a record folder, so nothing that
reads records sees it. It is written to a temporary name and renamed, so a
run killed while saving keeps the previous cycle's state, and deleted once
the record is complete. A state saved under another key (config hash, seeds,
members) is set aside the same way as a damaged one.

The file holds data only (bench.core.statefile: the safetensors layout, the
state's structure as JSON): loading it never unpickles, so a file planted in a
shared results folder runs no code. A file that is cut short, altered, of an
earlier version or of another run is set aside (renamed
`<name>.damaged-<UTC time>`, kept), said in one line, and the run trains from
step 0; the line goes to whatever `say_to` points at (the sweep's worker: the
run's log), and a run that does resume says so there too.
"""
from __future__ import annotations

import contextlib
import os
import random
import sys
from pathlib import Path

import numpy as np
import torch

from bench.core import statefile
from bench.core import files
from bench.core.files import write_atomic

PARTS = ("loop", "stepper", "rng", "history")  # what restore() reads
_say = [lambda text: print(f"bench: {text}", file=sys.stderr)]


@contextlib.contextmanager
def say_to(log):
    """Within the block, what a state's load says (resumed, or set aside) goes
    to `log(text)`: the sweep's worker points it at the run's log."""
    _say.append(log)
    try:
        yield
    finally:
        _say.pop()


def say(text: str) -> None:
    """One line to wherever `say_to` points (stderr outside a sweep)."""
    _say[-1](text)


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
        """The saved state, or None: no state (the run starts afresh), or one
        that is damaged or another run's, which is set aside and said."""
        try:
            state = statefile.loads(self.path.read_bytes())
            why = self._mismatch(state)
        except FileNotFoundError:
            return None
        except statefile.Damaged as err:
            why = str(err)
        except OSError as err:
            why = f"unreadable: {err.strerror or err}"
        if why:
            aside = set_aside(self.path)
            _say[-1](f"resume state damaged ({why}), set aside as {aside.name}; "
                     "training from step 0")
            return None
        loop = state["loop"]
        self.resumed_cycle = int(loop["cycle"])
        _say[-1](f"resuming from the state saved at the end of cycle {loop['cycle']} "
                 f"(step {loop['step']})")
        return state

    def _mismatch(self, state) -> str | None:
        if not isinstance(state, dict) or not all(isinstance(state.get(k), dict) for k in PARTS) \
                or not all(isinstance(state["loop"].get(k), int) for k in ("cycle", "step")):
            return "not a state of this version"
        if state.get("key") != self.key:
            return f"saved for another run: {state.get('key')!r}, not {self.key!r}"
        return None

    def save(self, state: dict) -> None:
        """Write atomically: a temporary file, fsync, rename over the old state.
        Serialised in memory first, so a full disk is a plain OSError(ENOSPC),
        which the sweep reports as "disk full" in one line."""
        data = statefile.dumps({**state, "key": self.key})
        write_atomic(self.path, lambda f: f.write(data), binary=True, durable=True)

    def clear(self) -> None:
        """The record is complete: the state is no longer needed."""
        self.path.unlink(missing_ok=True)


def set_aside(path: Path) -> Path:
    """Rename a damaged state to <name>.damaged-<UTC time> beside it (kept for a
    look, never read again); returns the new path."""
    return files.move_aside(path)
