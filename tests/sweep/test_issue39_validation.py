"""Issue 39, point 3: a dataset with an empty validation split is refused in
one line before anything trains; a validation split too small for the
calibrators a report shows gets a footnote under those rows."""
from __future__ import annotations

import numpy as np
import pytest

from bench.cli.main import main
from bench.datasets import DATASETS, DatasetBundle, Split
from pluginutil import clean_plugins  # noqa: F401  (fixture)


def _split(n: int, seed: int) -> Split:
    rng = np.random.default_rng(seed)
    return Split(rng.integers(0, 256, (n, 8, 8, 3), dtype=np.uint8), np.arange(n) % 2)


def _register(name: str, n_val: int) -> None:
    def load(data_root=None, image_size: int = 0, **options):
        return DatasetBundle(name, ["a", "b"], _split(16, 0), _split(n_val, 1), _split(6, 2),
                             default_backbone="smallcnn", identity={"n_val": n_val})

    DATASETS.register(name, "a plugin dataset (test)")(load)


def test_point3_an_empty_validation_split_is_refused_before_anything_trains(
        clean_plugins, tmp_path, capsys):
    _register("noval", 0)
    results = tmp_path / "runs"
    assert main(["run", "--dataset", "noval", "--method", "sl1h", "--profile", "quick",
                 "--seeds", "1", "--set", "cycles=1", "--set", "epochs_per_cycle=1",
                 "--results", str(results), "--executor", "inline", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "noval" in err[0] and "validation split is empty" in err[0]
    assert not any(results.rglob("seed*"))  # nothing trained or written
