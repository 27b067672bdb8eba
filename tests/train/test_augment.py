"""Batched TrivialAugmentWide against torchvision's per-image transform."""
import pytest
import torch
from scipy.stats import chi2_contingency
from torchvision.transforms.v2 import TrivialAugmentWide

from bench.train import augment as A
from bench.core.errors import BenchError

TV = TrivialAugmentWide()


pytestmark = pytest.mark.usefixtures("one_thread")


def _tv_apply(img, name, mag):
    """torchvision's own (op, magnitude) -> pixels mapping for one image."""
    return TV._apply_image_or_video_transform(img, name, mag, interpolation=TV.interpolation,
                                              fill=TV._fill)


def _images(h, w, n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 256, (n, 3, h, w), generator=g, dtype=torch.uint8)
    x[0] = 0  # a flat image exercises the degenerate branches (autocontrast, equalize)
    x[1, :, : h // 2] = 200  # a half-flat one: few grey levels
    return x


def test_op_set_and_bins_are_torchvision_s():
    space = TrivialAugmentWide._AUGMENTATION_SPACE
    assert A.OP_NAMES == tuple(space)
    for op in A.OPS:
        bins_fn, signed = space[op.name]
        ref = bins_fn(A.NUM_BINS, 32, 32)
        assert op.signed == signed
        if ref is None:
            assert op.bins is None
        else:
            torch.testing.assert_close(op.bins(A.NUM_BINS), ref, rtol=0, atol=0)


@pytest.mark.parametrize("h, w", [(20, 20), (15, 18)])
@pytest.mark.parametrize("name", A.OP_NAMES)
def test_every_op_and_magnitude_matches_torchvision_pixels(name, h, w):
    """Every magnitude of the op at once: one batched call, per-image magnitudes."""
    x = _images(h, w, n=3)
    mags = A.magnitude_values(name)
    xs = x.repeat(len(mags), 1, 1, 1)
    per = torch.tensor(mags, dtype=torch.float64).repeat_interleave(len(x))
    ours = A.apply_ops(xs, torch.full((len(xs),), A.op_index(name)), per)
    for img, mag, got in zip(xs, per.tolist(), ours):
        assert torch.equal(got, _tv_apply(img, name, mag)), f"{name} magnitude {mag}"


def test_mixed_batch_equals_per_image_torchvision_with_the_same_draws():
    x = _images(24, 24, n=64, seed=1)
    ops, mags = A.sample_params(len(x), torch.Generator().manual_seed(5))
    assert len(torch.unique(ops)) > 8  # per-image draws, not one op for the batch
    ours = A.apply_ops(x, ops, mags)
    ref = torch.stack([_tv_apply(img, A.OP_NAMES[o], float(m))
                       for img, o, m in zip(x, ops.tolist(), mags.tolist())])
    assert torch.equal(ours, ref)


class _Recorder(TrivialAugmentWide):
    """torchvision's transform, recording each (op, magnitude) it draws."""

    def __init__(self):
        super().__init__()
        self.draws = []

    def _apply_image_or_video_transform(self, image, transform_id, magnitude, **kw):
        self.draws.append((transform_id, magnitude))
        return image


def _bin_and_sign(name, mag):
    vals = [float(v) for v in A.OPS[A.op_index(name)].bins(A.NUM_BINS)]
    return vals.index(abs(mag)) if A.OPS[A.op_index(name)].signed else vals.index(mag), mag < 0


def _counts(draws):
    """Op frequencies, magnitude-bin frequencies and sign frequencies."""
    ops = [0] * len(A.OPS)
    bins = [0] * A.NUM_BINS
    signs = [0, 0]
    for name, mag in draws:
        ops[A.op_index(name)] += 1
        if A.OPS[A.op_index(name)].bins is not None:
            b, neg = _bin_and_sign(name, mag)
            bins[b] += 1
            if A.OPS[A.op_index(name)].signed:
                signs[int(neg)] += 1
    return ops, bins, signs


def test_draw_distribution_matches_torchvision_chi_square():
    n = 6000
    rec = _Recorder()
    torch.manual_seed(0)
    img = torch.zeros(3, 4, 4, dtype=torch.uint8)
    for _ in range(n):
        rec(img)
    ops, mags = A.sample_params(n, torch.Generator().manual_seed(0))
    ours = [(A.OP_NAMES[o], m) for o, m in zip(ops.tolist(), mags.tolist())]
    for ref_counts, our_counts in zip(_counts(rec.draws), _counts(ours)):
        p = chi2_contingency([ref_counts, our_counts]).pvalue
        assert p > 1e-3, (ref_counts, our_counts)


def test_chi_square_detects_a_biased_sampler():
    """The distribution test above can fail: a sampler that never draws Identity."""
    ops, mags = A.sample_params(6000, torch.Generator().manual_seed(0))
    ours = [(A.OP_NAMES[max(o, 1)], m) for o, m in zip(ops.tolist(), mags.tolist())]
    ref = [(A.OP_NAMES[o], m) for o, m in zip(*A.sample_params(6000, torch.Generator()
                                                                .manual_seed(1)))]
    assert chi2_contingency([_counts(ref)[0], _counts(ours)[0]]).pvalue < 1e-6


@pytest.mark.parametrize("mode", sorted(A.MODES))
def test_modes_are_reproducible_from_the_generator(mode):
    x = _images(16, 16, n=8)
    a = A.augment_batch(x, torch.Generator().manual_seed(3), mode)
    b = A.augment_batch(x, torch.Generator().manual_seed(3), mode)
    c = A.augment_batch(x, torch.Generator().manual_seed(4), mode)
    assert a.dtype == torch.uint8 and a.shape == x.shape
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_per_image_mode_leaves_the_global_rng_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    A.augment_batch(_images(8, 8), torch.Generator().manual_seed(0), "per_image")
    assert torch.equal(torch.rand(3), expected)


def test_unknown_mode_is_a_one_line_error():
    with pytest.raises(BenchError, match="unknown augmentation mode 'fast'.*batched"):
        A.augment_batch(_images(8, 8), torch.Generator(), "fast")


def test_config_validation_names_every_augmentation_mode():
    """core.config validates augment_mode without importing this module: its
    list must be exactly the implementations registered here."""
    from bench.core.config import AUGMENT_MODES

    assert sorted(AUGMENT_MODES) == sorted(A.MODES)
