"""Image sizes of a run (docs/fidelity.md): the sizes each backbone accepts
(`SIZE_RULES`, `fit_size`) and a run's pixels per split (`resolve_sizes`).
Pure arithmetic, in core so that the report can work out which sizes the
paper's protocol uses (bench report --published-rows) without the training
code; bench.train.backbones and bench.train.protocol re-export them.
"""
from __future__ import annotations

from dataclasses import dataclass

from bench.core.config import TrainConfig
from bench.core.errors import BenchError

# name -> (min size, multiple): the image size a backbone can take. ConvNeXt's
# stride-32 stem+downsamplings fail at 28 px (docs/fidelity.md), so PathMNIST uses 32.
# Both implementations floor odd sizes in each downsampling (150 px works);
# torchvision's Swin pads to its patch and window sizes, timm's needs a
# multiple of its patch size.
SIZE_RULES = {"convnext_tiny": (32, 1), "swin_tiny": (28, 1), "resnet50": (8, 1),
              "smallcnn": (8, 1)}
TIMM_SIZE_RULES = {**SIZE_RULES, "swin_tiny": (28, 4)}


def fit_size(backbone: str, size: int, impl: str = "torchvision") -> int:
    """The smallest size >= `size` that `backbone` accepts."""
    rules = TIMM_SIZE_RULES if impl == "timm" else SIZE_RULES
    low, multiple = rules.get(backbone, (1, 1))
    size = max(size, low)
    return -(-size // multiple) * multiple


@dataclass(frozen=True)
class Sizes:
    """Pixels of one run: training images are augmented at `augment`, then
    resized to `train` (the model's input); validation at `train`; test at `test`."""

    augment: int
    train: int
    test: int


def resolve_sizes(cfg: TrainConfig, dataset_size: int, backbone: str, method) -> Sizes:
    """size_rule "released": a method's `released_train_size` (150 for the
    train_other.py methods) capped at the dataset's size, test at the dataset's
    size; "uniform": the dataset's size everywhere. An explicit image_size is
    also the test size unless test_size is set. Each is rounded up to what
    the backbone accepts; augmentation happens before that rounding (PathMNIST
    ConvNeXt: augmented at 28, resized to 32). Explicit --set sizes win, and
    one the backbone rejects is an error."""
    want = dataset_size
    if cfg.size_rule == "released" and method.released_train_size:
        want = min(method.released_train_size, dataset_size)
    impl = cfg.backbone_impl
    train = _fit(backbone, cfg.image_size, "image_size", impl) or fit_size(backbone, want, impl)
    test = (_fit(backbone, cfg.test_size, "test_size", impl) or cfg.image_size
            or fit_size(backbone, dataset_size, impl))
    augment = cfg.augment_size or (cfg.image_size or want)
    if impl == "timm" and backbone == "swin_tiny" and train != test:
        # timm's Swin is built for one img_size; torchvision's pads any size
        raise BenchError(f"backbone_impl=timm: swin_tiny trains at {train} px and tests at "
                         f"{test} px, timm's Swin takes one size; use --set size_rule=uniform "
                         "or --set backbone_impl=torchvision")
    return Sizes(augment=augment, train=train, test=test)


def _fit(backbone: str, size: int, key: str, impl: str) -> int:
    need = fit_size(backbone, size, impl)
    if size and need != size:
        raise BenchError(f"--set {key}={size}: backbone '{backbone}' needs "
                         f"{need} px here; use --set {key}={need}")
    return size
