"""bench.core.recordcheck, the library under `bench check`: which records and
evaluation files under a results root are damaged, and the lines it prints."""
from __future__ import annotations

import pytest

import evalrecords
from bench.core.errors import BenchError
from bench.core.recordcheck import check_results


def test_intact_records_are_counted_and_nothing_is_named(tmp_path):
    evalrecords.write(tmp_path)
    found = check_results(tmp_path)
    n = len(evalrecords.HEADS) * len(evalrecords.SEEDS)  # every record the helper wrote
    assert (found.records, found.damaged, found.eval_files, found.bad) == (n, [], [], False)
    assert found.lines() == [f"{n} record(s) under {tmp_path}: {n} intact, 0 damaged"]


def test_a_damaged_record_and_a_damaged_set_are_each_named(tmp_path):
    evalrecords.write(tmp_path)
    broken = evalrecords.record(tmp_path, "sl1h", 0)
    (broken / "config.json").unlink()
    cut = evalrecords.record(tmp_path, "2hml", 1) / "eval-ood-kvasir.npz"
    cut.write_bytes(cut.read_bytes()[:-10])
    found = check_results(tmp_path)
    assert found.bad and found.damaged == [("toy/resnet50/sl1h/abc123/seed0",
                                            "config.json: missing")]
    (label, name, why), = found.eval_files
    assert (label, name) == ("toy/resnet50/2hml/abc123/seed1", "eval-ood-kvasir.npz")
    assert "size mismatch" in why
    lines = found.lines()
    assert lines[1].startswith("4 record(s) under")
    assert "3 intact, 1 damaged; `bench run`" in lines[1]
    assert "| toy/resnet50/sl1h/abc123/seed0 | config.json: missing |" in lines[0]
    assert lines[3].startswith("1 damaged evaluation file(s)")


def test_a_results_root_that_is_not_a_folder_is_one_line(tmp_path):
    with pytest.raises(BenchError, match="does not exist"):
        check_results(tmp_path / "nowhere")
