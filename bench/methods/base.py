"""The method contract.

A method says how many heads the model has, may transform a training batch
(mixup changes the inputs), and gives the training loss on logits shaped
[B, M, K]. Prediction is always the mean of the head softmaxes, so methods
have no say in evaluation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bench.core.config import apply_overrides
from bench.core.paper import METHOD_NAMES
from bench.core.settings import hashed, specs, validate
from bench.core.registry import Registry
from bench.core.transfer import h2d

if TYPE_CHECKING:  # annotations only: registering a method needs no torch
    import torch

METHODS = Registry("method")


@dataclass(frozen=True)
class NoParams:
    """For methods without hyper-parameters."""


class Method:
    """Base class: one head, identity batch transform; subclasses give `loss`."""

    Params = NoParams
    # px the released code trained and validated this method at (its script's
    # --im_size default), capped at the dataset's size; 0 = the dataset's size.
    # Used by size_rule=released only (docs/fidelity.md, training image size).
    released_train_size = 0
    # How reports show the method: its display name (default: the paper's
    # name for a method of the paper, bench.core.paper.METHOD_NAMES, else the
    # registered name in capitals) and its table section, "baseline" or
    # "multi-head" (default: by its number of heads).
    display_name = ""
    section = ""
    # The network code this method's numbers depend on besides its own module
    # ("module:TopLevelName", or a whole module): part of its records'
    # identity (bench.core.codeunits; docs/architecture.md, "Code identity").
    # The default is the model `heads` linear heads build; a method whose
    # `arch` builds another declares that one.
    code: tuple = ("bench.train.nets:MultiHeadNet",)

    def __init__(self, name: str, params: Any = None):
        self.name = name
        self.params = params if params is not None else self.Params()
        self.check_params()

    def check_params(self) -> None:
        """Raise a one-line BenchError for a hyper-parameter outside its declared
        range or choices (called on construction, so a bad --set fails before
        any training). Each Params field declares them with
        bench.core.settings.setting."""
        validate(self.params, self.name)

    @property
    def heads(self) -> int:
        return 1

    @property
    def arch(self) -> tuple:
        """The model this method trains when it is not `heads` linear heads on
        the backbone (bench.train.backbones.build_model): () for those, else
        (kind, *structural values), e.g. ("batchensemble", 4). Runs fuse only
        with runs of the same arch (the parameters must stack)."""
        return ()

    def display(self) -> str:
        """The method's name in report tables."""
        return self.display_name or METHOD_NAMES.get(self.name) or self.name.upper()

    def table_section(self) -> str:
        """'baseline' (single-head rows) or 'multi-head' (after D-Ens)."""
        return self.section or ("multi-head" if self.heads > 1 else "baseline")

    def check(self, num_classes: int) -> None:
        """Raise a one-line BenchError if this method cannot train on K classes
        (e.g. more heads than classes). Called before any training starts."""

    def setup(self, num_classes: int, seed: int) -> None:
        """Called once before training (e.g. to draw per-head class weights)."""

    def draw(self, n: int, gen: torch.Generator) -> dict:
        """The random numbers one training step of n images needs, drawn from
        `gen` on the host (tensors by name; {} for a method that draws nothing).
        The graph-safe step (bench.train.graphstep) draws a whole epoch's steps
        at once, in step order, and stages them on the device."""
        return {}

    def staged_batch(self, x: torch.Tensor, y: torch.Tensor, draws: dict):
        """Training batch -> (inputs, target) given this step's `draw()`, on
        x's device. `target` is whatever `loss` takes."""
        return x, y

    def batch(self, x: torch.Tensor, y: torch.Tensor, gen: torch.Generator):
        """Training batch -> (inputs, target): this step's draws, then
        staged_batch. A method that draws in an override of `batch` instead
        still trains, by the per-step path (bench.train.graphstep.eager_reason)."""
        draws = {k: h2d(v, x.device) for k, v in self.draw(len(y), gen).items()}
        return self.staged_batch(x, y, draws)

    def loss(self, logits: torch.Tensor, target: Any) -> torch.Tensor:
        raise NotImplementedError

    def params_dict(self) -> dict:
        """The parameters the config hash sees (all, unless declared in_hash=False)."""
        return hashed(self.params)


def create_method(name: str, overrides: dict | None = None) -> Method:
    """Build a registered method, applying type-checked --set overrides."""
    method = METHODS.get(name)()
    if overrides:
        params = apply_overrides(method.params, overrides, method.name)
        method = type(method)(method.name, params)
    return method


def method_params(name: str):
    """Default hyper-parameter dataclass of a method (for routing --set keys)."""
    return METHODS.get(name)().params


def legacy_filled(name: str, stored: dict) -> dict:
    """A record's `method_params` with the keys it lacks that declare a legacy
    value (bench.core.settings.Spec.legacy) filled in with it: the formula a
    record made before the key existed, or at that value, was trained with.
    A method no registry knows (a plugin not loaded) keeps `stored`."""
    if name not in METHODS:
        return dict(stored)
    legacy = {k: spec.legacy for k, spec in specs(method_params(name)).items()
              if spec.has_legacy}
    return {**stored, **{k: v for k, v in legacy.items() if k not in stored}}
