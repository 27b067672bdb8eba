"""Up-front checks that a backbone can be built as a run asks: one BenchError
line (exit 2) before anything trains, instead of a shape error in every
worker. check_arch: a method's arch (Packed-Ensembles, MIMO) on the backbone;
check_sizes / check_builds: a timm:/tv: library model at the run's image
sizes (the registered backbones' sizes are bench.core.sizes.SIZE_RULES').
"""
from __future__ import annotations

import functools

from bench.core.errors import BenchError
from bench.train.backbones import (TIMM_PREFIX, TV_PREFIX, canonical_backbone, create_backbone,
                                   timm_fixed_size)

PROBE_SIZES = (32, 64, 128, 224)  # the sizes a refusal suggests, smallest first


# Backbones Packed-Ensembles is built for: conv / batch-norm only (a norm or
# linear layer across channels would mix the members; bench.train.ensembles),
# the registered builds whose packed form is checked (docs/methods.md)
PACKED_BACKBONES = ("smallcnn", "resnet18", "resnet50")


def check_arch(backbone: str, arch: tuple, pretrained: bool) -> None:
    """One-line BenchError, before anything trains, for an arch this backbone
    cannot be built as (the build itself refuses too, naming the layer)."""
    if arch and arch[0] == "mimo":
        check_mimo_stem(canonical_backbone(backbone))
    if not arch or arch[0] != "packed":
        return

    name = canonical_backbone(backbone)
    if name not in PACKED_BACKBONES:
        library = name.startswith((TIMM_PREFIX, TV_PREFIX))
        never = ", never on a library model (timm:NAME, tv:NAME)" if library else ""
        # tv:resnet18 is not `resnet18`: say which spelling is the packed one
        bare = name.partition(":")[2] if library else ""
        same = (f"; for a packed {bare} write --backbone {bare} (the registered build), "
                f"not {name}") if bare in PACKED_BACKBONES else ""
        raise BenchError(f"packed: backbone '{backbone}' is not built as Packed-Ensembles; it "
                         "is built only on the registered conv / batch-norm backbones "
                         f"{', '.join(PACKED_BACKBONES[:-1])} and {PACKED_BACKBONES[-1]}"
                         f"{never}{same}")
    if pretrained:
        raise BenchError("packed: its widths differ from any pretrained checkpoint's, so it "
                         "trains from scratch; add --no-pretrained (and no --weights)")


@functools.lru_cache(maxsize=64)
def check_mimo_stem(backbone: str) -> None:
    """MIMO widens the convolution that reads the image (bench.train.ensembles.
    widen_stem): the registered backbones all have one; a timm: / tv: model is
    built once (random weights, the global RNG left as it was) to find it."""
    if not backbone.startswith((TIMM_PREFIX, TV_PREFIX)):
        return
    # torch on demand: bench data check imports the sweep's grid, which imports this module
    import torch
    from bench.train.ensembles import checked_stem

    with torch.random.fork_rng(devices=[]):
        bb = create_backbone(backbone, 224)
    checked_stem(bb.features, backbone)


def check_sizes(backbone: str, train: int, test: int, method: str) -> None:
    """Refuse a timm model built for one input size (its fixed_input_size:
    ViTs, Swin, CoAtNet, MaxViT) that would train at one size and test at
    another (size_rule released: 150/224 px on Chaoyang and Kvasir). Not
    resized silently: timm's dynamic_img_size would interpolate the position
    table at test time, a model other than the one trained."""
    name = canonical_backbone(backbone)
    if train == test or not name.startswith(TIMM_PREFIX) \
            or not timm_fixed_size(name.removeprefix(TIMM_PREFIX)):
        return
    raise BenchError(f"backbone '{name}' takes one input size (timm fixed_input_size), but "
                     f"{method} trains at {train} px and tests at {test} px; use --set "
                     f"size_rule=uniform, or --set image_size=N --set test_size=N")


def check_builds(backbone: str, train: int, test: int, impl: str = "torchvision") -> None:
    """Refuse a timm:/tv: model that cannot take the run's sizes (torchvision's
    DenseNet pools 16 px to nothing, its ViT takes 224 px only): the model is
    built at the training size once (its heads' width measured there,
    bench.train.backbones.pooled_width) and two blank images go through it at
    each size, which must give that width; the line names the smallest of
    PROBE_SIZES it takes."""
    name = canonical_backbone(backbone)
    if name.startswith((TIMM_PREFIX, TV_PREFIX)):
        bad = _probe(name, train, (train, test) if test and test != train else (train,), impl)
        if bad:
            raise BenchError(bad)


@functools.lru_cache(maxsize=16)
def _probe(backbone: str, build: int, sizes: tuple, impl: str) -> str:
    """'' when `backbone` built at `build` px takes every size, else the line."""
    # torch on demand: bench data check imports the sweep's grid, which imports this module
    import torch

    size = build
    try:
        bb = create_backbone(backbone, build, impl=impl)  # measures its width at `build` px
        model = bb.features.eval()
        with torch.no_grad():
            for size in sizes:
                width = model(torch.zeros(2, 3, size, size)).shape[1:]
                if tuple(width) != (bb.dim,):
                    return (f"backbone '{backbone}' gives {tuple(width)} features at {size} px "
                            f"but {bb.dim} at {build} px, where its heads are built; use "
                            f"--set test_size={build}")
    except (RuntimeError, ValueError, AssertionError, TypeError) as err:
        why = (str(err).splitlines() or [type(err).__name__])[0][:100]
        fits = next((s for s in PROBE_SIZES if s > size and not _probe(backbone, s, (s,), impl)),
                    None)
        hint = f"it takes {fits} px: --set image_size={fits}" if fits \
            else "give a larger --set image_size"
        return f"backbone '{backbone}' cannot take {size} px images ({why}); {hint}"
    return ""
