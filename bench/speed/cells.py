"""The paper grid per backbone, as the released protocol trains it (issue 47):
ResNet50, ConvNeXt-T and Swin-T (torchvision), PathMNIST at 28 px (ConvNeXt-T
32), Chaoyang and Kvasir at 224 px for the train_PMH methods and 150 px for
LS, MbLS, MixUp and DCA (size_rule=released, bench.core.sizes), with the
host's staging and the evaluation included. Pure arithmetic on counts
(bench.speed.stepcount) and measured cells; tests/speed/test_cells.py checks
it by hand. `python -m bench.speed.projection` prints it.

ms per run-step of a cell is MEASURED where a card measured it, else
PROJECTED as max(ops x t_kernel, compute), compute = conv FLOPs / (u x conv
peak) + matmul FLOPs / (u x matmul peak), u the utilisation the measured
ResNet50 224 px cell achieved (calibrated, not assumed). A measured cell at
another precision is scaled by the model's ratio of the two precisions."""
from __future__ import annotations

from dataclasses import dataclass, field

from bench.core.config import PROFILES
from bench.core.paper import PAPER_METHODS
from bench.core.schedule import steps_per_epoch
from bench.core.sizes import resolve_sizes
from bench.datasets import chaoyang, kvasir
from bench.datasets.medmnist import PATHMNIST_PUBLISHED
from bench.methods import create_method

@dataclass(frozen=True)
class DataShape:
    """What a training run of one dataset costs, by size: classes, paper
    image size (before a backbone rounds it up) and the true split counts."""

    name: str
    classes: int
    size: int
    train: int
    val: int
    test: int


# PathMNIST (MedMNIST v2, docs/fidelity.md): 9 classes, train/val/test counts,
# from the adapter's constant rather than the `medmnist` package, which a GPU
# machine may lack; tests/test_gpuplan.py checks them against medmnist.INFO.
PATHMNIST = (9, *PATHMNIST_PUBLISHED.values())


def data_shapes() -> dict[str, DataShape]:
    """The three paper datasets. Chaoyang and Kvasir counts come from their
    adapters' constants (docs/fidelity.md), so a changed split shows up here too."""
    cy, kv = chaoyang.PUBLISHED, kvasir.PUBLISHED
    k, tr, va, te = PATHMNIST
    return {
        "pathmnist": DataShape("pathmnist", k, 28, tr, va, te),
        "chaoyang": DataShape("chaoyang", len(chaoyang.OFFICIAL["test"]), 224,
                              cy["train"], cy["val"], cy["test"]),
        "kvasir": DataShape("kvasir", 23, 224, kv["train"], kv["val"], kv["test"]),
    }



def train_steps(shape: DataShape, batch_size: int, epochs: int) -> int:
    """Optimiser steps of one run (bench.train.loop's epoch rule, times epochs),
    under the paper profile's drop_last (the released loader drops the last batch)."""
    return steps_per_epoch(shape.train, batch_size, PROFILES["paper"].drop_last) * epochs


def eval_images(shape: DataShape, cycles: int) -> int:
    """Images evaluated in one run: validation after every cycle, validation
    again at the best checkpoint, then the test set (bench.train.loop.train)."""
    return (cycles + 1) * shape.val + shape.test


BACKBONES = ("resnet50", "convnext_tiny", "swin_tiny")

# Dense TFLOP/s of an H200 SXM (NVIDIA's data sheet; sparsity figures halved).
H200_PEAKS = {"fp32": 67.0, "tf32": 494.5, "bf16": 989.0}
# (convolution, matmul) arithmetic of each precision choice (TrainConfig.precision):
# PyTorch's defaults are TF32 convolutions (cudnn.allow_tf32) and FP32 matmuls.
PRECISION_UNITS = {"released": ("tf32", "fp32"), "tf32": ("tf32", "tf32"),
                   "bf16": ("bf16", "bf16")}

# Host staging per training step (draw_epoch + Stage.load), serial with the
# card: 7.6 s for one PathMNIST epoch of 11,249 steps on the 2-core CPU
# (issue 47, SL1H, before the vectorised derivation). A parameter: the
# staging helper's new figure, or 0 where staging overlaps training.
STAGE_MS_PER_STEP = 7.6e3 / 11249

MEASURED_SOURCE = "H200, bench.speed.streamtime (docs/speed.md, 'Measured on an H200')"


@dataclass(frozen=True)
class Strategy:
    """How runs share the card: measured released-precision ms per run-step
    {(backbone, px): ms} and the per-kernel time of that grouping."""

    name: str
    us_per_kernel: float
    measured: dict = field(default_factory=dict)


