"""The end-to-end slice of issue 47 (point 6): `bench run` on a PathMNIST-shaped
synthetic set, one full epoch, the paper's 8 methods x 1 seed, each backbone,
grouped as ./run_all.sh groups PathMNIST on a GPU (--fuse methods --fuse-max 8),
its wall time against bench.speed.cells' projection of the same work.

    python benchmarks/e2e_slice.py --device cuda --work DIR [--out slice.json]
        [--backbones resnet50,convnext_tiny,swin_tiny] [--train 89996]
        [--precision released] [--stage-ms 0.676]

The set is random uint8 images in pathmnist.npz's exact format (train/val/test
_images [N, 28, 28, 3], _labels [N, 1], 9 classes), written under --work.
Target: measured / projected within 15% (docs/speed.md)."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from bench.core.config import PRECISIONS, PROFILES
from bench.speed import cells, stepcount

SPLITS = {"train": 89996, "val": 10004, "test": 7180}  # PathMNIST's published counts


def write_npz(root: Path, train: int, val: int, test: int) -> Path:
    rng = np.random.default_rng(0)
    arrays = {}
    for split, n in (("train", train), ("val", val), ("test", test)):
        arrays[f"{split}_images"] = rng.integers(0, 256, (n, 28, 28, 3), dtype=np.uint8)
        arrays[f"{split}_labels"] = rng.integers(0, 9, (n, 1), dtype=np.uint8)
    root.mkdir(parents=True, exist_ok=True)
    np.savez(root / "pathmnist.npz", **arrays)
    return root


def projected_s(backbone: str, shape, precision: str, stage_ms: float) -> float:
    """bench.speed.cells' seconds for 8 runs of one epoch (one cycle) at 28/32 px."""
    px = next(iter(cells.run_sizes(shape, backbone)))[0]
    counts = {key: stepcount.count_step(*key) for key in {(backbone, px), cells.CALIBRATION}}
    strat = cells.STRATEGIES["run_all"]
    u = cells.calibrated_u(counts[cells.CALIBRATION], strat.measured[cells.CALIBRATION])
    ms, _ = cells.step_ms(counts[(backbone, px)], (backbone, px), precision, strat, u)
    ev = cells.eval_ms_image(counts[(backbone, px)], precision, u)
    cfg = replace(PROFILES["paper"], cycles=1, epochs_per_cycle=1)
    return 8 * sum(cells.run_seconds(shape, ms, ev, ev, stage_ms, cfg).values())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--work", required=True)
    p.add_argument("--out", default="")
    p.add_argument("--backbones", default=",".join(cells.BACKBONES))
    p.add_argument("--train", type=int, default=SPLITS["train"])
    p.add_argument("--eval", type=int, default=0, help="val and test images (0: published)")
    p.add_argument("--precision", default="released", choices=PRECISIONS)
    p.add_argument("--stage-ms", type=float, default=cells.STAGE_MS_PER_STEP)
    p.add_argument("--set", action="append", default=[], help="more --set pairs for bench run")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    val, test = (args.eval, args.eval) if args.eval else (SPLITS["val"], SPLITS["test"])
    root = write_npz(Path(args.work) / "data", args.train, val, test)
    shape = cells.DataShape("pathmnist", 9, 28, args.train, val, test)
    rows = []
    for bb in args.backbones.split(","):
        cmd = [sys.executable, "-m", "bench.cli", "run", "--method", "paper", "--dataset",
               "pathmnist", "--data-root", str(root), "--backbone", bb, "--seeds", "1",
               "--profile", "paper", "--no-pretrained", "--device", args.device,
               "--fuse", "methods", "--fuse-max", "8", "--no-progress",
               "--results", str(Path(args.work) / "results" / bb),
               "--set", "cycles=1", "--set", "epochs_per_cycle=1",
               "--set", f"precision={args.precision}", *(x for s in args.set for x in ("--set", s))]
        t0 = time.perf_counter()
        rc = subprocess.run(cmd).returncode
        wall = time.perf_counter() - t0
        proj = projected_s(bb, shape, args.precision, args.stage_ms) if bb in cells.BACKBONES else None
        ratio = wall / proj if proj else None
        rows.append({"backbone": bb, "rc": rc, "wall_s": round(wall, 1),
                     "projected_s": proj and round(proj, 1), "ratio": ratio and round(ratio, 3)})
        print(f"slice {bb}: {wall:.1f} s measured, "
              f"{'n/a' if proj is None else f'{proj:.1f} s projected, ratio {ratio:.2f}'}"
              f" (target 0.85-1.15), exit {rc}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"device": args.device, "torch": torch.__version__,
                                              "precision": args.precision, "train": args.train,
                                              "rows": rows}, indent=1))
    return max(r["rc"] for r in rows)


if __name__ == "__main__":
    sys.exit(main())
