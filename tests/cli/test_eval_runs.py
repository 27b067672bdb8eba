"""Issue 33 on the command line: `bench run --keep-weights --eval`, `bench eval`,
`bench data shift` and `bench check` on tiny digits runs.

The sets' logits are checked against each other along two routes (the model
in memory right after training, and the kept weights read back later by
`bench eval`), the record's own files by their bytes and mtimes, and the
stored arrays by their shapes; never by the commands' own summaries alone."""
from __future__ import annotations

import hashlib
import json
import shutil
import sys

import numpy as np
import pytest
from PIL import Image

from bench.cli.main import main
from bench.core import store
from bench.core.record import Record
from bench.sweep.grid import RunSpec

TINY = ["--dataset", "digits", "--backbone", "smallcnn", "--profile", "quick", "--seeds", "1",
        "--set", "cycles=1", "--set", "epochs_per_cycle=1", "--set", "image_size=16",
        "--set", "batch_size=64", "--data-opt", "train_per_class=20", "--no-progress",
        "--executor", "inline"]  # 3 steps a run


def image_folder(path, n: int, seed: int):
    """n random RGB images (20 px PNGs) as an OOD folder."""
    path.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (20, 20, 3), dtype=np.uint8)).save(path / f"{i}.png")
    return path


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def records(results) -> list[Record]:
    return [Record(k.path(results), results) for k in store.iter_seed_dirs(results)]


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(scope="module")
def kept(tmp_path_factory, one_thread):
    """sl1h and 2hml trained with kept weights and one OOD set; an sl1h of
    another config (lr) without kept weights."""
    root = tmp_path_factory.mktemp("evalruns")
    ood = image_folder(root / "noise", 12, 0)
    results = root / "runs"
    assert main(["run", *TINY, "--method", "sl1h,2hml", "--results", str(results),
                 "--keep-weights", "--eval", f"ood:{ood}"]) == 0
    assert main(["run", *TINY, "--method", "sl1h", "--set", "lr=0.02",
                 "--results", str(results)]) == 0
    return root, results, ood


def test_kept_records_hold_weights_and_the_set(kept):
    _, results, _ = kept
    recs = records(results)
    assert len(recs) == 3
    with_weights = [r for r in recs if r.has_weights]
    assert sorted(r.method for r in with_weights) == ["2hml", "sl1h"]
    for r in with_weights:
        assert (r.path / "model.safetensors").is_file() and store.verify(r.path) is None
        logits = r.eval_set("ood-noise")["logits"]
        assert logits.shape == (12, r.heads, 10) and np.isfinite(logits).all()
    bare = next(r for r in recs if not r.has_weights)
    assert not (bare.path / "model.safetensors").exists() and bare.evals == {}


