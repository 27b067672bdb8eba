"""Dataset adapters on small files written in each dataset's exact on-disk format.

Each adapter test writes the official layout in a temp dir, runs
`bench run --profile quick --set cycles=1 --set epochs_per_cycle=1 --backbone
smallcnn` for one seed through main(), and checks class counts and split
sizes against what the test wrote.
"""
from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bench.core import store
from bench.cli.main import main
from bench.datasets import load_dataset
from bench.datasets.cache import cache_key, cached_images
from bench.datasets.filelist import paper_split

RNG = np.random.default_rng(0)


# ----------------------------------------------------------------- writers --
def write_jpeg(path: Path, label: int, size: int = 20) -> None:
    """A small JPEG whose mean colour depends on the label (learnable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    base = np.array([60 + 60 * (label % 4), 40 * (label % 3), 200 - 30 * (label % 5)])
    img = np.clip(base + RNG.integers(-20, 20, (size, size, 3)), 0, 255).astype(np.uint8)
    Image.fromarray(img).save(path, quality=90)


def write_npz(path: Path, counts=(45, 18, 18), classes: int = 9, size: int = 28,
              grey: bool = False) -> dict:
    arrays = {}
    for split, n in zip(("train", "val", "test"), counts):
        labels = (np.arange(n) % classes).astype(np.uint8).reshape(n, 1)  # official (N, 1)
        shape = (n, size, size) if grey else (n, size, size, 3)
        arrays[f"{split}_images"] = RNG.integers(0, 255, shape, dtype=np.uint8)
        arrays[f"{split}_labels"] = labels
    np.savez_compressed(path, **arrays)
    return arrays


def write_chaoyang(root: Path, per_class_train=(6, 5, 7, 4), per_class_test=(3, 2, 2, 1)):
    for split, per_class in (("train", per_class_train), ("test", per_class_test)):
        entries = []
        for label, n in enumerate(per_class):
            for i in range(n):
                name = f"{split}/{label}-{i}.JPG"
                write_jpeg(root / name, label)
                entries.append({"name": name, "label": label})
        (root / f"{split}.json").write_text(json.dumps(entries))


KVASIR_FINDINGS = [  # (organ, classification, finding)
    ("Lower GI", "anatomical-landmarks", "cecum"),
    ("Lower GI", "pathological-findings", "polyps"),
    ("Upper GI", "anatomical-landmarks", "z-line"),
    ("Upper GI", "pathological-findings", "esophagitis-a"),
]


def write_kvasir(root: Path, per_class=(10, 15, 5, 20)) -> list[dict]:
    rows = []
    for k, ((organ, cls, finding), n) in enumerate(zip(KVASIR_FINDINGS, per_class)):
        organ_dir = organ.lower().replace(" gi", "-gi-tract")
        for i in range(n):
            stem = f"{finding}-{i:04d}-0a1b"
            write_jpeg(root / organ_dir / cls / finding / f"{stem}.jpg", k)
            rows.append({"Video file": stem, "Organ": organ, "Finding": finding,
                         "Classification": cls})
    with open(root / "image-labels.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["Video file", "Organ", "Finding",
                                                "Classification"])
        writer.writeheader()
        writer.writerows(rows)
    return rows


def run_bench(dataset: str, root: Path, tmp: Path, *extra: str) -> int:
    return main(["run", "--dataset", dataset, "--data-root", str(root), "--profile", "quick",
                 "--set", "cycles=1", "--set", "epochs_per_cycle=1", "--backbone", "smallcnn",
                 "--seeds", "1", "--results", str(tmp / "results"), "--device", "cpu",
                 "--no-progress", *extra])


def only_record(tmp: Path):
    records = [k.path(tmp / "results") for k in store.iter_records(tmp / "results")]
    assert len(records) == 1
    config = store.read_json(records[0] / "config.json")
    return config, store.load_predictions(records[0])


# ------------------------------------------------------------ the adapters --
def test_pathmnist_npz_runs_and_keeps_official_splits(tmp_path):
    arrays = write_npz(tmp_path / "pathmnist.npz")
    assert run_bench("pathmnist", tmp_path, tmp_path, "--set", "image_size=28") == 0
    config, pred = only_record(tmp_path)
    assert config["classes"][0] == "adipose" and len(config["classes"]) == 9  # medmnist.INFO
    assert config["train"]["image_size"] == 28
    assert pred["val_logits"].shape == (18, 1, 9) and pred["test_logits"].shape == (18, 1, 9)
    np.testing.assert_array_equal(pred["test_labels"], arrays["test_labels"].ravel())


def test_medmnist_grey_flag_and_sizes(tmp_path):
    write_npz(tmp_path / "breastmnist.npz", counts=(6, 4, 4), classes=2, grey=True)
    bundle = load_dataset("breastmnist", tmp_path, image_size=32)  # not official: from 28 px
    assert bundle.train.images.shape == (6, 32, 32, 3) and bundle.classes == ["malignant",
                                                                              "normal, benign"]
    assert bundle.identity["file"] == "breastmnist.npz"
    write_npz(tmp_path / "breastmnist_64.npz", counts=(6, 4, 4), classes=2, size=64)
    assert load_dataset("breastmnist", tmp_path, image_size=64).identity["file"] \
        == "breastmnist_64.npz"


def test_medmnist_missing_file_names_path_and_url(tmp_path, capsys):
    assert run_bench("pathmnist", tmp_path, tmp_path) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert str(tmp_path / "pathmnist.npz") in err and "zenodo.org" in err and "--download" in err


def test_convnext_rounds_pathmnist_to_32(tmp_path):
    """Released protocol: PathMNIST training images augmented at 28 px, then
    resized to 32 for ConvNeXt; validation and test at 32."""
    import dataclasses

    from bench.core.config import TrainConfig
    from bench.core.errors import BenchError
    from bench.methods import create_method
    from bench.sweep.grid import bundle_for
    from bench.train.experiment import make_experiment

    write_npz(tmp_path / "pathmnist.npz", counts=(9, 9, 9))
    opts = (("download", False), ("progress", False))
    method = create_method("sl1h")
    bundle = bundle_for("pathmnist", "convnext_tiny", TrainConfig(), method, str(tmp_path), opts)
    assert [bundle.split(s).images.shape[1] for s in ("train", "val", "test")] == [28, 32, 32]
    train = make_experiment(bundle, "convnext_tiny", method, TrainConfig()).train
    # the sizes actually used go into the hash
    assert (train.augment_size, train.image_size, train.test_size) == (28, 32, 32)
    with pytest.raises(BenchError, match="image_size=28: backbone 'convnext_tiny' needs 32"):
        bundle_for("pathmnist", "convnext_tiny", dataclasses.replace(TrainConfig(), image_size=28),
                   method, str(tmp_path), opts)


def test_chaoyang_tree_default_split(tmp_path):
    root = tmp_path / "chaoyang"
    write_chaoyang(root)
    assert run_bench("chaoyang", root, tmp_path, "--set", "image_size=16") == 0
    config, pred = only_record(tmp_path)
    assert config["classes"] == ["normal", "serrated", "adenocarcinoma", "adenoma"]
    n_train = 22
    assert len(pred["val_labels"]) == n_train // 5  # stratified N//5 of the official train
    assert Counter(pred["test_labels"].tolist()) == {0: 3, 1: 2, 2: 2, 3: 1}
    assert sorted(Counter(pred["val_labels"].tolist())) == [0, 1, 2, 3]  # stratified


def test_chaoyang_user_csvs(tmp_path):
    root = tmp_path / "chaoyang"
    write_chaoyang(root)
    train = [(f"train/{k}-{i}.JPG", k) for k, n in enumerate((6, 5, 7, 4)) for i in range(n)]
    for name, rows in (("tr.csv", train[::2]), ("va.csv", train[1::2])):
        with open(tmp_path / name, "w", newline="") as fh:
            csv.writer(fh).writerows([("image_id", "label"), *rows])
    bundle = load_dataset("chaoyang", root, image_size=16, progress=False,
                          train_csv=str(tmp_path / "tr.csv"), val_csv=str(tmp_path / "va.csv"))
    assert (len(bundle.train), len(bundle.val), len(bundle.test)) == (11, 11, 8)
    np.testing.assert_array_equal(bundle.val.labels, [k for _, k in train[1::2]])


def test_kvasir_tree_runs_with_finding_classes(tmp_path):
    root = tmp_path / "labeled-images"
    write_kvasir(root)
    assert run_bench("kvasir", root, tmp_path, "--set", "image_size=16") == 0
    config, pred = only_record(tmp_path)
    assert config["classes"] == ["cecum", "esophagitis-a", "polyps", "z-line"]  # sorted Finding
    assert len(pred["test_labels"]) == 50 // 5 and len(pred["val_labels"]) == 50 // 5
    assert Counter(pred["test_labels"].tolist()) == {0: 2, 1: 4, 2: 3, 3: 1}  # stratified


def test_kvasir_split_matches_sklearn_procedure_and_is_stable(tmp_path):
    from sklearn.model_selection import train_test_split

    labels = np.repeat(np.arange(5), [40, 7, 23, 12, 19])  # N = 101
    split = paper_split(labels)
    n = len(labels)
    assert (len(split["test"]), len(split["val"])) == (n // 5, n // 5)  # N//5 / N//5 / rest
    assert len(split["train"]) == n - 2 * (n // 5)
    # Independent computation: the paper's two train_test_split calls.
    idx = np.arange(n)
    rest, test = train_test_split(idx, test_size=n // 5, stratify=labels, random_state=0)
    train, val = train_test_split(rest, test_size=n // 5, stratify=labels[rest],
                                  random_state=0)
    assert set(split["test"]) == set(test) and set(split["val"]) == set(val)
    again = paper_split(labels.copy())
    assert all(np.array_equal(split[k], again[k]) for k in split)  # stable across calls
    for k in ("train", "val", "test"):  # stratified: each class within one image of its share
        share = np.bincount(labels[split[k]], minlength=5) / len(split[k])
        assert np.all(np.abs(share - np.bincount(labels) / n) * len(split[k]) <= 1.0)


def test_csv_dataset(tmp_path):
    for split, n in (("train", 12), ("val", 6), ("test", 6)):
        rows = [("image", "label")]
        for i in range(n):
            name = ["cat", "dog", "eel"][i % 3]
            write_jpeg(tmp_path / "img" / f"{split}{i}.png", i % 3)
            rows.append((f"img/{split}{i}.png", name))
        with open(tmp_path / f"{split}.csv", "w", newline="") as fh:
            csv.writer(fh).writerows(rows)
    opts = [a for s in ("train", "val", "test") for a in ("--data-opt", f"{s}={tmp_path}/{s}.csv")]
    assert run_bench("csv", tmp_path, tmp_path, "--set", "image_size=16", *opts) == 0
    config, pred = only_record(tmp_path)
    assert config["classes"] == ["cat", "dog", "eel"]
    assert Counter(pred["test_labels"].tolist()) == {0: 2, 1: 2, 2: 2}
    assert len(pred["val_labels"]) == 6


def test_folder_dataset(tmp_path):
    root = tmp_path / "data"
    for k, name in enumerate(["benign", "malignant"]):
        for i in range(10 + 5 * k):
            write_jpeg(root / name / f"{i}.jpg", k)
    assert run_bench("folder", root, tmp_path, "--set", "image_size=16") == 0
    config, pred = only_record(tmp_path)
    assert config["classes"] == ["benign", "malignant"]
    assert len(pred["test_labels"]) == 25 // 5 and len(pred["val_labels"]) == 25 // 5


def test_unknown_data_opt_is_one_line(tmp_path, capsys):
    write_chaoyang(tmp_path)
    assert run_bench("chaoyang", tmp_path, tmp_path, "--data-opt", "trian_csv=x.csv") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "trian_csv" in err and "train_csv" in err


# --------------------------------------------------- bad files and the cache --
def test_bad_images_named_by_check_and_stop_run(tmp_path, capsys):
    root = tmp_path / "chaoyang"
    write_chaoyang(root)
    corrupt = root / "train" / "1-2.JPG"
    write_jpeg(corrupt, 1, size=64)
    data = corrupt.read_bytes()
    corrupt.write_bytes(data[: len(data) // 2])  # truncated: opens, fails on decode
    assert Image.open(corrupt).size == (64, 64)  # header still readable
    missing = root / "test" / "0-1.JPG"
    missing.unlink()
    assert main(["data", "check", "--dataset", "chaoyang", "--data-root", str(root),
                 "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert f"UNREADABLE: {corrupt}" in out and f"MISSING: {missing}" in out
    assert "1111" in out and "3217" in out  # official per-class and the paper's split sizes
    assert run_bench("chaoyang", root, tmp_path, "--set", "image_size=16") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(corrupt) in err and str(missing) in err
    assert store.iter_records(tmp_path / "results") == []  # nothing trained
    cache = root / ".bench-cache"
    assert not list(cache.glob("*.tmp*"))  # no half-built cache left behind
    assert len(list(cache.glob("*.npy"))) == 1  # only the clean split (val) was cached


def test_data_check_counts_against_published(tmp_path, capsys):
    write_npz(tmp_path / "pathmnist.npz", counts=(18, 9, 9))
    assert main(["data", "check", "--dataset", "pathmnist", "--data-root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "89996" in out and "differs (-89978)" in out  # published PathMNIST train size
    assert "smooth muscle" in out


def test_cache_reused_and_rebuilt_when_inputs_change(tmp_path, monkeypatch):
    paths = []
    for i in range(6):
        write_jpeg(tmp_path / f"{i}.jpg", i)
        paths.append(str(tmp_path / f"{i}.jpg"))
    cache = tmp_path / "cache"
    first = cached_images(paths, 12, cache, progress=False)
    expected = np.asarray(Image.open(paths[3]).convert("RGB").resize((12, 12), Image.BILINEAR))
    np.testing.assert_array_equal(first[3], expected)
    key = cache_key(paths, 12)
    assert (cache / f"{key}.npy").exists()
    assert cache_key(paths, 12) == key and cache_key(paths, 16) != key
    with monkeypatch.context() as m:  # reuse: the second load decodes nothing
        m.setattr("bench.datasets.cache.decode", lambda *a: pytest.fail("decoded again"))
        np.testing.assert_array_equal(cached_images(paths, 12, cache, progress=False), first)
    write_jpeg(tmp_path / "3.jpg", 0, size=24)  # changed file: new size/mtime
    assert cache_key(paths, 12) != key
    second = cached_images(paths, 12, cache, progress=False)
    assert len(list(cache.glob("*.npy"))) == 2 and not np.array_equal(first[3], second[3])
