"""A full disk while a run saves its cycle state (new-user review, point 6):
the error is OSError(ENOSPC), which the sweep reports as one "disk full"
line, never torch's "RuntimeError: unexpected pos"; no temporary is left and
the previous state stays readable."""
from __future__ import annotations

import pytest
import torch

from bench.core import files
from bench.core.errors import disk_full_message, is_disk_full
from bench.train.resume import CycleState
from diskutil import full_disk_open


def test_point6_full_disk_while_saving_state_is_disk_full(tmp_path, monkeypatch):
    state = CycleState(tmp_path / "seed0.state.safetensors", "key")
    parts = {"stepper": {}, "rng": {}, "history": {}}  # what a resumed run reads, here empty
    state.save({"loop": {"cycle": 1, "step": 4}, "w": torch.zeros(10), **parts})  # the previous cycle's
    monkeypatch.setattr(files, "open", full_disk_open(5000), raising=False)  # write_atomic's open
    with pytest.raises(OSError) as caught:
        state.save({"loop": {"cycle": 2, "step": 8}, "w": torch.zeros(100_000), **parts})
    assert is_disk_full(caught.value)
    assert disk_full_message(caught.value).startswith("disk full")
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["seed0.state.safetensors"]  # no temporary left
    assert state.load()["loop"]["cycle"] == 1
