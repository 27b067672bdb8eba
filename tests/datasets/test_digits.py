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


def test_no_top_level_datasets_or_methods_module(tmp_path):
    code = ("import importlib.util as u, bench.methods, bench.datasets;"
            "print(u.find_spec('methods'), u.find_spec('datasets') is None or "
            "'site-packages' in (u.find_spec('datasets').origin or ''))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, check=True)
    assert out.stdout.split() == ["None", "True"]
