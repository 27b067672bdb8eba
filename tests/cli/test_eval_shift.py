"""`--eval shift` and `bench data shift` on the command line (one cheap
corruption of medmnistc's general set, so a build takes seconds: the full set
on digits takes minutes, docs/shift.md), and `--eval` through fused groups
and the process pool: the same logits as the runs trained alone."""
from __future__ import annotations

import numpy as np
import pytest

from bench.cli.main import main
from bench.core import files, store
from bench.core.record import Record
from bench.datasets import corruptions as C
from bench.datasets import shift
from test_eval_runs import TINY, image_folder, records

ONLY = ("pixelate",)
N = 60


@pytest.fixture
def one_corruption(tmp_path, monkeypatch):
    """medmnistc's general set cut to pixelate, digits' test split to its first
    N images; the shift cache under tmp_path."""
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    full, source = C.corruptions, shift.source
    monkeypatch.setattr(C, "corruptions", lambda dataset, only=None: full(dataset, only or ONLY))

    def first(dataset, *args, **kwargs):  # read once: digits decoded at 224 px takes seconds
        if dataset not in read:
            images, labels, how = source(dataset, *args, **kwargs)
            read[dataset] = images[:N], labels[:N], how
        return read[dataset]

    read: dict = {}

    monkeypatch.setattr(shift, "source", first)
    shift._get.cache_clear()
    yield tmp_path / "cache" / "shift"
    shift._get.cache_clear()


def test_data_shift_builds_once_then_run_eval_shift_uses_it(one_corruption, tmp_path, capsys,
                                                            one_thread):
    assert main(["data", "shift", "--dataset", "digits", "--size", "16", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "| general " in out and "| built " in out
    built = sorted(one_corruption.glob("digits-16px-*.npy"))
    assert len(built) == 1
    mtime = built[0].stat().st_mtime_ns
    shift._get.cache_clear()  # as a new process: found on disk, not rebuilt
    assert main(["data", "shift", "--dataset", "digits", "--size", "16", "--no-progress"]) == 0
    assert "| cached " in capsys.readouterr().out
    assert built[0].stat().st_mtime_ns == mtime
    cached = np.load(built[0], mmap_mode="r")
    assert cached.shape == (1 + 5, N, 16, 16, 3)
    assert not np.array_equal(cached[5], cached[0])  # severity 5 pixelated the images

    results = tmp_path / "runs"
    assert main(["run", *TINY, "--results", str(results), "--eval", "shift"]) == 0
    (rec,) = records(results)
    assert not rec.has_weights  # --eval alone keeps no weights
    arrays = rec.eval_set("shift")
    assert arrays["logits"].shape == (6, N, 1, 10)
    assert list(arrays["corruption"]) == ["clean"] + ["pixelate"] * 5
    assert list(arrays["severity"]) == [0, 1, 2, 3, 4, 5]
    np.testing.assert_array_equal(arrays["labels"], rec.predictions["test_labels"][:N])
    assert not np.array_equal(arrays["logits"][5], arrays["logits"][0])
    assert rec.evals["shift"]["set_sha256"] == files.sha256(built[0])
    assert built[0].stat().st_mtime_ns == mtime  # the run read the built set


def test_fused_groups_store_the_sets_of_runs_trained_alone(tmp_path, capsys, one_thread):
    """--fuse seeds (bench.sweep.worker.execute_group -> run_members) against
    each run alone (execute -> run_seed), both in this process (the process
    pool gets the same RunSpecs as JSON: test_eval_runs checks the round trip).
    12 px: see tests/sweep/test_fuse_sweep.py."""
    ood = image_folder(tmp_path / "ood", 8, 5)
    tiny = [a if a != "image_size=16" else "image_size=12" for a in TINY]
    argv = [*tiny, "--seeds", "2", "--keep-weights", "--eval", f"ood:{ood}"]
    assert main(["run", "--results", str(tmp_path / "alone"), *argv]) == 0
    assert main(["run", "--results", str(tmp_path / "fused"), *argv, "--fuse", "seeds"]) == 0
    capsys.readouterr()
    alone, fused = records(tmp_path / "alone"), records(tmp_path / "fused")
    assert [r.key.label for r in alone] == [r.key.label for r in fused] and len(alone) == 2
    for a, f in zip(alone, fused):
        assert store.read_json(f.path / "config.json")["fused_group"] == [0, 1]
        assert a.has_weights and f.has_weights
        got, want = f.eval_set("ood-ood")["logits"], a.eval_set("ood-ood")["logits"]
        assert got.shape == (8, 1, 10)
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    # the two seeds differ: the comparison above is not of one model twice
    assert not np.allclose(alone[0].eval_set("ood-ood")["logits"],
                           alone[1].eval_set("ood-ood")["logits"], atol=1e-2)
    assert Record(fused[0].path).evals["ood-ood"]["model"] == "trained"
