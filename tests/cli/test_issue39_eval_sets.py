"""Issue 39, points 1, 4 and 5 on the command line: an evaluation set is built
from its record's own data (`bench eval` gives, value for value, the file
`bench run --eval` gave), `bench report --shift` refuses sets of other images
in one cell, and `bench eval` refuses what cannot apply or does not exist in
one line, exit status 2, before anything is built or written."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from bench.cli.main import main
from bench.core import evalfiles, store
from bench.datasets import corruptions as C
from bench.datasets import shift
from bench.train import evaluate
from test_eval_runs import TINY, image_folder, one_line, records

PER_CLASS = "test_per_class=2"  # 20 of digits' 360 test images


@pytest.fixture
def pixelate(tmp_path, monkeypatch):
    """medmnistc's general set cut to pixelate (a build of seconds); the shift
    cache under tmp_path; every process-wide memo cleared, as a new process."""
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    full = C.corruptions
    monkeypatch.setattr(C, "corruptions", lambda dataset, only=None: full(dataset, ("pixelate",)))
    shift._get.cache_clear()
    evaluate._LOADED.clear()
    yield
    shift._get.cache_clear()
    evaluate._LOADED.clear()


def _drop_sets(record_dir) -> None:
    for name in (evalfiles.MANIFEST, "eval-shift.npz"):
        (record_dir / name).unlink()


def test_point1_bench_eval_builds_the_records_own_test_split(pixelate, tmp_path, capsys,
                                                              one_thread):
    ran, later = tmp_path / "ran", tmp_path / "later"
    assert main(["run", *TINY, "--data-opt", PER_CLASS, "--keep-weights", "--eval", "shift",
                 "--results", str(ran)]) == 0
    shutil.copytree(ran, later)
    (rec_later,) = records(later)
    _drop_sets(rec_later.path)
    shift._get.cache_clear()
    evaluate._LOADED.clear()  # as a new process
    assert main(["eval", "--results", str(later), "--eval", "shift", "--no-progress"]) == 0
    (rec_ran,) = records(ran)
    (rec_later,) = records(later)
    assert rec_ran.config["data_options"] == {"test_per_class": "2", "train_per_class": "20"}
    first, again = rec_ran.eval_set("shift"), rec_later.eval_set("shift")
    assert first["logits"].shape == (6, 20, 1, 10)  # the record's 20 test images, not 360
    np.testing.assert_array_equal(first["labels"], rec_ran.predictions["test_labels"])
    assert sorted(first) == sorted(again)
    for name in first:
        np.testing.assert_array_equal(first[name], again[name])
    meta_ran, meta_later = rec_ran.evals["shift"], rec_later.evals["shift"]
    assert meta_ran["test_sha256"] == meta_later["test_sha256"]
    assert meta_ran["set_sha256"] == meta_later["set_sha256"]


class _Record:  # what record_options reads of a record
    def __init__(self, config):
        self.config = config
        self.key = store.RecordKey("digits", "smallcnn", "sl1h", "abc", 0)


def test_point1_older_records_options_come_from_their_data_identity():
    old = _Record({"data": {"source": "sklearn.load_digits", "size": 16, "test_per_class": 5}})
    options = dict(evaluate.record_options(old, (("cache", "/tmp/c"),)))
    assert options["test_per_class"] == "5" and options["cache"] == "/tmp/c"
    assert "size" not in options and "source" not in options
    from bench.core.errors import BenchError
    with pytest.raises(BenchError, match="test_per_class=5"):
        evaluate.record_options(old, (("test_per_class", "7"),))


def test_point1_report_refuses_two_shift_sets_of_other_images_in_one_cell(tmp_path, capsys):
    import evalrecords as E

    root = E.write(tmp_path / "runs", ood=False)
    for seed, digest in zip(E.SEEDS, ("a" * 64, "b" * 64)):
        path = E.record(root, "sl1h", seed)
        arrays = evalfiles.load(path, "shift")
        evalfiles.write(path, "shift", arrays, {"kind": "shift", "set_sha256": digest})
    out = tmp_path / "reports"
    assert main(["report", "--results", str(root), "--out", str(out), "--shift", "--no-plots",
                 "--no-progress"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "other images" in line and str(E.record(root, "sl1h", 0)) in line
    assert str(E.record(root, "sl1h", 1)) in line
    assert not out.exists()


def test_point1_report_sets_aside_a_shift_set_of_another_split(tmp_path, capsys):
    import evalrecords as E

    root = E.write(tmp_path / "runs", ood=False)
    path = E.record(root, "2hml", 1)
    cfg = json.loads((path / "config.json").read_text())
    assert "split_sizes" not in cfg  # tiny records: written with one below
    arrays = evalfiles.load(path, "shift")
    evalfiles.write(path, "shift", arrays, {"kind": "shift", "n": E.N_TEST + 7})
    from bench.core.record import Record
    from bench.report.numbers.cells import Run
    from bench.report.evals.evalsets import usable

    class Sized(Record):
        config = {**cfg, "split_sizes": {"test": E.N_TEST}}

    runs = [Run(Sized(E.record(root, m, s), root), m) for m in E.HEADS for s in E.SEEDS]
    have, notes = usable(runs, "shift")
    assert len(have) == 3 and all(r.path != path for r in have)
    (note,) = notes
    assert str(path) in note and f"built from {E.N_TEST + 7} test images" in note


@pytest.fixture(scope="module")
def digits_kept(tmp_path_factory, one_thread):
    """One tiny digits record with kept weights and no evaluation set."""
    root = tmp_path_factory.mktemp("kept39")
    image_folder(root / "ood", 4, 2)
    assert main(["run", *TINY, "--keep-weights", "--results", str(root / "runs")]) == 0
    return root


def _tree(root) -> dict:
    return {p: p.stat().st_mtime_ns for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("flag,value,field", [("--method", "nosuch", "methods"),
                                              ("--dataset", "nosuch", "datasets"),
                                              ("--backbone", "resnet50", "backbones")])
def test_point5_bench_eval_refuses_a_name_no_record_has(digits_kept, flag, value, field,
                                                         capsys):
    results = digits_kept / "runs"
    before = _tree(digits_kept)
    assert main(["eval", "--results", str(results), "--eval", f"ood:{digits_kept / 'ood'}",
                 flag, value, "--no-progress"]) == 2
    line = one_line(capsys.readouterr().err)
    known = {"--method": "sl1h", "--dataset": "digits", "--backbone": "smallcnn"}[flag]
    assert f"{flag} {value}" in line and field in line and known in line
    assert _tree(digits_kept) == before


def _site_folder(root, classes):
    for c in classes:
        image_folder(root / c, 3, hash(c) % 100)
    return root


@pytest.mark.parametrize("case", ["own dataset", "other classes"])
def test_point4_bench_eval_refuses_a_set_that_cannot_apply_before_building(
        digits_kept, case, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    evaluate._LOADED.clear()
    spec = "ood:digits" if case == "own dataset" else \
        f"site:{_site_folder(tmp_path / 'site', ['cat', 'dog'])}"
    results = digits_kept / "runs"
    before = _tree(digits_kept)
    # shift listed first: the ood/site set is read before any corrupted set is built
    assert main(["eval", "--results", str(results), "--eval", "shift", "--eval", spec,
                 "--no-progress"]) == 2
    line = one_line(capsys.readouterr().err)
    assert spec.split(":")[0] in line and ("own dataset" in line or "cat" in line)
    assert _tree(digits_kept) == before
    assert not (tmp_path / "cache" / "shift").exists()  # no corrupted set built


def test_point4_a_record_that_fails_names_its_reason_on_stderr(digits_kept, tmp_path, capsys):
    results = tmp_path / "runs"
    shutil.copytree(digits_kept / "runs", results)
    (rec,) = records(results)
    weights = rec.path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8] + b"\0" * 8)  # damaged after the run
    ood = image_folder(tmp_path / "ood", 4, 1)
    assert main(["eval", "--results", str(results), "--eval", f"ood:{ood}",
                 "--no-progress"]) == 1
    line = one_line(capsys.readouterr().err)
    assert rec.key.label in line and "damaged" in line and "model.safetensors" in line