def test_bench_eval_adds_a_set_without_retraining(kept, capsys):
    root, results, ood = kept
    # the second folder repeats the first one's images 0..5: their logits from
    # the kept weights must equal those the trained model gave right after training
    again = root / "again"
    again.mkdir()
    for i in range(6):
        shutil.copy(ood / f"{i}.png", again / f"{i}.png")
    recs = [r for r in records(results) if r.has_weights]
    before = {r.path: {n: (sha(r.path / n), (r.path / n).stat().st_mtime_ns)
                       for n in ("metrics.json", "predictions.npz", "config.json",
                                 "model.safetensors")} for r in recs}
    capsys.readouterr()
    assert main(["eval", "--results", str(results), "--eval", f"ood:{again}",
                 "--eval", f"ood:{ood}", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "2 evaluated" in out and "2 already stored" in out and "2 no kept weights" in out
    assert "trained without --keep-weights" in out  # the bare record is listed, not fatal
    for r in recs:
        fresh = Record(r.path, results)
        new = fresh.eval_set("ood-again")["logits"]
        old = fresh.eval_set("ood-noise")["logits"]
        # file names sort 0, 1, 10, 11, 2, ...: compare image by image
        order = sorted(range(12), key=str)
        first = {name: old[k] for k, name in enumerate(order)}
        for k, name in enumerate(sorted(range(6), key=str)):
            np.testing.assert_allclose(new[k], first[name], rtol=1e-5, atol=1e-5)
        assert fresh.evals["ood-again"]["model"].startswith("weights sha256:")
        for n, (digest, mtime) in before[r.path].items():
            assert sha(r.path / n) == digest and (r.path / n).stat().st_mtime_ns == mtime, n
    # a second call finds everything stored and writes nothing
    manifests = {r.path: sha(r.path / "evals.json") for r in recs}
    assert main(["eval", "--results", str(results), "--eval", f"ood:{again}",
                 "--no-progress"]) == 0
    assert "2 already stored" in capsys.readouterr().out
    assert all(sha(p / "evals.json") == d for p, d in manifests.items())


def test_run_eval_on_finished_records(kept, capsys, tmp_path):
    _, results, _ = kept
    third = image_folder(tmp_path / "third", 5, 3)
    recs = records(results)
    metrics = {r.path: sha(r.path / "metrics.json") for r in recs}
    capsys.readouterr()
    assert main(["run", *TINY, "--method", "sl1h,2hml", "--results", str(results),
                 "--eval", f"ood:{third}"]) == 0
    out = capsys.readouterr().out
    assert "0 trained, 2 already done" in out
    assert out.count("evaluated digits/smallcnn/") == 2
    assert "--eval: ood-third on 2 of 2 complete record(s)" in out
    assert main(["run", *TINY, "--method", "sl1h", "--set", "lr=0.02", "--results",
                 str(results), "--eval", f"ood:{third}"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "no kept weights" in line]
    assert len(lines) == 1 and "--force --keep-weights" in lines[0]
    assert "--eval: ood-third on 0 of 1 complete record(s)" in out
    for r in recs:
        assert sha(r.path / "metrics.json") == metrics[r.path]  # nothing retrained
        assert ("ood-third" in Record(r.path, results).evals) == r.has_weights


def test_damaged_weights_are_named_and_never_loaded(kept, tmp_path, capsys, monkeypatch):
    _, results, _ = kept
    copy = tmp_path / "runs"
    shutil.copytree(results, copy)
    rec = next(r for r in records(copy) if r.method == "2hml")
    weights = rec.path / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0xFF
    weights.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["check", "--results", str(copy)]) == 1
    out = capsys.readouterr().out
    assert "model.safetensors: checksum mismatch" in out and rec.key.label in out

    import safetensors.torch

    def never(*a, **k):
        raise AssertionError("damaged weights were read")

    monkeypatch.setattr(safetensors.torch, "load", never)
    monkeypatch.setattr(safetensors.torch, "load_file", never)
    evals_before = sha(rec.path / "evals.json")
    assert main(["eval", "--results", str(copy), "--eval", "ood:digits", "--method", "2hml",
                 "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "damaged: model.safetensors: checksum mismatch" in out
    assert sha(rec.path / "evals.json") == evals_before


def test_a_damaged_eval_file_is_named_by_check(kept, tmp_path, capsys):
    _, results, _ = kept
    copy = tmp_path / "runs"
    shutil.copytree(results, copy)
    rec = next(r for r in records(copy) if r.method == "sl1h" and r.has_weights)
    path = rec.path / "eval-ood-noise.npz"
    path.write_bytes(path.read_bytes()[:-10])
    capsys.readouterr()
    assert main(["check", "--results", str(copy)]) == 1
    out = capsys.readouterr().out
    assert "3 intact, 0 damaged" in out  # the record itself is whole
    assert "eval-ood-noise.npz" in out and rec.key.label in out


@pytest.mark.parametrize("value, words", [
    ("nope", "unknown kind 'nope'"),
    ("shift:x", "shift takes no source"),
    ("ood:", "ood needs a source"),
    ("ood:no_such_set", "'no_such_set' is neither a dataset"),
    ("site:/no/such/folder", "'/no/such/folder' is neither a dataset"),
])
def test_bad_eval_values_are_one_line_and_write_nothing(value, words, tmp_path, capsys):
    results = tmp_path / "runs"
    assert main(["run", *TINY, "--results", str(results), "--eval", value]) == 2
    line = one_line(capsys.readouterr().err)
    assert words in line and value.split(":")[0] in line
    assert not results.exists()
    results.mkdir()
    assert main(["eval", "--results", str(results), "--eval", value, "--no-progress"]) == 2
    assert words in one_line(capsys.readouterr().err)
    assert list(results.iterdir()) == []


def test_the_runs_own_dataset_is_no_ood_set(tmp_path, capsys):
    results = tmp_path / "runs"
    assert main(["run", *TINY, "--results", str(results), "--eval", "ood:digits"]) == 2
    assert "digits is a dataset this grid trains on" in one_line(capsys.readouterr().err)
    assert not results.exists()


def test_bench_eval_needs_an_eval_and_a_results_folder(tmp_path, capsys):
    assert main(["eval", "--results", str(tmp_path)]) == 2
    assert "needs at least one --eval" in one_line(capsys.readouterr().err)
    assert main(["eval", "--results", str(tmp_path / "none"), "--eval", "ood:digits"]) == 2
    assert str(tmp_path / "none") in one_line(capsys.readouterr().err)


def test_without_medmnistc_shift_is_one_line(tmp_path, capsys, monkeypatch):
    for name in [m for m in sys.modules if m == "medmnistc" or m.startswith("medmnistc.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "medmnistc", None)  # `import medmnistc` fails as if absent
    results = tmp_path / "runs"
    assert main(["run", *TINY, "--results", str(results), "--eval", "shift"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "medmnistc" in line and "libmagickwand" in line and "./setup.sh" in line
    assert not results.exists()
    assert main(["data", "shift", "--dataset", "digits", "--size", "16"]) == 2
    assert "medmnistc" in one_line(capsys.readouterr().err)


def test_specs_carry_the_output_options_without_changing_the_hash(tmp_path):
    from sweeputil import run_args
    from bench.sweep.plan import plan

    ood = image_folder(tmp_path / "noise", 2, 0)  # a source must be present to be planned
    plain = plan(run_args(tmp_path / "a")).specs
    kept = plan(run_args(tmp_path / "a", "--keep-weights", "--eval", f"ood:{ood}")).specs
    assert [s.chash for s in plain] == [s.chash for s in kept]
    back = RunSpec.from_json(kept[0].to_json())  # what a worker process gets
    assert back.keep_weights is True and back.evals == (f"ood:{ood}",)
    assert json.loads(plain[0].to_json())["evals"] == []


def test_api_evaluate_takes_the_field_names(kept, tmp_path):
    import bench.api

    _, results, _ = kept
    fourth = image_folder(tmp_path / "fourth", 4, 4)
    df = bench.api.evaluate(str(results), evals=f"ood:{fourth}", method="2hml")
    assert list(df["status"]) == ["evaluated"] and list(df["images"]) == [4]
    assert df["record"][0].startswith("digits/smallcnn/2hml/")
    rec = next(r for r in records(results) if r.method == "2hml")
    assert Record(rec.path, results).eval_set("ood-fourth")["logits"].shape == (4, 2, 10)
    with pytest.raises(Exception, match="unknown option nope"):
        bench.api.evaluate(str(results), evals="shift", nope=1)


def test_bench_eval_with_nothing_to_evaluate_exits_1_in_one_line(tmp_path, capsys):
    """An empty results folder: the summary, then one stderr line, status 1 (not
    0: a script must not take 'nothing happened' for success)."""
    assert main(["eval", "--results", str(tmp_path), "--eval", "ood:digits", "--no-progress"]) == 1
    captured = capsys.readouterr()
    assert "0 record(s)" in captured.out
    assert captured.err.strip().splitlines() == [
        "bench eval: nothing to evaluate: no complete record matched the filters"]
