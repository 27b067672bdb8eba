"""The protocol of one run resolved from its config, dataset, backbone and method
(docs/fidelity.md): image sizes per split (bench.core.sizes), the checkpoint
score, deterministic kernels, and the training-batch resize after augmentation."""
from __future__ import annotations

import os

import numpy as np
import torch
from torchvision.transforms.v2 import functional as TF

from bench.calib.metrics import auc_ovr_macro, head_probs
from bench.core.sizes import Sizes, resolve_sizes  # noqa: F401 (re-exported)


def to_model_size(x: torch.Tensor, size: int) -> torch.Tensor:
    """Resize a uint8 training batch [B,3,h,w] to `size` px after augmentation
    (a no-op when it already has that size, or size is 0 = as stored)."""
    if not size or x.shape[-1] == size and x.shape[-2] == size:
        return x

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
