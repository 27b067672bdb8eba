"""Hyper-parameters: frozen dataclasses with the paper's values as defaults,
named profiles, and nanoGPT-style `--set key=value` overrides (no exec)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
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
    # ---- the protocol of the published numbers (docs/fidelity.md) ----
    # Image sizes. "released": the authors' scripts (train_other.py trained and
    # validated LS/MbLS/MixUp/DCA at 150 px, every model was tested at the
    # dataset's size); "uniform": the dataset's size for every method and split.
    size_rule: str = "released"
    image_size: int = 0  # train + validation px; 0 = by size_rule (backbone may round it up)
    test_size: int = 0  # test px; 0 = by size_rule (the dataset's size)
    # px at which training images are augmented before being resized to
    # image_size; 0 = image_size (PathMNIST + ConvNeXt: 28 -> 32, as released)
    augment_size: int = 0
    # ImageNet weights for the backbone: on in the paper profiles (the released
    # code always loaded them) for backbones that have them, --no-pretrained: off
    pretrained: bool = False
    # The paper's backbones (resnet50, convnext_tiny, swin_tiny) as built by
    # "torchvision" (the released code) or "timm"
    backbone_impl: str = "torchvision"
    # ImageNet weight version. "released": torchvision IMAGENET1K_V1, except
    # ResNet50 IMAGENET1K_V2 for multi-head models; "same": V1 for every method
    imagenet_weights: str = "released"
    drop_path: float = -1.0  # stochastic-depth rate; -1 = the implementation's default
    drop_last: bool = True  # drop the last incomplete training batch (released loader)
    # Checkpoint score on validation after each cycle: macro OvR AUC of
    # "released": softmax(mean of head softmaxes) for multi-head models (the
    # released code applied softmax twice), "mean_prob": mean of head softmaxes
    checkpoint_score: str = "released"
    # torch.use_deterministic_algorithms + cudnn.deterministic (the released code,
    # when seeded); bitwise-repeatable GPU runs at a speed cost (docs/fidelity.md)
    deterministic: bool = False
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


# Upper bounds that only catch typos (a paste of 99999999999999999999 would plan
# ~1e22 steps): the paper trains 10 x 5; a thousand of either is far beyond any
# calibration study.
MAX_CYCLES = 1000
MAX_EPOCHS_PER_CYCLE = 1000

# Every TrainConfig field: (allowed range or None for non-numeric, one line of
# meaning). Checked when the grid is built; `bench list --keys` prints it.
TRAIN_KEYS = {
    "lr": (gt(0), "SGD learning rate (peak of each cosine cycle)"),
    "momentum": (Range(0, 1, high_open=True), "SGD momentum (paper: 0)"),
    "weight_decay": (ge(0), "SGD weight decay (paper: 0)"),
    "batch_size": (ge(2), "training images per step (paper: 8)"),
    "cycles": (Range(1, MAX_CYCLES),
               "cosine warm-restart cycles; checkpoint chosen among cycle ends"),
    "epochs_per_cycle": (Range(1, MAX_EPOCHS_PER_CYCLE),
                         "epochs per cycle (epochs = cycles x epochs_per_cycle)"),
    "eta_min": (ge(0), "learning rate at the end of each cycle"),
    "augment": (None, "TrivialAugmentWide per training image"),
    "image_size": (ge(0), "training/eval size in px; 0 = the dataset's default, else at "
                          "least the backbone's minimum"),
    "pretrained": (None, "ImageNet weights for the backbone (--pretrained/--no-pretrained, "
                         "--weights; on in paper profiles where the backbone has them)"),
    "eval_batch_size": (ge(1), "evaluation batch size (speed only)"),
    "augment_mode": (None, "TrivialAugmentWide implementation: batched | per_image"),
    "bf16": (None, "bf16 autocast for forward and loss (changes the numbers)"),
    "channels_last": (None, "NHWC memory layout (speed only)"),
    "compile": (None, "torch.compile the training model (speed only)"),
    "compile_mode": (None, "torch.compile mode, e.g. default | reduce-overhead"),
    "cudnn_benchmark": (None, "let cuDNN time and pick its fastest algorithms (CUDA only)"),
    "size_rule": (None, "image sizes: released (each method's script) | uniform (paper text)"),
    "test_size": (ge(0), "test size in px; 0 = by size_rule (the dataset's size)"),
    "augment_size": (ge(0), "training (augmented) size in px; 0 = by size_rule"),
    "backbone_impl": (None, "library that builds the backbone: torchvision | timm"),
    "imagenet_weights": (None, "ImageNet weight version: released | same"),
    "drop_path": (Range(-1, 1, high_open=True),
                  "stochastic-depth rate; -1 = the implementation's default, else in [0, 1)"),
    "drop_last": (None, "drop the last incomplete training batch (released loader)"),
    "checkpoint_score": (None, "validation score that picks the checkpoint: released | mean_prob"),
    "deterministic": (None, "deterministic algorithms (slower; the released code's switch)"),
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
                               "cudnn_benchmark", "deterministic"})

# Choice-valued fields of TrainConfig and what each accepts (checked before a run).
CHOICES = {
    "size_rule": ("released", "uniform"),
    "backbone_impl": ("torchvision", "timm"),
    "imagenet_weights": ("released", "same"),
    "checkpoint_score": ("released", "mean_prob"),
}

PROFILES = {
    # The protocol that produced the published numbers: the paper's training
    # recipe as the authors' released code ran it (docs/fidelity.md).
    "paper": TrainConfig(pretrained=True),
    # The paper's text instead where the two disagree: one image size and one
    # weight version for every method (eq. 2 loss: PROFILE_METHOD_SETS).
    "paper-text": TrainConfig(size_rule="uniform", imagenet_weights="same", pretrained=True),
    # A short CPU demo: same optimiser, batch and schedule shape, fewer and
    # shorter cycles. Small images make digits learnable in ~1 minute a seed.
    # From scratch unless --pretrained: it must run offline, without weights.
    "quick": TrainConfig(cycles=3, epochs_per_cycle=4),
    # The offline demo of `./run_all.sh --quick`, in the paper's regime: with
    # --data-opt train_per_class=10 (100 digits images) a plain-CE model fits
    # its training set and is over-confident on test, as the paper's large
    # models are on medical data. SGD momentum 0.9 at lr 0.1 without
    # augmentation, 3 cycles of 30 short epochs (12 steps): the search that
    # chose it, and what it shows, in docs/quickstart.md.
    "demo": TrainConfig(cycles=3, epochs_per_cycle=30, lr=0.1, momentum=0.9, augment=False),
}

# Method hyper-parameters a profile presets (a later --set still wins): the
# multi-head loss and class-group rule are the multi-head methods' own fields.
PROFILE_METHOD_SETS = {
    "paper-text": {"mh_loss": "paper", "class_groups": "numpy"},
}


def get_profile(name: str) -> TrainConfig:
    if name not in PROFILES:
        raise choices_error("profile", name, PROFILES)
    return PROFILES[name]


# TrivialAugmentWide implementations (bench.train.augment.MODES, kept equal by
# tests/train/test_augment.py): named here so that a config is validated
# without importing the training code.
AUGMENT_MODES = ("batched", "per_image")


def compile_modes() -> list[str]:
    """torch.compile's modes as this torch names them ("reduce-overhead" = CUDA graphs)."""
    import torch._inductor  # lazy: loads torch's compiler, needed only to validate

    return list(torch._inductor.list_mode_options())


def check_choices(cfg: TrainConfig) -> None:
    """One-line error for a choice-valued field set to a value it does not
    accept, before any run starts (the CLI, the speed tools and the loop)."""
    if cfg.augment_mode not in AUGMENT_MODES:
        raise choices_error("augment_mode", cfg.augment_mode, AUGMENT_MODES)
    if cfg.compile_mode not in compile_modes():
        raise choices_error("compile_mode", cfg.compile_mode, compile_modes())
    for key, allowed in CHOICES.items():
        if getattr(cfg, key) not in allowed:
            raise choices_error(key, getattr(cfg, key), allowed)
    if cfg.drop_path != -1.0 and not 0.0 <= cfg.drop_path < 1.0:
        raise BenchError(f"drop_path={cfg.drop_path}: expected -1 (the implementation's "
                         "default) or a rate in [0, 1)")


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
            value = float(text)  # '1e309' parses as inf
            if not math.isfinite(value):  # NaN or inf is never a sensible hyper-parameter
                raise BenchError(f"--set {key}={raw}: expected float, got '{raw}' (a finite "
                                 "number; nan and inf are refused)")
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
