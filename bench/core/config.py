"""Hyper-parameters: frozen dataclasses with the paper's values as defaults,
named profiles, and nanoGPT-style `--set key=value` overrides (no exec)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import typing
from dataclasses import dataclass, fields, replace

from bench.core.errors import BenchError, choices_error


@dataclass(frozen=True)
class TrainConfig:
    """The paper's training protocol (Galdran et al. 2023, §4 / released code)."""

    lr: float = 1e-2  # SGD learning rate
    momentum: float = 0.0  # plain SGD in the paper
    weight_decay: float = 0.0
    batch_size: int = 8  # images per step
    cycles: int = 10  # cosine annealing with warm restarts: 10 cycles ...
    epochs_per_cycle: int = 5  # ... of 5 epochs = 50 epochs, lr stepped per iteration
    eta_min: float = 0.0  # lr at the end of each cycle
    augment: bool = True  # TrivialAugmentWide, drawn per image
    image_size: int = 0  # 0 = the dataset's default (backbone may round it up)
    pretrained: bool = False  # ImageNet weights for the backbone (datasets issue)
    eval_batch_size: int = 256  # evaluation only; does not change results
    # TrivialAugmentWide implementation: "batched" (per-image draws applied to
    # groups of images, docs/speed.md) or "per_image" (torchvision's transform
    # looped over the batch). Same distribution, different random streams.
    augment_mode: str = "batched"
    bf16: bool = False  # bf16 autocast for forward + loss (changes the numbers)
    channels_last: bool = False  # NHWC memory layout: speed only
    compile: bool = False  # torch.compile the training model: speed only
    # torch.compile mode when compile is on; "reduce-overhead" captures the
    # small-batch step in CUDA graphs (launch overhead is what batch 8 costs).
    compile_mode: str = "default"
    # cuDNN times its convolution algorithms once per shape and keeps the
    # fastest (CUDA only). Off = cuDNN's heuristic choice: slower, but the same
    # algorithm every run.
    cudnn_benchmark: bool = True

    @property
    def epochs(self) -> int:
        return self.cycles * self.epochs_per_cycle


