"""Checks through the CLI: value ranges checked when the grid is
built, unwritable output folders, the --seeds syntax of run and report, and
what `bench list` tells a new user."""
from __future__ import annotations

import dataclasses
import typing

import pytest

from bench.cli.main import main
from bench.core.config import TrainConfig
from bench.core.settings import Spec, specs
from bench.methods import METHODS, method_params

QUICK = ["--profile", "quick", "--set", "cycles=1", "--set", "epochs_per_cycle=1",
         "--no-progress"]


def one_line(capsys, argv, code=2) -> str:
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


# ------------------------------------------------------ point 5: value ranges --
RANGE_CASES = [
    (["--set", "lr=-1"], "--set lr=-1.0: must be > 0"),
    (["--set", "lr=0"], "--set lr=0.0: must be > 0"),
    (["--set", "batch_size=0"], "--set batch_size=0: must be >= 2"),
    (["--set", "batch_size=1"], "--set batch_size=1: must be >= 2"),
    (["--set", "cycles=0"], "--set cycles=0: must be >= 1"),
    (["--set", "epochs_per_cycle=0"], "--set epochs_per_cycle=0: must be >= 1"),
    (["--set", "eval_batch_size=0"], "--set eval_batch_size=0: must be >= 1"),
    (["--set", "momentum=1"], "--set momentum=1.0: must be >= 0 and < 1"),
    (["--set", "image_size=-4"], "--set image_size=-4: must be >= 0"),
    (["--set", "image_size=2"], "backbone 'smallcnn' needs 8 px here; use --set image_size=8"),
    (["--method", "ls", "--set", "epsilon=2"], "--set epsilon=2.0: must be >= 0 and <= 1"),
    (["--method", "4hml", "--set", "heads=0"], "--set heads=0: must be >= 1"),
    # precision=bf16 sets both: an explicit false was silently overwritten
    (["--set", "precision=bf16", "--set", "bf16=false"],
     "--set precision=bf16 with bf16=false: choose one (precision=bf16 sets bf16=true)"),
    (["--set", "channels_last=no", "--set", "precision=bf16"],
     "--set precision=bf16 with channels_last=false: choose one"),
]


@pytest.mark.parametrize("argv, message", RANGE_CASES)
def test_point5_out_of_range_set_values_fail_before_anything_is_written(
        argv, message, capsys, tmp_path):
    for extra in ([], ["--dry-run"]):
        err = one_line(capsys, ["run", "--results", str(tmp_path / "r"), *QUICK, *argv, *extra])
        assert message in err
        assert not (tmp_path / "r").exists()


def test_a_bad_lr_is_one_line_exit_2_naming_value_and_range_and_writes_nothing(
        capsys, tmp_path):
    err = one_line(capsys, ["run", "--results", str(tmp_path / "r"), *QUICK, "--set", "lr=-0.5",
                            "--executor", "inline"])
    assert err == "bench: error: --set lr=-0.5: must be > 0 (SGD learning rate (peak of each cosine " \
                  "cycle))"
    assert list(tmp_path.iterdir()) == []


def test_the_lr_range_is_checked_once_from_the_command_line_to_the_optimiser(
        capsys, tmp_path, monkeypatch, one_thread):
    """One check of the value given, where nothing is written yet (the plan's
    apply_overrides); the training loop takes the config as planned."""
    lr, checked = 0.0123, []
    spec, ok = specs(TrainConfig)["lr"], Spec.ok
    monkeypatch.setattr(Spec, "ok", lambda self, value: (
        checked.append(value) if self is spec and value == lr else None) or ok(self, value))
    tiny = ["--dataset", "digits", "--backbone", "smallcnn", "--seeds", "1", "--set",
            "image_size=12", "--set", "batch_size=64", "--data-opt", "train_per_class=10"]
    assert main(["run", "--results", str(tmp_path / "r"), *QUICK, *tiny, "--set", f"lr={lr}",
                 "--executor", "inline"]) == 0, capsys.readouterr().err
    (record,) = (tmp_path / "r").glob("digits/smallcnn/sl1h/*/seed0/metrics.json")
    assert checked == [lr]


