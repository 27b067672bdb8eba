"""Issue 35, point 1, beyond the resume state (tests/train/test_hostile_state.py):
a pickle that would create a file when unpickled, planted as each file the
harness reads back (a record's files, the image cache, the report's cache,
a run's side files, a weights file, a dataset file), executes nothing. Files
the harness owns are refused in one line and set aside like damaged ones;
files the user gave (weights, a dataset) are refused in one line, exit 2.
docs/architecture.md ("Files read back") lists every such read."""
from __future__ import annotations

import io
import json
import pickle
import shutil

import numpy as np
import pytest
import torch

from bench.cli.main import main
from bench.core import store

TINY = ["--dataset", "digits", "--backbone", "smallcnn", "--seeds", "1", "--profile", "quick",
        "--set", "cycles=1", "--set", "epochs_per_cycle=1", "--set", "image_size=12",
        "--set", "batch_size=64", "--no-progress"]
REPORT = ["--no-plots", "--no-progress"]


class Plant:
    """Unpickling this creates `marker`."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def plain(marker) -> bytes:
    return pickle.dumps(Plant(marker))


def npz_with_object_array(marker) -> bytes:
    """A real .npz whose arrays are pickled objects (np.savez allows them),
    under the names a record and a MedMNIST file hold."""
    buf = io.BytesIO()
    names = ["test_logits", "val_logits", "test_labels", "val_labels"] + [
        f"{s}_{k}" for s in ("train", "val", "test") for k in ("images", "labels")]
    np.savez(buf, **{n: np.array([Plant(marker)], dtype=object) for n in names})
    return buf.getvalue()


def npy_with_object_array(marker) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.array([Plant(marker)], dtype=object), allow_pickle=True)
    return buf.getvalue()


def test_the_plants_do_run_code_when_unpickled(tmp_path):
    """The test's own check: each planted file does create the marker when
    loaded the unsafe way (pickle.loads, np.load(allow_pickle=True))."""
    for i, (data, load) in enumerate([
            (plain, lambda b: pickle.loads(b)),
            (npz_with_object_array, lambda b: np.load(io.BytesIO(b), allow_pickle=True)
             ["test_logits"]),
            (npy_with_object_array, lambda b: np.load(io.BytesIO(b), allow_pickle=True))]):
        marker = tmp_path / f"ran{i}"
        load(data(marker))
        assert marker.exists()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One finished tiny record, as a version before checksums wrote it (no
    sha256 in metrics.json), so every file is read, not just hashed."""
    root = tmp_path_factory.mktemp("trained")
    assert main(["run", *TINY, "--results", str(root)]) == 0
    (key,) = store.iter_records(root)
    metrics = store.read_json(key.path(root) / "metrics.json")
    for k in ("files", "digest"):
        metrics.pop(k, None)
    (key.path(root) / "metrics.json").write_text(json.dumps(metrics))
    assert store.verify(key.path(root)) is None
    return root


@pytest.mark.parametrize("name, make", [("predictions.npz", plain),
                                        ("predictions.npz", npz_with_object_array),
                                        ("config.json", plain), ("metrics.json", plain)])
def test_point1_planted_pickle_in_a_record_is_damaged_and_runs_no_code(
        trained, tmp_path, capsys, name, make):
    root = tmp_path / "results"
    shutil.copytree(trained, root)
    (key,) = store.iter_seed_dirs(root)
    record, marker = key.path(root), tmp_path / "planted-code-ran"
    (record / name).write_bytes(make(marker))
    capsys.readouterr()
    assert main(["check", "--results", str(root)]) == 1
    assert f"{name}: " in capsys.readouterr().out
    assert main(["report", "--results", str(root), "--out", str(tmp_path / "rep"), *REPORT]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "1 failed or unfinished runs: " in err
    assert f"seed 0 (damaged: {name}" in err or f"seed 0 (unreadable {name}" in err, err
    assert main(["run", *TINY, "--results", str(root)]) == 0  # set aside, retrained
    out = capsys.readouterr().out
    (line,) = [t for t in out.splitlines() if t.startswith("DAMAGED ")]
    assert f"{name}: " in line and "moved to seed0.damaged-" in line
    (aside,) = record.parent.glob("seed0.damaged-*")
    assert (aside / name).read_bytes() == make(marker) and store.verify(record) is None
    assert not marker.exists()


@pytest.mark.parametrize("make", [plain, npy_with_object_array])
def test_point1_planted_pickle_in_the_image_cache_is_set_aside(tmp_path, capsys, make):
    from PIL import Image

    from bench.datasets.cache import cached_images

    paths = []
    for i in range(4):
        Image.fromarray(np.full((6, 6, 3), 40 * i, np.uint8)).save(tmp_path / f"{i}.png")
        paths.append(str(tmp_path / f"{i}.png"))
    first = np.array(cached_images(paths, 6, tmp_path / "cache", progress=False))
    (array,) = (tmp_path / "cache").glob("*.npy")
    marker = tmp_path / "planted-code-ran"
    array.write_bytes(make(marker))
    again = cached_images(paths, 6, tmp_path / "cache", progress=False)
    np.testing.assert_array_equal(again, first)  # rebuilt from the images
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"bench: warning: cache file {array} was damaged (")
    (aside,) = array.parent.glob(f"{array.name}.damaged-*")
    assert aside.read_bytes() == make(marker)
    assert not marker.exists()


def test_point1_planted_pickle_as_report_cache_and_side_files_runs_no_code(
        trained, tmp_path, capsys):
    """The report's measure cache and a run's lock, progress and failure files
    are JSON read with a fallback: a pickle there is ignored, and replaced."""
    root, out = tmp_path / "results", tmp_path / "rep"
    shutil.copytree(trained, root)
    marker = tmp_path / "planted-code-ran"
    assert main(["report", "--results", str(root), "--out", str(out), *REPORT]) == 0
    caches = list((out / "cache").glob("*"))
    assert caches
    for f in caches:
        f.write_bytes(plain(marker))
    (key,) = store.iter_records(root)
    for suffix in ("lock", "progress.json", "failed.json"):
        store.side_file(key.path(root).with_name("seed1"), suffix).write_bytes(plain(marker))
    assert main(["report", "--results", str(root), "--out", str(out), *REPORT]) == 0
    assert main(["run", *TINY, "--results", str(root), "--dry-run"]) == 0
    assert main(["check", "--results", str(root)]) == 0
    assert all(f.read_bytes() != plain(marker) for f in caches)  # rewritten by the report
    assert not marker.exists()


def test_point1_planted_pickle_as_weights_is_one_line(tmp_path, capsys):
    marker, weights = tmp_path / "planted-code-ran", tmp_path / "w.pt"
    torch.save({"conv1.weight": Plant(marker)}, weights)
    assert main(["run", "--dataset", "digits", "--backbone", "resnet18", "--weights",
                 str(weights), "--seeds", "1", "--results", str(tmp_path / "r"),
                 "--dry-run"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"bench: error: cannot read weights {weights} as tensors only")
    assert not marker.exists() and not (tmp_path / "r").exists()


@pytest.mark.parametrize("make", [plain, npz_with_object_array])
def test_point1_planted_pickle_as_a_dataset_file_is_one_line(tmp_path, capsys, make):
    marker, npz = tmp_path / "planted-code-ran", tmp_path / "pathmnist.npz"
    npz.write_bytes(make(marker))
    assert main(["run", "--dataset", "pathmnist", "--data-root", str(tmp_path), "--seeds", "1",
                 "--results", str(tmp_path / "r"), "--dry-run"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"bench: error: {npz}: damaged or truncated (")
    assert not marker.exists()
