"""The protocol of one run resolved from its config, dataset, backbone and method
(docs/fidelity.md): image sizes per split, the checkpoint score,
deterministic kernels, and the training-batch resize after augmentation."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

from bench.core.config import TrainConfig
from bench.core.errors import BenchError
from bench.core.metrics import auc_ovr_macro, head_probs
from bench.train.backbones import fit_size


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


def to_model_size(x: torch.Tensor, size: int) -> torch.Tensor:
    """Resize a uint8 training batch [B,3,h,w] to `size` px after augmentation
    (a no-op when it already has that size, or size is 0 = as stored)."""
    if not size or x.shape[-1] == size and x.shape[-2] == size:
        return x
    from torchvision.transforms.v2 import functional as TF

    return TF.resize(x, [size, size], antialias=True)


def checkpoint_probs(val_logits: np.ndarray, rule: str) -> np.ndarray:
    """What a cycle's validation AUC is computed on. "mean_prob": the mean of
    the head softmaxes; "released": for multi-head models, softmax of that mean
    (the released code applied softmax to the averaged probabilities)."""
    probs = head_probs(val_logits)
    if rule == "released" and val_logits.shape[1] > 1:
        z = probs - probs.max(axis=1, keepdims=True)
        probs = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    return probs


def checkpoint_auc(val_logits: np.ndarray, labels: np.ndarray, rule: str) -> float:
    """A cycle's checkpoint score (macro one-vs-rest AUC, docs/fidelity.md)."""
    return auc_ovr_macro(checkpoint_probs(val_logits, rule), labels)


def set_deterministic(on: bool) -> None:
    """torch.use_deterministic_algorithms + cudnn.deterministic, as the released
    code did when seeded. cuBLAS needs its workspace setting for that; it is
    set here only if the user has not set it."""
    if on:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(on)
    torch.backends.cudnn.deterministic = on
