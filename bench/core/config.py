"""Hyper-parameters: frozen dataclasses with the paper's values as defaults,
each field declared once with its meaning and allowed values
(bench.core.settings), named profiles, nanoGPT-style `--set key=value`
overrides (no exec) and the config hash.

`validate(cfg)` is the one check of a config: `--set` overrides, profiles,
bench.api, the speed tools and the training loop all call it."""
from __future__ import annotations

import math
import typing
from dataclasses import dataclass, fields, replace

from bench.core.errors import BenchError, choices_error
from bench.core.files import json_sha256
from bench.core.flags import pairs, split_pair
from bench.core.settings import Range, ge, gt, hashed, setting, specs, validate

# Upper bounds that only catch typos (a paste of 99999999999999999999 would plan
# ~1e22 steps): the paper trains 10 x 5; a thousand of either is far beyond any
# calibration study.
MAX_CYCLES = 1000
MAX_EPOCHS_PER_CYCLE = 1000

# TrivialAugmentWide implementations (bench.train.augment.MODES, kept equal by
# tests/train/test_augment.py): named here so that a config is validated
# without importing the training code.
AUGMENT_MODES = ("batched", "per_image")

# The precision switch's choices (TrainConfig.precision; applied by
# bench.train.loop.precision_scope).
PRECISIONS = ("released", "tf32", "bf16")


def compile_modes() -> list[str]:
    """torch.compile's modes as this torch names them ("reduce-overhead" = CUDA graphs)."""
    import torch._inductor  # lazy: loads torch's compiler, needed only to validate

    return list(torch._inductor.list_mode_options())


