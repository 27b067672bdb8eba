"""Bad data refused by `bench data check`, `bench run` and `--dry-run` before
anything trains (points 3, 4, 5 and 12 of the new-user review): labels that
are not integers among integers, empty labels, header-only CSVs, one class, a
damaged image cache, a data root or cache folder that is a file, an npz with
more images than labels, Excel's byte-order mark, one CSV for two splits."""
from __future__ import annotations

import csv

import numpy as np
import pytest

from bench.cli.main import main
from test_bad_data import COMMANDS, one_line_error
from test_datasets import write_jpeg, write_npz


def write_csv(tmp_path, split: str, labels: list[str], encoding: str = "utf-8") -> list[str]:
    rows = [("image", "label")]
    for i, lab in enumerate(labels):
        write_jpeg(tmp_path / "img" / f"{split}{i}.png", i % 4)
        rows.append((f"img/{split}{i}.png", lab))
    with open(tmp_path / f"{split}.csv", "w", newline="", encoding=encoding) as fh:
        csv.writer(fh).writerows(rows)
    return ["--data-opt", f"{split}={tmp_path / split}.csv"]


def csv_opts(tmp_path, test_labels: list[str], train_labels=None) -> list[str]:
    train = train_labels if train_labels is not None else ["0", "1", "2", "3"] * 3
    return write_csv(tmp_path, "train", train) + write_csv(tmp_path, "test", test_labels)


# ------------------------------------------- point 3: labels among integers --
@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("label", ["dog", "1.5"])
def test_point3_non_integer_label_among_integers(tmp_path, capsys, command, label):
    opts = csv_opts(tmp_path, ["0", "1", label, "3", "0"])
    err = one_line_error(capsys, COMMANDS[command]("csv", tmp_path, tmp_path, *opts))
    assert f"{tmp_path / 'test.csv'} row 3: label '{label}' is not an integer" in err
    assert "classes=" in err
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_point3_empty_label_is_named(tmp_path, capsys, command):
    opts = csv_opts(tmp_path, ["0", "1", "2", "", "0"])
    err = one_line_error(capsys, COMMANDS[command]("csv", tmp_path, tmp_path, *opts))
    assert f"{tmp_path / 'test.csv'} row 4: empty label" in err
    assert not (tmp_path / "results").exists()


def test_point3_class_names_alone_are_still_classes(tmp_path):
    from bench.datasets import load_dataset

    opts = csv_opts(tmp_path, ["cat", "dog", "eel"], ["cat", "dog", "eel"] * 4)
    kw = dict(o.split("=", 1) for o in opts[1::2])
    assert load_dataset("csv", tmp_path, image_size=8, progress=False,
                        **kw).classes == ["cat", "dog", "eel"]


# ------------------------------------- point 4: one class, header-only CSV --
@pytest.mark.parametrize("command", COMMANDS)
def test_point4_folder_with_one_class_is_refused(tmp_path, capsys, command):
    for i in range(6):
        write_jpeg(tmp_path / "data" / "only" / f"{i}.png", 0)
    err = one_line_error(capsys, COMMANDS[command]("folder", tmp_path / "data", tmp_path))
    assert "only one class (only)" in err and "at least 2 classes" in err
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_point4_header_only_csv_is_refused(tmp_path, capsys, command):
    opts = csv_opts(tmp_path, ["0", "1", "2", "3"], train_labels=[])
    err = one_line_error(capsys, COMMANDS[command]("csv", tmp_path, tmp_path, *opts))
    assert f"{tmp_path / 'train.csv'}: no rows below the header" in err
    assert not (tmp_path / "results").exists()


# ------------------------------------------- point 5: a damaged image cache --
def _folder(tmp_path):
    for k in "ab":
        for i in range(5):
            write_jpeg(tmp_path / "data" / k / f"{i}.png", "ab".index(k))
    return tmp_path / "data"


def _truncate_cache(root):
    from bench.sweep.grid import load_bundle

    load_bundle.cache_clear()  # a real user's next command is a new process
    arrays = sorted((root / ".bench-cache").glob("*.npy"))
    assert arrays
    victim = arrays[0]
    victim.write_bytes(victim.read_bytes()[:300])
    return victim


