"""benchmarks/e2e_slice.py (issue 47's end-to-end slice): its synthetic set is
read by the PathMNIST adapter as the real file is, and its projection is
bench.speed.cells' arithmetic for 8 one-epoch runs. The GPU check runs it
(benchmarks/gpu_check.sh, step `slice`)."""
import numpy as np
import pytest

from bench.datasets.medmnist import read_npz
from bench.speed import cells
from scriptutil import load_script


def _script():
    return load_script("e2e_slice")


def test_the_synthetic_set_has_pathmnist_npz_format(tmp_path):
    root = _script().write_npz(tmp_path, 20, 5, 7)
    splits = read_npz(root / "pathmnist.npz", "pathmnist")
    assert {s: v[0].shape for s, v in splits.items()} == {
        "train": (20, 28, 28, 3), "val": (5, 28, 28, 3), "test": (7, 28, 28, 3)}
    assert splits["train"][0].dtype == np.uint8 and splits["train"][1].max() < 9


def test_the_slice_projection_is_eight_one_epoch_runs(monkeypatch):
    mod = _script()
    count = {"ops": 1000, "conv": 1e12, "mm": 0.0, "eval_conv": 1e9, "eval_mm": 0.0}
    monkeypatch.setattr(mod.stepcount, "count_step", lambda *key: count)
    shape = cells.DataShape("pathmnist", 9, 28, 800, 10, 20)  # 100 steps an epoch
    # ResNet50 28 px is measured: 1.29 ms a step; u from the same count at 224 px
    u = cells.compute_ms(1e12, 0.0, "released") / 5.19
    ev = cells.compute_ms(1e9, 0.0, "released", u)
    stage = 0.5
    # 8 runs x (100 x (1.29 + 0.5) ms + (2 x 10 val + 20 test) x ev ms)
    want = 8 * (100 * (1.29 + stage) + 40 * ev) / 1e3
    assert mod.projected_s("resnet50", shape, "released", stage) == pytest.approx(want)