@dataclass(frozen=True)
class TrainConfig:
    """The paper's training protocol (Galdran et al. 2023, §4 / released code).
    Each field is declared once, with its meaning and allowed values
    (bench.core.settings): `bench list --keys` and docs/reference.md print them."""

    lr: float = setting(1e-2, "SGD learning rate (peak of each cosine cycle)", range=gt(0))
    momentum: float = setting(0.0, "SGD momentum (paper: 0)",
                              range=Range(0, 1, high_open=True))
    weight_decay: float = setting(0.0, "SGD weight decay (paper: 0)", range=ge(0))
    batch_size: int = setting(8, "training images per step (paper: 8)", range=ge(2))
    # 10 cycles of 5 epochs = 50 epochs, the lr stepped per iteration
    cycles: int = setting(10, "cosine warm-restart cycles; checkpoint chosen among cycle ends",
                          range=Range(1, MAX_CYCLES))
    epochs_per_cycle: int = setting(5, "epochs per cycle (epochs = cycles x epochs_per_cycle)",
                                    range=Range(1, MAX_EPOCHS_PER_CYCLE))
    eta_min: float = setting(0.0, "learning rate at the end of each cycle", range=ge(0))
    augment: bool = setting(True, "TrivialAugmentWide per training image")
    # ---- the protocol of the published numbers (docs/fidelity.md) ----
    # "released": the authors' scripts (train_other.py trained and validated
    # LS/MbLS/MixUp/DCA at 150 px, every model was tested at the dataset's
    # size); "uniform": the dataset's size for every method and split.
    size_rule: str = setting(
        "released", "image sizes: released (each method's script) | uniform (paper text)",
        choices=("released", "uniform"))
    # the backbone may round image_size up
    image_size: int = setting(
        0, "training/eval size in px; 0 = the dataset's default, else at least the "
        "backbone's minimum", range=ge(0))
    test_size: int = setting(0, "test size in px; 0 = by size_rule (the dataset's size)",
                             range=ge(0))
    # images are augmented at augment_size before being resized to image_size
    # (PathMNIST + ConvNeXt: 28 -> 32, as released)
    augment_size: int = setting(0, "training (augmented) size in px; 0 = by size_rule",
                                range=ge(0))
    # on in the paper profiles because the released code always loaded them
    pretrained: bool = setting(
        False, "ImageNet weights for the backbone (--pretrained/--no-pretrained, --weights; "
        "on in paper profiles where the backbone has them)")
    # the paper's backbones (resnet50, convnext_tiny, swin_tiny) as the released
    # code built them (torchvision) or as timm does
    backbone_impl: str = setting(
        "torchvision", "library that builds the backbone: torchvision | timm",
        choices=("torchvision", "timm"))
    # "released": torchvision IMAGENET1K_V1, except ResNet50 IMAGENET1K_V2 for
    # multi-head models; "same": V1 for every method
    imagenet_weights: str = setting("released", "ImageNet weight version: released | same",
                                    choices=("released", "same"))
    drop_path: float = setting(
        -1.0, "stochastic-depth rate; -1 = the implementation's default, else in [0, 1)",
        range=Range(0, 1, high_open=True), also=(-1.0,))
    drop_last: bool = setting(True, "drop the last incomplete training batch (released loader)")
    # macro OvR AUC of "released": softmax(mean of head softmaxes) for
    # multi-head models (the released code applied softmax twice),
    # "mean_prob": mean of head softmaxes
    checkpoint_score: str = setting(
        "released", "validation score that picks the checkpoint: released | mean_prob",
        choices=("released", "mean_prob"))
    # torch.use_deterministic_algorithms + cudnn.deterministic, as the released
    # code when seeded: bitwise-repeatable GPU runs at a speed cost (docs/fidelity.md)
    deterministic: bool = setting(
        False, "deterministic algorithms (slower; the released code's switch)", in_hash=False)
    eval_batch_size: int = setting(256, "evaluation batch size (speed only)", range=ge(1),
                                   in_hash=False)
    # "batched": per-image draws applied to groups of images (docs/speed.md);
    # "per_image": torchvision's transform looped over the batch. Same
    # distribution, different random streams, so it is hashed.
    augment_mode: str = setting(
        "batched", "TrivialAugmentWide implementation: batched | per_image",
        choices=AUGMENT_MODES)
    bf16: bool = setting(False, "bf16 autocast for forward and loss (changes the numbers)")
    channels_last: bool = setting(False, "NHWC memory layout (speed only)", in_hash=False)
    # Tensor cores (docs/speed.md, "Precision"): "released" = PyTorch's defaults
    # as the released code ran (TF32 convolutions, strict FP32 matmuls); the
    # others change the numbers, so they are hashed, but the default is left
    # out of the hash so that no record made before the key existed moves.
    precision: str = setting(
        "released", "released (TF32 convolutions, FP32 matmuls: the published numbers) | "
        "tf32 (also TF32 matmuls: ~1e-3 relative per matmul, not the published numbers) | "
        "bf16 (bf16 autocast + channels_last: implies bf16=true; furthest from them)",
        choices=PRECISIONS, legacy="released")
    compile: bool = setting(False, "torch.compile the training model (speed only)",
                            in_hash=False)
    # "reduce-overhead" captures the small-batch step in CUDA graphs (launch
    # overhead is what batch 8 costs)
    compile_mode: str = setting(
        "default", "torch.compile mode, e.g. default | reduce-overhead",
        # "default" is accepted without asking torch (listing the modes loads
        # torch's compiler, ~3 s): a flag typo in `bench run` is answered fast
        choices=compile_modes, choices_text="torch.compile's modes", also=("default",),
        in_hash=False)
    # The graph-safe step (bench/train/graphstep.py): every per-step draw made
    # per epoch, augmentation by masks, lr and losses as device tensors; on
    # CUDA captured once as a CUDA graph and replayed. Bit for bit the
    # per-step path on the CPU, so it is a speed switch, not in the hash.
    graph: str = setting(
        "auto", "graph-safe training step: auto (CUDA: one captured CUDA graph per step; "
        "CPU: the per-step path) | true (also on the CPU, uncaptured) | false (per-step path)",
        choices=("auto", "true", "false"), in_hash=False)
    # The graph-safe step compiled whole by inductor (fullgraph; docs/speed.md
    # "The compiled step"): fewer kernels, last-bit differences (its update
    # rounds p - lr*g by inductor's code, not the fused kernel), so speed only.
    # Off by default everywhere until a GPU measurement shows it faster.
    compile_step: bool = setting(
        False, "torch.compile the whole graph-safe step, fullgraph (speed only; needs graph)",
        in_hash=False)
    # How a fused group (`bench run --fuse`) trains: "vmap" stacks the members
    # into one model (torch.func); "streams" keeps each run its own model and
    # interleaves their steps, on CUDA each on its own stream (bench/train/streams.py:
    # records bit for bit the unfused ones on a CPU). Speed only, not hashed.
    fuse_as: str = setting(
        "auto", "how a fused group trains: auto (CUDA: streams; CPU: cells where the model "
        "has a batched form, else vmap) | cells (one batched model, members as channels) | "
        "vmap (one stacked model under vmap) | streams (one model per run, steps "
        "interleaved on CUDA streams)",
        choices=("auto", "cells", "vmap", "streams"), in_hash=False)
    # How a batched model (bench.train.batched) runs its k x k convolutions:
    # one grouped convolution over the members, or unfold + one batched
    # matmul. The same numbers up to float reassociation; speed only.
    cell_conv: str = setting(
        "grouped", "k x k convolutions of a batched cell group: grouped (one grouped "
        "convolution) | unfold (unfold + batched matmul, no grouped convolution)",
        choices=("grouped", "unfold"), in_hash=False)
    # The graph-safe step's next epoch drawn on a worker thread while this one
    # trains (bench/train/staging.py), from copies of the generators: every
    # random stream, record and resume state as without it. Speed only.
    stage_ahead: str = setting(
        "auto", "draw the next epoch while this one trains (graph-safe step): auto (CUDA "
        "only: on a CPU the thread takes the step's cores) | true | false",
        choices=("auto", "true", "false"), in_hash=False)
    # cuDNN times its convolution algorithms once per shape and keeps the
    # fastest. Off = cuDNN's heuristic choice: slower, but the same algorithm
    # every run.
    cudnn_benchmark: bool = setting(
        True, "let cuDNN time and pick its fastest algorithms (CUDA only)", in_hash=False)

    def implied(self) -> dict[str, tuple[str, object]]:
        """key -> (the setting that fixes it, its value): precision=bf16 is the
        named form of bf16=true + channels_last=true. __post_init__ sets them
        (stored, so every record's config and hash stay as they were);
        apply_overrides refuses an explicit value against them."""
        if self.precision == "bf16":
            return {"bf16": ("precision=bf16", True), "channels_last": ("precision=bf16", True)}
        return {}

    def __post_init__(self):
        for key, (_, value) in self.implied().items():
            object.__setattr__(self, key, value)
        # tf32 with bf16 autocast would be two precisions at once
        if self.precision == "tf32" and self.bf16:
            raise BenchError("--set precision=tf32 with bf16=true: choose one (precision=bf16 "
                             "is bf16 autocast; tf32 keeps FP32 with TF32 matmuls)")

    @property
    def epochs(self) -> int:
        return self.cycles * self.epochs_per_cycle


