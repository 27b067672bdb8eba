"""bench.sweep.evalrun.summary_text, `bench eval`'s closing table: a row per
record and set with its rate, then the count of each status."""
from __future__ import annotations

from bench.sweep.evalrun import (DAMAGED, EVALUATED, FAILED, SKIPPED, STORED, EvalRow, failed,
                                 nothing_evaluated, summary_text)

ROWS = [EvalRow("a/s0", "shift", EVALUATED, 300, 2.0),
        EvalRow("a/s0", "ood-x", EVALUATED, 50, 0.25),
        EvalRow("a/s1", "shift", DAMAGED, why="config.json: missing"),
        EvalRow("a/s2", "shift", SKIPPED)]


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.split("|")[1:-1]]


def test_each_row_says_images_seconds_rate_and_status():
    lines = summary_text(ROWS).splitlines()
    assert cells(lines[0]) == ["record", "set", "images", "seconds", "images/s", "status"]
    assert cells(lines[2]) == ["a/s0", "shift", "300", "2", "150", EVALUATED]  # 300 / 2.0
    assert cells(lines[3]) == ["a/s0", "ood-x", "50", "0.25", "200", EVALUATED]  # 50 / 0.25
    assert cells(lines[4]) == ["a/s1", "shift", "", "", "", f"{DAMAGED}: config.json: missing"]
    assert lines[-1] == f"3 record(s): 2 {EVALUATED}, 1 {DAMAGED}, 1 {SKIPPED}"


def test_no_row_is_one_line():
    assert summary_text([]) == "0 record(s): no complete record matched"


def test_failed_rows_are_the_damaged_and_failed_ones():
    rows = ROWS + [EvalRow("a/s3", "shift", FAILED, why="no model")]
    assert failed(rows) == [ROWS[2], rows[-1]]


def test_nothing_evaluated_is_said_only_when_no_set_was_evaluated_or_stored():
    assert nothing_evaluated(ROWS) == ""  # two sets evaluated
    assert nothing_evaluated([EvalRow("a/s0", "shift", STORED)]) == ""  # already there
    assert "no complete record matched" in nothing_evaluated([])
    bare = [EvalRow("a/s2", "shift", SKIPPED), EvalRow("a/s2", "ood-x", SKIPPED),
            EvalRow("a/s3", "shift", DAMAGED)]
    line = nothing_evaluated(bare)
    assert "none of 2 record(s)" in line and "--keep-weights" in line
