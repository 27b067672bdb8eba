"""TrivialAugmentWide by masks: every op on every image, each image's own result
chosen with `torch.where`. The graph-safe training step's augmentation.

bench/train/augment.py groups a batch's images by drawn op and applies each op
to its group (`apply_ops`): a `torch.unique`, a `nonzero` and an index copy per
op on the host, every step. Here the per-image parameters are derived on the
host once per epoch (`derive`, from the very draws `sample_params` makes, in
the same order), staged on the device, and the step applies all 14 ops to the
whole batch and selects per image (`apply_masked`): no host work, no
data-dependent shape, so the step can be captured as one CUDA graph. The five
geometric ops share one affine grid and one `grid_sample` (each image its own
matrix). Pixels equal `apply_ops`'s for every op, magnitude and sign
(tests/train/test_maskaug.py): the per-image values are computed by the same
arithmetic in the same precision, only for all images at once (the float64
matrices of a vector equal those of its elements one by one; checked there).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torchvision.transforms.v2 import functional as TF

from bench.train.augment import _grey, _inverse_affine, _smooth_kernel, op_index, warp_scaled

GEOMETRIC = ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate")
BLENDS = ("Color", "Contrast")
# The staged per-image fields and their dtypes (one row per image).
FIELDS = {"op": torch.int64, "theta": torch.float32, "rot": torch.int64,
          "scale": torch.float32, "alpha": torch.float32, "post": torch.uint8,
          "thr": torch.float32}
_OP = {name: op_index(name) for name in
       ("Identity", *GEOMETRIC, "Brightness", *BLENDS, "Sharpness", "Posterize",
        "Solarize", "AutoContrast", "Equalize")}


# ------------------------------------------------------------ host side ----
def _theta(ops: torch.Tensor, mags: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """Per-image inverse affine matrices, transposed and scaled as augment._warp
    scales them ([n, 3, 2] float32); the identity where the op is not geometric."""
    z = torch.zeros_like(mags)
    shear = torch.rad2deg(torch.atan(mags))
    shift = torch.trunc(mags)
    corner = (torch.full_like(mags, -0.5 * w), torch.full_like(mags, -0.5 * h))
    angle = torch.remainder(mags, 360.0)
    cases = {"ShearX": (z, shear, z, z, z, *corner), "ShearY": (z, z, shear, z, z, *corner),
             "TranslateX": (z, z, z, shift, z, z, z), "TranslateY": (z, z, z, z, shift, z, z),
             "Rotate": (-angle, z, z, z, z, z, z)}
    theta = _inverse_affine(z, z, z, z, z, z, z)  # identity rows
    for name, args in cases.items():
        theta = torch.where((ops == _OP[name]).view(-1, 1, 1), _inverse_affine(*args), theta)
    scale = torch.tensor([0.5 * w, 0.5 * h])
    return theta.float().transpose(1, 2) / scale


def _rot(ops: torch.Tensor, mags: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """k of the exact rot90 torchvision takes for Rotate at 0/90/180/270 degrees
    (odd k only on square images), else -1."""
    angle = torch.remainder(mags, 360.0)
    rot = torch.full_like(ops, -1)
    for deg, k in ((0.0, 0), (90.0, 1), (180.0, 2), (270.0, 3)):
        if h == w or k % 2 == 0:
            rot = torch.where((ops == _OP["Rotate"]) & (angle == deg), k, rot)
    return rot


def derive(ops: torch.Tensor, mags: torch.Tensor, h: int, w: int) -> dict:
    """Per-image parameters of `apply_masked` from `sample_params`'s draws
    (ops [n] int64, magnitudes [n] float64), on the host, for images of h x w
    px. Each value is what augment.py's kernel computes for that image."""
    blend = (ops == _OP["Color"]) | (ops == _OP["Contrast"])
    ratio = 1.0 + mags  # float64 as a Python float would be
    bits = mags.long().clamp(0, 8)
    return {
        "op": ops.long(),
        "theta": _theta(ops, mags, h, w),
        "rot": _rot(ops, mags, h, w),
        # Brightness and the blends multiply by 1 + mag (float32, as augment._col)
        "scale": ratio.float(),
        # the blends' 1 - ratio and Sharpness' -mag, both rounded to float32 first
        "alpha": torch.where(blend, 1.0 - ratio, -mags).float(),
        "post": (((1 << bits) - 1) << (8 - bits)).to(torch.uint8),
        "thr": (255.0 * mags).float(),
    }


