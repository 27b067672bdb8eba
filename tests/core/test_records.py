"""Run records: atomic writes, skip on rerun, survive SIGKILL."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from bench.core import store
from bench.cli.main import main

TINY = ["--profile", "quick", "--set", "cycles=1", "--set", "image_size=16", "--no-progress"]
# one epoch of 16 steps (batch 64): what these tests check is the record, not the training
ONE_EPOCH = [*TINY, "--set", "epochs_per_cycle=1", "--set", "batch_size=64"]


def record_paths(root: Path) -> list[Path]:
    return [key.path(root) for key in store.iter_records(root)]


def seed_dirs(root: Path) -> dict[str, Path]:
    return {p.name: p for p in root.glob("digits/smallcnn/sl1h/*/seed*")}


def test_record_layout_and_contents(tmp_path, capsys):
    assert main(["run", "--seeds", "1", "--results", str(tmp_path), *ONE_EPOCH]) == 0
    (path,) = seed_dirs(tmp_path).values()
    config = json.loads((path / "config.json").read_text())
    metrics = json.loads((path / "metrics.json").read_text())
    assert config["seed"] == 0 and config["method"] == "sl1h" and config["train"]["lr"] == 0.01
    assert path.parent.name == config["config_hash"]
    assert {"commit", "dirty"} <= set(config["provenance"]["git"])
    assert config["provenance"]["versions"]["torch"]
    assert metrics["status"] == "done" and 0 <= metrics["test"]["acc"] <= 1
    assert metrics["best_cycle"] == 1 and metrics["train_seconds"] > 0
    preds = store.load_predictions(path)
    assert preds["test_logits"].shape == (360, 1, 10) and preds["val_labels"].shape == (360,)
    # the stored metrics are those of the stored predictions (independent recomputation)
    from sklearn.metrics import accuracy_score, log_loss

    probs = torch.softmax(torch.from_numpy(preds["test_logits"]), -1).mean(1).numpy()
    assert metrics["test"]["acc"] == pytest.approx(
        accuracy_score(preds["test_labels"], probs.argmax(1)))
    assert metrics["test"]["nll"] == pytest.approx(
        log_loss(preds["test_labels"], probs, labels=range(10)), rel=1e-5)
    out = capsys.readouterr().out
    assert "ACC (x100)" in out and "1 trained, 0 already done" in out


def test_rerun_skips_and_force_retrains(tmp_path, capsys):
    args = ["run", "--seeds", "1", "--results", str(tmp_path), *ONE_EPOCH]
    main(args)
    (path,) = seed_dirs(tmp_path).values()
    first = (path / "metrics.json").stat().st_mtime_ns
    main(args)
    assert (path / "metrics.json").stat().st_mtime_ns == first
    assert "0 trained, 1 already done" in capsys.readouterr().out
    main(args + ["--force"])
    assert (path / "metrics.json").stat().st_mtime_ns != first
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no leftovers


def test_changed_setting_gives_a_new_record(tmp_path):
    base = ["run", "--seeds", "1", "--results", str(tmp_path), *ONE_EPOCH]
    main(base)
    main(base + ["--set", "lr=0.02"])
    assert len(list(tmp_path.glob("digits/smallcnn/sl1h/*/seed0"))) == 2


def test_failed_write_leaves_old_record_intact(tmp_path, monkeypatch):
    path = tmp_path / "rec"
    store.write_record(path, {"a": 1}, {"x": 1}, {"v": np.zeros(2)})
    real = store.write_json

    def fail_on_metrics(p, obj, **kw):
        if p.name == "metrics.json":
            raise OSError("disk full")
        real(p, obj, **kw)

    monkeypatch.setattr(store, "write_json", fail_on_metrics)
    with pytest.raises(OSError, match="disk full"):
        store.write_record(path, {"a": 2}, {"x": 2}, {"v": np.ones(2)})
    assert json.loads((path / "config.json").read_text()) == {"a": 1}
    assert store.is_complete(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec"]  # temp dir removed


def test_hidden_partial_record_is_not_complete(tmp_path):
    rec = tmp_path / "d" / "b" / "m" / "h" / ".seed0.tmp-1-abc"
    rec.mkdir(parents=True)
    (rec / "metrics.json").write_text('{"status": "done"}')
    assert store.iter_records(tmp_path) == []
    assert not store.is_complete(rec.parent / "seed0")


def test_sigkill_mid_run_then_rerun_trains_only_missing(tmp_path, capsys):
    from bench.sweep import runstate
    from sweeputil import wait_for

    # batch 64: 16 steps an epoch (not 134 at batch 8), 48 a run; the kill is
    # what is tested, not the training
    args = ["run", "--seeds", "3", "--results", str(tmp_path), *TINY, "--set",
            "epochs_per_cycle=3", "--set", "image_size=8", "--set", "batch_size=64"]
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli.main", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    seed0 = wait_for(lambda: seed_dirs(tmp_path).get("seed0"), timeout=600)
    seed1 = seed0.parent / "seed1"
    # seed 1's first heartbeat is written at its first optimiser step (of 48)
    wait_for(lambda: runstate.read_progress(seed1), timeout=600, every=0.01)
    # the sweep and its worker die at once, as in a crash or an OOM kill: killed
    # alone, the sweep left the worker a moment (it polls the sweep's pid) in
    # which seed 1's last steps could finish on an idle machine
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # the worker's lock is then stale
    wait_for(lambda: runstate.live_holder(seed1) is None, timeout=30)
    done = {n for n, p in seed_dirs(tmp_path).items() if store.is_complete(p)}
    assert done == {"seed0"}, "only the finished seed may look complete"
    assert set(seed_dirs(tmp_path)) == {"seed0"}  # nothing half-written under a real name
    # the rerun in this process: the boundary under test is the killed sweep's
    capsys.readouterr()
    assert main(args) == 0
    assert "2 trained, 1 already done" in capsys.readouterr().out
    assert {n for n, p in seed_dirs(tmp_path).items() if store.is_complete(p)} == \
        {"seed0", "seed1", "seed2"}


# ------------------------------------------------------------ damaged records --
def _record(tmp_path, files=True) -> Path:
    path = tmp_path / "d" / "b" / "m" / "h" / "seed0"
    store.write_record(path, {"a": 1}, {"x": 1}, {"v": np.arange(50.0)})
    if not files:  # as written before checksums existed: no files, no digest
        m = json.loads((path / "metrics.json").read_text())
        del m["files"], m["digest"]
        (path / "metrics.json").write_text(json.dumps(m))
        assert store.verify(path) is None  # intact until damaged below
    return path


def test_point1_record_stores_checksums_of_its_files(tmp_path):
    import hashlib

    path = _record(tmp_path)
    sums = json.loads((path / "metrics.json").read_text())["files"]
    for name in ("config.json", "predictions.npz"):
        data = (path / name).read_bytes()
        assert sums[name] == {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    assert store.verify(path) is None


@pytest.mark.parametrize("files", [True, False], ids=["checksummed", "legacy"])
def test_point1_intact_record_verifies_with_or_without_checksums(tmp_path, files):
    assert store.verify(_record(tmp_path, files)) is None


@pytest.mark.parametrize("files", [True, False], ids=["checksummed", "legacy"])
def test_point1_verify_names_the_damage(tmp_path, files):
    path = _record(tmp_path, files)
    npz = path / "predictions.npz"
    data = npz.read_bytes()
    npz.write_bytes(data[: len(data) // 2])
    assert store.verify(path).startswith("predictions.npz: ")
    npz.unlink()
    assert store.verify(path) == "predictions.npz: missing"
    (path / "metrics.json").unlink()
    assert store.verify(path) == "metrics.json: missing"


def test_point1_verify_sees_a_same_size_change(tmp_path):
    path = _record(tmp_path)
    cfg = path / "config.json"
    cfg.write_text(cfg.read_text().replace("1", "2"))
    assert store.verify(path) == "config.json: checksum mismatch"


def test_point1_damaged_record_is_moved_aside_and_retrained(tmp_path, capsys):
    args = ["run", "--seeds", "1", "--results", str(tmp_path), *ONE_EPOCH]
    assert main(args) == 0
    (path,) = seed_dirs(tmp_path).values()
    npz = path / "predictions.npz"
    npz.write_bytes(npz.read_bytes()[:100])
    capsys.readouterr()
    assert main(args + ["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "damaged" in out and "a real run would train 1" in out
    assert npz.stat().st_size == 100  # the dry run changes nothing
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "DAMAGED" in out and "1 trained, 0 already done" in out
    (aside,) = path.parent.glob("seed0.damaged-*")
    assert (aside / "predictions.npz").stat().st_size == 100  # kept, not deleted
    assert store.verify(path) is None and record_paths(tmp_path) == [path]
    assert main(["check", "--results", str(tmp_path)]) == 0
    (path / "config.json").unlink()
    assert main(["check", "--results", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "seed0" in out and "config.json: missing" in out and "1 damaged" in out


def test_point8_ctrl_c_stops_promptly_and_leaves_no_outcome_file(tmp_path):
    from sweeputil import wait_for

    args = [sys.executable, "-m", "bench.cli.main", "run", "--seeds", "2", "--results",
            str(tmp_path), *TINY, "--set", "epochs_per_cycle=40", "--set", "image_size=8"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:  # the first seed is training now (hundreds of steps to go)
        wait_for(lambda: list(tmp_path.rglob("seed0.progress.json")), timeout=600)
        trainer = json.loads(next(tmp_path.rglob("seed0.lock")).read_text())["pid"]
        proc.send_signal(signal.SIGINT)  # the sweep only, as `kill -INT` would
        _, err = proc.communicate(timeout=600)
        wait_for(lambda: not Path(f"/proc/{trainer}").exists(), timeout=600)
    finally:
        proc.kill()
    # "promptly" without a timed assertion (speed varies): the seed in training
    # when Ctrl-C came was stopped, not finished (no record below), and the
    # sweep's exit did not wait for it
    assert proc.returncode == 130 and "Traceback" not in err
    assert err.splitlines()[0].startswith("bench: interrupted")
    assert not list(tmp_path.rglob("*.outcome-*.json"))
    assert store.iter_records(tmp_path) == []


# A process SIGKILLed while it writes a record: stopped inside write_record's
# last file (metrics.json, the completion mark) or just before the rename.
KILLED_WRITER = """
import os, sys, time, pathlib
import numpy as np
from bench.core import store
path, marker, stage = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
def hang():
    marker.touch()
    time.sleep(300)
