"""Kept weights (--keep-weights) and evaluation sets stored beside a record:
a reloaded model gives the record's test logits bit for bit, a damaged
weights file is named and never loaded, a set evaluated right after training
equals the same set evaluated later from the kept weights."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bench.core import evalfiles, store
from bench.core.config import PROFILES
from bench.core.errors import BenchError
from bench.core.evalfiles import EvalSpec
from bench.core.record import Record
from bench.datasets.evalsets import EvalData
from bench.methods import create_method
from bench.train.evaluate import evaluate_record, model_for, predict_array, train_config
from bench.train.experiment import make_experiment, run_seed


def _exp(bundle, method_name: str, **changes):
    cfg = dataclasses.replace(PROFILES["quick"], cycles=2, epochs_per_cycle=1,
                              eval_batch_size=16, **changes)
    method = create_method(method_name)
    return make_experiment(bundle, "smallcnn", method, cfg), method


def _ood(bundle) -> EvalData:
    """A stand-in OOD set: the test images upside down and inverted."""
    imgs = np.ascontiguousarray(255 - bundle.test.images[:, ::-1])
    return EvalData(EvalSpec("ood", "flipped"), imgs, None, {"source": "flipped", "n": len(imgs)})


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny, one_thread):
    root = tmp_path_factory.mktemp("kept")
    out = {}
    for name in ("sl1h", "2hml"):
        exp, method = _exp(tiny, name)
        _, path = run_seed(exp, tiny, method, 0, root, device="cpu", progress=False,
                           keep_weights=True, evals=(_ood(tiny),))
        out[name] = Record(path, root)
    exp, method = _exp(tiny, "sl1h", lr=0.02)  # another config: no kept weights
    _, bare = run_seed(exp, tiny, method, 0, root, device="cpu", progress=False)
    out["bare"] = Record(bare, root)
    return root, out, tiny


def test_reloaded_weights_give_the_test_logits_bit_for_bit(trained):
    _, recs, bundle = trained
    for name in ("sl1h", "2hml"):
        rec = recs[name]
        assert rec.has_weights and store.verify(rec.path) is None
        model = model_for(rec)
        logits = predict_array(model, bundle.test.images, train_config(rec), "cpu")
        np.testing.assert_array_equal(logits, rec.predictions["test_logits"])
        assert logits.shape[1] == rec.heads


def test_a_set_stored_after_training_equals_one_from_the_kept_weights(trained, tmp_path):
    _, recs, bundle = trained
    rec = recs["2hml"]
    at_run = rec.eval_set("ood-flipped")
    assert rec.evals["ood-flipped"]["model"] == "trained"
    assert at_run["logits"].shape == (len(bundle.test), 2, 10) and "labels" not in at_run
    evaluate_record(rec, [_ood(bundle)])
    again = Record(rec.path, rec.root)
    np.testing.assert_array_equal(again.eval_set("ood-flipped")["logits"], at_run["logits"])
    assert again.evals["ood-flipped"]["model"].startswith("weights sha256:")
    # the record itself is untouched: same predictions checksum, still intact
    assert again.digest == rec.digest and store.verify(rec.path) is None


def test_a_record_without_kept_weights_is_one_line(trained):
    _, recs, _ = trained
    assert not recs["bare"].has_weights
    with pytest.raises(BenchError, match="no kept weights"):
        model_for(recs["bare"])


def test_a_damaged_weights_file_is_named_and_never_loaded(trained, tmp_path, monkeypatch):
    import shutil

    _, recs, _ = trained
    copy = tmp_path / "r" / recs["sl1h"].key.label
    shutil.copytree(recs["sl1h"].path, copy)
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0xFF  # one tensor byte flipped: same size, other bytes
    weights.write_bytes(bytes(data))
    assert store.verify(copy) == "model.safetensors: checksum mismatch"
    import safetensors.torch

    def never(*a, **k):
        raise AssertionError("a damaged weights file was read")

    monkeypatch.setattr(safetensors.torch, "load", never)
    with pytest.raises(BenchError, match="checksum mismatch; the weights are not loaded"):
        Record(copy, tmp_path / "r").load_weights()
    weights.unlink()
    assert store.verify(copy) == "model.safetensors: missing"


def test_eval_files_are_checked_and_never_unpickled(trained, tmp_path):
    import shutil

    _, recs, _ = trained
    copy = tmp_path / "r" / recs["sl1h"].key.label
    shutil.copytree(recs["sl1h"].path, copy)
    assert evalfiles.check(copy) == []
    target = copy / evalfiles.file_name("ood-flipped")
    # a planted pickle of the same size in place of the set's file
    import pickle

    payload = pickle.dumps({"x": 1})
    target.write_bytes(payload + b"\0" * (target.stat().st_size - len(payload)))
    assert evalfiles.check(copy) == [("ood-flipped", "eval-ood-flipped.npz: checksum mismatch")]
    with pytest.raises(BenchError, match="checksum mismatch"):
        Record(copy, tmp_path / "r").eval_set("ood-flipped")
    # an edited manifest is named as such
    (copy / evalfiles.MANIFEST).write_text((copy / evalfiles.MANIFEST).read_text()
                                          .replace('"n": ', '"n": 1'))
    assert evalfiles.check(copy)[0][1].endswith("digest mismatch)")


def test_eval_specs_parse_and_refuse():
    assert [s.name for s in evalfiles.parse_all(["shift", "ood:kvasir,site:/d/Site B/"])] \
        == ["shift", "ood-kvasir", "site-site-b"]
    for bad, why in [("shif", "unknown kind"), ("ood", "needs a source"),
                     ("shift:x", "takes no source")]:
        with pytest.raises(BenchError, match=why):
            evalfiles.parse_all([bad])
    with pytest.raises(BenchError, match="both be stored"):
        evalfiles.parse_all(["ood:/a/x", "ood:/b/x"])


def test_fused_members_keep_their_own_weights(tiny, tmp_path, one_thread):
    from bench.train.groups import run_members

    exp, method = _exp(tiny, "sl1h")
    done = run_members([(exp, method, 0), (exp, method, 1)], tiny, tmp_path, device="cpu",
                       progress=False, keep_weights=True, evals=(_ood(tiny),))
    logits = []
    for _, path in done:
        rec = Record(path, tmp_path)
        model = model_for(rec)
        mine = predict_array(model, tiny.test.images, train_config(rec), "cpu")
        # the fused group predicted under vmap: equal up to float reassociation
        np.testing.assert_allclose(mine, rec.predictions["test_logits"], atol=1e-4)
        np.testing.assert_array_equal(rec.eval_set("ood-flipped")["logits"],
                                      predict_array(model, _ood(tiny).images,
                                                    train_config(rec), "cpu"))
        logits.append(mine)
    assert not np.allclose(logits[0], logits[1])  # two members, two models
