"""Backbones (feature extractors) and the multi-head model on top of them.

A backbone factory returns a `Backbone`: a module mapping images [B,3,H,W] to
pooled features [B,D]. The method decides how many heads go on top; the
model always returns logits shaped [B, M, K]. The paper's three backbones are
built by torchvision (the released code, docs/fidelity.md) or timm (`backbone_impl`);
any timm model is a backbone as `timm/<name>`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

from bench.core.errors import BenchError
from bench.train.widths import pooled_width
from bench.core.paper import BACKBONE_NAMES, OTHER_BACKBONE_NAMES
from bench.core.registry import Registry
from bench.core.sizes import SIZE_RULES, TIMM_SIZE_RULES, fit_size  # noqa: F401 (re-exported)

if TYPE_CHECKING:  # torch loads when a model is built, not when a name is listed
    from torch import nn

    from bench.train.nets import MultiHeadNet
    from bench.train.weights import WeightsSpec

BACKBONES = Registry("backbone")
# `--backbone all` (or `paper`) means bench.core.paper.PAPER_BACKBONES. The CPU
# helpers (smallcnn, resnet18) and timm:<name> models are asked for by name:
# they are not in the paper's grid and smallcnn has no ImageNet weights.


@dataclass
class Backbone:
    features: nn.Module  # images -> pooled features [B, dim]
    dim: int
    # Built once per head, before its linear layer (ConvNeXt's head LayerNorm
    # is kept per head, as the released code did). None = plain linear heads.
    head_prefix: Optional[Callable[[], nn.Module]] = None
    weights: str = "random"  # provenance: which initial weights were loaded
    min_size: int = 1  # images smaller than this are rejected / rounded up
    impl: str = "bench"  # which library built it: torchvision | timm | bench
    drop_path: float = 0.0  # the stochastic-depth rate actually set


def create_backbone(name: str, image_size: int, pretrained: bool = False,
                    weights: Optional["WeightsSpec"] = None, impl: str = "torchvision",
                    drop_path: float = -1.0) -> Backbone:
    """`impl` and `drop_path` (-1 = the implementation's default) apply to the
    backbones that have them; weights, when given, are loaded (no download)."""
    factory = BACKBONES.get(name)
    return factory(image_size=image_size, pretrained=pretrained or weights is not None,
                   weights=weights, impl=impl, drop_path=drop_path)


def build_model(backbone: str, image_size: int, heads: int, num_classes: int, *,
                pretrained: bool = False, weights: Optional["WeightsSpec"] = None,
                impl: str = "torchvision", drop_path: float = -1.0, mc_dropout: float = 0.0,
                arch: tuple = ()) -> tuple[MultiHeadNet, Backbone]:
    """The model: `heads` linear heads on the backbone's features, or the
    method's `arch` (Method.arch): ("mcdropout", p) one linear head after
    dropout p, run `heads` times (MC-Dropout's passes; also `mc_dropout` = p),
    ("batchensemble", M), ("packed", M, alpha, gamma[, gamma rule]) and
    ("mimo", M) the efficient ensembles of bench.train.ensembles, `heads` = M
    members."""
    bb = create_backbone(backbone, image_size, pretrained, weights, impl, drop_path)
    if image_size < bb.min_size:
        raise BenchError(f"backbone '{backbone}' needs images of at least {bb.min_size} px, "
                         f"got {image_size}; use --set image_size="
                         f"{fit_size(backbone, image_size, impl)}")
    # torch on demand: `bench list` imports this module (the BACKBONES registry)
    from bench.train.nets import MCDropoutNet, MultiHeadNet

    kind = arch[0] if arch else ("mcdropout" if mc_dropout > 0 else "")
    if kind == "mcdropout":
        return MCDropoutNet(bb, heads, num_classes, arch[1] if arch else mc_dropout), bb
    if kind in ("batchensemble", "packed", "mimo"):
        # torch on demand: `bench list` imports this module (the BACKBONES registry)
        from bench.train.ensembles import BatchEnsembleNet, MIMONet, PackedNet

        if kind == "batchensemble":
            return BatchEnsembleNet(bb, arch[1], num_classes), bb
        if kind == "mimo":
            return MIMONet(bb, arch[1], num_classes, backbone), bb
        return PackedNet(bb, arch[1], num_classes, *arch[2:]), bb
    if kind:
        raise BenchError(f"unknown model arch {kind!r} "
                         "(known: mcdropout, batchensemble, packed, mimo)")
    return MultiHeadNet(bb, heads, num_classes), bb


def model_arch(method) -> tuple:
    """A method's Method.arch; () for an object without one (a test double, a
    plugin that does not subclass Method) unless it sets `mc_dropout`."""
    arch = tuple(getattr(method, "arch", ()) or ())
    p = float(getattr(method, "mc_dropout", 0.0) or 0.0)
    return arch or (("mcdropout", p) if p > 0 else ())


# What size each backbone takes (SIZE_RULES, fit_size) lives in bench.core.sizes,
# where the report reads it too.


@BACKBONES.register("smallcnn", "4-layer CNN (32-64-128-128), CPU demo backbone, any size >= 8 px",
                    OTHER_BACKBONE_NAMES["smallcnn"])
def smallcnn(image_size: int, pretrained: bool = False, weights=None, **_) -> Backbone:
    if pretrained or weights is not None:
        raise BenchError("backbone 'smallcnn' has no pretrained weights; drop --pretrained/--weights")
    # torch on demand: `bench list` imports this module (the BACKBONES registry)
    from bench.train.nets import smallcnn_features

    return Backbone(smallcnn_features(), 128, min_size=SIZE_RULES["smallcnn"][0])


def timm_backbone(model_name: str, image_size: int, pretrained: bool, weights=None,
                  drop_path: float = -1.0, **kwargs) -> Backbone:
    """Any timm model as a pooled-feature extractor (num_classes=0).

    Weights never come from timm's own download path: `--pretrained` reads
    the local Hugging Face / torch-hub cache and `--weights` a file, both as
    tensors only (see bench/train/weights.py)."""
    # timm and torch on demand: `bench list` imports this module (the BACKBONES registry)
    import timm
    from bench.train.nets import max_drop_path
    from bench.train.weights import load_into, resolve_weights

    if drop_path >= 0:
        kwargs["drop_path_rate"] = drop_path
    model = timm.create_model(model_name, pretrained=False, num_classes=0, **kwargs)
    if pretrained and weights is None:
        weights = resolve_weights(model_name, pretrained=True, impl="timm")
    if weights is not None:
        load_into(model, weights, model_name)
    dim = pooled_width(model, image_size, TIMM_PREFIX + model_name)
    return Backbone(model, dim, weights=weights.label if weights else "random",
                    impl="timm", drop_path=max_drop_path(model))


# The libraries' default stochastic-depth rates (torchvision's builders, timm's
# model defaults), for --dry-run without building a model. Others: none.
DEFAULT_DROP_PATH = {("torchvision", "convnext_tiny"): 0.1, ("torchvision", "swin_tiny"): 0.2,
                     ("timm", "swin_tiny"): 0.1}


def backbone_impl(name: str, impl: str) -> str:
    """Which library builds backbone `name` under backbone_impl=`impl`."""
    if name in TORCHVISION:
        return impl
    return "bench" if name == "smallcnn" else "timm"


def drop_path_rate(name: str, impl: str, drop_path: float) -> float:
    """The stochastic-depth rate a backbone gets (drop_path -1 = the default)."""
    if name == "resnet50" and impl == "torchvision" or name == "smallcnn":
        return 0.0  # no stochastic depth in these models
    if drop_path >= 0:
        return drop_path
    return DEFAULT_DROP_PATH.get((backbone_impl(name, impl), name), 0.0)


# ------------------------------------------------------------ torchvision --
# name -> (torchvision builder, weights enum, the classifier attribute the heads replace)
TORCHVISION = {
    "resnet50": ("resnet50", "ResNet50_Weights", "fc"),
    "convnext_tiny": ("convnext_tiny", "ConvNeXt_Tiny_Weights", "classifier"),
    "swin_tiny": ("swin_t", "Swin_T_Weights", "head"),
}


def torchvision_backbone(name: str, pretrained: bool, weights=None,
                         drop_path: float = -1.0) -> Backbone:
    """The released code's model: torchvision's builder (its default stochastic
    depth unless drop_path >= 0), the classifier removed (the heads are new)."""
    # torchvision and torch on demand: `bench list` imports this module (the BACKBONES registry)
    import torchvision
    from bench.train.nets import drop_classifier, max_drop_path, scale_drop_path
    from bench.train.weights import load_into, resolve_weights

    builder, _, classifier = TORCHVISION[name]
    model = getattr(torchvision.models, builder)(weights=None)
    if drop_path >= 0:
        scale_drop_path(model, drop_path)
    dim, prefix = drop_classifier(model, classifier)
    if pretrained and weights is None:
        weights = resolve_weights(name, pretrained=True, impl="torchvision")
    if weights is not None:
        load_into(model, weights, f"torchvision {builder}")
    return Backbone(model, dim, head_prefix=prefix, weights=weights.label if weights else "random",
                    min_size=SIZE_RULES[name][0], impl="torchvision",
                    drop_path=max_drop_path(model))


# ------------------------------------------------------------------- timm --
def _timm_convnext(image_size: int, pretrained: bool, weights, drop_path: float) -> Backbone:
    # torch on demand: `bench list` imports this module (the BACKBONES registry)
    from torch import nn

    bb = timm_backbone("convnext_tiny", image_size, pretrained, weights, drop_path)
    model = bb.features
    # timm applies head.norm (LayerNorm over channels) after pooling. The
    # released code gave every head a NEW norm (weight 1, bias 0) before its
    # Linear; do the same, so pretrained runs start from the same head.
    eps = model.head.norm.eps
    model.head.norm = nn.Identity()
    bb.head_prefix = lambda: nn.LayerNorm(bb.dim, eps=eps)
    return bb


TIMM = {
    "resnet50": lambda size, pre, w, dp: timm_backbone("resnet50", size, pre, w, dp),
    "convnext_tiny": _timm_convnext,
    # img_size set to the image size (windows clamped at 28/32 px)
    "swin_tiny": lambda size, pre, w, dp: timm_backbone(
        "swin_tiny_patch4_window7_224", size or 224, pre, w, dp, img_size=size or 224),
}


def paper_backbone(name: str, image_size: int, pretrained: bool, weights, impl: str,
                   drop_path: float) -> Backbone:
    if impl == "torchvision":
        return torchvision_backbone(name, pretrained, weights, drop_path)
    bb = TIMM[name](image_size, pretrained, weights, drop_path)
    bb.min_size = SIZE_RULES[name][0]
    return bb


@BACKBONES.register("resnet18", "timm resnet18 (11M params), small CPU-friendly backbone",
                    OTHER_BACKBONE_NAMES["resnet18"])
def resnet18(image_size: int, pretrained: bool = False, weights=None, drop_path: float = -1.0,
             **_) -> Backbone:
    return timm_backbone("resnet18", image_size, pretrained, weights, drop_path)


@BACKBONES.register("resnet50", "ResNet50 (25M params), torchvision (or timm: backbone_impl), "
                    "any size >= 8 px", BACKBONE_NAMES["resnet50"])
def resnet50(image_size: int, pretrained: bool = False, weights=None,
             impl: str = "torchvision", drop_path: float = -1.0) -> Backbone:
    return paper_backbone("resnet50", image_size, pretrained, weights, impl, drop_path)


@BACKBONES.register("convnext_tiny", "ConvNeXt-T (28M), torchvision (drop path 0.1) or timm; "
                    "a fresh head norm per head; >= 32 px (PathMNIST: 32)",
                    BACKBONE_NAMES["convnext_tiny"])
def convnext_tiny(image_size: int, pretrained: bool = False, weights=None,
                  impl: str = "torchvision", drop_path: float = -1.0) -> Backbone:
    return paper_backbone("convnext_tiny", image_size, pretrained, weights, impl, drop_path)


@BACKBONES.register("swin_tiny", "Swin-T (28M), torchvision swin_t (drop path 0.2) or timm "
                    "swin_tiny_patch4_window7_224; >= 28 px", BACKBONE_NAMES["swin_tiny"])
def swin_tiny(image_size: int, pretrained: bool = False, weights=None,
              impl: str = "torchvision", drop_path: float = -1.0) -> Backbone:
    return paper_backbone("swin_tiny", image_size, pretrained, weights, impl, drop_path)


def _timm_any(image_size: int, pretrained: bool = False, weights=None, drop_path: float = -1.0,
              model_name: str = "", **_) -> Backbone:
    # timm on demand: `bench list` imports this module (the BACKBONES registry)
    import timm

    # a model built for one input size (ViTs: fixed_input_size) is built for
    # the run's: img_size = image size (its position table sized to it)
    fixed = {"img_size": image_size} if timm_fixed_size(model_name) and image_size else {}
    return timm_backbone(model_name, image_size, pretrained, weights, drop_path, **fixed)


def timm_fixed_size(model_name: str) -> bool:
    """Whether timm builds `model_name` for one input size (its pretrained
    config's fixed_input_size: ViTs, Swin, CoAtNet, MaxViT); a model with no
    config is taken as any-size, as timm itself does."""
    # timm on demand: `bench list` imports this module (the BACKBONES registry)
    import timm

    cfg = timm.models.get_pretrained_cfg(model_name.partition(".")[0])
    return bool(cfg is not None and cfg.fixed_input_size)


TIMM_PREFIX = "timm:"
# `bench list`: the names of a library's models (resolved, not registered one by one)
LIBRARY_BACKBONES = (
    ("timm:NAME", "timm", "any timm model (bench list --backbones 'timm:*vit*'); a fixed-size "
     "one (ViT) trains and tests at one size; records in timm+NAME/"),
    ("tv:NAME", "torchvision", "any torchvision classifier (bench list --backbones tv); records "
     "in tv+NAME/; refused in one line: Packed-Ensembles, sizes the model cannot take"),
)


def canonical_backbone(name: str) -> str:
    """'timm/<model>' (as users write timm's hub names) -> 'timm:<model>': the
    name in records and tables (a '/' would add a directory level)."""
    return TIMM_PREFIX + name[5:] if name.startswith("timm/") else name


def _resolve_timm(name: str):
    """'timm:<model>[.<tag>]' -> any model timm knows (built offline, random
    init; weights from --weights or the local cache)."""
    name = canonical_backbone(name)
    if not name.startswith(TIMM_PREFIX):
        return None
    # timm on demand: `bench list` imports this module (the BACKBONES registry)
    import timm

    model = name.removeprefix(TIMM_PREFIX)
    return (_timm_any, {"model_name": model}) if timm.is_model(model) else None


def _timm_models() -> list[str]:
    import timm  # on demand: `bench list` imports this module (the BACKBONES registry)

    return timm.list_models()


BACKBONES.add_resolver(_resolve_timm, library=("timm", TIMM_PREFIX, "timm/"), models=_timm_models)

TV_PREFIX = "tv:"
# the attributes torchvision's classifiers hang on (ResNet fc; EfficientNet,
# MobileNet, VGG, DenseNet, ConvNeXt classifier; Swin head; ViT heads)
TV_CLASSIFIERS = ("fc", "classifier", "head", "heads")
# builder arguments: GoogLeNet and Inception v3 return their auxiliary
# classifiers' logits beside the features in training mode, which no head
# takes (those classifiers are dropped, as the heads replace the classifier)
TV_BUILD = {"googlenet": {"aux_logits": False}, "inception_v3": {"aux_logits": False}}


def _tv_any(image_size: int, pretrained: bool = False, weights=None, drop_path: float = -1.0,
            model_name: str = "", **_) -> Backbone:
    """Any torchvision classifier: its builder with no weights, the last Linear
    of its classifier replaced by Identity (what comes before it, e.g. VGG's
    hidden layers or ConvNeXt's norm, stays), the heads new on the width it gives."""
    # torchvision and torch on demand: `bench list` imports this module (the BACKBONES registry)
    import torchvision
    from bench.train.nets import drop_last_linear, max_drop_path, scale_drop_path
    from bench.train.weights import load_into, resolve_weights

    model = torchvision.models.get_model(model_name, weights=None, **TV_BUILD.get(model_name, {}))
    if drop_path >= 0:
        scale_drop_path(model, drop_path)
    drop_last_linear(model, TV_CLASSIFIERS, f"tv:{model_name}")
    if pretrained and weights is None:
        weights = resolve_weights(TV_PREFIX + model_name, pretrained=True, impl="torchvision")
    if weights is not None:
        load_into(model, weights, f"torchvision {model_name}")
    dim = pooled_width(model, image_size, TV_PREFIX + model_name)
    return Backbone(model, dim, weights=weights.label if weights else "random",
                    impl="torchvision", drop_path=max_drop_path(model))


def _resolve_tv(name: str):
    """'tv:<model>' -> any classifier torchvision.models lists (built offline,
    random init; weights from --weights or the torch hub cache)."""
    if not name.startswith(TV_PREFIX):
        return None
    model = name.removeprefix(TV_PREFIX)
    return (_tv_any, {"model_name": model}) if model in _tv_models() else None


def _tv_models() -> list[str]:
    import torchvision  # on demand: `bench list` imports this module (the BACKBONES registry)

    return torchvision.models.list_models(module=torchvision.models)


BACKBONES.add_resolver(_resolve_tv, library=("torchvision", TV_PREFIX), models=_tv_models)

NO_IMAGENET_WEIGHTS = ("smallcnn",)  # registered backbones without published weights


def has_imagenet_weights(name: str) -> bool:
    """Whether ImageNet weights exist for a backbone (the paper profiles then
    load them by default); a timm model when timm lists a pretrained tag."""
    name = canonical_backbone(name)
    if name in NO_IMAGENET_WEIGHTS:
        return False
    if name.startswith(TV_PREFIX):
        return True  # every classifier torchvision.models lists has ImageNet weights
    if name.startswith(TIMM_PREFIX):
        # timm on demand: `bench list` imports this module (the BACKBONES registry)
        import timm

        return timm.models.get_pretrained_cfg(name.removeprefix(TIMM_PREFIX)) is not None
    return True
