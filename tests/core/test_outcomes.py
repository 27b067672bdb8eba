"""Outcomes and failure rows: one typed constructor each, a closed set of statuses."""
import pytest

from bench.core.errors import BenchError
from bench.core.outcomes import FAILURE_COLUMNS, Failure, Outcome


def test_a_failure_row_has_the_failed_runs_csv_columns_in_order():
    row = Failure("damaged", "toy", "resnet50", "sl1h", "abc123", 3, "damaged: x", "/r/p").to_row()
    assert list(row) == ["dataset", "backbone", "method", "seed", "reason", "last_step", "path",
                         "config_hash"] == list(FAILURE_COLUMNS)
    assert row == {"dataset": "toy", "backbone": "resnet50", "method": "sl1h", "seed": 3,
                   "reason": "damaged: x", "last_step": "", "path": "/r/p",
                   "config_hash": "abc123"}


def test_a_failure_kind_outside_the_set_is_one_line():
    with pytest.raises(BenchError, match="failure kind 'oops': not one of failed, not-done, "
                                         "damaged, incomplete, interrupted"):
        Failure("oops", "toy", "r", "m", "h", 0, "why", "p")


class _Spec:
    label, record = "toy/r/m/h/seed0", "/res/toy/r/m/h/seed0"


def test_an_outcome_keeps_a_reason_only_where_the_sweep_reports_one():
    skipped = Outcome.of(_Spec, "skipped", pid=7)
    assert skipped.to_dict() == {"label": _Spec.label, "record": _Spec.record, "pid": 7,
                                 "status": "skipped"}
    failed = skipped.but(status="failed", reason="boom", last_step=3, end=1.5)
    assert failed.to_dict() == {**skipped.to_dict(), "status": "failed", "reason": "boom",
                                "last_step": 3, "end": 1.5}
    assert Outcome.from_dict(failed.to_dict()) == failed
    busy = Outcome.of(_Spec, "busy", reason="being trained by pid 1").to_dict()
    assert busy["reason"] == "being trained by pid 1" and "last_step" not in busy


def test_an_outcome_status_outside_the_set_is_one_line():
    with pytest.raises(BenchError, match="run status 'lost': not one of done, skipped, failed, "
                                         "busy, running"):
        Outcome.from_dict({"label": "x", "record": "y", "status": "lost"})