# ------------------------------------------------------------- ranges --
@dataclass(frozen=True)
class Range:
    """Allowed values of a numeric field: low/high bounds, each open or closed."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def ok(self, value) -> bool:
        lo, hi = self.low, self.high
        return ((lo is None or value > lo or (value == lo and not self.low_open))
                and (hi is None or value < hi or (value == hi and not self.high_open)))

    def text(self) -> str:
        parts = [f"{'>' if self.low_open else '>='} {self.low:g}"] if self.low is not None else []
        if self.high is not None:
            parts.append(f"{'<' if self.high_open else '<='} {self.high:g}")
        return " and ".join(parts) or "any"


def gt(x: float) -> Range:
    return Range(low=x, low_open=True)


def ge(x: float) -> Range:
    return Range(low=x)


# Every TrainConfig field: (allowed range or None for non-numeric, one line of
# meaning). Checked when the grid is built; `bench list --keys` prints it.
TRAIN_KEYS = {
    "lr": (gt(0), "SGD learning rate (peak of each cosine cycle)"),
    "momentum": (Range(0, 1, high_open=True), "SGD momentum (paper: 0)"),
    "weight_decay": (ge(0), "SGD weight decay (paper: 0)"),
    "batch_size": (ge(2), "training images per step (paper: 8)"),
    "cycles": (ge(1), "cosine warm-restart cycles; checkpoint chosen among cycle ends"),
    "epochs_per_cycle": (ge(1), "epochs per cycle (epochs = cycles x epochs_per_cycle)"),
    "eta_min": (ge(0), "learning rate at the end of each cycle"),
    "augment": (None, "TrivialAugmentWide per training image"),
    "image_size": (ge(0), "training/eval size in px; 0 = the dataset's default, else at "
                          "least the backbone's minimum"),
    "pretrained": (None, "ImageNet weights for the backbone (set by --pretrained/--weights)"),
    "eval_batch_size": (ge(1), "evaluation batch size (speed only)"),
    "augment_mode": (None, "TrivialAugmentWide implementation: batched | per_image"),
    "bf16": (None, "bf16 autocast for forward and loss (changes the numbers)"),
    "channels_last": (None, "NHWC memory layout (speed only)"),
    "compile": (None, "torch.compile the training model (speed only)"),
    "compile_mode": (None, "torch.compile mode, e.g. default | reduce-overhead"),
    "cudnn_benchmark": (None, "let cuDNN time and pick its fastest algorithms (CUDA only)"),
}


def key_table(obj) -> dict:
    """{field: (Range | None, meaning)} of a config or method-parameter dataclass
    (a method's parameters declare theirs as a `KEYS` class attribute)."""
    return TRAIN_KEYS if isinstance(obj, TrainConfig) else getattr(type(obj), "KEYS", {})


def check_ranges(obj) -> None:
    """One-line error for the first numeric field outside its declared range."""
    table = key_table(obj)
    for f in fields(obj):
        rng, meaning = table.get(f.name, (None, ""))
        value = getattr(obj, f.name)
        if rng is not None and not rng.ok(value):
            raise BenchError(f"--set {f.name}={value}: must be {rng.text()} ({meaning})")


# Fields that change speed or memory but not the numbers: left out of the hash.
NON_RESULT_FIELDS = frozenset({"eval_batch_size", "channels_last", "compile", "compile_mode",
                               "cudnn_benchmark"})

PROFILES = {
    # Exactly the paper's protocol.
    "paper": TrainConfig(),
    # A short CPU demo: same optimiser, batch and schedule shape, fewer and
    # shorter cycles. Small images make digits learnable in ~1 minute a seed.
    "quick": TrainConfig(cycles=3, epochs_per_cycle=4),
}


def get_profile(name: str) -> TrainConfig:
    if name not in PROFILES:
        raise choices_error("profile", name, PROFILES)
    return PROFILES[name]


def parse_set(items: list[str] | None, flag: str = "--set") -> dict[str, str]:
    """['lr=0.1', 'heads=3'] -> {'lr': '0.1', 'heads': '3'} (values stay strings)."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BenchError(f"{flag} expects key=value, got '{item}'")
        out[key.strip()] = value.strip()
    return out


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def convert(key: str, raw: str, kind) -> object:
    """Convert a --set string to the field's declared type, or fail in one line."""
    if isinstance(raw, kind) and not (kind is int and isinstance(raw, bool)):
        return raw
    text = str(raw).strip()
    try:
        if kind is bool:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise ValueError
        if kind is int:
            return int(text)
        if kind is float:
            value = float(text)
            if value != value:  # NaN is never a sensible hyper-parameter
                raise ValueError
            return value
        return text
    except ValueError:
        raise BenchError(
            f"--set {key}={raw}: expected {kind.__name__}, got '{raw}'"
        ) from None


def field_types(obj) -> dict[str, type]:
    hints = typing.get_type_hints(type(obj))
    return {f.name: hints[f.name] for f in fields(obj)}


def apply_overrides(obj, raw: dict[str, str]):
    """Return a copy of the frozen dataclass `obj` with type-checked overrides."""
    types = field_types(obj)
    for key in raw:
        if key not in types:
            raise choices_error("--set key", key, sorted(types))
    new = replace(obj, **{k: convert(k, v, types[k]) for k, v in raw.items()})
    check_ranges(new)
    return new


def result_fields(cfg: TrainConfig) -> dict:
    return {k: v for k, v in dataclasses.asdict(cfg).items() if k not in NON_RESULT_FIELDS}


def config_hash(payload: dict) -> str:
    """Short stable hash of everything that changes results."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def parse_data_opts(items) -> dict[str, str]:
    return parse_set(items, flag="--data-opt")


def load_kwargs(args) -> dict:
    return {"download": getattr(args, "download", False),
            "progress": not getattr(args, "no_progress", False),
            **parse_data_opts(getattr(args, "data_opts", []))}
