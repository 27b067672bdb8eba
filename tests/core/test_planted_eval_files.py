"""Issue 35's rule for the files issue 33 added: a record's kept weights
(model.safetensors) and its evaluation sets (eval-<set>.npz) are data, never
code. A pickle planted as either, even with a checksum that matches (anyone
who can write the file can rewrite metrics.json or evals.json too), is
refused in one line and creates nothing."""
from __future__ import annotations

import io
import json
import pickle

import numpy as np
import pytest

from bench.core import evalfiles, store, weightsfile
from bench.core.errors import BenchError


class Plant:
    """Unpickling this creates `marker`."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def record_dir(tmp_path, extras=None):
    arrays = {"val_logits": np.zeros((2, 1, 3), np.float32), "val_labels": np.zeros(2, np.int64),
              "test_logits": np.zeros((2, 1, 3), np.float32),
              "test_labels": np.zeros(2, np.int64)}
    return store.write_record(tmp_path / "rec", {"method": "sl1h"}, {"acc": 1.0}, arrays,
                              extras)


def test_the_plant_runs_code_the_unsafe_way(tmp_path):
    marker = tmp_path / "ran"
    pickle.loads(pickle.dumps(Plant(marker)))
    assert marker.exists()


def test_planted_eval_set_with_a_matching_checksum_is_one_line(tmp_path):
    marker = tmp_path / "ran"
    rec = record_dir(tmp_path)
    # np.savez pickles object arrays; write() records the planted file's true sha256
    evalfiles.write(rec, "ood-x", {"logits": np.array([Plant(marker)], dtype=object)}, {})
    assert evalfiles.check(rec) == []  # the checksum alone cannot tell
    with pytest.raises(BenchError) as err:
        evalfiles.load(rec, "ood-x")
    text = str(err.value)
    assert "eval-ood-x.npz" in text and "not a set of plain arrays" in text
    assert "\n" not in text
    assert not marker.exists()


def test_planted_weights_with_a_matching_checksum_is_one_line(tmp_path):
    marker = tmp_path / "ran"
    buf = io.BytesIO()
    pickle.dump(Plant(marker), buf)
    rec = record_dir(tmp_path, {store.WEIGHTS: buf.getvalue()})
    expected = json.loads((rec / "metrics.json").read_text())["files"][store.WEIGHTS]
    with pytest.raises(BenchError) as err:
        weightsfile.load(rec / store.WEIGHTS, expected)
    text = str(err.value)
    assert "model.safetensors" in text and "not a readable safetensors file" in text
    assert "\n" not in text
    assert not marker.exists()
