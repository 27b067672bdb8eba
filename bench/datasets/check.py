"""`bench data check` as a library: a dataset's per-split, per-class counts
next to the published totals, and every missing or unreadable image by path
(`check_dataset` -> DataCheck, whose `lines` are what the command prints).

A dataset read from a file list has each file fully decoded, because a
truncated JPEG opens fine and fails only on decode; a damaged array in its
image cache is named and set aside (the next run rebuilds it). Any other
dataset is loaded through its adapter and counted.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from tabulate import tabulate

from bench.core.config import load_kwargs, parse_data_opts
from bench.datasets import DATASETS, FILE_INDEXES, medmnist
from bench.datasets.cache import check_cache, default_cache_dir, verify

SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class DataCheck:
    """What `bench data check` found for one dataset."""

    dataset: str
    classes: list
    labels: dict  # split -> int labels
    published: dict = field(default_factory=dict)  # split -> published image count
    by_class: dict = field(default_factory=dict)  # 'train+val' -> published per-class counts
    bad: list = field(default_factory=list)  # (path, why) of each missing or unreadable file
    decoded: bool = False  # every file was decoded, not only counted (a file list)

    @property
    def images(self) -> int:
        return sum(len(v) for v in self.labels.values())

    def lines(self) -> list[str]:
        """The command's output, one print each: the count table, the per-class
        table where published, then each bad file and a count, or one ok line."""
        out = [count_table(self.classes, self.labels, self.published)]
        if self.by_class:
            out.append(class_table(self.classes, self.labels, self.by_class))
        if not self.bad:
            return out + [f"{self.dataset}: all {self.images} images present"
                          + (" and decodable" if self.decoded else "")]
        for path, why in self.bad:
            kind, _, detail = why.partition(": ")
            out.append(f"{kind.upper()}: {path}" + (f" ({detail})" if detail else ""))
        n_missing = sum(why == "missing" for _, why in self.bad)
        return out + [f"{len(self.bad)} bad image(s): {n_missing} missing, "
                      f"{len(self.bad) - n_missing} unreadable"]


def check_dataset(dataset: str, data_root=None, data_opts=(), download: bool = False,
                  progress: bool = True) -> DataCheck:
    """Count `dataset`'s splits and, for a file list, decode every file."""
    DATASETS.get(dataset)  # an unknown name: one line naming the choices
    if dataset in FILE_INDEXES:
        return _check_files(dataset, data_root, data_opts, progress)
    bundle = DATASETS.get(dataset)(data_root=data_root, image_size=0,
                                   **load_kwargs(download, progress, data_opts))
    return DataCheck(dataset, bundle.classes, {s: bundle.split(s).labels for s in SPLITS},
                     published_counts(dataset))


def _check_files(dataset: str, data_root, data_opts, progress: bool) -> DataCheck:
    opts = parse_data_opts(data_opts)
    cache = opts.pop("cache", None)
    index = FILE_INDEXES.get(dataset)(data_root, **opts)
    check_cache(cache or default_cache_dir(index.root))  # names and sets aside damage
    paths = [p for s in SPLITS for p in index.paths[s]]
    return DataCheck(dataset, index.classes, index.labels, index.published,
                     index.published_classes, verify(paths, progress=progress), decoded=True)


def published_counts(name: str) -> dict[str, int]:
    """split -> published image count, where the dataset's authors give one."""
    if name in medmnist.FLAGS:
        return medmnist.published_counts(name)
    return {}


def class_table(classes, labels: dict, published: dict) -> str:
    """Per-class counts of split groups ('train+val') next to the published ones."""
    rows = []
    for group, pub in published.items():
        ys = np.concatenate([labels[s] for s in group.split("+")])
        counts = np.bincount(ys, minlength=len(classes))
        rows += [[group, name, int(c), p, "ok" if c == p else f"differs ({int(c) - p:+d})"]
                 for name, c, p in zip(classes, counts, pub)]
    return tabulate(rows, headers=["splits", "class", "found", "published", ""])


def count_table(classes, labels: dict, published: dict) -> str:
    """Rows = classes, columns = splits, plus total and published-total rows."""
    counts = {s: np.bincount(labels[s], minlength=len(classes)) for s in SPLITS}
    rows = [[k, name, *(int(counts[s][k]) for s in SPLITS), int(sum(counts[s][k] for s in SPLITS))]
            for k, name in enumerate(classes)]
    totals = [int(counts[s].sum()) for s in SPLITS]
    rows.append(["", "total", *totals, sum(totals)])
    if published:
        pub = [published.get(s, "") for s in SPLITS]
        pub_sum = sum(p for p in pub if p != "")
        rows.append(["", "published", *pub, pub_sum])
        diff = ["ok" if p == t else f"differs ({t - p:+d})" for p, t in zip(pub, totals)
                if p != ""]
        rows.append(["", "vs published", *diff, ""])
    return tabulate(rows, headers=["id", "class", *SPLITS, "all"], tablefmt="simple")
