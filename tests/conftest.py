"""Shared fixtures: tiny, fast settings so the suite stays well under budget."""
import os

import pytest
import torch

# Tests run on CPU with few threads, as CI does.
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

TINY = ["--profile", "quick", "--set", "cycles=1", "--set", "epochs_per_cycle=1",
        "--set", "image_size=16", "--no-progress"]


@pytest.fixture
def tiny_args():
    return list(TINY)


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for modules that time or fuse small models: on a shared
    2-core machine two threads per process oversubscribe the cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
