"""CSV data given without a test list is split as folder data is: stratified,
seeded, deterministic, and recorded in each run's config.json (the rule, the
fraction, the seed and a digest of the split). Before this, `--data-opt test=`
was required and a lone training CSV was a one-line error (exit 2)."""
from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import numpy as np

from bench.cli.main import main
from bench.datasets.filelist import FILE_INDEXES
from test_datasets import only_record, run_bench, write_jpeg

COUNTS = {"cat": 13, "dog": 7, "eel": 10}  # N = 30: unequal classes, N//5 = 6


def write_list(tmp_path: Path, split: str, counts: dict) -> list[str]:
    rows, i = [("image", "label")], 0
    for k, (name, n) in enumerate(counts.items()):
        for _ in range(n):
            write_jpeg(tmp_path / "img" / f"{split}{i}.png", k, size=12)
            rows.append((f"img/{split}{i}.png", name))
            i += 1
    # shuffled so that the split cannot follow from the order of the rows
    order = np.random.default_rng(7).permutation(len(rows) - 1) + 1
    with open(tmp_path / f"{split}.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([rows[0]] + [rows[j] for j in order])
    return ["--data-opt", f"{split}={tmp_path / split}.csv"]


def labels_by_path(tmp_path: Path, split: str) -> dict[str, str]:
    with open(tmp_path / f"{split}.csv", newline="") as fh:
        return {str(tmp_path / r["image"]): r["label"] for r in csv.DictReader(fh)}


def within_one_of_share(names: list[str], total: Counter, n_all: int) -> bool:
    """Each class's count in a split is within 1 of its exact share."""
    got = Counter(names)
    return all(abs(got[c] - total[c] * len(names) / n_all) <= 1 for c in total)


def test_lone_train_csv_is_split_stratified_and_recorded(tmp_path):
    opts = write_list(tmp_path, "train", COUNTS)
    assert run_bench("csv", tmp_path, tmp_path, "--set", "image_size=16", *opts) == 0
    config, pred = only_record(tmp_path)
    data = config["data"]
    assert data["split"] == "paper: test N//5, val N//5 of rest"  # as a folder pool
    assert data["split_fraction"] == 0.2 and data["split_seed"] == 0
    assert len(data["files"]) == 16 and (data["n_test"], data["n_val"]) == (6, 6)
    assert len(pred["test_labels"]) == 6 and len(pred["val_labels"]) == 6
    # Independently of the adapter: the index's file lists, labelled from the CSV.
    index = FILE_INDEXES.get("csv")(tmp_path, train=str(tmp_path / "train.csv"))
    truth = labels_by_path(tmp_path, "train")
    assert sorted(p for s in index.paths.values() for p in s) == sorted(truth)  # a partition
    total = Counter(truth.values())
    for split in ("train", "val", "test"):
        names = [truth[p] for p in index.paths[split]]
        assert within_one_of_share(names, total, sum(COUNTS.values())), (split, names)
        assert [index.classes[k] for k in index.labels[split]] == names
    # The recorded labels are the test split's.
    assert Counter(pred["test_labels"].tolist()) == Counter(index.labels["test"].tolist())


def test_lone_train_csv_split_is_deterministic(tmp_path):
    opts = write_list(tmp_path, "train", COUNTS)
    first = FILE_INDEXES.get("csv")(tmp_path, train=str(tmp_path / "train.csv"))
    second = FILE_INDEXES.get("csv")(tmp_path, train=str(tmp_path / "train.csv"))
    assert first.paths == second.paths and first.identity == second.identity
    # Two runs in two result folders: one config hash, one recorded digest.
    for out in ("a", "b"):
        assert run_bench("csv", tmp_path, tmp_path / out, "--set", "image_size=16", *opts) == 0
    (ca, _), (cb, _) = only_record(tmp_path / "a"), only_record(tmp_path / "b")
    assert ca["config_hash"] == cb["config_hash"] and ca["data"] == cb["data"]


def test_train_and_val_csv_hold_out_a_stratified_test(tmp_path):
    opts = write_list(tmp_path, "train", COUNTS) + write_list(tmp_path, "val", {"cat": 2,
                                                                                "dog": 2,
                                                                                "eel": 2})
    index = FILE_INDEXES.get("csv")(tmp_path, train=str(tmp_path / "train.csv"),
                                val=str(tmp_path / "val.csv"))
    assert index.identity["split"] == "user csv; test = stratified N//5 of train"
    assert index.identity["split_seed"] == 0 and index.identity["split_fraction"] == 0.2
    truth = labels_by_path(tmp_path, "train")
    assert sorted(index.paths["train"] + index.paths["test"]) == sorted(truth)
    assert sorted(index.paths["val"]) == sorted(labels_by_path(tmp_path, "val"))
    names = [truth[p] for p in index.paths["test"]]
    assert len(names) == 6 and within_one_of_share(names, Counter(truth.values()), 30)
    assert main(["data", "check", "--dataset", "csv", "--data-root", str(tmp_path),
                 "--no-progress", *opts]) == 0


def test_too_few_rows_to_split_is_one_line(tmp_path, capsys):
    opts = write_list(tmp_path, "train", {"cat": 2, "dog": 2})
    assert run_bench("csv", tmp_path, tmp_path, *opts) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "train.csv" in err and "too few" in err
    assert not (tmp_path / "results").exists()


def test_folder_with_train_and_val_only_is_a_split_layout(tmp_path):
    """train/ and val/ without test/: test is held out of train as for csv
    (before, 'train' and 'val' were taken as two classes and trained on)."""
    for split, n in (("train", 10), ("val", 3)):
        for k, name in enumerate(("benign", "malignant")):
            for i in range(n):
                write_jpeg(tmp_path / split / name / f"{i}.jpg", k, size=12)
    index = FILE_INDEXES.get("folder")(tmp_path)
    assert index.classes == ["benign", "malignant"]
    assert index.identity["split"] == "train/val folders; test = stratified N//5 of train"
    assert len(index.paths["test"]) == 4 and len(index.paths["val"]) == 6
    assert Counter(index.labels["test"].tolist()) == {0: 2, 1: 2}
    assert all("/train/" in p for p in index.paths["train"] + index.paths["test"])
