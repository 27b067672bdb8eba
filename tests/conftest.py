"""Shared fixtures: tiny, fast settings so the suite stays well under budget."""
import os

import pytest
import torch

# Tests run on CPU with few threads, as CI does.
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for modules that time or fuse small models: on a shared
    2-core machine two threads per process oversubscribe the cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def digits_subset(n_train: int, n_val: int, n_test: int, size: int = 12):
    """The digits bundle cut to a few images per split: a run takes about a second."""
    from bench.datasets import load_dataset

    bundle = load_dataset("digits", image_size=size)
    for name, n in (("train", n_train), ("val", n_val), ("test", n_test)):
        split = bundle.split(name)
        split.images, split.labels = split.images[:n], split.labels[:n]
    return bundle


@pytest.fixture(scope="module")
def tiny():
    return digits_subset(48, 40, 40)


@pytest.fixture(scope="module")
def tiny_digits():
    return digits_subset(96, 60, 60)
