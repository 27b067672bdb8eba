"""Side-by-side throughput benchmark: harness vs the released code's pipeline
vs a bare PyTorch loop, in ONE process, same model, data and batch size.

    python -m bench.speed.perf [--device cpu|cuda] [--backbone resnet18] [--heads 4]
                         [--size 28] [--steps 30] [--repeats 5]

(a) harness   : bench.train.loop.train (uint8 images resident on the device,
                batched per-image TrivialAugmentWide, fused normalisation) and
                bench.train.loop.predict_logits (large batches).
(b) reference : as the released code: a DataLoader over PIL images,
                TrivialAugmentWide + ToTensor + Normalize per sample, batch 8,
                CosineAnnealingWarmRestarts stepped per iteration; evaluation
                through a DataLoader at batch 8.
(c) bare      : pre-normalised float tensors on the device, a random
                permutation, forward/backward/step; no augmentation (the floor).
Pipelines are interleaved and repeated; medians are reported, because other
processes share the CPU. See docs/speed.md.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import statistics
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from tabulate import tabulate
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms as T
from tqdm import tqdm

from bench.core.config import PROFILES, apply_overrides, parse_set, validate
from bench.core.device import check_device, default_device, device_name
from bench.core.errors import BenchError
from bench.datasets import load_dataset
from bench.datasets.base import Split
from bench.methods.base import Method
from bench.train.backbones import BACKBONES, build_model
from bench.train.fused import train_fused
from bench.train.loop import normalise, predict_logits, sync, to_device_images, train

IMAGENET = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])  # the reference's T.Normalize


@dataclass(frozen=True)
class Settings:
    device: str = "cpu"
    backbone: str = "resnet18"
    heads: int = 4  # 4HML's head count
    size: int = 28  # PathMNIST's resolution
    batch_size: int = 8  # the paper's batch
    steps: int = 30  # timed training steps per pipeline and repeat
    eval_images: int = 512
    eval_batch_size: int = 256  # harness evaluation batch (TrainConfig default)
    repeats: int = 5
    warmup_steps: int = 3
    ref_workers: int = 0  # DataLoader workers of the reference pipeline
    threads: int = 0  # torch intra-op threads; 0 = torch's default
    fused_seeds: int = 0  # >1 adds a row: that many seeds trained at once (bench.train.fused)
    sets: tuple = ()  # harness TrainConfig overrides, e.g. ("bf16=true", "channels_last=true")
    seed: int = 0


class MultiHeadCE(Method):
    """Cross-entropy on every head, averaged: the cost of a multi-head method."""

    def __init__(self, heads: int):
        super().__init__("perf-ce")
        self._heads = heads

    @property
    def heads(self) -> int:
        return self._heads

    def loss(self, logits, target):
        m = logits.shape[1]
        return F.cross_entropy(logits.flatten(0, 1), target.repeat_interleave(m))


# -------------------------------------------------------------------- data --
def load_images(s: Settings):
    """digits (real, offline) at the requested size; tiled to the needed count."""
    bundle = load_dataset("digits", image_size=s.size)
    need = max(s.steps, s.warmup_steps) * s.batch_size
    reps = -(-need // len(bundle.train))
    images = np.concatenate([bundle.train.images] * reps)[:need]
    labels = np.concatenate([bundle.train.labels] * reps)[:need]
    reps = -(-s.eval_images // len(bundle.test))
    eval_images = np.concatenate([bundle.test.images] * reps)[:s.eval_images]
    return bundle, images, labels, eval_images


def subset_bundle(bundle, images, labels, n: int):
    """A copy of `bundle` whose train split is the first n images; tiny val/test
    splits keep the (untimed) end-of-cycle evaluation short."""
    small = lambda sp: Split(sp.images[:16], sp.labels[:16])  # noqa: E731
    return dataclasses.replace(bundle, train=Split(images[:n], labels[:n]),
                               val=small(bundle.val), test=small(bundle.test))


# --------------------------------------------------------------- pipelines --
def _timed(fn, device) -> float:
    device = torch.device(device)
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def harness_config(s: Settings):
    """The paper's protocol, one cycle of one epoch, plus the --set switches."""
    cfg = dataclasses.replace(PROFILES["paper"], cycles=1, epochs_per_cycle=1,
                              batch_size=s.batch_size, eval_batch_size=s.eval_batch_size)
    return apply_overrides(cfg, parse_set(list(s.sets)))


def harness_train(model, method, s: Settings, data, steps: int) -> float:
    cfg = harness_config(s)
    bundle = subset_bundle(data[0], data[1], data[2], steps * s.batch_size)
    return train(model, method, cfg, bundle, s.seed, device=s.device,
                 progress=False).train_images_per_s