def numeric_fields(obj):
    hints = typing.get_type_hints(type(obj))
    return [f.name for f in dataclasses.fields(obj) if hints[f.name] in (int, float)]


@pytest.mark.parametrize("name", ["train", *METHODS.names()])
def test_point5_every_numeric_field_declares_a_range_and_meaning(name):
    obj = TrainConfig() if name == "train" else method_params(name)
    table = specs(obj)
    for field in numeric_fields(obj):
        spec = table[field]
        assert spec.range is not None and spec.help, field
        assert spec.ok(getattr(obj, field)), f"default {field} outside its own range"
    assert all(spec.help for spec in table.values())


def test_point5_range_edges_by_hand():
    rng = specs(TrainConfig)["momentum"].range  # [0, 1)
    assert [rng.ok(v) for v in (-0.1, 0.0, 0.9, 1.0)] == [False, True, True, False]
    rng = specs(TrainConfig)["lr"].range  # (0, inf)
    assert [rng.ok(v) for v in (0.0, 1e-9, 1e9)] == [False, True, True]


# ------------------------------------------------- point 6: output folders --
@pytest.mark.parametrize("command", ["run", "dry-run", "report"])
def test_point6_results_or_out_is_a_file(tmp_path, capsys, command):
    plain = tmp_path / "plain.txt"
    plain.write_text("not a folder")
    if command == "report":
        argv = ["report", "--results", str(tmp_path), "--out", str(plain / "sub")]
        flag = "--out"
    else:
        argv = ["run", "--results", str(plain), *QUICK] + (["--dry-run"] if command == "dry-run"
                                                            else [])
        flag = "--results"
    err = one_line(capsys, argv)
    assert err.startswith(f"bench: error: {flag} {plain}") and "not a folder" in err
    assert plain.read_text() == "not a folder"


def test_point6_unwritable_results(tmp_path, capsys, monkeypatch):
    import os

    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    # the tests run as root, for whom chmod does not forbid writing: simulate it
    monkeypatch.setattr(os, "access", lambda p, mode, **kw:
                        False if os.path.samefile(p, locked) else real(p, mode, **kw))
    err = one_line(capsys, ["run", "--results", str(locked / "results"), *QUICK])
    assert f"--results {locked / 'results'}: cannot be created: {locked} is not writable" in err
    assert list(locked.iterdir()) == []


