"""Methods whose loss adapts between epochs from validation statistics
(AdaFocal, CALS): the method side of the loop's validation hook
(bench.train.adapt; docs/methods.md, "Adaptive losses").

An adaptive method keeps its state in a dict of tensors, `self.state`, that
its `loss` reads. The loop (bench.train.loop.loop_steps) calls

- `start(num_classes, device)` once per run, before the first step: a fresh
  state (`initial_state`), put on the training device. Tensors, not Python
  floats, so that a captured CUDA graph of the step (bench.train.graphstep)
  reads the current values: every later change is an in-place copy into
  these same tensors, never a new tensor.
- `on_validation(logits, labels, epoch)` after every epoch: the validation
  split's logits [N, M, K] (float32, numpy, the model in evaluation mode, as
  checkpoint selection sees them), its labels [N] and the epoch's 0-based
  index counted over the whole run (cycles included). `update` turns them
  into the next state (float64 numpy arrays), copied in place.
- `adaptive_state()` / `load_adaptive_state(saved)`: the state on the host,
  saved with the run's resume state at each cycle end and put back in place.

A step driven outside the loop (bench.speed's tools, a test calling `loss`)
gets the initial state on its first call (`live`), made or moved to the
logits' device there; under the loop `start` has done so and `live` only
checks the device (a Python comparison: nothing for a graph to record).

A method that does not derive from this class is untouched by the hook: the
loop's path for it is the one it had before the hook existed.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .base import Method

if TYPE_CHECKING:  # annotations only: registering a method needs no torch
    import torch


class AdaptiveMethod(Method):
    """A method whose loss reads `self.state`, updated from validation statistics."""

    adaptive = True
    # the loop's side of the hook decides when the state moves and what it
    # reads: part of these methods' records' identity (bench.core.codeunits)
    code = Method.code + ("bench.train.adapt",)

    def __init__(self, name: str, params=None):
        super().__init__(name, params)
        self.state: dict = {}

    def initial_state(self, num_classes: int) -> dict:
        """name -> float64 numpy array: the state before any validation."""
        raise NotImplementedError

    def update(self, logits: np.ndarray, labels: np.ndarray, epoch: int) -> dict:
        """The next state (name -> float64 array, same shapes) from the
        validation logits [N, M, K], labels [N] and the epoch index."""
        raise NotImplementedError

    def start(self, num_classes: int, device) -> None:
        """A fresh state on `device` (every run starts from the initial one)."""
        # torch on demand: `bench list` imports every method module (the METHODS registry)
        import torch

        self.state = {k: torch.as_tensor(np.asarray(v, dtype=np.float64)).to(device)
                      for k, v in self.initial_state(num_classes).items()}

    def live(self, z: "torch.Tensor") -> dict:
        """The state for logits z [B, K]: made (K classes) or moved to z's device
        when a step runs without the loop's `start`; else as it is."""
        if not self.state:
            self.start(z.shape[-1], z.device)
        elif next(iter(self.state.values())).device != z.device:
            self.state = {k: v.to(z.device) for k, v in self.state.items()}
        return self.state

    def host_state(self) -> dict:
        """The current state as float64 numpy arrays."""
        return {k: v.detach().cpu().numpy() for k, v in self.state.items()}

    def on_validation(self, logits: np.ndarray, labels: np.ndarray, epoch: int) -> None:
        self._copy_in(self.update(np.asarray(logits), np.asarray(labels), epoch))

    def adaptive_state(self) -> dict:
        return {k: v.detach().cpu().clone() for k, v in self.state.items()}

    def load_adaptive_state(self, saved: dict) -> None:
        self._copy_in(saved)

    def _copy_in(self, new: dict) -> None:
        """In place (the step, maybe a captured graph, reads these tensors)."""
        # torch on demand: `bench list` imports every method module (the METHODS registry)
        import torch

        if set(new) != set(self.state):
            raise ValueError(f"{self.name}: state keys {sorted(new)}, not {sorted(self.state)}")
        for k, t in self.state.items():
            t.copy_(torch.as_tensor(np.asarray(new[k], dtype=np.float64)).reshape(t.shape))

