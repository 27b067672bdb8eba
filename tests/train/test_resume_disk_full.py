"""A full disk while a run saves its cycle state (new-user review, point 6):
the error is OSError(ENOSPC), which the sweep reports as one "disk full"
line, never torch's "RuntimeError: unexpected pos"; no temporary is left and
the previous state stays readable."""
from __future__ import annotations

import errno
import io
import os

import pytest
import torch

from bench.core.errors import disk_full_message, is_disk_full
from bench.core import files
from bench.train.resume import CycleState


class NearlyFull(io.RawIOBase):
    """A file on a disk with `room` bytes left: short writes, then ENOSPC
    (what a real filesystem does when it fills up mid-write)."""

    def __init__(self, room: int):
        self.room = room

    def writable(self):
        return True

    def write(self, data):
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = min(self.room, len(memoryview(data)))
        self.room -= n
        return n


def test_point6_full_disk_while_saving_state_is_disk_full(tmp_path, monkeypatch):
    state = CycleState(tmp_path / "seed0.state.pt", "key")
    state.save({"loop": {"cycle": 1}, "w": torch.zeros(10)})  # the previous cycle's state
    real_open = open

    def full_open(path, mode="r", *args, **kwargs):
        if "w" in mode:
            real_open(path, mode).close()  # the temporary exists, as on a real disk
            return io.BufferedWriter(NearlyFull(5000))
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(files, "open", full_open, raising=False)  # write_atomic's open
    with pytest.raises(OSError) as caught:
        state.save({"loop": {"cycle": 2}, "w": torch.zeros(100_000)})
    assert is_disk_full(caught.value)
    assert disk_full_message(caught.value).startswith("disk full")
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["seed0.state.pt"]  # no temporary left
    assert state.load()["loop"]["cycle"] == 1
