"""bench.speed.cells' per-backbone projection, checked by hand on small inputs."""
import pytest

from bench.core.config import TrainConfig
from bench.speed import cells
from bench.speed.cells import DataShape, data_shapes

# 1e12 conv and 1e12 matmul FLOPs, 1000 ops
COUNT = {"ops": 1000, "conv": 1e12, "mm": 1e12, "eval_conv": 1e9, "eval_mm": 0.0}


def test_compute_time_uses_tf32_convolutions_and_fp32_matmuls_when_released():
    # 1e12 / 494.5e12 s + 1e12 / 67e12 s, in ms
    assert cells.compute_ms(1e12, 1e12, "released") == pytest.approx(
        1e3 / 494.5 + 1e3 / 67.0)
    assert cells.compute_ms(1e12, 1e12, "tf32", u=0.5) == pytest.approx(2 * 2e3 / 494.5)
    assert cells.compute_ms(1e12, 0, "bf16") == pytest.approx(1e3 / 989.0)


def test_projected_ms_is_the_larger_of_kernels_and_compute():
    # kernels: 1000 x 2 us = 2 ms; compute at u=1 (bf16): 2e3/989 = 2.02 ms
    assert cells.projected_ms(COUNT, "bf16", 2.0, 1.0) == pytest.approx(2e3 / 989.0)
    assert cells.projected_ms(COUNT, "bf16", 3.0, 1.0) == pytest.approx(3.0)


def test_a_measured_cell_is_used_at_the_released_precision_and_scaled_at_another():
    strat = cells.Strategy("t", 0.0, {("rn", 8): 10.0})
    u = cells.calibrated_u(COUNT, 10.0)  # compute at full peak / measured
    assert u == pytest.approx((1e3 / 494.5 + 1e3 / 67.0) / 10.0)
    ms, source = cells.step_ms(COUNT, ("rn", 8), "released", strat, u)
    assert ms == 10.0 and source.startswith("measured")
    ms, source = cells.step_ms(COUNT, ("rn", 8), "bf16", strat, u)
    # ratio of bf16 to released compute (kernel time 0): (2/989) / (1/494.5 + 1/67)
    assert ms == pytest.approx(10.0 * (2 / 989) / (1 / 494.5 + 1 / 67))
    assert source.startswith("projected")


def test_run_seconds_on_a_small_dataset():
    shape = DataShape("toy", 2, 8, train=20, val=3, test=5)
    cfg = TrainConfig(cycles=2, epochs_per_cycle=1, batch_size=8)  # 2 steps an epoch, 4 in all
    got = cells.run_seconds(shape, 100.0, 2.0, 4.0, 10.0, cfg)
    # train 4 x 100 ms; staging 4 x 10 ms; eval: (2 + 1) x 3 val images x 2 ms + 5 x 4 ms
    assert got == pytest.approx({"train": 0.4, "stage": 0.04, "eval": 0.038})


def test_released_sizes_per_backbone():
    shapes = data_shapes()
    # 4 train_PMH methods at 224, LS/MbLS/MixUp/DCA at 150, all tested at 224
    assert cells.run_sizes(shapes["kvasir"], "swin_tiny") == {(224, 224): 4, (150, 224): 4}
    assert cells.run_sizes(shapes["pathmnist"], "convnext_tiny") == {(32, 32): 8}
    assert cells.run_sizes(shapes["pathmnist"], "resnet50") == {(28, 28): 8}