# ---------------------------------------------------------- device side ----
def _col(v: torch.Tensor) -> torch.Tensor:
    return v.view(-1, 1, 1, 1)


def _fma(a: torch.Tensor, b: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """a + alpha * b in float64, rounded once (augment._fma's arithmetic)."""
    return (a.double() + b.double() * _col(alpha).double()).float()


def _blend(x, other, scale, alpha):
    return _fma(x.float() * _col(scale), other, alpha).clamp_(0, 255).to(torch.uint8)


def _sharpen(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    if x.shape[-1] <= 2 or x.shape[-2] <= 2:
        return x
    out = x.float()
    blurred = F.conv2d(out, _smooth_kernel(x.device), groups=3).round_()
    inner = out[..., 1:-1, 1:-1]
    inner.copy_(_fma(inner, blurred - inner, alpha))
    return out.clamp_(0, 255).to(torch.uint8)


def _autocontrast(x: torch.Tensor) -> torch.Tensor:
    """torchvision's (v2) uint8 autocontrast, the same ops in the same order,
    with torch.where where it assigns 0 and 1 through a mask: those
    assignments make host constants every step (a capture would bake them in)."""
    f = x.float()
    lo, hi = f.amin(dim=(-2, -1), keepdim=True), f.amax(dim=(-2, -1), keepdim=True)
    flat = hi == lo  # a one-valued channel stays as it is
    inv_scale = torch.where(flat, 1.0, (hi - lo).mul_(1.0 / 255))
    return (f - torch.where(flat, 0.0, lo)).div_(inv_scale).clamp_(0, 255).to(torch.uint8)


def _results(x: torch.Tensor, p: dict):
    """(mask name, result) pairs: every op applied to every image."""
    grey = _grey(x)
    yield GEOMETRIC, warp_scaled(x, p["theta"])  # one grid_sample for all
    yield ("Brightness",), (x.float() * _col(p["scale"])).clamp_(0, 255).to(torch.uint8)
    yield ("Color",), _blend(x, grey, p["scale"], p["alpha"])
    yield ("Contrast",), _blend(x, grey.mean(dim=(-3, -2, -1), keepdim=True),
                                p["scale"], p["alpha"])
    yield ("Sharpness",), _sharpen(x, p["alpha"])
    yield ("Posterize",), x & _col(p["post"])
    yield ("Solarize",), torch.where(x >= _col(p["thr"]), 255 - x, x)
    yield ("AutoContrast",), _autocontrast(x)
    yield ("Equalize",), TF.equalize(x)


def apply_masked(x: torch.Tensor, p: dict) -> torch.Tensor:
    """uint8 [n, 3, H, W] -> each image under its own op (p: `derive`'s fields,
    on x's device). Identity is the starting value; the exact rot90 of Rotate
    at multiples of 90 degrees overrides its warp, as in augment._rotate."""
    op = _col(p["op"])
    out = x
    for names, result in _results(x, p):
        mask = torch.zeros_like(op, dtype=torch.bool)
        for name in names:
            mask = mask | (op == _OP[name])
        out = torch.where(mask, result, out)
    square = x.shape[-1] == x.shape[-2]
    for k in range(4):
        if square or k % 2 == 0:
            out = torch.where(_col(p["rot"]) == k, torch.rot90(x, k=k, dims=(-2, -1)), out)
    return out
