"""digits' `--data-opt test_per_class=N`: a fixed, seeded subsample of the
test split (the shift demo's small test split, docs/quickstart.md)."""
import json

import numpy as np
import pytest

from bench.cli.main import main
from bench.core.errors import BenchError
from bench.datasets import load_dataset


def test_test_per_class_keeps_n_test_images_of_each_class_fixed_and_seeded():
    clean = load_dataset("digits")
    small = load_dataset("digits", test_per_class="8")  # --data-opt gives strings
    assert np.bincount(small.test.labels, minlength=10).tolist() == [8] * 10
    # a subset of the full test split (matched by position in it), train/val untouched
    full = [img.tobytes() for img in clean.test.images]
    pos = [full.index(img.tobytes()) for img in small.test.images]
    assert len(set(pos)) == 80  # no image twice
    np.testing.assert_array_equal(small.test.labels, clean.test.labels[pos])
    for split in ("train", "val"):
        np.testing.assert_array_equal(small.split(split).images, clean.split(split).images)
    assert small.identity["test_per_class"] == 8 and "test_per_class" not in clean.identity
    again = load_dataset("digits", test_per_class=8)  # fixed: drawn from the split seed
    np.testing.assert_array_equal(again.test.images, small.test.images)
    # nested: the first N of each class in one fixed permutation
    five = load_dataset("digits", test_per_class=5)
    assert {i.tobytes() for i in five.test.images} <= {i.tobytes() for i in small.test.images}
    # not simply the first N of each class in split order
    first = np.concatenate([np.flatnonzero(clean.test.labels == c)[:8] for c in range(10)])
    assert sorted(first.tolist()) != sorted(pos)
    # with train_per_class: both subsets, independent of each other
    both = load_dataset("digits", test_per_class=8, train_per_class=10)
    np.testing.assert_array_equal(both.test.images, small.test.images)
    assert np.bincount(both.train.labels).tolist() == [10] * 10
    assert both.identity["train_per_class"] == 10 and both.identity["test_per_class"] == 8
    # more than a class has: the whole class (35-37 a class in the test split)
    whole = load_dataset("digits", test_per_class=500).test
    assert sorted(i.tobytes() for i in whole.images) == sorted(full)
    assert np.bincount(whole.labels).tolist() == np.bincount(clean.test.labels).tolist()


@pytest.mark.parametrize("bad", ["0", "-3", "2.5", "x", ""])
def test_bad_test_per_class_is_one_line(bad):
    with pytest.raises(BenchError, match=rf"test_per_class={bad}: expected a whole number >= 1 "
                       r"\(e.g. test_per_class=20\)"):
        load_dataset("digits", test_per_class=bad)


def test_bad_test_per_class_on_the_command_line_is_one_line_exit_2(tmp_path, capsys):
    code = main(["run", "--method", "sl1h", "--dataset", "digits", "--seeds", "1",
                 "--data-opt", "test_per_class=0", "--results", str(tmp_path / "r"),
                 "--dry-run"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "test_per_class=0: expected a whole number >= 1" in err
    assert not (tmp_path / "r").exists()


def _hash(tmp_path, capsys, *opts) -> str:
    argv = ["run", "--method", "sl1h", "--dataset", "digits", "--seeds", "1", "--profile",
            "demo", "--results", str(tmp_path / "r"), "--dry-run", "--json"]
    for o in opts:
        argv += ["--data-opt", o]
    assert main(argv) == 0
    out = capsys.readouterr().out
    return json.dumps(sorted(json.loads(line)["config"] for line in out.splitlines()
                             if line.startswith("{")))


def test_test_per_class_is_part_of_the_config_hash(tmp_path, capsys):
    main_demo = _hash(tmp_path, capsys, "train_per_class=10")
    shift_demo = _hash(tmp_path, capsys, "train_per_class=10", "test_per_class=8")
    assert main_demo != shift_demo  # records of the two demos never mix
    assert shift_demo == _hash(tmp_path, capsys, "train_per_class=10", "test_per_class=8")
    assert shift_demo != _hash(tmp_path, capsys, "train_per_class=10", "test_per_class=9")
