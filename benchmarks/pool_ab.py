"""A/B of the fused group's global pooling: AdaptiveAvgPool2d(1) as the
backbones build it against bench.train.nets.MeanPool2d (what FusedModel
uses for the models in nets.POOL_AS_MEAN), for the backbones whose pooled input is permuted (ConvNeXt-T, Swin-T)
and ResNet50 as a control. Two things per backbone and size:

- identity: the fused forward of the same stacked weights and input, both
  ways, max |difference| of the logits (expected 0: ATen computes the pool as
  the same mean);
- speed: the fused training step (bench.speed.steptime, the loop's own
  FusedStepper.step) in ms, both ways, interleaved repeats, bf16.

    python benchmarks/pool_ab.py --device cuda [--members 5] [--sizes 32,224]
"""
from __future__ import annotations

import argparse
import copy
import time
import warnings

import torch

import bench.train.nets as nets
import bench.train.fused as fused
from bench.core.config import PROFILES, apply_overrides, parse_set
from bench.speed.steptime import Job, measure, synthetic
from bench.train.backbones import build_model, fit_size


def _same_logits(backbone: str, size: int, members: int, device) -> float:
    torch.manual_seed(0)
    models = [build_model(backbone, size, 4, 9)[0] for _ in range(members)]
    x, _ = synthetic(members * 8, size, 9, device)
    x = (x.float() / 255).view(members, 8, 3, size, size)
    outs = []
    for swap in (True, False):
        nets.POOL_AS_MEAN = _ALL if swap else ()
        fm = fused.FusedModel([copy.deepcopy(m) for m in models], device)
        fm.train(False)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs.append(fm(x))
    nets.POOL_AS_MEAN = _KEPT
    return float((outs[0] - outs[1]).abs().max())


def _step_ms(backbone: str, size: int, members: int, device, swap: bool, steps: int) -> float:
    nets.POOL_AS_MEAN = _ALL if swap else ()
    cfg = apply_overrides(PROFILES["paper"], parse_set(["bf16=true"]))
    job = Job("pathmnist", backbone, size, 9, 4, "fused", ("4hml",) * members, "bf16", cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = measure(job, device, steps, 3, 64, time.perf_counter() + 120, flops=False)
    nets.POOL_AS_MEAN = _KEPT
    return m["ms_step"]


_KEPT = nets.POOL_AS_MEAN
_ALL = ("ConvNeXt", "SwinTransformer", "ResNet")  # torchvision's model classes


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--backbones", default="convnext_tiny,swin_tiny,resnet50")
    p.add_argument("--sizes", default="32,224")
    p.add_argument("--members", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeats", type=int, default=2)
    a = p.parse_args(argv)
    dev = torch.device(a.device)
    name = torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"
    print(f"device {name} | torch {torch.__version__} | fused x{a.members}, 4 heads, bf16, "
          f"synthetic data, {a.steps} timed steps, {a.repeats} interleaved repeats")
    print("| backbone | px | max |logit diff| | ms/step AdaptiveAvgPool2d | ms/step mean | "
          "pool / mean |")
    print("|---|---|---|---|---|---|")
    for bb in a.backbones.split(","):
        for size in (fit_size(bb, int(s)) for s in a.sizes.split(",")):
            diff = _same_logits(bb, size, a.members, dev)
            ms = {True: [], False: []}
            for _ in range(a.repeats):
                for swap in (False, True):
                    ms[swap].append(_step_ms(bb, size, a.members, dev, swap, a.steps))
            old, new = min(ms[False]), min(ms[True])
            print(f"| {bb} | {size} | {diff:.1e} | {old:.2f} | {new:.2f} | {old / new:.2f}x |",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
