"""TrivialAugmentWide on uint8 batches, drawn independently for every image.

torchvision's v2 transform applied to a batch tensor draws ONE operation for
the whole batch; the paper (and its released code) augments each image on its
own. Looping torchvision over the images keeps that, but costs one Python
round trip per image: cheap on CPU, dominant on a GPU (docs/architecture.md).

`batched` mode draws (op, magnitude bin, sign) for every image from an explicit
torch.Generator, groups the images by drawn op and applies each op once to its
group with per-image magnitudes. Op set, magnitude bins and sign rule are those
of torchvision 0.2x's `TrivialAugmentWide` (31 bins, nearest interpolation,
fill 0); the kernels are written here so one call serves a group with
different magnitudes, and are tested pixel-for-pixel against torchvision's.
`per_image` mode is the reference: torchvision's transform, once per image.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torchvision.transforms.v2 import TrivialAugmentWide
from torchvision.transforms.v2 import functional as TF

from bench.core.errors import choices_error
from bench.core.transfer import h2d

NUM_BINS = 31  # torchvision's default num_magnitude_bins


@dataclass(frozen=True)
class Op:
    name: str
    bins: Optional[Callable[[int], torch.Tensor]]  # num_bins -> magnitudes; None: no magnitude
    signed: bool  # magnitude negated with probability 1/2
    kernel: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (x [n,3,H,W] uint8, mag [n] f64)


OPS: list[Op] = []  # in torchvision's order, so op index k means the same op in both


def register(name: str, bins=None, signed: bool = False):
    def deco(kernel):
        OPS.append(Op(name, bins, signed, kernel))
        return kernel
    return deco


def _lin(lo: float, hi: float):
    return lambda n: torch.linspace(lo, hi, n)


# ------------------------------------------------------------ geometry ----
def _inverse_affine(angle_deg, shear_x_deg, shear_y_deg, tx, ty, cx, cy) -> torch.Tensor:
    """Inverse affine matrices [n, 2, 3] (float64), as torchvision's
    `_get_inverse_affine_matrix` with scale 1, one row per image."""
    rot, sx, sy = (torch.deg2rad(t) for t in (angle_deg, shear_x_deg, shear_y_deg))
    a = torch.cos(rot - sy) / torch.cos(sy)
    b = -(a * torch.tan(sx) + torch.sin(rot))
    c = torch.sin(rot - sy) / torch.cos(sy)
    d = torch.cos(rot) - c * torch.tan(sx)
    m0, m1, m3, m4 = d, -b, -c, a
    m2 = cx - m0 * (cx + tx) - m1 * (cy + ty)
    m5 = cy - m3 * (cx + tx) - m4 * (cy + ty)
    return torch.stack([m0, m1, m2, m3, m4, m5], dim=1).view(-1, 2, 3)


def _warp(x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Nearest-neighbour warp of uint8 images by per-image inverse matrices
    (pixel coordinates centred on the image), zeros outside."""
    h, w = x.shape[-2:]
    # Scaled on the CPU (float32, as on the device) and copied once, without a sync.
    scale = torch.tensor([0.5 * w, 0.5 * h])
    return warp_scaled(x, h2d(theta.float().transpose(1, 2) / scale, x.device))