if stage == "metrics":
    write = store.write_json
    def slow(p, obj, **kw):
        if p.name == "metrics.json":
            p.write_text('{"status": "do')  # half of the completion mark is on disk
            hang()
        write(p, obj, **kw)
    store.write_json = slow
else:
    store._replace_dir = lambda new, target: hang()
store.write_record(path, {"a": 2}, {"x": 2}, {"v": np.arange(1000)})
"""


@pytest.mark.parametrize("stage", ["metrics", "rename"])
@pytest.mark.parametrize("old", [False, True])
def test_sigkill_inside_the_record_write(tmp_path, stage, old):
    from sweeputil import wait_for

    path = tmp_path / "d" / "b" / "m" / "h" / "seed0"
    if old:  # --force over a finished record: the old one must survive the kill
        store.write_record(path, {"a": 1}, {"x": 1}, {"v": np.ones(2)})
    marker = tmp_path / "inside"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path), str(marker), stage])
    try:
        wait_for(marker.exists, timeout=120, every=0.01)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    if old:
        assert store.is_complete(path) and store.read_json(path / "config.json") == {"a": 1}
        assert record_paths(tmp_path) == [path]
    else:
        assert not path.exists() and not store.is_complete(path)
        assert store.iter_records(tmp_path) == []
    # the dead writer's temporary is hidden; a new write goes through
    assert all(p.name.startswith(".seed0.tmp-") for p in path.parent.iterdir() if p != path)
    store.write_record(path, {"a": 3}, {"x": 3}, {"v": np.zeros(2)})
    assert store.is_complete(path) and store.read_json(path / "config.json") == {"a": 3}
    assert record_paths(tmp_path) == [path]


# ------------------------------------------------------------ record key --
def test_record_key_path_parse_and_label_agree(tmp_path):
    key = store.RecordKey("toy", "timm:resnet18", "2hml", "abc123", 12)
    path = tmp_path / "toy" / "timm+resnet18" / "2hml" / "abc123" / "seed12"  # ':' is '+'
    assert key.path(tmp_path) == path == store.record_dir(tmp_path, "toy", "timm:resnet18",
                                                          "2hml", "abc123", 12)
    assert store.RecordKey.parse(path, tmp_path) == key == store.RecordKey.parse(path)
    assert key.label == "toy/timm+resnet18/2hml/abc123/seed12" == str(path.relative_to(tmp_path))
    assert key.run_id == "abc123/seed12"
    assert store.RecordKey.root_of(path) == tmp_path
    assert store.side_file(path, "lock") == path.parent / "_sweep" / "seed12.lock"
    assert store.state_path(path, "d1") == path.parent / "_sweep" / "seed12.group-d1.state.safetensors"


@pytest.mark.parametrize("bad", ["toy/r/m/h/seed1.damaged-20250101T000000Z", "toy/r/m/h",
                                 "toy/r/m/h/seed01", "toy/r/m/h/x/seed1", "toy/r/m/h/_sweep"])
def test_a_path_that_is_not_a_record_is_one_line(tmp_path, bad):
    with pytest.raises(store.BenchError, match="not a run record folder") as err:
        store.RecordKey.parse(tmp_path / bad, tmp_path)
    assert "\n" not in str(err.value)


def test_a_name_with_a_slash_would_add_a_level():
    with pytest.raises(store.BenchError, match="backbone 'timm/resnet18': not a folder name"):
        store.RecordKey("toy", "timm/resnet18", "sl1h", "h", 0)


def test_iter_records_gives_keys_in_path_order(tmp_path):
    for seed in (10, 2, 0):
        store.write_record(store.record_dir(tmp_path, "toy", "r", "m", "h", seed), {}, {},
                           {"v": np.zeros(1)})
    store.record_dir(tmp_path, "toy", "r", "m", "h", 3).mkdir()  # no metrics.json: not complete
    assert [k.seed for k in store.iter_records(tmp_path)] == [0, 10, 2]  # as paths sort
    assert [k.seed for k in store.iter_seed_dirs(tmp_path)] == [0, 10, 2, 3]
    assert store.datasets_under(tmp_path) == ["toy"] and store.datasets_under(tmp_path / "x") == []
