"""The loop's validation hook: losses that adapt between epochs from
validation statistics (bench.methods.adaptive: AdaFocal, CALS).

For a run (or fused group) with such a method the loop (bench.train.loop.
loop_steps) gives it a fresh state on the device before the first step,
predicts the validation split after every epoch (the same split and the
same evaluation-mode prediction the checkpoint selection uses at each cycle
end) and hands each adaptive member its own logits; the method copies its
next state into the tensors its loss reads, in place, so a captured CUDA
graph of the step reads the new values on its next replay. Its state is
saved with the run's resume state at every cycle end and restored with it.

A run without an adaptive method never enters any of this: no extra
prediction, nothing added to its resume state, the loop's numbers as before.
"""
from __future__ import annotations

STATE_KEY = "adaptive"  # the resume state's part for the methods' states


def adaptive(stepper) -> list:
    """(member index, method) of the stepper's adaptive methods."""
    return [(s, m) for s, m in enumerate(stepper.methods) if getattr(m, "adaptive", False)]


def start(stepper, num_classes: int) -> None:
    """A fresh state per adaptive member, on the stepper's device."""
    for _, m in adaptive(stepper):
        m.start(num_classes, stepper.device)


def after_epoch(stepper, x_val, labels, epoch: int) -> None:
    """The validation logits to every adaptive member; `epoch` counts from 0
    over the whole run. Nothing (no prediction) when none adapts."""
    members = adaptive(stepper)
    if not members:
        return
    val = stepper.predict(x_val)  # [S, N, M, K]
    for s, m in members:
        m.on_validation(val[s], labels, epoch)


def saved(stepper) -> dict:
    """The resume state's part for the adaptive members ({} when none)."""
    members = adaptive(stepper)
    if not members:
        return {}
    return {STATE_KEY: {str(s): m.adaptive_state() for s, m in members}}


def restore(stepper, state: dict) -> None:
    """Put each adaptive member's saved state back (in place)."""
    members = adaptive(stepper)
    if not members:
        return
    part = state.get(STATE_KEY, {})
    for s, m in members:
        if str(s) not in part:
            raise KeyError(f"resume state has no adaptive state for member {s} ({m.name})")
        m.load_adaptive_state(part[str(s)])
