"""Training history of a run, kept by the training loop: per epoch the mean
training loss and the learning rate of its last step, per cycle end the
validation ACC / ECE / NLL / AUC of that cycle's checkpoint. Stored in the
record's metrics.json under "history" (one entry per run; a fused group
keeps one per member).

A method whose loss adapts between epochs (bench.methods.adaptive: AdaFocal,
CALS) adds to each epoch's entry `adaptive`: its whole state after that
epoch's validation update, the values the next epoch trains with, as lists
(AdaFocal: `gamma` per bin and the bins' inner `edges`; CALS: the
multipliers `lambda` and penalty weights `rho` per class, `c_prev` and
`has_prev`, what its rho rule compares). Other methods' entries are as before.
"""
from __future__ import annotations

import numpy as np
import torch

from bench.calib import measures
from bench.calib.metrics import head_probs


class History:
    """Filled by bench.train.loop.run_loop; `member(s)` is run s's history."""

    def __init__(self, members: int):
        self._epochs = [[] for _ in range(members)]
        self._cycles = [[] for _ in range(members)]

    def epoch(self, cycle: int, epoch: int, losses: list, lr: float) -> None:
        """`losses`: the epoch's step losses (scalars, or one per member);
        read after the loop's finite check, so this adds no extra sync point.
        A [steps, members] tensor (the graph-safe step's) reads the same."""
        if len(losses) == 0:
            return
        means = torch.stack(losses).reshape(len(losses), -1).float().mean(0).tolist()
        for s, mean in enumerate(means):
            self._epochs[s].append({"cycle": cycle + 1, "epoch": epoch + 1,
                                    "train_loss": mean, "lr": lr})

    def adapted(self, cycle: int, epoch: int, members: list) -> None:
        """After the epoch's validation update: each adaptive member's state
        ((member index, method) pairs, bench.train.adapt.adaptive) on its
        entry for this epoch (none when the epoch had no step)."""
        for s, method in members:
            last = self._epochs[s][-1] if self._epochs[s] else {}
            if (last.get("cycle"), last.get("epoch")) == (cycle + 1, epoch + 1):
                last["adaptive"] = {k: np.asarray(v, dtype=np.float64).tolist()
                                    for k, v in method.host_state().items()}

    def cycle(self, cycle: int, val_logits, val_labels, aucs: list) -> None:
        """val_logits [members, N, M, K] at this cycle's end; aucs[s][-1] its checkpoint AUC."""
        for s in range(len(self._cycles)):
            m = measures.compute(head_probs(val_logits[s]), val_labels, measures.paper())
            self._cycles[s].append({"cycle": cycle + 1, **{f"val_{k}": v for k, v in m.items()},
                                    "val_auc": aucs[s][-1]})

    def state_dict(self) -> dict:
        """What a resumed run needs to carry on (saved at every cycle end)."""
        return {"epochs": self._epochs, "cycles": self._cycles}

    def load_state_dict(self, saved: dict) -> None:
        self._epochs, self._cycles = saved["epochs"], saved["cycles"]

    def member(self, s: int) -> dict:
        return {"epochs": self._epochs[s], "cycles": self._cycles[s]}