@pytest.mark.parametrize("command", ["check", "run"])
def test_point5_truncated_cache_is_named_set_aside_and_rebuilt(tmp_path, capsys, command):
    from bench.sweep.grid import load_bundle

    root = _folder(tmp_path)
    assert main(COMMANDS["run"]("folder", root, tmp_path / "first")) == 0  # builds the cache
    victim = _truncate_cache(root)
    capsys.readouterr()
    # a dry run writes nothing (issue 35): it names the damage and leaves the file
    assert main(COMMANDS["dry-run"]("folder", root, tmp_path)) == 0
    assert f"image cache {victim} is damaged (truncated: 300 of" in capsys.readouterr().err
    assert victim.stat().st_size == 300
    load_bundle.cache_clear()
    assert main(COMMANDS[command]("folder", root, tmp_path)) == 0
    err = capsys.readouterr().err
    assert f"cache file {victim} was damaged (truncated: 300 of" in err
    (aside,) = victim.parent.glob(f"{victim.name}.damaged-*")  # time-stamped, kept
    assert aside.name in err
    load_bundle.cache_clear()
    assert main(COMMANDS["run"]("folder", root, tmp_path / "again")) == 0  # rebuilt, readable
    from bench.datasets.cache import damage

    assert victim.exists() and damage(victim) is None
    assert "damaged" not in capsys.readouterr().err


def test_point5_truncated_cache_does_not_stop_a_run(tmp_path, capsys):
    root = _folder(tmp_path)
    assert main(COMMANDS["run"]("folder", root, tmp_path / "first")) == 0  # builds the cache
    victim = _truncate_cache(root)
    assert main(COMMANDS["run"]("folder", root, tmp_path)) == 0
    assert "was damaged" in capsys.readouterr().err
    from bench.datasets.cache import damage

    assert victim.exists() and damage(victim) is None  # rebuilt


@pytest.mark.parametrize("command", COMMANDS)
def test_point5_data_root_that_is_a_file(tmp_path, capsys, command):
    (tmp_path / "afile").write_text("x")
    argv = COMMANDS[command]("pathmnist", tmp_path / "afile", tmp_path)
    err = one_line_error(capsys, argv + (["--download"] if command != "check" else []))
    assert f"--data-root {tmp_path / 'afile'} is a file" in err


@pytest.mark.parametrize("command", COMMANDS)
def test_point5_cache_dir_that_is_a_file(tmp_path, capsys, command, monkeypatch):
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "afile"))
    err = one_line_error(capsys, COMMANDS[command]("folder", _folder(tmp_path), tmp_path))
    assert f"image cache folder {tmp_path / 'afile'} is a file" in err
    assert not (tmp_path / "results").exists()


# ------------------------------------------------------ point 12: smaller --
@pytest.mark.parametrize("command", COMMANDS)
def test_point12_npz_with_more_images_than_labels(tmp_path, capsys, command):
    arrays = write_npz(tmp_path / "pathmnist.npz")
    arrays["val_images"] = np.concatenate([arrays["val_images"], arrays["val_images"][:3]])
    np.savez(tmp_path / "pathmnist.npz", **arrays)
    err = one_line_error(capsys, COMMANDS[command]("pathmnist", tmp_path, tmp_path))
    assert f"{tmp_path / 'pathmnist.npz'}: the val split has 21 images" in err
    assert "18 labels" in err


def test_point12_csv_with_utf8_bom_is_read(tmp_path, capsys):
    opts = write_csv(tmp_path, "train", ["0", "1", "2", "3"] * 3, encoding="utf-8-sig")
    opts += write_csv(tmp_path, "test", ["0", "1", "2", "3"], encoding="utf-8-sig")
    assert (tmp_path / "train.csv").read_bytes().startswith(b"\xef\xbb\xbf")
    assert main(COMMANDS["check"]("csv", tmp_path, tmp_path, *opts)) == 0


def test_point12_same_csv_for_train_and_test_warns(tmp_path, capsys):
    opts = write_csv(tmp_path, "train", ["0", "1", "2", "3"] * 3)
    opts += ["--data-opt", f"test={tmp_path / 'train.csv'}"]
    assert main(COMMANDS["check"]("csv", tmp_path, tmp_path, *opts)) == 0
    err = capsys.readouterr().err
    assert "warning: --data-opt train= and test= are the same file" in err
