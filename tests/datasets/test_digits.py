"""The offline demo dataset and the package layout."""
import subprocess
import sys

import numpy as np

from bench.datasets import load_dataset


def test_digits_split_is_fixed_stratified_rgb():
    a, b = load_dataset("digits"), load_dataset("digits")
    sizes = [len(a.split(s)) for s in ("train", "val", "test")]
    assert sum(sizes) == 1797 and sizes == [1077, 360, 360]
    for s in ("train", "val", "test"):
        split = a.split(s)
        assert split.images.shape[1:] == (32, 32, 3) and split.images.dtype == np.uint8
        np.testing.assert_array_equal(split.labels, b.split(s).labels)  # no seed dependence
        np.testing.assert_array_equal(split.images[..., 0], split.images[..., 2])  # grey->RGB
        counts = np.bincount(split.labels, minlength=10)
        assert counts.max() - counts.min() <= max(3, len(split) // 50)  # stratified
    assert a.num_classes == 10 and a.train.images.max() == 255


def test_image_size_option():
    assert load_dataset("digits", image_size=20).train.images.shape[1:] == (20, 20, 3)


def test_label_noise_flips_a_share_of_training_labels_only():
    from sklearn.datasets import load_digits

    clean = load_dataset("digits")
    for rate in (0.1, 0.3, 0.6):
        noisy = load_dataset("digits", label_noise=str(rate))  # --data-opt gives strings
        flipped = noisy.train.labels != clean.train.labels
        # binomial(1077, rate): within 4 standard deviations
        assert abs(flipped.mean() - rate) < 4 * np.sqrt(rate * (1 - rate) / 1077)
        assert set(noisy.train.labels[flipped]) <= set(range(10))
        # every class is a target of the flips (uniform over the other nine)
        assert len(set(zip(clean.train.labels[flipped], noisy.train.labels[flipped]))) > 45
        np.testing.assert_array_equal(noisy.train.images, clean.train.images)
        for split in ("val", "test"):
            np.testing.assert_array_equal(noisy.split(split).labels, clean.split(split).labels)
        assert noisy.identity["label_noise"] == rate and "label_noise" not in clean.identity
        again = load_dataset("digits", label_noise=rate)  # fixed: not the run seed's
        np.testing.assert_array_equal(again.train.labels, noisy.train.labels)
    assert len(load_digits().target) == 1797


def test_train_per_class_keeps_n_training_images_of_each_class():
    clean = load_dataset("digits")
    small = load_dataset("digits", train_per_class="20")
    assert np.bincount(small.train.labels).tolist() == [20] * 10
    # a subset of the full training split (images matched by content), val/test untouched
    full = {img.tobytes(): y for img, y in zip(clean.train.images, clean.train.labels)}
    assert all(full[img.tobytes()] == y for img, y in zip(small.train.images, small.train.labels))
    assert len({img.tobytes() for img in small.train.images}) >= 195  # few duplicate digits
    for split in ("val", "test"):
        np.testing.assert_array_equal(small.split(split).images, clean.split(split).images)
    assert small.identity["train_per_class"] == 20
    both = load_dataset("digits", train_per_class=20, label_noise=0.5)
    np.testing.assert_array_equal(both.train.images, small.train.images)
    assert 0.3 < (both.train.labels != small.train.labels).mean() < 0.7
    assert np.bincount(load_dataset("digits", train_per_class=500).train.labels).min() >= 100


def test_label_noise_and_unknown_options_fail_in_one_line():
    import pytest

    from bench.core.errors import BenchError

    for bad in ("1", "-0.1", "nan", "lots"):
        with pytest.raises(BenchError, match=rf"label_noise={bad}: expected a share 0 <= P < 1"):
            load_dataset("digits", label_noise=bad)
    for bad in ("0", "2.5", "x"):
        with pytest.raises(BenchError, match=rf"train_per_class={bad}: expected a whole number"):
            load_dataset("digits", train_per_class=bad)
    with pytest.raises(BenchError, match=r"label_nois.*label_noise"):
        load_dataset("digits", label_nois="0.3")


def test_no_top_level_datasets_or_methods_module(tmp_path):
    code = ("import importlib.util as u, bench.methods, bench.datasets;"
            "print(u.find_spec('methods'), u.find_spec('datasets') is None or "
            "'site-packages' in (u.find_spec('datasets').origin or ''))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, check=True)
    assert out.stdout.split() == ["None", "True"]