def warp_scaled(x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """_warp with the matrices already transposed and scaled ([n, 3, 2] float32
    on x's device): one affine grid and one nearest grid_sample for all images."""
    n, _, h, w = x.shape
    xs = torch.linspace((1.0 - w) * 0.5, (w - 1.0) * 0.5, w, device=x.device)
    ys = torch.linspace((1.0 - h) * 0.5, (h - 1.0) * 0.5, h, device=x.device)
    base = torch.stack([xs.expand(h, w), ys.unsqueeze(1).expand(h, w),
                        torch.ones(h, w, device=x.device)], dim=-1).view(1, h * w, 3)
    grid = base.expand(n, -1, -1).bmm(theta).view(n, h, w, 2)
    out = F.grid_sample(x.float(), grid, mode="nearest", padding_mode="zeros", align_corners=False)
    return out.round_().to(torch.uint8)


def _shear(x, mag, axis: int):
    shear = torch.rad2deg(torch.atan(mag))
    z = torch.zeros_like(mag)
    h, w = x.shape[-2:]
    centre = (torch.full_like(mag, -0.5 * w), torch.full_like(mag, -0.5 * h))  # top-left corner
    sx, sy = (shear, z) if axis == 0 else (z, shear)
    return _warp(x, _inverse_affine(z, sx, sy, z, z, *centre))


def _translate(x, mag, axis: int):
    shift = torch.trunc(mag)  # torchvision: int(magnitude)
    z = torch.zeros_like(mag)
    tx, ty = (shift, z) if axis == 0 else (z, shift)
    return _warp(x, _inverse_affine(z, z, z, tx, ty, z, z))


@register("Identity")
def _identity(x, mag):
    return x


register("ShearX", _lin(0.0, 0.99), signed=True)(partial(_shear, axis=0))
register("ShearY", _lin(0.0, 0.99), signed=True)(partial(_shear, axis=1))
register("TranslateX", _lin(0.0, 32.0), signed=True)(partial(_translate, axis=0))
register("TranslateY", _lin(0.0, 32.0), signed=True)(partial(_translate, axis=1))


@register("Rotate", _lin(0.0, 135.0), signed=True)
def _rotate(x, mag):
    angle = torch.remainder(mag, 360.0)
    z = torch.zeros_like(mag)
    out = _warp(x, _inverse_affine(-angle, z, z, z, z, z, z))
    # torchvision takes exact transposes for multiples of 90 degrees (square images)
    square = x.shape[-1] == x.shape[-2]
    for deg, k in ((0.0, 0), (90.0, 1), (180.0, 2), (270.0, 3)):
        hit = angle == deg  # on the CPU, like the draws: no device sync
        if hit.any() and (square or k % 2 == 0):
            idx = h2d(hit.nonzero().squeeze(1), x.device)  # a mask index would sync
            out[idx] = torch.rot90(x[idx], k=k, dims=(-2, -1))
    return out


# --------------------------------------------------------------- colour ----
def _col(v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return h2d(v.to(torch.float32), x.device).view(-1, 1, 1, 1)


def _fma(a, b, alpha):
    """a + alpha * b rounded once, as torch's CPU `add(a, b, alpha=...)` does with a
    fused multiply-add (float32 products are exact in float64)."""
    return (a.double() + b.double() * _col(alpha, b).double()).float()


def _blend(x, other, ratio):
    """x * r + other * (1 - r), clamped, truncated to uint8 (torchvision's _blend);
    1 - r is taken in float64 first, as torchvision does with a Python float."""
    out = _fma(x.float() * _col(ratio, x), other, 1.0 - ratio)
    return out.clamp_(0, 255).to(torch.uint8)


def _grey(x):
    r, g, b = x.unbind(dim=-3)
    return r.mul(0.2989).add_(g, alpha=0.587).add_(b, alpha=0.114).unsqueeze(-3).floor_()


@register("Brightness", _lin(0.0, 0.99), signed=True)
def _brightness(x, mag):
    return (x.float() * _col(1.0 + mag, x)).clamp_(0, 255).to(torch.uint8)


@register("Color", _lin(0.0, 0.99), signed=True)
def _color(x, mag):
    return _blend(x, _grey(x), 1.0 + mag)


@register("Contrast", _lin(0.0, 0.99), signed=True)
def _contrast(x, mag):
    return _blend(x, _grey(x).mean(dim=(-3, -2, -1), keepdim=True), 1.0 + mag)


_SMOOTH: dict = {}


def _smooth_kernel(device) -> torch.Tensor:
    """PIL's SMOOTH filter as a depthwise kernel [3, 1, 3, 3], built on the CPU
    and copied once per device (setting an element of a CUDA tensor from
    Python is a blocking copy, i.e. a sync every step)."""
    if device not in _SMOOTH:
        k = torch.ones(3, 3) / 13.0
        k[1, 1] = 5.0 / 13.0
        _SMOOTH[device] = h2d(k.expand(3, 1, 3, 3).contiguous(), device)
    return _SMOOTH[device]


@register("Sharpness", _lin(0.0, 0.99), signed=True)
def _sharpness(x, mag):
    if x.shape[-1] <= 2 or x.shape[-2] <= 2:
        return x
    out = x.float()
    blurred = F.conv2d(out, _smooth_kernel(x.device), groups=3).round_()
    inner = out[..., 1:-1, 1:-1]
    inner.copy_(_fma(inner, blurred - inner, -mag))  # alpha = 1 - factor = -mag
    return out.clamp_(0, 255).to(torch.uint8)


def _posterize_bins(n: int) -> torch.Tensor:
    return (8 - (torch.arange(n) / ((n - 1) / 6))).round().int()


@register("Posterize", _posterize_bins)
def _posterize(x, mag):
    bits = mag.long()
    mask = ((1 << bits) - 1) << (8 - bits)
    return x & h2d(mask.to(torch.uint8), x.device).view(-1, 1, 1, 1)


@register("Solarize", _lin(1.0, 0.0))
def _solarize(x, mag):
    # torchvision compares uint8 with a Python float, i.e. in float32
    threshold = _col(255.0 * mag, x)
    return torch.where(x >= threshold, 255 - x, x)


@register("AutoContrast")
def _autocontrast(x, mag):
    return TF.autocontrast(x)  # parameter-free and batch-native in torchvision


@register("Equalize")
def _equalize(x, mag):
    return TF.equalize(x)  # parameter-free and batch-native in torchvision


OP_NAMES = tuple(op.name for op in OPS)


# ------------------------------------------------------------- sampling ----
def sample_params(n: int, gen: torch.Generator, num_bins: int = NUM_BINS):
    """Per-image draws as torchvision makes them: op uniform over the 14 ops, bin
    uniform over `num_bins`, sign negative with probability 1/2 (signed ops).
    Returns (op index [n] int64, magnitude [n] float64), on the CPU."""
    ops = torch.randint(len(OPS), (n,), generator=gen)
    bins = torch.randint(num_bins, (n,), generator=gen)
    negate = torch.rand(n, generator=gen) <= 0.5
    table, signed = _magnitude_table(num_bins)
    mags = table[ops, bins]
    return ops, torch.where(negate & signed[ops], -mags, mags)


@lru_cache(maxsize=None)
def _magnitude_table(num_bins: int):
    """[ops, bins] magnitudes (0 for ops without one) and [ops] signed flags:
    built once, so a batch's draws are two index operations."""
    table = torch.zeros(len(OPS), num_bins, dtype=torch.float64)
    for k, op in enumerate(OPS):
        if op.bins is not None:
            table[k] = op.bins(num_bins).double()
    return table, torch.tensor([op.signed for op in OPS])


def apply_ops(x: torch.Tensor, ops: torch.Tensor, mags: torch.Tensor) -> torch.Tensor:
    """Apply op ops[i] with magnitude mags[i] to image x[i]; one kernel call per
    distinct op (images grouped by op)."""
    out = torch.empty_like(x)
    for k in torch.unique(ops).tolist():
        idx = (ops == k).nonzero().squeeze(1)
        dev_idx = h2d(idx, x.device)
        out[dev_idx] = OPS[k].kernel(x[dev_idx], mags[idx])
    return out


# ----------------------------------------------------------------- modes ----
def _batched(x, gen):
    ops, mags = sample_params(len(x), gen)
    return apply_ops(x, ops, mags)


_REFERENCE = TrivialAugmentWide()


def _per_image(x, gen):
    """torchvision's transform once per image; its global-RNG draws are seeded
    from `gen` inside a forked RNG state, so runs stay reproducible."""
    seed = int(torch.randint(2**62, (), generator=gen))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.stack([_REFERENCE(img) for img in x])


MODES = {"batched": _batched, "per_image": _per_image}


def augment_batch(x: torch.Tensor, gen: torch.Generator, mode: str = "batched") -> torch.Tensor:
    """uint8 [B, 3, H, W] -> uint8 [B, 3, H, W], one TrivialAugmentWide draw per image."""
    if mode not in MODES:
        raise choices_error("augmentation mode", mode, MODES)
    return MODES[mode](x, gen)


def op_index(name: str) -> int:
    return OP_NAMES.index(name)


def magnitude_values(name: str, num_bins: int = NUM_BINS) -> list[float]:
    """All magnitudes an op can draw (both signs for signed ops)."""
    op = OPS[op_index(name)]
    if op.bins is None:
        return [0.0]
    vals = [float(v) for v in op.bins(num_bins)]
    return sorted(set(vals + ([-v for v in vals] if op.signed else [])))


__all__ = ["OPS", "OP_NAMES", "NUM_BINS", "sample_params", "apply_ops", "augment_batch",
           "magnitude_values", "op_index", "MODES"]