# Fields that change speed or memory but not the numbers: left out of the hash
# (declared `in_hash=False` above; docs/speed.md's switch table lists them).
NON_RESULT_FIELDS = frozenset(k for k, spec in specs(TrainConfig).items() if not spec.in_hash)

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
    validate(PROFILES[name])
    return PROFILES[name]


def parse_set(items: list[str] | None, flag: str = "--set") -> dict[str, str]:
    """['lr=0.1', 'heads=3'] -> {'lr': '0.1', 'heads': '3'} (values stay
    strings); (key, value) pairs, parsed already, are taken as they are. The
    one KEY=VALUE parser is bench.core.flags.pairs."""
    return dict(pairs(list(items or ()), flag))


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def convert(key: str, raw: str, kind) -> object:
    """Convert a --set string to the field's declared type, or fail in one line."""
    if isinstance(raw, kind) and not (kind is int and isinstance(raw, bool)):
        if kind is float and not math.isfinite(raw):  # a Python or TOML inf/nan
            raise BenchError(f"--set {key}={raw}: expected float, got '{raw}' (a finite "
                             "number; nan and inf are refused)")
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


_TRAIN_TYPES = field_types(TrainConfig())  # set_pair's: read once, at import


def set_pair(text: str) -> tuple[str, object]:
    """One `--set KEY=VALUE` as the command line is parsed: split once and, for
    a training key, converted to its field's type there, so nothing after the
    edge carries the text. A method's key stays text until the run's methods
    are known (bench.sweep.plan converts it then); an unknown key is refused
    there, with the valid keys of the methods asked for."""
    key, raw = split_pair(text)
    kind = _TRAIN_TYPES.get(key)
    return (key, raw) if kind is None else (key, convert(key, raw, kind))


def apply_overrides(obj, raw: dict[str, str], owner: str = ""):
    """A copy of the frozen dataclass `obj` with type-checked overrides, validated
    against its declared specs (`owner`: a method's name, for its errors)."""
    types = field_types(obj)
    for key in raw:
        if key not in types:
            raise choices_error("--set key", key, sorted(types))
    given = {k: convert(k, v, types[k]) for k, v in raw.items()}
    new = replace(obj, **given)
    # a value another setting fixes (TrainConfig.implied) would be overwritten
    # silently: refused, naming both (method Params declare none)
    for key, (source, value) in (new.implied() if hasattr(new, "implied") else {}).items():
        if key in given and given[key] != value:
            raise BenchError(f"--set {source} with {key}={_text(given[key])}: choose one "
                             f"({source} sets {key}={_text(value)})")
    validate(new, owner)
    return new


def _text(value) -> str:
    """A value as --set spells it (true/false for a bool)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def result_fields(cfg: TrainConfig) -> dict:
    """The training fields the config hash sees (not the speed-only switches)."""
    return hashed(cfg)


def config_hash(payload: dict) -> str:
    """Short stable hash of everything that changes results."""
    return json_sha256(payload)[:12]


def parse_data_opts(items) -> dict[str, str]:
    return parse_set(items, flag="--data-opt")


def load_kwargs(download: bool = False, progress: bool = True, data_opts=()) -> dict:
    """A dataset adapter's load options: --download, progress bars, --data-opt pairs."""
    return {"download": download, "progress": progress, **parse_data_opts(list(data_opts))}
