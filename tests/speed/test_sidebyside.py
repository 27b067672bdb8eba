"""bench.speed.sidebyside: K processes time the same gpuplan job at once (CPU here)."""
import dataclasses

import pytest

from bench.speed import sidebyside as S
from bench.core.errors import BenchError


def _job(members=2):
    return S.make_job("pathmnist", "smallcnn", 4, members, "bf16", image_size=12)


def test_the_job_is_gpuplans_cell():
    one, group = _job(1), _job(5)
    assert (one.path, one.members, group.path, group.members) == ("single", 1, "fused", 5)
    assert one.cfg.bf16 and group.methods == ("4hml",) * 5 and group.size == 12
    with pytest.raises(BenchError, match="unknown variant 'fp16'"):
        S.make_job("pathmnist", "smallcnn", 4, 1, "fp16")
    with pytest.raises(BenchError, match="unknown datasets 'mnist'"):
        S.make_job("mnist", "smallcnn", 4, 1, "bf16")


def test_two_processes_time_together_and_throughputs_add_up():
    job = _job(2)
    row = S.run_side_by_side(job, "cpu", 2, steps=3, warmup=1, timeout_s=600)  # any speed
    assert row["processes"] == 2 and len(row["ms_step"]) == 2 and min(row["ms_step"]) > 0
    by_hand = sum(1000.0 * 2 * 8 / t for t in row["ms_step"])  # 2 members x batch 8 a step
    assert row["images_per_s"] == pytest.approx(by_hand)


def test_a_failing_process_is_reported_and_nobody_waits_forever():
    bad = dataclasses.replace(_job(1), backbone="no-such-backbone")
    row = S.run_side_by_side(bad, "cpu", 2, steps=2, warmup=1, timeout_s=600)
    assert row["processes"] == 2 and "no-such-backbone" in row["error"]


def test_table_ratios_are_against_one_process():
    rows = [{"processes": 1, "ms_step": [10.0], "images_per_s": 800.0},
            {"processes": 2, "ms_step": [12.0, 14.0], "images_per_s": 1600.0},
            {"processes": 3, "error": "RuntimeError: CUDA out of memory"}]
    lines = S.table(rows).splitlines()
    assert "1.00x" in lines[2] and "2.00x" in lines[3] and "out of memory" in lines[4]


def test_bad_process_list_is_one_line(capsys):
    assert S.main(["--device", "cpu", "--processes", "0,2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--processes 0,2" in err[0]