def fused_train(model, method, s: Settings, data, steps: int) -> float:
    """Images/s of all seeds together (S x 8 images per step). A fused record's
    train_images_per_s is already that: its images over its share of the time."""
    cfg = harness_config(s)
    bundle = subset_bundle(data[0], data[1], data[2], steps * s.batch_size)
    seeds = list(range(s.seed, s.seed + s.fused_seeds))
    models = [copy.deepcopy(model) for _ in seeds]
    res = train_fused(models, [method] * len(seeds), cfg, bundle, seeds, device=s.device,
                      progress=False)
    return res[0].train_images_per_s


def harness_eval(model, s: Settings, data) -> float:
    """`model` comes from harness_train: train() has put it on the device
    (channels_last too, when asked)."""
    x = to_device_images(data[3], torch.device(s.device))
    cfg = harness_config(s)
    secs = _timed(lambda: predict_logits(model, x, cfg.eval_batch_size, cfg.bf16,
                                         cfg.channels_last), s.device)
    return len(x) / secs


class PILDataset(Dataset):
    def __init__(self, images: np.ndarray, labels: np.ndarray, transform):
        self.images = [Image.fromarray(im) for im in images]
        self.labels, self.transform = labels, transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.transform(self.images[i]), int(self.labels[i])


def _loader(images, labels, transform, s: Settings, shuffle: bool):
    ds = PILDataset(images, labels, transform)
    return DataLoader(ds, batch_size=s.batch_size, shuffle=shuffle, num_workers=s.ref_workers,
                      pin_memory=torch.device(s.device).type == "cuda")


def reference_train(model, method, s: Settings, data, steps: int) -> float:
    tf = T.Compose([T.TrivialAugmentWide(), T.ToTensor(), T.Normalize(*IMAGENET)])
    n = steps * s.batch_size
    loader = _loader(data[1][:n], data[2][:n], tf, s, shuffle=True)
    model.to(s.device).train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=max(len(loader), 1))

    def step(x, y):
        x, y = x.to(s.device, non_blocking=True), y.to(s.device, non_blocking=True)
        loss = method.loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()

    batches = _started(loader)
    step(*next(batches))

    def run():
        for x, y in batches:
            step(x, y)
    return (n - s.batch_size) / _timed(run, s.device)


def _started(loader):
    """An iterator whose workers are already up. Worker start-up is paid once
    an epoch by the released code (thousands of steps), so it stays out of a
    short timed window; the first batch is taken (and trained on) untimed."""
    return iter(loader)


@torch.no_grad()
def reference_eval(model, s: Settings, data) -> float:
    tf = T.Compose([T.ToTensor(), T.Normalize(*IMAGENET)])
    loader = _loader(data[3], np.zeros(len(data[3]), np.int64), tf, s, shuffle=False)
    model.to(s.device).eval()

    batches = _started(loader)
    first = F.softmax(model(next(batches)[0].to(s.device)), dim=-1).mean(1).cpu()

    def run():
        probs = [F.softmax(model(x.to(s.device)), dim=-1).mean(1).cpu() for x, _ in batches]
        return torch.cat([first, *probs])
    return (len(data[3]) - len(first)) / _timed(run, s.device)


def _normalised(images: np.ndarray, device) -> torch.Tensor:
    return normalise(to_device_images(images, torch.device(device)))


