"""Initial backbone weights: found in the local cache or a user file, read as
tensors only, and named so that config.json (and the run hash) say which.

`--pretrained` looks up the backbone's ImageNet weights: for torchvision
backbones (the released code's) the file of the weight tag's URL (e.g.
ResNet50_Weights.IMAGENET1K_V2) in the torch hub cache; for timm backbones the
pinned tag (IMAGENET_TAGS, e.g. timm/resnet50.tv_in1k) in the local Hugging
Face cache, then its URL's file in the torch hub cache. `--download` fetches
it when online. `--weights PATH` reads a
`.safetensors` file or a torch state dict with `torch.load(weights_only=True)`
- never unpickling arbitrary objects. Every method of a backbone gets the
same weights, resolved once per `bench run`.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import torch
from torchvision.models import get_model_weights, get_weight

from bench.core.errors import BenchError

WRAPPER_KEYS = ("state_dict", "model", "model_state_dict", "net")


NOT_CACHED = "not-cached"  # the digest of weights a dry run could not find


@dataclass(frozen=True)
class WeightsSpec:
    path: str  # the file read
    label: str  # what config.json records, e.g. "hf-hub:timm/resnet50.a1_in1k sha256:..."

    @property
    def cached(self) -> bool:
        return not self.label.endswith(NOT_CACHED)


@functools.lru_cache(maxsize=16)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def file_digest(path: str | Path) -> str:
    st = os.stat(path)
    return _digest(str(path), st.st_size, st.st_mtime_ns)


# The ImageNet-1k weights `--pretrained` means, pinned per backbone so every
# method (and every machine) starts from the same tensors. The released code
# used torchvision ResNet50 weights (V1 for one head, V2 for several); here V1
# for all. ConvNeXt and Swin: their authors' original ImageNet-1k releases.
IMAGENET_TAGS = {
    "resnet18": "resnet18.tv_in1k",
    "resnet50": "resnet50.tv_in1k",
    "convnext_tiny": "convnext_tiny.fb_in1k",
    "swin_tiny": "swin_tiny_patch4_window7_224.ms_in1k",
}
IMAGENET_TAGS["swin_tiny_patch4_window7_224"] = IMAGENET_TAGS["swin_tiny"]  # timm's name


def timm_name(backbone: str) -> str:
    """The pretrained tag to look up (timm's default tag for unlisted names)."""
    return IMAGENET_TAGS.get(backbone, backbone.removeprefix("timm:"))


# backbone -> torchvision weights enum (the released code's ImageNet weights)
TORCHVISION_ENUMS = {"resnet50": "ResNet50_Weights", "convnext_tiny": "ConvNeXt_Tiny_Weights",
                     "swin_tiny": "Swin_T_Weights"}


def imagenet_tag(backbone: str, impl: str, rule: str, heads: int) -> str:
    """The ImageNet weights a run of `backbone` with `heads` heads starts from.
    torchvision, rule "released": IMAGENET1K_V1, except ResNet50 IMAGENET1K_V2
    for multi-head models (train_PMH.py); rule "same": V1 for every method."""
    if impl == "torchvision" and backbone in TORCHVISION_ENUMS:
        v2 = rule == "released" and backbone == "resnet50" and heads > 1
        return f"{TORCHVISION_ENUMS[backbone]}.IMAGENET1K_{'V2' if v2 else 'V1'}"
    if backbone == "smallcnn":
        return ""
    if backbone.startswith("tv:"):
        return tv_tag(backbone)
    return f"timm/{timm_name(backbone)}"


def tv_tag(backbone: str) -> str:
    """A 'tv:<model>' backbone's ImageNet weights: torchvision's DEFAULT tag."""
    enum = get_model_weights(backbone.removeprefix("tv:"))
    return f"{enum.__name__}.{enum.DEFAULT.name}"


def _torchvision_file(tag: str, download: bool) -> tuple[str, str] | None:
    """(path, source) of a torchvision weight tag in the torch hub cache."""
    url = get_weight(tag).url
    local = Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(url)
    if not local.is_file() and download:
        try:  # the file only: load_state_dict_from_url would also unpickle it (weights_only=False)
            local.parent.mkdir(parents=True, exist_ok=True)
            prefix = torch.hub.HASH_REGEX.search(local.name)  # torchvision names carry a sha256 prefix
            torch.hub.download_url_to_file(url, str(local), prefix.group(1) if prefix else None,
                                           progress=False)
        except Exception as err:  # network: one line to the user
            raise BenchError(f"could not download {tag}: {str(err).splitlines()[0][:120]}; "
                             "pass --weights PATH instead") from None
    return (str(local), f"torchvision:{tag}") if local.is_file() else None


def _cached_file(model_name: str) -> tuple[str, str] | None:
    """(path, source) of timm's default pretrained tag in a local cache, if any."""
    # timm on demand: only a timm backbone needs it (every run imports this module)
    import timm

    cfg = timm.models.get_pretrained_cfg(model_name)
    if cfg is None:
        return None
    if cfg.hf_hub_id:
        # huggingface_hub on demand: only a timm backbone's weights come from its cache
        from huggingface_hub import try_to_load_from_cache

        for fname in ("model.safetensors", "pytorch_model.bin"):
            hit = try_to_load_from_cache(cfg.hf_hub_id, fname)
            if isinstance(hit, str):
                return hit, f"hf-hub:{cfg.hf_hub_id}"
    if cfg.url:
        local = Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(cfg.url)
        if local.is_file():
            return str(local), f"url:{cfg.url}"
    return None


def _hub_id(model_name: str) -> str:
    # timm on demand: only a timm backbone needs it (every run imports this module)
    import timm

    cfg = timm.models.get_pretrained_cfg(model_name)
    return cfg.hf_hub_id if cfg is not None and cfg.hf_hub_id else ""


def resolve_weights(backbone: str, pretrained: bool = False, weights: str | None = None,
                    download: bool = False, impl: str = "timm",
                    tag: str | None = None, missing_ok: bool = False) -> WeightsSpec | None:
    """The weights a run will load (None = random init); fails in one line.
    `tag`: a torchvision weight tag (imagenet_tag) for torchvision backbones.
    `missing_ok` (--dry-run): ImageNet weights not in the local cache give a
    placeholder (path "", digest NOT_CACHED) instead of the error, so the
    protocol can be inspected on a machine without them."""
    if weights:
        path = Path(weights)
        if not path.is_file():
            raise BenchError(f"--weights {weights}: file not found (a .safetensors file or a "
                             "torch state dict)")
        label = f"file:{path.name} sha256:{file_digest(path)}"
        _check_readable(str(path), label)  # a junk file fails here, in --dry-run too
        return WeightsSpec(str(path), label)
    if not pretrained:
        return None
    if impl == "torchvision" and backbone in TORCHVISION_ENUMS or backbone.startswith("tv:"):
        tag = tag or imagenet_tag(backbone, impl, "same", 1)
        hit = _torchvision_file(tag, download)
        if hit is None and missing_ok:
            return WeightsSpec("", f"torchvision:{tag} sha256:{NOT_CACHED}")
        if hit is None:
            raise BenchError(
                f"no ImageNet weights for {backbone} ({tag}) in the torch hub cache "
                f"({torch.hub.get_dir()}/checkpoints); rerun once online with --download, copy "
                "that file here, pass --weights PATH (a torchvision state dict), or "
                "--no-pretrained to train from scratch")
        return WeightsSpec(hit[0], f"{hit[1]} sha256:{file_digest(hit[0])}")
    name = timm_name(backbone)
    # timm on demand: only a timm backbone needs it (every run imports this module)
    import timm

    if timm.models.get_pretrained_cfg(name) is None:
        raise BenchError(f"backbone '{backbone}' has no ImageNet weights in timm; "
                         "drop --pretrained")
    hit = _cached_file(name)
    if hit is None and download:
        hit = _download(name)
    if hit is None and missing_ok:
        return WeightsSpec("", f"hf-hub:{_hub_id(name) or name} sha256:{NOT_CACHED}")
    if hit is None:
        hub = _hub_id(name) or name
        raise BenchError(
            f"no ImageNet weights for {backbone} ({hub}) in the local Hugging Face/torch hub "
            "cache; rerun once online with --download, copy that cache here (HF_HOME), pass "
            "--weights PATH (.safetensors or a torch state dict), or --no-pretrained to train "
            "from scratch")
    path, source = hit
    return WeightsSpec(path, f"{source} sha256:{file_digest(path)}")


@functools.lru_cache(maxsize=8)
def _check_readable(path: str, label: str) -> None:
    """Read a --weights file once per process (per content: `label` has its digest)."""
    read_state_dict(path)


def _download(model_name: str) -> tuple[str, str] | None:
    hub = _hub_id(model_name)
    if not hub:
        raise BenchError(f"timm has no Hugging Face weights for {model_name}; pass --weights PATH")
    # huggingface_hub on demand: only a timm backbone's weights come from its cache
    from huggingface_hub import hf_hub_download

    try:
        return hf_hub_download(hub, "model.safetensors"), f"hf-hub:{hub}"
    except Exception as err:  # network, auth, missing file: one line to the user
        raise BenchError(f"could not download {hub}: {str(err).splitlines()[0][:120]}; "
                         "pass --weights PATH instead") from None


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """Tensors only: safetensors, or torch.load(weights_only=True)."""
    path = Path(path)
    try:
        if path.suffix == ".safetensors":
            # optional package (safetensors): `bench run` checks it first (plan.check_packages)
            from safetensors.torch import load_file

            sd = load_file(str(path), device="cpu")
        else:
            sd = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # pickle refusal, corrupt file
        raise BenchError(f"cannot read weights {path} as tensors only "
                         f"({type(err).__name__}: {short_reason(err)})") from None
    for key in WRAPPER_KEYS:  # common training-checkpoint wrappers
        if isinstance(sd, dict) and isinstance(sd.get(key), dict):
            sd = sd[key]
    if not isinstance(sd, dict) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
        raise BenchError(f"weights {path}: expected a state dict of tensors")
    return {k.removeprefix("module."): v for k, v in sd.items()}


def short_reason(err: Exception, width: int = 100) -> str:
    """An exception's first line for a one-line error: terminal colour codes
    (torch's weights-only refusal has them) removed, cut at a word boundary."""
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", str(err)).strip()
    first = text.splitlines()[0] if text else type(err).__name__
    return textwrap.shorten(first, width=width, placeholder=" ...")


def load_into(model: torch.nn.Module, spec: WeightsSpec, model_name: str) -> None:
    """Load backbone weights; the checkpoint's classifier is ignored (the heads
    are new), any missing or mis-shaped backbone tensor is an error."""
    sd = read_state_dict(spec.path)
    # timm's per-architecture converter (official Swin/ConvNeXt checkpoints,
    # Swin position tables resized for small img_size).
    convert = getattr(sys.modules[type(model).__module__], "checkpoint_filter_fn", None)
    if convert is not None:
        try:
            sd = convert(sd, model)
        except Exception:  # not a checkpoint the converter knows: use as is
            pass
    own = model.state_dict()
    wrong = [k for k in own if k in sd and sd[k].shape != own[k].shape]
    missing = [k for k in own if k not in sd]
    if wrong or missing:
        bad = [f"{k} {tuple(sd[k].shape)} vs {tuple(own[k].shape)}" for k in wrong[:2]]
        raise BenchError(f"weights {spec.path} do not fit {model_name}: "
                         f"{len(missing)} missing (e.g. {missing[:2]}), "
                         f"{len(wrong)} mis-shaped {bad}")
    model.load_state_dict({k: sd[k] for k in own}, strict=True)
