"""Damaged dataset files and wrong labels give one
line naming the file (and row, label) in `bench data check`, `bench run` and
`--dry-run`, exit status 2, nothing written."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from bench.cli.main import main
from test_datasets import write_chaoyang, write_jpeg, write_npz

COMMANDS = {
    "check": lambda ds, root, tmp, *extra: ["data", "check", "--dataset", ds, "--data-root",
                                             str(root), "--no-progress", *extra],
    "run": lambda ds, root, tmp, *extra: ["run", "--dataset", ds, "--data-root", str(root),
                                           "--backbone", "smallcnn", "--seeds", "1",
                                           "--results", str(tmp / "results"), "--no-progress",
                                           "--profile", "quick", "--set", "cycles=1",
                                           "--set", "epochs_per_cycle=1", *extra],
}
COMMANDS["dry-run"] = lambda *a: COMMANDS["run"](*a) + ["--dry-run"]


def one_line_error(capsys, argv) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("command", COMMANDS)
def test_point2_truncated_pathmnist_npz_is_one_line(tmp_path, capsys, command):
    npz = tmp_path / "pathmnist.npz"
    write_npz(npz)
    npz.write_bytes(npz.read_bytes()[:5000])  # a partial download
    err = one_line_error(capsys, COMMANDS[command]("pathmnist", tmp_path, tmp_path))
    assert str(npz) in err and "--download" in err
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_point3_npz_label_out_of_range(tmp_path, capsys, command):
    arrays = write_npz(tmp_path / "pathmnist.npz")
    arrays["val_labels"][4] = 12  # PathMNIST has 9 classes
    np.savez(tmp_path / "pathmnist.npz", **arrays)
    err = one_line_error(capsys, COMMANDS[command]("pathmnist", tmp_path, tmp_path))
    assert "pathmnist.npz val_labels row 5: label 12" in err and "0..8" in err


@pytest.mark.parametrize("command", COMMANDS)
def test_point3_chaoyang_json_label_out_of_range(tmp_path, capsys, command):
    write_chaoyang(tmp_path)
    entries = json.loads((tmp_path / "test.json").read_text())
    entries[2]["label"] = 9
    (tmp_path / "test.json").write_text(json.dumps(entries))
    err = one_line_error(capsys, COMMANDS[command]("chaoyang", tmp_path, tmp_path))
    assert f"{tmp_path / 'test.json'} row 3: label 9" in err and "0..3" in err


def write_csvs(tmp_path, labels: dict) -> list[str]:
    opts = []
    for split, labs in labels.items():
        rows = [("image", "label")]
        for i, lab in enumerate(labs):
            write_jpeg(tmp_path / "img" / f"{split}{i}.png", int(lab) % 4)
            rows.append((f"img/{split}{i}.png", str(lab)))
        with open(tmp_path / f"{split}.csv", "w", newline="") as fh:
            csv.writer(fh).writerows(rows)
        opts += ["--data-opt", f"{split}={tmp_path / split}.csv"]
    return opts


@pytest.mark.parametrize("command", COMMANDS)
def test_point3_csv_label_gap_is_an_error(tmp_path, capsys, command):
    opts = write_csvs(tmp_path, {"train": [0, 1, 2, 3] * 3, "test": [0, 1, 2, 3, 7, 0]})
    err = one_line_error(capsys, COMMANDS[command]("csv", tmp_path, tmp_path, *opts))
    assert f"{tmp_path / 'test.csv'} row 5: label 7" in err and "4, 5, 6" in err
    assert "classes=" in err


@pytest.mark.parametrize("command", COMMANDS)
def test_point3_csv_label_outside_declared_classes(tmp_path, capsys, command):
    opts = write_csvs(tmp_path, {"train": [0, 1, 2, 3] * 3, "test": [0, 1, 2, 3, 4, 0]})
    argv = COMMANDS[command]("csv", tmp_path, tmp_path, *opts, "--data-opt", "classes=4")
    err = one_line_error(capsys, argv)
    assert f"{tmp_path / 'test.csv'} row 5: label 4" in err and "0..3" in err


def test_point3_declared_classes_keep_an_empty_class(tmp_path, capsys):
    from bench.datasets import load_dataset

    opts = write_csvs(tmp_path, {"train": [0, 1, 2] * 4, "test": [0, 1, 2, 0]})
    kw = dict(o.split("=", 1) for o in opts[1::2])
    bundle = load_dataset("csv", tmp_path, image_size=8, progress=False, classes="4", **kw)
    assert bundle.classes == ["0", "1", "2", "3"]
    assert load_dataset("csv", tmp_path, image_size=8, progress=False, **kw).num_classes == 3
