"""benchmarks/compare_records.py: run-by-run comparison of two result folders."""
import numpy as np

from bench.core import store
from scriptutil import load_script


def _script():
    return load_script("compare_records")


def _record(root, method, logits, acc):
    path = store.record_dir(root, "digits", "smallcnn", method, "abc", 0)
    metrics = {"test": {"acc": acc, "ece": 0.1, "nll": 0.5}}
    store.write_record(path, {}, metrics, {"test_logits": np.asarray(logits, np.float32)})


def test_shared_runs_are_compared_and_one_sided_runs_fail(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    _record(a, "sl1h", [[[0.0, 1.0]]], 0.75)
    _record(b, "sl1h", [[[0.0, 1.25]]], 0.5)
    # a record still being written (bench.core.store's hidden sibling) is not a run
    tmp = store.record_dir(a, "digits", "smallcnn", "sl1h", "abc", 0).parent / ".seed1.tmp-1"
    tmp.mkdir()
    (tmp / "metrics.json").write_text('{"test": {}}')
    assert _script().main([str(a), str(b)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "acc 75.00/50.00" in out[0] and "max|dlogit| 2.50e-01" in out[0]
    assert out[-1] == "1 runs in both, 0 in one only"
    _record(b, "ls", [[[0.0, 0.0]]], 0.5)
    assert _script().main([str(a), str(b)]) == 1
    assert "only in" in capsys.readouterr().out
