"""The report's failure rows: one typed constructor, a closed set of kinds."""
import pytest

from bench.core.errors import BenchError
from bench.core.outcomes import FAILURE_COLUMNS, Failure


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
