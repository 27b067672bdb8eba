"""bench.datasets.check, the library under `bench data check`: its counts
against counts made here by hand, its tables' rows, and the lines it prints."""
from __future__ import annotations

from collections import Counter

import numpy as np
from sklearn.datasets import load_digits

from bench.datasets.check import (DataCheck, check_dataset, class_table, count_table,
                                  published_counts)

CLASSES = ["cat", "dog", "fox"]
LABELS = {"train": np.array([0, 0, 1, 2, 2, 2]), "val": np.array([1, 1]),
          "test": np.array([0, 2, 2])}


def rows(table: str) -> list[list[str]]:
    """A tabulate table's body rows as cells split on runs of two spaces."""
    body = table.splitlines()[2:]
    return [[c.strip() for c in line.split("  ") if c.strip()] for line in body]


def test_count_table_counts_each_class_per_split():
    table = count_table(CLASSES, LABELS, {})
    by_hand = {s: Counter(v.tolist()) for s, v in LABELS.items()}
    for k, name in enumerate(CLASSES):
        row = rows(table)[k]
        counts = [by_hand[s][k] for s in ("train", "val", "test")]
        assert row == [str(k), name, *map(str, counts), str(sum(counts))]
    assert rows(table)[-1] == ["total", "6", "2", "3", "11"]


def test_count_table_compares_with_the_published_totals():
    table = count_table(CLASSES, LABELS, {"train": 6, "val": 5, "test": 3})
    assert rows(table)[-2] == ["published", "6", "5", "3", "14"]
    assert rows(table)[-1] == ["vs published", "ok", "differs (-3)", "ok"]


def test_class_table_sums_split_groups():
    table = class_table(CLASSES, LABELS, {"train+val": [2, 1, 3], "test": [1, 0, 2]})
    # train+val by hand: cat 2, dog 1 + 2, fox 3
    assert rows(table) == [["train+val", "cat", "2", "2", "ok"],
                           ["train+val", "dog", "3", "1", "differs (+2)"],
                           ["train+val", "fox", "3", "3", "ok"],
                           ["test", "cat", "1", "1", "ok"],
                           ["test", "dog", "0", "0", "ok"],
                           ["test", "fox", "2", "2", "ok"]]


def test_digits_counts_are_scikit_learns():
    found = check_dataset("digits", progress=False)
    assert not found.bad and not found.decoded and found.published == {}
    per_class = sum(np.bincount(found.labels[s], minlength=10) for s in found.labels)
    assert per_class.tolist() == np.bincount(load_digits().target).tolist()
    assert found.lines()[-1] == "digits: all 1797 images present"


def test_bad_files_are_named_one_line_each_then_counted():
    found = DataCheck("x", CLASSES, LABELS, bad=[("a.jpg", "missing"),
                                                 ("b.jpg", "unreadable: truncated")])
    assert found.lines()[1:] == ["MISSING: a.jpg", "UNREADABLE: b.jpg (truncated)",
                                 "2 bad image(s): 1 missing, 1 unreadable"]


def test_published_counts_are_medmnists_own():
    # PathMNIST's split sizes as its paper gives them (Yang et al. 2023, Table 1)
    assert published_counts("pathmnist") == {"train": 89996, "val": 10004, "test": 7180}
    assert published_counts("digits") == {}
