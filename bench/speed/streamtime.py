"""ms per run-step of a fused group trained by the real loop, `fuse_as` streams
against vmap, for K members (the choice `fuse_as=auto` makes on CUDA).

    python -m bench.speed.streamtime [--device cuda] [--backbone resnet50]
        [--size 28] [--members 1,2,4,8] [--fuse-as streams,vmap] [--steps 60]
        [--method sl1h] [--epochs 1] [--stage-ahead auto] [--out streamtime.json] [--check]

Each cell trains K runs of `--method` (seeds 0..K-1) for one epoch of
`--steps` steps on synthetic data (random uint8 images of the given size),
through bench.train.groups' TRAIN_TOGETHER, i.e. the loop `bench run --fuse`
uses: per-epoch staging, capture, replays, the finite check, validation and
test on a small set. The clock starts after step WARM (warm-up and capture
done) and stops at the last step, both after a device sync; ms per run-step
is that time / steps / K. One epoch is staged before the clock starts; with
`--epochs E` (E > 1) the clock runs on through epochs 2..E, so it includes
their staging (the host's draws between epochs, drawn ahead while the
previous epoch trains under `--stage-ahead auto|true`, in place under
`false`): a real run's epochs, as `bench run` has them.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch
from tabulate import tabulate

from bench.core.config import PRECISIONS, TrainConfig
from bench.core.device import check_device, device_name
from bench.core.errors import BenchError
from bench.core.files import write_json
from bench.datasets.base import DatasetBundle, Split
from bench.methods import create_method
from bench.train.backbones import build_model
from bench.train.groups import TRAIN_TOGETHER
from bench.train.loop import sync, train
from bench.train.streams import CONNECTIONS_VAR, raise_connections

WARM = 10  # steps before the clock starts: 3 eager warm-up steps, the capture, a few replays
CLASSES = 9


def bundle(n_train: int, size: int, seed: int = 0) -> DatasetBundle:
    """Random uint8 images and labels: n_train to train on, 64 each to validate and test."""
    rng = np.random.default_rng(seed)

    def split(n):
        return Split(rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8),
                     rng.integers(0, CLASSES, n))
    return DatasetBundle("synthetic", [str(c) for c in range(CLASSES)],
                         split(n_train), split(64), split(64))


def time_cell(how: str, k: int, args, device: torch.device) -> float:
    """ms per run-step of K members trained together by `how`."""
    cfg = TrainConfig(cycles=1, epochs_per_cycle=args.epochs, fuse_as=how,  # released protocol
                      stage_ahead=args.stage_ahead, augment_size=args.size,  # from scratch
                      image_size=args.size, test_size=args.size, precision=args.precision)
    data = bundle(cfg.batch_size * args.steps, args.size)
    methods, models = [], []
    for seed in range(k):
        method = create_method(args.method)
        method.setup(CLASSES, seed)
        torch.manual_seed(seed)
        models.append(build_model(args.backbone, args.size, method.heads, CLASSES)[0])
        methods.append(method)
    marks, last = {}, args.steps * args.epochs

    def on_step(step, _loss):
        if step in (WARM, last):
            sync(device)
            marks[step] = time.perf_counter()
    TRAIN_TOGETHER[how](models, methods, cfg, data, list(range(k)), device, False, on_step,
                        states=[None] * k)
    return 1000 * (marks[last] - marks[WARM]) / (last - WARM) / k


def check_equal(args, device: torch.device) -> bool:
    """Members of `--method` (a comma list: one member each) trained by
    fuse_as=streams give the test and validation logits of each run trained
    alone, bit for bit, with deterministic algorithms (cuDNN's fixed)."""
    cfg = TrainConfig(cycles=1, epochs_per_cycle=1, fuse_as="streams", deterministic=True,
                      cudnn_benchmark=False, augment_size=args.size, image_size=args.size,
                      test_size=args.size)
    data = bundle(cfg.batch_size * args.steps, args.size)
    names = args.method.split(",")
    seeds = list(range(len(names)))

    def built():
        methods, models = [], []
        for seed, name in zip(seeds, names):
            method = create_method(name)
            method.setup(CLASSES, seed)
            torch.manual_seed(seed)
            models.append(build_model(args.backbone, args.size, method.heads, CLASSES)[0])
            methods.append(method)
        return models, methods
    together = TRAIN_TOGETHER["streams"](*built(), cfg, data, seeds, device, False, None,
                                         states=[None] * len(seeds))
    models, methods = built()
    alone = [train(m, meth, cfg, data, seed, device, progress=False)
             for m, meth, seed in zip(models, methods, seeds)]
    same = [np.array_equal(a.test_logits, b.test_logits)
            and np.array_equal(a.val_logits, b.val_logits) for a, b in zip(together, alone)]
    for name, seed, ok, a, b in zip(names, seeds, same, together, alone):
        print(f"{name} seed {seed}: streams == alone {ok} "
              f"(max |dlogit| {np.abs(a.test_logits - b.test_logits).max():.2e})")
    return all(same)


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        allow_abbrev=False, prog="python -m bench.speed.streamtime", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--backbone", default="resnet50")
    p.add_argument("--size", type=int, default=28)
    p.add_argument("--members", default="1,2,4,8")
    p.add_argument("--fuse-as", default="streams,vmap")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--method", default="sl1h")
    p.add_argument("--epochs", type=int, default=1,
                   help="epochs of --steps each; > 1: the clock includes epochs 2..E's staging")
    p.add_argument("--stage-ahead", default="auto", choices=("auto", "true", "false"),
                   help="TrainConfig.stage_ahead: the next epoch drawn while one trains")
    p.add_argument("--precision", default="released", choices=PRECISIONS,
                   help="TrainConfig.precision (docs/speed.md, 'Precision')")
    p.add_argument("--out", default="")
    p.add_argument("--check", action="store_true", help="instead of timing: streams members "
                   "equal their runs alone bit for bit (one member per --method name)")
    args = p.parse_args(argv)
    try:
        args.members = [int(m) for m in args.members.split(",")]
    except ValueError:
        p.error(f"--members {args.members!r}: comma-separated whole numbers, e.g. 1,2,4,8")
    args.fuse_as = args.fuse_as.split(",")
    bad = [h for h in args.fuse_as if h not in TRAIN_TOGETHER]
    if bad or min(args.members) < 1 or args.steps <= WARM or args.epochs < 1:
        p.error(f"--fuse-as {','.join(bad)}: allowed {', '.join(TRAIN_TOGETHER)}" if bad else
                f"--members >= 1, --steps > {WARM} and --epochs >= 1 (got {args.members}, "
                f"{args.steps}, {args.epochs})")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        check_device(args.device)
        device = torch.device(args.device)
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if device.type == "cuda":  # before CUDA starts, as bench's worker does for a streams group
        note = raise_connections()
        print(note or f"{CONNECTIONS_VAR}={os.environ[CONNECTIONS_VAR]} (yours)")
    if args.check:
        return 0 if check_equal(args, device) else 1
    rows = []
    for k in args.members:
        row = {"members": k}
        for how in args.fuse_as:
            row[how] = round(time_cell(how, k, args, device), 3)
            print(f"{k} x {args.method} {how}: {row[how]} ms per run-step", flush=True)
        rows.append(row)
    print(f"{device_name(str(device))}, torch {torch.__version__}, {args.backbone}, "
          f"{args.size} px, {args.epochs} x {args.steps} steps, stage_ahead={args.stage_ahead}, "
          f"precision {args.precision}")
    print(tabulate(rows, headers="keys", tablefmt="github"))
    if args.out:
        write_json(args.out, {"device": device_name(str(device)), "torch": torch.__version__,
                              "backbone": args.backbone, "size": args.size,
                              "epochs": args.epochs, "stage_ahead": args.stage_ahead,
                              "precision": args.precision,
                              "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