# run_all: ./run_all.sh on a GPU (streams: 8 runs at 28 px, 4 at 224/150 px);
# 1.6 us a kernel = 1.29 ms / ~800 kernels at 8 streams (docs/speed.md).
# single: one captured run at a time; 4.2 us = 3.45 ms / 825 kernels alone.
STRATEGIES = {
    "run_all": Strategy("run_all", 1.6, {("resnet50", 28): 1.29, ("resnet50", 224): 5.19}),
    "single": Strategy("single", 4.2, {("resnet50", 28): 3.26, ("resnet50", 224): 6.72}),
}
CALIBRATION = ("resnet50", 224)  # the compute-bound measured cell u comes from


def compute_ms(conv: float, mm: float, precision: str, u: float = 1.0) -> float:
    """ms for `conv` and `mm` FLOPs at utilisation u of the H200's peaks."""
    pc, pm = (H200_PEAKS[p] * 1e12 for p in PRECISION_UNITS[precision])
    return 1e3 * (conv / pc + mm / pm) / u


def calibrated_u(count: dict, measured_ms: float) -> float:
    """The utilisation a measured released-precision cell achieved."""
    return compute_ms(count["conv"], count["mm"], "released") / measured_ms


def projected_ms(count: dict, precision: str, us_per_kernel: float, u: float) -> float:
    """max(kernels x time per kernel, compute at utilisation u)."""
    return max(count["ops"] * us_per_kernel / 1e3,
               compute_ms(count["conv"], count["mm"], precision, u))


def step_ms(count: dict, key: tuple, precision: str, strat: Strategy, u: float) -> tuple:
    """(ms per run-step, source text) of one (backbone, px) cell."""
    model = projected_ms(count, precision, strat.us_per_kernel, u)
    got = strat.measured.get(key)
    if got is None:
        return model, (f"projected: max({count['ops']} ops x {strat.us_per_kernel} us, "
                       f"{(count['conv'] + count['mm']) / 1e9:.1f} GFLOP at u={u:.3f} of peak)")
    if precision == "released":
        return got, f"measured: {MEASURED_SOURCE}"
    ratio = model / projected_ms(count, "released", strat.us_per_kernel, u)
    return got * ratio, f"projected: measured {got} ms x model ratio {ratio:.2f}"


def eval_ms_image(count: dict, precision: str, u: float) -> float:
    """Forward-only compute per evaluated image (batches of 256: launches amortised)."""
    return compute_ms(count["eval_conv"], count["eval_mm"], precision, u)


def run_sizes(shape: DataShape, backbone: str) -> dict:
    """{(train px, test px): paper methods trained at them} under size_rule=released."""
    out: dict = {}
    for m in PAPER_METHODS:
        s = resolve_sizes(PROFILES["paper"], shape.size, backbone, create_method(m))
        out[(s.train, s.test)] = out.get((s.train, s.test), 0) + 1
    return out


def run_seconds(shape: DataShape, ms: float, eval_train: float, eval_test: float,
                stage_ms: float, cfg=PROFILES["paper"]) -> dict:
    """Seconds of one run: steps x (ms + staging), validation (every cycle and
    the best checkpoint, at the training size) and test (at the test size)."""
    steps = train_steps(shape, cfg.batch_size, cfg.epochs)
    val = eval_images(shape, cfg.cycles) - shape.test
    return {"train": steps * ms / 1e3, "stage": steps * stage_ms / 1e3,
            "eval": (val * eval_train + shape.test * eval_test) / 1e3}


def needed_sizes(shapes: dict) -> set:
    """Every (backbone, px) the grid trains or tests at."""
    return {(bb, px) for shape in shapes.values() for bb in BACKBONES
            for sizes in run_sizes(shape, bb) for px in sizes}


def grid_rows(shapes: dict, counts: dict, strategy: str, precision: str, seeds: int = 5,
              stage_ms: float = STAGE_MS_PER_STEP) -> list[dict]:
    """One row per (dataset, backbone, train px): runs, ms per step and its
    source, and hours of training, staging and evaluation for all those runs."""
    strat = STRATEGIES[strategy]
    u = calibrated_u(counts[CALIBRATION], strat.measured[CALIBRATION])
    rows = []
    for ds, shape in shapes.items():
        for bb in BACKBONES:
            for (train, test), methods in sorted(run_sizes(shape, bb).items()):
                ms, source = step_ms(counts[(bb, train)], (bb, train), precision, strat, u)
                sec = run_seconds(shape, ms, eval_ms_image(counts[(bb, train)], precision, u),
                                  eval_ms_image(counts[(bb, test)], precision, u), stage_ms)
                runs = methods * seeds
                hours = {k: runs * v / 3600 for k, v in sec.items()}
                rows.append({"dataset": ds, "backbone": bb, "px": train, "runs": runs,
                             "ms_step": ms, "source": source, **hours,
                             "hours": sum(hours.values())})
    return rows


def totals(rows: list[dict]) -> dict:
    """Hours per backbone and for the grid."""
    out = {bb: sum(r["hours"] for r in rows if r["backbone"] == bb) for bb in BACKBONES}
    return {**out, "grid": sum(out.values())}
