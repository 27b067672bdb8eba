"""Edges of the derived rows (bench.report.derived) the independent tests in
tests/core/test_ts_ensemble_independent.py do not reach: one-member and empty
ensembles, members that disagree, which groups get a D-Ens row."""
import numpy as np
import pytest
from sklearn.metrics import log_loss

from bench.core import paper
from bench.core.errors import BenchError
from bench.core.store import write_record
from bench.report import derived


def _record(path, logits, labels):
    arrays = {"val_logits": logits[:, None, :], "val_labels": labels,
              "test_logits": logits[:, None, :], "test_labels": labels}
    return write_record(path, {"method": "sl1h"}, {"test": {}}, arrays)


def test_one_member_ensemble_is_that_run(tmp_path):
    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(30, 4)).astype(np.float32), rng.integers(0, 4, 30)
    got = derived.deep_ensemble([_record(tmp_path / "a", logits, labels)])
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    assert got["members"] == 1
    assert got["test"]["nll"] == pytest.approx(log_loss(labels, probs, labels=range(4)),
                                               rel=1e-5)
    assert got["test"]["acc"] == pytest.approx(np.mean(probs.argmax(1) == labels))


def test_empty_and_disagreeing_ensembles_fail_in_one_line(tmp_path):
    with pytest.raises(BenchError, match="^deep ensemble needs at least one sl1h run record$"):
        derived.deep_ensemble([])
    logits = np.zeros((6, 3), dtype=np.float32)
    a = _record(tmp_path / "a", logits, np.array([0, 1, 2, 0, 1, 2]))
    b = _record(tmp_path / "b", logits, np.array([0, 1, 2, 0, 1, 1]))
    with pytest.raises(BenchError, match=r"^ensemble members disagree on the val labels: \["):
        derived.deep_ensemble([a, b])


@pytest.mark.parametrize("method, seeds, want", [
    ("sl1h", 1, False), ("sl1h", 2, True), ("sl1h", 5, True), ("4hml", 5, False),
    ("ls", 2, False)])
def test_only_sl1h_with_two_or_more_seeds_gets_a_dens_row(method, seeds, want):
    assert derived.has_ensemble(method, seeds) is want
    assert (paper.ENSEMBLE_OF, paper.DENS, derived.MIN_MEMBERS) == ("sl1h", "dens", 2)


def test_ts_rows_are_variants_of_the_same_seeds(tmp_path):
    import dataclasses

    from bench.report import aggregate

    rng = np.random.default_rng(2)
    runs = []
    for seed in (0, 1):
        logits = rng.normal(size=(20, 3)).astype(np.float32) * 3
        path = _record(tmp_path / f"s{seed}", logits, rng.integers(0, 3, 20))
        runs.append(aggregate.Run("toy", "bb", "sl1h", "abc", seed, 1, {}, {}, path))
    base, scaled = aggregate.ts_cells(runs)
    assert (base.key, base.variant, scaled.key, scaled.variant) == (
        "sl1h@ts-base", "ts-base", "sl1h+ts", "ts")
    assert base.seeds == scaled.seeds == (0, 1) and not base.single
    assert len(scaled.extra["temperature"]) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        runs[0].seed = 5
