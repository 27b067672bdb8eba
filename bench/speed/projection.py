"""Pure arithmetic behind `python -m bench.speed.gpuplan`: the paper grid's shapes,
how each strategy groups its runs, device peaks, and the projection of
measured time per step into wall time of a run, a group and the whole grid.

Nothing here touches a device; tests/test_gpuplan.py checks it by hand.
"""
from __future__ import annotations

import argparse

import torch

from bench.core.config import PRECISIONS
from bench.core.paper import PAPER_METHODS
from bench.methods import create_method
from bench.speed import cells, stepcount
# the datasets' shapes and a run's steps and evaluated images, declared beside
# the per-backbone cells that use them too (gpuplan and graphtime read them here)
from bench.speed.cells import PATHMNIST, DataShape, data_shapes, eval_images, train_steps

__all__ = ["PATHMNIST", "DataShape", "data_shapes", "eval_images", "train_steps"]

# The paper's trained methods (Tables 1-2) and their head counts.
PAPER_HEADS = {m: create_method(m).heads for m in PAPER_METHODS}
# The method timed for a run of h heads: heads, not the loss, set the step's
# cost (the heads are one linear layer; the losses are a few small kernels).
METHOD_FOR_HEADS = {1: "sl1h", 2: "2hml", 4: "4hml"}


# ------------------------------------------------------------- strategies --
# A strategy turns one (dataset, backbone) cell of the grid into groups, each
# (heads, path, members): `path` is "single" (bench.train.loop) or "fused"
# (bench.train.fused), `members` the runs trained at once.
def groups(strategy: str, seeds: int, methods: dict[str, int] = PAPER_HEADS) -> list[tuple]:
    if strategy == "single":  # one run at a time
        return [(h, "single", 1) for h in methods.values() for _ in range(seeds)]
    if strategy == "seeds":  # `bench run --fuse-seeds`: a method's seeds at once
        return [(h, "fused", seeds) for h in methods.values()]
    if strategy == "methods":  # every method sharing a head count, x seeds, at once
        counts: dict[int, int] = {}
        for h in methods.values():
            counts[h] = counts.get(h, 0) + 1
        return [(h, "fused", n * seeds) for h, n in sorted(counts.items())]
    raise ValueError(f"unknown strategy {strategy}")


STRATEGIES = ("single", "seeds", "methods")


def group_members(strategy: str, heads: int, seeds: int) -> tuple:
    """Method name of every member of the group `strategy` trains for `heads`."""
    if strategy == "methods":
        return tuple(m for m, h in PAPER_HEADS.items() if h == heads for _ in range(seeds))
    n = 1 if strategy == "single" else seeds
    return (METHOD_FOR_HEADS[heads],) * n
# --set switches per variant; the fused path has no channels_last. "graphs" is
# torch.compile's reduce-overhead mode: the step replayed from CUDA graphs.
# fp32 / bf16 train through the loop's default step: on CUDA the graph-safe step
# captured as a CUDA graph (bench.train.graphstep); "eager" is the per-step path.
VARIANTS = {"fp32": (), "bf16": ("bf16=true",), "eager": ("graph=false",),
            "bf16_cl": ("bf16=true", "channels_last=true"),
            "compile": ("bf16=true", "channels_last=true", "compile=true"),
            "graphs": ("bf16=true", "compile=true", "compile_mode=reduce-overhead")}
FUSED_VARIANTS = ("fp32", "bf16", "eager", "compile", "graphs")


def job_sizes(members: int, steps: int, eval_images: int, eval_batch: int) -> tuple:
    """(timed steps, evaluated images) of a job: a group of n > 5 members has
    n/5 times longer steps, so it times 5/n as many (at least 3) and evaluates
    5/n as many images (at least one evaluation batch, or all asked for),
    to fit the budget."""
    share = max(1.0, members / 5)
    return (max(3, round(steps / share)),
            max(min(eval_batch, eval_images), int(eval_images / share)))


def key(dataset: str, backbone: str, heads: int, path: str, members: int, variant: str) -> str:
    return f"{dataset}|{backbone}|{heads}h|{path}|x{members}|{variant}"


# ------------------------------------------------------------------- peaks --
# Dense (no sparsity) peak TFLOP/s from NVIDIA's data sheets: (bf16, fp32).
# Matched on the device name; the first rule whose words all occur wins.
PEAKS = (
    (("H100", "PCIe"), (756.0, 51.0)),
    (("H100", "SXM"), (989.0, 67.0)),
    (("H100", "HBM3"), (989.0, 67.0)),  # "NVIDIA H100 80GB HBM3" is the SXM part
    (("H200", "NVL"), (835.0, 60.0)),  # the PCIe card: lower clocks and power
    (("H200",), (989.0, 67.0)),  # the SXM part: same compute as H100 SXM
)


