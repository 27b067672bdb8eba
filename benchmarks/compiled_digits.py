"""Compiled vs eager graph-safe step on digits: mean ACC / ECE over 5 seeds.

    PYTHONPATH=. python benchmarks/compiled_digits.py [--seeds 5] [--size 12]

smallcnn, the quick profile cut to 2 one-epoch cycles, `graph=true` on the
CPU, `compile_step` false vs true; SL1H. Prints per seed and mean +- std
(docs/speed.md, "The compiled step"). Minutes, not a test."""
import argparse
import dataclasses

import numpy as np
import torch

from bench.core.config import PROFILES
from bench.datasets import load_dataset
from bench.methods import create_method
from bench.train.backbones import build_model
from bench.train.loop import train


def ece(probs: np.ndarray, labels: np.ndarray, bins: int = 15) -> float:
    """Top-label ECE with equal-width confidence bins (the usual 15)."""
    conf, pred = probs.max(1), probs.argmax(1)
    edges = np.linspace(0, 1, bins + 1)
    total = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        inside = (conf > lo) & (conf <= hi)
        if inside.any():
            total += inside.mean() * abs((pred[inside] == labels[inside]).mean()
                                         - conf[inside].mean())
    return total


def one(data, seed: int, compiled: bool) -> tuple:
    cfg = dataclasses.replace(PROFILES["quick"], cycles=2, epochs_per_cycle=1, graph="true",
                              compile_step=compiled)
    torch.manual_seed(seed)
    model = build_model("smallcnn", data.image_size, 1, data.num_classes)[0]
    method = create_method("sl1h")
    method.setup(data.num_classes, seed)
    res = train(model, method, cfg, data, seed, progress=False)
    logits = torch.as_tensor(res.test_logits).mean(1)
    probs = torch.softmax(logits, -1).numpy()
    labels = np.asarray(data.split("test").labels)
    return float((probs.argmax(1) == labels).mean()), ece(probs, labels)


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--size", type=int, default=12)
    args = ap.parse_args()
    torch.set_num_threads(1)
    data = load_dataset("digits", image_size=args.size)
    for compiled in (False, True):
        rows = np.array([one(data, s, compiled) for s in range(args.seeds)])
        print(f"compile_step={str(compiled).lower():5}  per seed ACC {np.round(rows[:, 0], 4)}"
              f"  ECE {np.round(rows[:, 1], 4)}")
        print(f"    ACC {rows[:, 0].mean():.4f} +- {rows[:, 0].std(ddof=1):.4f}"
              f"   ECE {rows[:, 1].mean():.4f} +- {rows[:, 1].std(ddof=1):.4f}")


if __name__ == "__main__":
    main()