def bare_train(model, method, s: Settings, data, steps: int) -> float:
    n = steps * s.batch_size
    x, y = _normalised(data[1][:n], s.device), torch.from_numpy(data[2][:n]).to(s.device)
    model.to(s.device).train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)

    def run():
        for idx in torch.randperm(n, device=s.device).split(s.batch_size):
            loss = method.loss(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return n / _timed(run, s.device)


@torch.no_grad()
def bare_eval(model, s: Settings, data) -> float:
    x = _normalised(data[3], s.device)
    model.to(s.device).eval()

    def run():
        return torch.cat([model(x[i:i + s.batch_size]) for i in range(0, len(x), s.batch_size)])
    return len(x) / _timed(run, s.device)


PIPELINES = {
    "harness": (harness_train, harness_eval),
    "reference": (reference_train, reference_eval),
    "bare": (bare_train, bare_eval),
}


# ----------------------------------------------------------------- measure --
def measure(s: Settings, progress: bool = True) -> dict:
    """{pipeline: {"train": [img/s per repeat], "eval": [...]}}; pipelines
    interleaved within each repeat so background load hits all of them alike."""
    check(s)
    if s.threads:
        torch.set_num_threads(s.threads)
    torch.manual_seed(s.seed)
    data = load_images(s)
    method = MultiHeadCE(s.heads)
    base, _ = build_model(s.backbone, s.size, s.heads, len(data[0].classes))
    pipes = pipelines(s)
    for name, (fit, evaluate) in pipes.items():  # warm-up: allocator, kernels, workers,
        model = copy.deepcopy(base)  # and cuDNN's algorithm search at every eval shape
        fit(model, method, s, data, s.warmup_steps)
        if evaluate is not None:
            evaluate(model, s, data)
    out = {name: {"train": [], "eval": []} for name in pipes}
    bar = tqdm(total=s.repeats * len(pipes), desc="perf", disable=not progress)
    for _ in range(s.repeats):
        for name, (fit, evaluate) in pipes.items():
            model = copy.deepcopy(base)
            out[name]["train"].append(fit(model, method, s, data, s.steps))
            if evaluate is not None:
                out[name]["eval"].append(evaluate(model, s, data))
            bar.update()
    bar.close()
    return out


def pipelines(s: Settings) -> dict:
    if s.fused_seeds > 1:
        return {**PIPELINES, f"harness fused x{s.fused_seeds}": (fused_train, None)}
    return dict(PIPELINES)


def check(s: Settings) -> None:
    check_device(s.device)
    BACKBONES.get(s.backbone)  # one-line error for an unknown name
    validate(harness_config(s))  # bad --set keys, types and choices fail before any work
    for key in ("heads", "size", "steps", "repeats", "eval_images", "batch_size",
                "eval_batch_size"):
        if getattr(s, key) < 1:
            raise BenchError(f"--{key.replace('_', '-')} must be >= 1, got {getattr(s, key)}")
    # the reference's first batch (worker start-up) is untimed: keep one more
    if s.steps < 2:
        raise BenchError(f"--steps must be >= 2, got {s.steps}")
    if s.eval_images <= s.batch_size:
        raise BenchError(f"--eval-images must be more than the batch ({s.batch_size}), "
                         f"got {s.eval_images}")


def ratios(res: dict) -> dict:
    med = {n: {k: statistics.median(v) for k, v in r.items() if v} for n, r in res.items()}
    h, r, b = med["harness"], med["reference"], med["bare"]
    out = {
        "train harness/reference": h["train"] / r["train"],
        "train harness/bare": h["train"] / b["train"],
        "eval harness/reference": h["eval"] / r["eval"],
        "eval harness/bare": h["eval"] / b["eval"],
    }
    for name in set(med) - set(PIPELINES):  # fused rows
        out[f"train {name}/reference"] = med[name]["train"] / r["train"]
    return out


def table(res: dict) -> str:
    rows = []
    for name, r in res.items():
        rows.append([name] + [f"{statistics.median(r[k]):.0f} ({min(r[k]):.0f}-{max(r[k]):.0f})"
                              if r[k] else "-" for k in ("train", "eval")])
    return tabulate(rows, headers=["pipeline", "train img/s median (min-max)",
                                   "eval img/s median (min-max)"])


def _device_label(device: str) -> str:
    """The device's name for the settings line; a bad --device is shown as
    given (check() then reports it as the one error line)."""
    try:
        check_device(device)
    except BenchError:
        return device
    return device_name(device)


def parse_args(argv=None) -> Settings:
    d = Settings()
    p = argparse.ArgumentParser(
        allow_abbrev=False, prog="python -m bench.speed.perf", description=__doc__.split("\n")[0])
    p.add_argument("--device", default=default_device())
    for key in ("backbone", "heads", "size", "steps", "repeats", "eval_images",
                "eval_batch_size", "ref_workers", "threads", "fused_seeds", "seed"):
        default = getattr(d, key)
        p.add_argument("--" + key.replace("_", "-"), type=type(default), default=default)
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="harness TrainConfig override (bf16, channels_last, compile, ...)")
    a = p.parse_args(argv)
    return Settings(**{**vars(a), "sets": tuple(a.sets)})


def main(argv=None) -> int:
    try:
        s = parse_args(argv)
        if s.threads:
            torch.set_num_threads(s.threads)
        print(f"device {_device_label(s.device)} | backbone {s.backbone}, {s.heads} heads, "
              f"{s.size} px, batch {s.batch_size}, {s.steps} steps x {s.repeats} repeats, "
              f"eval {s.eval_images} images (harness batch {s.eval_batch_size}, others "
              f"{s.batch_size}), reference workers {s.ref_workers}, harness --set "
              f"{' '.join(s.sets) or 'none'}")
        res = measure(s)
    except BenchError as err:
        print(f"error: {err}")
        return 2
    print(table(res))
    for key, value in ratios(res).items():
        print(f"ratio {key}: {value:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
