"""ms per training step: the per-step path, the graph-safe step and its CUDA
graph, alone and on several CUDA streams; the paper grid projected from them.

    python -m bench.speed.graphtime [--device cuda] [--backbone resnet50]
        [--cells 28:1,28:5,28:25,224:1,224:5] [--streams 1,2,4] [--steps 20]
        [--paths auto] [--budget-s 300] [--out graphtime.json]

A cell is (image size, members): 1 member is one 4HML run, 5 a group of five
4HML seeds, 8 the first 8 of the paper's one-head group (a group of
./run_all.sh's --fuse-max 8), 25 the whole group (SL1H, LS, MbLS, MixUp, DCA
x 5 seeds), as `bench run --fuse methods` trains them. Per cell it times
`--steps` steps (after warm-up) of: the per-step path (`per-step`, the loop
with graph=false), the graph-safe step run eagerly (`graph-safe`) and
replayed as a CUDA graph (`captured`), and K copies of the cell's group
replayed round-robin on K streams (`captured xK streams`: ms per step of one
group, i.e. wall time / steps / K). Kernels per step are counted with
torch.profiler on one uncaptured step (a warm-up step on captured paths, one
stream). Data are synthetic (random uint8 images).
The projection (docs/speed.md) takes every backbone as ResNet50 (ConvNeXt-T
and Swin-T cost more at 224 px, so it is a lower bound there) and leaves out
evaluation.

`--paths` picks the paths (default: per-step, graph-safe and, on CUDA,
captured); `compiled` and `compiled-captured` are the graph-safe step
compiled whole by inductor (`compile_step=true`), uncaptured and captured.
Where a cell has both an eager and a compiled path (graph-safe / compiled,
captured / compiled-captured), it prints compiled / eager per cell: kernels
per step and ms per run-step (ms per step / members).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import torch
from tabulate import tabulate
from torch.profiler import ProfilerActivity, profile

from bench.core.config import PROFILES
from bench.core.device import check_device, device_name
from bench.core.errors import BenchError
from bench.core.files import write_json
from bench.speed import projection as P
from bench.speed.capture import PAPER_ONE_HEAD, epoch_orders, group_stepper
from bench.speed.steptime import synthetic
from bench.train.graphstep import GraphRunner
from bench.train.loop import sync
from bench.train.streams import on_stream

ONE_HEAD_GROUP = PAPER_ONE_HEAD * 5
WARMUP = 5  # eager warm-up, then (captured paths) the capture
MEMBERS = (1, 5, 8, 25)
PATHS = ("per-step", "graph-safe", "captured", "compiled", "compiled-captured")


def members_of(n: int) -> tuple:
    return ONE_HEAD_GROUP[:n] if n in (8, 25) else ("4hml",) * n


def _kernels(fn, device) -> int | None:
    """CUDA kernels (and copies) one call of fn launches, by torch.profiler."""
    if device.type != "cuda":
        return None

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        sync(device)
    return sum(1 for e in prof.events() if e.device_type.name == "CUDA")


def _setup(size, names, backbone, cfg, device, steps):
    x, y = synthetic(steps * cfg.batch_size, size, 9, device)
    st = group_stepper(names, backbone, size, cfg, device)
    st.train_mode()
    return st, x, y


def time_path(path: str, size: int, names: tuple, s, streams: int = 1) -> dict:
    """Seconds per step of one path on one cell (`streams` groups at once)."""
    device = torch.device(s.device)
    cfg = dataclasses.replace(PROFILES["paper"], pretrained=False,
                              compile_step=path.startswith("compiled"))
    total = WARMUP + s.steps
    groups = [_setup(size, names, s.backbone, cfg, device, total) for _ in range(streams)]
    runs, kernels = [], None
    for st, x, y in groups:
        orders, lrs = epoch_orders(st, len(y), cfg)
        if path == "per-step":
            def one(st=st, x=x, y=y, batches=iter(zip(zip(*orders), lrs))):
                st.step(x, y, *next(batches))  # the epoch's next (indices, lr)
        else:
            runner = GraphRunner(st, x, y, say=lambda text: print(text, file=sys.stderr))
            runner.capture = path.endswith("captured")
            (n, stage, _), = runner.stage_epoch(orders, lrs)

            def one(runner=runner, n=n, stage=stage):
                runner.step(n, stage)
        runs.append(one)
    cuda_streams = [torch.cuda.Stream(device) if device.type == "cuda" else None
                    for _ in range(streams)]

    def round_robin():
        for fn, stream in zip(runs, cuda_streams):
            with on_stream(stream):
                fn()
    for i in range(WARMUP - 1):
        if i == 1 and path.endswith("captured") and streams == 1:
            # a warm-up step: uncaptured, the kernels the capture then records
            kernels = _kernels(runs[0], device)
        else:
            round_robin()
    if not path.endswith("captured"):
        kernels = _kernels(runs[0], device)  # one uncaptured step (a warm-up step)
    else:
        round_robin()
    sync(device)
    t0 = time.perf_counter()
    for _ in range(s.steps):
        round_robin()
    sync(device)
    sec = (time.perf_counter() - t0) / s.steps
    return {"path": path + (f" x{streams} streams" if streams > 1 else ""), "size": size,
            "members": len(names), "streams": streams, "ms_step": 1000 * sec / streams,
            "ms_run_step": 1000 * sec / streams / len(names),
            "images_per_s": streams * len(names) * cfg.batch_size / sec, "kernels": kernels}


def plan(s) -> list:
    out, cuda = [], s.device.startswith("cuda")
    paths = s.paths or (("per-step", "graph-safe", "captured") if cuda
                        else ("per-step", "graph-safe"))
    for size, members in s.cells:
        out += [(path, size, members, 1) for path in paths]
        if cuda and size == s.cells[0][0] and \
                members == max(m for z, m in s.cells if z == size):
            out += [("captured", size, members, k) for k in s.streams if k > 1]
    return out


def project(rows: list, backbones: int = 3) -> list:
    """Device-hours of the paper grid's training (5 seeds, 8 methods, every
    backbone as ResNet50, evaluation left out) per measured path, two ways:
    `runs`, the 360 runs one step after another (K streams: K runs at once,
    ms_step per run-step) from the 1-member cells; `fused`, method-fused
    groups of 25, 10 and 5 (a group of 10 interpolated between 5 and 25
    members; 25 members at 224 px as 5 x the 5-member step, compute-bound,
    where not measured). Each dataset at its paper size: PathMNIST 28 px,
    Chaoyang and Kvasir 224 px; a size not measured leaves the row empty."""
    shapes = P.data_shapes()
    out = []
    for path in dict.fromkeys(r["path"] for r in rows):
        ms = {(r["size"], r["members"]): r["ms_step"] for r in rows if r["path"] == path}
        for how, groups in (("runs", ((1, 40),)), ("fused", ((25, 1), (10, 1), (5, 1)))):
            hours, missing = 0.0, []
            for ds in shapes.values():
                steps = P.train_steps(ds, 8, 50)
                for members, count in groups:
                    t = ms.get((ds.size, 1)) if how == "runs" else _group_ms(ms, ds.size, members)
                    if t is None:
                        missing.append(f"{ds.name} {ds.size}px x{members}")
                    else:
                        hours += backbones * count * steps * t / 3.6e6
            if len(missing) < len(shapes) * len(groups):
                out.append({"path": path, "as": how, "grid_device_hours":
                            None if missing else hours, "missing": ", ".join(missing)})
    return out


def compiled_ratios(rows: list) -> list:
    """Per cell measured both ways (one stream): compiled / eager kernels per
    step (uncaptured steps, what a capture replays) and ms per run-step
    (captured against captured, uncaptured against uncaptured)."""
    got = {(r["path"], r["size"], r["members"]): r for r in rows if r["streams"] == 1}
    out = []
    for (path, size, members), r in got.items():
        eager = got.get(({"compiled": "graph-safe", "compiled-captured": "captured"}
                         .get(path, ""), size, members))
        if eager is None:
            continue
        row = {"size": size, "members": members, "compared": f"{path} / {eager['path']}",
               "ms_run_step": r["ms_run_step"],
               "ms_ratio": r["ms_run_step"] / eager["ms_run_step"]}
        if r["kernels"] and eager["kernels"]:
            row.update(kernels=r["kernels"], kernels_ratio=r["kernels"] / eager["kernels"])
        out.append(row)
    return out


def _group_ms(ms: dict, size: int, members: int):
    if (size, members) in ms:
        return ms[(size, members)]
    five, big = ms.get((size, 5)), ms.get((size, 25))
    if members == 10 and five is not None and big is not None:
        return five + (big - five) * 5 / 20
    if five is not None:
        return five * members / 5
    return None


def parse_cells(text: str) -> tuple:
    try:
        cells = tuple((int(a), int(b)) for a, b in (c.split(":") for c in text.split(",")))
    except ValueError:
        raise BenchError(f"--cells {text!r}: expected SIZE:MEMBERS,... e.g. 28:1,28:5,224:1")
    bad = [m for _, m in cells if m not in MEMBERS]
    if bad:
        raise BenchError(f"--cells: members must be one of {', '.join(map(str, MEMBERS))}, "
                         f"got {bad[0]}")
    return cells


def parse_paths(text: str) -> tuple:
    """--paths: `auto` (the default choice) -> (), else the named paths."""
    if text == "auto":
        return ()
    paths = tuple(text.split(","))
    bad = [p for p in paths if p not in PATHS]
    if bad:
        raise BenchError(f"--paths {bad[0]}: unknown; allowed: auto, {', '.join(PATHS)}")
    return paths


def parse_args(argv=None):
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m bench.speed.graphtime",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--backbone", default="resnet50")
    p.add_argument("--cells", default="28:1,28:5,28:25,224:1,224:5")
    p.add_argument("--streams", default="1,2,4")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--paths", default="auto", help="auto, or a comma list of: "
                   + ", ".join(PATHS) + " (compiled: an inductor compile per cell)")
    p.add_argument("--budget-s", type=float, default=300.0)
    p.add_argument("--out", default="")
    return p.parse_args(argv)


def main(argv=None) -> int:
    s = parse_args(argv)
    try:
        check_device(s.device)
        s.cells = parse_cells(s.cells)
        s.paths = parse_paths(s.paths)
        s.streams = tuple(int(k) for k in s.streams.split(","))
        if s.steps < 1:
            raise BenchError(f"--steps must be >= 1, got {s.steps}")
    except (BenchError, ValueError) as err:
        print(f"graphtime: {err}", file=sys.stderr)
        return 2
    t0, rows, skipped = time.perf_counter(), [], []
    result = {"device": device_name(s.device), "torch": torch.__version__,
              "backbone": s.backbone, "note": "synthetic data"}
    for path, size, members, k in plan(s):
        if time.perf_counter() - t0 > s.budget_s:
            skipped.append(f"{path} {size}px x{members} ({k} streams)")
            continue
        try:
            rows.append(time_path(path, size, members_of(members), s, k))
        except Exception as err:  # noqa: BLE001 - one failing cell must not end the run
            skipped.append(f"{path} {size}px x{members}: {type(err).__name__}: "
                           f"{str(err).splitlines()[0] if str(err) else ''}")
        if s.out:
            write_json(s.out, {**result, "rows": rows, "skipped": skipped})
        if s.device == "cuda":
            torch.cuda.empty_cache()
    result.update(rows=rows, skipped=skipped, projection=project(rows),
                  compiled=compiled_ratios(rows))
    if s.out:
        write_json(s.out, result)
    print(f"{result['device']}, torch {result['torch']}, {s.backbone}, synthetic data")
    print(tabulate(rows, headers="keys", floatfmt=".2f"))
    print(tabulate(result["projection"], headers="keys", floatfmt=".1f"))
    if result["compiled"]:
        print("compiled / eager, per cell:")
        print(tabulate(result["compiled"], headers="keys", floatfmt=".3f"))
    for line in skipped:
        print(f"skipped: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
