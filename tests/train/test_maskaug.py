"""Mask augmentation (every op on every image, chosen per image) against the
grouped kernels of bench.train.augment and torchvision's own pixels."""
import pytest
import torch
from torchvision.transforms.v2 import TrivialAugmentWide

from bench.train import augment as A
from bench.train.maskaug import apply_masked, derive

pytestmark = pytest.mark.usefixtures("one_thread")
TV = TrivialAugmentWide()


def _images(h, w, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 256, (n, 3, h, w), generator=g, dtype=torch.uint8)
    x[0] = 0  # flat: autocontrast's and equalize's degenerate branches
    x[1, :, : h // 2] = 200  # few grey levels
    return x


def _masked(x, ops, mags):
    return apply_masked(x, derive(ops, mags, *x.shape[-2:]))


@pytest.mark.parametrize("h, w", [(20, 20), (15, 18), (2, 2), (1, 5)])
@pytest.mark.parametrize("name", A.OP_NAMES)
def test_every_op_magnitude_and_sign_equals_the_grouped_kernels(name, h, w):
    """Each magnitude (both signs) of one op, mixed in one batch with images of
    every other op: the masks pick exactly the grouped kernel's pixels, which
    torchvision's own transform gives (checked beside)."""
    mags = torch.tensor(A.magnitude_values(name), dtype=torch.float64)
    x = _images(h, w, n=2 * len(mags) + 6)
    others = torch.randint(len(A.OPS), (6,), generator=torch.Generator().manual_seed(3))
    ops = torch.cat([torch.full((len(mags),), A.op_index(name)), others,
                     torch.full((len(mags),), A.op_index(name))])
    other_mags = A.sample_params(len(others), torch.Generator().manual_seed(4))[1]
    all_mags = torch.cat([mags, other_mags, mags.flip(0)])
    ours, grouped = _masked(x, ops, all_mags), A.apply_ops(x, ops, all_mags)
    bad = [i for i in range(len(x)) if not torch.equal(ours[i], grouped[i])]
    assert not bad, f"{name} at {h}x{w}: images {bad} differ"
    if min(h, w) > 2:  # torchvision itself, for the op under test
        for i in range(len(mags)):
            ref = TV._apply_image_or_video_transform(x[i], name, float(mags[i]),
                                                     interpolation=TV.interpolation, fill=TV._fill)
            assert torch.equal(ours[i], ref), f"{name} {float(mags[i])}"


def test_sampled_batches_equal_apply_ops_image_for_image():
    """Many sampled batches (the training path's draws), square and not."""
    g = torch.Generator().manual_seed(11)
    differ = total = 0
    for h, w in ((28, 28), (24, 30), (32, 32)):
        for _ in range(20):
            x = _images(h, w, n=16, seed=int(torch.randint(1000, (), generator=g)))
            ops, mags = A.sample_params(len(x), g)
            ours, grouped = _masked(x, ops, mags), A.apply_ops(x, ops, mags)
            differ += sum(not torch.equal(a, b) for a, b in zip(ours, grouped))
            total += len(x)
    assert total == 960 and differ == 0


def test_a_wrong_parameter_is_caught():
    """The comparison can fail: the next bin's brightness factor changes pixels."""
    x = _images(16, 16, n=8, seed=2)
    ops = torch.full((8,), A.op_index("Brightness"))
    mags = torch.full((8,), 0.66, dtype=torch.float64)
    p = derive(ops, mags, 16, 16)
    p["scale"] = p["scale"] + 0.033
    assert not torch.equal(apply_masked(x, p), A.apply_ops(x, ops, mags))


def test_vector_and_single_image_parameters_agree():
    """derive() computes for a whole epoch at once; the grouped kernels for a
    few images: every field of a long vector equals the field of each image alone."""
    g = torch.Generator().manual_seed(7)
    ops, mags = A.sample_params(500, g)
    whole = derive(ops, mags, 28, 28)
    for i in range(0, 500, 37):
        one = derive(ops[i:i + 1], mags[i:i + 1], 28, 28)
        for k, v in one.items():
            assert torch.equal(v[0], whole[k][i]), (k, i)
