"""Every README claim of "one line": each bad input named in the README's
paragraph "Every bad input stops with one line ..." goes through the CLI and
must give exit status 2, exactly one line on stderr, no traceback, and leave
the --results folder unwritten."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from bench.cli.main import main

# The dataset tests' writers of small files in each real on-disk format.
_spec = importlib.util.spec_from_file_location(
    "dataset_writers", Path(__file__).parents[1] / "datasets" / "test_datasets.py")
_writers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_writers)
write_chaoyang, write_jpeg, write_npz = _writers.write_chaoyang, _writers.write_jpeg, \
    _writers.write_npz

RUN = ["run", "--profile", "quick", "--set", "cycles=1", "--set", "epochs_per_cycle=1",
       "--no-progress"]


def _truncated_npz(tmp):
    write_npz(tmp / "pathmnist.npz")
    (tmp / "pathmnist.npz").write_bytes((tmp / "pathmnist.npz").read_bytes()[:4000])
    return ["--dataset", "pathmnist", "--data-root", str(tmp), "--backbone", "smallcnn"]


def _corrupt_image(tmp):
    write_chaoyang(tmp)
    bad = tmp / "train" / "0-0.JPG"
    write_jpeg(bad, 0, size=64)
    bad.write_bytes(bad.read_bytes()[:300])
    return ["--dataset", "chaoyang", "--data-root", str(tmp), "--backbone", "smallcnn",
            "--set", "image_size=16"]


def _missing_image(tmp):
    write_chaoyang(tmp)
    (tmp / "test" / "1-0.JPG").unlink()
    return ["--dataset", "chaoyang", "--data-root", str(tmp), "--backbone", "smallcnn",
            "--set", "image_size=16"]


def _bad_label(tmp):
    arrays = write_npz(tmp / "pathmnist.npz")
    arrays["test_labels"][0] = 9
    np.savez(tmp / "pathmnist.npz", **arrays)
    return ["--dataset", "pathmnist", "--data-root", str(tmp), "--backbone", "smallcnn"]


def _results_is_a_file(tmp):
    (tmp / "file").write_text("x")
    return ["--results", str(tmp / "file")]


def _junk_weights(tmp):
    (tmp / "w.pt").write_bytes(b"junk")
    return ["--weights", str(tmp / "w.pt")]


# README claim -> (argv builder, text the one line must contain)
CLAIMS = {
    "unknown method": (lambda t: ["--method", "nope"], "unknown method 'nope'"),
    "unknown dataset": (lambda t: ["--dataset", "nope"], "unknown dataset 'nope'"),
    "unknown backbone": (lambda t: ["--backbone", "nope"], "unknown backbone 'nope'"),
    "unknown profile": (lambda t: ["--profile", "nope"], "unknown profile 'nope'"),
    "unknown --set key": (lambda t: ["--set", "nope=1"], "unknown --set key 'nope'"),
    "wrong type": (lambda t: ["--set", "lr=fast"], "--set lr=fast: expected float"),
    "outside its range": (lambda t: ["--set", "batch_size=0"], "must be >= 2"),
    "bad --seeds": (lambda t: ["--seeds", "0-99999"], "seeds must be below 1000"),
    "missing image": (_missing_image, "1-0.JPG"),
    "corrupt image": (_corrupt_image, "0-0.JPG"),
    "missing .npz": (lambda t: ["--dataset", "pathmnist", "--data-root", str(t)],
                     "--download"),
    "truncated .npz": (_truncated_npz, "--download"),
    "label outside the classes": (_bad_label, "test_labels row 1: label 9"),
    "invalid --results": (_results_is_a_file, "not a folder"),
    "unreadable --weights": (_junk_weights, "cannot read weights"),
}


@pytest.mark.parametrize("claim", CLAIMS)
@pytest.mark.parametrize("dry", [False, True], ids=["run", "dry-run"])
def test_readme_one_line_claim(claim, dry, tmp_path, capsys):
    build, text = CLAIMS[claim]
    results = tmp_path / "results"
    argv = [*RUN, "--results", str(results), *build(tmp_path)] + (["--dry-run"] if dry else [])
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert text in err, err
    assert not results.exists() or not any(results.iterdir())
