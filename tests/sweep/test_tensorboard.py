"""`bench run --tensorboard`: event files beside each finished record holding
the record's training history (train loss and lr per epoch, validation
ACC/ECE/NLL/AUC per cycle end), read back with TensorBoard's own reader; the
flag is output only and never changes a config hash."""
import json
import sys

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from bench.cli.main import main

# 2 cycles x 2 epochs: the validation points sit at epochs 2 and 4
ARGV = ["--method", "sl1h", "--dataset", "digits", "--backbone", "smallcnn", "--seeds", "1",
        "--profile", "quick", "--set", "cycles=2", "--set", "epochs_per_cycle=2",
        "--set", "image_size=12", "--set", "batch_size=64", "--no-progress"]


def scalars(folder) -> dict:
    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)]
            for tag in acc.Tags()["scalars"]}


def test_event_files_hold_the_history_and_leave_the_hash_alone(tmp_path, capsys):
    results = tmp_path / "results"
    assert main(["run", *ARGV, "--results", str(results)]) == 0
    (record,) = results.glob("digits/smallcnn/sl1h/*/seed0")
    assert not (record / "tensorboard").exists()  # only when asked
    # asked later: the finished run is not retrained (same hash), its files are written
    assert main(["run", *ARGV, "--results", str(results), "--tensorboard"]) == 0
    out = capsys.readouterr().out
    assert "0 trained, 1 already done, 0 failed" in out and "tensorboard" in out
    assert list(results.glob("digits/smallcnn/sl1h/*/seed0")) == [record]
    events = list((record / "tensorboard").glob("events.out.tfevents.*"))
    assert len(events) == 1
    history = json.loads((record / "metrics.json").read_text())["history"]
    got = scalars(record / "tensorboard")
    assert set(got) == {"train/loss", "train/lr", "val/acc", "val/ece", "val/nll", "val/auc"}
    assert [s for s, _ in got["train/loss"]] == [1, 2, 3, 4]
    assert [v for _, v in got["train/loss"]] == pytest.approx(
        [e["train_loss"] for e in history["epochs"]], rel=1e-6)
    assert [v for _, v in got["train/lr"]] == pytest.approx(
        [e["lr"] for e in history["epochs"]], rel=1e-6)
    for m in ("acc", "ece", "nll", "auc"):
        assert [s for s, _ in got[f"val/{m}"]] == [2, 4]
        assert [v for _, v in got[f"val/{m}"]] == pytest.approx(
            [c[f"val_{m}"] for c in history["cycles"]], rel=1e-6)
    # a third time: rewritten whole, never a second copy of every curve
    assert main(["run", *ARGV, "--results", str(results), "--tensorboard"]) == 0
    assert len(list((record / "tensorboard").glob("events.out.tfevents.*"))) == 1
    assert [s for s, _ in scalars(record / "tensorboard")["train/loss"]] == [1, 2, 3, 4]
    assert main(["check", "--results", str(results)]) == 0  # the record is still intact


def test_without_the_tensorboard_package_it_is_one_line_before_anything_runs(
        tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # as if not installed
    assert main(["run", *ARGV, "--results", str(tmp_path / "r"), "--tensorboard"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("bench: error: --tensorboard needs the tensorboard package")
    assert "\n" not in err and not (tmp_path / "r").exists()
