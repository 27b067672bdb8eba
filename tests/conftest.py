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


# The modules that take minutes (a script's dry run, a live Slurm cluster, sweeps
# killed mid-run, a walkthrough to a compiled PDF), slowest first. ./test.sh's two
# workers take whole modules in collection order (--dist loadscope
# --no-loadscope-reorder): a long module handed out last runs alone at the end.
SLOW_FIRST = ("sweep/test_slurm_live.py", "speed/test_gpu_check_script.py",
              "core/test_records.py", "docs/test_methods_walkthrough.py",
              "sweep/test_interrupt.py", "sweep/test_fuse_methods.py",
              "train/test_backbones.py", "sweep/test_fuse_sweep.py",
              "sweep/test_inline_executor.py", "methods/test_methods.py",
              "cli/test_plugins_cli.py")


def pytest_collection_modifyitems(config, items):
    """Under xdist only (a worker's collection): SLOW_FIRST's modules first, the
    rest in their order; a plain pytest run keeps the collection order."""
    if not hasattr(config, "workerinput"):
        return

    def rank(item) -> int:
        path = item.nodeid.split("::")[0].removeprefix("tests/")
        return SLOW_FIRST.index(path) if path in SLOW_FIRST else len(SLOW_FIRST)

    items.sort(key=rank)  # stable: each module's own order is kept