# ------------------------------------------------ point 7: discoverability --
def test_point7_list_names_derived_rows_and_set_keys(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "dens" in out and "D-Ens" in out and "+ts" in out and "bench list --keys" in out
    assert main(["list", "--keys"]) == 0
    out = capsys.readouterr().out
    for line in ("lr  ", "batch_size", "epsilon", "heads"):
        assert line in out
    lr_row = next(row for row in out.splitlines() if row.startswith("lr "))
    assert "float" in lr_row and "0.01" in lr_row and "> 0" in lr_row


@pytest.mark.parametrize("seeds, message", [
    ("1000000", "--seeds 1000000: seeds must be below 1000"),
    ("0-5000", "--seeds 0-5000: seeds must be below 1000"),
    ("x", "--seeds x: expected N"),
    ("0", "--seeds 0: need at least one seed"),
])
@pytest.mark.parametrize("command", ["run", "report"])
def test_point7_seeds_same_syntax_and_errors_in_run_and_report(
        command, seeds, message, tmp_path, capsys):
    argv = ["run", "--results", str(tmp_path), *QUICK, "--dry-run"] if command == "run" else \
        ["report", "--results", str(tmp_path), "--out", str(tmp_path / "out")]
    assert message in one_line(capsys, argv + ["--seeds", seeds])


@pytest.mark.parametrize("seeds, found", [("2", "0,1"), ("1-2", "1,2"), ("0,2", "0,2")])
def test_point7_report_seeds_takes_run_syntax(seeds, found, tmp_path, capsys):
    import csv

    from report_records import write_known

    write_known(tmp_path / "results")
    out = tmp_path / "out"
    assert main(["report", "--results", str(tmp_path / "results"), "--out", str(out),
                 "--seeds", seeds, "--no-plots", "--no-ts", "--no-progress",
                 "--backbone", "resnet50"]) == 0
    with open(out / "runs.csv") as fh:
        seen = sorted({row["seed"] for row in csv.DictReader(fh)})
    assert ",".join(seen) == found


def test_point7_huge_dry_run_is_summarised(tmp_path, capsys):
    assert main(["run", "--results", str(tmp_path), *QUICK, "--seeds", "999", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) < 250
    assert "799 more runs not listed" in out and "999 runs: 999 missing" in out


# ------------------------------------------------------------- point 8 --
def test_point8_junk_weights_fail_at_dry_run(tmp_path, capsys):
    junk = tmp_path / "weights.pt"
    junk.write_bytes(b"not a checkpoint at all")
    err = one_line(capsys, ["run", "--results", str(tmp_path / "r"), *QUICK, "--weights",
                            str(junk), "--dry-run"])
    assert "cannot read weights" in err and str(junk) in err
    assert not (tmp_path / "r").exists()


def test_point8_no_progress_bars_without_a_terminal(tmp_path, capsys):
    argv = ["run", "--results", str(tmp_path), "--profile", "quick", "--set", "cycles=1",
            "--set", "epochs_per_cycle=1", "--set", "image_size=8", "--set", "batch_size=64",
            "--seeds", "1"]  # 16 steps: any bar would show in the first
    assert main(argv) == 0  # no --no-progress: stderr (captured) is not a terminal
    out, err = capsys.readouterr()
    assert "\r" not in err and "sweep:" not in err and "\r" not in out


@pytest.mark.parametrize("seeds, caution", [("2", True), ("3", False)])
def test_point8_significance_on_few_seeds_prints_a_caution(seeds, caution, tmp_path, capsys):
    from report_records import write_known

    write_known(tmp_path / "results")
    assert main(["report", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "o"),
                 "--seeds", seeds, "--significance", "--no-plots", "--no-ts", "--no-progress",
                 "--backbone", "resnet50"]) == 0
    out = capsys.readouterr().out
    assert ("caution: some paired tests compare only 2 seed(s)" in out) is caution
    assert ("caution" in (tmp_path / "o" / "report.md").read_text()) is caution


def test_point8_provenance_records_threads_and_versions():
    import torch

    from bench.core.provenance import provenance

    dev = provenance("cpu")["device"]
    assert dev["threads"] == torch.get_num_threads()
    assert dev["torch"] == torch.__version__ and "cudnn" in dev and dev["cpu"]


def _restamp(path, threads: int) -> None:
    """Rewrite a record (checksums stay valid) as if made with `threads` torch threads."""
    from bench.core import store

    cfg = store.read_json(path / "config.json")
    metrics = {k: v for k, v in store.read_json(path / "metrics.json").items()
               if k not in ("status", "files")}
    cfg["provenance"] = {"device": {"threads": threads, "cpu": "x", "torch": "2", "cudnn": None}}
    store.write_record(path, cfg, metrics, store.load_predictions(path))


@pytest.mark.parametrize("mixed", [True, False])
def test_point8_report_notes_a_table_mixing_thread_counts(mixed, tmp_path, capsys):
    from bench.core import store
    from report_records import write_known

    root = write_known(tmp_path / "results")
    for i, key in enumerate(store.iter_records(root)):
        _restamp(key.path(root), 1 + (mixed and i == 0))
    assert main(["report", "--results", str(root), "--out", str(tmp_path / "o"), "--no-plots",
                 "--no-ts", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert ("made with different torch threads 1, 2" in out) is mixed
