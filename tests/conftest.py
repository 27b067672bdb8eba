"""Shared fixtures: tiny, fast settings so the suite stays well under budget."""
import os

import pytest

# Tests run on CPU with few threads, as CI does.
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

TINY = ["--profile", "quick", "--set", "cycles=1", "--set", "epochs_per_cycle=1",
        "--set", "image_size=16", "--no-progress"]


@pytest.fixture
def tiny_args():
    return list(TINY)
