"""The one path from records to report cells (bench.report.numbers.cells): every
number is measure(variant(records)), cached by the records' digests and the
versions of the measure and the variant; the edges of the derived rows
(one-member and empty ensembles, members that disagree, which cells get a
D-Ens row); and issue 31's point 1, one NLL whatever the float type."""
import dataclasses

import numpy as np
import pytest
from sklearn.metrics import log_loss

from bench.calib import measures as M
from bench.core import paper, store
from bench.calib import variants as V
from bench.core.errors import BenchError
from bench.core.record import Record
from bench.report.numbers import aggregate, cells
from bench.report.numbers.cells import Cache, Run


def _record(root, seed, logits, labels, test=None, method="sl1h"):
    z = logits if logits.ndim == 3 else logits[:, None, :]
    arrays = {"val_logits": z, "val_labels": labels, "test_logits": z, "test_labels": labels}
    path = store.record_dir(root, "toy", "bb", method, "abc", seed)
    store.write_record(path, {"method": method, "seed": seed, "heads": z.shape[1]},
                       {"test": test or {}}, arrays)
    return Run(Record(path, root), method)


def test_one_member_ensemble_is_that_run(tmp_path):
    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(30, 4)).astype(np.float32), rng.integers(0, 4, 30)
    run = _record(tmp_path, 0, logits, labels)
    got = cells.entry([run.record], V.DENS, Cache())
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    assert got["info"]["members"] == 1
    assert got["values"]["nll"] == pytest.approx(log_loss(labels, probs, labels=range(4)),
                                                 rel=1e-5)
    assert got["values"]["acc"] == pytest.approx(np.mean(probs.argmax(1) == labels))


def test_empty_and_disagreeing_ensembles_fail_in_one_line(tmp_path):
    with pytest.raises(BenchError, match="^a deep ensemble needs at least 2 sl1h seeds, got 0$"):
        aggregate.ensemble_cell([])
    logits = np.zeros((6, 3), dtype=np.float32)
    a = _record(tmp_path, 0, logits, np.array([0, 1, 2, 0, 1, 2]))
    b = _record(tmp_path, 1, logits, np.array([0, 1, 2, 0, 1, 1]))
    with pytest.raises(BenchError, match="^ensemble members disagree on the test labels$"):
        aggregate.ensemble_cell([a, b])


@pytest.mark.parametrize("method, seeds, want", [
    ("sl1h", 1, False), ("sl1h", 2, True), ("sl1h", 5, True), ("4hml", 5, False),
    ("ls", 2, False)])
def test_only_sl1h_with_two_or_more_seeds_gets_a_dens_row(method, seeds, want):
    assert aggregate.has_ensemble(method, seeds) is want
    assert (paper.ENSEMBLE_OF, paper.DENS, aggregate.MIN_MEMBERS) == ("sl1h", "dens", 2)


def test_ts_rows_are_variants_of_the_same_seeds(tmp_path):
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 3, 20)  # one test split: the members share its labels
    runs = [_record(tmp_path, s, rng.normal(size=(20, 3)).astype(np.float32) * 3, labels)
            for s in (0, 1)]
    built, _ = aggregate.build_cells(runs)
    base, scaled = built[("toy", "bb", "sl1h@ts-base")], built[("toy", "bb", "sl1h+ts")]
    assert (base.variant, scaled.variant) == (V.TS_BASE, V.TS)
    assert (str(base.variant), str(scaled.variant)) == ("ts-base", "ts")
    assert base.seeds == scaled.seeds == (0, 1) and not base.single
    assert len(scaled.extra["temperature"]) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        runs[0].method = "ls"


def test_point1_one_nll_whatever_the_float_type(tmp_path):
    """Issue 31, point 1: logits [[20, 0]], [[0, 20]] with labels [1, 1]
    gave 7.97 on the plain path (float32 probabilities) and 10.00 on the
    ts-base path (float64) for one single-head model. One NLL now: p_y
    clipped to float32's eps on every path, so the plain NLL of a single-head
    model equals its ts-base NLL at T = 1, here and on an over-confident
    100-class case."""
    logits = np.array([[20.0, 0.0], [0.0, 20.0]], np.float32)
    run = _record(tmp_path, 0, logits, np.array([1, 1]))
    plain = cells.entry([run.record], V.PLAIN, Cache())["values"]["nll"]
    base = cells.entry([run.record], V.TS_BASE, Cache())["values"]["nll"]
    eps = np.finfo(np.float32).eps
    assert plain == base == pytest.approx((-np.log(eps) - np.log1p(-eps)) / 2)
    rng = np.random.default_rng(3)
    z = rng.normal(0, 40, (200, 100)).astype(np.float32)
    y = rng.integers(0, 100, 200)
    run = _record(tmp_path, 1, z, y)
    plain = cells.entry([run.record], V.PLAIN, Cache())["values"]["nll"]
    base = cells.entry([run.record], V.TS_BASE, Cache())["values"]["nll"]
    assert plain == pytest.approx(base, abs=1e-6)


def test_an_entry_is_computed_once_and_recomputed_when_a_version_moves(tmp_path, monkeypatch):
    rng = np.random.default_rng(4)
    run = _record(tmp_path, 0, rng.normal(size=(40, 3)).astype(np.float32), rng.integers(0, 3, 40))
    cache = cells.cache_for(tmp_path / "out")
    first = cells.entry([run.record], V.TS, cache)
    cache.save()
    loads = []
    monkeypatch.setattr(V.Variant, "apply", lambda self, p: loads.append(1))
    again = cells.entry([Record(run.path, tmp_path)], V.TS, cells.cache_for(tmp_path / "out"))
    assert again == first and loads == []  # from the cache: no record read, no T fitted
    monkeypatch.undo()
    ece = M.get("ece")
    monkeypatch.setitem(M.MEASURES._entries, "ece",
                        (dataclasses.replace(ece, version=ece.version + 1), ""))
    calls = []
    real = V.Variant.apply
    monkeypatch.setattr(V.Variant, "apply", lambda self, p: calls.append(1) or real(self, p))
    cells.entry([Record(run.path, tmp_path)], V.TS, cells.cache_for(tmp_path / "out"))
    assert calls == [1]  # a newer ECE is recomputed


def test_plain_cells_take_the_trainers_values_at_their_version(tmp_path):
    """The plain variant's stored measures are what the trainer wrote (its
    cache entry); a measure whose version moved on is recomputed."""
    rng = np.random.default_rng(5)
    logits, labels = rng.normal(size=(30, 3)).astype(np.float32), rng.integers(0, 3, 30)
    run = _record(tmp_path, 0, logits, labels, test={"acc": 0.123})
    assert cells.entry([run.record], V.PLAIN, Cache())["values"]["acc"] == 0.123
    fresh = np.mean(logits.argmax(1) == labels)
    rec = Record(run.path, tmp_path)
    rec.metrics["measure_versions"] = {"acc": 0}  # written by an older definition
    assert cells.entry([rec], V.PLAIN, Cache())["values"]["acc"] == pytest.approx(fresh)