def peak_tflops(device_name: str, bf16: bool) -> float | None:
    """Peak dense TFLOP/s of the named device, or None when unknown (CPU, an
    unlisted GPU such as the H100 NVL)."""
    for words, (p16, p32) in PEAKS:
        if all(w.lower() in device_name.lower() for w in words):
            return p16 if bf16 else p32
    return None


def peak_fraction(tflops: float, device_name: str, bf16: bool, is_cuda: bool) -> str:
    if not is_cuda:
        return "n/a"
    peak = peak_tflops(device_name, bf16)
    return "peak unknown" if peak is None else f"{100 * tflops / peak:.2f}%"


# -------------------------------------------------------------- projection --
def group_seconds(shape: DataShape, batch_size: int, epochs: int, cycles: int,
                  ms_per_step: float, eval_ms_per_image: float) -> float:
    """Wall time of one group (or single run): all its steps at the measured
    time per step, plus its evaluation at the measured time per image (a fused
    group evaluates all members in one pass over each image)."""
    return (train_steps(shape, batch_size, epochs) * ms_per_step
            + eval_images(shape, cycles) * eval_ms_per_image) / 1000.0


def lookup(meas: dict, dataset, backbone, heads, path, members, variant):
    """(measurement, substituted?) : the exact head count if measured, else
    the same group measured with another head count (heads are one linear
    layer, a small share of the step), else (None, False)."""
    exact = meas.get(key(dataset, backbone, heads, path, members, variant))
    if exact:
        return exact, False
    for h in (4, 2, 1):
        other = meas.get(key(dataset, backbone, h, path, members, variant))
        if other:
            return other, True
    return None, False


def grid_projection(meas: dict, shapes: dict, backbones: list, strategy: str, variant: str, *,
                    seeds: int, batch_size: int, epochs: int, cycles: int) -> dict:
    """Projected wall time of the grid datasets x backbones x paper methods x
    seeds under one strategy and variant. `meas` maps key(...) to a dict with
    ms_step and eval_ms_image. Returns hours, groups needed / measured /
    substituted, and the cells that could not be projected."""
    seconds, needed, found, subst, missing = 0.0, 0, 0, 0, []
    for ds, shape in shapes.items():
        for bb in backbones:
            for heads, path, members in groups(strategy, seeds):
                needed += 1
                m, swapped = lookup(meas, ds, bb, heads, path, members, variant)
                if m is None:
                    missing.append(key(ds, bb, heads, path, members, variant))
                    continue
                found, subst = found + 1, subst + int(swapped)
                seconds += group_seconds(shape, batch_size, epochs, cycles,
                                         m["ms_step"], m["eval_ms_image"])
    return {"strategy": strategy, "variant": variant, "hours": seconds / 3600.0,
            "groups": needed, "measured": found, "substituted": subst,
            "complete": found == needed, "missing": sorted(set(missing))}


# ------------------------------------------------------------ per backbone --
def print_grid(counts: dict, strategy: str, precision: str, stage_ms: float) -> None:
    """The per-backbone cells and totals of one strategy and precision."""
    rows = cells.grid_rows(data_shapes(), counts, strategy, precision, stage_ms=stage_ms)
    print(f"\n== strategy {strategy}, precision {precision} (H200 hours; staging "
          f"{stage_ms:.3f} ms a step) ==")
    print(f"{'dataset':10} {'backbone':14} {'px':>4} {'runs':>4} {'ms/step':>8} "
          f"{'train h':>8} {'stage h':>8} {'eval h':>7} {'hours':>7}  source")
    for r in rows:
        print(f"{r['dataset']:10} {r['backbone']:14} {r['px']:>4} {r['runs']:>4} "
              f"{r['ms_step']:>8.2f} {r['train']:>8.2f} {r['stage']:>8.2f} {r['eval']:>7.2f} "
              f"{r['hours']:>7.2f}  {r['source']}")
    print("  ".join(f"{k}: {v:.1f} h" for k, v in cells.totals(rows).items()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, prog="python -m bench.speed.projection",
                                 description="The paper grid per backbone, projected "
                                 "(bench/speed/cells.py; docs/speed.md, 'The projection model')")
    ap.add_argument("--strategy", choices=sorted(cells.STRATEGIES), action="append")
    ap.add_argument("--precision", choices=PRECISIONS, action="append")
    ap.add_argument("--stage-ms", type=float, default=cells.STAGE_MS_PER_STEP,
                    help="host staging per training step on the critical path (0: overlapped)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    counts = {key: stepcount.count_step(*key) for key in sorted(cells.needed_sizes(data_shapes()))}
    print("per training step (batch 8, SL1H), counted on the CPU:")
    for (bb, px), c in counts.items():
        print(f"  {bb:14} {px:>4} px: {c['ops']:>5} aten ops, {c['conv'] / 1e9:7.1f} GFLOP "
              f"convolution, {c['mm'] / 1e9:7.1f} GFLOP matmul")
    for strategy in args.strategy or ["run_all"]:
        for precision in args.precision or list(PRECISIONS):
            print_grid(counts, strategy, precision, args.stage_ms)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
